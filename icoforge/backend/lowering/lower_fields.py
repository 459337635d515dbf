"""Field-level expressions of the early GTIR (gt4py_early.py: GT4Py's passes stopped before their
fusion loop and temporaries extraction) -> kernels.

A statement there is `targets @ domains <- expr` where `expr` nests field operators
(`as_fieldop(stencil, domain)(args)` whose arguments are field operators again), `let`-bound
fields, tuples of fields, `tuple_get`, `if_` on a host condition and scans. Each field operator
becomes a `LazyField` (lower_values.py); where a kernel reads it, one of two things happens:

* compute_inline: its stencil is evaluated at the read position, in the reading kernel. Always for
  fields of neighbour lists (never stored, as in GT4Py), for single-argument field operators
  (GT4Py's FuseAsFieldOp inlines those too: casts, shifts), and at the kernel's own point (no
  shift: recomputing costs no memory traffic). A value is named where first computed and read
  again at the same point in that block (or a nested one) as that name (`StencilLowering.recall`);
  equal field operators of one statement are one value.
* compute_root: read elsewhere (shifted, through a neighbour table), it is stored once, by a
  kernel of its own over its inferred domain into temporaries, before the kernel that reads it;
  every later read loads the temporary. Scans are always stored.

This is GT4Py's fusion choice (FuseAsFieldOp's `_arg_inline_predicate`) made per read instead of
per argument: a field GT4Py would store because one reader shifts it is still recomputed where
nothing stores it. What is stored is then icoforge's inline pass's to recompute (inline.py, the
byte cost model). A field that is stored is loaded at the own point too (kernels are lowered
again when a later read stores it). benchmarks/early-gtir-R2B3-10.md compares kernels and bytes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from gt4py.next.iterator import ir as itir
from gt4py.next.iterator.ir_utils import common_pattern_matcher as cpm, ir_makers as im

from icoforge.backend.ir import ir, renaming
from icoforge.backend.ir.recompute import own_point
from icoforge.backend.lowering.lower_values import (
    ArgValue,
    FieldArg,
    HostArg,
    IndexArg,
    Iterator,
    LazyArg,
    LazyField,
    ListV,
    ScalarArg,
    TupleArg,
    TupleV,
    Value,
    dtype_of,
)
from icoforge.errors import UnsupportedConstructError

if TYPE_CHECKING:
    from icoforge.backend.lowering.lower import ProgramLowering
    from icoforge.backend.lowering.lower_stencil import StencilLowering

_IF_STENCIL = im.lambda_("c", "a", "b")(im.if_(im.deref("c"), im.deref("a"), im.deref("b")))


def _call_name(node: itir.Expr) -> str | None:
    return str(node.fun.id) if isinstance(node, itir.FunCall) and isinstance(node.fun, itir.SymRef) else None


def field_value(pl: "ProgramLowering", node: itir.Expr, env: dict) -> ArgValue:
    """A field-level expression as an argument value; field operators stay lazy (module doc)."""
    if isinstance(node, itir.SymRef) and str(node.id) in env:
        return env[str(node.id)]
    if cpm.is_applied_as_fieldop(node):
        stencil, domain = node.fun.args[0], (node.fun.args[1] if len(node.fun.args) > 1 else None)
        args = tuple(field_value(pl, a, env) for a in node.args)
        host = _host_bindings(env)
        if domain is not None and host and {str(r.id) for r in domain.pre_walk_values().if_isinstance(itir.SymRef)} & set(host):
            # a domain over let-bound host scalars (icon4py's `n_lev` in the solvers, where no
            # static argument folds it) is resolved here, where the bindings are known
            domain = pl.domain(domain, host)
        # one LazyField per distinct operator of the statement: GT4Py's passes before the fusion
        # loop repeat a shared subexpression as equal nodes (its CSE runs after the loop); as one
        # value, it is computed (or stored) once per point. Stencils are closed lambdas and
        # hash by structure; everything the statement reads is read before it writes.
        key = (stencil, args, domain)
        base = pl.lazy_fields.get(key)
        if base is None:
            base = pl.lazy_fields[key] = LazyField(stencil, args, domain, f"as_fieldop in {pl.name}", is_list=_of_lists(stencil))
        if cpm.is_call_to(stencil, "scan"):
            return store(pl, base)
        return LazyArg(base)
    if cpm.is_let(node):
        inner = dict(env)
        for p, a in zip(node.fun.params, node.args, strict=True):
            inner[str(p.id)] = field_value(pl, a, env)
        return field_value(pl, node.fun.expr, inner)
    name = _call_name(node)
    if name == "make_tuple":
        return TupleArg(tuple(field_value(pl, a, env) for a in node.args))
    if name == "tuple_get":
        idx, tup = node.args
        v = field_value(pl, tup, env)
        if isinstance(v, TupleArg):
            return v.items[int(idx.value)]
        if isinstance(v, LazyArg):
            return LazyArg(v.base, (*v.proj, int(idx.value)))
        raise UnsupportedConstructError(f"program {pl.name!r}: tuple_get of {v}")
    if name == "if_":
        cond, a, b = node.args
        branches = (field_value(pl, a, env), field_value(pl, b, env))
        domain = next((v.base.domain for v in branches if isinstance(v, LazyArg) and v.base.domain is not None), None)
        c = pl.host_expr(cond, _host_bindings(env))
        return LazyArg(LazyField(_IF_STENCIL, (HostArg(c), *branches), domain, f"if_ in {pl.name}"))
    if name == "index":
        return IndexArg(node.args[0].value)
    if isinstance(node, itir.SymRef) and (str(node.id) in pl.fields or str(node.id) in pl.tuple_fields):
        return pl.arg_value(node, None)
    value = pl.host_expr(node, _host_bindings(env))
    return ScalarArg(value) if isinstance(value, (ir.Param, ir.Const)) else HostArg(value)


def _host_bindings(env: dict) -> dict:
    """The let-bound host scalars among `env`, as host expressions."""
    out = {}
    for k, v in env.items():
        if isinstance(v, ScalarArg):
            out[k] = v.param
        elif isinstance(v, HostArg):
            out[k] = v.expr
    return out


def _project(v: Value, proj: tuple[int, ...]) -> Value:
    for i in proj:
        if not isinstance(v, TupleV):
            raise UnsupportedConstructError(f"tuple_get {i} of a non-tuple field value")
        v = v.items[i]
    return v


def _stored_item(stored: ArgValue, proj: tuple[int, ...]) -> ArgValue:
    for i in proj:
        stored = stored.items[i]
    return stored


def deref_lazy(sl: "StencilLowering", arg: LazyArg, it: Iterator) -> Value:
    """The value of a lazy field at `it`: recomputed or loaded from its temporaries (module doc)."""
    base = arg.base
    if base.stored is not None:
        return sl._deref_arg(_stored_item(base.stored, arg.proj), it)
    # a target kernel reading another target kernel's value (targets on several domains) stores
    # it, as GT4Py does: copy forwarding then has its producer store the target itself (forward.py)
    # and this kernel reads it once instead of recomputing it from its inputs. A stored kernel
    # recomputes it as before (storing it there keeps the inline pass from recomputing it later:
    # predictor advection, 5.99 against 6.52 MB/call)
    theirs = bool(sl.own_values) and id(base) in sl.program.target_values and id(base) not in sl.own_values
    inline = base.is_list or len(_fused_inputs(base)) <= 1 or (it.pos == sl.center and not theirs)
    if not inline:
        if store(sl.program, base, missing_ok=True) is not None:
            return sl._deref_arg(_stored_item(base.stored, arg.proj), it)
    sl.inlined.append(base)
    key = (id(base), str(it.pos), str(it.valid))
    value = sl.recall(key)
    if value is None:
        inner = sl.blocks[_hoist_to(sl, base, it) + 1 :]
        del sl.blocks[len(sl.blocks) - len(inner) :]
        try:
            value = sl.apply(sl.eval(base.stencil, {}), [Iterator(a, it.pos, it.valid) for a in base.args])
            if not _has_list(value):
                # named where first computed, as GT4Py's CSE names a shared value: a later read
                # in this block or a nested one is the variable, and the kernel stays small
                # enough for the inline pass to recompute it elsewhere (its size cap counts nodes)
                value = _bind_scalars(sl, value)
                sl.remember(key, value)
        finally:
            sl.blocks.extend(inner)
    return _project(value, arg.proj)


def _fused_inputs(base: LazyField) -> frozenset:
    """The distinct inputs `base` has once GT4Py's FuseAsFieldOp has fused into it every argument
    that is itself a field operator of one input (after the same fusion; literals are no input):
    GT4Py recomputes a field operator of one input in every reader, so `x = c(E2C[0]) - 0.5 *
    c(E2C[1])`, one input `c` after fusion, is recomputed where a cell reads it through C2E, not
    stored. Fewer inputs than arguments only where arguments share an input (or are literals);
    an `if_` and a scan are opaque (GT4Py's single-argument rule is for field operators).
    A field of neighbour lists is fused into its reader, so `reduce(e_bln_c_s * vn(C2E))` has two
    inputs: counted as one, it was recomputed at every neighbour of its reader (horizontal
    advection 1.7x slower on the H200 than GT4Py's split, benchmarks/h200/2026-12-02-s13)."""
    if base.fused_inputs is None:
        keys: set = set()
        for a in base.args:
            if isinstance(a, ScalarArg) and isinstance(a.param, ir.Const):
                continue  # a literal: GT4Py inlines it into the stencil
            if isinstance(a, LazyArg) and a.base.stencil is not _IF_STENCIL and not cpm.is_call_to(a.base.stencil, "scan"):
                inner = _fused_inputs(a.base)
                if len(inner) <= 1 or a.base.is_list:
                    keys |= inner
                    continue
            keys.add(("lazy", id(a.base), a.proj) if isinstance(a, LazyArg) else _input_key(a))
        base.fused_inputs = frozenset(keys)
    return base.fused_inputs


def _of_lists(stencil: itir.Expr) -> bool:
    """Whether a field operator's values are neighbour lists: its stencil returns `neighbors(...)`
    or `map_list(op)(...)` (the early GTIR carries no types; `store` also finds out when it tries)."""
    body = stencil.expr if isinstance(stencil, itir.Lambda) else None
    if not isinstance(body, itir.FunCall):
        return False
    return cpm.is_call_to(body, ("neighbors", "make_const_list")) or cpm.is_call_to(body.fun, "map_list")


def _input_key(a: ArgValue):
    try:
        hash(a)
        return a
    except TypeError:
        return ("object", id(a))


def _hoist_to(sl: "StencilLowering", base: LazyField, it: Iterator) -> int:
    """The block (index into `sl.blocks`) where a value read at the kernel's own point inside branches
    is computed: before the branches, once for all of them, where GT4Py's domain inference made its
    inputs valid over its domain (where that covers the kernel's, computing it at every point reads
    nothing out of bounds; a field whose domain is narrower, e.g. only where a condition on the level
    holds, stays in its branch). Not out of a branch on a data value (`_Block.fence`) unless both
    branches read it: an upwind choice computes one side per point, as GT4Py's fused stencil does;
    computed before the branch, both sides ran at every point (compute_rho_theta_pgrad_and_update_vn
    1.35x slower on the H200)."""
    innermost = len(sl.blocks) - 1
    if sl.hoist_domain is None or innermost == 0 or it.pos != sl.center or it.valid or base.domain is None:
        return innermost
    if not _covers(sl.program.domain(base.domain), sl.hoist_domain):
        return innermost
    return max((i for i, b in enumerate(sl.blocks) if b.fence and id(base) not in b.shared), default=0)


def _covers(outer: ir.Domain, inner: ir.Domain) -> bool:
    def le(a, b) -> bool:  # a <= b, known at compile time
        return a == b or (isinstance(a, ir.Const) and isinstance(b, ir.Const) and a.value <= b.value)

    if outer.hdim != inner.hdim or (outer.k_start is None) != (inner.k_start is None):
        return False
    return le(outer.h_start, inner.h_start) and le(inner.h_end, outer.h_end) and le(outer.k_start, inner.k_start) and le(inner.k_end, outer.k_end)


def _bind_scalars(sl: "StencilLowering", v: Value) -> Value:
    if isinstance(v, TupleV):
        return TupleV(tuple(_bind_scalars(sl, x) for x in v.items))
    return sl.bind("f", v) if isinstance(v, ir.Expr) and not isinstance(v, ir.Load) else v


def _has_list(v: Value) -> bool:
    return isinstance(v, ListV) or (isinstance(v, TupleV) and any(_has_list(x) for x in v.items))


def store(pl: "ProgramLowering", base: LazyField, missing_ok: bool = False) -> ArgValue | None:
    """compute_root: a kernel over the field operator's domain stores it into new temporaries
    (one per tuple element), placed before the kernel being lowered. None (with `missing_ok`)
    where it cannot be stored: neighbour lists, or no domain known."""
    if base.stored is not None:
        return base.stored
    if base.is_list or base.domain is None:
        if missing_ok:
            return None
        raise UnsupportedConstructError(f"{base.what}: a field without a domain cannot be stored")
    domain = pl.domain(base.domain)
    name = pl.next_kernel_name()
    its = [pl.iterator_at_domain(a, domain) for a in base.args]
    if cpm.is_call_to(base.stencil, "scan"):
        temps: list[FieldArg] = []
        shape: list[Value] = []  # the scan's state: the stored temporaries keep its tuple nesting

        def make_targets(flat: list, state: Value) -> list[FieldArg]:
            if not temps:
                temps.extend(pl.new_temporary(domain, v.dtype) for v in flat)
                shape.append(state)
            return temps

        def scan_kernel(sl: "StencilLowering") -> ir.Kernel:
            return pl.lower_scan(name, sl, base.stencil, its, make_targets, domain)

        pl.pending.append(_lowered(pl, name, domain, "stored scan", scan_kernel)[1])
        base.stored = _as_arg(temps, shape[0])  # muphys' graupel scan: a tuple of tuples
        return base.stored
    else:
        sl, value = _lowered(pl, name, domain, "stored field operator", lambda sl: sl.apply(sl.eval(base.stencil, {}), its))
        if _has_list(value):
            base.is_list = True
            if missing_ok:
                return None
            raise UnsupportedConstructError(f"{base.what}: a field of neighbour lists cannot be stored")
        temps = _temporaries_like(pl, value, domain, base)
        pl.store_values(sl, temps, value, name)
        kernel = ir.Kernel(name, domain, tuple(sl.blocks[0].stmts), tuple(sl.kernel_args))
    pl.pending.append(kernel)
    base.stored = _as_arg(temps, value)
    return base.stored


def _temporaries_like(pl: "ProgramLowering", value: Value, domain: ir.Domain, base: LazyField) -> list[FieldArg]:
    return [pl.new_temporary(domain, _dtype(x)) for x in _flatten_value(value)]


def _dtype(v: Value) -> str:
    if isinstance(v, ir.Expr):
        return v.dtype
    raise UnsupportedConstructError(f"cannot store a {type(v).__name__}")


def _as_arg(temps: list[FieldArg], value: Value) -> ArgValue:
    """The temporaries in the tuple shape of the stored value."""
    flat = iter(temps)

    def shape(v: Value) -> ArgValue:
        return TupleArg(tuple(shape(x) for x in v.items)) if isinstance(v, TupleV) else next(flat)

    return shape(value)


def lower_set_at(pl: "ProgramLowering", s: itir.SetAt) -> list[ir.Step]:
    """One statement of the early GTIR: the kernels that store what it reads elsewhere, then one
    kernel per distinct target domain."""
    if _call_name(s.expr) == "if_" and not _is_field_cond(s.expr):
        cond, a, b = s.expr.args
        t = pl.lower_stmts([itir.SetAt(expr=a, domain=s.domain, target=s.target)])
        f = pl.lower_stmts([itir.SetAt(expr=b, domain=s.domain, target=s.target)])
        return [ir.HostIf(pl.host_expr(cond), t, f)]  # lets never span statements
    targets = pl.targets_of(s.target)
    pl.pending = []
    pl.lazy_fields = {}  # a statement's operators are shared within it only (the next reads what it wrote)
    value = field_value(pl, s.expr, {})
    values = _flat_args(value)
    pl.target_values = {id(v.base) for v in values if isinstance(v, LazyArg) and not v.proj}
    domains = _flat_domains(s.domain, len(targets))
    if len({str(d) for d in domains}) == 1:  # one kernel (a tuple-valued operator's elements too)
        groups = {"": (list(range(len(targets))), values)}
    elif len(values) == len(targets):
        groups = {}
        for i, d in enumerate(domains):
            groups.setdefault(str(d), ([], []))
            groups[str(d)][0].append(i)
            groups[str(d)][1].append(values[i])
    else:
        raise UnsupportedConstructError(f"program {pl.name!r}: {len(values)} values for {len(targets)} targets on several domains")
    stored: list[ir.Kernel] = []
    for _ in range(20):
        # a field a target kernel recomputed but a later one stored: lowered again, reading the
        # temporary (and the stored kernels, which read only what the statement has not written
        # yet, run first)
        stored.extend(pl.pending)
        pl.pending = []
        kernels, inlined = [], []
        for idx, vals in groups.values():
            kernel, sl = _write_kernel(pl, [targets[i] for i in idx], vals, domains[idx[0]], s)
            kernels.append(kernel)
            inlined.extend(sl.inlined)
        if not any(b.stored is not None for b in inlined):
            break
    stored.extend(pl.pending)
    pl.pending = []
    return _read_before_written(pl, _scans_into_targets(pl, [*stored, *kernels], targets), targets)


def named_in_order(pl: "ProgramLowering", steps: tuple[ir.Step, ...]) -> tuple[ir.Step, ...]:
    """The kernels renamed `<program>_k0, _k1, ...` in the order they run (a host conditional's
    true branch first), as on GT4Py's full path: the lowering names a statement's target kernel
    before the kernels that store what it reads, and a kernel lowered again takes a new name."""
    count = iter(range(1 << 30))
    return ir.map_step_kernels(steps, lambda k: dataclasses.replace(k, name=f"{pl.short_name}_k{next(count)}"))


def _scans_into_targets(pl: "ProgramLowering", steps: list[ir.Kernel], targets: list[FieldArg]) -> list[ir.Kernel]:
    """A stored scan whose values a target kernel only copies into a target (`T[i, k] = S[i, k]`,
    same domain) stores into the target itself, as on GT4Py's full path, where the scan's
    `as_fieldop` is the statement's expression: the copy and the temporary go. Only where the scan
    reads the target at its own point, before it stores (the back substitution's `w`), or not at
    all, and no kernel between the scan and the copy reads the target."""

    temps = {t.name: t for t in pl.new_temporaries}
    names = {t.name for t in targets}
    steps = list(steps)
    for c_pos in range(len(steps)):
        c = steps[c_pos]
        if c.is_scan or c.prologue:
            continue
        lets = {st.var: st.value for st in c.body if isinstance(st, ir.Let) and not st.declared}
        for st in c.body:
            if not isinstance(st, ir.Store) or st.field not in names:
                continue
            value = lets.get(st.value, st.value)
            if not isinstance(value, ir.Load) or value.field not in temps or not own_point(value, temps[value.field].dims, pl.dims):
                continue
            src, dst = value.field, st.field
            if temps[src].dims != pl.fields[dst].dims or temps[src].dtype != pl.fields[dst].dtype:
                continue
            # the copy is this store's only use of `src` (no other value of the kernel reads it)
            exprs = list(ir.walk_body_exprs((*steps[c_pos].prologue, *steps[c_pos].body)))
            if sum(isinstance(e, ir.Load) and e.field == src for e in exprs) != 1:
                continue
            if isinstance(st.value, ir.Var) and sum(e == st.value for e in exprs) != 1:
                continue
            writers = [j for j, k in enumerate(steps) if src in k.fields_written()]
            readers = [j for j, k in enumerate(steps) if src in k.fields_read()]
            if len(writers) != 1 or readers != [c_pos]:
                continue
            p_pos = writers[0]
            p = steps[p_pos]
            if not p.is_scan or p_pos > c_pos or p.domain != c.domain:
                continue
            if any(dst in (*k.fields_read(), *k.fields_written()) for k in steps[p_pos + 1 : c_pos]):
                continue
            moved = dataclasses.replace(p, body=renaming.rename_stores(p.body, {src: dst}))
            if dst in p.fields_read() and not _reads_before_stores(moved, dst, pl):
                continue
            steps[p_pos] = moved
            body = tuple(x for x in steps[c_pos].body if x is not st)
            used = {e.name for e in ir.walk_body_exprs(body) if isinstance(e, ir.Var)}
            body = tuple(x for x in body if not (isinstance(x, ir.Let) and not x.declared and x.var.name not in used and x.value is value))
            steps[c_pos] = dataclasses.replace(steps[c_pos], body=body)
    return [k for k in steps if any(isinstance(x, ir.Store) for x in ir.walk_stmts(k.body))]


def _reads_before_stores(k: ir.Kernel, field: str, pl: "ProgramLowering") -> bool:
    """Scan `k` reads `field` only at its own point, in the per-level body, and every such read
    comes before its first store to `field` (where its stores go is read first at each level)."""

    def loads(stmts) -> list[ir.Load]:
        return [e for e in ir.walk_body_exprs(stmts) if isinstance(e, ir.Load) and e.field == field]

    if loads(k.prologue) or any(isinstance(e, ir.Load) and e.field == field for s in k.state for e in s.init.walk()):
        return False
    if not all(own_point(e, pl.fields[field].dims, pl.dims) for e in loads(k.body)):
        return False
    first_store = min((i for i, st in enumerate(k.body) if any(isinstance(x, ir.Store) and x.field == field for x in ir.walk_stmts((st,)))), default=len(k.body))
    last_load = max((i for i, st in enumerate(k.body) if loads((st,))), default=-1)
    return last_load < first_store


def _read_before_written(pl: "ProgramLowering", steps: list[ir.Kernel], targets: list[FieldArg]) -> list[ir.Kernel]:
    """A statement reads its fields before it writes its targets (GT4Py's semantics: the whole
    expression, then the assignment). A target read by a later kernel of the statement, or by
    its own writer elsewhere than at the point written, is written into a temporary instead and
    copied into the target after the statement's last kernel; a writer that reads it only at its
    own point computes all its values before it stores any."""
    from icoforge.backend.lowering.lower_stencil import StencilLowering

    written = {t.name for t in targets}
    steps = _old_values_first(pl, steps, written)
    writer = {st.field: j for j, k in enumerate(steps) for st in k.body if isinstance(st, ir.Store) and st.field in written}
    hazard, own = set(), set()
    for j, k in enumerate(steps):
        for e in ir.walk_body_exprs((*k.prologue, *k.body)):
            if isinstance(e, ir.Load) and e.field in writer and j >= writer[e.field]:
                if j == writer[e.field] and k.is_scan and _reads_before_stores(k, e.field, pl):
                    continue  # a scan storing its target (_scans_into_targets)
                if j == writer[e.field] and not k.is_scan and own_point(e, pl.fields[e.field].dims, pl.dims):
                    own.add(j)
                else:
                    hazard.add(e.field)
    steps = [_values_before_stores(k) if j in own else k for j, k in enumerate(steps)]
    if not hazard:
        return steps
    by_name = {t.name: t for t in targets}
    out, copies = [], []
    for k in steps:
        renamed = {}
        for st in k.body:
            if isinstance(st, ir.Store) and st.field in hazard and st.field not in renamed:
                renamed[st.field] = pl.new_temporary(k.domain, by_name[st.field].dtype)
        body = tuple(dataclasses.replace(st, field=renamed[st.field].name) if isinstance(st, ir.Store) and st.field in renamed else st for st in k.body)
        out.append(dataclasses.replace(k, body=body))
        for field, tmp in renamed.items():
            name = pl.next_kernel_name()
            sl = StencilLowering(pl, f"kernel {name} (copy into {field})")
            pl.store_values(sl, [by_name[field]], sl.deref(pl.iterator_at_domain(tmp, k.domain)), name)
            copies.append(ir.Kernel(name, k.domain, tuple(sl.blocks[0].stmts), ()))
    return out + copies


def _old_values_first(pl: "ProgramLowering", steps: list[ir.Kernel], written: set[str]) -> list[ir.Kernel]:
    """A kernel `R` reading the old value of target `T`, which the statement stores into a
    temporary `S` (kernel `P`, before `R`) and copies into `T` at the end, runs before `P`,
    recomputing `S` at its own point where it read it: copy forwarding can then have `P` store
    into `T` directly (forward.py: no access to `T` between producer and copy), as on GT4Py's full
    path, where its fusion recomputes `S` in `R` and orders `R` first. Only where `R` reads `S`
    at its own point and neither reads nor writes what the kernels it moves over write (or read,
    for its writes). The recomputed value is `P`'s operations in `P`'s order (recompute.py)."""
    from icoforge.backend.ir import recompute

    temps = {t.name: t for t in pl.new_temporaries}
    steps = list(steps)
    for r in range(len(steps)):
        R = steps[r]
        if R.is_scan:
            continue
        for T in sorted(written & set(R.fields_read())):
            src = _copied_from(steps, r, T, temps)
            if src is None:
                continue
            p = next((j for j in range(r) if src in steps[j].fields_written()), None)
            loads = [e for e in ir.walk_body_exprs((*R.prologue, *R.body)) if isinstance(e, ir.Load) and e.field == src]
            if p is None or steps[p].is_scan or not all(own_point(e, temps[src].dims, pl.dims) for e in loads):
                continue
            prod = recompute.Producer.of(steps[p], temps[src], pl.dims)
            if prod is None:
                continue
            moved = recompute.inlined_into(R, prod, set(pl.fields) | set(pl.scalars))
            between = steps[p:r]
            w_between = {f for k in between for f in k.fields_written()}
            rw_between = w_between | {f for k in between for f in k.fields_read()}
            if set(moved.fields_read()) & w_between or set(moved.fields_written()) & rw_between:
                continue
            steps = [*steps[:p], moved, *steps[p:r], *steps[r + 1 :]]
            break
    return steps


def _copied_from(steps: list[ir.Kernel], r: int, target: str, temps: dict) -> str | None:
    """The temporary a kernel after step `r` copies into `target` (`target[i, k] = S[i, k]`)."""
    for k in steps[r + 1 :]:
        for st in k.body:
            if isinstance(st, ir.Store) and st.field == target and isinstance(st.value, ir.Load) and st.value.field in temps:
                return st.value.field
    return None


def _values_before_stores(k: ir.Kernel) -> ir.Kernel:
    """The kernel's trailing stores with every value computed first (a store then never changes
    what a later store of the same point reads)."""
    n = len(k.body)
    while n and isinstance(k.body[n - 1], ir.Store):
        n -= 1
    stores = k.body[n:]
    lets, out = [], []
    for j, st in enumerate(stores):
        var = ir.Var(f"out_{j}", st.value.dtype)
        lets.append(ir.Let(var, st.value))
        out.append(dataclasses.replace(st, value=var))
    return dataclasses.replace(k, body=(*k.body[:n], *lets, *out))


def _is_field_cond(node: itir.FunCall) -> bool:
    return False  # an `if_` at statement level has a host condition (field conditions are in stencils)


def _flat_args(v: ArgValue) -> list[ArgValue]:
    if isinstance(v, TupleArg):
        return [x for item in v.items for x in _flat_args(item)]
    return [v]  # a tuple-valued lazy field gives all its elements when read


def _flat_domains(node: itir.Expr, n: int) -> list[itir.Expr]:
    if _call_name(node) == "make_tuple":
        return [d for a in node.args for d in _flat_domains(a, 1 if _call_name(a) != "make_tuple" else len(a.args))]
    return [node] * n


def _lowered(pl: "ProgramLowering", name: str, domain: ir.Domain, what: str, body):
    """(StencilLowering, body(sl)) for a kernel over `domain`. A field recomputed in it that got
    stored meanwhile (read elsewhere, shifted, later in the same kernel) is loaded instead: the
    kernel is lowered again (GT4Py does the same: a field it stores is read from the temporary
    at the own point too; recomputing it would read its inputs as well)."""
    from icoforge.backend.lowering.lower_stencil import StencilLowering

    for _ in range(50):
        sl = StencilLowering(pl, f"kernel {name} ({what})")
        sl.center = pl.iterator_at_domain(IndexArg("?"), domain).pos
        # values may be computed before branches over the kernel's domain; in a scan that is still
        # inside the level loop (its body is one level's), and the scan's own state is no lazy
        # field: graupel_run's scan computed each input once instead of once per branch reading it
        sl.hoist_domain = domain
        result = body(sl)
        if not any(b.stored is not None for b in sl.inlined):
            return sl, result
    raise UnsupportedConstructError(f"program {pl.name!r}: kernel {name} does not settle")


def _write_kernel(pl: "ProgramLowering", targets: list[FieldArg], values: list[ArgValue], domain_node, s) -> ir.Kernel:
    domain = pl.domain(domain_node)
    name = pl.next_kernel_name()

    def body(sl: "StencilLowering") -> list:
        sl.own_values = {id(v.base) for v in values if isinstance(v, LazyArg)}
        return [x for v in values for x in _flatten_value(sl.deref(pl.iterator_at_domain(v, domain)))]

    sl, out = _lowered(pl, name, domain, f"target {s.target}", body)
    if len(out) != len(targets):
        raise sl.fail(f"{len(out)} values for {len(targets)} targets")
    pl.store_values(sl, targets, TupleV(tuple(out)) if len(out) > 1 else out[0], name)
    return ir.Kernel(name, domain, tuple(sl.blocks[0].stmts), tuple(sl.kernel_args)), sl


def _flatten_value(v: Value) -> list:
    if isinstance(v, TupleV):
        return [x for item in v.items for x in _flatten_value(item)]
    return [v]
