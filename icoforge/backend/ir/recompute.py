"""How a reader recomputes a temporary instead of loading it (the rewriting half of inline.py).

The producer `P` of temporary `T` is cut down to what `T`'s value needs (`Producer`). Each load
`T[idx]` of a reader is then replaced in one of two forms:

* **statements** where the load is evaluated unconditionally (not under a lazy `?:`, `&&`, `||`):
  `P`'s statements, their variables renamed and the point moved to `idx`, are placed before the
  reader's statement, ending in `tmp_2_at0 = <value>`; the load becomes that variable. The code
  stays as readable as `P`'s own and its size grows linearly (a reduction over skip values is a
  chain of `acc = ok ? acc + x : acc`, a tree of 2^n nodes written as one expression). The load
  happened unconditionally, so the point is one `P` computed: no new out-of-bounds access.
  A second load of the same point in the same branch reuses the variable.
* **an expression** where the load is lazy: `P`'s value as one expression (its `Let`s substituted,
  its conditionals as lazy `?:`), so it is only evaluated when the load was.

Both compute exactly the operations `P` computed, in the same order: results are bit-identical.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from icoforge.backend.ir import ir, renaming


def own_point(e: ir.Expr, dims: tuple[str, ...], kinds: dict[str, str]) -> bool:
    """`e` loads its field at the kernel's own (i, k): no offset, no neighbour, no local slot."""
    own = {"horizontal": ir.HIndex, "vertical": ir.KIndex}
    return (
        isinstance(e, ir.Load)
        and len(e.index) == len(dims)
        and all(kinds.get(d) in own and isinstance(idx, own[kinds[d]]) for idx, d in zip(e.index, dims))
    )


def size(e: ir.Expr, cap: int) -> int:
    """Node count of `e` as a tree, stopping once above `cap` (substituted Lets share subtrees)."""
    n, stack = 0, [e]
    while stack and n <= cap:
        x = stack.pop()
        n += 1
        stack.extend(x.children())
    return n


def _substitute_vars(e: ir.Expr, env: dict[str, ir.Expr | None]) -> ir.Expr:
    return ir.rewrite(e, lambda x: env.get(x.name) or x if isinstance(x, ir.Var) else x)


