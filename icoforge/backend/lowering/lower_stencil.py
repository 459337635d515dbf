"""The partial evaluator of one stencil lambda (see lower.py): GT4Py's iterator builtins over
compile-time values (lower_values.py), field data as kernel-IR expressions and statements."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from gt4py.next import common
from gt4py.next.iterator import ir as itir

from icoforge.backend.ir import ir
from icoforge.backend.ir.dtypes import DTYPES
from icoforge.backend.lowering.lower_values import (
    ScalarArg,
    HostArg,
    LazyArg,
    ConstList,
    MapV,
    ReduceV,
    Thunk,
    force,
    TupleArg,
    IndexArg,
    Iterator,
    Closure,
    Builtin,
    Offset,
    Axis,
    CartShift,
    TupleV,
    ListV,
    ArgValue,
    Value,
    sanitize,
    literal,
    binary,
    all_of,
)
from icoforge.errors import UnsupportedConstructError

if TYPE_CHECKING:
    from icoforge.backend.lowering.lower import ProgramLowering


@dataclass
class _Block:
    stmts: list
    memo: dict = field(default_factory=dict)  # values computed in this block (early GTIR: lazy fields read)
    fence: bool = False  # a branch on a data value: nothing inside is computed before it (lower_fields._hoist_to)
    shared: frozenset = frozenset()  # ids of the lazy fields both branches read: those may be computed before


class StencilLowering:
    """Partial evaluator for one stencil lambda; collects statements and kernel arguments."""

    def __init__(self, program: "ProgramLowering", where: str):
        self.program = program
        self.where = where
        self.blocks: list[_Block] = [_Block([])]
        self.counter = itertools.count()
        self.kernel_args: list[tuple[ir.Param, ir.Expr]] = []
        self.host_args: dict[str, ir.Param] = {}  # HostArg expression -> its kernel argument
        self.center: tuple = ()  # the kernel's own point (early GTIR: lazy fields read there are recomputed)
        self.hoist_domain = None  # early GTIR: the kernel's domain, where values may be computed before branches
        self.own_values: set[int] = set()  # early GTIR: ids of the LazyFields this kernel stores into targets
        self.inlined: list = []  # early GTIR: the lazy fields recomputed in this kernel

    def recall(self, key) -> Value | None:
        """A value computed under `key` in this block or an enclosing one."""
        for blk in reversed(self.blocks):
            if key in blk.memo:
                return blk.memo[key]
        return None

    def remember(self, key, value: Value) -> None:
        self.blocks[-1].memo[key] = value

    def host_param(self, expr: ir.Expr) -> ir.Expr:
        """A host scalar expression as a kernel argument (one per distinct expression)."""
        if isinstance(expr, (ir.Param, ir.Const)):
            return expr
        key = str(expr)
        if key not in self.host_args:
            p = ir.Param(f"a{len(self.kernel_args)}", expr.dtype)
            self.kernel_args.append((p, expr))
            self.host_args[key] = p
        return self.host_args[key]

    # -- statement emission ---------------------------------------------------------------
    def emit(self, s: ir.Stmt) -> None:
        self.blocks[-1].stmts.append(s)

    def fresh(self, hint: str, dtype: str) -> ir.Var:
        return ir.Var(f"{sanitize(hint)}_{next(self.counter)}", dtype)

    def bind(self, hint: str, value: ir.Expr) -> ir.Expr:
        """Name a value with a Let unless it is trivial to recompute."""
        if isinstance(value, (ir.Const, ir.Var, ir.Param, ir.HIndex, ir.KIndex)):
            return value
        var = self.fresh(hint, value.dtype)
        self.emit(ir.Let(var, value))
        return var

    def bind_once(self, hint: str, value: ir.Expr) -> ir.Expr:
        """`bind`, or the variable an equal value got in this block or an enclosing one."""
        if isinstance(value, (ir.Const, ir.Var, ir.Param, ir.HIndex, ir.KIndex)):
            return value
        var = self.recall(("bound", value))
        if var is None:
            var = self.bind(hint, value)
            self.remember(("bound", value), var)
        return var

    def in_block(self, fn: Callable[[], Value], fence: bool = False, shared: frozenset = frozenset()) -> tuple[tuple[ir.Stmt, ...], Value]:
        self.blocks.append(_Block([], fence=fence, shared=shared))
        try:
            v = fn()
        finally:
            blk = self.blocks.pop()
        return tuple(blk.stmts), v

    def fail(self, what: str) -> UnsupportedConstructError:
        return UnsupportedConstructError(
            f"program {self.program.name!r}, {self.where}: unsupported construct: {what}"
        )

    # -- evaluation -----------------------------------------------------------------------
    def eval(self, node: itir.Expr, env: dict) -> Value:
        if isinstance(node, itir.Literal):
            return literal(node)
        if isinstance(node, itir.OffsetLiteral):
            return Offset(node.value)
        if isinstance(node, itir.CartesianOffset):
            return CartShift(node.domain.value)
        if isinstance(node, itir.SymRef):
            if node.id in env:
                return env[node.id]
            if node.id in self.program.function_defs:
                fd = self.program.function_defs[node.id]
                return Closure(tuple(p.id for p in fd.params), fd.expr, {})
            return Builtin(str(node.id))
        if isinstance(node, itir.Lambda):
            return Closure(tuple(str(p.id) for p in node.params), node.expr, env)
        if isinstance(node, itir.FunCall):
            return self.call(node, env)
        if isinstance(node, itir.AxisLiteral):
            return Axis(node.value)
        if isinstance(node, itir.InfinityLiteral):
            return ir.Const(float("inf") if node.name == "POSITIVE" else float("-inf"), "float64")
        raise self.fail(f"expression {type(node).__name__}: {node}")

    def apply(self, fn: Value, args: list[Value], names: tuple[str, ...] | None = None) -> Value:
        if isinstance(fn, Closure):
            if len(args) != len(fn.params):
                raise self.fail(f"lambda arity {len(fn.params)} called with {len(args)} arguments")
            env = dict(fn.env)
            for p, a in zip(fn.params, args):
                env[p] = self.bind(p, a) if isinstance(a, ir.Expr) else a
            return self.eval(fn.body, env)
        if fn == Builtin("deref") and len(args) == 1:
            # `as_fieldop(deref, domain)(x)`: a scalar broadcast into a field (or a plain copy)
            return self.deref(args[0])
        if isinstance(fn, ReduceV):
            return self.reduce(fn, args)
        if isinstance(fn, MapV):
            return self.map_list(fn, args)
        if isinstance(fn, Builtin):
            return self.builtin_values(fn.name, [force(a) for a in args])
        raise self.fail(f"call of {fn}")

    # -- neighbour lists (early GTIR: reductions not unrolled by GT4Py) ----------------------
    def _lists(self, args: list[Value]) -> tuple[int, tuple | None]:
        n, valid = None, None
        for a in args:
            if isinstance(a, ListV):
                n = len(a.items) if n is None else n
                if len(a.items) != n:
                    raise self.fail("lists of different lengths")
                valid = valid if valid is not None else a.valid
            elif not isinstance(a, ConstList):
                raise self.fail(f"list operation on {type(a).__name__}")
        if n is None:
            raise self.fail("list operation over constant lists only")
        return n, valid

    @staticmethod
    def _item(a: Value, j: int) -> Value:
        return a.value if isinstance(a, ConstList) else force(a.items[j])

    def map_list(self, fn: MapV, args: list[Value]) -> ListV:
        n, valid = self._lists(args)
        items = tuple(Thunk(lambda j=j: self.apply(fn.fun, [self._item(a, j) for a in args])) for j in range(n))
        return ListV(items, valid)

    def reduce(self, fn: ReduceV, args: list[Value]) -> Value:
        """GT4Py's UnrollReduce: `fun(acc, items...)` for each local index in order; where the
        neighbour may be missing (skip values) only if it exists (`can_deref`)."""
        n, valid = self._lists(args)
        acc = fn.init
        for j in range(n):
            step = lambda acc=acc, j=j: self.apply(fn.fun, [acc, *(self._item(a, j) for a in args)])  # noqa: E731
            cond = ir.Const(True, "bool") if valid is None else self.scalar(valid[j])
            if isinstance(cond, ir.Const):
                acc = step() if cond.value else acc
                continue
            t_stmts, t_val = self.in_block(step)
            # named, as GT4Py's UnrollReduce names `_acc`: `c ? acc + x : acc` holds `acc` twice, so
            # unnamed a six-neighbour V2E sum printed its first product 32 times (132 ld in the PTX, 18 named)
            acc = self._merge(cond, t_stmts, t_val, (), acc)
            acc = self.bind("acc", acc) if isinstance(acc, ir.Expr) else acc
        return acc

    def call(self, node: itir.FunCall, env: dict) -> Value:
        fun = node.fun
        # shift(offsets...)(it) and other curried builtins
        if isinstance(fun, itir.FunCall) and isinstance(fun.fun, itir.SymRef) and fun.fun.id == "shift" and "shift" not in env:
            offsets = [self.eval(a, env) for a in fun.args]
            (it,) = [self.eval(a, env) for a in node.args]
            return self.shift(it, offsets)
        fn = self.eval(fun, env)
        if isinstance(fn, Builtin):
            return self.builtin(fn.name, node, env)
        args = [self.eval(a, env) for a in node.args]
        return self.apply(fn, args)

    # -- iterators --------------------------------------------------------------------------
    def shift(self, it: Value, offsets: list[Value]) -> Iterator:
        if not isinstance(it, Iterator):
            raise self.fail(f"shift of a non-iterator {it}")
        pos = dict(it.pos)
        valid = list(it.valid)
        pairs = list(zip(offsets[0::2], offsets[1::2]))
        if len(offsets) % 2:
            raise self.fail("shift with an odd number of offset arguments")
        for tag, idx in pairs:
            if isinstance(tag, CartShift) or (
                isinstance(tag, Offset) and isinstance(self.program.offset_type(str(tag.value)), common.Dimension)
            ):
                # a vertical shift: by a constant, or by data (`as_offset(Koff, field)`)
                d = tag.dim if isinstance(tag, CartShift) else self.program.offset_type(str(tag.value)).value
                if d not in pos:
                    raise self.fail(f"vertical shift of an iterator without {d}")
                if isinstance(idx, Offset) and isinstance(idx.value, int):
                    by: ir.Expr = ir.Const(idx.value, pos[d].dtype)
                elif isinstance(idx, ir.Expr) and not idx.dtype.startswith("float"):
                    by = idx
                else:
                    raise self.fail(f"vertical shift by {idx}")
                pos[d] = binary("plus", pos[d], by)
                continue
            if not isinstance(idx, Offset) or not isinstance(idx.value, int):
                raise self.fail(f"horizontal shift by a non-constant index {idx}")
            if not isinstance(tag, Offset) or not isinstance(tag.value, str):
                raise self.fail(f"shift tag {tag}")
            conn = self.program.offset_type(str(tag.value))
            src = conn.source_dim.value
            if src not in pos:
                raise self.fail(f"shift {tag.value} of an iterator not on {src}")
            row = pos.pop(src)
            table = self.program.use_table(tag.value, conn)
            nb = ir.Table(table.name, row, idx.value, table.dtype)
            pos[conn.codomain.value] = nb
            if table.skip_value is not None:
                valid.append(binary("not_eq", nb, ir.Const(table.skip_value, table.dtype)))
        return Iterator(it.arg, tuple(pos.items()), tuple(valid))

    def deref(self, it: Value) -> Value:
        if not isinstance(it, Iterator):
            raise self.fail(f"deref of a non-iterator {it}")
        return self._deref_arg(it.arg, it)

    def _deref_arg(self, arg: ArgValue, it: Iterator) -> Value:
        if isinstance(arg, ScalarArg):
            return arg.param
        if isinstance(arg, HostArg):
            return self.host_param(arg.expr)
        if isinstance(arg, LazyArg):
            return self.program.deref_lazy(self, arg, it)
        if isinstance(arg, TupleArg):
            return TupleV(tuple(self._deref_arg(a, it) for a in arg.items))
        pos = dict(it.pos)
        if isinstance(arg, IndexArg):
            if arg.dim not in pos:
                raise self.fail(f"index({arg.dim}) dereferenced at a position without {arg.dim}")
            idx = pos[arg.dim]
            return idx if idx.dtype == "int32" else ir.Cast(idx, "int32")
        local_dims = [d for d in arg.dims if self.program.dim_kind(d) == "local"]
        if len(local_dims) > 1:
            raise self.fail(f"field {arg.name} with several local dimensions")

        def load(local: int | None) -> ir.Load:
            idx = []
            for d in arg.dims:
                if self.program.dim_kind(d) == "local":
                    idx.append(ir.Const(local, "int32"))
                elif d in pos:
                    idx.append(pos[d])
                else:
                    raise self.fail(f"deref of field {arg.name} (dims {arg.dims}) at a position without {d}")
            return ir.Load(arg.name, tuple(idx), arg.dtype)

        if local_dims:
            n = self.program.local_dim_size(local_dims[0])
            return ListV(tuple(load(j) for j in range(n)))
        return load(None)

    # -- builtins ---------------------------------------------------------------------------
    def builtin(self, name: str, node: itir.FunCall, env: dict) -> Value:
        if name == "if_":
            return self.if_(node, env)
        if name == "get_domain_range":  # (start, stop) of a field argument along an axis: host only
            field, axis = node.args
            fa = self.program.field_named_by(field)
            if fa is None or not isinstance(axis, itir.AxisLiteral) or axis.value not in fa.dims:
                raise self.fail(f"get_domain_range({field}, {axis})")
            pos = fa.dims.index(axis.value)
            return TupleV(tuple(ir.FieldBound(fa.name, axis.value, pos, stop) for stop in (False, True)))
        if name == "index":
            (dim,) = node.args
            if not isinstance(dim, itir.AxisLiteral):
                raise self.fail("index() of a non-axis")
            kind = self.program.dim_kind(dim.value)
            return ir.KIndex() if kind == "vertical" else ir.HIndex()
        return self.builtin_values(name, [self.eval(a, env) for a in node.args])

    def builtin_values(self, name: str, args: list[Value]) -> Value:
        if name == "if_":
            return self._merge(self.scalar(args[0]), (), args[1], (), args[2])
        if name == "reduce":
            return ReduceV(*args)
        if name in ("map_", "map_list"):
            return MapV(args[0])
        if name == "make_const_list":
            return ConstList(args[0])
        if name == "deref":
            return self.deref(args[0])
        if name == "can_deref":
            it = args[0]
            if not isinstance(it, Iterator):
                raise self.fail("can_deref of a non-iterator")
            return all_of(it.valid)
        if name == "make_tuple":
            return TupleV(tuple(args))
        if name == "tuple_get":
            idx, tup = args
            if not isinstance(tup, TupleV) or not isinstance(idx, ir.Const):
                raise self.fail(f"tuple_get on {tup}")
            return tup.items[int(idx.value)]
        if name == "list_get":
            idx, lst = args
            if not isinstance(lst, ListV):
                raise self.fail(f"list_get on {lst}")
            i = idx.value if isinstance(idx, (Offset, ir.Const)) else None
            if not isinstance(i, int):
                raise self.fail("list_get with a non-constant index")
            return force(lst.items[i])
        if name == "neighbors":
            off, it = args
            conn = self.program.offset_type(off.value)
            shifted = [self.shift(it, [off, Offset(j)]) for j in range(conn.max_neighbors)]
            return ListV(
                tuple(Thunk(lambda s=s: self.deref(s)) for s in shifted), tuple(all_of(s.valid) for s in shifted)
            )
        if name == "cast_":
            value, ty = args
            target = ty.name if isinstance(ty, Builtin) else None
            if target is None:
                raise self.fail(f"cast_ to {ty}")
            return self.scalar(value) if value.dtype == target else ir.Cast(self.scalar(value), target)
        if name in ir.BINARY_OPS:
            a, b = (self.scalar(x) for x in args)
            return binary(name, a, b)
        if name in ("neg", "not_"):
            a = self.scalar(args[0])
            if name == "neg" and isinstance(a, ir.Const):
                return ir.Const(-a.value, a.dtype)
            return ir.Unary(name, a, "bool" if name == "not_" else a.dtype)
        if name in ("minimum", "maximum", "power", "fmod", "floordiv"):
            a, b = (self.scalar(x) for x in args)
            return ir.Call(name, (a, b), ir.result_dtype(a.dtype, b.dtype))
        if name in ("isfinite", "isinf", "isnan"):
            return ir.Call(name, (self.scalar(args[0]),), "bool")
        if name in _UNARY_MATH:
            a = self.scalar(args[0])
            return ir.Call(name, (a,), a.dtype)
        if name in _TYPE_NAMES:  # type constructors used as conversion functions: float64(x)
            return ir.Cast(self.scalar(args[0]), name)
        raise self.fail(f"builtin {name!r}")

    def scalar(self, v: Value) -> ir.Expr:
        if isinstance(v, ir.Expr):
            return v
        raise self.fail(f"expected a scalar value, got {type(v).__name__}")

    def if_(self, node: itir.FunCall, env: dict) -> Value:
        cond = self.scalar(self.eval(node.args[0], env))
        if isinstance(cond, ir.Const):  # folded host/constant condition
            return self.eval(node.args[1 if cond.value else 2], env)
        # a condition on data (an upwind choice; a named value counts as data) runs one branch's
        # work per point: what only one branch reads stays in it, a field both read (the pressure
        # gradient under `pg_exdist != 0`) is computed once before them; on the index or host
        # scalars (regions of the domain) values may be computed before the branches
        fence = any(isinstance(x, (ir.Load, ir.Var)) for x in cond.walk())
        if len(self.blocks) == 1 and _per_column_load(cond):
            # named once, as GT4Py's CSE names `deref(mask)`: two `if_`s on one mask load it once,
            # and the hoist pass takes it out of the level loop (in a branch a name would be a
            # statement there, and the branch an `If` instead of a select)
            cond = self.bind_once("cond", cond)
        shared = _lazy_fields_read(node.args[1], env) & _lazy_fields_read(node.args[2], env) if fence else frozenset()
        t_stmts, t_val = self.in_block(lambda: self.eval(node.args[1], env), fence, shared)
        f_stmts, f_val = self.in_block(lambda: self.eval(node.args[2], env), fence, shared)
        return self._merge(cond, t_stmts, t_val, f_stmts, f_val)

    def _merge(self, cond, t_stmts, t_val, f_stmts, f_val) -> Value:
        if isinstance(t_val, TupleV) and isinstance(f_val, TupleV):
            if not t_stmts and not f_stmts:
                return TupleV(tuple(self._merge(cond, (), a, (), b) for a, b in zip(t_val.items, f_val.items)))
            # one variable per scalar of the tuple, nested tuples included (muphys' graupel scan
            # carries a tuple of tuples through branches with statements)
            if _tuple_shape(t_val) != _tuple_shape(f_val):
                raise self.fail(f"if_ branches of different tuple shapes {_tuple_shape(t_val)} and {_tuple_shape(f_val)}")
            t_items, f_items = _tuple_leaves(t_val), _tuple_leaves(f_val)
            out_vars = [self.fresh("if", self.scalar(a).dtype) for a in t_items]
            self._emit_if(
                cond,
                t_stmts + tuple(ir.Let(v, a, declared=True) for v, a in zip(out_vars, t_items)),
                f_stmts + tuple(ir.Let(v, b, declared=True) for v, b in zip(out_vars, f_items)),
                out_vars,
            )
            return _tuple_like(t_val, iter(out_vars))
        a, b = self.scalar(t_val), self.scalar(f_val)
        dtype = ir.result_dtype(a.dtype, b.dtype)
        if not t_stmts and not f_stmts:
            return ir.Select(cond, a, b, dtype)
        var = self.fresh("if", dtype)
        self._emit_if(cond, t_stmts + (ir.Let(var, a, declared=True),), f_stmts + (ir.Let(var, b, declared=True),), [var])
        return var

    def _emit_if(self, cond: ir.Expr, then: tuple, orelse: tuple, out_vars: list) -> None:
        """The `If` (its results declared first), or its branches appended to the last `If` of
        this block on the same condition where only lets that do not read it stand between:
        GT4Py's fused stencil makes one select per field of an upwind choice (rho, theta), each
        its own `if_` here; as two `If`s nvcc loaded the gradient weights both gather twice
        (compute_rho_theta_pgrad_and_update_vn: 72 ld in the PTX, 66 joined, 62 on the full list)."""
        stmts = self.blocks[-1].stmts
        j = len(stmts) - 1
        while j >= 0 and (isinstance(stmts[j], ir.Declare) or (isinstance(stmts[j], ir.Let) and not stmts[j].declared)):
            j -= 1
        if j >= 0 and isinstance(stmts[j], ir.If) and stmts[j].cond == cond:
            prev, between = stmts[j], stmts[j + 1 :]
            assigned = _defined((prev,))
            read = {x.name for s in between for e in ir.stmt_exprs(s) for x in e.walk() if isinstance(x, ir.Var)}
            read |= {x.name for x in cond.walk() if isinstance(x, ir.Var)}
            if not assigned & read:
                del stmts[j:]
                stmts.extend([*between, *(ir.Declare(v) for v in out_vars)])
                stmts.append(ir.If(cond, prev.then + then, prev.orelse + orelse))
                return
        stmts.extend([*(ir.Declare(v) for v in out_vars), ir.If(cond, then, orelse)])


def _tuple_shape(v: Value) -> object:
    """The nesting of a (tuple) value: None for a non-tuple, else a tuple of its items' shapes."""
    return tuple(_tuple_shape(x) for x in v.items) if isinstance(v, TupleV) else None


