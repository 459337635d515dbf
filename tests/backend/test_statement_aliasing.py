"""One GTIR statement lowered to several kernels, called with an output sharing memory with an
input (icon4py calls muphys' graupel_run in place: q_out = q_in, t_out = te). GT4Py's statement
reads its inputs before it writes its outputs, so a later kernel of the statement must not read
what an earlier one wrote: every target copies such inputs once, where they share memory with an
output of the statement, before the statement's first kernel (codegen/cpp.py
`render_statement_snapshot`, the GPU host plans' host_checks._statement_inputs). Found by the muphys granule
(tests/granule/test_greenline_muphys.py): graupel_run's scan kernel wrote qi..qg and t in place,
then the kernel for qv and qc read them, 27 % off gtfn_cpu's tendencies. The reference here is
GT4Py's embedded backend on distinct fields."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from icon4py.model.common import dimension as dims

from icoforge import settings
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.schedule.access import kernel_aliasing, statement_groups, statement_hazards
from tests.backend.test_constructs import ICOFORGE, _field

CellDim, KDim = dims.CellDim, dims.KDim
f64 = gtx.float64
NK = 10

pytestmark = pytest.mark.skipif(not settings.current().early_gtir, reason="the early-GTIR path's kernels (the default)")


@gtx.scan_operator(axis=KDim, forward=True, init=0.0)
def _running_sum(state: f64, x: f64) -> f64:
    return state + x


@gtx.field_operator
def _scan_and_point(a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64]) -> tuple[
    gtx.Field[[CellDim, KDim], f64], gtx.Field[[CellDim, KDim], f64]
]:
    return _running_sum(a * b), 2.0 * a + b


@gtx.program
def scan_and_point(
    a: gtx.Field[[CellDim, KDim], f64],
    b: gtx.Field[[CellDim, KDim], f64],
    o1: gtx.Field[[CellDim, KDim], f64],
    o2: gtx.Field[[CellDim, KDim], f64],
):
    _scan_and_point(a, b, out=(o1, o2))


def _inputs(grid, seed=3):
    rng = np.random.default_rng(seed)
    return _field([CellDim, KDim], (grid.num_cells, NK), rng), _field([CellDim, KDim], (grid.num_cells, NK), rng)


def test_one_statement_is_one_group_of_kernels_and_its_hazards_are_named(tiny_grid):
    program = program_ir(scan_and_point, tiny_grid.connectivities)
    groups = statement_groups(program)
    assert len(groups) == 1, str(program)
    (g,) = groups.values()
    assert len(g.kernels) >= 2
    hazards = statement_hazards(program)
    assert hazards and hazards == g.hazards, str(program)  # a kernel reads a or b after another wrote o1 or o2
    assert all(w in ("o1", "o2") and r in ("a", "b") for w, r in hazards)
    assert set(g.outputs) == {"o1", "o2"} and set(g.copied) == {r for _, r in hazards}
    refused, same_view = kernel_aliasing(program)
    assert not set(hazards) & set(refused) | set(same_view)  # copied, so neither refused nor in place


def test_kernels_in_the_two_branches_of_a_host_conditional_are_no_hazard(tiny_grid):
    """icon4py's integrate_tracer_vertically (called in place, tracer_new = tracer_now, by its
    Strang splitting) is one statement whose two kernels sit in the two branches of `ivadv_tracer
    != 0`: one of them runs, so no kernel reads after the other wrote, and the GPU targets keep
    running it in place (each kernel reads tracer_now only where it writes tracer_new)."""
    from icon4py.model.atmosphere.tracer_advection.stencils.integrate_tracer_vertically import integrate_tracer_vertically

    program = program_ir(integrate_tracer_vertically, tiny_grid.connectivities)
    (g,) = statement_groups(program).values()
    assert len(g.kernels) == 2 and g.hazards == ()
    refused, same_view = kernel_aliasing(program)
    assert ("tracer_new", "tracer_now") in same_view and ("tracer_new", "tracer_now") not in refused


@pytest.mark.parametrize("alias", ["o1=a", "o1=b", "o2=a", "o2=b"])
def test_an_output_sharing_memory_with_an_input_gives_the_statements_result(tiny_grid, alias):
    """Whichever output aliases whichever input, the result is the embedded backend's on distinct
    fields (both outputs: the aliased one is compared through the input's buffer)."""
    out_name, in_name = alias.split("=")
    a, b = _inputs(tiny_grid)
    expected = {"o1": np.cumsum(a.asnumpy() * b.asnumpy(), axis=1), "o2": 2.0 * a.asnumpy() + b.asnumpy()}
    ref = {n: gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, NK), np.nan)) for n in ("o1", "o2")}
    scan_and_point.with_backend(None)(gtx.as_field([CellDim, KDim], a.asnumpy()), gtx.as_field([CellDim, KDim], b.asnumpy()),
                                      ref["o1"], ref["o2"], offset_provider=tiny_grid.connectivities)  # fmt: skip
    for n in ("o1", "o2"):
        np.testing.assert_allclose(ref[n].asnumpy(), expected[n], rtol=1e-14, atol=0)
    fields = {"a": a, "b": b}
    outs = {n: fields[in_name] if n == out_name else _field([CellDim, KDim], (tiny_grid.num_cells, NK), np.random.default_rng(9)) for n in ("o1", "o2")}
    for n in ("o1", "o2"):
        if n != out_name:
            outs[n].asnumpy()[...] = np.nan  # poisoned: must be written
    scan_and_point.with_backend(ICOFORGE)(a, b, outs["o1"], outs["o2"], offset_provider=tiny_grid.connectivities)
    for n in ("o1", "o2"):
        got = outs[n].asnumpy()
        assert not np.isnan(got).any()
        np.testing.assert_array_equal(got, ref[n].asnumpy(), err_msg=f"{n} with {alias}")


