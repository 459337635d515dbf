"""Move k-invariant work out of the vertical loop.

Neighbour indices depend only on the horizontal point, so every `Table` lookup that is safe to do
unconditionally becomes a named per-column value (`E2C_1`), and top-level `Let`s that do not
depend on the level move to the kernel's prologue. A lookup is safe when its row is the kernel's
own index or comes from a table without skip values: a skip value (-1) used as a row would read
outside the table, so such chained lookups stay where GT4Py's `can_deref` guard protects them.
"""

from __future__ import annotations

import dataclasses

from icoforge.backend import ir


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

    def visit(steps: tuple[ir.Step, ...]) -> tuple[ir.Step, ...]:
        out: list[ir.Step] = []
        for s in steps:
            if isinstance(s, ir.Kernel):
                out.append(hoist_k_invariant(s, skip_tables))
            else:
                out.append(ir.HostIf(s.cond, visit(s.then), visit(s.orelse)))
        return tuple(out)

    return dataclasses.replace(program, steps=visit(program.steps))
