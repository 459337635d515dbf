"""Cheap checks that arguments fit a program, without compiling it.

- types: GT4Py's own argument check (dims and dtypes of every parameter), the one a program call
  runs first;
- write domains: each `SetAt` domain, evaluated with the concrete scalar arguments, must lie inside
  its target field (GT4Py's compiled backends do not check this: a too-small output is a silent
  out-of-bounds write);
- neighbour tables: every offset the program uses exists on the grid, and local dimensions have
  the table's width.
Reads are not checked here (they would need GT4Py's domain inference); running the program on
the embedded backend, which raises on out-of-bounds reads, covers those.
"""

from __future__ import annotations

import operator
from typing import Any

from gt4py.next import errors as gt_errors
from gt4py.next.iterator import ir as itir
from gt4py.next.type_system import type_translation

from icoforge.backend.frontend.gt4py_compat import validate_call_args
from icoforge.suite.catalogue import ProgramInfo, set_at_statements
from icoforge.suite.inputs import is_field

Ranges = dict[str, tuple[int, int]]  # dimension name -> [start, stop)

_ARITHMETIC = {
    "plus": operator.add,
    "minus": operator.sub,
    "multiplies": operator.mul,
    "maximum": max,
    "minimum": min,
}


def _evaluate(expr: itir.Expr, scalars: dict[str, Any]) -> int:
    """Value of a domain-bound expression: literals, scalar params, + - * max min."""
    if isinstance(expr, itir.Literal):
        return int(expr.value)
    if isinstance(expr, itir.SymRef):
        return int(scalars[str(expr.id)])
    if isinstance(expr, itir.FunCall) and isinstance(expr.fun, itir.SymRef) and str(expr.fun.id) in _ARITHMETIC:
        left, right = (_evaluate(a, scalars) for a in expr.args)
        return _ARITHMETIC[str(expr.fun.id)](left, right)
    raise ValueError(f"cannot evaluate domain bound {expr}")


def _domain_ranges(domain: itir.Expr, scalars: dict[str, Any]) -> Ranges:
    # unstructured_domain(named_range(axis, start, stop), ...)
    ranges = {}
    for named_range in domain.args:
        axis, start, stop = named_range.args
        ranges[str(axis.value)] = (_evaluate(start, scalars), _evaluate(stop, scalars))
    return ranges


def _split_tuple(node: itir.Expr) -> list[itir.Expr]:
    if isinstance(node, itir.FunCall) and isinstance(node.fun, itir.SymRef) and node.fun.id == "make_tuple":
        return [leaf for arg in node.args for leaf in _split_tuple(arg)]
    return [node]


def write_domains(info: ProgramInfo, args: dict[str, Any]) -> list[tuple[str, Ranges]]:
    """(output name, index ranges it is written over), one entry per SetAt target, in program
    order; an output written by several statements appears several times."""
    scalars = {k: v for k, v in args.items() if not is_field(v)}
    writes = []
    for stmt in set_at_statements(info.program.gtir.body):
        targets = _split_tuple(stmt.target)
        domains = _split_tuple(stmt.domain)
        if len(domains) == 1:
            domains = domains * len(targets)
        for target, domain in zip(targets, domains, strict=True):
            writes.append((str(target.id), _domain_ranges(domain, scalars)))
    return writes


def _field_ranges(field: Any) -> Ranges:
    return {dim.value: (int(r.start), int(r.stop)) for dim, r in zip(field.domain.dims, field.domain.ranges)}


def check_args(info: ProgramInfo, args: dict[str, Any], grid: Any) -> list[str]:
    """Problems that would make a call of `info.program` with `args` invalid ([] if none)."""
    problems = []
    missing = [p.name for p in info.params if p.name not in args]
    if missing:
        return [f"missing arguments: {', '.join(missing)}"]

    try:
        validate_call_args(info.program, {k: type_translation.from_value(v) for k, v in args.items()})
    except gt_errors.DSLError as e:
        # GT4Py's message repeats the whole signature; keep its "- Expected ..." lines
        details = [line.strip() for line in str(e).splitlines() if line.strip().startswith("- ")]
        problems.extend(f"type check: {d[2:]}" for d in details or [str(e)[:500]])

    for name, ranges in write_domains(info, args):
        have = _field_ranges(args[name])
        for dim, (start, stop) in ranges.items():
            if dim not in have:
                continue  # wrong dims: reported by the type check
            lo, hi = have[dim]
            if start < stop and not (lo <= start and stop <= hi):
                problems.append(f"{name}: written over {dim} [{start}, {stop}) but allocated [{lo}, {hi})")

    for offset in info.connectivities:
        if offset not in grid.connectivities:
            problems.append(f"grid has no connectivity {offset!r}")
    for param in info.fields:
        for dim, size in zip(param.type.dims, args[param.name].ndarray.shape):
            if dim.kind == dim.kind.LOCAL and dim.value in grid.connectivities:
                width = grid.connectivities[dim.value].ndarray.shape[1]
                if size != width:
                    problems.append(f"{param.name}: local dimension {dim.value} has {size} entries, table has {width}")
    return problems
