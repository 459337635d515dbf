"""Evaluate host expressions of the kernel IR (domain bounds, host conditions, kernel arguments)
with concrete values, so the cost model sees the sizes a call really has.

Semantics follow the generated host plan (codegen/cuda.py `PyHostRenderer`): integer division
floors, `min`/`max` for GT4Py's minimum/maximum, casts to int/float/bool.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from icoforge.backend import ir
from icoforge.errors import IcoforgeError

Ranges = Sequence[tuple[int, int]]  # (start, stop) per field dimension

_BINARY = {
    "plus": operator.add,
    "minus": operator.sub,
    "multiplies": operator.mul,
    "mod": operator.mod,
    "eq": operator.eq,
    "not_eq": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "and_": lambda a, b: bool(a) and bool(b),
    "or_": lambda a, b: bool(a) or bool(b),
    "xor_": lambda a, b: bool(a) != bool(b),
}
_CALLS = {"minimum": min, "maximum": max, "abs": abs, "power": math.pow}


class HostEvalError(IcoforgeError):
    pass


def evaluate(e: ir.Expr, scalars: Mapping[str, Any], fields: Mapping[str, Ranges] | None = None) -> Any:
    """Value of host expression `e`; `scalars` by parameter name, `fields` gives the index ranges
    of field arguments (for `FieldBound`)."""
    fields = fields or {}

    def ev(x: ir.Expr) -> Any:
        if isinstance(x, ir.Const):
            return x.value
        if isinstance(x, ir.Param):
            if x.name not in scalars:
                raise HostEvalError(f"no value for scalar {x.name!r} in host expression {e}")
            v = scalars[x.name]
            return v.item() if hasattr(v, "item") else v
        if isinstance(x, ir.FieldBound):
            if x.field not in fields:
                raise HostEvalError(f"no index ranges for field {x.field!r} in host expression {e}")
            start, stop = fields[x.field][x.axis]
            return int(stop if x.stop else start)
        if isinstance(x, ir.Binary):
            a, b = ev(x.lhs), ev(x.rhs)
            if x.op == "divides":
                return a / b if x.dtype in ir.FLOAT_DTYPES else a // b
            return _BINARY[x.op](a, b)
        if isinstance(x, ir.Unary):
            v = ev(x.arg)
            return -v if x.op == "neg" else not v
        if isinstance(x, ir.Call):
            fn = _CALLS.get(x.fn) or getattr(math, x.fn, None)
            if fn is None:
                raise HostEvalError(f"host expression calls unknown function {x.fn!r}")
            return fn(*(ev(a) for a in x.args))
        if isinstance(x, ir.Cast):
            v = ev(x.arg)
            return float(v) if x.dtype in ir.FLOAT_DTYPES else (bool(v) if x.dtype == "bool" else int(v))
        if isinstance(x, ir.Select):
            return ev(x.a) if ev(x.cond) else ev(x.b)
        raise HostEvalError(f"{type(x).__name__} cannot appear in a host expression ({e})")

    return ev(e)


def domain_ranges(
    d: ir.Domain, scalars: Mapping[str, Any], fields: Mapping[str, Ranges] | None = None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((h0, h1), (k0, k1)) of a domain; a missing dimension is (0, 1), as the launchers do."""
    h = (int(evaluate(d.h_start, scalars, fields)), int(evaluate(d.h_end, scalars, fields))) if d.hdim else (0, 1)
    k = (int(evaluate(d.k_start, scalars, fields)), int(evaluate(d.k_end, scalars, fields))) if d.k_start is not None else (0, 1)
    return h, k
