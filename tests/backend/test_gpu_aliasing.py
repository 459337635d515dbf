"""A field passed as both an input and an output of one statement (issue 48: icon4py's tracer
advection passes one field as `tracer_now` and `tracer_new`) on the CUDA/HIP targets, whose kernels
run in place (no snapshot, unlike the C++ target): where each kernel reads the field only at the
points it writes and through the same view, the result is GT4Py's (its embedded backend computes
the statement, then writes); anything else is refused in one line, never run into a race. Kernels
run by CPU emulation; the reference is GT4Py's embedded backend on distinct fields."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E

from icoforge.errors import CallArgumentError
from tests.backend.test_constructs import ICOFORGE, _as_field, _field

CellDim, EdgeDim, KDim, C2EDim = dims.CellDim, dims.EdgeDim, dims.KDim, dims.C2EDim
f64 = gtx.float64
NK = 10


@gtx.field_operator
def _update(now: gtx.Field[[CellDim, KDim], f64], flux: gtx.Field[[CellDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return now + 2.0 * flux * now


@gtx.program
def pointwise(now: gtx.Field[[CellDim, KDim], f64], flux: gtx.Field[[CellDim, KDim], f64], new: gtx.Field[[CellDim, KDim], f64]):
    _update(now, flux, out=new)


@gtx.field_operator
def _from_below(now: gtx.Field[[CellDim, KDim], f64], flux: gtx.Field[[CellDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return now + flux * now(KDim - 1)


@gtx.program
def level_shift(now: gtx.Field[[CellDim, KDim], f64], flux: gtx.Field[[CellDim, KDim], f64], new: gtx.Field[[CellDim, KDim], f64]):
    _from_below(now, flux, out=new, domain={CellDim: (0, 5120), KDim: (1, 10)})


def _emulated(program, grid, vendor):
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    ir_ = program_ir(program, grid.connectivities)
    return ir_, load_emulated(gpu_artifact(ir_, vendor, ProgramSchedule(VENDOR_DEFAULTS[vendor])))


def _inputs(grid):
    r = np.random.default_rng(3)
    return _field([CellDim, KDim], (grid.num_cells, NK), r), _field([CellDim, KDim], (grid.num_cells, NK), r)


def _reference(program, grid):
    """GT4Py's embedded backend, `new` a distinct field: the statement's meaning."""
    now, flux = _inputs(grid)
    new = _as_field([CellDim, KDim], now.asnumpy().copy())
    program.with_backend(None)(now, flux, new, offset_provider=grid.connectivities)
    return new.asnumpy()


def test_the_aliasing_pairs_of_the_kernels(tiny_grid):
    """(pairs refused, pairs allowed as one view): the level shift reads another thread's point."""
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.access import kernel_aliasing

    grid = tiny_grid
    refused, same_view = kernel_aliasing(program_ir(pointwise, grid.connectivities))
    assert (refused, set(same_view)) == ((), {("new", "now"), ("new", "flux")})
    assert kernel_aliasing(program_ir(level_shift, grid.connectivities)) == ((("new", "now"),), (("new", "flux"),))


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_one_field_as_input_and_output_read_in_place(tiny_grid, vendor):
    g = tiny_grid
    want = _reference(pointwise, g)
    _, run = _emulated(pointwise, g, vendor)
    now, flux = _inputs(g)
    run(now, flux, now, offset_provider=g.connectivities)
    np.testing.assert_array_equal(now.asnumpy(), want)
    now, flux = _inputs(g)  # the C++ target (a snapshot): the same
    pointwise.with_backend(ICOFORGE)(now, flux, now, offset_provider=g.connectivities)
    np.testing.assert_array_equal(now.asnumpy(), want)


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_one_field_read_at_another_level_is_refused(tiny_grid, vendor):
    """In place, a thread could read a level another thread has written: refused on the GPU
    targets, while the C++ target's snapshot gives GT4Py's result."""
    g = tiny_grid
    want = _reference(level_shift, g)
    _, run = _emulated(level_shift, g, vendor)
    now, flux = _inputs(g)
    before = now.asnumpy().copy()
    with pytest.raises(CallArgumentError, match="field 'new' shares memory with 'now'|field 'now' shares memory with 'new'"):
        run(now, flux, now, offset_provider=g.connectivities)
    np.testing.assert_array_equal(now.asnumpy(), before)  # nothing written
    now, flux = _inputs(g)
    new = _as_field([CellDim, KDim], now.asnumpy().copy())
    run(now, flux, new, offset_provider=g.connectivities)  # distinct fields: GT4Py's result
    np.testing.assert_array_equal(new.asnumpy(), want)
    now, flux = _inputs(g)
    level_shift.with_backend(ICOFORGE)(now, flux, now, offset_provider=g.connectivities)
    np.testing.assert_array_equal(now.asnumpy(), want)


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_one_buffer_through_two_views_is_refused(tiny_grid, vendor):
    """Read at its own points, but `new` is `now` one level up: point (c, k) of `new` is point
    (c, k + 1) of `now`, which another thread reads; refused."""
    g = tiny_grid
    _, run = _emulated(pointwise, g, vendor)
    from gt4py.next import common
    from gt4py.next.embedded.nd_array_field import NumPyArrayField

    buf = np.random.default_rng(4).random((g.num_cells, NK + 1)) + 0.1
    domain = common.domain({CellDim: (0, g.num_cells), KDim: (0, NK)})
    now, new = (NumPyArrayField.from_array(buf[:, s], domain=domain) for s in (slice(0, NK), slice(1, NK + 1)))
    assert np.shares_memory(now.ndarray, new.ndarray) and np.shares_memory(buf, now.ndarray)
    _, flux = _inputs(g)
    with pytest.raises(CallArgumentError, match="through another view"):
        run(now, flux, new, offset_provider=g.connectivities)
