"""GTIR (after GT4Py's own passes) -> icoforge kernel IR.

After `apply_common_transforms(..., extract_temporaries=True, unroll_reduce=True)` every statement
is `target @ domain <- as_fieldop(stencil, domain)(args)` (or a plain copy), possibly under host
`if`s. The stencil is a lambda over iterators; we lower it by *partial evaluation*: iterators,
lambdas, tuples and offsets are compile-time values, and everything that depends on field data
becomes a kernel-IR expression. Lambda applications with non-trivial arguments become `Let`s
(GT4Py's common-subexpression pass introduced them, so they name real reuse), and `if_` branches
that need statements of their own become structured `If`s so nothing runs in the branch not taken.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass
from typing import Any, Callable, Union

from gt4py.next import common
from gt4py.next.iterator import ir as itir
from gt4py.next.type_system import type_specifications as ts

from icoforge.backend import ir
from icoforge.errors import UnsupportedConstructError

# ---------------------------------------------------------------------------------------------
# Compile-time values of the partial evaluator


@dataclass(frozen=True)
class FieldArg:
    """A field (program parameter or temporary) bound to a stencil parameter."""

    name: str
    dims: tuple[str, ...]
    dtype: str


@dataclass(frozen=True)
class ScalarArg:
    """A host scalar bound to a stencil parameter; derefs to the kernel argument `param`."""

    param: ir.Param


@dataclass(frozen=True)
class TupleArg:
    items: tuple["ArgValue", ...]


@dataclass(frozen=True)
class IndexArg:
    """`index(dim)` passed to a stencil: derefs to the iterator's position along `dim`."""

    dim: str


ArgValue = Union[FieldArg, ScalarArg, TupleArg, IndexArg]


@dataclass(frozen=True)
class Iterator:
    """An iterator: which data, and where it points (dimension name -> index expression)."""

    arg: ArgValue
    pos: tuple[tuple[str, ir.Expr], ...]
    valid: tuple[ir.Expr, ...] = ()  # conditions for can_deref (neighbour != skip value)

    def at(self, dim: str) -> ir.Expr | None:
        return dict(self.pos).get(dim)


@dataclass(frozen=True)
class Closure:
    params: tuple[str, ...]
    body: itir.Expr
    env: dict


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True)
class Offset:
    value: Union[int, str]


@dataclass(frozen=True)
class Axis:
    name: str


@dataclass(frozen=True)
class CartShift:
    dim: str


@dataclass(frozen=True)
class TupleV:
    items: tuple[Any, ...]


@dataclass(frozen=True)
class ListV:
    """A neighbour list (a sparse field's row, or `neighbors(...)`): one value per local index."""

    items: tuple[Any, ...]


Value = Any  # ir.Expr | Iterator | Closure | Builtin | Offset | CartShift | TupleV | ListV


def dtype_of(t: ts.TypeSpec | None) -> str:
    if isinstance(t, ts.ScalarType):
        return t.kind.name.lower()
    if isinstance(t, ts.FieldType):
        return dtype_of(t.dtype)
    if isinstance(t, ts.ListType):
        return dtype_of(t.element_type)
    raise UnsupportedConstructError(f"cannot determine a scalar dtype from type {t}")


def _sanitize(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name.encode("ascii", "replace").decode())
    return s if s and not s[0].isdigit() else f"v{s}"


def _literal(node: itir.Literal) -> ir.Const:
    dtype = dtype_of(node.type)
    v = node.value
    if dtype == "bool":
        return ir.Const(v in ("True", "true", True), dtype)
    if dtype.startswith(("int", "uint")):
        return ir.Const(int(v), dtype)
    return ir.Const(float(v), dtype)


# ---------------------------------------------------------------------------------------------
# Expression builders with light constant folding (keeps index arithmetic readable: `k + 1`)


