"""GT4Py's `dead_code_elimination` (gt4py 1.2.1) for the early GTIR path, with the same result in a
fraction of the time (issue 20: it was 55 % of the early path's passes on the vertical solvers).

GT4Py's pass is four passes over the whole program (dead_code_elimination.py):

    InlineLambdas(opcount_preserving)                        `let x = a in ..x..` -> `..a..`
    ConstantFolding                                          `if_(True, a, b)` -> `a`, `x + 0` -> `x`
    InlineLambdas(opcount_preserving, force_inline_lambda_args)
    CollapseTuple(all but PROPAGATE_TO_IF_ON_TUPLES)         `{a, b}[0]` -> `a`, then InlineLambdas

Domain inference needs its result: no dead code, no lambda-valued lets, tuples taken apart. Its
cost is not the rewriting but how eve rebuilds trees (profile of the predictor solver,
benchmarks/early-gtir-R2B3-10.md, session 15): every `inline_lambda` rebuilds the whole body of the
let with NodeTranslators (a nested let chain: quadratic), walks the body and its arguments for
symbol names again each time, CollapseTuple re-infers the types of the whole program and, after
each tuple it inlines, visits the whole inlined body again with its ten rules at every node.

`dead_code_elimination` here applies the same rules in the same order, so that the result is equal
(`==` and `str`) to GT4Py's, with three changes to how the trees are walked:

* subtrees a rule does not change are kept, not rebuilt, and the symbol names under a node are
  computed once per node (`_Names`): substituting a let variable descends only into subtrees that
  reference it;
* CollapseTuple remembers which nodes it already visited without change (a fixed point: visiting
  them again would not change them either) and skips them when it visits an inlined body again;
* no type inference: the rules' few questions about types ("is this a tuple, of how many
  elements") are answered from the types earlier passes left on the nodes, or from the node's
  shape (`_tuple_size`).

ConstantFolding is GT4Py's own rule set (`fp_transform` of a ConstantFolding instance), called only
at the calls its rules match. The rules of CollapseTuple and `inline_lambda` are transcribed from
gt4py 1.2.1 (collapse_tuple.py, inline_lambdas.py). Two of CollapseTuple's rules never apply on
the 78 programs of the suite (FLATTEN_AS_FIELDOP_ARGS: an `as_fieldop` argument of tuple type;
PROPAGATE_TO_IF_ON_TUPLES_CPS: an `if_` of tuples as a call argument); where one could apply, or a
type is not known, GT4Py's pass runs instead (`_Unsupported`), as it does for a GT4Py other than
the one checked (gt4py_compat.CHECKED_GT4PY).

Provenance: to give GT4Py's result name for name, `inline_lambda` and the CollapseTuple rules here
follow gt4py 1.2.1's inline_lambdas.py and collapse_tuple.py step by step (the traversal around them
is ours). That code is Copyright (c) 2014-2024, ETH Zurich, under the BSD-3-Clause license, whose
notice this attribution keeps.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import gt4py
from gt4py.next import common, utils
from gt4py.next.iterator import builtins, ir as itir
from gt4py.next.iterator.ir_utils import common_pattern_matcher as cpm, ir_makers as im, misc as ir_misc
from gt4py.next.iterator.transforms import collapse_tuple, dead_code_elimination as gt4py_dce
from gt4py.next.iterator.transforms.constant_folding import ConstantFolding
from gt4py.next.type_system import type_specifications as ts

from icoforge.backend.frontend import gt4py_compat

# CountSymbolRefs (hence `inline_lambda`'s reference counts) never counts references to builtins
_BUILTINS = frozenset(str(s.id) for s in itir.Program._NODE_SYMBOLS_)
# what `inline_lambda(opcount_preserving=True)` substitutes however often it is referenced
_ZERO_OP = (itir.SymRef, itir.Literal, itir.OffsetLiteral, itir.CartesianOffset)
# calls ConstantFolding's rules look at (each rule starts by matching one of these); a call of
# another builtin is folded only when all its arguments are literals
_FOLDED_CALLS = frozenset(
    {"plus", "minus", "multiplies", "minimum", "maximum", "if_", "less", "less_equal", "greater", "greater_equal"}
)
# builtins whose value is never a tuple (for `_tuple_size` on nodes without a type)
_SCALAR_BUILTINS = frozenset(builtins.ARITHMETIC_BUILTINS) | {"cast_", "can_deref"}
_UID_PREFIXES = ("__ct_el",)  # the names CollapseTuple's rules used here draw
_EMPTY: frozenset[str] = frozenset()


class _Unsupported(Exception):
    """A case GT4Py's pass handles and this module does not: GT4Py's pass runs instead."""


def dead_code_elimination(
    program: itir.Program, *, uids: utils.IDGeneratorPool, offset_provider_type: common.OffsetProviderType
) -> itir.Program:
    """GT4Py's `dead_code_elimination(program, uids=..., offset_provider_type=...)`: the same
    program, drawing the same names from `uids` (module docstring)."""
    if gt4py.__version__ not in gt4py_compat.CHECKED_GT4PY:  # the rules were transcribed from these
        return gt4py_dce.dead_code_elimination(program, uids=uids, offset_provider_type=offset_provider_type)
    saved = gt4py_compat.save_uids(uids, _UID_PREFIXES)
    try:
        return _eliminate(program, uids)
    except _Unsupported:
        gt4py_compat.restore_uids(uids, saved)  # GT4Py's pass draws the names ours drew
        return gt4py_dce.dead_code_elimination(program, uids=uids, offset_provider_type=offset_provider_type)


def _eliminate(program: itir.Program, uids: utils.IDGeneratorPool) -> itir.Program:
    names = _Names()
    program = inline_lambdas(program, names, opcount_preserving=True)
    program = fold_constants(program)
    program = inline_lambdas(program, names, opcount_preserving=True, force_inline_lambda_args=True)
    program = _CollapseTuple(names, uids).visit(program)
    # CollapseTuple.apply's clean-up after LETIFY_MAKE_TUPLE_ELEMENTS
    return inline_lambdas(program, names, opcount_preserving=True)


# --- walking trees --------------------------------------------------------------------------------


class _Names:
    """Symbol names below each node, computed once per node object: the passes keep unchanged
    subtrees, so most nodes are asked about many times (each let of a chain asks about the whole
    rest of the chain). Entries hold their node, so an id is not reused while the entry lives."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[itir.Node, frozenset[str], frozenset[str]]] = {}

    def _get(self, node: itir.Node) -> tuple[itir.Node, frozenset[str], frozenset[str]]:
        hit = self._cache.get(id(node))
        if hit is not None:
            return hit
        if isinstance(node, itir.SymRef):
            entry = (node, frozenset((str(node.id),)), _EMPTY)
        elif isinstance(node, itir.Sym):
            entry = (node, _EMPTY, frozenset((str(node.id),)))
        else:
            kids = [self._get(c) for c in _children(node)]
            refs = frozenset().union(*(k[1] for k in kids)) if kids else _EMPTY
            syms = frozenset().union(*(k[2] for k in kids)) if kids else _EMPTY
            entry = (node, refs, syms)
        self._cache[id(node)] = entry
        return entry

    def refs(self, node: itir.Node) -> frozenset[str]:
        """Every `SymRef` id below `node`, bound there or not (GT4Py's clash check takes all)."""
        return self._get(node)[1]

    def syms(self, node: itir.Node) -> frozenset[str]:
        """Every `Sym` id below `node` (lambda parameters)."""
        return self._get(node)[2]

    def free(self, nodes: list[itir.Expr]) -> set[str]:
        """Names `collect_symbol_refs(nodes)` returns: references not bound inside, no builtins."""
        out: set[str] = set()

        def walk(n: itir.Node, bound: frozenset[str]) -> None:
            if self.refs(n) <= bound:
                return
            if isinstance(n, itir.SymRef):
                out.add(str(n.id))
            elif isinstance(n, itir.Lambda):
                walk(n.expr, bound | {str(p.id) for p in n.params})
            else:
                for c in _children(n):
                    walk(c, bound)

        for n in nodes:
            walk(n, _BUILTINS)
        return out


