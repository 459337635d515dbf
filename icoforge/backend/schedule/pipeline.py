"""The compiler's passes, in order: kernel IR -> kernel IR, each a pure function.

    GTIR --GT4Py's passes--> GTIR --lower--> kernel IR
         --forward--> --inline(policy)--> --share--> --hoist--> --order-->   (every target: `translate_passes`)
         --fuse--> --sweeps--> plan(schedule) --per-launch hoist--> (GPU targets: `gpu_passes`)
         --> printers (codegen/cpp.py, codegen/cuda.py), which print and do not transform

The first passes depend on the program and the schedule's inline policy (`ProgramSchedule.inline`,
"auto" by default: the byte cost model of inline.py decides); the translation cache keeps GT4Py's
passes only (seconds to minutes), these run on every build (milliseconds). The GPU passes depend
on the schedule, which is consumed here once: `schedule.resolve` gives every kernel's launch
(`KernelLaunch`), and the printers get the final IR together with those launches.
`stages()` returns the IR after each pass (`icoforge explain --stage pipeline` prints them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from icoforge.backend.passes import forward, hoist, inline, order, share, sweeps
from icoforge.backend.ir import ir
from icoforge.backend.schedule import tuned
from icoforge.backend.passes.fuse import fuse_kernels
from icoforge.backend.schedule.schedule import KernelLaunch, ProgramSchedule, resolve


@dataclasses.dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[ir.ProgramIR, str], ir.ProgramIR]  # (program, inline policy) -> program
    what: str


TRANSLATE_PASSES = (
    Pass("forward", lambda p, _: forward.forward_copies(p), "copy forwarding: the copy kernels GT4Py's temporaries leave are gone"),
    Pass("inline", inline.inline_temporaries, "temporaries recomputed in their readers where that moves fewer bytes (compute_inline)"),
    Pass("share", lambda p, _: share.share_program(p), "branches on one condition merged, equal values computed once (value numbering)"),
    Pass("hoist", lambda p, _: hoist.hoist_program(p), "neighbour indices and level-invariant values computed once per column"),
    Pass("order", lambda p, _: order.order_program(p), "straight-line bodies: shared values first, each store after its own values (GPU registers)"),
)


def translate_passes(program: ir.ProgramIR, inline_policy: str = "auto") -> ir.ProgramIR:
    """The passes every target runs, on the freshly lowered IR."""
    for p in TRANSLATE_PASSES:
        program = p.run(program, inline_policy)
    return program


def inline_decisions(lowered: ir.ProgramIR, policy: str = "auto") -> tuple[inline.Decision, ...]:
    """What the inline pass decides for each temporary of `lowered` (`icoforge explain` prints it)."""
    program = lowered
    for p in TRANSLATE_PASSES:
        if p.name == "inline":
            break
        program = p.run(program, policy)
    return inline.inline_with_decisions(program, policy)[1]


def fuse(
    program: ir.ProgramIR, schedule: ProgramSchedule, dim_sizes: Mapping[str, int] | None = None,
    decisions: list[tuned.Decision] | None = None,
) -> ir.ProgramIR:  # fmt: skip
    """Neighbouring kernels over one domain become one, where the schedule asks for it. With the
    call's horizontal `dim_sizes`, a fusion into a column walk is made only on grids with at least
    the schedule's `fuse_scan_min_columns` columns (a decision appended to `decisions` where not);
    without them (`icoforge explain` of a bare program), as if the grid were large enough."""
    if not schedule.fuses(program.name):
        return program
    limit = schedule.fuse_scan_min_columns

    def walk_ok(a: ir.Kernel, b: ir.Kernel) -> bool:
        n = dim_sizes.get(a.domain.hdim) if dim_sizes is not None and a.domain.hdim else None
        if n is None or n >= limit:
            return True
        if decisions is not None:
            why = f"not fused into one column walk: {n:,} {a.domain.hdim} columns < fuse_scan_min_columns {limit:,}"
            decisions.append(tuned.Decision(f"{a.name} + {b.name}", tuned.NOT_FUSED, why))
        return False

    return fuse_kernels(program, schedule.fuse_columns, walk_ok if limit else None)


def fuse_sweeps(
    program: ir.ProgramIR, schedule: ProgramSchedule, vendor: str, decisions: list[tuned.Decision] | None = None
) -> ir.ProgramIR:  # fmt: skip
    """A scan and the scan after it as one walk per column, where the schedule's `fuse_sweeps` names
    the program (passes/sweeps.py); a pair whose on-chip values do not fit the vendor's shared
    memory is a decision appended to `decisions`."""
    if not schedule.fuses_sweeps(program.name):
        return program

    def refused(a: ir.Kernel, b: ir.Kernel, why: str) -> None:
        if decisions is not None:
            decisions.append(tuned.Decision(f"{a.name} + {b.name}", tuned.NOT_FUSED, why))

    return sweeps.fuse_sweeps(program, schedule.smem_limit(vendor), sweeps.COLUMNS_PER_BLOCK[vendor], refused)


def hoist_per_launch(program: ir.ProgramIR, launches: dict[str, KernelLaunch]) -> ir.ProgramIR:
    """Level-invariant field loads out of the level loop of kernels whose threads walk several
    levels (k_per_thread > 1). Kernel names, kinds and parameters stay, so `launches` stay valid."""

    def one(k: ir.Kernel) -> ir.Kernel:
        la = launches[k.name]
        return hoist.hoist_invariant_loads(k) if la.kind in ("map2d", "vmap") and la.k_per_thread > 1 else k

    return ir.map_kernels(program, one)


def gpu_passes(
    program: ir.ProgramIR, schedule: ProgramSchedule, vendor: str, dim_sizes: Mapping[str, int] | None = None,
    decisions: list[tuned.Decision] | None = None,
) -> tuple[ir.ProgramIR, ir.ProgramIR, dict[str, KernelLaunch]]:  # fmt: skip
    """(the IR the schedule applies to, the final IR, every kernel's launch): the schedule
    resolved once; ScheduleError before any code is generated. With the call's horizontal
    `dim_sizes`, the schedule's tuned entries apply where they hold (tuned.py; a decision per
    tuned kernel is appended to `decisions`)."""
    scheduled = fuse_sweeps(fuse(program, schedule, dim_sizes, decisions), schedule, vendor, decisions)
    if dim_sizes is not None:
        schedule, said = tuned.applied(schedule, scheduled, dim_sizes)
        if decisions is not None:
            decisions.extend(said)
    launches = resolve(scheduled, schedule, vendor)
    return scheduled, hoist_per_launch(scheduled, launches), launches


def stages(
    lowered: ir.ProgramIR, schedule: ProgramSchedule | None = None, vendor: str | None = None,
    dim_sizes: Mapping[str, int] | None = None,
) -> list[tuple[str, str, ir.ProgramIR]]:  # fmt: skip
    """(pass, what it does, IR after it) from the lowered IR on; the GPU passes with a schedule
    (at `dim_sizes`, the grid's horizontal sizes, where given)."""
    policy = schedule.inline if schedule is not None else "auto"
    out = [("lower", "GT4Py's GTIR after its passes, as kernel IR", lowered)]
    for p in TRANSLATE_PASSES:
        out.append((p.name, p.what, p.run(out[-1][2], policy)))
    if schedule is not None and vendor is not None:
        scheduled, final, _ = gpu_passes(out[-1][2], schedule, vendor, dim_sizes)
        out.append(("fuse", "neighbouring maps over one domain merged, a map run in the scan before it (schedule's `fuse`); "
                    "a scan and the scan after it as one walk, values between them on chip (`fuse_sweeps`)", scheduled))
        out.append(("hoist per launch", "level-invariant loads out of level loops (k_per_thread > 1)", final))
    return out
