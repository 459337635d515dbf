"""Rendering shared by every target: C types, expressions, statements, names.

Fields are addressed with explicit strides: element (i, k) of `vn` is `vn[i * vn_s0 + k * vn_s1]`,
the base pointer already shifted by the field's origin. Strides are run-time values, so one build
serves any layout. A renderer may address several arrays with one set of strides, one of them
1 and left out (`ExprRenderer.stride_sets`: the GPU kernels' stride sets, cuda.py), e.g.
`vn[i + k * Edge_K_s1]`.
"""

from __future__ import annotations

import math

from icoforge.backend.ir import ir
from icoforge.backend.ir.dtypes import DTYPES

C_TYPES = {name: d.c for name, d in DTYPES.items()}

CPP_KEYWORDS = frozenset(
    "alignas alignof and asm auto bool break case catch char class const constexpr continue default delete do "
    "double else enum explicit export extern false float for friend goto if inline int long mutable namespace new "
    "noexcept not nullptr operator or private protected public register return short signed sizeof static struct "
    "switch template this throw true try typedef typename union unsigned using virtual void volatile while xor "
    "i k a".split()
)

MATH_FUNCS = {
    "abs": "abs", "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "sqrt": "sqrt", "exp": "exp", "log": "log",
    "gamma": "tgamma", "cbrt": "cbrt", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
    "power": "pow", "fmod": "fmod", "isfinite": "isfinite", "isinf": "isinf", "isnan": "isnan",
}  # fmt: skip


DEVICE_TYPES = {name: d.device for name, d in DTYPES.items()}  # no <cstdint> on the device


def ctype(dtype: str) -> str:
    return C_TYPES[dtype]


def cname(name: str) -> str:
    """A C identifier for a GT4Py symbol (never a keyword, never one of our loop variables)."""
    return f"{name}_" if name in CPP_KEYWORDS else name