def _children(node: itir.Node) -> tuple[itir.Node, ...]:
    if isinstance(node, itir.FunCall):
        return (node.fun, *node.args)
    if isinstance(node, itir.Lambda):
        return (*node.params, node.expr)
    if isinstance(node, itir.CartesianOffset):
        return (node.domain, node.codomain)
    if isinstance(node, (itir.SymRef, itir.Sym, itir.Literal, itir.InfinityLiteral, itir.NoneLiteral,
                         itir.OffsetLiteral, itir.AxisLiteral)):  # fmt: skip
        return ()
    raise _Unsupported(f"{type(node).__name__} in an expression")


def _call(like: itir.FunCall, fun: itir.Expr, args: list[itir.Expr]) -> itir.FunCall:
    """`like` with other children, or `like` itself if they are its own (GT4Py's visitors rebuild
    every node they pass; equal values, so keeping it gives an equal tree). Type and location stay,
    as GT4Py's NodeTranslator keeps them."""
    if fun is like.fun and all(a is b for a, b in zip(args, like.args)):
        return like
    return itir.FunCall(fun=fun, args=args, location=like.location, type=like.type)


def _lambda(like: itir.Lambda, params: list[itir.Sym], expr: itir.Expr) -> itir.Lambda:
    if expr is like.expr and all(a is b for a, b in zip(params, like.params)):
        return like
    return itir.Lambda(params=params, expr=expr, location=like.location, type=like.type)


