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
* no kernel from `P` to the last reader (both included) writes a field `P`'s expression reads:
  the readers then see the same inputs `P` saw;
* the expression is small (`MAX_NODES`) and the readers' copies of it too (`MAX_READER_NODES`).

The load `T[idx]` becomes the expression with the kernel's own point (`i`, `k`) replaced by
`idx`, in place: a load under a lazy `?:` stays lazy, so a guarded neighbour access (a skip value)
stays guarded. The expression and every operation in it are as `P` computed them and floating
point contraction is off in every build (codegen), so results are bit-identical. A stored value
converted to `T`'s dtype is converted alike (`Cast`).

Whether to inline is a byte decision (`cost`): the store and the reads of `T` go, and each reader
now reads the producer's inputs it did not read before. A field access over a kernel's domain
counts 1 for a field with a vertical dimension and `WEIGHT_2D` for one without (at tens of levels
those are small); `auto` inlines when the count goes down. `all` inlines wherever it is legal.

The pass moves reads of the producer's inputs past the kernels between producer and reader; like
copy forwarding, it records in `ProgramIR.distinct` the field arguments those kernels write, so a
call whose arguments share memory is refused instead of computing something else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from icoforge.backend import ir

POLICIES = ("auto", "all", "off")
MAX_NODES = 400  # the producer's expression, Lets substituted
MAX_READER_NODES = 1600  # all copies of it in one reader
WEIGHT_2D = 0.1  # a field without vertical dimension, against one with


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

    def describe(self) -> str:
        cost = f"saves {self.saved:g}, adds {self.added:g} field accesses, {self.copies} cop{'y' if self.copies == 1 else 'ies'}"
        verdict = "inlined" if self.inlined else f"kept: {self.reason}"
        priced = self.inlined or self.saved or self.added  # kept before the byte model ran: no cost
        return f"{self.temporary} ({self.producer} -> {', '.join(self.readers) or '-'}): {verdict}" + (f"; {cost}" if priced else "")


# --- the producer's expression ------------------------------------------------------------------


def _size(e: ir.Expr, cap: int) -> int:
    """Node count of `e` as a tree, stopping once above `cap` (substituted Lets share subtrees)."""
    n, stack = 0, [e]
    while stack and n <= cap:
        x = stack.pop()
        n += 1
        stack.extend(x.children())
    return n


def _substitute_vars(e: ir.Expr, env: dict[str, ir.Expr]) -> ir.Expr:
    return ir.rewrite(e, lambda x: env.get(x.name, x) if isinstance(x, ir.Var) else x)


def _evaluated(stmts: tuple[ir.Stmt, ...], env: dict[str, ir.Expr | None]) -> dict[str, ir.Expr | None] | None:
    """`env` after `stmts` run symbolically: every variable as an expression of the kernel's point.
    A variable assigned in the branches of an `If` becomes `cond ? then : else` (evaluated lazily,
    as the branches were). None when `stmts` store or use a variable with no value yet."""
    env = dict(env)
    for s in stmts:
        if isinstance(s, ir.Let):
            if any(isinstance(x, ir.Var) and env.get(x.name, x) is None for x in s.value.walk()):
                return None
            env[s.var.name] = _substitute_vars(s.value, {k: v for k, v in env.items() if v is not None})
        elif isinstance(s, ir.Declare):
            env[s.var.name] = None
        elif isinstance(s, ir.If):
            cond = _substitute_vars(s.cond, {k: v for k, v in env.items() if v is not None})
            then, orelse = _evaluated(s.then, env), _evaluated(s.orelse, env)
            if then is None or orelse is None:
                return None
            for name in env:  # branch-local names are gone after the If
                a, b = then[name], orelse[name]
                if a is not b:
                    env[name] = None if a is None or b is None else ir.Select(cond, a, b, a.dtype)
        else:
            return None
    return env


def producer_expression(p: ir.Kernel, field: str) -> ir.Expr | None:
    """The value `p` stores to `field` as one expression of the kernel's point, or None when `p`
    stores it more than once or under a condition, or reads state."""
    env: dict[str, ir.Expr | None] = {}
    value = None
    for s in p.body:
        if isinstance(s, ir.Store):
            if s.field == field:
                if value is not None or any(isinstance(x, ir.Var) and env.get(x.name) is None for x in s.value.walk()):
                    return None
                value = _substitute_vars(s.value, env)
        else:
            after = _evaluated((s,), env)
            if after is None:
                return None
            env = after
    return value


