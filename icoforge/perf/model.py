"""Compulsory bytes and flops per kernel, from the kernel IR and the sizes of one call.

Bytes (the floor a kernel cannot go below, whatever its schedule):
  * each distinct field element the kernel reads is read once: per field dimension the range the
    kernel touches -- direct horizontal access: the domain's horizontal range; level access: the
    domain's k range widened by the k offsets used; neighbour (table) access or a data-dependent
    index: the field's whole extent along that dimension; local (sparse) dimension: all
    neighbours; constant index: the span of the constants;
  * each output element is written once (domain rows x levels);
  * neighbour tables: rows used x max_neighbors x itemsize (rows of the domain for `T[i, j]`, the
    whole table when the row is itself a neighbour index);
  * temporaries count like fields (written by one kernel, read by another).
Flops per point: float `+ - * /`, float negation and float math calls (sqrt, exp, power,
minimum, maximum, abs, ...) count 1 each; comparisons, selects, casts and index arithmetic 0. Of
two branches (`If`, `Select`) only the longer one counts: one of them runs per point. Per-column
work (k-invariant prologue, scan state init) counts once per column.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icoforge.backend.ir import ir
from icoforge.backend.schedule.access import Access, classify, store_access, store_levels
from icoforge.backend.codegen.host import Ranges, domain_ranges, evaluate
from icoforge.backend.ir.dtypes import ITEMSIZE

FLOP_OPS = ("plus", "minus", "multiplies", "divides")


@dataclass(frozen=True)
class Traffic:
    """One field or table's share of a kernel's bytes."""

    name: str
    mode: str  # "read" | "write" | "table"
    elements: int
    bytes: int
    # the index range touched per dimension, in the field's own index space (GT4Py domain indices;
    # temporaries: their domain; tables: rows x neighbour slots): what floors.py unions across kernels
    box: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class KernelCost:
    name: str
    kind: str  # "map" | "scan(forward)" | "scan(backward)"
    executed: bool  # False: in a host branch not taken, or an empty domain
    h_points: int
    k_levels: int
    bytes_read: int  # fields, temporaries and tables
    bytes_written: int
    table_bytes: int  # part of bytes_read
    flops: int
    traffic: tuple[Traffic, ...] = ()

    @property
    def points(self) -> int:
        return self.h_points * self.k_levels

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """flop per compulsory byte (0 for a kernel that moves nothing)."""
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True)
class ProgramCost:
    name: str
    kernels: tuple[KernelCost, ...]

    def _executed(self):
        return [k for k in self.kernels if k.executed]

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self._executed())

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self._executed())

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def flops(self) -> int:
        return sum(k.flops for k in self._executed())

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    def kernel(self, name: str) -> KernelCost:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


# --- sizes of one call --------------------------------------------------------------------------


@dataclass(frozen=True)
class CallSizes:
    """What the model needs from a call: scalar values, index ranges of field arguments, shapes
    of the neighbour tables."""

    scalars: Mapping[str, Any]
    fields: Mapping[str, Ranges]
    tables: Mapping[str, tuple[int, int]]

    @classmethod
    def from_args(cls, args: Mapping[str, Any], offset_provider: Mapping[str, Any]) -> CallSizes:
        """`args`: GT4Py fields, arrays (ranges from 0) or explicit ranges; anything else is a scalar."""
        scalars, fields = {}, {}
        for name, v in args.items():
            if hasattr(v, "domain") and hasattr(v, "ndarray"):
                fields[name] = tuple((int(r.start), int(r.stop)) for r in v.domain.ranges)
            elif hasattr(v, "shape") and getattr(v, "ndim", 0) > 0:
                fields[name] = tuple((0, int(n)) for n in v.shape)
            elif isinstance(v, tuple) and v and all(isinstance(r, tuple) for r in v):
                fields[name] = v
            else:
                scalars[name] = v.item() if hasattr(v, "item") else v
        tables = {}
        for name, conn in offset_provider.items():
            shape = getattr(getattr(conn, "ndarray", conn), "shape", None)
            if shape is not None and len(shape) == 2:
                tables[name] = (int(shape[0]), int(shape[1]))
        return cls(scalars, fields, tables)


# --- flops --------------------------------------------------------------------------------------


def expr_flops(e: ir.Expr) -> int:
    if isinstance(e, ir.Select):
        return expr_flops(e.cond) + max(expr_flops(e.a), expr_flops(e.b))
    own = 0
    if e.dtype in ir.FLOAT_DTYPES:
        if isinstance(e, ir.Binary) and e.op in FLOP_OPS:
            own = 1
        elif isinstance(e, ir.Unary) and e.op == "neg":
            own = 1
        elif isinstance(e, ir.Call):
            own = 1
    return own + sum(expr_flops(c) for c in e.children())


def stmts_flops(stmts: tuple[ir.Stmt, ...]) -> int:
    total = 0
    for s in stmts:
        if isinstance(s, (ir.Let, ir.Store)):
            total += expr_flops(s.value)
        elif isinstance(s, ir.If):
            total += expr_flops(s.cond) + max(stmts_flops(s.then), stmts_flops(s.orelse))
    return total


def kernel_flops(k: ir.Kernel, h_points: int, k_levels: int) -> int:
    per_column = stmts_flops(k.prologue) + sum(expr_flops(st.init) for st in k.state)
    return h_points * (per_column + k_levels * stmts_flops(k.body))


# --- bytes --------------------------------------------------------------------------------------


def _merge(old: Access | None, new: Access | None) -> Access | None:
    """None means "data-dependent": the whole extent, which absorbs everything."""
    if old is None or new is None:
        return None
    if old.kind == new.kind:
        return Access(new.kind, min(old.lo, new.lo), max(old.hi, new.hi), new.table or old.table)
    if "table" in (old.kind, new.kind):  # a neighbour access needs the whole dimension anyway
        return old if old.kind == "table" else new
    return None  # e.g. the same dimension by `k` and by a constant: whole extent (rare)


def _range(acc: Access | None, extent: tuple[int, int], h: tuple[int, int], kr: tuple[int, int]) -> tuple[int, int]:
    """Index range [lo, hi) along one dimension that an access touches, within the field's extent
    (hi == lo when it touches nothing)."""
    lo, hi = extent
    if acc is not None and acc.kind == "h":
        lo, hi = max(lo, h[0]), min(hi, h[1])
    elif acc is not None and acc.kind == "k":
        lo, hi = max(lo, kr[0] + acc.lo), min(hi, kr[1] + acc.hi)
    elif acc is not None and acc.kind in ("const", "levels"):
        lo, hi = max(lo, acc.lo), min(hi, acc.hi + 1)
    # "table", "local" and data-dependent (None): the field's whole extent
    return (lo, max(hi, lo))


def _defs(k: ir.Kernel) -> dict[str, ir.Expr]:
    return {s.var.name: s.value for s in ir.walk_stmts(k.all_stmts()) if isinstance(s, ir.Let) and not s.declared}


def read_accesses(k: ir.Kernel, program: ir.ProgramIR) -> dict[str, list[Access | None]]:
    """field -> merged access per dimension, over every read (conditional ones too)."""
    defs, kinds = _defs(k), dict(program.dim_kinds)
    out: dict[str, list[Access | None]] = {}
    for e in k.exprs():
        if not isinstance(e, ir.Load):
            continue
        dims = program.field(e.field).dims
        accs = [Access("local") if kinds.get(d) == "local" else classify(idx, defs) for d, idx in zip(dims, e.index)]
        if e.field not in out:
            out[e.field] = accs
        else:
            out[e.field] = [_merge(a, b) for a, b in zip(out[e.field], accs)]
    return out


def table_rows_used(k: ir.Kernel) -> dict[str, bool]:
    """table -> True when every lookup is at the kernel's own row (`T[i, j]`)."""
    defs = _defs(k)
    out: dict[str, bool] = {}
    for e in k.exprs():
        if isinstance(e, ir.Table):
            acc = classify(e.row, defs)
            direct = acc is not None and acc.kind == "h"
            out[e.table] = out.get(e.table, True) and direct
    return out


