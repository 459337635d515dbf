"""Several recorded program calls -> one program (issue 17, step 4: work across programs).

A substep of the dycore is a fixed sequence of program calls on the same buffers. Given that
sequence, with each call's arguments, `compose` writes one `ProgramIR` that does what the calls do
in order, so that the fusion pass (fuse.py) can join kernels of *different* programs: a value one
program stores and the next one reads at the same point stays in a register, neighbour indices
are loaded once.

What changes on the way, per call `c`:
* field arguments are bound by **buffer**, not by name: two arguments over the same memory with the
  same view (origin, strides, index ranges, dtype) become one parameter. A read-only argument that
  is a slice of an earlier one at a fixed index of one dimension (icon4py passes the lowest level
  of a field to another program) is read from that parameter at the fixed index, so the fusion
  pass sees the dependency. Other arguments whose memory overlaps stay parameters of their own,
  listed in `Composition.overlaps`: the composed program is only safe if no pass reorders
  accesses between them, i.e. if no such pair is in the final `ProgramIR.distinct` (the pairs
  whose order copy forwarding or fusion changed): `Composition.check_order`;
* integer and boolean scalars (domain bounds, flags, substep counters) become constants with the
  recorded values, and so do field bounds of dynamic domains: domains of different programs then
  compare equal where they are equal, and host conditionals on flags are decided here. The
  composed program is only valid for calls with those values (the runtime checks them, see
  substep.py); floating-point scalars stay parameters (`dtime_c3`);
* temporaries, kernels and kernel arguments get the call's index (`c3_...`), so that two calls of
  the same program do not clash.

Nothing here reads a value: the composed program computes what the calls compute, in their order,
and the fusion pass keeps that order wherever it fuses (each element sees the same writes before
it, fuse.py's conditions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from icoforge.backend.ir import ir, renaming
from icoforge.backend.codegen.host import evaluate
from icoforge.backend.ir.dtypes import DTYPES, ITEMSIZE
from icoforge.errors import IcoforgeError

FOLDED_DTYPES = tuple(name for name in DTYPES if not name.startswith("float"))  # become constants


class CompositionError(IcoforgeError):
    """The calls cannot be composed into one program (the runtime then runs them one by one)."""


@dataclasses.dataclass(frozen=True)
class View:
    """Where a field argument's elements are: element (i0, i1, ...) (absolute indices, inside
    `ranges`) at byte address `ptr + itemsize * sum(i_d * strides[d])`; `span` the [first, last + 1)
    byte address of its memory. Equal views are the same buffer in the same frame."""

    ptr: int
    strides: tuple[int, ...]  # in elements
    ranges: tuple[tuple[int, int], ...]
    dtype: str
    span: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class CallSite:
    """One recorded call as `compose` needs it: per entry of `program.params` the View of a field
    argument (None for a scalar), and the scalar values by parameter name."""

    program: ir.ProgramIR
    views: tuple[View | None, ...]
    scalars: Mapping[str, Any]

    def ranges(self, name: str) -> tuple[tuple[int, int], ...]:
        for p, v in zip(self.program.params, self.views):
            if p.name == name and v is not None:
                return v.ranges
        raise KeyError(name)


@dataclasses.dataclass(frozen=True)
class Composition:
    """The composed program; `sources[n]` is (call, position among that call's flat arguments) of
    its n-th parameter. Its kernels are the calls' kernels, named `c<call>_<name>`."""

    program: ir.ProgramIR
    sources: tuple[tuple[int, int], ...]
    overlaps: tuple[tuple[str, str], ...] = ()  # parameters over overlapping memory (module doc)

    def check_order(self, final: ir.ProgramIR) -> None:
        """CompositionError if a pass changed the order of accesses to overlapping parameters."""
        moved = {frozenset(pair) for pair in final.distinct}
        for a, b in self.overlaps:
            if frozenset((a, b)) in moved:
                raise CompositionError(f"{a} and {b} overlap in memory and fusion reordered their accesses")


def call_prefix(call: int) -> str:
    return f"c{call}"


def _fold(e: ir.Expr) -> ir.Expr:
    """An integer or boolean expression of constants only -> its value, as the host plan computes it."""
    if isinstance(e, (ir.Unary, ir.Binary, ir.Select, ir.Cast, ir.Call)) and e.dtype in FOLDED_DTYPES:
        if all(isinstance(c, ir.Const) for c in e.children()):
            value = evaluate(e, {})
            return ir.Const(bool(value) if e.dtype == "bool" else int(value), e.dtype)
    return e


def _slice_index(view: View, dims: tuple[str, ...], whole: View, whole_dims: tuple[str, ...]) -> tuple[int | str, ...] | None:
    """`view` as a slice of `whole` at one fixed index of each dimension it lacks (icon4py passes
    the lowest level of a field to another program): per dimension of `whole`, the view's
    dimension name or the fixed index. None when it is no such slice."""
    if view.dtype != whole.dtype or not set(dims) <= set(whole_dims):
        return None
    stride = dict(zip(whole_dims, whole.strides))
    if any(stride[d] != s for d, s in zip(dims, view.strides)):
        return None
    missing = [d for d in whole_dims if d not in dims]
    item = ITEMSIZE[view.dtype]
    offset, rest = divmod(view.ptr - whole.ptr, item)
    if rest or len(missing) != 1 or stride[missing[0]] == 0 or offset % stride[missing[0]]:
        return None
    fixed = offset // stride[missing[0]]
    lo, hi = whole.ranges[whole_dims.index(missing[0])]
    inside = all(whole.ranges[whole_dims.index(d)][0] <= a and b <= whole.ranges[whole_dims.index(d)][1] for d, (a, b) in zip(dims, view.ranges))
    if not (lo <= fixed < hi and inside):
        return None
    return tuple(d if d in dims else fixed for d in whole_dims)


class _Binder:
    """The composed program's parameters: one per buffer, one per floating-point scalar of a call."""

    def __init__(self) -> None:
        self.params: list[ir.FieldParam | ir.Param] = []
        self.sources: list[tuple[int, int]] = []
        self.by_view: dict[View, ir.FieldParam] = {}
        self.taken: set[str] = set()
        self.overlaps: list[tuple[str, str]] = []

    def _name(self, wanted: str) -> str:
        name, n = wanted, 1
        while name in self.taken:
            n += 1
            name = f"{wanted}_{n}"
        self.taken.add(name)
        return name

    def field(self, call: int, pos: int, p: ir.FieldParam, view: View, written: bool) -> tuple[str, tuple[int | str, ...] | None]:
        """(the composed parameter of the argument, how its indices map into that parameter's: None
        for the same frame, else per dimension of the parameter a dimension name or fixed index)."""
        known = self.by_view.get(view)
        if known is not None:
            if known.dims != p.dims:
                raise CompositionError(f"call {call}: {p.name} is buffer {known.name} with other dimensions")
            return known.name, None
        overlapping = [(w, q) for w, q in self.by_view.items() if view.span[0] < w.span[1] and w.span[0] < view.span[1] and view.span[1] > view.span[0]]
        for w, q in overlapping if not written else ():
            index = _slice_index(view, p.dims, w, q.dims)
            if index is not None:
                return q.name, index
        bound = ir.FieldParam(self._name(p.name), p.dims, p.dtype)
        self.overlaps += [(q.name, bound.name) for _, q in overlapping]
        self.by_view[view] = bound
        self.params.append(bound)
        self.sources.append((call, pos))
        return bound.name, None

    def scalar(self, call: int, pos: int, p: ir.Param) -> ir.Param:
        bound = ir.Param(self._name(f"{p.name}_{call_prefix(call)}"), p.dtype)
        self.params.append(bound)
        self.sources.append((call, pos))
        return bound


@dataclasses.dataclass(frozen=True)
class _Rewrite:
    """How one call's IR enters the composed program: `body` rewrites kernel-body expressions
    (names and substituted constants), `host` also folds host expressions (domains, kernel
    arguments, host conditions) to constants; `fields` renames fields and temporaries."""

    body: Any
    host: Any
    fields: Mapping[str, str]


def _call_rewriter(call: int, site: CallSite, binder: _Binder) -> _Rewrite:
    prog = site.program
    fields: dict[str, str] = {}
    slices: dict[str, tuple[str, tuple[int | str, ...]]] = {}  # view -> (parameter, index map)
    params: dict[str, ir.Expr] = {}
    written = {f for k in prog.kernels() for f in k.fields_written()}
    for pos, p in enumerate(prog.params):
        if isinstance(p, ir.FieldParam):
            view = site.views[pos]
            if view is None:
                raise CompositionError(f"call {call}: field {p.name} has no view")
            fields[p.name], index = binder.field(call, pos, p, view, p.name in written)
            if index is not None:
                slices[p.name] = (fields[p.name], index)
        elif p.dtype in FOLDED_DTYPES:
            value = site.scalars[p.name]
            params[p.name] = ir.Const(bool(value) if p.dtype == "bool" else int(value), p.dtype)
        else:
            params[p.name] = binder.scalar(call, pos, p)
    for t in prog.temporaries:
        fields[t.name] = f"{t.name}_{call_prefix(call)}"
    for k in prog.kernels():
        for a, _ in k.args:
            if a.name in params and params[a.name] != ir.Param(f"{a.name}_{call_prefix(call)}", a.dtype):
                raise CompositionError(f"call {call}: kernel argument {a.name} of {k.name} is also a program parameter")
            params[a.name] = ir.Param(f"{a.name}_{call_prefix(call)}", a.dtype)

    def body(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Param) and e.name in params:
            return params[e.name]
        if isinstance(e, ir.Load) and e.field in slices:  # a slice: the whole field at the fixed index
            whole, index = slices[e.field]
            own = dict(zip(prog.field(e.field).dims, e.index))
            return ir.Load(whole, tuple(own[d] if isinstance(d, str) else ir.Const(d, "int32") for d in index), e.dtype)
        if isinstance(e, ir.Load) and e.field in fields:
            return dataclasses.replace(e, field=fields[e.field])
        if isinstance(e, ir.FieldBound):
            lo, hi = site.ranges(e.field)[e.axis]
            return ir.Const(int(hi if e.stop else lo), e.dtype)
        return e

    # folded on the host only: the device's integer arithmetic (C++) is left to the device
    return _Rewrite(body, lambda e: _fold(body(e)), fields)


def _domain(d: ir.Domain, rw: _Rewrite) -> ir.Domain:
    return ir.Domain(d.hdim, *(None if x is None else ir.rewrite(x, rw.host) for x in (d.h_start, d.h_end, d.k_start, d.k_end)))


def _kernel(k: ir.Kernel, call: int, rw: _Rewrite) -> ir.Kernel:
    def stmts(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return renaming.rename_stores(ir.rewrite_stmts(body, rw.body), rw.fields)

    return dataclasses.replace(
        k,
        name=f"{call_prefix(call)}_{k.name}",
        domain=_domain(k.domain, rw),
        body=stmts(k.body),
        prologue=stmts(k.prologue),
        args=tuple((ir.rewrite(p, rw.body), ir.rewrite(v, rw.host)) for p, v in k.args),
        state=tuple(dataclasses.replace(s, init=ir.rewrite(s.init, rw.body)) for s in k.state),
    )


def _steps(steps: tuple[ir.Step, ...], call: int, rw: _Rewrite) -> list[ir.Step]:
    """The call's steps rewritten; host conditionals on folded flags replaced by their branch."""
    out: list[ir.Step] = []
    for s in steps:
        if isinstance(s, ir.Kernel):
            out.append(_kernel(s, call, rw))
            continue
        cond = ir.rewrite(s.cond, rw.host)
        then, orelse = _steps(s.then, call, rw), _steps(s.orelse, call, rw)
        if isinstance(cond, ir.Const):
            out.extend(then if cond.value else orelse)
        else:
            out.append(ir.HostIf(cond, tuple(then), tuple(orelse)))
    return out


def _union(calls: Sequence[CallSite], attr: str, what: str) -> tuple:
    """Entries of a per-program table (tables, dimension kinds, size tables) of every call, by
    name; the same name with other contents is refused."""
    seen: dict[str, Any] = {}
    for c, site in enumerate(calls):
        for entry in getattr(site.program, attr):
            name = entry.name if isinstance(entry, ir.TableInfo) else entry[0]
            if name in seen and seen[name] != entry and attr != "dim_size_tables":
                raise CompositionError(f"call {c}: {what} {name} differs from an earlier call's")
            seen.setdefault(name, entry)
    return tuple(seen.values())


def compose(calls: Sequence[CallSite], name: str = "substep") -> Composition:
    """The calls as one program (see the module doc); CompositionError where that is not safe."""
    if not calls:
        raise CompositionError("no calls to compose")
    binder = _Binder()
    steps: list[ir.Step] = []
    temporaries: list[ir.Temporary] = []
    distinct: dict[tuple[str, str], None] = {}
    for c, site in enumerate(calls):
        rw = _call_rewriter(c, site, binder)
        fields = rw.fields
        steps += _steps(site.program.steps, c, rw)
        for t in site.program.temporaries:
            temporaries.append(ir.Temporary(fields[t.name], t.dims, t.dtype, _domain(t.domain, rw)))
        for a, b in site.program.distinct:
            if fields[a] == fields[b]:
                raise CompositionError(f"call {c}: {a} and {b} must be distinct buffers but are one")
            distinct[(fields[a], fields[b])] = None
    used = {f for k in (k for s in steps for k in ir.step_kernels(s)) for f in (*k.fields_read(), *k.fields_written())}
    program = ir.ProgramIR(
        name=name,
        params=tuple(binder.params),
        temporaries=tuple(t for t in temporaries if t.name in used),  # not those of branches not taken
        tables=_union(calls, "tables", "table"),
        steps=tuple(steps),
        dim_kinds=_union(calls, "dim_kinds", "dimension"),
        dim_size_tables=_union(calls, "dim_size_tables", "size table"),
        distinct=tuple(distinct),
    )
    return Composition(program, tuple(binder.sources), tuple(binder.overlaps))
