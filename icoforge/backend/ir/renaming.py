"""Renaming in kernel bodies: stores sent to another field, variables renamed where defined and
where used (what fusion and composition need to put two bodies side by side)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from icoforge.backend.ir.ir import Declare, Expr, If, Let, Stmt, Store, Var, rewrite_stmts, walk_body_exprs, walk_stmts


def rename_stores(stmts: tuple[Stmt, ...], mapping: Mapping[str, str]) -> tuple[Stmt, ...]:
    """`stmts` with stores to a field of `mapping` going to its new name, through `If` branches."""
    out: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Store) and s.field in mapping:
            s = dataclasses.replace(s, field=mapping[s.field])
        elif isinstance(s, If):
            s = If(s.cond, rename_stores(s.then, mapping), rename_stores(s.orelse, mapping))
        out.append(s)
    return tuple(out)


def variables(stmts: tuple[Stmt, ...]) -> set[str]:
    """Names of the variables `stmts` define or use (through `If` branches)."""
    names = {s.var.name for s in walk_stmts(stmts) if isinstance(s, (Let, Declare))}
    return names | {e.name for e in walk_body_exprs(stmts) if isinstance(e, Var)}


def rename_vars(stmts: tuple[Stmt, ...], mapping: dict[str, str]) -> tuple[Stmt, ...]:
    """`stmts` with variables renamed by `mapping`, where defined and where used."""
    def var(e: Expr) -> Expr:
        return dataclasses.replace(e, name=mapping[e.name]) if isinstance(e, Var) and e.name in mapping else e

    def declared(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:  # the variables Let/Declare define
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, (Let, Declare)):
                s = dataclasses.replace(s, var=var(s.var))
            elif isinstance(s, If):
                s = If(s.cond, declared(s.then), declared(s.orelse))
            out.append(s)
        return tuple(out)

    return declared(rewrite_stmts(stmts, var))  # rewrite_stmts: the uses, through If branches
