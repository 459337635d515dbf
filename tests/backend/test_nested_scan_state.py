"""A scan whose state is a tuple of tuples, carried through `if` statements (issue 48: icon4py's
muphys `graupel_run` carries `IntegrationState`, NamedTuples of NamedTuples, through nested ifs
with statements in their branches). Checked against GT4Py's embedded backend on R2B3, whole
outputs, as tests/backend/test_constructs.py does (its harness)."""

from __future__ import annotations

from typing import NamedTuple

import gt4py.next as gtx
import numpy as np
from icon4py.model.common import dimension as dims

from tests.backend.test_constructs import _field, _poisoned, assert_same, run_both

CellDim, KDim = dims.CellDim, dims.KDim
f64 = gtx.float64


class Inner(NamedTuple):
    x: f64
    p: f64
    on: bool


class State(NamedTuple):
    r: Inner
    t: f64


@gtx.scan_operator(axis=KDim, forward=True, init=State(r=Inner(x=0.0, p=0.0, on=False), t=0.0))
def _nested(prev: State, a: f64, b: f64, use_b: bool) -> State:
    # ifs with statements in both branches, nested, each making the whole nested state
    if (a > 0.5) | prev.r.on:
        if use_b:
            s = prev.r.x + a * b
            r = Inner(x=s, p=prev.r.p * 0.5 + s * s, on=s > 1.0)
        else:
            r = Inner(x=prev.r.x - a, p=prev.r.p, on=False)
        t = prev.t + r.x * r.p
    else:
        r = Inner(x=prev.r.x * 0.5, p=prev.r.p + b, on=prev.r.on)
        t = prev.t - 1.0
    return State(r=r, t=t)


@gtx.field_operator
def _nested_outputs(
    a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64], use_b: bool
) -> tuple[gtx.Field[[CellDim, KDim], f64], gtx.Field[[CellDim, KDim], f64], gtx.Field[[CellDim, KDim], f64]]:
    state = _nested(a, b, use_b)
    return state.r.x, state.r.p, state.t


@gtx.program
def nested_scan(
    a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64], use_b: bool,
    x: gtx.Field[[CellDim, KDim], f64], p: gtx.Field[[CellDim, KDim], f64], t: gtx.Field[[CellDim, KDim], f64],
    n: gtx.int32,
):  # fmt: skip
    # the first n cells only: GT4Py's embedded scan runs a Python call per point
    _nested_outputs(a, b, use_b, out=(x, p, t), domain={CellDim: (0, n), KDim: (0, 10)})


def test_scan_with_a_tuple_of_tuples_as_state(tiny_grid):
    g, nk = tiny_grid, 10
    for use_b in (True, False):
        pairs = run_both(
            nested_scan, g,
            lambda r: dict(a=_field([CellDim, KDim], (g.num_cells, nk), r), b=_field([CellDim, KDim], (g.num_cells, nk), r),
                           use_b=use_b, x=_poisoned([CellDim, KDim], (g.num_cells, nk)),
                           p=_poisoned([CellDim, KDim], (g.num_cells, nk)), t=_poisoned([CellDim, KDim], (g.num_cells, nk)),
                           n=gtx.int32(400)),
            ["x", "p", "t"],
        )  # fmt: skip
        for ours, ref in pairs:
            assert_same(ours, ref)
        assert not np.array_equal(pairs[0][1], pairs[1][1]), "x and p alike: the test would not see a swap"
