"""Random but valid arguments for any catalogued program on a given grid.

Sizing rule: every vertical (K) field gets nlev + 1 levels. icon4py allocates some K fields with
nlev and the half-level ones with nlev + 1, but which is which is not recorded in the program
(names are not reliable, and several programs write one field over [0, nlev + 1) and read another
at k + 1). GT4Py accepts fields larger than the domains a program reads and writes (it checks
dims and dtypes, never that a field is *exactly* the domain), so nlev + 1 is always valid; the
levels a program does not touch stay as they were, which `verify` checks.

Values: floats uniform in [0.1, 1.1) unless the table in `ranges.py` says otherwise. Positive and
away from zero, so the divisions (by layer thicknesses, densities, Exner pressure), `log` and `exp`
of the dycore stay finite. Bool fields are random; int fields must have a rule in the table.
"""

from __future__ import annotations

from typing import Any

import gt4py.next as gtx
import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.suite.catalogue import Param, ProgramInfo
from icoforge.suite.ranges import spec_for
from icoforge.suite.specs import (
    Const,
    IndexIn,
    KOffsets,
    Levels,
    OneOf,
    Position,
    RandomBool,
    Spec,
    SpecContext,
    TableOf,
    Uniform,
    ZoneEnd,
    ZoneStart,
)

FLOAT_VALUES = Uniform(0.1, 1.1)
VERTICAL_DIMS = ("K", "KHalf")


def num_points(grid: Any, dim: str) -> int:
    """Points of a horizontal dimension ('Cell', 'Edge', 'Vertex') on `grid`."""
    try:
        return int({"Cell": grid.num_cells, "Edge": grid.num_edges, "Vertex": grid.num_vertices}[dim])
    except KeyError:
        raise IcoforgeError(f"no size for dimension {dim!r}") from None


def field_shape(param: Param, grid: Any) -> tuple[int, ...]:
    """Allocation shape of a field parameter: horizontal dims have the grid's size, vertical
    dims nlev + 1, local (neighbour) dims the max_neighbors of the connectivity of that name."""
    shape = []
    for dim in param.type.dims:
        if dim.kind == gtx.DimensionKind.LOCAL:
            try:
                table = grid.connectivities[dim.value]
            except KeyError:
                raise IcoforgeError(f"{param.name}: grid has no connectivity {dim.value!r}") from None
            shape.append(int(table.ndarray.shape[1]))
        elif dim.value in VERTICAL_DIMS:
            shape.append(int(grid.num_levels) + 1)
        else:
            shape.append(num_points(grid, dim.value))
    return tuple(shape)


def default_spec(info: ProgramInfo, param: Param) -> Spec:
    """The generic choice for an argument the table does not list."""
    if param.is_field and param.dtype == "int32" and (table := _table_shaped(param)):
        return TableOf(table)  # a neighbour table passed as a field: its values are indices
    if param.is_field and param.dtype != "int32":
        return FLOAT_VALUES  # bool fields are random whatever the spec
    if bound := info.bound_of(param.name):
        dim, side = bound
        if dim in VERTICAL_DIMS:
            return Const(0) if side == "start" else Levels(0)
        if info.connectivities:
            # start one row in from a limited-area boundary, where every neighbour exists
            # (on a global grid this zone starts at 0 too)
            return ZoneStart(dim, "LATERAL_BOUNDARY_LEVEL_2") if side == "start" else ZoneEnd(dim, "END")
        return Const(0) if side == "start" else ZoneEnd(dim, "END")
    if param.dtype == "bool":
        return RandomBool()
    if param.dtype.startswith("float"):
        return FLOAT_VALUES
    raise IcoforgeError(
        f"{info.name}: no rule for {param.dtype} parameter {param.name!r}; add it to icoforge/suite/ranges.py"
    )


def _table_shaped(param: Param) -> str | None:
    """The connectivity an int field looks like: dims (horizontal, local), the local dimension
    named after its connectivity as in icon4py (C2EDim is "C2E"); the grid must have it."""
    dims = param.type.dims
    if len(dims) == 2 and dims[0].kind == gtx.DimensionKind.HORIZONTAL and dims[1].kind == gtx.DimensionKind.LOCAL:
        return dims[1].value
    return None


def _axis_index(param: Param, dim: str, shape: tuple[int, ...]) -> np.ndarray:
    """Each point's index along `dim`, broadcast to `shape`."""
    names = [d.value for d in param.type.dims]
    if dim not in names:
        raise IcoforgeError(f"{param.name}: no dimension {dim!r} in {names}")
    axis = names.index(dim)
    return np.arange(shape[axis]).reshape([-1 if i == axis else 1 for i in range(len(shape))])


