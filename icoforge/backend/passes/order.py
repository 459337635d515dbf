"""Statement order of straight-line kernel bodies: as GT4Py's fused stencils have it.

The early GTIR path (lower_fields.py) names each field operator's value where the first target
needs it and stores every target at the end; GT4Py's full pass list computes the values its CSE
shares first and each target's own expression at its store. Both are the same arithmetic, but
nvcc's register allocation follows the order: compute_interpolation_and_nonhydro_buoy took 44
registers on the early path and 32 on the full list (at 256 threads a block, 62.5 % against 100 %
occupancy on sm_90), with the same loads and instructions (benchmarks/early-vs-full-code-R2B3-10.md).

A map kernel whose body is lets and stores only (no branches) is put in this order:
* values several statements read, those more targets need first (a value every target needs,
  like the upwind factor of rho and theta, before one of rho's own), each after what it reads;
* then per target, in the targets' order: the rest of its values, then its store, unless a
  statement still to come loads that field (then it and the later stores wait to the end).

A store moved before a load of another field changes results only if the caller passes memory
that the two fields share: such pairs go to `ProgramIR.distinct`, and the host plans refuse those
calls (as for copy forwarding and fusion). Values and stores stay the same; only their order changes.
"""

from __future__ import annotations

import dataclasses

from icoforge.backend.ir import ir, recompute


def _vars(e: ir.Expr) -> set[str]:
    return {x.name for x in e.walk() if isinstance(x, ir.Var)}


def _straight(k: ir.Kernel) -> bool:
    return not k.is_scan and all(isinstance(s, ir.Store) or (isinstance(s, ir.Let) and not s.declared) for s in k.body)


def order_kernel(k: ir.Kernel) -> ir.Kernel:
    """`k` with its body in the order of the module doc (unchanged unless straight-line)."""
    lets = {s.var.name: s for s in k.body if isinstance(s, ir.Let)}
    if not _straight(k) or len(lets) != len(k.body) - sum(isinstance(s, ir.Store) for s in k.body):
        return k  # branches, a scan, or a name defined twice
    pos = {n: j for j, n in enumerate(lets)}
    stores = [s for s in k.body if isinstance(s, ir.Store)]
    reads = {n: sorted(_vars(s.value) & lets.keys(), key=pos.get) for n, s in lets.items()}
    uses = dict.fromkeys(lets, 0)
    for s in k.body:
        for n in _vars(s.value) & lets.keys():
            uses[n] += 1
    cones: dict[str, frozenset] = {}

    def cone(n: str) -> frozenset:  # n and every value it is computed from
        if n not in cones:
            cones[n] = frozenset({n}).union(*(cone(d) for d in reads[n]))
        return cones[n]

    need = dict.fromkeys(lets, 0)  # how many targets need each value
    for st in stores:
        for n in frozenset().union(*(cone(d) for d in _vars(st.value) & lets.keys())):
            need[n] += 1
    out: list[ir.Stmt] = []
    done: set[str] = set()

    def emit(n: str) -> None:
        if n not in done:
            for d in reads[n]:
                emit(d)
            done.add(n)
            out.append(lets[n])

    for n in sorted((n for n in lets if uses[n] >= 2), key=lambda n: (-need[n], pos[n])):
        emit(n)
    waiting = list(stores)
    while waiting:
        st = waiting[0]
        for n in sorted(_vars(st.value) & lets.keys(), key=pos.get):
            emit(n)
        later = [lets[n].value for n in lets if n not in done] + [s.value for s in waiting[1:]]
        if any(st.field in recompute.fields_loaded(e) for e in later):
            break  # a later statement must not see the new value: it and the rest go last, in order
        out.append(waiting.pop(0))
    for n in lets:
        emit(n)
    return dataclasses.replace(k, body=(*out, *waiting))


def _moved_pairs(before: ir.Kernel, after: ir.Kernel, params: set[str]) -> list[tuple[str, str]]:
    """(stored field, field now loaded after that store but not before): the pairs whose shared
    memory would make the new order give other results."""

    def loaded_after(body: tuple, field: str) -> set[str]:
        j = next(j for j, s in enumerate(body) if isinstance(s, ir.Store) and s.field == field)
        return set().union(*(recompute.fields_loaded(s.value) for s in body[j + 1 :]))

    pairs = []
    for st in (s for s in after.body if isinstance(s, ir.Store) and s.field in params):
        for f in sorted(loaded_after(after.body, st.field) - loaded_after(before.body, st.field)):
            if f in params and f != st.field:
                pairs.append((st.field, f))
    return pairs


def order_program(program: ir.ProgramIR) -> ir.ProgramIR:
    """Every kernel in the order of the module doc; moved stores' pairs in `distinct`."""
    params = {p.name for p in program.params if isinstance(p, ir.FieldParam)}
    pairs = dict.fromkeys(program.distinct)

    def one(k: ir.Kernel) -> ir.Kernel:
        new = order_kernel(k)
        if new is not k:
            pairs.update(dict.fromkeys(_moved_pairs(k, new, params)))
        return new

    out = ir.map_kernels(program, one)
    return dataclasses.replace(out, distinct=tuple(pairs))
