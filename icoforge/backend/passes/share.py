"""Values computed once: branches on one condition merged, equal values named once.

The lowering names a value where it is first computed, inside the branch it is computed in
(lower_stencil.py's block-scoped memo). A value needed again inside another branch on the same
condition is computed again there: the early GTIR keeps GT4Py's `where` of a tuple as one `if_`
per element, so muphys' graupel_run evaluated its `_q_t_update` under one `if (mask)` per element
of its scan's inputs (790 pow/exp calls per level in the scan kernel; gtfn's whole program has 52).
Three rewrites of a kernel body, repeated until nothing changes:

1. **known conditions**: an `If` inside a branch of an `If` on the same condition keeps only the
   side that runs.
2. **merge**: a later `If` on the same condition on data (a named value) moves up to an earlier
   one in the same statement list and joins its branches (then after then, else after else),
   where nothing between them changes what it reads: the plain `Let`s it needs from between come
   along (before the earlier `If`), and it is refused when it reads a variable assigned in
   between, assigns one read or assigned in between, or a field one side stores is loaded or
   stored by the other.
3. **value numbering**: a `Let` whose value equals an earlier value in scope (the same block or an
   enclosing one) goes, and its readers read the earlier variable. Variables assigned more than
   once (branch results, scan state) and field loads carry a version that changes at every
   assignment or store, so a value is only shared while its inputs are unchanged.

A kernel is rewritten only where that removes calls of transcendental functions (pow, exp, log,
...): the work g++ and nvcc leave. Where it would only share cheap arithmetic they find the same
themselves, and the kernel stays as lowered, so the tuned schedules fingerprinted on it still apply.
Every operation stays as it was, on the same operands: results are bit-identical (the stored
references and the CPU/GPU equality tests check it). Conditions are compared as expressions over
single-assignment variables only. Cost: milliseconds on the dycore programs; about 2.5 s on
graupel_run (12,000 statements, five rounds; 2-core VM) on every build of it, where its C++
compile alone takes longer.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools

from icoforge.backend.ir import ir

MAX_ROUNDS = 6  # merge and value numbering uncover each other's work; a few rounds settle it


def share_program(program: ir.ProgramIR) -> ir.ProgramIR:
    """Every kernel with branches or repeated values rewritten as the module doc says."""
    return ir.map_kernels(program, share_kernel)


def share_kernel(k: ir.Kernel) -> ir.Kernel:
    if k.then is not None or k.on_chip or k.prologue:
        return k  # made by later passes (sweep fusion, hoist), which the pipeline runs after this one
    stmts = k.body
    if not _unique_names(stmts):
        return k  # value numbering renames by name: every name must be defined once
    mutable = _assigned(stmts) | {s.var.name for s in k.state}
    for _ in range(MAX_ROUNDS):
        new = _number_values(_merge(_known(stmts, {}, mutable), mutable), mutable)
        if new == stmts:
            break
        stmts = new
    if stmts == k.body or _expensive_calls(stmts) >= _expensive_calls(k.body):
        # nothing removed that g++ and nvcc would not remove themselves (cheap arithmetic under one
        # condition, their value numbering's work): the kernel stays as lowered, and a tuned schedule
        # fingerprinted on its code still applies (three REGIONAL/80 entries would have been lost)
        return k
    return dataclasses.replace(k, body=stmts)


# calls a compiler does not merge across branches and that cost tens of instructions each
EXPENSIVE = frozenset({
    "power", "exp", "log", "gamma", "cbrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
})  # fmt: skip


def _expensive_calls(stmts) -> int:
    return sum(isinstance(e, ir.Call) and e.fn in EXPENSIVE for e in ir.walk_body_exprs(tuple(stmts)))


# --- what statements read, assign, load and store --------------------------------------------


def _assigned(stmts) -> set[str]:
    """Variables assigned after their declaration (`Declare`, `Let(declared=True)`), through branches."""
    out: set[str] = set()
    for s in ir.walk_stmts(tuple(stmts)):
        if isinstance(s, ir.Declare) or (isinstance(s, ir.Let) and s.declared):
            out.add(s.var.name)
    return out


def _unique_names(stmts) -> bool:
    names = [s.var.name for s in ir.walk_stmts(tuple(stmts)) if isinstance(s, ir.Declare) or (isinstance(s, ir.Let) and not s.declared)]
    return len(names) == len(set(names))


def _defined(stmts) -> set[str]:
    return {s.var.name for s in ir.walk_stmts(tuple(stmts)) if isinstance(s, (ir.Let, ir.Declare))}


def _reads(stmts) -> set[str]:
    return {e.name for e in ir.walk_body_exprs(tuple(stmts)) if isinstance(e, ir.Var)}


def _loads(stmts) -> set[str]:
    return {e.field for e in ir.walk_body_exprs(tuple(stmts)) if isinstance(e, ir.Load)}


def _stores(stmts) -> set[str]:
    return {s.field for s in ir.walk_stmts(tuple(stmts)) if isinstance(s, ir.Store)}


def _pure(e: ir.Expr, mutable: set[str]) -> bool:
    """A condition whose value cannot change between two points of a body: no variable assigned
    twice, no field load (a store between the two could change it)."""
    return not any((isinstance(x, ir.Var) and x.name in mutable) or isinstance(x, ir.Load) for x in e.walk())


# --- 1. known conditions ---------------------------------------------------------------------


def _known(stmts, facts: dict, mutable: set[str]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for s in stmts:
        if isinstance(s, ir.If):
            if not _pure(s.cond, mutable):  # its value may differ inside: nothing known from it
                out.append(ir.If(s.cond, _known(s.then, facts, mutable), _known(s.orelse, facts, mutable)))
            elif s.cond in facts:
                out.extend(_known(s.then if facts[s.cond] else s.orelse, facts, mutable))
            else:
                then = _known(s.then, {**facts, s.cond: True}, mutable)
                out.append(ir.If(s.cond, then, _known(s.orelse, {**facts, s.cond: False}, mutable)))
        else:
            out.append(s)
    return tuple(out)


# --- 2. merge --------------------------------------------------------------------------------


def _merge(stmts, mutable: set[str]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for s in stmts:
        if isinstance(s, ir.If):
            s = ir.If(s.cond, _merge(s.then, mutable), _merge(s.orelse, mutable))
            if _pure(s.cond, mutable) and _on_data(s.cond):
                merged = _merge_into(out, s)
                if merged is not None:
                    out = merged
                    continue
        out.append(s)
    return tuple(out)


def _on_data(cond: ir.Expr) -> bool:
    """A condition on a computed value (a mask, an upwind choice), not on the index or host
    scalars alone: branches on a region of levels (`1 <= k`) are left apart. Joining those too
    changed the registers of two dycore kernels (sm_90, vertical momentum advection: 48 -> 50 and
    58 -> 56) and removed nothing there; the duplicated work this pass is for sits under masks."""
    return any(isinstance(x, ir.Var) for x in cond.walk())


def _merge_into(out: list[ir.Stmt], s: ir.If) -> list[ir.Stmt] | None:
    """`out` followed by `s`, with `s` joined to the latest `If` on its condition, or None."""
    i = next((j for j in range(len(out) - 1, -1, -1) if isinstance(out[j], ir.If) and out[j].cond == s.cond), None)
    if i is None:
        return None
    first, between = out[i], out[i + 1 :]
    s_assigns = _assigned((s,)) | _defined((s,))
    # the statements from between that `s` needs: plain Lets (and the Declares of what `s` assigns)
    need = _reads((s,)) - _defined((s,))
    moved: set[int] = set()
    for j in range(len(between) - 1, -1, -1):
        b = between[j]
        if isinstance(b, ir.Declare) and b.var.name in s_assigns:
            moved.add(j)
        elif isinstance(b, ir.Let) and not b.declared and b.var.name in need:
            moved.add(j)
            need |= _reads((b,))
    carried = [between[j] for j in sorted(moved)]
    staying = [between[j] for j in range(len(between)) if j not in moved]
    # what stays between must not define, assign or store anything `s` and the carried read
    reads = _reads((s, *carried))
    if reads & (_defined(staying) | _assigned(staying)):
        return None
    if s_assigns & (_reads(staying) | _defined(staying) | _assigned(staying)):
        return None
    stores_moved, loads_moved = _stores((s,)), _loads((s, *carried))
    if stores_moved & (_loads(staying) | _stores(staying)) or loads_moved & _stores(staying):
        return None
    # the carried statements go before `first`: they must not read what `first` defines or assigns,
    # nor load what it stores
    if _reads(carried) & (_defined((first,)) | _assigned((first,))) or _loads(carried) & _stores((first,)):
        return None
    if _defined(first.then) & _defined(s.then) or _defined(first.orelse) & _defined(s.orelse):
        return None  # a name both define: one scope could not hold both
    joined = ir.If(first.cond, first.then + s.then, first.orelse + s.orelse)
    return [*out[:i], *carried, joined, *staying]


# --- 3. value numbering ----------------------------------------------------------------------


class _Numbering:
    def __init__(self, mutable: set[str]):
        self.mutable = mutable
        self.counter = itertools.count(1)
        self.version: dict[str, int] = {}  # assigned variable or stored field -> current version
        self.rename: dict[str, ir.Var] = {}  # dropped Let's variable -> the earlier one

    def bump(self, names) -> None:
        for n in names:
            self.version[n] = next(self.counter)

    def substitute(self, e: ir.Expr) -> ir.Expr:
        if not self.rename:
            return e
        return ir.rewrite(e, lambda x: self.rename.get(x.name, x) if isinstance(x, ir.Var) else x)

    def key(self, e: ir.Expr):
        """`e` together with the versions of the assigned variables and stored fields it reads."""
        deps = []
        for x in e.walk():
            if isinstance(x, ir.Var) and x.name in self.mutable:
                deps.append(("var", x.name, self.version.get(x.name, 0)))
            elif isinstance(x, ir.Load):
                deps.append(("field", x.field, self.version.get("field:" + x.field, 0)))
        return (e, tuple(deps))

    def block(self, stmts, table: collections.ChainMap) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.Let):
                value = self.substitute(s.value)
                if s.declared or s.var.name in self.mutable:
                    out.append(dataclasses.replace(s, value=value))
                    self.bump([s.var.name])
                    continue
                if isinstance(value, (ir.Const, ir.Param, ir.Var, ir.HIndex, ir.KIndex)):
                    out.append(dataclasses.replace(s, value=value))
                    continue
                k = self.key(value)
                earlier = table.get(k)
                if earlier is not None and earlier.dtype == s.var.dtype:
                    self.rename[s.var.name] = earlier
                    continue
                table[k] = s.var
                out.append(dataclasses.replace(s, value=value))
            elif isinstance(s, ir.Store):
                out.append(dataclasses.replace(s, value=self.substitute(s.value)))
                self.bump(["field:" + s.field])
            elif isinstance(s, ir.If):
                cond = self.substitute(s.cond)
                then = self.block(s.then, table.new_child())
                orelse = self.block(s.orelse, table.new_child())
                out.append(ir.If(cond, then, orelse))
                # after the branches, whatever either assigned or stored has a new version
                self.bump(_assigned((s,)))
                self.bump("field:" + f for f in _stores((s,)))
            else:
                out.append(s)
        return tuple(out)


def _number_values(stmts, mutable: set[str]) -> tuple[ir.Stmt, ...]:
    return _Numbering(mutable).block(stmts, collections.ChainMap())
