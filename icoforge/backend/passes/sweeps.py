"""Sweep fusion: a scan and the scan after it walk each column in one thread, the values the first
hands to the second kept on chip (the schedule's `fuse_sweeps`).

The vertically implicit solvers end in a tridiagonal solve: a forward sweep computes two
coefficients per level (`__tmp_4`, `__tmp_5` in the predictor), a backward sweep reads them back
level by level. Unfused, the coefficients go to memory and come back (four field accesses per
level; ~0.8 GB per call on R2B6/80), though each column's are needed only by the thread that
walks that column next. Fused, one thread walks its column forward, keeping the coefficients in
its slots of shared memory, then backward, reading them there: the bytes go, and one launch does
both. The cost is occupancy: a column's slots take levels x 8 B per coefficient (80 levels, two
coefficients: 1.25 KiB), so a block holds few columns (32 at 80 levels within CUDA's 48 KiB of
static shared memory). Whether that pays is a measurement (an A/B on the device), so the knob is
off by default.

Two neighbouring top-level kernels `a` (a scan, or a column walk) then `b` (a scan) are fused when:
* both walk the same columns over constant levels;
* every field that one of them writes and the other touches is accessed by both in the
  kernel's own column only (any level): `a` has finished its walk of a column before `b` starts
  it, exactly as unfused, and no other column's thread is involved;
* at least one temporary goes on chip: a temporary that `a` stores unconditionally (at every
  level of its walk), that `b` reads in its own column only at levels `a` has written (conditions
  on the level followed), and that nothing else loads or stores (`a` does not read it back).
  Those temporaries leave the program and become the kernel's `on_chip` storage;
* the on-chip storage of one warp's columns (32; a CDNA wavefront's 64 for HIP) fits the vendor's
  shared memory per block (`smem_limit`); otherwise a decision says why not (HIP at 80 levels:
  64 x 1,264 B > 64 KiB of LDS).
Field arguments one walk writes and the other touches are recorded in `ProgramIR.distinct` (the
host refuses calls where they share memory), as for fusion.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from icoforge.backend.ir import ir, recompute
from icoforge.backend.passes.fuse import _FUSED, _args_apart, _column_offsets, _loads

# (kernel a, kernel b, why not fused) -> None: where a refusal is reported (pipeline's decisions)
Refused = Callable[[ir.Kernel, ir.Kernel, str], None]

_LAST = re.compile(r"^(.*)_k(\d+)(?:to(\d+))?$")
# the fewest columns a block of a fused sweep walks: one warp (CUDA) or wavefront (HIP on CDNA)
COLUMNS_PER_BLOCK = {"cuda": 32, "hip": 64}


def _levels(k: ir.Kernel) -> tuple[int, int] | None:
    return k.domain.constant_levels() if k.domain.hdim is not None else None


def _same_columns(a: ir.Kernel, b: ir.Kernel) -> bool:
    return (a.domain.hdim, a.domain.h_start, a.domain.h_end) == (b.domain.hdim, b.domain.h_start, b.domain.h_end)


def _top_level_stores(k: ir.Kernel) -> set[str]:
    return {s.field for s in k.body if isinstance(s, ir.Store)}


def _stored_anywhere(k: ir.Kernel) -> set[str]:
    return {s.field for s in ir.walk_stmts(k.body) if isinstance(s, ir.Store)}


def on_chip_candidates(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> list[str]:
    """The temporaries `a` hands to `b` alone, which can live on chip between the two walks (module
    doc); sorted by name."""
    la, lb = _levels(a), _levels(b)
    if la is None or lb is None:
        return []
    temporaries = {t.name for t in program.temporaries}
    elsewhere = {f for k in program.kernels() if k.name not in (a.name, b.name) for f in (*k.fields_read(), *k.fields_written())}
    out = []
    for t in sorted(_top_level_stores(a) & temporaries):
        if t in elsewhere or t in a.fields_read() or t in _stored_anywhere(b):
            continue
        if [s.field for s in ir.walk_stmts(a.body) if isinstance(s, ir.Store)].count(t) != 1:
            continue
        if any(e.field == t for e in _loads(b.prologue)) or _column_offsets(b.body, t, program) is None:
            continue
        read = recompute.stmts_levels_read(b.body, t, *lb)
        if read is None or not all(la[0] <= lo and hi <= la[1] for lo, hi in read):
            continue  # a level a never wrote would come from shared memory, not from memory
        out.append(t)
    return out


def _columns_only(a: ir.Kernel, b: ir.Kernel, program: ir.ProgramIR) -> bool:
    """Every field one walk writes and the other touches: both access it in their own column."""
    shared = (set(a.fields_written()) & {*b.fields_read(), *b.fields_written()}) | (
        set(b.fields_written()) & {*a.fields_read(), *a.fields_written()}
    )
    kinds = dict(program.dim_kinds)
    for f in shared:
        dims = program.field(f).dims
        if not dims or kinds.get(dims[-1]) != "vertical":  # a field without levels: one value per column at most
            if any(e.field == f and not all(isinstance(x, ir.HIndex) for x in e.index) for k in (a, b) for e in k.exprs() if isinstance(e, ir.Load)):
                return False
            continue
        if _column_offsets(a.all_stmts(), f, program) is None or _column_offsets(b.all_stmts(), f, program) is None:
            return False
    return True


def _name(a: str, b: str) -> str:
    """`p_k6` and `p_k7to9` -> `p_k6to9`."""
    ma, mb = _FUSED.match(a), _LAST.match(b)
    if ma and mb and ma.group(1) == mb.group(1):
        return f"{ma.group(1)}_k{ma.group(2)}to{mb.group(3) or mb.group(2)}"
    return f"{a}_then_{b}"


def fuse_pair(a: ir.Kernel, b: ir.Kernel, chip: list[str], program: ir.ProgramIR) -> ir.Kernel:
    """`a` with `b` as its `then` walk and `chip` as on-chip storage over `a`'s levels."""
    b = _args_apart(a, b)
    args = dict((p.name, (p, v)) for p, v in (*a.args, *b.args))
    la = a.domain.constant_levels()
    levels = ir.Domain(a.domain.hdim, a.domain.h_start, a.domain.h_end, ir.Const(la[0], "int32"), ir.Const(la[1] + 1, "int32"))
    on_chip = tuple(ir.Temporary(t, program.field(t).dims, program.field(t).dtype, levels) for t in chip)
    return dataclasses.replace(a, name=_name(a.name, b.name), args=tuple(args.values()),
                               then=dataclasses.replace(b, args=()), on_chip=on_chip)  # fmt: skip