def _tuple_leaves(v: Value) -> list:
    """The non-tuple values of a (nested) tuple, depth first."""
    return [leaf for x in v.items for leaf in _tuple_leaves(x)] if isinstance(v, TupleV) else [v]


def _tuple_like(shape: Value, leaves) -> Value:
    """A value nested as `shape`, its non-tuple values taken from `leaves` in order."""
    return TupleV(tuple(_tuple_like(x, leaves) for x in shape.items)) if isinstance(shape, TupleV) else next(leaves)


def _per_column_load(e: ir.Expr) -> bool:
    """A load not on the level (a mask over cells): the same at every level of a column."""
    nodes = list(e.walk())
    return any(isinstance(x, ir.Load) for x in nodes) and not any(isinstance(x, (ir.KIndex, ir.Var)) for x in nodes)


def _defined(stmts: tuple) -> set[str]:
    """Names the statements define or assign (through `If` branches)."""
    return {s.var.name for s in ir.walk_stmts(stmts) if isinstance(s, (ir.Let, ir.Declare))}


def _lazy_fields_read(node: itir.Expr, env: dict) -> frozenset:
    """Ids of the lazy fields (early GTIR) an expression reads: those behind the iterators it
    names and, recursively, the ones they are computed from."""
    ids: set[int] = set()

    def visit(base) -> None:
        if id(base) not in ids:
            ids.add(id(base))
            for a in base.args:
                if inner := getattr(a, "base", None):
                    visit(inner)

    for ref in node.pre_walk_values().if_isinstance(itir.SymRef):
        v = env.get(str(ref.id))
        if isinstance(v, Iterator) and (base := getattr(v.arg, "base", None)) is not None:
            visit(base)
    return frozenset(ids)


_UNARY_MATH = {
    "abs", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "sqrt", "exp", "log", "gamma", "cbrt", "floor", "ceil", "trunc",
}  # fmt: skip
_TYPE_NAMES = frozenset(DTYPES)