def _map_expr(node: itir.Node, visit: Callable[[itir.Node], itir.Node]) -> itir.Node:
    """One level of a post-order walk: `node` with `visit` applied to its children."""
    if isinstance(node, itir.FunCall):
        return _call(node, visit(node.fun), [visit(a) for a in node.args])
    if isinstance(node, itir.Lambda):
        return _lambda(node, node.params, visit(node.expr))
    _children(node)  # raises on a node type this module does not know
    return node


def _map_program(program: itir.Program, visit: Callable[[itir.Node], itir.Node]) -> itir.Program:
    """`visit` applied to every statement's expressions, in GT4Py's field order (expr, domain,
    target; the condition before the branches)."""
    if program.function_definitions or program.declarations:
        raise _Unsupported("function definitions or temporaries")  # InlineFundefs ran; no temporaries yet

    def stmt(s: itir.Stmt) -> itir.Stmt:
        if isinstance(s, itir.SetAt):
            expr, domain, target = visit(s.expr), visit(s.domain), visit(s.target)
            if expr is s.expr and domain is s.domain and target is s.target:
                return s
            return itir.SetAt(expr=expr, domain=domain, target=target, location=s.location)
        if isinstance(s, itir.IfStmt):
            cond = visit(s.cond)
            tb, fb = [stmt(x) for x in s.true_branch], [stmt(x) for x in s.false_branch]
            if cond is s.cond and all(a is b for a, b in zip([*tb, *fb], [*s.true_branch, *s.false_branch])):
                return s
            return itir.IfStmt(cond=cond, true_branch=tb, false_branch=fb, location=s.location)
        raise _Unsupported(type(s).__name__)

    body = [stmt(s) for s in program.body]
    if all(a is b for a, b in zip(body, program.body)):
        return program
    return itir.Program(
        id=program.id, function_definitions=program.function_definitions, params=program.params,
        declarations=program.declarations, body=body, location=program.location,
    )  # fmt: skip


# --- InlineLambdas -------------------------------------------------------------------------------


def inline_lambdas(
    program: itir.Program, names: _Names, opcount_preserving: bool = False, force_inline_lambda_args: bool = False
) -> itir.Program:
    """GT4Py's `InlineLambdas.apply(program, ...)`: every call of a lambda, innermost first, goes
    through `inline_lambda`; its result is not visited again (as in GT4Py)."""

    def visit(node: itir.Node) -> itir.Node:
        node = _map_expr(node, visit)
        if isinstance(node, itir.FunCall) and isinstance(node.fun, itir.Lambda):
            return inline_lambda(node, names, opcount_preserving, force_inline_lambda_args)
        return node

    return _map_program(program, visit)


