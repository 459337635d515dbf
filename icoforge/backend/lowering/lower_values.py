"""Compile-time values of the lowering's partial evaluator (lower.py, lower_stencil.py):
iterators, lambdas, tuples, offsets and arguments are these; everything that depends on field
data is a kernel-IR expression. Plus expression builders with light constant folding."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Union

from gt4py.next.iterator import ir as itir
from gt4py.next.type_system import type_specifications as ts

from icoforge.backend.ir import ir
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


@dataclass(frozen=True)
class HostArg:
    """A host scalar expression (early GTIR: bound before the kernel that reads it is known); each
    kernel that dereferences it gets it as a kernel argument of its own."""

    expr: ir.Expr


@dataclass(eq=False)
class LazyField:
    """A field operator of the early GTIR not stored yet (lower_fields.py): recomputed where it is
    read, or stored into temporaries (`stored`) the first time it is read where it cannot be."""

    stencil: itir.Expr
    args: tuple["ArgValue", ...]
    domain: itir.Expr | None
    what: str  # for messages
    stored: Any = None  # FieldArg / TupleArg of temporaries once stored
    is_list: bool = False  # its values are neighbour lists: never stored
    fused_inputs: Any = None  # lower_fields._fused_inputs, once computed


@dataclass(frozen=True)
class LazyArg:
    """Element `proj` of a (tuple-valued) LazyField."""

    base: LazyField
    proj: tuple[int, ...] = ()


ArgValue = Union[FieldArg, ScalarArg, TupleArg, IndexArg, HostArg, LazyArg]


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
    """A neighbour list (a sparse field's row, or `neighbors(...)`): one value per local index.
    An item may be a `Thunk` (computed where it is used: inside the branch that checks `valid`);
    `valid` (early GTIR only): per item, the neighbour exists (`can_deref`), None: unknown."""

    items: tuple[Any, ...]
    valid: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Thunk:
    """A list item computed when it is used (`force`)."""

    fn: Any

    def force(self) -> Any:
        return self.fn()


def force(v: Any) -> Any:
    return v.force() if isinstance(v, Thunk) else v


@dataclass(frozen=True)
class ReduceV:
    """`reduce(fun, init)` before it is applied to lists."""

    fun: Any
    init: Any


@dataclass(frozen=True)
class MapV:
    """`map_(fun)` / `map_list(fun)` before it is applied to lists."""

    fun: Any


@dataclass(frozen=True)
class ConstList:
    """`make_const_list(x)`: x for every local index."""

    value: Any


Value = Any  # ir.Expr | Iterator | Closure | Builtin | Offset | CartShift | TupleV | ListV


def dtype_of(t: ts.TypeSpec | None) -> str:
    if isinstance(t, ts.ScalarType):
        return t.kind.name.lower()
    if isinstance(t, ts.FieldType):
        return dtype_of(t.dtype)
    if isinstance(t, ts.ListType):
        return dtype_of(t.element_type)
    raise UnsupportedConstructError(f"cannot determine a scalar dtype from type {t}")


def sanitize(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name.encode("ascii", "replace").decode())
    return s if s and not s[0].isdigit() else f"v{s}"


def literal(node: itir.Literal) -> ir.Const:
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
    if op in _ORDER and (folded := _infinite_bound(op, a, b)) is not None:
        return folded
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


_ORDER = {"less": lambda x, y: x < y, "less_equal": lambda x, y: x <= y, "greater": lambda x, y: x > y, "greater_equal": lambda x, y: x >= y}


def _infinite_bound(op: str, a: ir.Expr, b: ir.Expr) -> ir.Const | None:
    """An integer compared with an infinite constant (early GTIR: `concat_where`'s open bounds,
    `-inf <= k`; GT4Py's ConstantFolding removes them on the full path): always true or false."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ir.Const) and isinstance(x.value, float) and x.value in (float("inf"), float("-inf")):
            if not y.dtype.startswith(("int", "uint")):
                return None
            lhs, rhs = (x.value, 0) if x is a else (0, x.value)
            return ir.Const(bool(_ORDER[op](lhs, rhs)), "bool")
    return None


def all_of(conds: tuple[ir.Expr, ...]) -> ir.Expr:
    out: ir.Expr = ir.Const(True, "bool")
    for c in conds:
        out = binary("and_", out, c)
    return out
