"""Small GT4Py programs whose kernels are of the kinds the icon4py representatives lack: a map
over levels only, a map over points only (neighbour sum), a backward scan, a scan over levels
only, and a neighbour lookup through another table's entries (chained). Used by the schedule
tests (compile on the CPU, results on a GPU)."""

from __future__ import annotations

import gt4py.next as gtx
from gt4py.next import neighbor_sum
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E, E2C

CellDim, EdgeDim, KDim, C2EDim = dims.CellDim, dims.EdgeDim, dims.KDim, dims.C2EDim
f64 = gtx.float64


@gtx.field_operator
def _levels_only(z: gtx.Field[[KDim], f64]) -> gtx.Field[[KDim], f64]:
    return z * 2.0 + z(KDim - 1)


@gtx.program
def levels_only(z: gtx.Field[[KDim], f64], out: gtx.Field[[KDim], f64], nk: gtx.int32):
    _levels_only(z, out=out, domain={KDim: (1, nk)})


@gtx.field_operator
def _points_only(ee: gtx.Field[[EdgeDim], f64], w: gtx.Field[[CellDim, C2EDim], f64]) -> gtx.Field[[CellDim], f64]:
    return neighbor_sum(w * ee(C2E), axis=C2EDim)


@gtx.program
def points_only(ee: gtx.Field[[EdgeDim], f64], w: gtx.Field[[CellDim, C2EDim], f64], out: gtx.Field[[CellDim], f64]):
    _points_only(ee, w, out=out)


@gtx.field_operator
def _chained(c: gtx.Field[[CellDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    x = c(E2C[0]) - 0.5 * c(E2C[1])
    return neighbor_sum(x(C2E), axis=C2EDim) + c


@gtx.program
def chained(c: gtx.Field[[CellDim, KDim], f64], out: gtx.Field[[CellDim, KDim], f64]):
    _chained(c, out=out)


@gtx.scan_operator(axis=KDim, forward=False, init=0.0)
def _bwd(state: f64, a: f64, b: f64) -> f64:
    return state * 0.5 + a * b


@gtx.program
def backward_scan(a: gtx.Field[[EdgeDim, KDim], f64], b: gtx.Field[[EdgeDim, KDim], f64], out: gtx.Field[[EdgeDim, KDim], f64]):
    _bwd(a, b, out=out)


@gtx.scan_operator(axis=KDim, forward=True, init=0.0)
def _cumsum(state: f64, z: f64) -> f64:
    return state * 0.75 + z


@gtx.program
def column_scan(z: gtx.Field[[KDim], f64], out: gtx.Field[[KDim], f64]):
    _cumsum(z, out=out)


KIND_PROGRAMS = {
    "levels_only": levels_only,
    "points_only": points_only,
    "chained": chained,
    "backward_scan": backward_scan,
    "column_scan": column_scan,
}
