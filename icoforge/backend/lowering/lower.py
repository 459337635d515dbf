"""GTIR (after GT4Py's own passes) -> icoforge kernel IR.

After `apply_common_transforms(..., extract_temporaries=True, unroll_reduce=True)` every statement
is `target @ domain <- as_fieldop(stencil, domain)(args)` (or a plain copy), possibly under host
`if`s. The stencil is a lambda over iterators; we lower it by *partial evaluation*: iterators,
lambdas, tuples and offsets are compile-time values, and everything that depends on field data
becomes a kernel-IR expression. Lambda applications with non-trivial arguments become `Let`s
(GT4Py's common-subexpression pass introduced them, so they name real reuse), and `if_` branches
that need statements of their own become structured `If`s so nothing runs in the branch not taken.

Modules: lower_values.py (the compile-time values), lower_stencil.py (the partial evaluator of one
stencil lambda), this one (the program: parameters, tables, domains, statements -> kernels).
"""

from __future__ import annotations

import dataclasses
import itertools

from gt4py.next import common
from gt4py.next.iterator import ir as itir
from gt4py.next.type_system import type_specifications as ts

from icoforge.backend.ir import ir
from icoforge.backend.lowering import lower_fields
from icoforge.backend.lowering.lower_stencil import StencilLowering
from icoforge.backend.lowering.lower_values import (
    FieldArg,
    ScalarArg,
    TupleArg,
    IndexArg,
    LazyArg,
    Iterator,
    TupleV,
    ArgValue,
    Value,
    dtype_of,
    sanitize,
)
from icoforge.errors import UnsupportedConstructError

# ---------------------------------------------------------------------------------------------


