"""Kernel fusion: consecutive map kernels over the same domain become one kernel (a schedule knob).

GT4Py leaves one kernel per `as_fieldop` that its passes did not inline, and several kernels of a
program often run over the same cells or edges and re-read the same neighbours: rho_theta's four
C2E2CO gradients, the cell kernels of `compute_perturbed_quantities_and_interpolation`. Fused, a
thread computes every member at its own point in program order, so a value one member stores is
still in L1/L2 (or a register) when the next member reads it, the neighbour indices are loaded
once, and there is one launch instead of several.

Two neighbouring top-level kernels `a` then `b` are fused when:
* neither is a scan, and both have the same domain;
* every access of `b` to a field `a` writes, and of `a` to a field `b` writes, is at the
  kernel's own point (i, k): one thread then sees exactly the values it would have seen unfused;
* `b`'s per-column prologue (hoisted k-invariant loads) reads nothing `a` writes (it now runs
  before `a`'s body). Host-computed scalar arguments of the same name and another value are
  renamed apart (`a0_b`).

A map kernel `b` right after a scan `a` runs inside the scan's level loop (the consumer computed
at the scan's levels, Halide's compute_at), when the scan has produced everything `b` reads of it:
* the same columns, `b`'s levels among the scan's (constant bounds; a guard where fewer);
* `b` reads the scan's outputs in its own column at the level being computed or at levels the
  scan has finished (above it in a backward scan, below it in a forward one), and never writes
  them; the scan does not read what `b` writes at levels `b` has written by then; `b` reads its
  own outputs only at its own point or at levels it never writes.
Fused, an output `b` reads at the scan's level or the one finished just before comes from a
register (a window of one level carried like the scan's state), and a temporary nobody else
loads is no longer stored: the bytes of writing and reading it back go.

Column fusion (`columns=True`, the schedule's `fuse_columns`): a map `b` that reads a map `a`'s
outputs in its own column at levels on one side of its own (k and k - 1, or k and k + 1) runs
with `a` as one column walk: `a` becomes a stateless scan in that direction (`Kernel.column`: a
thread per column, levels in order; legal since a map that reads its outputs only at its own point
gives the same values in any order), and `b` joins it as above, the level just walked from a
register. The same holds the other way round: a scan `b` that reads a map `a`'s outputs in its column at
its own level or at levels it has walked runs with `a` as one walk in the scan's direction (the
solvers' maps before their forward sweep), when `a` does not read what the scan has written at
levels already walked. It trades the parallelism over levels for the bytes of the re-read (and
of a temporary nobody else loads).

Fusion reorders accesses of different members, so two field arguments sharing memory could give
other results: each field argument written by one member and each field argument another member
touches are added to `ProgramIR.distinct`, and the host plan refuses such calls (as for copy
forwarding). A fused kernel is named after its first and last member (`..._k3to5`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from icoforge.backend.ir import ir, recompute, renaming
from icoforge.backend.ir.recompute import own_point

_MEMBER = re.compile(r"^(.*)_k(\d+)$")
_FUSED = re.compile(r"^(.*)_k(\d+)(?:to\d+)?$")


def _loads(stmts: tuple[ir.Stmt, ...]) -> list[ir.Load]:
    return [e for e in ir.walk_body_exprs(stmts) if isinstance(e, ir.Load)]


def _only_own_point(stmts: tuple[ir.Stmt, ...], fields: set[str], program: ir.ProgramIR) -> bool:
    kinds = dict(program.dim_kinds)
    return all(own_point(e, program.field(e.field).dims, kinds) for e in _loads(stmts) if e.field in fields)


def _outer(a: ir.Domain, b: ir.Domain) -> ir.Domain | None:
    """The larger of two domains over the same columns whose levels nest (constant bounds), else None."""
    if a == b:
        return a
    if (a.hdim, a.h_start, a.h_end) != (b.hdim, b.h_start, b.h_end):
        return None
    la, lb = a.constant_levels(), b.constant_levels()
    if la is None or lb is None:
        return None
    if la[0] <= lb[0] and lb[1] <= la[1]:
        return a
    if lb[0] <= la[0] and la[1] <= lb[1]:
        return b
    return None


def _guarded(k: ir.Kernel, outer: ir.Domain) -> ir.Kernel:
    """`k` over the levels of `outer` (which contain its own), its work guarded to its own levels."""
    if k.domain == outer:
        return k
    lo, hi = k.domain.constant_levels()
    kk = ir.KIndex()
    inside = ir.Binary("and_", ir.Binary("greater_equal", kk, ir.Const(lo, "int32"), "bool"),
                       ir.Binary("less_equal", kk, ir.Const(hi, "int32"), "bool"), "bool")  # fmt: skip
    return dataclasses.replace(k, domain=outer, body=(ir.If(inside, k.body, ()),))


def can_fuse(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> bool:
    """Whether `b`, launched right after `a`, can run inside `a`'s threads (see the module doc)."""
    if a.is_scan or b.is_scan or _outer(a.domain, b.domain) is None:
        return False
    wa, wb = set(a.fields_written()), set(b.fields_written())
    if any(e.field in wa for e in _loads(b.prologue)):
        return False
    return _only_own_point(b.body, wa, program) and _only_own_point(a.all_stmts(), wb, program)