def _at(e: ir.Expr, h: ir.Expr | None, k: ir.Expr | None) -> ir.Expr:
    """`e` evaluated at horizontal index `h` and level `k` instead of the kernel's own point."""

    def fn(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.HIndex) and h is not None:
            return h
        if isinstance(x, ir.KIndex) and k is not None:
            return k
        return x

    return ir.rewrite(e, fn)


def _point_of(load: ir.Load, dims: tuple[str, ...], kinds: dict[str, str]) -> tuple[ir.Expr | None, ir.Expr | None]:
    h = k = None
    for d, idx in zip(dims, load.index):
        if kinds.get(d) == "horizontal":
            h = idx
        elif kinds.get(d) == "vertical":
            k = idx
    return h, k


# --- the byte model -----------------------------------------------------------------------------


def _weight(program: ir.ProgramIR, field: str) -> float:
    kinds = dict(program.dim_kinds)
    return 1.0 if any(kinds.get(d) == "vertical" for d in program.field(field).dims) else WEIGHT_2D


def _loads_in(e: ir.Expr) -> set[str]:
    return {x.field for x in e.walk() if isinstance(x, ir.Load)}


def _accesses(program: ir.ProgramIR, k: ir.Kernel) -> float:
    fields = set(k.fields_read()) | set(k.fields_written())
    return sum(_weight(program, f) for f in fields)


# --- rewriting ----------------------------------------------------------------------------------


def _names_used(stmts: tuple[ir.Stmt, ...], kind: type) -> set:
    found = (x for e in ir.walk_body_exprs(stmts) for x in e.walk() if isinstance(x, kind))
    return {x.name for x in found} if kind is ir.Var else set(found)