def inline_lambda(
    node: itir.FunCall,
    names: _Names,
    opcount_preserving: bool = False,
    force_inline_lambda_args: bool = False,
    eligible_params: list[bool] | None = None,
) -> itir.Expr:
    """GT4Py's `inline_lambdas.inline_lambda` (the options dead-code elimination uses): the same
    eligible parameters, the same renaming of clashing names, the same result; only the subtrees
    that reference a substituted parameter are rebuilt."""
    fun = node.fun
    assert isinstance(fun, itir.Lambda)
    params, args = fun.params, node.args
    eligible = list(eligible_params) if eligible_params else [True] * len(params)
    if opcount_preserving:
        counts = _count_refs(fun.expr, {str(p.id) for p in params}, names)
        for i, p in enumerate(params):
            if counts[str(p.id)] > 1 and not isinstance(args[i], _ZERO_OP):
                eligible[i] = False
    if force_inline_lambda_args:
        for i, a in enumerate(args):
            if isinstance(a, itir.Lambda):
                eligible[i] = True
    if params and not any(eligible):
        return node

    refs = frozenset().union(*(names.refs(a) for a, e in zip(args, eligible) if e))
    syms = names.syms(fun)
    clashes = refs & syms
    if clashes:  # a name bound in the lambda would capture a reference of an argument
        name_map: dict[str, str] = {}
        for sym in sorted(clashes):
            name_map[sym] = ir_misc.unique_symbol(sym, refs | syms | {*name_map.values()})
        fun = _rename(fun, name_map, names)

    symbol_map = {str(p.id): a for p, a, e in zip(fun.params, args, eligible) if e}
    new_expr = _substitute(fun.expr, symbol_map, names)
    if all(eligible):
        result = new_expr
    else:
        kept = [i for i, e in enumerate(eligible) if not e]
        result = itir.FunCall(
            fun=itir.Lambda(params=[fun.params[i] for i in kept], expr=new_expr),
            args=[args[i] for i in kept],
            location=node.location,
        )
    if node.type is not None and result.type is None:  # GT4Py copies the call's type to the result
        result.type = node.type
    return result


def _count_refs(expr: itir.Expr, params: set[str], names: _Names) -> collections.Counter[str]:
    """CountSymbolRefs.apply(expr, params): references to `params` not bound inside `expr`."""
    counts: collections.Counter[str] = collections.Counter()

    def walk(n: itir.Node, wanted: frozenset[str]) -> None:
        if names.refs(n).isdisjoint(wanted):
            return
        if isinstance(n, itir.SymRef):
            counts[str(n.id)] += 1
        elif isinstance(n, itir.Lambda):
            walk(n.expr, wanted - {str(p.id) for p in n.params})
        else:
            for c in _children(n):
                walk(c, wanted)

    walk(expr, frozenset(params - _BUILTINS))
    return counts


def _substitute(expr: itir.Expr, symbol_map: dict[str, itir.Expr], names: _Names) -> itir.Expr:
    """RemapSymbolRefs: references to `symbol_map`'s names not bound inside replaced by their
    value (the value node itself at every place, as GT4Py does)."""

    def sub(n: itir.Node, m: dict[str, itir.Expr]) -> itir.Node:
        if not m or names.refs(n).isdisjoint(m):
            return n
        if isinstance(n, itir.SymRef):
            return m[str(n.id)]
        if isinstance(n, itir.Lambda):
            inner = {k: v for k, v in m.items() if k not in {str(p.id) for p in n.params}}
            return _lambda(n, n.params, sub(n.expr, inner))
        if isinstance(n, itir.FunCall):
            return _call(n, sub(n.fun, m), [sub(a, m) for a in n.args])
        return n

    return sub(expr, symbol_map)