def field_extents(program: ir.ProgramIR, sizes: CallSizes) -> dict[str, tuple[tuple[int, int], ...]]:
    """Index ranges of every field argument and temporary of one call."""
    out = {name: tuple(r) for name, r in sizes.fields.items()}
    kinds = dict(program.dim_kinds)
    for t in program.temporaries:
        h, kr = domain_ranges(t.domain, sizes.scalars, sizes.fields)
        out[t.name] = tuple(kr if kinds.get(d) == "vertical" else h for d in t.dims)
    return out


def kernel_cost(
    k: ir.Kernel, program: ir.ProgramIR, sizes: CallSizes, executed: bool = True,
    extents: Mapping[str, tuple[tuple[int, int], ...]] | None = None,
) -> KernelCost:  # fmt: skip
    extents = extents if extents is not None else field_extents(program, sizes)
    if k.then is not None:
        return _sweeps_cost(k, program, sizes, executed, extents)
    env = dict(sizes.scalars)
    for p, v in k.args:
        env[p.name] = evaluate(v, env, sizes.fields)
    h, kr = domain_ranges(k.domain, env, sizes.fields)
    nh, nk = max(h[1] - h[0], 0), max(kr[1] - kr[0], 0)
    executed = executed and nh > 0 and nk > 0
    kinds = dict(program.dim_kinds)
    traffic: list[Traffic] = []

    def extent(name: str) -> tuple[tuple[int, int], ...]:
        if name not in extents:
            raise KeyError(f"{program.name}: no index ranges for field {name!r}")
        return extents[name]

    for name, accs in read_accesses(k, program).items():
        f = program.field(name)
        box = tuple(_range(a, ext, h, kr) for a, ext in zip(accs, extent(name)))
        n = math.prod(b - a for a, b in box)
        traffic.append(Traffic(name, "read", n, n * ITEMSIZE[f.dtype], box))
    levels = store_levels(k)
    for name in k.fields_written():
        f = program.field(name)
        box = tuple(
            _range(store_access(k, levels[name], kinds.get(d) == "vertical"), ext, h, kr)
            for d, ext in zip(f.dims, extent(name))
        )
        n = math.prod(b - a for a, b in box)
        traffic.append(Traffic(name, "write", n, n * ITEMSIZE[f.dtype], box))
    tables = {t.name: t for t in program.tables}
    for name, direct in table_rows_used(k).items():
        tb = tables[name]
        rows = (h[0], h[0] + nh) if direct else (0, sizes.tables.get(name, (nh, 0))[0])
        n = (rows[1] - rows[0]) * tb.max_neighbors
        traffic.append(Traffic(name, "table", n, n * ITEMSIZE[tb.dtype], (rows, (0, tb.max_neighbors))))

    kind = f"scan({'forward' if k.forward else 'backward'})" if k.is_scan else "map"
    return KernelCost(
        name=k.name,
        kind=kind,
        executed=executed,
        h_points=nh if k.domain.hdim else 1,
        k_levels=nk if k.domain.k_start is not None else 1,
        bytes_read=sum(t.bytes for t in traffic if t.mode in ("read", "table")),
        bytes_written=sum(t.bytes for t in traffic if t.mode == "write"),
        table_bytes=sum(t.bytes for t in traffic if t.mode == "table"),
        flops=kernel_flops(k, nh, nk),  # listed even when not executed; totals skip it
        traffic=tuple(traffic),
    )