def _evaluated(stmts: tuple[ir.Stmt, ...], env: dict[str, ir.Expr | None]) -> dict[str, ir.Expr | None] | None:
    """`env` after `stmts` run symbolically: every variable as an expression of the kernel's point.
    A variable assigned in the branches of an `If` becomes `cond ? then : else` (evaluated lazily,
    as the branches were). None when `stmts` store or use a variable with no value yet."""
    env = dict(env)
    for s in stmts:
        if isinstance(s, ir.Let):
            if any(isinstance(x, ir.Var) and x.name in env and env[x.name] is None for x in s.value.walk()):
                return None
            env[s.var.name] = _substitute_vars(s.value, env)
        elif isinstance(s, ir.Declare):
            env[s.var.name] = None
        elif isinstance(s, ir.If):
            cond = _substitute_vars(s.cond, env)
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
    stores it more than once or under a condition, or reads scan state."""
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


def names_used(stmts: tuple[ir.Stmt, ...], kind: type) -> set:
    found = (x for e in ir.walk_body_exprs(stmts) for x in e.walk() if isinstance(x, kind))
    return {x.name for x in found} if kind is ir.Var else set(found)


def fields_loaded(e: ir.Expr) -> set[str]:
    """Names of the fields `e` loads."""
    return {x.field for x in e.walk() if isinstance(x, ir.Load)}


def dead_code_removed(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
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
        used |= names_used((s,), ir.Var)
    return tuple(reversed(kept))


@dataclass(frozen=True)
class Producer:
    """What a reader needs to recompute temporary `field` of kernel `P`."""

    field: str
    dims: tuple[str, ...]
    kinds: tuple[tuple[str, str], ...]
    dtype: str  # the temporary's: a stored value is converted to it
    stmts: tuple[ir.Stmt, ...]  # P's statements the value needs (its other stores gone)
    value: ir.Expr  # the stored value, over those statements' variables
    expr: ir.Expr  # the same as one expression
    args: tuple[tuple[ir.Param, ir.Expr], ...]  # P's host-computed arguments it uses

    @classmethod
    def of(cls, p: ir.Kernel, t: ir.Temporary, kinds: dict[str, str]) -> "Producer | None":
        expr = producer_expression(p, t.name)
        if expr is None:
            return None
        body = dead_code_removed(tuple(s for s in p.body if not isinstance(s, ir.Store) or s.field == t.name))
        *stmts, store = body
        params = names_used(body, ir.Param)
        args = tuple((q, v) for q, v in p.args if q in params)
        return cls(t.name, t.dims, tuple(kinds.items()), t.dtype, tuple(stmts), store.value, expr, args)

    def statement_nodes(self) -> int:
        return sum(size(e, 1 << 30) for e in ir.walk_body_exprs(self.stmts)) + size(self.value, 1 << 30)

    def point(self, load: ir.Load) -> tuple[ir.Expr | None, ir.Expr | None]:
        """(horizontal index, level) at which `load` reads the temporary."""
        h = k = None
        kinds = dict(self.kinds)
        for d, idx in zip(self.dims, load.index):
            if kinds.get(d) == "horizontal":
                h = idx
            elif kinds.get(d) == "vertical":
                k = idx
        return h, k

    def converted(self, e: ir.Expr) -> ir.Expr:
        return e if e.dtype == self.dtype else ir.Cast(e, self.dtype)

    def expression_at(self, load: ir.Load) -> ir.Expr:
        """The stored value as one expression, at the point `load` reads (the lazy form)."""
        return self.converted(moved(self.expr, *self.point(load)))

    def with_params(self, renamed: dict[ir.Param, ir.Param]) -> "Producer":
        if not renamed:
            return self

        def fn(x: ir.Expr) -> ir.Expr:
            return renamed.get(x, x) if isinstance(x, ir.Param) else x

        return dataclasses.replace(
            self,
            stmts=ir.rewrite_stmts(self.stmts, fn),
            value=ir.rewrite(self.value, fn),
            expr=ir.rewrite(self.expr, fn),
            args=tuple((renamed.get(q, q), v) for q, v in self.args),
        )


def _to_point(h: ir.Expr | None, k: ir.Expr | None):
    """The rewrite that replaces the kernel's own point (`i`, `k`) by `h` and `k`."""

    def fn(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.HIndex) and h is not None:
            return h
        if isinstance(x, ir.KIndex) and k is not None:
            return k
        return x

    return fn


def moved(e: ir.Expr, h: ir.Expr | None, k: ir.Expr | None) -> ir.Expr:
    """`e` evaluated at horizontal index `h` and level `k` instead of the kernel's own point."""
    return ir.rewrite(e, _to_point(h, k))


# --- where a reader loads the temporary -----------------------------------------------------------


def eager_loads(e: ir.Expr, field: str) -> list[ir.Load]:
    """Loads of `field` that evaluating `e` always performs (not in a lazy branch)."""
    if isinstance(e, ir.Load):
        return [e] if e.field == field else []
    if isinstance(e, ir.Select):
        return eager_loads(e.cond, field)
    if isinstance(e, ir.Binary) and e.op in ("and_", "or_"):
        return eager_loads(e.lhs, field)
    return [x for c in e.children() for x in eager_loads(c, field)]


def gathers(e: ir.Expr) -> bool:
    """Whether `e` loads through a neighbour table."""
    return any(isinstance(x, ir.Table) for x in e.walk())


def eager_neighbour_points(stmts: tuple[ir.Stmt, ...], field: str, h_pos: int) -> int:
    """Distinct points of `field` that `stmts` load unconditionally through a neighbour table
    (its horizontal index, position `h_pos`, is a table lookup) on one path through them: a point
    runs one branch of an `If`, so the branch that loads more counts (an upwind choice loads one
    neighbour either way)."""
    loads = {x for s in stmts for e in ir.stmt_exprs(s) for x in eager_loads(e, field)}
    inner = sum(max(eager_neighbour_points(b, field, h_pos) for b in (s.then, s.orelse)) for s in stmts if isinstance(s, ir.If))
    return sum(1 for x in loads if gathers(x.index[h_pos])) + inner


