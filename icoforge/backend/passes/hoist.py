"""Move k-invariant work out of the vertical loop.

Neighbour indices depend only on the horizontal point, so every `Table` lookup that is safe to do
unconditionally becomes a named per-column value (`E2C_1`), and top-level `Let`s that do not
depend on the level move to the kernel's prologue. A lookup is safe when its row is the kernel's
own index or comes from a table without skip values: a skip value (-1) used as a row would read
outside the table, so such chained lookups stay where GT4Py's `can_deref` guard protects them.

`hoist_invariant_loads` goes further for a kernel whose GPU threads walk several levels
(`k_per_thread > 1`): field loads that do not depend on the level move to the prologue too. It
depends on the schedule, so the pipeline runs it per launch (pipeline.py), after `hoist_program`.
"""

from __future__ import annotations

import dataclasses

from icoforge.backend.ir import ir


def _k_variant(e: ir.Expr, variant_vars: set[str]) -> bool:
    for x in e.walk():
        if isinstance(x, ir.KIndex):
            return True
        if isinstance(x, ir.Var) and x.name in variant_vars:
            return True
    return False


def hoist_k_invariant(kernel: ir.Kernel, skip_tables: frozenset[str]) -> ir.Kernel:
    if kernel.domain.k_start is None or kernel.prologue:
        return kernel
    prologue: list[ir.Stmt] = []
    names: dict[ir.Table, ir.Var] = {}

    def safe(t: ir.Table) -> bool:
        row = t.row
        if isinstance(row, ir.HIndex):
            return True
        if isinstance(row, ir.Var):  # an already hoisted lookup
            return any(v == row and k.table not in skip_tables for k, v in names.items())
        return False

    def name_table(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Table) and safe(e):
            if e not in names:
                suffix = "" if isinstance(e.row, ir.HIndex) else f"_of_{e.row.name}"
                var = ir.Var(f"{e.table}_{e.col}{suffix}", e.dtype)
                names[e] = var
                prologue.append(ir.Let(var, e))
            return names[e]
        return e

    body = ir.rewrite_stmts(kernel.body, name_table)
    init = tuple(dataclasses.replace(s, init=ir.rewrite(s.init, name_table)) for s in kernel.state)

    # Top-level lets that do not depend on k (directly or through earlier k-variant values).
    variant: set[str] = {s.var.name for s in kernel.state}
    rest: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Let) and not s.declared and not _k_variant(s.value, variant):
            prologue.append(s)
            continue
        rest.append(s)
        if isinstance(s, (ir.Let, ir.Declare)):
            variant.add(s.var.name)
        elif isinstance(s, ir.If):
            for inner in ir.walk_stmts((s,)):
                if isinstance(inner, (ir.Let, ir.Declare)):
                    variant.add(inner.var.name)
    return dataclasses.replace(kernel, body=tuple(rest), prologue=tuple(prologue), state=init)


def hoist_program(program: ir.ProgramIR) -> ir.ProgramIR:
    skip_tables = frozenset(t.name for t in program.tables if t.skip_value is not None)
    return ir.map_kernels(program, lambda k: hoist_k_invariant(k, skip_tables))


# --- k-invariant field loads, for kernels whose threads walk several levels (k_per_thread > 1) ---


def hoist_invariant_loads(k: ir.Kernel) -> ir.Kernel:
    """Move loads that do not depend on the level out of the level loop, into the prologue.

    Only loads the body performs unconditionally at every level qualify (not under an `If`, not
    in a lazily evaluated branch of `?:`, `&&`, `||`), of fields the kernel does not write: then
    the chunk (never empty) loads the same value at least once anyway, so moving the load
    changes no result and cannot add an out-of-bounds access.
    """
    written = set(k.fields_written())
    body_vars = {s.var.name for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Let, ir.Declare))}
    body_vars |= {st.var.name for st in k.state}
    taken = {e.name for e in k.exprs() if isinstance(e, (ir.Var, ir.Param))} | body_vars
    taken |= {e.field for e in k.exprs() if isinstance(e, ir.Load)} | set(k.tables_used())
    names: dict[ir.Load, ir.Var] = {}
    new_lets: list[ir.Stmt] = []

    def invariant(e: ir.Expr) -> bool:
        return not any(isinstance(x, ir.KIndex) or (isinstance(x, ir.Var) and x.name in body_vars) for x in e.walk())

    def sub(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Load) and e.field not in written and invariant(e):
            if e not in names:
                n, name = 0, f"{e.field}_h"
                while f"{name}{n}" in taken:
                    n += 1
                taken.add(f"{name}{n}")
                names[e] = ir.Var(f"{name}{n}", e.dtype)
                new_lets.append(ir.Let(names[e], e))
            return names[e]
        if isinstance(e, ir.Select):  # only the condition is evaluated unconditionally
            return dataclasses.replace(e, cond=sub(e.cond))
        if isinstance(e, ir.Binary) and e.op in ("and_", "or_"):  # && and || short-circuit
            return dataclasses.replace(e, lhs=sub(e.lhs))
        if isinstance(e, ir.Binary):
            return dataclasses.replace(e, lhs=sub(e.lhs), rhs=sub(e.rhs))
        if isinstance(e, (ir.Unary, ir.Cast)):
            return dataclasses.replace(e, arg=sub(e.arg))
        if isinstance(e, ir.Call):
            return dataclasses.replace(e, args=tuple(sub(a) for a in e.args))
        if isinstance(e, ir.Load):
            return dataclasses.replace(e, index=tuple(sub(a) for a in e.index))
        if isinstance(e, ir.Table):
            return dataclasses.replace(e, row=sub(e.row))
        return e

    body: list[ir.Stmt] = []
    for st in k.body:  # top level only: statements inside an If run conditionally
        if isinstance(st, (ir.Let, ir.Store)):
            body.append(dataclasses.replace(st, value=sub(st.value)))
        elif isinstance(st, ir.If):
            body.append(dataclasses.replace(st, cond=sub(st.cond)))
        else:
            body.append(st)
    if not new_lets:
        return k
    return dataclasses.replace(k, body=tuple(body), prologue=(*k.prologue, *new_lets))