def _rename(fun: itir.Lambda, name_map: dict[str, str], names: _Names) -> itir.Lambda:
    """RenameSymbols: every parameter in `fun` named in `name_map`, and the references it binds,
    renamed (references `fun` does not bind keep their name)."""
    keys = set(name_map)

    def ren(n: itir.Node, bound: frozenset[str]) -> itir.Node:
        if names.refs(n).isdisjoint(keys) and names.syms(n).isdisjoint(keys):
            return n
        if isinstance(n, itir.Sym):
            return itir.Sym(id=name_map[str(n.id)])  # as GT4Py builds it: no type
        if isinstance(n, itir.SymRef):
            if str(n.id) not in bound:
                return n
            return itir.SymRef(id=name_map[str(n.id)], type=n.type)
        if isinstance(n, itir.Lambda):
            inner = bound | {str(p.id) for p in n.params}
            return _lambda(n, [ren(p, inner) for p in n.params], ren(n.expr, inner))
        if isinstance(n, itir.FunCall):
            return _call(n, ren(n.fun, bound), [ren(a, bound) for a in n.args])
        return n

    return ren(fun, _EMPTY)


# --- ConstantFolding ------------------------------------------------------------------------------


def fold_constants(program: itir.Program) -> itir.Program:
    """GT4Py's `ConstantFolding.apply(program)`: its rules (a ConstantFolding instance's
    `fp_transform`) at every call they match, innermost first, then UndoCanonicalizeMinus."""
    folding = ConstantFolding(enabled_transformations=ConstantFolding.Transformation.all())

    def visit(node: itir.Node) -> itir.Node:
        node = _map_expr(node, visit)
        if isinstance(node, itir.FunCall) and isinstance(node.fun, itir.SymRef):
            name = str(node.fun.id)
            if name in _FOLDED_CALLS or (
                node.args and name in builtins.ARITHMETIC_BUILTINS and all(isinstance(a, itir.Literal) for a in node.args)
            ):
                return folding.fp_transform(node)
        return node

    def undo_minus(node: itir.Node) -> itir.Node:  # UndoCanonicalizeMinus: `a + (-b)` -> `a - b`
        node = _map_expr(node, undo_minus)
        if cpm.is_call_to(node, "plus"):
            a, b = node.args
            if cpm.is_call_to(b, "neg"):
                return im.minus(a, b.args[0])
            if isinstance(b, itir.Literal) and (val := ir_misc.value_from_literal(b)) < 0:
                return im.minus(a, -val)
            if cpm.is_call_to(a, "neg"):
                return im.minus(b, a.args[0])
            if isinstance(a, itir.Literal) and (val := ir_misc.value_from_literal(a)) < 0:
                return im.minus(b, -val)
        return node

    return _map_program(_map_program(program, visit), undo_minus)


# --- CollapseTuple --------------------------------------------------------------------------------


def _tuple_size(node: itir.Expr) -> int | None:
    """Elements of `node`'s tuple value, None if it is not a tuple: what CollapseTuple reads from
    the types it infers. From the type on the node (earlier passes' inference, kept by the rewrites
    here) or, on nodes built since, from their shape; `_Unsupported` where neither tells."""
    t = node.type
    if t is not None:
        return _type_tuple_size(t)
    if cpm.is_call_to(node, "make_tuple"):
        return len(node.args)
    if cpm.is_call_to(node, ("if_", "concat_where")):
        return _tuple_size(node.args[1])
    if cpm.is_let(node):
        return _tuple_size(node.fun.expr)
    if cpm.is_call_to(node, "tuple_get") and isinstance(node.args[0], itir.Literal):
        i, tup = int(node.args[0].value), node.args[1]
        if isinstance(tup.type, ts.TupleType):
            return _type_tuple_size(tup.type.types[i])
        if tup.type is None and cpm.is_call_to(tup, "make_tuple"):
            return _tuple_size(tup.args[i])
    if isinstance(node, (itir.Literal, itir.InfinityLiteral, itir.OffsetLiteral, itir.AxisLiteral)):
        return None
    if isinstance(node, itir.FunCall) and isinstance(node.fun, itir.SymRef) and str(node.fun.id) in _SCALAR_BUILTINS:
        return None
    raise _Unsupported(f"the type of {node}")


def _type_tuple_size(t: ts.TypeSpec) -> int | None:
    if isinstance(t, ts.TupleType):
        return len(t.types)
    if isinstance(t, ts.DeferredType):  # GT4Py's inference might know more
        raise _Unsupported("a deferred type")
    return None