def reads(stmts: tuple[ir.Stmt, ...], field: str, known: frozenset[ir.Load] = frozenset()) -> tuple[int, int]:
    """(statement copies, expression copies) of the producer that `_rewritten` puts into `stmts`:
    one statement copy per point loaded eagerly (once per branch), one expression per lazy load of
    a point not computed before."""
    from collections import Counter

    seen, eager, lazy = set(known), 0, 0
    for s in stmts:
        for e in ir.stmt_exprs(s):
            now = eager_loads(e, field)
            for load in dict.fromkeys(now):
                if load not in seen:
                    eager += 1
                    seen.add(load)
            rest = Counter(x for x in e.walk() if isinstance(x, ir.Load) and x.field == field) - Counter(now)
            lazy += sum(n for load, n in rest.items() if load not in seen)
        if isinstance(s, ir.If):
            for branch in (s.then, s.orelse):
                e2, l2 = reads(branch, field, frozenset(seen))
                eager, lazy = eager + e2, lazy + l2
    return eager, lazy


# --- the rewrite --------------------------------------------------------------------------------


class _Copies:
    """Fresh names for the copies of the producer's statements in one reader."""

    def __init__(self, prod: Producer, taken: set[str]):
        self.prod, self.taken, self.n = prod, taken, 0
        self.short = prod.field.strip("_")
        self.defined = sorted({s.var.name for s in ir.walk_stmts(prod.stmts) if isinstance(s, (ir.Let, ir.Declare))})

    def fresh(self, name: str) -> str:
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def at(self, load: ir.Load) -> tuple[tuple[ir.Stmt, ...], ir.Var]:
        """The producer's statements at `load`'s point and the variable holding the value."""
        tag = f"{self.short}_at{self.n}"
        self.n += 1
        mapping = {name: self.fresh(f"{name}_{tag}") for name in self.defined}
        var = ir.Var(self.fresh(tag), self.prod.dtype)
        copy = (*self.prod.stmts, ir.Let(var, self.prod.converted(self.prod.value)))
        return ir.rewrite_stmts(renaming.rename_vars(copy, mapping), _to_point(*self.prod.point(load))), var


def _rewritten(stmts: tuple[ir.Stmt, ...], copies: _Copies, known: dict[ir.Load, ir.Var]) -> tuple[ir.Stmt, ...]:
    prod = copies.prod
    known = dict(known)  # what a branch computes stays in the branch

    def replace(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Load) and e.field == prod.field:
            return known.get(e) or prod.expression_at(e)
        return e

    out: list[ir.Stmt] = []
    for s in stmts:
        for e in ir.stmt_exprs(s):
            for load in dict.fromkeys(eager_loads(e, prod.field)):
                if load not in known:
                    pre, known[load] = copies.at(load)
                    out.extend(pre)
        if isinstance(s, (ir.Let, ir.Store)):
            s = dataclasses.replace(s, value=ir.rewrite(s.value, replace))
        elif isinstance(s, ir.If):
            s = ir.If(ir.rewrite(s.cond, replace), _rewritten(s.then, copies, known), _rewritten(s.orelse, copies, known))
        out.append(s)
    return tuple(out)


def with_args(reader: ir.Kernel, prod: Producer, taken: set[str]) -> tuple[ir.Kernel, Producer]:
    """`reader` with the producer's host-computed arguments; one whose name the reader already
    uses for another value is renamed (`a0` -> the next free `aN`)."""
    own = {p.name: v for p, v in reader.args}
    names = taken | set(own)
    renamed: dict[ir.Param, ir.Param] = {}
    new_args = list(reader.args)
    for p, v in prod.args:
        if own.get(p.name) == v:
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
    return dataclasses.replace(reader, args=tuple(new_args)), prod.with_params(renamed)


def inlined_into(reader: ir.Kernel, prod: Producer, program_names: set[str]) -> ir.Kernel:
    """`reader` recomputing `prod`'s temporary wherever it loaded it."""
    reader, prod = with_args(reader, prod, program_names)
    copies = _Copies(prod, renaming.variables(reader.all_stmts()) | {s.var.name for s in reader.state} | program_names)

    def expr_only(x: ir.Expr) -> ir.Expr:
        return prod.expression_at(x) if isinstance(x, ir.Load) and x.field == prod.field else x

    return dataclasses.replace(
        reader,
        body=_rewritten(reader.body, copies, {}),
        prologue=ir.rewrite_stmts(reader.prologue, expr_only),
        state=tuple(dataclasses.replace(s, init=ir.rewrite(s.init, expr_only)) for s in reader.state),
    )