class ExprRenderer:
    """Renders kernel-IR expressions as C++ (also valid CUDA/HIP device code).

    `std_prefix` is "std::" on the host and "" on devices (CUDA's math functions are global).
    """

    def __init__(self, std_prefix: str = "std::", index_type: str = "long", device: bool = False):
        self.std = std_prefix
        self.index_type = index_type
        self.device = device
        self.types = DEVICE_TYPES if device else C_TYPES
        # array (C name) -> (the stride set it is addressed with, its dimension of stride 1 or None);
        # default: its own strides, none folded
        self.stride_sets: dict[str, tuple[str, int | None]] = {}

    def stride(self, name: str, d: int) -> str | None:
        """The stride of array `name` (its C name) along its dimension `d`; None: 1, left out."""
        set_name, unit = self.stride_sets.get(name, (name, None))
        return None if d == unit else f"{set_name}_s{d}"

    def ctype(self, dtype: str) -> str:
        return self.types[dtype]

    def __call__(self, e: ir.Expr) -> str:
        return self.render(e)

    def render(self, e: ir.Expr) -> str:
        m = getattr(self, f"r_{type(e).__name__}")
        return m(e)

    def r_Const(self, e: ir.Const) -> str:
        v = e.value
        if e.dtype == "bool":
            return "true" if v else "false"
        if e.dtype in ir.FLOAT_DTYPES:
            if math.isinf(v):
                return "INFINITY" if v > 0 else "(-INFINITY)"
            if math.isnan(v):
                return "NAN"
            s = repr(float(v))
            s = s if ("e" in s or "." in s) else s + ".0"
            s = f"({s})" if v < 0 else s
            return s + ("f" if e.dtype == "float32" else "")
        s = str(int(v))
        if e.dtype in ("int64", "uint64"):
            s = f"({self.ctype(e.dtype)})({s})"
        return f"({s})" if v < 0 else s

    def r_Param(self, e: ir.Param) -> str:
        return cname(e.name)

    def r_Var(self, e: ir.Var) -> str:
        return cname(e.name)

    def r_HIndex(self, e) -> str:
        return "i"

    def r_KIndex(self, e) -> str:
        return "k"

    def r_FieldBound(self, e: ir.FieldBound) -> str:
        return f"{cname(e.field)}_{'stop' if e.stop else 'start'}_{e.dim}"

    def index_term(self, idx: ir.Expr, stride: str | None) -> str | None:
        if isinstance(idx, ir.Const):
            if idx.value == 0:
                return None
            return f"{idx.value} * {stride}" if stride else f"{idx.value}"
        s = self.render(idx)
        if isinstance(idx, (ir.Binary, ir.Select)):
            s = f"({s})"
        return f"{s} * {stride}" if stride else s

    def offset(self, name: str, index: tuple[ir.Expr, ...]) -> str:
        terms = [t for d, idx in enumerate(index) if (t := self.index_term(idx, self.stride(name, d))) is not None]
        return " + ".join(terms) if terms else "0"

    def r_Load(self, e: ir.Load) -> str:
        name = cname(e.field)
        return f"{name}[{self.offset(name, e.index)}]"

    def r_Table(self, e: ir.Table) -> str:
        name = cname(e.table)
        return f"{name}[{self.offset(name, (e.row, ir.Const(e.col, 'int32')))}]"

    def r_Unary(self, e: ir.Unary) -> str:
        op = "-" if e.op == "neg" else "!"
        return f"{op}{self.paren(e.arg)}"

    def r_Binary(self, e: ir.Binary) -> str:
        op = ir.BINARY_OPS[e.op]
        if e.op == "xor_" and e.dtype == "bool":
            op = "!="
        return f"{self.paren(e.lhs)} {op} {self.paren(e.rhs)}"

    def r_Call(self, e: ir.Call) -> str:
        args = [self.render(a) for a in e.args]
        if e.fn in ("minimum", "maximum"):
            t = self.ctype(e.dtype)
            a, b = (a if x.dtype == e.dtype else f"static_cast<{t}>({a})" for a, x in zip(args, e.args))
            # std::min/max semantics (NaN handling included) on every target
            fn = f"{self.std}{'min' if e.fn == 'minimum' else 'max'}" if not self.device else f"icf_{e.fn[:3]}"
            return f"{fn}({a}, {b})"
        if e.fn == "floordiv":
            a, b = args
            if e.dtype in ir.FLOAT_DTYPES:
                return f"{self.std}floor({a} / {b})"
            return f"icf_floordiv({a}, {b})"
        if e.fn == "abs" and self.device:
            return f"{'fabs' if e.dtype in ir.FLOAT_DTYPES else 'abs'}({args[0]})"
        if e.fn == "power" and e.dtype in ir.FLOAT_DTYPES:
            t = self.ctype(e.dtype)
            args = [a if x.dtype == e.dtype else f"static_cast<{t}>({a})" for a, x in zip(args, e.args)]
        return f"{self.std}{MATH_FUNCS[e.fn]}({', '.join(args)})"

    def r_Cast(self, e: ir.Cast) -> str:
        return f"static_cast<{self.ctype(e.dtype)}>({self.render(e.arg)})"

    def r_Select(self, e: ir.Select) -> str:
        return f"({self.render(e.cond)} ? {self.render(e.a)} : {self.render(e.b)})"

    def paren(self, e: ir.Expr) -> str:
        s = self.render(e)
        return f"({s})" if isinstance(e, (ir.Binary, ir.Select, ir.Unary)) else s


def render_stmts(stmts: tuple[ir.Stmt, ...], r: ExprRenderer, indent: str, store) -> list[str]:
    """Render a body; `store(field, value_src)` renders a write at the current point."""
    out: list[str] = []
    for s in stmts:
        if isinstance(s, ir.Let):
            if s.declared:
                out.append(f"{indent}{cname(s.var.name)} = {r(s.value)};")
            else:
                out.append(f"{indent}const {r.ctype(s.var.dtype)} {cname(s.var.name)} = {r(s.value)};")
        elif isinstance(s, ir.Declare):
            out.append(f"{indent}{r.ctype(s.var.dtype)} {cname(s.var.name)};")
        elif isinstance(s, ir.Store):
            out.append(f"{indent}{store(s.field, r(s.value))}")
        elif isinstance(s, ir.If):
            out.append(f"{indent}if ({r(s.cond)}) {{")
            out.extend(render_stmts(s.then, r, indent + "  ", store))
            if s.orelse:
                out.append(f"{indent}}} else {{")
                out.extend(render_stmts(s.orelse, r, indent + "  ", store))
            out.append(f"{indent}}}")
        else:
            raise TypeError(s)
    return out