def _merged_name(a: str, b: str) -> str:
    """`p_k3` (or `p_k3to4`) and `p_k5` -> `p_k3to5`."""
    ma, mb = _FUSED.match(a), _MEMBER.match(b)
    if ma and mb and ma.group(1) == mb.group(1):
        return f"{ma.group(1)}_k{ma.group(2)}to{mb.group(2)}"
    return f"{a}_{b.rsplit('_', 1)[-1]}"


def _shared_prologue(a: ir.Kernel, b: ir.Kernel) -> set[str]:
    """Names of `b`'s k-invariant prologue values that `a` computes alike (same name, same
    expression over shared names only): `b` uses `a`'s, typically the neighbour indices."""
    mine = {s.var.name: s.value for s in a.prologue if isinstance(s, ir.Let) and not s.declared}
    shared: set[str] = set()
    for s in b.prologue:
        if isinstance(s, ir.Let) and not s.declared and mine.get(s.var.name) == s.value:
            if all(e.name in shared for e in s.value.walk() if isinstance(e, ir.Var)):
                shared.add(s.var.name)
    return shared


def _args_apart(a: ir.Kernel, b: ir.Kernel) -> ir.Kernel:
    """`b` with its host-computed arguments renamed where `a` has one of that name with another
    value (both name theirs `a0`, `a1`, ...)."""
    mine = {p.name: v for p, v in a.args}
    names = set(mine) | {p.name for p, _ in b.args}
    mapping: dict[str, ir.Param] = {}
    for p, v in b.args:
        if p.name in mine and mine[p.name] != v:
            new, n = f"{p.name}_b", 1
            while new in names:
                n += 1
                new = f"{p.name}_b{n}"
            names.add(new)
            mapping[p.name] = ir.Param(new, p.dtype)
    if not mapping:
        return b

    def fn(e: ir.Expr) -> ir.Expr:
        return mapping.get(e.name, e) if isinstance(e, ir.Param) else e

    return dataclasses.replace(
        b,
        body=ir.rewrite_stmts(b.body, fn),
        prologue=ir.rewrite_stmts(b.prologue, fn),
        state=tuple(dataclasses.replace(st, init=ir.rewrite(st.init, fn)) for st in b.state),
        args=tuple((mapping.get(p.name, p), v) for p, v in b.args),
    )


def merge(a: ir.Kernel, b: ir.Kernel) -> ir.Kernel:
    """One kernel running `a` then `b` at each point. `b`'s variables are renamed where they clash
    with `a`'s, except the prologue values both compute alike: those are computed once; so are its
    host-computed arguments."""
    b = _args_apart(a, b)
    shared = _shared_prologue(a, b)
    prologue_b = tuple(s for s in b.prologue if not (isinstance(s, ir.Let) and s.var.name in shared))
    taken = renaming.variables(a.all_stmts())
    own = renaming.variables(prologue_b + b.body)
    mapping: dict[str, str] = {}
    for name in sorted((own & taken) - shared):
        new, n = f"{name}_b", 1
        while new in taken or new in own or new in mapping.values():
            n += 1
            new = f"{name}_b{n}"
        mapping[name] = new
    args = dict((p.name, (p, v)) for p, v in (*a.args, *b.args))
    return dataclasses.replace(
        a,
        name=_merged_name(a.name, b.name),
        prologue=a.prologue + renaming.rename_vars(prologue_b, mapping),
        body=a.body + renaming.rename_vars(b.body, mapping),
        args=tuple(args.values()),
    )


# --- a map into the scan before it ---------------------------------------------------------------