# --- which levels a recomputed expression reads ---------------------------------------------------


def level_offset(e: ir.Expr) -> int | None:
    """`c` for a level index `k + c` (`k`, `k - 1`, ...), else None."""
    if isinstance(e, ir.KIndex):
        return 0
    if isinstance(e, ir.Binary) and e.op in ("plus", "minus") and isinstance(e.lhs, ir.KIndex) and isinstance(e.rhs, ir.Const):
        return int(e.rhs.value) * (1 if e.op == "plus" else -1)
    return None


_FLIP = {"less": "greater", "less_equal": "greater_equal", "greater": "less", "greater_equal": "less_equal", "eq": "eq", "not_eq": "not_eq"}
_NOT = {"less": "greater_equal", "less_equal": "greater", "greater": "less_equal", "greater_equal": "less", "eq": "not_eq", "not_eq": "eq"}


def narrowed(lo: int, hi: int, cond: ir.Expr, holds: bool) -> tuple[int, int]:
    """The levels `k` in [lo, hi] for which `cond` (a comparison of `k + c` with a constant) has
    the truth value `holds`; [lo, hi] itself when `cond` is of another form. Both sides of an
    `&&` that holds (or of an `||` that does not) narrow."""
    if isinstance(cond, ir.Binary) and (cond.op, holds) in (("and_", True), ("or_", False)):
        return narrowed(*narrowed(lo, hi, cond.lhs, holds), cond.rhs, holds)
    if not (isinstance(cond, ir.Binary) and cond.op in _FLIP):
        return lo, hi
    op, a, b = cond.op, cond.lhs, cond.rhs
    if isinstance(a, ir.Const):
        op, a, b = _FLIP[op], b, a
    c = level_offset(a)
    if c is None or not isinstance(b, ir.Const) or isinstance(b.value, float):
        return lo, hi
    op = op if holds else _NOT[op]
    bound = int(b.value) - c  # k OP bound
    if op == "less":
        return lo, min(hi, bound - 1)
    if op == "less_equal":
        return lo, min(hi, bound)
    if op == "greater":
        return max(lo, bound + 1), hi
    if op == "greater_equal":
        return max(lo, bound), hi
    if op == "eq":
        return max(lo, bound), min(hi, bound)
    return lo, hi


def levels_read(e: ir.Expr, field: str, lo: int, hi: int) -> list[tuple[int, int]] | None:
    """The level ranges at which evaluating `e` at a point of level `k` in [lo, hi] loads `field`,
    following the conditions of `?:` (a branch whose condition cannot hold reads nothing). None
    when a load's level is not `k + c`."""
    if lo > hi:
        return []
    if isinstance(e, ir.Select):
        parts = [levels_read(e.cond, field, lo, hi), levels_read(e.a, field, *narrowed(lo, hi, e.cond, True)),
                 levels_read(e.b, field, *narrowed(lo, hi, e.cond, False))]  # fmt: skip
    else:
        parts = [levels_read(c, field, lo, hi) for c in e.children()]
        if isinstance(e, ir.Load) and e.field == field:
            c = level_offset(e.index[-1]) if e.index else None
            parts.append(None if c is None else [(lo + c, hi + c)])
    if any(p is None for p in parts):
        return None
    return [r for p in parts for r in p]


def stmts_levels_read(stmts: tuple[ir.Stmt, ...], field: str, lo: int, hi: int) -> list[tuple[int, int]] | None:
    """`levels_read` over statements: an `If` on the level narrows the levels of its branches."""
    found: list[tuple[int, int]] = []
    for s in stmts:
        if isinstance(s, ir.If):
            parts = [levels_read(s.cond, field, lo, hi), stmts_levels_read(s.then, field, *narrowed(lo, hi, s.cond, True)),
                     stmts_levels_read(s.orelse, field, *narrowed(lo, hi, s.cond, False))]  # fmt: skip
        else:
            parts = [levels_read(e, field, lo, hi) for e in ir.stmt_exprs(s)]
        if any(p is None for p in parts):
            return None
        found += [r for p in parts for r in p]
    return found