def _sweeps_cost(
    k: ir.Kernel, program: ir.ProgramIR, sizes: CallSizes, executed: bool, extents: Mapping[str, tuple[tuple[int, int], ...]]
) -> KernelCost:  # fmt: skip
    """A sweep-fused kernel: its walks' costs as one kernel's. The on-chip temporaries move no
    bytes; a field several walks touch counts once per mode over the union of their ranges."""
    chip = {t.name for t in k.on_chip}
    walks = [kernel_cost(w, program, sizes, executed, {**extents, **{t.name: () for t in k.on_chip}}) for w in k.walks()]
    merged: dict[tuple[str, str], Traffic] = {}
    for t in (t for w in walks for t in w.traffic if t.name not in chip):
        old = merged.get((t.name, t.mode))
        if old is not None:
            box = tuple((min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old.box, t.box))
            n = math.prod(hi - lo for lo, hi in box)
            t = Traffic(t.name, t.mode, n, n * (t.bytes // t.elements if t.elements else 0), box)
        merged[(t.name, t.mode)] = t
    traffic = tuple(merged.values())
    first = walks[0]
    return dataclasses.replace(
        first, name=k.name, executed=first.executed, k_levels=max(w.k_levels for w in walks),
        bytes_read=sum(t.bytes for t in traffic if t.mode in ("read", "table")),
        bytes_written=sum(t.bytes for t in traffic if t.mode == "write"),
        table_bytes=sum(t.bytes for t in traffic if t.mode == "table"),
        flops=sum(w.flops for w in walks), traffic=traffic,
    )  # fmt: skip


def program_cost(program: ir.ProgramIR, sizes: CallSizes) -> ProgramCost:
    """Costs of every kernel of `program` for one call; kernels under a host condition that is
    false (or with an empty domain) are listed with `executed=False` and left out of totals."""
    extents = field_extents(program, sizes)
    out: list[KernelCost] = []

    def visit(steps: tuple[ir.Step, ...], taken: bool) -> None:
        for s in steps:
            if isinstance(s, ir.Kernel):
                out.append(kernel_cost(s, program, sizes, taken, extents))
            else:
                cond = bool(evaluate(s.cond, sizes.scalars, sizes.fields))
                visit(s.then, taken and cond)
                visit(s.orelse, taken and not cond)

    visit(program.steps, True)
    return ProgramCost(program.name, tuple(out))


def cost_of_call(program: ir.ProgramIR, args: Mapping[str, Any], offset_provider: Mapping[str, Any]) -> ProgramCost:
    """`program_cost` for a call with GT4Py arguments (fields, scalars) and connectivities."""
    return program_cost(program, CallSizes.from_args(args, offset_provider))


def sequence_bytes(seq: Any) -> dict[str, int]:
    """Bytes one run of a composed substep sequence moves (backend/runtime/substep.py's `Sequence`), by
    the per-kernel rule: its calls one by one, each program as scheduled, and the composed program
    after fusion across programs."""
    one_by_one = sum(cost_of_call(p, args, op).bytes for p, args, op in seq.calls)
    composed = cost_of_call(seq.composed, seq.composed_args, seq.tables).bytes
    return {"bytes_one_by_one": one_by_one, "bytes_composed": composed}
