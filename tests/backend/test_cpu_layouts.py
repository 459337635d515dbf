"""The C++ target on both field layouts (codegen/cpp.py, runtime/icf_cpu.h): NumPy's C order (levels
contiguous: a column per horizontal point) and GT4Py's CPU allocators (the horizontal contiguous:
levels outside, the horizontal inside, and the temporaries laid out the same way), each serial and
threaded (the OpenMP `if` threshold of 65,536 points), give the same bits as NumPy evaluating the
neighbour sum in the same order. Issue 48: the GT4Py-layout loop was a `collapse(2)` loop that GCC
neither hoisted nor vectorised (R2B3/10 diffusion programs 1.3-5x slower), and the temporaries were
always levels-contiguous, read across the layout of the fields beside them."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import custom_layout_allocators as allocators
from icon4py.model.common import dimension as dims

from icoforge.backend.codegen.cpp import render_program_cpp
from icoforge.backend.runtime.build import build_cpu_module
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.runtime.workflow import CPUArtifact, module_name_for

from tests.backend.test_temporary_poison import neighbour_sum_of_product


def _expected(a: np.ndarray, b: np.ndarray, table: np.ndarray) -> np.ndarray:
    t = a * b
    acc = np.zeros_like(t)
    for j in range(table.shape[1]):  # ((0 + t[n0]) + t[n1]) + ..., as the kernel sums
        acc = acc + t[table[:, j]]
    return acc


@pytest.mark.parametrize("nk", [4, 16])  # 5,120 cells x 4 levels: serial; x 16: threaded
@pytest.mark.parametrize("layout", ["numpy", "gt4py"])
def test_both_layouts_serial_and_threaded_give_numpys_bits(tiny_grid, layout, nk):
    g = tiny_grid
    table = g.connectivities["C2E2CO"]
    pir = program_ir(neighbour_sum_of_product, {"C2E2CO": table}, inline_policy="off")
    assert len(pir.temporaries) == 1  # the product is stored, then read at the neighbours
    name = module_name_for(pir)
    source = render_program_cpp(pir, name)
    assert "collapse(" not in source
    assert "h_inner = icf::horizontal_inner(a.a_)" in source and ", h_inner);" in source
    so, _ = build_cpu_module(source, name)
    run = CPUArtifact(str(so), name, pir.name).load()

    rng = np.random.default_rng(0)
    a_np, b_np = rng.random((g.num_cells, nk)), rng.random((g.num_cells, nk))
    if layout == "gt4py":  # GT4Py's CPU allocator: the horizontal contiguous
        a, b, out = (
            gtx.as_field([dims.CellDim, dims.KDim], x, allocator=allocators.StandardCPUFieldBufferAllocator())
            for x in (a_np, b_np, np.zeros_like(a_np))
        )
        result = out.ndarray
    else:  # bare NumPy arrays, C order: the levels contiguous
        a, b, out = a_np, b_np, np.zeros_like(a_np)
        result = out
    assert (result.strides[0] == 8) == (layout == "gt4py")  # the layout asked for
    run(a, b, out, offset_provider=g.connectivities)
    want = _expected(a_np, b_np, np.asarray(table.ndarray))
    assert np.array_equal(np.asarray(result).view(np.uint64), want.view(np.uint64))
