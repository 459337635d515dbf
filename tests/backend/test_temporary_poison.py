"""The C++ runtime's temporaries start poisoned (runtime/icf_cpu.h, TempBuffer): a kernel that reads
a point of a temporary no kernel wrote gives NaN in its outputs, not a plausible zero. This is
what makes the CPU verification of every program (stored references, verify-all) also a check
that no kernel reads a temporary where it was not written (compute-sanitizer's initcheck, for
temporaries, on the CPU)."""

from __future__ import annotations

import dataclasses

import gt4py.next as gtx
from gt4py.next import neighbor_sum
import numpy as np
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E2CO, C2E2CODim

from icoforge.backend.ir import ir
from icoforge.backend.runtime.build import build_cpu_module
from icoforge.backend.codegen.cpp import render_program_cpp
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.runtime.workflow import CPUArtifact, module_name_for

CK = gtx.Field[gtx.Dims[dims.CellDim, dims.KDim], gtx.float64]


@gtx.field_operator
def _neighbour_sum_of_product(a: CK, b: CK) -> CK:
    t = a * b  # two fields (a one-field producer is recomputed in its reader)
    return neighbor_sum(t(C2E2CO), axis=C2E2CODim)


@gtx.program
def neighbour_sum_of_product(a: CK, b: CK, out: CK):
    _neighbour_sum_of_product(a, b, out=out)


def _run(program: ir.ProgramIR, a, b, out, grid) -> None:
    name = module_name_for(program)
    so, _ = build_cpu_module(render_program_cpp(program, name), name)
    CPUArtifact(str(so), name, program.name).load()(a, b, out, offset_provider=grid.connectivities)


def test_a_temporary_no_kernel_wrote_reads_as_nan(tiny_grid):
    g, nk = tiny_grid, 4
    pir = program_ir(neighbour_sum_of_product, {"C2E2CO": g.connectivities["C2E2CO"]}, inline_policy="off")
    kernels = pir.kernels()
    assert len(pir.temporaries) == 1 and len(kernels) == 2  # the product is stored, then read
    tmp = pir.temporaries[0].name
    consumer = next(k for k in kernels if tmp in k.fields_read())
    rng = np.random.default_rng(0)
    a, b = (gtx.as_field([dims.CellDim, dims.KDim], rng.random((g.num_cells, nk))) for _ in range(2))

    out = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((g.num_cells, nk)))
    _run(pir, a, b, out, g)  # the whole program: finite
    assert np.isfinite(out.asnumpy()).all()

    out = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((g.num_cells, nk)))
    _run(dataclasses.replace(pir, steps=(consumer,)), a, b, out, g)  # the reader alone, in a fresh module
    assert np.isnan(out.asnumpy()).all()