def test_distinct_fields_need_no_copy_and_agree(tiny_grid):
    a, b = _inputs(tiny_grid)
    o1 = gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, NK), np.nan))
    o2 = gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, NK), np.nan))
    scan_and_point.with_backend(ICOFORGE)(a, b, o1, o2, offset_provider=tiny_grid.connectivities)
    np.testing.assert_array_equal(o2.asnumpy(), 2.0 * a.asnumpy() + b.asnumpy())
    np.testing.assert_allclose(o1.asnumpy(), np.cumsum(a.asnumpy() * b.asnumpy(), axis=1), rtol=1e-14, atol=0)


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
@pytest.mark.parametrize("alias", ["o1=a", "o1=b", "o2=a", "o2=b"])
def test_the_gpu_targets_copy_what_a_later_kernel_reads(tiny_grid, vendor, alias):
    """Kernels by CPU emulation: whichever output aliases whichever input, the statement's result,
    also on a second call with the same fields (a call that copied is not replayed: its copy was
    that call's); the aliased input's buffer ends as the output, as on the C++ target."""
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    program = program_ir(scan_and_point, tiny_grid.connectivities)
    run = load_emulated(gpu_artifact(program, vendor, ProgramSchedule(VENDOR_DEFAULTS[vendor])))
    out_name, in_name = alias.split("=")
    for call in range(2):
        a, b = _inputs(tiny_grid)
        want = {"o1": np.cumsum(a.asnumpy() * b.asnumpy(), axis=1), "o2": 2.0 * a.asnumpy() + b.asnumpy()}
        fields = {"a": a, "b": b}
        outs = {n: fields[in_name] if n == out_name else gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, NK), np.nan)) for n in ("o1", "o2")}
        run(a, b, outs["o1"], outs["o2"], offset_provider=tiny_grid.connectivities)
        np.testing.assert_array_equal(outs["o2"].asnumpy(), want["o2"], err_msg=f"call {call}")
        np.testing.assert_allclose(outs["o1"].asnumpy(), want["o1"], rtol=1e-14, atol=0, err_msg=f"call {call}")
    o1, o2 = (gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, NK), np.nan)) for _ in range(2))
    run(a, b, o1, o2, offset_provider=tiny_grid.connectivities)  # distinct fields: nothing to copy
    np.testing.assert_array_equal(o2.asnumpy(), 2.0 * a.asnumpy() + b.asnumpy())


def test_a_copy_keeps_the_strides_and_moves_the_pointer_only_where_memory_is_shared():
    """host_checks._statement_inputs on NumPy memory (the emulation's runtime): an input sharing
    memory with an output comes back as a view of a copy (same strides, the pointer at the same
    offset into the copy, the bytes equal), the others as they were; the call is marked copied."""
    import ctypes

    from icoforge.backend.runtime.emulate import EmulatedRuntime
    from icoforge.backend.runtime.host_checks import _statement_inputs

    rt = EmulatedRuntime("p")
    field = gtx.as_field([CellDim, KDim], np.arange(40.0).reshape(4, 10))
    other = gtx.as_field([CellDim, KDim], np.arange(40.0).reshape(4, 10))
    view, _ = rt.field(field, 2, np.float64)
    other_view, _ = rt.field(other, 2, np.float64)
    got = _statement_inputs(rt, "p", (field,), {"x": (field, view), "y": (other, other_view)})
    assert rt.copied and got["y"] == other_view
    assert got["x"][1:] == view[1:] and got["x"][0] != view[0]
    lo, hi = rt.span(field)
    start = int(got["x"][0]) - (int(view[0]) - lo)  # the copy's first byte
    before = ctypes.string_at(lo, hi - lo)
    assert ctypes.string_at(start, hi - lo) == before
    field.ndarray[0, 0] = -1.0  # the copy is the call's own memory
    assert ctypes.string_at(lo, hi - lo) != before and ctypes.string_at(start, hi - lo) == before
    rt2 = EmulatedRuntime("p")
    assert _statement_inputs(rt2, "p", (other,), {"x": (field, view)})["x"] == view and not rt2.copied
