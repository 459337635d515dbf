"""Kernel fusion: consecutive map kernels over the same domain become one kernel (a schedule knob).

GT4Py leaves one kernel per `as_fieldop` that its passes did not inline, and several kernels of a
program often run over the same cells or edges and re-read the same neighbours: rho_theta's four
C2E2CO gradients, the cell kernels of `compute_perturbed_quantities_and_interpolation`. Fused, a
thread computes every member at its own point in program order, so a value one member stores is
still in L1/L2 (or a register) when the next member reads it, the neighbour indices are loaded
once, and there is one launch instead of several.

Two neighbouring top-level kernels `a` then `b` are fused when:
* neither is a scan, and both have the same domain;
* every access of `b` to a field `a` writes, and of `a` to a field `b` writes, is at the
  kernel's own point (i, k): one thread then sees exactly the values it would have seen unfused;
* `b`'s per-column prologue (hoisted k-invariant loads) reads nothing `a` writes (it now runs
  before `a`'s body), and their host-computed scalar arguments do not clash.

Fusion reorders accesses of different members, so two field arguments sharing memory could give
other results: each field argument written by one member and each field argument another member
touches are added to `ProgramIR.distinct`, and the host plan refuses such calls (as for copy
forwarding). A fused kernel is named after its first and last member (`..._k3to5`).
"""

from __future__ import annotations

import dataclasses
import re

from icoforge.backend import ir
from icoforge.backend.forward import own_point

_MEMBER = re.compile(r"^(.*)_k(\d+)$")
_FUSED = re.compile(r"^(.*)_k(\d+)(?:to\d+)?$")


def _loads(stmts: tuple[ir.Stmt, ...]) -> list[ir.Load]:
    return [e for e in ir.walk_body_exprs(stmts) if isinstance(e, ir.Load)]


def _only_own_point(stmts: tuple[ir.Stmt, ...], fields: set[str], program: ir.ProgramIR) -> bool:
    kinds = dict(program.dim_kinds)
    return all(own_point(e, program.field(e.field).dims, kinds) for e in _loads(stmts) if e.field in fields)


def can_fuse(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> bool:
    """Whether `b`, launched right after `a`, can run inside `a`'s threads (see the module doc)."""
    if a.is_scan or b.is_scan or a.domain != b.domain:
        return False
    wa, wb = set(a.fields_written()), set(b.fields_written())
    if any(e.field in wa for e in _loads(b.prologue)):
        return False
    if not _only_own_point(b.body, wa, program) or not _only_own_point(a.all_stmts(), wb, program):
        return False
    args_a = {p.name: v for p, v in a.args}
    return all(args_a.get(p.name, v) == v for p, v in b.args)


def _merged_name(a: str, b: str) -> str:
    """`p_k3` (or `p_k3to4`) and `p_k5` -> `p_k3to5`."""
    ma, mb = _FUSED.match(a), _MEMBER.match(b)
    if ma and mb and ma.group(1) == mb.group(1):
        return f"{ma.group(1)}_k{ma.group(2)}to{mb.group(2)}"
    return f"{a}_{b.rsplit('_', 1)[-1]}"


def _shared_prologue(a: ir.Kernel, b: ir.Kernel) -> set[str]:
    """Names of `b`'s k-invariant prologue values that `a` computes alike (same name, same
    expression over shared names only): `b` uses `a`'s, typically the neighbour indices."""
    mine = {s.var.name: s.value for s in a.prologue if isinstance(s, ir.Let) and not s.declared}
    shared: set[str] = set()
    for s in b.prologue:
        if isinstance(s, ir.Let) and not s.declared and mine.get(s.var.name) == s.value:
            if all(e.name in shared for e in s.value.walk() if isinstance(e, ir.Var)):
                shared.add(s.var.name)
    return shared


def merge(a: ir.Kernel, b: ir.Kernel) -> ir.Kernel:
    """One kernel running `a` then `b` at each point. `b`'s variables are renamed where they clash
    with `a`'s, except the prologue values both compute alike: those are computed once."""
    shared = _shared_prologue(a, b)
    prologue_b = tuple(s for s in b.prologue if not (isinstance(s, ir.Let) and s.var.name in shared))
    taken = ir.variables(a.all_stmts())
    own = ir.variables(prologue_b + b.body)
    mapping: dict[str, str] = {}
    for name in sorted((own & taken) - shared):
        new, n = f"{name}_b", 1
        while new in taken or new in own or new in mapping.values():
            n += 1
            new = f"{name}_b{n}"
        mapping[name] = new
    args = dict((p.name, (p, v)) for p, v in (*a.args, *b.args))
    return dataclasses.replace(
        a,
        name=_merged_name(a.name, b.name),
        prologue=a.prologue + ir.rename_vars(prologue_b, mapping),
        body=a.body + ir.rename_vars(b.body, mapping),
        args=tuple(args.values()),
    )


def fuse_kernels(program: ir.ProgramIR) -> ir.ProgramIR:
    """Fuse every run of neighbouring top-level kernels that `can_fuse` allows, greedily in
    program order. Kernels under a host conditional stay as they are."""
    steps: list[ir.Step] = []
    groups: list[list[ir.Kernel]] = []
    for s in program.steps:
        prev = steps[-1] if steps else None
        if isinstance(s, ir.Kernel) and isinstance(prev, ir.Kernel) and can_fuse(prev, s, program):
            steps[-1] = merge(prev, s)
            groups[-1].append(s)
        else:
            steps.append(s)
            groups.append([s] if isinstance(s, ir.Kernel) else [])
    params = {p.name for p in program.params if isinstance(p, ir.FieldParam)}
    pairs = dict.fromkeys(program.distinct)
    for members in groups:
        for i, m in enumerate(members):
            touched_by_others = {f for j, o in enumerate(members) if j != i for f in (*o.fields_read(), *o.fields_written())}
            for w in m.fields_written():
                pairs.update(dict.fromkeys((w, t) for t in sorted(touched_by_others & params) if w in params and t != w))
    return dataclasses.replace(program, steps=tuple(steps), distinct=tuple(pairs))