class ProgramLowering:
    """Lowers one `itir.Program` (after GT4Py's passes) to `ir.ProgramIR`."""

    def __init__(self, program: itir.Program, arg_types: tuple[ts.TypeSpec, ...], offset_provider_type: dict, early: bool = False):
        self.gtir = program
        self.early = early  # early GTIR (gt4py_early.py): field-level expressions, lower_fields.py
        self.pending: list[ir.Kernel] = []  # early GTIR: kernels storing what the kernel being lowered reads
        self.lazy_fields: dict = {}  # early GTIR: the current statement's field operators, by structure
        self.target_values: set[int] = set()  # early GTIR: ids of the LazyFields the statement's targets get
        self.new_temporaries: list[ir.Temporary] = []
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
        self.statement_count = itertools.count()  # GTIR statements lowered to several kernels
        self.short_name = short_program_name(self.name)
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
            p = ir.Param(sanitize(name), dtype_of(t))
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
    def host_expr(self, node: itir.Expr, bindings: dict | None = None) -> ir.Expr:
        """Domain bounds, host conditions and scalar stencil arguments: over program scalars (and
        `bindings`: let-bound host scalars of the early GTIR) only."""
        sl = StencilLowering(self, "host expression")
        env: dict = {**self.scalars, **(bindings or {})}
        v = sl.eval(node, env)
        if sl.blocks[0].stmts:
            # host expressions with lets: substitute (they are tiny) by evaluating without binding
            raise UnsupportedConstructError(f"program {self.name!r}: host expression with local bindings: {node}")
        if not isinstance(v, ir.Expr):
            raise UnsupportedConstructError(f"program {self.name!r}: host expression {node} is not a scalar")
        return v

    def domain(self, node: itir.Expr | ir.Domain, bindings: dict | None = None) -> ir.Domain:
        """`bindings`: as in `host_expr` (a field operator's domain inside a `let` of the early
        GTIR); a domain resolved already is returned as it is."""
        if isinstance(node, ir.Domain):
            return node
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
                s, e = self._bound(start, bindings), self._bound(stop, bindings)
                if kind == "vertical":
                    k0, k1 = s, e
                elif kind == "horizontal" and hdim is None:
                    hdim, h0, h1 = axis.value, s, e
                else:
                    raise UnsupportedConstructError(f"program {self.name!r}: domain over {axis.value} ({kind})")
            return ir.Domain(hdim, h0, h1, k0, k1)
        raise UnsupportedConstructError(f"program {self.name!r}: domain expression {node}")

    def _bound(self, node: itir.Expr, bindings: dict | None = None) -> ir.Expr:
        e = self.host_expr(node, bindings)
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
        new_temporaries = self.new_temporaries
        if self.early:
            steps = lower_fields.named_in_order(self, steps)
            used = {f for s in steps for k in ir.step_kernels(s) for f in (*k.fields_read(), *k.fields_written())}
            new_temporaries = [t for t in new_temporaries if t.name in used]  # a scan now storing its target
        return ir.ProgramIR(
            name=self.name,
            params=tuple(self.params),
            temporaries=(*temporaries, *new_temporaries),
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
            elif isinstance(s, itir.SetAt) and self.early:
                out.extend(self.one_statement(tuple(lower_fields.lower_set_at(self, s))))
            elif isinstance(s, itir.SetAt):
                out.append(self.lower_set_at(s))
            else:
                raise UnsupportedConstructError(f"program {self.name!r}: statement {type(s).__name__}")
        return tuple(out)

    def one_statement(self, steps: tuple[ir.Step, ...]) -> tuple[ir.Step, ...]:
        """The kernels one GTIR statement was lowered to, marked as one statement where they are
        several: together they must read its inputs as they were before any of them wrote
        (schedule/access.statement_groups)."""
        if sum(len(ir.step_kernels(s)) for s in steps) < 2:
            return steps
        sid = next(self.statement_count)
        return ir.map_step_kernels(steps, lambda k: dataclasses.replace(k, statement=sid))

    def field_named_by(self, node: itir.Expr) -> FieldArg | None:
        """The field argument `node` names: a parameter, a temporary or a tuple parameter's element."""
        if isinstance(node, itir.SymRef):
            return self.fields.get(str(node.id))
        if isinstance(node, itir.FunCall) and getattr(node.fun, "id", None) == "tuple_get":
            idx, tup = node.args
            if isinstance(tup, itir.SymRef) and str(tup.id) in self.tuple_fields and isinstance(idx, itir.Literal):
                return self.tuple_fields[str(tup.id)][int(idx.value)]
        return None

    def next_kernel_name(self) -> str:
        return f"{self.short_name}_k{next(self.kernel_count)}"

    def new_temporary(self, domain: ir.Domain, dtype: str) -> FieldArg:
        """A temporary over `domain` (early GTIR: a field operator stored by lower_fields.store)."""
        vdim = next((d for d, k in self.dims.items() if k == "vertical"), "K")
        dims = tuple(d for d in (domain.hdim, vdim if domain.k_start is not None else None) if d)
        t = ir.Temporary(f"__tmp_{len(self.new_temporaries)}", dims, dtype, domain)
        self.new_temporaries.append(t)
        self.fields[t.name] = FieldArg(t.name, t.dims, t.dtype)
        return self.fields[t.name]

    def targets_of(self, node: itir.Expr) -> list[FieldArg]:
        return self._targets(node)

    def iterator_at_domain(self, arg: ArgValue, domain: ir.Domain) -> Iterator:
        return self._iterator_at_domain(arg, domain)

    def store_values(self, sl: StencilLowering, targets: list[FieldArg], value: Value, kname: str) -> None:
        self._store(sl, targets, value, kname)

    def deref_lazy(self, sl: StencilLowering, arg: LazyArg, it: Iterator) -> Value:
        # the stencil evaluator reaches lower_fields through its program: it imports neither
        return lower_fields.deref_lazy(sl, arg, it)

    def lower_scan(self, name, sl: StencilLowering, scan: itir.FunCall, its, targets, domain) -> ir.Kernel:
        return self._lower_scan(name, sl, scan, its, targets, domain)

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
        if callable(targets):  # early GTIR: temporaries typed by the scan's values (and nested as its state)
            targets = targets(new_vars, new_state)
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


def short_program_name(name: str) -> str:
    """Stable, short kernel-name prefix. Profilers truncate or choke on long names, so names over
    32 characters keep the first four letters of each word and drop filler words:
    `vertically_implicit_solver_at_predictor_step` -> `vert_impl_solv_pred_step`."""
    if len(name) <= 32:
        return name
    filler = {"at", "of", "and", "the", "for", "to", "in", "on", "from", "with"}
    words = [w[:4] for w in name.split("_") if w and w not in filler]
    return "_".join(words)[:40].rstrip("_")


def lower_program(program: itir.Program, arg_types, offset_provider_type, early: bool = False) -> ir.ProgramIR:
    return ProgramLowering(program, tuple(arg_types), dict(offset_provider_type), early).lower()
