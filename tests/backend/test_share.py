"""Values computed once (icoforge.backend.passes.share): branches on one condition merged, equal
values named once, and what must stop either; then GT4Py's `where` of a tuple feeding a scan, as
muphys' graupel_run has it, computed once per level and equal to GT4Py's embedded backend."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
from gt4py.next import where
from icon4py.model.common import dimension as dims

from icoforge.backend.ir import ir
from icoforge.backend.passes import share
from tests.backend.test_constructs import _field, _poisoned, assert_same, run_both

CellDim, KDim = dims.CellDim, dims.KDim
f64 = gtx.float64
F = gtx.Field[[CellDim, KDim], f64]

DOM = ir.Domain("Cell", ir.Const(0, "int32"), ir.Const(8, "int32"), ir.Const(0, "int32"), ir.Const(4, "int32"))


def v(name, dtype="float64"):
    return ir.Var(name, dtype)


def load(field):
    return ir.Load(field, (ir.HIndex(), ir.KIndex()), "float64")


def pw(x):
    return ir.Call("power", (x, ir.Const(1.5, "float64")), "float64")


def let(name, value):
    return ir.Let(v(name, value.dtype), value)


def assign(name, value):
    return ir.Let(v(name, value.dtype), value, declared=True)


def kernel(*body, state=()):
    return ir.Kernel("k", DOM, tuple(body), state=state)


def powers(k: ir.Kernel) -> int:
    return sum(isinstance(e, ir.Call) and e.fn == "power" for e in ir.walk_body_exprs(k.body))


COND = let("m", ir.Binary("greater", load("a"), ir.Const(0.5, "float64"), "bool"))


def where_pair():
    """Two `if (m)` blocks, each computing a ** 1.5 for one element of a tuple (the early GTIR's
    `where(mask, f(a), (a, b))`), then a store of both."""
    return (
        COND,
        ir.Declare(v("x")),
        ir.If(v("m", "bool"), (let("p0", pw(load("a"))), assign("x", v("p0"))), (assign("x", load("a")),)),
        let("bb", load("b")),
        ir.Declare(v("y")),
        ir.If(v("m", "bool"), (let("p1", pw(load("a"))), assign("y", ir.Binary("multiplies", v("p1"), v("bb"), "float64"))),
              (assign("y", v("bb")),)),
        ir.Store("out", ir.Binary("plus", v("x"), v("y"), "float64")),
    )  # fmt: skip


def test_two_branches_on_one_condition_merge_and_compute_the_power_once():
    k = kernel(*where_pair())
    assert powers(k) == 2
    out = share.share_kernel(k)
    assert powers(out) == 1
    ifs = [s for s in out.body if isinstance(s, ir.If)]
    assert len(ifs) == 1  # one branch on m
    # `bb` (read by the second branch) moved before the merged If; the store stays last
    names = [getattr(getattr(s, "var", None), "name", None) for s in out.body]
    assert names.index("bb") < out.body.index(ifs[0])
    assert isinstance(out.body[-1], ir.Store)
    # the second branch now reads the first one's power
    assert any(isinstance(s, ir.Let) and s.declared and s.var.name == "y" and v("p0") in s.value.walk() for s in ifs[0].then)


def test_a_store_between_of_what_the_second_branch_loads_stops_the_merge():
    body = list(where_pair())
    body.insert(3, ir.Store("a", ir.Const(0.0, "float64")))  # between the two Ifs: a is written
    out = share.share_kernel(kernel(*body))
    assert sum(isinstance(s, ir.If) for s in out.body) == 2
    assert powers(out) == 2  # the load of `a` after the store is another value


def test_a_variable_assigned_between_stops_the_merge():
    body = list(where_pair())
    # `x` (assigned by the first If) is reassigned between, and the second branch reads it
    body.insert(3, assign("x", ir.Const(2.0, "float64")))
    body[6] = ir.If(v("m", "bool"), (assign("y", ir.Binary("plus", v("x"), v("bb"), "float64")),), (assign("y", v("bb")),))
    out = share.share_kernel(kernel(*body))
    assert sum(isinstance(s, ir.If) for s in out.body) == 2


def test_a_branch_inside_a_branch_on_the_same_condition_keeps_the_side_that_runs():
    inner = ir.If(v("m", "bool"), (assign("x", ir.Const(1.0, "float64")),), (let("q", pw(load("b"))), assign("x", v("q"))))
    k = kernel(COND, ir.Declare(v("x")), ir.If(v("m", "bool"), (inner,), (assign("x", ir.Const(3.0, "float64")),)),
               ir.Store("out", v("x")))  # fmt: skip
    out = share.share_kernel(k)
    (top,) = [s for s in out.body if isinstance(s, ir.If)]
    assert top.then == (assign("x", ir.Const(1.0, "float64")),)  # the power that could never run went
    assert powers(out) == 0


def test_a_kernel_where_only_cheap_arithmetic_would_be_shared_stays_as_lowered():
    # the same value twice in straight-line code: g++ and nvcc share it themselves, and a tuned
    # schedule fingerprinted on the lowered kernel must keep applying
    k = kernel(let("a0", ir.Binary("minus", ir.Const(1.0, "float64"), load("a"), "float64")),
               let("a1", ir.Binary("minus", ir.Const(1.0, "float64"), load("a"), "float64")),
               ir.Store("out", ir.Binary("plus", v("a0"), v("a1"), "float64")))  # fmt: skip
    assert share.share_kernel(k) is k


def test_equal_values_are_shared_only_while_their_inputs_are_unchanged():
    state = (ir.ScanState(v("s"), ir.Const(0.0, "float64")),)
    k = kernel(
        let("a0", ir.Binary("plus", v("s"), load("a"), "float64")),
        let("a1", ir.Binary("plus", v("s"), load("a"), "float64")),  # equal: goes
        ir.Store("out", ir.Binary("plus", v("a0"), v("a1"), "float64")),
        let("a2", ir.Binary("plus", v("s"), load("out"), "float64")),
        ir.Store("out", ir.Const(0.0, "float64")),
        let("a3", ir.Binary("plus", v("s"), load("out"), "float64")),  # out was stored between: stays
        assign("s", v("a3")),
        let("a4", ir.Binary("plus", v("s"), load("a"), "float64")),  # s was assigned between: stays
        ir.Store("r", ir.Binary("plus", v("a2"), v("a4"), "float64")),
        state=state,
    )  # fmt: skip
    body = share._number_values(k.body, share._assigned(k.body) | {"s"})  # the value numbering itself
    lets = [s.var.name for s in body if isinstance(s, ir.Let) and not s.declared]
    assert lets == ["a0", "a2", "a3", "a4"]
    assert body[1] == ir.Store("out", ir.Binary("plus", v("a0"), v("a0"), "float64"))


def test_names_defined_twice_leave_the_kernel_as_it_is():
    k = kernel(COND, ir.If(v("m", "bool"), (let("p", pw(load("a"))), ir.Store("out", v("p"))), ()),
               ir.If(v("m", "bool"), (let("p", pw(load("a"))), ir.Store("r", v("p"))), ()))  # fmt: skip
    assert share.share_kernel(k) is k


# --- end to end: GT4Py's `where` of a tuple, read by a scan (muphys' graupel_run) ---------------


@gtx.field_operator
def _pair(a: F, b: F) -> tuple[F, F]:
    p = a**1.5
    return p + b, p * b


@gtx.scan_operator(axis=KDim, forward=True, init=0.0)
def _walk(state: f64, x: f64, y: f64) -> f64:
    # both branches read x and y: their values are computed once, before the branch on the state
    return state * 0.5 + x - y if state > 1.0 else state + x * y


@gtx.field_operator
def _where_then_scan(a: F, b: F) -> F:
    x, y = where(a > 0.6, _pair(a, b), (a, b))
    return _walk(x, y)


@gtx.program
def where_then_scan(a: F, b: F, out: F, n: gtx.int32):
    _where_then_scan(a, b, out=out, domain={CellDim: (0, n), KDim: (0, 10)})


def test_where_of_a_tuple_feeding_a_scan(tiny_grid):
    from icoforge.backend.runtime.precompile import program_ir

    g, nk = tiny_grid, 10
    prog = program_ir(where_then_scan, g.connectivities)
    (scan,) = [k for k in prog.kernels() if k.is_scan]
    assert powers(scan) == 1, str(scan)  # without the pass: one per tuple element and branch
    pairs = run_both(
        where_then_scan, g,
        lambda r: dict(a=_field([CellDim, KDim], (g.num_cells, nk), r), b=_field([CellDim, KDim], (g.num_cells, nk), r),
                       out=_poisoned([CellDim, KDim], (g.num_cells, nk)), n=gtx.int32(300)),
        ["out"],
    )  # fmt: skip
    (ours, ref), = pairs
    assert_same(ours, ref, rtol=0)
    written = ref[~np.isnan(ref)]
    assert (written > 1.0).any() and (written <= 1.0).any(), "one branch of the scan only: the test checks half"