def binary(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    dtype = "bool" if op in ir.COMPARISONS or op in ("and_", "or_") else ir.result_dtype(a.dtype, b.dtype)
    if isinstance(a, ir.Const) and isinstance(b, ir.Const) and op in ("plus", "minus", "multiplies"):
        f = {"plus": lambda x, y: x + y, "minus": lambda x, y: x - y, "multiplies": lambda x, y: x * y}[op]
        return ir.Const(f(a.value, b.value), dtype)
    if op in ("plus", "minus") and isinstance(b, ir.Const) and b.value == 0 and not dtype.startswith("float"):
        return a
    if op in ("and_", "or_"):
        for x, y in ((a, b), (b, a)):
            if isinstance(x, ir.Const):
                if op == "and_":
                    return y if x.value else ir.Const(False, "bool")
                return ir.Const(True, "bool") if x.value else y
    if op == "plus" and isinstance(b, ir.Const) and isinstance(b.value, int) and b.value < 0:
        return ir.Binary("minus", a, ir.Const(-b.value, b.dtype), dtype)
    return ir.Binary(op, a, b, dtype)


def all_of(conds: tuple[ir.Expr, ...]) -> ir.Expr:
    out: ir.Expr = ir.Const(True, "bool")
    for c in conds:
        out = binary("and_", out, c)
    return out


# ---------------------------------------------------------------------------------------------


@dataclass
class _Block:
    stmts: list


class StencilLowering:
    """Partial evaluator for one stencil lambda; collects statements and kernel arguments."""

    def __init__(self, program: "ProgramLowering", where: str):
        self.program = program
        self.where = where
        self.blocks: list[_Block] = [_Block([])]
        self.counter = itertools.count()
        self.kernel_args: list[tuple[ir.Param, ir.Expr]] = []

    # -- statement emission ---------------------------------------------------------------
    def emit(self, s: ir.Stmt) -> None:
        self.blocks[-1].stmts.append(s)

    def fresh(self, hint: str, dtype: str) -> ir.Var:
        return ir.Var(f"{_sanitize(hint)}_{next(self.counter)}", dtype)

    def bind(self, hint: str, value: ir.Expr) -> ir.Expr:
        """Name a value with a Let unless it is trivial to recompute."""
        if isinstance(value, (ir.Const, ir.Var, ir.Param, ir.HIndex, ir.KIndex)):
            return value
        var = self.fresh(hint, value.dtype)
        self.emit(ir.Let(var, value))
        return var

    def in_block(self, fn: Callable[[], Value]) -> tuple[tuple[ir.Stmt, ...], Value]:
        self.blocks.append(_Block([]))
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
            return _literal(node)
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
        raise self.fail(f"call of {fn}")

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
        args = [self.eval(a, env) for a in node.args]
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
            return lst.items[i]
        if name == "neighbors":
            off, it = args
            conn = self.program.offset_type(off.value)
            return ListV(
                tuple(self.deref(self.shift(it, [off, Offset(j)])) for j in range(conn.max_neighbors))
            )
        if name == "cast_":
            value, ty = args
            target = ty.name if isinstance(ty, Builtin) else None
            if target is None:
                raise self.fail(f"cast_ to {ty}")
            return self.scalar(value) if value.dtype == target else ir.Cast(self.scalar(value), target)
        if name == "index":
            (dim,) = node.args
            if not isinstance(dim, itir.AxisLiteral):
                raise self.fail("index() of a non-axis")
            kind = self.program.dim_kind(dim.value)
            return ir.KIndex() if kind == "vertical" else ir.HIndex()
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
        t_stmts, t_val = self.in_block(lambda: self.eval(node.args[1], env))
        f_stmts, f_val = self.in_block(lambda: self.eval(node.args[2], env))
        return self._merge(cond, t_stmts, t_val, f_stmts, f_val)

    def _merge(self, cond, t_stmts, t_val, f_stmts, f_val) -> Value:
        if isinstance(t_val, TupleV) and isinstance(f_val, TupleV):
            if not t_stmts and not f_stmts:
                return TupleV(tuple(self._merge(cond, (), a, (), b) for a, b in zip(t_val.items, f_val.items)))
            out_vars = [self.fresh("if", self.scalar(a).dtype) for a in t_val.items]
            for v in out_vars:
                self.emit(ir.Declare(v))
            self.emit(
                ir.If(
                    cond,
                    t_stmts + tuple(ir.Let(v, a, declared=True) for v, a in zip(out_vars, t_val.items)),
                    f_stmts + tuple(ir.Let(v, b, declared=True) for v, b in zip(out_vars, f_val.items)),
                )
            )
            return TupleV(tuple(out_vars))
        a, b = self.scalar(t_val), self.scalar(f_val)
        dtype = ir.result_dtype(a.dtype, b.dtype)
        if not t_stmts and not f_stmts:
            return ir.Select(cond, a, b, dtype)
        var = self.fresh("if", dtype)
        self.emit(ir.Declare(var))
        self.emit(ir.If(cond, t_stmts + (ir.Let(var, a, declared=True),), f_stmts + (ir.Let(var, b, declared=True),)))
        return var


_UNARY_MATH = {
    "abs", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "sqrt", "exp", "log", "gamma", "cbrt", "floor", "ceil", "trunc",
}  # fmt: skip
_TYPE_NAMES = {"float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool"}


# ---------------------------------------------------------------------------------------------


class ProgramLowering:
    """Lowers one `itir.Program` (after GT4Py's passes) to `ir.ProgramIR`."""

    def __init__(self, program: itir.Program, arg_types: tuple[ts.TypeSpec, ...], offset_provider_type: dict):
        self.gtir = program
        self.name = str(program.id)
        self.offset_provider_type = offset_provider_type
        self.function_defs = {str(fd.id): fd for fd in program.function_definitions}
        self.dims: dict[str, str] = {}  # name -> horizontal | vertical | local
        self.fields: dict[str, FieldArg] = {}
        self.scalars: dict[str, ir.Param] = {}
        self.params: list = []
        self.tables: dict[str, ir.TableInfo] = {}
        # a tuple-of-fields parameter (a field operator's `out=(a, b, c)`): its element fields are
        # parameters of their own; (position among GT4Py's parameters, element count) for the call
        self.tuple_fields: dict[str, tuple[FieldArg, ...]] = {}
        self.tuple_params: list[tuple[int, int]] = []
        self.kernel_count = itertools.count()
        self.short_name = _short_program_name(self.name)
        for position, (sym, t) in enumerate(zip(program.params, arg_types, strict=True)):
            self._add_param(str(sym.id), t, position)
        for conn in offset_provider_type.values():
            if isinstance(conn, common.NeighborConnectivityType):
                for d in (*conn.domain, conn.codomain):
                    self._note_dim(d)

    # -- environment ------------------------------------------------------------------------
    def _note_dim(self, d: common.Dimension) -> None:
        kind = {
            common.DimensionKind.HORIZONTAL: "horizontal",
            common.DimensionKind.VERTICAL: "vertical",
            common.DimensionKind.LOCAL: "local",
        }[d.kind]
        self.dims[d.value] = kind

    def dim_kind(self, name: str) -> str:
        if name not in self.dims:
            raise UnsupportedConstructError(f"program {self.name!r}: unknown dimension {name!r}")
        return self.dims[name]

    def local_dim_size(self, dim: str) -> int:
        for conn in self.offset_provider_type.values():
            if isinstance(conn, common.NeighborConnectivityType) and conn.neighbor_dim.value == dim:
                return conn.max_neighbors
        raise UnsupportedConstructError(f"program {self.name!r}: no connectivity defines local dimension {dim!r}")

    def _add_param(self, name: str, t: ts.TypeSpec, position: int) -> None:
        if isinstance(t, ts.TupleType) and t.types and all(isinstance(e, ts.FieldType) for e in t.types):
            items = []
            for i, element in enumerate(t.types):
                sub = f"{name}__{i}"
                if sub in self.fields or sub in self.scalars:
                    raise UnsupportedConstructError(f"program {self.name!r}: tuple element name {sub!r} is taken")
                self._add_param(sub, element, position)
                items.append(self.fields[sub])
            self.tuple_fields[name] = tuple(items)
            self.tuple_params.append((position, len(items)))
        elif isinstance(t, ts.FieldType):
            for d in t.dims:
                self._note_dim(d)
            dims = tuple(d.value for d in t.dims)
            f = FieldArg(name, dims, dtype_of(t.dtype))
            self.fields[name] = f
            self.params.append(ir.FieldParam(name, dims, f.dtype))
        elif isinstance(t, ts.ScalarType):
            p = ir.Param(_sanitize(name), dtype_of(t))
            self.scalars[name] = p
            self.params.append(p)
        else:
            raise UnsupportedConstructError(
                f"program {self.name!r}: parameter {name!r} of type {t} (nested tuples and tuples of scalars are not supported yet)"
            )

    def offset_type(self, tag: str):
        if tag not in self.offset_provider_type:
            raise UnsupportedConstructError(f"program {self.name!r}: offset {tag!r} missing from the offset provider")
        return self.offset_provider_type[tag]

    def use_table(self, tag: str, conn: common.NeighborConnectivityType) -> ir.TableInfo:
        tag = str(tag)  # GT4Py hands us eve SymbolRefs; our IR holds plain strings
        if tag not in self.tables:
            self.tables[tag] = ir.TableInfo(
                name=tag,
                source_dim=conn.source_dim.value,
                target_dim=conn.codomain.value,
                max_neighbors=conn.max_neighbors,
                skip_value=None if conn.skip_value is None else int(conn.skip_value),
                dtype=str(conn.dtype.scalar_type.__name__),
            )
        return self.tables[tag]

    # -- host expressions -------------------------------------------------------------------
    def host_expr(self, node: itir.Expr) -> ir.Expr:
        """Domain bounds, host conditions and scalar stencil arguments: over program scalars only."""
        sl = StencilLowering(self, "host expression")
        env: dict = dict(self.scalars)
        v = sl.eval(node, env)
        if sl.blocks[0].stmts:
            # host expressions with lets: substitute (they are tiny) by evaluating without binding
            raise UnsupportedConstructError(f"program {self.name!r}: host expression with local bindings: {node}")
        if not isinstance(v, ir.Expr):
            raise UnsupportedConstructError(f"program {self.name!r}: host expression {node} is not a scalar")
        return v

    def domain(self, node: itir.Expr) -> ir.Domain:
        if isinstance(node, itir.FunCall) and isinstance(node.fun, itir.SymRef) and node.fun.id in (
            "unstructured_domain",
            "cartesian_domain",
        ):
            hdim = h0 = h1 = k0 = k1 = None
            for r in node.args:
                if not (isinstance(r, itir.FunCall) and getattr(r.fun, "id", None) == "named_range"):
                    raise UnsupportedConstructError(f"program {self.name!r}: domain range {r}")
                axis, start, stop = r.args
                self._note_dim(common.Dimension(axis.value, axis.kind))
                kind = self.dim_kind(axis.value)
                s, e = self._bound(start), self._bound(stop)
                if kind == "vertical":
                    k0, k1 = s, e
                elif kind == "horizontal" and hdim is None:
                    hdim, h0, h1 = axis.value, s, e
                else:
                    raise UnsupportedConstructError(f"program {self.name!r}: domain over {axis.value} ({kind})")
            return ir.Domain(hdim, h0, h1, k0, k1)
        raise UnsupportedConstructError(f"program {self.name!r}: domain expression {node}")

    def _bound(self, node: itir.Expr) -> ir.Expr:
        e = self.host_expr(node)
        return e if e.dtype in ("int32", "int64") else ir.Cast(e, "int32")

    # -- statements -------------------------------------------------------------------------
    def lower(self) -> ir.ProgramIR:
        temporaries = []
        for tmp in self.gtir.declarations:
            dom = self.domain(tmp.domain)
            dims = tuple(d for d in (dom.hdim, "K" if dom.k_start is not None else None) if d)
            dims = tuple(d for d in dims)
            if isinstance(tmp.dtype, ts.TupleType):
                raise UnsupportedConstructError(f"program {self.name!r}: tuple-typed temporary {tmp.id}")
            vdim = next((d for d, k in self.dims.items() if k == "vertical"), "K")
            dims = tuple(d for d in (dom.hdim, vdim if dom.k_start is not None else None) if d)
            t = ir.Temporary(str(tmp.id), dims, dtype_of(tmp.dtype), dom)
            temporaries.append(t)
            self.fields[t.name] = FieldArg(t.name, t.dims, t.dtype)
        steps = self.lower_stmts(self.gtir.body)
        return ir.ProgramIR(
            name=self.name,
            params=tuple(self.params),
            temporaries=tuple(temporaries),
            tables=tuple(self.tables.values()),
            steps=steps,
            dim_kinds=tuple(self.dims.items()),
            dim_size_tables=self._dim_size_tables(),
            tuple_params=tuple(self.tuple_params),
        )

    def _dim_size_tables(self) -> tuple[tuple[str, str], ...]:
        out: dict[str, str] = {}
        for tag, conn in sorted(self.offset_provider_type.items()):
            if isinstance(conn, common.NeighborConnectivityType):
                out.setdefault(conn.source_dim.value, tag)
        return tuple(sorted(out.items()))

    def lower_stmts(self, stmts: list[itir.Stmt]) -> tuple[ir.Step, ...]:
        out: list[ir.Step] = []
        for s in stmts:
            if isinstance(s, itir.IfStmt):
                cond = self.host_expr(s.cond)
                out.append(ir.HostIf(cond, self.lower_stmts(s.true_branch), self.lower_stmts(s.false_branch)))
            elif isinstance(s, itir.SetAt):
                out.append(self.lower_set_at(s))
            else:
                raise UnsupportedConstructError(f"program {self.name!r}: statement {type(s).__name__}")
        return tuple(out)

    def field_named_by(self, node: itir.Expr) -> FieldArg | None:
        """The field argument `node` names: a parameter, a temporary or a tuple parameter's element."""
        if isinstance(node, itir.SymRef):
            return self.fields.get(str(node.id))
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "tuple_get":
            idx, tup = node.args
            if isinstance(tup, itir.SymRef) and str(tup.id) in self.tuple_fields and isinstance(idx, itir.Literal):
                return self.tuple_fields[str(tup.id)][int(idx.value)]
        return None

    def _targets(self, node: itir.Expr) -> list[FieldArg]:
        if isinstance(node, itir.SymRef) and str(node.id) in self.tuple_fields:
            return list(self.tuple_fields[str(node.id)])
        if (field := self.field_named_by(node)) is not None:  # a field, or a tuple parameter's element
            return [field]
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "make_tuple":
            return [t for a in node.args for t in self._targets(a)]
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "tuple_get":
            idx, tup = node.args
            if isinstance(tup, itir.FunCall) and getattr(tup.fun, "id", None) == "make_tuple":
                return self._targets(tup.args[int(idx.value)])
        raise UnsupportedConstructError(f"program {self.name!r}: assignment target {node}")

    def arg_value(self, node: itir.Expr, sl: StencilLowering) -> ArgValue:
        if isinstance(node, itir.SymRef) and str(node.id) in self.tuple_fields:
            return TupleArg(tuple(self.tuple_fields[str(node.id)]))
        if isinstance(node, itir.SymRef) and str(node.id) in self.fields:
            return self.fields[str(node.id)]
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "make_tuple":
            return TupleArg(tuple(self.arg_value(a, sl) for a in node.args))
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "tuple_get":
            idx, tup = node.args
            v = self.arg_value(tup, sl)
            if isinstance(v, TupleArg):
                return v.items[int(idx.value)]
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "index":
            return IndexArg(node.args[0].value)
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "as_fieldop":
            raise UnsupportedConstructError(
                f"program {self.name!r}: nested as_fieldop as an argument (temporaries were not extracted)"
            )
        # a host scalar expression: computed on the host, passed as a kernel argument
        value = self.host_expr(node)
        if isinstance(value, (ir.Param, ir.Const)):  # program scalars are passed to kernels by name
            return ScalarArg(value)
        p = ir.Param(f"a{len(sl.kernel_args)}", value.dtype)
        sl.kernel_args.append((p, value))
        return ScalarArg(p)

    def lower_set_at(self, s: itir.SetAt) -> ir.Kernel:
        targets = self._targets(s.target)
        domain = self.domain(s.domain)
        name = f"{self.short_name}_k{next(self.kernel_count)}"
        sl = StencilLowering(self, f"kernel {name} (target {s.target})")
        expr = s.expr
        if isinstance(expr, itir.FunCall) and isinstance(expr.fun, itir.FunCall) and getattr(expr.fun.fun, "id", None) == "as_fieldop":
            stencil = expr.fun.args[0]
            args = [self.arg_value(a, sl) for a in expr.args]
            its = [self._iterator_at_domain(a, domain) for a in args]
            if isinstance(stencil, itir.FunCall) and getattr(stencil.fun, "id", None) == "scan":
                return self._lower_scan(name, sl, stencil, its, targets, domain)
            value = sl.apply(sl.eval(stencil, {}), its)
        else:
            # a copy (`tmp <- other_field`) or a tuple of them
            src = self.arg_value(expr, sl)
            value = sl.deref(self._iterator_at_domain(src, domain))
        self._store(sl, targets, value, name)
        return ir.Kernel(name, domain, tuple(sl.blocks[0].stmts), tuple(sl.kernel_args))

    def _lower_scan(self, name, sl: StencilLowering, scan: itir.FunCall, its, targets, domain) -> ir.Kernel:
        fn_node, fwd_node, init_node = scan.args
        forward = sl.eval(fwd_node, {})
        if not isinstance(forward, ir.Const):
            raise sl.fail("scan direction is not a constant")
        init = sl.eval(init_node, dict(self.scalars))
        flat_init = _flatten(init)
        state_vars = [sl.fresh("state", sl.scalar(v).dtype) for v in flat_init]
        state_val = _unflatten(init, iter(state_vars))
        fn = sl.eval(fn_node, {})
        new_state = sl.apply(fn, [state_val, *its])
        flat_new = _flatten(new_state)
        if len(flat_new) != len(state_vars):
            raise sl.fail("scan state changes shape")
        # outputs are written from the new state before it is carried on
        new_vars = [sl.bind("next", sl.scalar(v)) for v in flat_new]
        self._store(sl, targets, _unflatten(new_state, iter(new_vars)), name)
        for var, nv in zip(state_vars, new_vars):
            sl.emit(ir.Let(var, nv, declared=True))
        state = tuple(ir.ScanState(v, sl.scalar(i)) for v, i in zip(state_vars, flat_init))
        return ir.Kernel(name, domain, tuple(sl.blocks[0].stmts), tuple(sl.kernel_args), state, bool(forward.value))

    def _iterator_at_domain(self, arg: ArgValue, domain: ir.Domain) -> Iterator:
        pos = []
        if domain.hdim is not None:
            pos.append((domain.hdim, ir.HIndex()))
        if domain.k_start is not None:
            vdim = next((d for d, k in self.dims.items() if k == "vertical"), "K")
            pos.append((vdim, ir.KIndex()))
        return Iterator(arg, tuple(pos))

    def _store(self, sl: StencilLowering, targets: list[FieldArg], value: Value, kname: str) -> None:
        flat = _flatten(value)
        if len(flat) != len(targets):
            raise sl.fail(f"{len(flat)} values for {len(targets)} targets")
        for t, v in zip(targets, flat):
            v = sl.scalar(v)
            if v.dtype != t.dtype:
                v = ir.Cast(v, t.dtype)
            sl.emit(ir.Store(t.name, v))


def _flatten(v: Value) -> list:
    if isinstance(v, TupleV):
        return [x for item in v.items for x in _flatten(item)]
    return [v]


def _unflatten(template: Value, flat) -> Value:
    if isinstance(template, TupleV):
        return TupleV(tuple(_unflatten(t, flat) for t in template.items))
    return next(flat)


def _short_program_name(name: str) -> str:
    """Stable, short kernel-name prefix. Profilers truncate or choke on long names, so names over
    32 characters keep the first four letters of each word and drop filler words:
    `vertically_implicit_solver_at_predictor_step` -> `vert_impl_solv_pred_step`."""
    if len(name) <= 32:
        return name
    filler = {"at", "of", "and", "the", "for", "to", "in", "on", "from", "with"}
    words = [w[:4] for w in name.split("_") if w and w not in filler]
    return "_".join(words)[:40].rstrip("_")


def lower_program(program: itir.Program, arg_types, offset_provider_type) -> ir.ProgramIR:
    return ProgramLowering(program, tuple(arg_types), dict(offset_provider_type)).lower()
