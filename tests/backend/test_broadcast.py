"""A scalar broadcast into a field (a program that fills a field with a value): GT4Py's passes
leave `as_fieldop(deref, domain)(value)`, which the lowering once refused at the target field.
Checked against GT4Py's embedded backend on the CPU target and through the CUDA/HIP host plans
(kernels run by CPU emulation)."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import broadcast
from icon4py.model.common import dimension as dims

from icoforge.backend import make_backend

CellDim, EdgeDim, KDim = dims.CellDim, dims.EdgeDim, dims.KDim


@gtx.field_operator
def _fill(value: gtx.float64) -> gtx.Field[[CellDim, KDim], gtx.float64]:
    return broadcast(value, (CellDim, KDim))


@gtx.program
def fill(value: gtx.float64, out: gtx.Field[[CellDim, KDim], gtx.float64]):
    _fill(value, out=out)


@gtx.field_operator
def _fill_int(value: gtx.int32) -> gtx.Field[[EdgeDim], gtx.int32]:
    return broadcast(value, (EdgeDim,))


@gtx.program
def fill_int_part(value: gtx.int32, out: gtx.Field[[EdgeDim], gtx.int32], start: gtx.int32, end: gtx.int32):
    _fill_int(value, out=out, domain={EdgeDim: (start, end)})


def _run(program, backend, args, grid):
    program.with_backend(backend)(*args, offset_provider=grid.connectivities)


def test_fill_a_field_with_a_runtime_scalar(tiny_grid):
    g = tiny_grid
    out = gtx.as_field([CellDim, KDim], np.full((g.num_cells, 10), np.nan))
    _run(fill, make_backend("cpu"), (gtx.float64(2.5), out), g)
    assert (out.asnumpy() == 2.5).all()
    _run(fill, make_backend("cpu"), (gtx.float64(-1.0), out), g)  # a run-time argument, not folded in
    assert (out.asnumpy() == -1.0).all()


def test_fill_part_of_an_int_field_leaves_the_rest(tiny_grid):
    g = tiny_grid
    ours = gtx.as_field([EdgeDim], np.full(g.num_edges, -7, dtype=np.int32))
    ref = gtx.as_field([EdgeDim], np.full(g.num_edges, -7, dtype=np.int32))
    args = (gtx.int32(3), gtx.int32(10), gtx.int32(g.num_edges - 5))
    _run(fill_int_part, make_backend("cpu"), (args[0], ours, *args[1:]), g)
    _run(fill_int_part, None, (args[0], ref, *args[1:]), g)
    np.testing.assert_array_equal(ours.asnumpy(), ref.asnumpy())
    assert (ours.asnumpy()[10:-5] == 3).all() and (ours.asnumpy()[:10] == -7).all()


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_fill_through_the_gpu_host_plan(tiny_grid, vendor):
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    g = tiny_grid
    art = gpu_artifact(program_ir(fill, g.connectivities), vendor, ProgramSchedule(VENDOR_DEFAULTS[vendor]))
    out = gtx.as_field([CellDim, KDim], np.full((g.num_cells, 10), np.nan))
    load_emulated(art)(gtx.float64(4.25), out, offset_provider=g.connectivities)
    assert (out.asnumpy() == 4.25).all()