class _CollapseTuple:
    """GT4Py's CollapseTuple with every rule but PROPAGATE_TO_IF_ON_TUPLES, as
    dead_code_elimination runs it: each node visited after its children, then the first rule
    that applies, again until none does (`_fixed_point`). Rules in GT4Py's order; the two that
    never apply on the suite's programs raise `_Unsupported` where they could."""

    def __init__(self, names: _Names, uids: utils.IDGeneratorPool) -> None:
        self.names, self.uids = names, uids
        # nodes whose visit returned them unchanged: visiting them again gives them again
        self.done: dict[int, itir.Node] = {}

    def visit(self, node: itir.Node) -> itir.Node:
        if isinstance(node, itir.Program):
            return _map_program(node, self.visit)
        if id(node) in self.done:
            return node
        result = _map_expr(node, self.visit)
        if isinstance(result, itir.FunCall):
            result = self._fixed_point(result)
        if result is node:
            self.done[id(node)] = node
        return result

    def _fixed_point(self, node: itir.Expr) -> itir.Expr:
        while (new := self._transform(node)) is not None:
            if new.type is None and node.type is not None:  # GT4Py re-infers it: the same value's type
                new.type = node.type
            node = new
        return node

    def _transform(self, node: itir.Expr) -> itir.Expr | None:
        if not isinstance(node, itir.FunCall):
            return None
        fun = node.fun
        if isinstance(fun, itir.SymRef):
            name = str(fun.id)
            if name == "make_tuple":
                new = self._collapse_make_tuple_tuple_get(node)
                if new is None:
                    new = self._letify_make_tuple_elements(node)
            elif name == "tuple_get":
                new = self._collapse_tuple_get_make_tuple(node)
                if new is None:
                    new = self._propagate_tuple_get(node)
            elif name == "if_":
                return None
            else:
                new = None
            if new is None:
                self._check_if_of_tuples(node)
            return new
        if isinstance(fun, itir.Lambda):
            new = self._inline_trivial_make_tuple(node)
            if new is None:
                self._check_if_of_tuples(node)
                new = self._propagate_nested_let(node)
            if new is None:
                new = self._inline_trivial_let(node)
            if new is None:
                new = self._inline_trivial_tuple_let_var(node)
            return new
        self._check_if_of_tuples(node)
        if cpm.is_applied_as_fieldop(node) and any(_tuple_size(a) is not None for a in node.args):
            raise _Unsupported("FLATTEN_AS_FIELDOP_ARGS: an as_fieldop argument of tuple type")
        return None

    # `make_tuple(tuple_get(0, t), ..., tuple_get(n-1, t))` -> `t`
    def _collapse_make_tuple_tuple_get(self, node: itir.FunCall) -> itir.Expr | None:
        if not all(cpm.is_call_to(a, "tuple_get") for a in node.args):
            return None
        if not node.args or not all(isinstance(a.args[0], itir.Literal) for a in node.args):
            raise _Unsupported("make_tuple() or tuple_get with a computed index")  # GT4Py asserts
        first = node.args[0].args[1]
        for i, v in enumerate(node.args):
            if not (int(v.args[0].value) == i and ir_misc.is_equal(v.args[1], first)):
                return None
        return first if _tuple_size(first) == len(node.args) else None

    # `tuple_get(i, make_tuple(e_0, ..., e_n))` -> `e_i`
    def _collapse_tuple_get_make_tuple(self, node: itir.FunCall) -> itir.Expr | None:
        idx, tup = node.args
        if isinstance(idx, itir.Literal) and cpm.is_call_to(tup, "make_tuple"):
            return tup.args[int(idx.value)]
        return None

    # `tuple_get(i, let(...)(e))` -> `let(...)(tuple_get(i, e))`, and into `if_`/`concat_where`
    def _propagate_tuple_get(self, node: itir.FunCall) -> itir.Expr | None:
        idx, expr = node.args
        if not isinstance(idx, itir.Literal):
            return None
        if cpm.is_let(expr):
            body = self._fixed_point(im.tuple_get(idx.value, expr.fun.expr))
            return im.call(im.lambda_(*expr.fun.params)(body))(*expr.args)
        if cpm.is_call_to(expr, ("if_", "concat_where")):
            cond, tb, fb = expr.args
            return im.call(expr.fun)(
                cond, self._fixed_point(im.tuple_get(idx.value, tb)), self._fixed_point(im.tuple_get(idx.value, fb))
            )
        return None

    # `make_tuple(a, f(b))` -> `let(el_0=a, el_1=f(b))(make_tuple(el_0, el_1))` (every element,
    # as GT4Py: its test is on the whole tuple)
    def _letify_make_tuple_elements(self, node: itir.FunCall) -> itir.Expr | None:
        if collapse_tuple._is_trivial_make_tuple_call(node) or not node.args:
            return None
        bound: dict[itir.Sym, itir.Expr] = {}
        refs = []
        for arg in node.args:
            ref = im.ref(next(self.uids["__ct_el"]), arg.type)
            refs.append(ref)
            bound[im.sym(ref.id, arg.type)] = arg
        return self._fixed_point(im.let(*bound.items())(im.call(node.fun)(*refs)))

    # `let(t, make_tuple(a, b))(f(t))` -> `f(make_tuple(a, b))`, then the result visited again
    def _inline_trivial_make_tuple(self, node: itir.FunCall) -> itir.Expr | None:
        eligible = [collapse_tuple._is_trivial_make_tuple_call(a) for a in node.args]
        if not any(eligible):
            return None
        return self.visit(inline_lambda(node, self.names, eligible_params=eligible))

    # `let((a, let(b, 1)(a_val)))(a)` -> `let(b, 1)(let(a, a_val)(a))`
    def _propagate_nested_let(self, node: itir.FunCall) -> itir.Expr | None:
        outer: dict[itir.Sym, itir.Expr] = {}
        inner: dict[itir.Sym, itir.Expr] = {}
        body = node.fun.expr
        reserved: set[str] | None = None
        for param, arg in zip(node.fun.params, node.args):
            if not cpm.is_let(arg):
                inner[param] = arg
                continue
            if not reserved:
                reserved = self.names.free([*node.args, body])
            rename: dict[str, itir.SymRef] = {}
            for sym, val in zip(arg.fun.params, arg.args):
                unique = ir_misc.unique_symbol(sym, [*(s.id for s in outer), *reserved])
                if sym != unique:
                    rename[str(sym.id)] = im.ref(unique.id, sym.type)
                outer[unique] = val
            new_expr = arg.fun.expr
            if rename:  # GT4Py's rename_symbols: a let of the new names, inlined
                new_expr = inline_lambda(im.let(*rename.items())(new_expr), self.names)
            inner[param] = new_expr
        if not outer:
            return None
        return self._fixed_point(im.let(*outer.items())(self._fixed_point(im.let(*inner.items())(body))))

    # `let(a, 1)(a)` -> `1`; `let(a, b)(f(a))` -> `f(b)`
    def _inline_trivial_let(self, node: itir.FunCall) -> itir.Expr | None:
        body = node.fun.expr
        if isinstance(body, itir.SymRef):
            for param, arg in zip(node.fun.params, node.args):
                if body.id == param.id:
                    return arg
        trivial = [isinstance(a, (itir.SymRef, itir.Literal)) for a in node.args]
        return inline_lambda(node, self.names, eligible_params=trivial) if any(trivial) else None

    # `let(a, b[1])(f(a))` -> `f(b[1])`
    def _inline_trivial_tuple_let_var(self, node: itir.FunCall) -> itir.Expr | None:
        trivial = [collapse_tuple._is_trivial_or_tuple_thereof_expr(a) for a in node.args]
        return inline_lambda(node, self.names, eligible_params=trivial) if any(trivial) else None

    def _check_if_of_tuples(self, node: itir.FunCall) -> None:
        """PROPAGATE_TO_IF_ON_TUPLES_CPS looks at calls with an `if_` of tuples as an argument:
        not transcribed here (never the case on the suite), GT4Py's pass runs instead."""
        for arg in node.args:
            if cpm.is_call_to(arg, "if_") and any(_tuple_size(b) is not None for b in arg.args[1:]):
                raise _Unsupported("PROPAGATE_TO_IF_ON_TUPLES_CPS: an if_ of tuples as an argument")