def _field_values(param: Param, spec: Spec, shape: tuple[int, ...], ctx: SpecContext) -> np.ndarray:
    rng = ctx.rng
    match param.dtype, spec:
        # every int rule draws one double per point (make_scalars skips fields by their size)
        case "int32", IndexIn(dim, offset):
            stop = (ctx.nlev if dim in VERTICAL_DIMS else num_points(ctx.grid, dim)) + offset
            return np.floor(rng.random(shape) * stop).astype(np.int32)
        case "int32", Position(dim):
            rng.random(shape)
            return np.broadcast_to(_axis_index(param, dim, shape), shape).astype(np.int32)
        case "int32", OneOf(values):
            choice = np.floor(rng.random(shape) * len(values)).astype(np.int64)
            return np.asarray(values, dtype=np.int32)[choice]
        case "int32", TableOf(name):
            rng.random(shape)
            try:
                table = ctx.grid.connectivities[name].asnumpy()
            except KeyError:
                raise IcoforgeError(f"{param.name}: the grid has no connectivity {name!r}") from None
            if table.shape != shape:
                raise IcoforgeError(f"{param.name}: shape {shape}, connectivity {name} has {table.shape}")
            return table.astype(np.int32)
        case "bool", _:
            return rng.random(shape) < 0.5
        case ("float64" | "float32"), Uniform(lo, hi):
            return rng.uniform(lo, hi, shape).astype(param.dtype)
        case "int32", KOffsets(max_offset):
            levels = [i for i, d in enumerate(param.type.dims) if d.value in VERTICAL_DIMS]
            assert len(levels) == 1, f"{param.name}: KOffsets needs exactly one vertical dim"
            k = np.arange(shape[levels[0]]).reshape([-1 if i == levels[0] else 1 for i in range(len(shape))])
            highest = np.clip(np.minimum(max_offset, ctx.nlev - 1 - k), 0, None)
            # uniform integer in [0, highest] at every point
            return np.floor(rng.random(shape) * (highest + 1)).astype(np.int32)
        case _:
            raise IcoforgeError(f"no rule to fill a {param.dtype} field with {spec!r} ({param.name})")


def make_inputs(info: ProgramInfo, grid: Any, seed: int = 0, *, allocator: Any = None) -> dict[str, Any]:
    """Keyword arguments for `info.program` on `grid` (its `num_levels` levels).

    Fields are new gt4py fields with fresh random values drawn from `np.random.default_rng(seed)`
    in signature order (same seed, same values). `allocator` is anything `gtx.as_field` accepts
    (a GT4Py backend such as gtfn_gpu, a device allocator); None allocates with numpy on the CPU.
    """
    ctx = SpecContext(grid=grid, rng=np.random.default_rng(seed))
    args: dict[str, Any] = {}
    for param in info.params:
        spec = spec_for(info.name, param.name) or default_spec(info, param)
        if param.is_field:
            shape = field_shape(param, grid)
            values = _field_values(param, spec, shape, ctx)
            args[param.name] = gtx.as_field(param.type.dims, values, allocator=allocator)
        else:
            args[param.name] = ctx.resolve_scalar(spec, param.dtype)
    return args


def make_scalars(info: ProgramInfo, grid: Any, seed: int = 0) -> dict[str, Any]:
    """The scalar arguments `make_inputs(info, grid, seed)` would give, without building fields.

    Each field of `make_inputs` consumes exactly one 64-bit draw per element (NumPy's `random`
    and `uniform` both take one double per value), so skipping a field is advancing the bit
    generator by its size. For compiling with the suite's static scalars (they fix GT4Py's
    fingerprint) before gigabytes of R2B6 inputs exist; a test checks it against `make_inputs`.
    """
    ctx = SpecContext(grid=grid, rng=np.random.default_rng(seed))
    out: dict[str, Any] = {}
    for param in info.params:
        spec = spec_for(info.name, param.name) or default_spec(info, param)
        if param.is_field:
            ctx.rng.bit_generator.advance(int(np.prod(field_shape(param, grid), dtype=np.int64)))
        else:
            out[param.name] = ctx.resolve_scalar(spec, param.dtype)
    return out


# --- helpers on argument dicts ------------------------------------------------------------------


def is_field(value: Any) -> bool:
    return hasattr(value, "ndarray") and hasattr(value, "domain")


def copy_args(args: dict[str, Any]) -> dict[str, Any]:
    """Deep copy: new buffers (same device, same domain) for fields, scalars as they are."""
    return {name: copy_field(v) if is_field(v) else v for name, v in args.items()}


def copy_field(field: Any) -> Any:
    return gtx.as_field(field.domain, field.ndarray.copy())


def to_numpy(field: Any) -> np.ndarray:
    return np.asarray(field.asnumpy())
