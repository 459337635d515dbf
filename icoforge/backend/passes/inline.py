"""Compute-inline of temporaries: recompute a cheap producer where it is read, instead of storing it.

GT4Py's passes leave a temporary where they chose not to inline a field operator, typically
because its value is read at several points (levels k-1, k, k+1, or neighbours through a table).
Each such temporary is written once and read back by every kernel that needs it: on a GPU that
is a whole field written and read again per consumer. This pass does what Halide calls
`compute_inline` (versus `compute_root`): the producer's expression is evaluated inside each
reader, at the point the reader loads it, and the store goes.

A temporary `T` qualifies when
* one top-level map kernel `P` writes it, with one unconditional store (conditionals before it
  become lazy `?:`), over exactly the domain GT4Py allocated `T` for (its domain inference sized
  `T` for every read, so every read lies where `P` computed);
* `T` has only horizontal and vertical dimensions, and every reader comes after `P`;
* no kernel from `P` to the last reader (both included) writes a field `P`'s expression reads,
  or only at levels where the copies do not read it (`recompute.levels_read` follows `P`'s
  conditions on the level): the readers then see the same inputs `P` saw;
* the readers' copies of it stay small (`MAX_READER_NODES`; `MAX_NODES` for a copy that must be
  one expression).

A load `T[idx]` becomes `P`'s computation moved to the point `idx` (recompute.py): `P`'s
statements before the reader's statement where the load always ran, one lazy expression where it
ran only under a condition (a guarded neighbour access, a skip value, stays guarded). Every
operation is as `P` computed it and floating-point contraction is off in every build (codegen),
so results are bit-identical. A stored value converted to `T`'s dtype is converted alike.

Whether to inline is a byte decision (`cost`): the store and the reads of `T` go, and each reader
now reads the producer's inputs it did not read before. A field access over a kernel's domain
counts 1 for a field over horizontal points and levels and `WEIGHT_2D` for one over only one of
them (at tens of levels and thousands of points those are small); `auto` inlines when the count goes down and none of the two patterns that
lost time on the H200 applies (`_slower_on_a_gpu`). `all` inlines wherever it is legal.

The pass moves reads of the producer's inputs past the kernels between producer and reader; like
copy forwarding, it records in `ProgramIR.distinct` the field arguments those kernels write, so a
call whose arguments share memory is refused instead of computing something else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from icoforge.backend.ir import ir, recompute
from icoforge.errors import UnknownNameError

POLICIES = ("auto", "all", "off")
MAX_NODES = 400  # the producer's value as one expression (Lets substituted), where a reader needs that
MAX_READER_NODES = 2000  # all copies of the producer in one reader
WEIGHT_2D = 0.1  # a field over points or levels only, against one over both


@dataclass(frozen=True)
class Decision:
    """What the pass did with one temporary (`icoforge explain` prints these)."""

    temporary: str
    producer: str
    readers: tuple[str, ...]
    inlined: bool
    reason: str  # why not, or "" when inlined
    saved: float = 0.0  # field accesses that go: the store, the reads of the temporary, producer inputs
    added: float = 0.0  # field accesses the readers add: producer inputs they did not read
    copies: int = 0  # evaluations of the expression per reader point, summed over readers
    # kept (stored) but recomputed in these readers, where each reads its inputs anyway (`_in_readers`)
    recomputed_in: tuple[str, ...] = ()

    def describe(self) -> str:
        cost = f"saves {self.saved:g}, adds {self.added:g} field accesses, {self.copies} cop{'y' if self.copies == 1 else 'ies'}"
        verdict = "inlined" if self.inlined else f"kept: {self.reason}"
        if self.recomputed_in:
            verdict += f"; recomputed in {', '.join(self.recomputed_in)}"
        priced = self.inlined or self.saved or self.added  # kept before the byte model ran: no cost
        return f"{self.temporary} ({self.producer} -> {', '.join(self.readers) or '-'}): {verdict}" + (f"; {cost}" if priced else "")


# --- the byte model -----------------------------------------------------------------------------


def _weight(program: ir.ProgramIR, field: str) -> float:
    kinds = {dict(program.dim_kinds).get(d) for d in program.field(field).dims}
    return 1.0 if {"horizontal", "vertical"} <= kinds else WEIGHT_2D


def _accesses(program: ir.ProgramIR, k: ir.Kernel) -> float:
    fields = set(k.fields_read()) | set(k.fields_written())
    return sum(_weight(program, f) for f in fields)


def _without_store(p: ir.Kernel, field: str) -> ir.Kernel:
    body = recompute.dead_code_removed(tuple(s for s in p.body if not (isinstance(s, ir.Store) and s.field == field)))
    used = recompute.names_used(body, ir.Param)
    return dataclasses.replace(p, body=body, args=tuple((q, v) for q, v in p.args if q in used))


# --- one temporary ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Site:
    """Where a temporary lives in the program: its producer's step and its readers' steps."""

    p_pos: int
    readers: tuple[tuple[int, ir.Kernel], ...]  # (top-level step position, kernel)


def _site(program: ir.ProgramIR, field: str) -> _Site | str:
    writers = [pos for pos, s in enumerate(program.steps) for k in ir.step_kernels(s) if field in k.fields_written()]
    if len(writers) != 1 or not isinstance(program.steps[writers[0]], ir.Kernel):
        return "written by more than one kernel or under a host condition"
    readers = tuple((pos, k) for pos, s in enumerate(program.steps) for k in ir.step_kernels(s) if field in k.fields_read())
    if any(pos <= writers[0] for pos, _ in readers):
        return "read before or by its producer"
    return _Site(writers[0], readers)


def _consider(program: ir.ProgramIR, t: ir.Temporary, policy: str) -> tuple[Decision, ir.ProgramIR | None]:
    """The decision for temporary `t` and, when it is inlined, the program after it."""
    kinds = dict(program.dim_kinds)
    site = _site(program, t.name)
    if isinstance(site, str):
        return Decision(t.name, "?", (), False, site), None
    p = program.steps[site.p_pos]
    names = tuple(k.name for _, k in site.readers)

    def kept(reason: str, **cost) -> tuple[Decision, None]:
        return Decision(t.name, p.name, names, False, reason, **cost), None

    if p.is_scan:
        return kept("its producer is a scan")
    if any(kinds.get(d) not in ("horizontal", "vertical") for d in t.dims):
        return kept("it has a local (neighbour) dimension")
    if p.domain != t.domain:
        return kept("its producer runs over another domain than the one allocated")
    prod = recompute.Producer.of(p, t, kinds)
    if prod is None:
        return kept("its producer stores it more than once or under a condition")
    inputs = recompute.fields_loaded(prod.expr)
    window = program.steps[site.p_pos : max(pos for pos, _ in site.readers) + 1]
    written = {f for s in window for k in ir.step_kernels(s) for f in k.fields_written()}
    clash = sorted(f for f in inputs & written if not _reads_miss_writes(prod, f, window, site.readers, kinds))
    if clash:
        return kept(f"{', '.join(clash)} written before its last reader")

    # the byte model: what goes, what comes
    rest = _without_store(p, t.name)
    saved = _accesses(program, p) - (_accesses(program, rest) if rest.fields_written() else 0.0)
    added, copies = 0.0, 0
    per_reader: dict[str, tuple[float, int]] = {}  # reader -> (producer inputs it adds, its lazy loads)
    for _, r in site.readers:
        saved += _weight(program, t.name)
        eager, lazy = recompute.reads(r.body, t.name)
        per_reader[r.name] = (sum(_weight(program, f) for f in inputs - set(r.fields_read())), lazy)
        added += per_reader[r.name][0]
        copies += eager + lazy
        if lazy and recompute.size(prod.expr, MAX_NODES) > MAX_NODES:
            return kept(f"{r.name} reads it lazily and its expression has more than {MAX_NODES} nodes")
        nodes = eager * prod.statement_nodes() + lazy * recompute.size(prod.expr, MAX_READER_NODES)
        if nodes > MAX_READER_NODES:
            return kept(f"{r.name} would hold more than {MAX_READER_NODES} nodes of it", saved=saved, added=added, copies=copies)
    cost = {"saved": saved, "added": added, "copies": copies}
    if policy == "auto":
        why = _slower_on_a_gpu(prod, site.readers, kinds)
        if not why and added >= saved:
            why = "the readers would read more than it saves"
        if why:
            return _in_readers(program, t, p, prod, site, per_reader, inputs, written, kinds, why, cost)

    steps = list(program.steps)
    steps[site.p_pos] = rest
    taken = {q.name for q in program.params}
    by_name = {r.name: recompute.inlined_into(r, prod, taken) for _, r in site.readers}
    program = ir.map_kernels(dataclasses.replace(program, steps=tuple(steps)), lambda k: by_name.get(k.name, k))
    program = dataclasses.replace(
        program,
        steps=tuple(s for s in program.steps if not (isinstance(s, ir.Kernel) and not s.fields_written())),
        temporaries=tuple(x for x in program.temporaries if x.name != t.name),
        distinct=_distinct(program, written, inputs),
    )
    return Decision(t.name, p.name, names, True, "", **cost), program


def _in_readers(
    program: ir.ProgramIR, t: ir.Temporary, p: ir.Kernel, prod: recompute.Producer, site: _Site,
    per_reader: dict[str, tuple[float, int]], inputs: set[str], written: set[str], kinds: dict[str, str], why: str, cost: dict,
) -> tuple[Decision, ir.ProgramIR | None]:  # fmt: skip
    """A temporary kept for its readers as a whole (`why`) is still recomputed in each reader where
    that alone moves fewer bytes: the producer's inputs the reader does not read already weigh
    less than its load of the temporary (the corrector's `a0 * exner / (cvd * rho * theta_v) *
    inv_ddqz`, read by its last map, which reads those four fields itself). The producer keeps its
    store for the other readers. Scan readers and gathers of gathers stay loads, as in
    `_slower_on_a_gpu`. `per_reader`: what `_consider` priced per reader (its node limits held for
    every one)."""
    names = tuple(k.name for _, k in site.readers)
    chosen = tuple(
        r for pos, r in site.readers
        if per_reader[r.name][0] < _weight(program, t.name)
        and per_reader[r.name][1] == 0  # eager loads only: the copies are the producer's statements
        and not _slower_on_a_gpu(prod, ((pos, r),), kinds)
    )  # fmt: skip
    if not chosen or len(chosen) == len(site.readers):  # none, or all (then `why` was about bytes: keep it whole)
        return Decision(t.name, p.name, names, False, why, **cost), None
    taken = {q.name for q in program.params}
    by_name = {r.name: recompute.inlined_into(r, prod, taken) for r in chosen}
    program = ir.map_kernels(program, lambda k: by_name.get(k.name, k))
    program = dataclasses.replace(program, distinct=_distinct(program, written, inputs))
    return Decision(t.name, p.name, names, False, why, recomputed_in=tuple(by_name), **cost), program


def _slower_on_a_gpu(prod: recompute.Producer, readers, kinds: dict[str, str]) -> str:
    """Why recomputing would cost more time than the bytes it saves, measured on the H200 (R2B6/80,
    benchmarks/h200/2026-12-01-s10), or "". Two cases lost there:
    * a scan reader: each level waits for the one before, so work added per level adds latency
      (the vertical solvers: 4-7 % slower with their point producers recomputed at k-1, k, k+1);
    * a gather of gathers: a producer that reads through a neighbour table, recomputed at two or
      more neighbour points that the reader always loads (velocity advection: 1.5-2.2x slower).
      One point per branch, as an upwind choice loads, paid off (rho_theta: 1.4x faster)."""
    scans = [r.name for _, r in readers if r.is_scan]
    if scans:
        return f"{', '.join(scans)} is a scan (latency-bound: work added per level costs time)"
    h_pos = [i for i, d in enumerate(prod.dims) if kinds.get(d) == "horizontal"]
    if h_pos and recompute.gathers(prod.expr):
        for _, r in readers:
            if recompute.eager_neighbour_points(r.body, prod.field, h_pos[0]) >= 2:
                return f"{r.name} would gather its neighbour reduction again at every neighbour"
    return ""


def _k_range(d: ir.Domain) -> tuple[int, int] | None:
    if isinstance(d.k_start, ir.Const) and isinstance(d.k_end, ir.Const):
        return int(d.k_start.value), int(d.k_end.value) - 1
    return None


def _reads_miss_writes(prod: recompute.Producer, field: str, window: tuple[ir.Step, ...], readers, kinds: dict[str, str]) -> bool:
    """Whether every load of `field` in the recomputed copies happens at levels no kernel of the
    window writes (the producer's conditions on the level decide which loads run: a solver reads
    `next_w` only at the top level, which the reader does not write)."""
    writes = [_k_range(k.domain) for s in window for k in ir.step_kernels(s) if field in k.fields_written()]
    level_dim = [i for i, d in enumerate(prod.dims) if kinds.get(d) == "vertical"]
    if None in writes or len(level_dim) != 1:
        return False
    for _, r in readers:
        span = _k_range(r.domain)
        for load in {x for x in r.exprs() if isinstance(x, ir.Load) and x.field == prod.field}:
            dk = recompute.level_offset(load.index[level_dim[0]])
            if span is None or dk is None:
                return False
            levels = recompute.levels_read(prod.expr, field, span[0] + dk, span[1] + dk)
            if levels is None or any(lo <= we and ws <= hi for lo, hi in levels for ws, we in writes):
                return False
    return True


def _distinct(program: ir.ProgramIR, written: set[str], inputs: set[str]) -> tuple[tuple[str, str], ...]:
    """Reads of the producer's inputs now happen after the writes of the kernels from producer to
    last reader (`written`): those field arguments must not share memory."""
    params = [p.name for p in program.params if isinstance(p, ir.FieldParam)]
    pairs = dict.fromkeys(program.distinct)
    pairs.update(dict.fromkeys((w, f) for w in params if w in written for f in params if f in inputs and f != w))
    return tuple(pairs)


# --- the pass -----------------------------------------------------------------------------------


def inline_with_decisions(program: ir.ProgramIR, policy: str = "auto") -> tuple[ir.ProgramIR, tuple[Decision, ...]]:
    """Inline temporaries one at a time, in program order, until none qualifies (each inlining
    changes what the readers read, so every decision is taken on the program as it is then).
    Returns the program and a decision per temporary of the input program."""
    if policy not in POLICIES:
        raise UnknownNameError("inline policy", policy, POLICIES)
    if policy == "off":
        return program, tuple(Decision(t.name, "", (), False, "inlining off") for t in program.temporaries)
    done: list[Decision] = []
    recomputed: dict[str, tuple[str, ...]] = {}  # kept temporaries recomputed in some readers so far
    while True:
        kept: list[Decision] = []  # this round's decisions; when none changes the program, they are final
        for t in program.temporaries:
            decision, after = _consider(program, t, policy)
            if after is None:
                kept.append(decision)
                continue
            if decision.inlined:
                done.append(decision)
            else:  # recomputed in some readers: considered again with the readers left
                recomputed[t.name] = (*recomputed.get(t.name, ()), *decision.recomputed_in)
            program = after
            break
        else:
            kept = [dataclasses.replace(d, recomputed_in=recomputed[d.temporary]) if d.temporary in recomputed else d for d in kept]
            return program, (*done, *kept)


def inline_temporaries(program: ir.ProgramIR, policy: str = "auto") -> ir.ProgramIR:
    return inline_with_decisions(program, policy)[0]
