"""Value specifications for program arguments, and their resolution on a concrete grid.

A spec says *how* to get a value (a horizontal zone boundary, "number of levels + 1", a constant,
a random range); `SpecContext.resolve` turns it into the value for one grid, level count and
seed. The per-program choices themselves live in `ranges.py`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import gt4py.next as gtx
import numpy as np

CELL, EDGE, VERTEX = "Cell", "Edge", "Vertex"


@dataclasses.dataclass(frozen=True)
class Const:
    """A fixed value (cast to the parameter's dtype)."""

    value: Any


@dataclasses.dataclass(frozen=True)
class Uniform:
    """Random values in [lo, hi): for a float scalar one draw, for a float field every point."""

    lo: float
    hi: float


@dataclasses.dataclass(frozen=True)
class RandomBool:
    """True or False with equal probability."""


@dataclasses.dataclass(frozen=True)
class ZoneStart:
    """grid.start_index(h_grid.domain(dim)(Zone[zone])), e.g. ZoneStart(CELL, 'NUDGING').

    `or_else`: the zone to use instead where `zone` is empty on this grid -- for programs icon4py
    runs only on the lateral boundary of limited-area grids or on halos, so that they still have
    work on a global single-domain grid.
    """

    dim: str
    zone: str
    or_else: str | None = None


@dataclasses.dataclass(frozen=True)
class ZoneEnd:
    """grid.end_index(h_grid.domain(dim)(Zone[zone])), e.g. ZoneEnd(EDGE, 'LOCAL'); `or_else` as
    for ZoneStart."""

    dim: str
    zone: str
    or_else: str | None = None


@dataclasses.dataclass(frozen=True)
class Levels:
    """The number of full levels plus `offset`: Levels() = nlev, Levels(1) = nlev + 1 (surface)."""

    offset: int = 0


@dataclasses.dataclass(frozen=True)
class VerticalIndex:
    """A level index of icon4py's VerticalGrid (plus `offset`): 'nflatlev',
    'end_index_of_damping_layer', 'kstart_moist', or our 'nflat_gradp' (see `vertical_indices`)."""

    name: str
    offset: int = 0


@dataclasses.dataclass(frozen=True)
class Derived:
    """Computed from the context (grid, nlev) by `fn`, e.g. an attribute of the grid; `why` says
    what it mirrors in icon4py."""

    fn: Callable[[SpecContext], Any]
    why: str


@dataclasses.dataclass(frozen=True)
class KOffsets:
    """An int32 field of vertical offsets for `as_offset(Koff, ...)` (icon4py's `vertoffset_gradp`,
    which points downwards: offsets >= 0). At level k a random value in
    [0, min(max_offset, nlev - 1 - k)], so k + offset is a full level; the +1 read of
    compute_hydrostatic_correction_term then reaches at most the surface level nlev."""

    max_offset: int = 4


@dataclasses.dataclass(frozen=True)
class IndexIn:
    """An int32 field of indices into a dimension: at every point a random index in
    [0, points of `dim` + offset) (for K: [0, nlev + offset)), e.g. icon4py's `flat_idx_max`."""

    dim: str
    offset: int = 0


@dataclasses.dataclass(frozen=True)
class Position:
    """An int32 field holding each point's own index along `dim` (icon4py's `e_lev`, `k_lev`)."""

    dim: str


@dataclasses.dataclass(frozen=True)
class OneOf:
    """An int32 field of flags, masks or enumeration values: each point one of `values`
    (icon4py's `refin_ctrl`)."""

    values: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class TableOf:
    """An int32 field equal to a neighbour table of the grid (e.g. a `c2e` passed as a field):
    indices stay within their table, skip values (-1) included where the grid has them."""

    connectivity: str


Spec = (
    Const | Uniform | RandomBool | ZoneStart | ZoneEnd | Levels | VerticalIndex | Derived | KOffsets
    | IndexIn | Position | OneOf | TableOf
)  # fmt: skip


# Vertical grid used for the level indices: ICON's usual 75 km model top with icon4py's default
# SLEVE parameters (flat above 16 km, Rayleigh damping above 45 km, moist physics below 22.5 km).
MODEL_TOP_HEIGHT_M = 75000.0


@functools.cache
def vertical_indices(nlev: int) -> dict[str, int]:
    """Level indices icon4py derives from its vertical grid, for `nlev` levels."""
    from icon4py.model.common.grid import vertical as v_grid

    config = v_grid.VerticalGridConfig(num_levels=nlev, model_top_height=MODEL_TOP_HEIGHT_M)
    vct_a, vct_b = v_grid.get_vct_a_and_vct_b(config, None)
    vgrid = v_grid.VerticalGrid(config, vct_a, vct_b)
    nflatlev = int(vgrid.nflatlev)
    return {
        "nflatlev": nflatlev,
        "end_index_of_damping_layer": int(vgrid.end_index_of_damping_layer),
        "kstart_moist": int(vgrid.kstart_moist),
        # nflat_gradp comes from the metric fields (depends on topography, >= nflatlev): take the
        # middle of the terrain-following levels so both pressure-gradient branches run.
        "nflat_gradp": nflatlev + (nlev - nflatlev) // 2,
    }


def zone_index(grid: Any, dim: str, zone: str, *, end: bool, or_else: str | None = None) -> int:
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import horizontal as h_grid

    dimension = {CELL: dims.CellDim, EDGE: dims.EdgeDim, VERTEX: dims.VertexDim}[dim]
    domain = h_grid.domain(dimension)(h_grid.Zone[zone])
    start, stop = int(grid.start_index(domain)), int(grid.end_index(domain))
    if or_else is not None and start >= stop:
        return zone_index(grid, dim, or_else, end=end)
    return stop if end else start


@dataclasses.dataclass
class SpecContext:
    """What a spec needs to become a value: the grid, the level count and the random generator."""

    grid: Any
    rng: np.random.Generator

    @property
    def nlev(self) -> int:
        return int(self.grid.num_levels)

    def resolve_scalar(self, spec: Spec, dtype: str) -> Any:
        match spec:
            case Const(value):
                raw = value
            case Uniform(lo, hi):
                raw = self.rng.uniform(lo, hi)
            case RandomBool():
                raw = bool(self.rng.random() < 0.5)
            case ZoneStart(dim, zone, or_else):
                raw = zone_index(self.grid, dim, zone, end=False, or_else=or_else)
            case ZoneEnd(dim, zone, or_else):
                raw = zone_index(self.grid, dim, zone, end=True, or_else=or_else)
            case Levels(offset):
                raw = self.nlev + offset
            case VerticalIndex(name, offset):
                raw = vertical_indices(self.nlev)[name] + offset
            case Derived(fn, _):
                raw = fn(self)
            case _:
                raise TypeError(f"{spec!r} does not describe a scalar")
        return cast_scalar(raw, dtype)


def parse_scalar(text: str, dtype: str) -> Any:
    """A scalar written on a command line ("3", "True", "0.5") -> the GT4Py type of `dtype`;
    ValueError names what was expected."""
    if dtype == "bool":
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{text!r} is not a bool (True, False, 1 or 0)")
        return cast_scalar(text.lower() in ("true", "1"), dtype)
    try:
        return cast_scalar(int(text) if dtype.startswith("int") else float(text), dtype)
    except ValueError:
        raise ValueError(f"{text!r} is not a {dtype}") from None


def cast_scalar(value: Any, dtype: str) -> Any:
    """Python/numpy value -> the scalar type GT4Py expects for `dtype`."""
    if dtype == "bool":
        return bool(value)
    if dtype == "int32":
        return gtx.int32(value)
    if dtype == "int64":
        return gtx.int64(value)
    if dtype == "float32":
        return gtx.float32(value)
    if dtype == "float64":
        return gtx.float64(value)
    raise TypeError(f"unsupported scalar dtype {dtype}")