def _dead_code_removed(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """`body` without the top-level statements no remaining Store depends on (an `If` goes when it
    stores nothing and defines nothing used later)."""
    used: set[str] = set()
    kept: list[ir.Stmt] = []
    for s in reversed(body):
        if isinstance(s, (ir.Let, ir.Declare)) and s.var.name not in used:
            continue
        if isinstance(s, ir.If):
            inner = tuple(ir.walk_stmts((s,)))
            defined = {x.var.name for x in inner if isinstance(x, (ir.Let, ir.Declare))}
            if not any(isinstance(x, ir.Store) for x in inner) and not defined & used:
                continue
        kept.append(s)
        used |= _names_used((s,), ir.Var)
    return tuple(reversed(kept))


def _without_store(p: ir.Kernel, field: str) -> ir.Kernel:
    body = _dead_code_removed(tuple(s for s in p.body if not (isinstance(s, ir.Store) and s.field == field)))
    used = _names_used(body, ir.Param)
    return dataclasses.replace(p, body=body, args=tuple((q, v) for q, v in p.args if q in used))


def _with_args(reader: ir.Kernel, expr: ir.Expr, args: tuple[tuple[ir.Param, ir.Expr], ...], taken: set[str]) -> tuple[ir.Kernel, ir.Expr]:
    """`reader` with the producer's host-computed arguments that `expr` uses; one with a name the
    reader already uses for another value is renamed in `expr`."""
    own = {p.name: v for p, v in reader.args}
    names = taken | set(own)
    renamed: dict[ir.Param, ir.Param] = {}
    new_args = list(reader.args)
    used = {x for x in expr.walk() if isinstance(x, ir.Param)}
    for p, v in args:
        if p not in used or own.get(p.name) == v:
            continue
        q = p
        if p.name in own:
            n = 0
            while f"a{n}" in names:
                n += 1
            q = ir.Param(f"a{n}", p.dtype)
            renamed[p] = q
        names.add(q.name)
        own[q.name] = v
        new_args.append((q, v))
    if renamed:
        expr = ir.rewrite(expr, lambda x: renamed.get(x, x) if isinstance(x, ir.Param) else x)
    return dataclasses.replace(reader, args=tuple(new_args)), expr


def _inlined_into(reader: ir.Kernel, field: str, expr: ir.Expr, dims: tuple[str, ...], kinds: dict[str, str], dtype: str) -> ir.Kernel:
    def fn(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.Load) and x.field == field:
            value = _at(expr, *_point_of(x, dims, kinds))
            return value if value.dtype == dtype else ir.Cast(value, dtype)
        return x

    return dataclasses.replace(
        reader,
        body=ir.rewrite_stmts(reader.body, fn),
        prologue=ir.rewrite_stmts(reader.prologue, fn),
        state=tuple(dataclasses.replace(s, init=ir.rewrite(s.init, fn)) for s in reader.state),
    )


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
    expr = producer_expression(p, t.name)
    if expr is None:
        return kept("its producer stores it more than once or under a condition")
    if _size(expr, MAX_NODES) > MAX_NODES:
        return kept(f"its expression has more than {MAX_NODES} nodes")
    inputs = _loads_in(expr)
    window = program.steps[site.p_pos : max(pos for pos, _ in site.readers) + 1]
    written = {f for s in window for k in ir.step_kernels(s) for f in k.fields_written()}
    if inputs & written:
        return kept(f"{', '.join(sorted(inputs & written))} written before its last reader")

    # the byte model: what goes, what comes
    rest = _without_store(p, t.name)
    saved = _accesses(program, p) - (_accesses(program, rest) if rest.fields_written() else 0.0)
    added, copies = 0.0, 0
    for _, r in site.readers:
        read = set(r.fields_read())
        saved += _weight(program, t.name)
        added += sum(_weight(program, f) for f in inputs - read)
        points = {x for x in r.exprs() if isinstance(x, ir.Load) and x.field == t.name}
        copies += len(points)
        if len(points) * _size(expr, MAX_NODES) > MAX_READER_NODES:
            return kept(f"{r.name} would hold more than {MAX_READER_NODES} nodes of it", saved=saved, added=added, copies=copies)
    cost = {"saved": saved, "added": added, "copies": copies}
    if policy == "auto" and added >= saved:
        return kept("the readers would read more than it saves", **cost)

    steps = list(program.steps)
    steps[site.p_pos] = rest
    by_name = {}
    for _, r in site.readers:
        r2, e2 = _with_args(r, expr, p.args, {q.name for q in program.params})
        by_name[r.name] = _inlined_into(r2, t.name, e2, t.dims, kinds, t.dtype)
    program = ir.map_kernels(dataclasses.replace(program, steps=tuple(steps)), lambda k: by_name.get(k.name, k))
    program = dataclasses.replace(
        program,
        steps=tuple(s for s in program.steps if not (isinstance(s, ir.Kernel) and not s.fields_written())),
        temporaries=tuple(x for x in program.temporaries if x.name != t.name),
        distinct=_distinct(program, window, inputs),
    )
    return Decision(t.name, p.name, names, True, "", **cost), program


def _distinct(program: ir.ProgramIR, window: tuple[ir.Step, ...], inputs: set[str]) -> tuple[tuple[str, str], ...]:
    """Reads of the producer's inputs now happen after the window's writes: those field arguments
    must not share memory."""
    params = [p.name for p in program.params if isinstance(p, ir.FieldParam)]
    written = {f for s in window for k in ir.step_kernels(s) for f in k.fields_written()}
    pairs = dict.fromkeys(program.distinct)
    pairs.update(dict.fromkeys((w, f) for w in params if w in written for f in params if f in inputs and f != w))
    return tuple(pairs)


# --- the pass -----------------------------------------------------------------------------------


def inline_with_decisions(program: ir.ProgramIR, policy: str = "auto") -> tuple[ir.ProgramIR, tuple[Decision, ...]]:
    """Inline temporaries one at a time, in program order, until none qualifies (each inlining
    changes what the readers read, so every decision is taken on the program as it is then).
    Returns the program and a decision per temporary of the input program."""
    if policy not in POLICIES:
        from icoforge.errors import UnknownNameError

        raise UnknownNameError("inline policy", policy, POLICIES)
    if policy == "off":
        return program, tuple(Decision(t.name, "", (), False, "inlining off") for t in program.temporaries)
    done: list[Decision] = []
    while True:
        for t in program.temporaries:
            decision, after = _consider(program, t, policy)
            if after is not None:
                done.append(decision)
                program = after
                break
        else:
            break
    kept = [_consider(program, t, policy)[0] for t in program.temporaries]
    return program, (*done, *kept)


def inline_temporaries(program: ir.ProgramIR, policy: str = "auto") -> ir.ProgramIR:
    return inline_with_decisions(program, policy)[0]