def _column_offsets(stmts: tuple[ir.Stmt, ...], field: str, program: ir.ProgramIR) -> set[int] | None:
    """The level offsets `c` of the loads of `field` (at `k + c`) in `stmts`; None if one is in
    another column or at a level that is not `k + c`."""
    kinds = dict(program.dim_kinds)
    offsets: set[int] = set()
    for e in _loads(stmts):
        if e.field != field:
            continue
        dims = program.field(field).dims
        c = recompute.level_offset(e.index[-1]) if dims and kinds.get(dims[-1]) == "vertical" else None
        if c is None or not all(isinstance(x, ir.HIndex) and kinds.get(d) == "horizontal" for x, d in zip(e.index[:-1], dims[:-1])):
            return None
        offsets.add(c)
    return offsets


def _without_own_point_loads(stmts: tuple[ir.Stmt, ...], field: str) -> tuple[ir.Stmt, ...]:
    """`stmts` with the loads of `field` at level `k` itself replaced by a constant."""
    def fn(e: ir.Expr) -> ir.Expr:
        own = isinstance(e, ir.Load) and e.field == field and recompute.level_offset(e.index[-1]) == 0
        return _zero(e.dtype) if own else e

    return ir.rewrite_stmts(stmts, fn)


def _finished(scan: ir.Kernel, c: int) -> bool:
    """Whether level `k + c` comes before level `k` in the scan's walk."""
    return c > 0 if not scan.forward else c < 0