def fuse_sweeps(program: ir.ProgramIR, smem_limit: int, columns: int = 32, refused: Refused | None = None) -> ir.ProgramIR:
    """Each top-level scan with the scan right after it as one kernel where the module doc allows
    it; `refused(a, b, why)` hears of pairs that qualify but whose on-chip values of `columns`
    columns (COLUMNS_PER_BLOCK of the vendor) do not fit `smem_limit` bytes (shared memory per block)."""
    steps: list[ir.Step] = []
    pairs = dict.fromkeys(program.distinct)
    gone: set[str] = set()
    params = {p.name for p in program.params if isinstance(p, ir.FieldParam)}
    for s in program.steps:
        prev = steps[-1] if steps else None
        if (isinstance(s, ir.Kernel) and isinstance(prev, ir.Kernel) and prev.is_scan and s.is_scan and prev.then is None
                and s.then is None and _same_columns(prev, s) and _columns_only(prev, s, program)):  # fmt: skip
            chip = on_chip_candidates(prev, s, program)
            if chip:
                fused = fuse_pair(prev, s, chip, program)
                if fused.column_bytes() * columns <= smem_limit:
                    for w, other in ((prev, s), (s, prev)):
                        touched = {*other.fields_read(), *other.fields_written()} & params
                        for f in sorted(set(w.fields_written()) & params):
                            pairs.update(dict.fromkeys((f, t) for t in sorted(touched) if t != f))
                    steps[-1] = fused
                    gone.update(chip)
                    continue
                if refused is not None:
                    refused(prev, s, f"not fused as one sweep: {fused.column_bytes():,} B of on-chip values per column "
                                     f"x {columns} columns > {smem_limit:,} B of shared memory per block")  # fmt: skip
        steps.append(s)
    if not gone:
        return program
    temporaries = tuple(t for t in program.temporaries if t.name not in gone)
    return dataclasses.replace(program, steps=tuple(steps), temporaries=temporaries, distinct=tuple(pairs))