def can_fuse_into_scan(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> bool:
    """Whether the map `b`, launched right after the scan `a`, can run inside `a`'s level loop."""
    if not a.is_scan or b.is_scan or _outer(a.domain, b.domain) != a.domain:  # b's levels among a's
        return False
    la, lb = a.domain.constant_levels(), b.domain.constant_levels()
    if la is None or lb is None:
        return False
    wa, wb = set(a.fields_written()), set(b.fields_written())
    if wa & wb or any(e.field in wa for e in _loads(b.prologue)):
        return False
    for f in wa:  # b reads the scan's outputs where the scan has computed them
        offsets = _column_offsets(b.all_stmts(), f, program)
        if offsets is None or any(c != 0 and not _finished(a, c) for c in offsets):
            return False
    for f in wb:
        # the scan must not see what b wrote at the levels already walked
        offsets = _column_offsets(a.all_stmts() + tuple(ir.Let(st.var, st.init) for st in a.state), f, program)
        if offsets is None or any(_finished(a, c) for c in offsets):
            return False
        # b reads its own outputs at its own point, or at levels b never writes (the walk order
        # of the scan would otherwise decide what it sees)
        levels = recompute.stmts_levels_read(_without_own_point_loads(b.body, f), f, *lb)
        if _column_offsets(b.body, f, program) is None or levels is None or any(lo <= lb[1] and hi >= lb[0] for lo, hi in levels):
            return False
    return True


def _fresh(name: str, taken: set[str]) -> str:
    new, n = name, 1
    while new in taken:
        n += 1
        new = f"{name}{n}"
    taken.add(new)
    return new


def _zero(dtype: str) -> ir.Const:
    return ir.Const(False if dtype == "bool" else 0.0 if dtype in ir.FLOAT_DTYPES else 0, dtype)


def merge_into_scan(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> ir.Kernel:
    """The scan `a` with `b`'s work at each of its levels (see the module doc); loads of the
    scan's top-level outputs at the level being computed, or the one finished just before, read
    registers."""
    la, lb = a.domain.constant_levels(), b.domain.constant_levels()
    b = _state_apart(_args_apart(a, b), renaming.variables(a.all_stmts()) | {st.var.name for st in a.state})
    m = merge(a, _guarded(b, a.domain))  # b's levels may be fewer
    head, tail = list(m.body[: len(a.body)]), m.body[len(a.body):]
    state, updates = [*m.state, *b.state], []  # b's state: a scan joining a column walk
    taken = renaming.variables(m.all_stmts()) | {st.var.name for st in state}
    step = 1 if not a.forward else -1  # the level finished just before k is k + step
    stores = [s.field for s in ir.walk_stmts(a.body) if isinstance(s, ir.Store)]
    for pos, s in enumerate(list(head)):
        if not (isinstance(s, ir.Store) and stores.count(s.field) == 1):  # one store, at top level
            continue
        field, dtype = s.field, program.field(s.field).dtype
        # a variable the scan assigns again after the store (its state) is copied: the map runs later
        later = {x.var.name for x in ir.walk_stmts(tuple(a.body[pos + 1:])) if isinstance(x, ir.Let) and x.declared}
        stable = isinstance(s.value, ir.Var) and s.value.name not in later
        value = s.value if stable else ir.Var(_fresh(f"{field}_now", taken), dtype)
        if value is not s.value:
            head[pos] = (ir.Let(value, s.value), ir.Store(field, value))
        window = ir.Var(_fresh(f"{field}_prev", taken), dtype)
        reads = recompute.stmts_levels_read(tail, field, *lb)
        # the finished level is in a register when the scan has walked it at every level b reads it
        from_window = reads is not None and all(la[0] <= lo and hi <= la[1] for lo, hi in reads)
        used_window = False

        def fn(e: ir.Expr) -> ir.Expr:
            nonlocal used_window
            if isinstance(e, ir.Load) and e.field == field:
                c = recompute.level_offset(e.index[-1])
                if c == 0:
                    return value
                if c == step and from_window:
                    used_window = True
                    return window
            return e

        tail = ir.rewrite_stmts(tail, fn)
        if used_window:
            state.append(ir.ScanState(window, _zero(dtype)))
            updates.append(ir.Let(window, value, declared=True))
    flat: list[ir.Stmt] = []
    for s in head:
        flat.extend(s if isinstance(s, tuple) else (s,))
    return dataclasses.replace(m, body=(*flat, *tail, *updates), state=tuple(state))


def _state_apart(b: ir.Kernel, taken: set[str]) -> ir.Kernel:
    """`b` with its state variables renamed away from `taken` (merge renames body variables only)."""
    mapping = {st.var.name: _fresh(st.var.name, taken | renaming.variables(b.all_stmts())) for st in b.state if st.var.name in taken}
    if not mapping:
        return b
    state = tuple(ir.ScanState(ir.Var(mapping.get(st.var.name, st.var.name), st.var.dtype), st.init) for st in b.state)
    return dataclasses.replace(b, body=renaming.rename_vars(b.body, mapping), prologue=renaming.rename_vars(b.prologue, mapping), state=state)


def _loaded(program: ir.ProgramIR) -> set[str]:
    return {e.field for k in program.kernels() for e in k.exprs() if isinstance(e, ir.Load)}


def _unstored_temporaries(program: ir.ProgramIR, loaded_before: set[str]) -> ir.ProgramIR:
    """Temporaries that were loaded before fusion and are not any more (read from registers after
    a scan fusion): their stores and allocations go."""
    loaded = _loaded(program)
    dead = {t.name for t in program.temporaries if t.name in loaded_before and t.name not in loaded}
    if not dead:
        return program

    def without_stores(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.If):
                out.append(ir.If(s.cond, without_stores(s.then), without_stores(s.orelse)))
            elif not (isinstance(s, ir.Store) and s.field in dead):
                out.append(s)
        return tuple(out)

    def drop(k: ir.Kernel) -> ir.Kernel:
        return dataclasses.replace(k, body=without_stores(k.body))

    program = ir.map_kernels(program, drop)
    return dataclasses.replace(program, temporaries=tuple(t for t in program.temporaries if t.name not in dead))


def _fields(step: ir.Step) -> tuple[set[str], set[str]]:
    """(fields read, fields written) by the kernels of a step."""
    ks = ir.step_kernels(step)
    return {f for k in ks for f in k.fields_read()}, {f for k in ks for f in k.fields_written()}


def _independent(a: ir.Step, b: ir.Step) -> bool:
    """Whether the two steps may run in either order: neither writes what the other touches."""
    (ra, wa), (rb, wb) = _fields(a), _fields(b)
    return not (ra & wb or wa & rb or wa & wb)


def column_direction(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> bool | None:
    """For two maps: the walk (True: forward, False: backward) in which `b` finds every output of
    `a` it reads, in its own column, already computed; None if there is none, or if `b` reads them
    at its own point only (map fusion's case), or if `a` reads its own outputs elsewhere than at
    its own point (the order of its levels would then matter)."""
    if a.is_scan or b.is_scan:
        return None
    written = set(a.fields_written())
    if not _only_own_point(a.all_stmts(), written, program):
        return None
    offsets: set[int] = set()
    for f in written:
        found = _column_offsets(b.all_stmts(), f, program)
        if found is None:
            return None
        offsets |= found
    if offsets <= {0}:
        return None
    if all(c <= 0 for c in offsets):
        return True
    return False if all(c >= 0 for c in offsets) else None


def can_fuse_scan_after_map(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> bool:
    """Whether the scan `b`, launched right after the map `a`, can walk its column with `a` (module
    doc): `a` walked first at each level in `b`'s direction."""
    if a.is_scan or not b.is_scan or _outer(a.domain, b.domain) != a.domain:  # b's levels among a's
        return False
    if a.domain.constant_levels() is None or b.domain.constant_levels() is None:
        return False
    wa, wb = set(a.fields_written()), set(b.fields_written())
    if wa & wb or not _only_own_point(a.all_stmts(), wa, program):  # a's levels in any order
        return False
    before_walk = b.prologue + tuple(ir.Let(st.var, st.init) for st in b.state)
    if any(e.field in wa for e in _loads(before_walk)):  # b reads those before a has run
        return False
    walk = dataclasses.replace(a, column=True, forward=b.forward)
    for f in wa:  # b reads a's outputs where a has computed them
        offsets = _column_offsets(b.all_stmts(), f, program)
        if offsets is None or any(c != 0 and not _finished(walk, c) for c in offsets):
            return False
    for f in wb:  # a must not see what b wrote at the levels already walked
        offsets = _column_offsets(a.all_stmts(), f, program)
        if offsets is None or any(_finished(walk, c) for c in offsets):
            return False
    return True


# Whether a fusion that runs a map's levels in one thread per column may be made for (a, b): the
# schedule's column-count rule (pipeline.fuse), which also says why where it refuses one
WalkRule = Callable[[ir.Kernel, ir.Kernel], bool]


def _fusion(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR, columns: bool = False, walk_ok: WalkRule | None = None) -> ir.Kernel | None:
    """`a` and `b` as one kernel, if they can be fused."""
    if can_fuse(a, b, program):
        outer = _outer(a.domain, b.domain)
        return merge(_guarded(a, outer), _guarded(b, outer))
    walk = _walk_fusion(a, b, program, columns)
    return walk if walk is None or walk_ok is None or walk_ok(a, b) else None


def _walk_fusion(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR, columns: bool) -> ir.Kernel | None:
    """`a` and `b` as one column walk (a map inside a scan, or two maps walking a column)."""
    if can_fuse_into_scan(a, b, program):
        return merge_into_scan(a, b, program)
    forward = column_direction(a, b, program) if columns else None
    if forward is not None:
        walk = dataclasses.replace(a, column=True, forward=forward)
        if can_fuse_into_scan(walk, b, program):
            return merge_into_scan(walk, b, program)
    if columns and can_fuse_scan_after_map(a, b, program):
        return merge_into_scan(dataclasses.replace(a, column=True, forward=b.forward), b, program)
    return None


def fuse_kernels(program: ir.ProgramIR, columns: bool = False, walk_ok: WalkRule | None = None) -> ir.ProgramIR:
    """Fuse greedily in program order: each top-level kernel joins the nearest earlier kernel it
    can be fused with (`can_fuse`, `can_fuse_into_scan`, with `columns` also column fusion), moving
    up past the steps in between when it is independent of them (they neither write what it
    touches nor touch what it writes). Kernels under a host conditional stay as they are.
    `walk_ok` may refuse a fusion into a column walk (the schedule's column-count rule)."""
    steps: list[ir.Step] = []
    groups: list[list[ir.Kernel]] = []
    crossed: list[tuple[ir.Kernel, ir.Step]] = []  # (kernel moved up, a step it moved past)
    for s in program.steps:
        joined = False
        for pos in range(len(steps) - 1, -1, -1) if isinstance(s, ir.Kernel) else ():
            t = steps[pos]
            fused = _fusion(t, s, program, columns, walk_ok) if isinstance(t, ir.Kernel) else None
            if fused is not None:
                crossed += [(s, u) for u in steps[pos + 1:]]
                steps[pos] = fused
                groups[pos].append(s)
                joined = True
                break
            if not _independent(t, s):
                break
        if not joined:
            steps.append(s)
            groups.append([s] if isinstance(s, ir.Kernel) else [])
    # field arguments sharing memory would see accesses in another order: refused at call time
    params = {p.name for p in program.params if isinstance(p, ir.FieldParam)}
    pairs = dict.fromkeys(program.distinct)

    def keep_apart(writer: ir.Step, other: ir.Step) -> None:
        reads, writes = _fields(other)
        for w in sorted(_fields(writer)[1] & params):
            pairs.update(dict.fromkeys((w, t) for t in sorted((reads | writes) & params) if t != w))

    for members in groups:
        for i, m in enumerate(members):
            for j, o in enumerate(members):
                if i != j:
                    keep_apart(m, o)
    for moved, past in crossed:
        keep_apart(moved, past)
        keep_apart(past, moved)
    return _unstored_temporaries(dataclasses.replace(program, steps=tuple(steps), distinct=tuple(pairs)), _loaded(program))
