"""The dycore step decomposed over MPI ranks, icoforge (or any backend) on every rank (issue 23).

    mpirun -n 2 python -m icoforge greenline --ranks 2 --grid R2B3 --levels 10 --backend icoforge-cpu --verify
    icoforge greenline --ranks 2 ...        # the same: starts mpirun itself (cli/ranks_launch.py)

Every rank runs this module's `run_ranks`:

1. the global grid, its static fields and initial state, as a single-rank greenline makes them
   (rank 0 first, cached on disk; the others then read the cache);
2. the cell partition (`decompose.cell_partition`: METIS through icon4py's `MetisDecomposer`, or
   a breadth-first split), computed on rank 0 and broadcast; icon4py's `GridManager` with it as
   decomposer builds the rank's grid with ICON's halo lines; fields and state are the global ones
   at the rank's points (`decompose.local_static_fields`);
3. per backend: a `RankGranule` (the greenline's `Granule` on the rank's grid, with the halo
   exchange of `halo_exchange.make_exchange` given to icon4py's `SolveNonhydro`, which exchanges
   where ICON does), set up (each rank compiles its own programs: icon4py fixes the domain
   bounds at compile time) and, with `verify`, compared with the single-rank step: the three
   verification substeps' prognostic fields, owned points gathered on rank 0, against the same
   substeps of one granule on the whole grid (rank 0). max|a - b| / max|b| per field must stay
   below `rtol`; a NaN, or a point no rank owns, fails;
4. timing: per substep variant, warm-up then timed substeps, all ranks starting together (a
   barrier) and each substep between device synchronisations; the seconds inside exchange calls
   are added up apart (`TimedExchange`: they include waiting for the slowest neighbour). Then,
   with our exchange, a second pass that splits the exchange time into its phases (halo_exchange.
   PHASES: pack, to_host, mpi_wait, to_device, unpack; "other" is the rest: Python, posting the
   messages). It synchronises the device between phases, so its step times are not reported.

Rank 0 gathers every rank's numbers into one report (JSON-able dict, `report_lines` prints it).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.granule import decompose, instrument
from icoforge.granule import verify as verify_mod
from icoforge.granule.greenline import GranuleOptions, environment
from icoforge.granule.halo_exchange import PHASES, TimedExchange, make_exchange
from icoforge.granule.runner import SUBSTEP_MIX, VARIANTS, Granule, Progress
from icoforge.granule.solver import GranuleGrid
from icoforge.stalls import STALL_NOTE, gc_note, stalls

DEFAULT_RTOL = 1e-12  # decomposed vs one rank: the same operations per point, only rounding may differ


@dataclasses.dataclass
class RanksOptions(GranuleOptions):
    rtol: float = DEFAULT_RTOL  # tighter than one process's (see DEFAULT_RTOL)
    exchange: str = "auto"  # halo_exchange.EXCHANGES
    decomposer: str = "metis"  # decompose.DECOMPOSERS
    # the ranks build their programs one after another (rank 0 first), each with all of the host's
    # compile workers, then call and time together (see build_in_turn)
    compile_in_turn: bool = False


class RankGranule(Granule):
    """The greenline's `Granule` on one rank's part of the grid, with a timed halo exchange."""

    def __init__(self, backend_name: str, local: LocalPart, exchange_kind: str, *, only_used_variants: bool):
        super().__init__(backend_name, local.grid, local.static, local.state, only_used_variants=only_used_variants)
        self.local = local
        inner, self.exchange_used = make_exchange(
            exchange_kind, local.props, local.idx, local.manager.decomposition_info, gpu=self.gpu
        )
        self.timed_exchange = TimedExchange(inner, self.sync)
        self.exchange = self.timed_exchange

    def granule_grid(self) -> GranuleGrid:
        icon_grid = self.local.grid.icon_grid
        if self.gpu:  # GT4Py's GPU backends need the neighbour tables on the device
            icon_grid = decompose.device_icon_grid(icon_grid)
        return GranuleGrid(self.local.grid.name, icon_grid, self.gpu)


@dataclasses.dataclass
class LocalPart:
    """One rank's grid, indices, static fields and state."""

    props: decompose.RankProperties
    global_grid: Any
    partition: np.ndarray
    manager: Any
    grid: Any  # icoforge.grids.Grid of the rank's part
    idx: decompose.LocalIndices
    static: Any
    state: dict[str, np.ndarray]
    global_static: Any
    global_state: dict[str, np.ndarray]


def quiet_barrier(comm: Any, poll_s: float = 0.05) -> None:
    """A barrier that sleeps while it waits: MPI's own spins on a core, which a rank compiling
    alone (rank 0 filling the caches, or building the single-rank reference) needs on a small host."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll_s)


def _in_turn(props: decompose.RankProperties, work: Callable[[], Any]) -> Any:
    """`work()` on rank 0 first (it fills the caches), then on the other ranks together."""
    result = work() if props.rank == 0 else None
    quiet_barrier(props.comm)
    return result if props.rank == 0 else work()


def prepare(opts: RanksOptions, props: decompose.RankProperties, progress: Progress) -> LocalPart:
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.state import initial_state
    from icoforge.grids import load_grid
    from icoforge.grids.load import Grid

    progress("loading grid", 0, 0)
    grid = _in_turn(props, lambda: load_grid(opts.grid, levels=opts.levels, show_progress=False))
    decompose.check_decomposable(grid, props.comm_size)
    progress(f"static fields ({opts.factory_backend})", 0, 0)
    static = _in_turn(props, lambda: build_static_fields(grid, opts.factory_backend, in_child=True))
    state = initial_state(static, opts.levels, opts.seed)
    progress(f"decomposing {grid.name} into {props.comm_size} ranks", 0, 0)
    partition = None
    if props.rank == 0:
        partition = decompose.cell_partition(decompose.global_c2e2c(grid), props.comm_size, opts.decomposer)
    partition = props.comm.bcast(partition, root=0)
    manager = decompose.load_local_grid(grid, props, partition)
    idx = decompose.LocalIndices.from_decomposition(manager.decomposition_info)
    local_grid = Grid(grid.name, grid.path, manager)
    return LocalPart(
        props=props, global_grid=grid, partition=partition, manager=manager, grid=local_grid, idx=idx,
        static=decompose.local_static_fields(static, idx, manager.grid), state=decompose.local_state(state, idx),
        global_static=static, global_state=state,
    )  # fmt: skip


def _global_sizes(grid: Any) -> dict[str, int]:
    return {"CellDim": grid.num_cells, "EdgeDim": grid.num_edges, "VertexDim": grid.num_vertices}


def verify_against_one_rank(
    g: RankGranule, local: LocalPart, opts: RanksOptions, progress: Progress
) -> verify_mod.Comparison | None:
    """The decomposed verification substeps against one granule on the whole grid (rank 0)."""
    progress(f"{g.name}: verification substeps on {local.props.comm_size} ranks", 0, 0)
    mine = verify_mod.run_sequence(g)
    gathered = [decompose.gather_owned(local.props, local.idx, r, _global_sizes(local.global_grid)) for r in mine]
    comparison = None
    if local.props.rank == 0:
        progress(f"{g.name}: the single-rank reference (whole grid, compiling)", 0, 0)
        whole = Granule(g.name, local.global_grid, local.global_static, local.global_state,
                        only_used_variants=opts.only_used_variants)  # fmt: skip
        whole.setup(progress)
        progress(f"{g.name}: verification substeps on one rank", 0, 0)
        reference = verify_mod.run_sequence(whole)
        comparison = verify_mod.compare_runs(
            f"{g.name} on {local.props.comm_size} ranks", gathered, f"{g.name} on 1 rank", reference, opts.rtol
        )
        del whole
    quiet_barrier(local.props.comm)
    return comparison


def time_ranked(
    g: RankGranule, opts: RanksOptions, progress: Progress, *, phases: bool = False
) -> dict[str, dict[str, list[float]]]:
    """variant -> {"step_ms": [...], "exchange_ms": [...], "exchange_calls": [...]} on this rank.
    phases: also "<phase>_ms" per exchange phase (halo_exchange.PHASES); {} when the exchange
    cannot time them. Collective: every rank passes the same `phases`."""
    comm = g.local.props.comm
    if phases and not g.timed_exchange.time_phases(True):
        return {}
    what = "exchange phases" if phases else "timing"
    out: dict[str, dict[str, list[float]]] = {}
    total, done = len(VARIANTS) * (opts.steps + opts.warmup), 0
    try:
        for variant in VARIANTS:
            rec: dict[str, list[float]] = {"step_ms": [], "exchange_ms": [], "exchange_calls": []}
            for i in range(opts.warmup + opts.steps):
                progress(f"{g.name}: {what} ({variant})", done, total)
                g.sync()
                comm.Barrier()  # every rank starts the substep together
                g.timed_exchange.reset()
                t0 = time.perf_counter()
                g.step(variant)
                g.sync()
                if i >= opts.warmup:
                    rec["step_ms"].append((time.perf_counter() - t0) * 1e3)
                    rec["exchange_ms"].append(g.timed_exchange.seconds * 1e3)
                    rec["exchange_calls"].append(float(g.timed_exchange.calls))
                    if phases:
                        seconds = g.timed_exchange.phases or {}
                        for phase in PHASES:
                            rec.setdefault(f"{phase}_ms", []).append(seconds.get(phase, 0.0) * 1e3)
                done += 1
            out[variant] = rec
    finally:
        if phases:
            g.timed_exchange.time_phases(False)
    progress(f"{g.name}: {what}", total, total)
    return out


def exchange_phases_per_step(timings: dict[str, dict[str, list[float]]]) -> dict[str, float] | None:
    """Median ms per dycore step of each exchange phase, "other" (the rest of the exchange time)
    and "total", from `time_ranked(phases=True)`; None without phase timings."""
    if not timings:
        return None
    med = {v: {k: statistics.median(x) for k, x in rec.items()} for v, rec in timings.items()}
    out = {phase: sum(med[v][f"{phase}_ms"] for v in SUBSTEP_MIX) for phase in PHASES}
    total = sum(med[v]["exchange_ms"] for v in SUBSTEP_MIX)
    return out | {"other": total - sum(out.values()), "total": total}


def _rank_summary(
    g: RankGranule,
    local: LocalPart,
    timings: dict[str, dict[str, list[float]]],
    phases: dict[str, float] | None,
    pauses: instrument.GcPauses,
) -> dict[str, Any]:
    med = {v: {k: statistics.median(x) for k, x in rec.items()} for v, rec in timings.items()}
    device = None
    if g.gpu:
        import cupy as cp

        device = int(cp.cuda.Device().id)
    return {
        "rank": local.props.rank,
        "local_rank": local.props.local_rank,
        "device": device,
        "points": {decompose.HORIZONTAL[d]: {"owned": o, "halo": h} for d, (o, h) in local.idx.sizes().items()},
        "setup_s": g.result.setup_s,
        "build_window": list(g.build_window),  # wall clock, s since the epoch: when its build began and ended
        "exchange": g.exchange_used,
        "variants": {v: m | {"samples_ms": timings[v]["step_ms"]} for v, m in med.items()},
        "dycore_step_ms": sum(med[v]["step_ms"] for v in SUBSTEP_MIX),
        "exchange_ms_per_step": sum(med[v]["exchange_ms"] for v in SUBSTEP_MIX),
        "exchange_calls_per_step": sum(med[v]["exchange_calls"] for v in SUBSTEP_MIX),
        # from the pass with synchronisations between phases: its total is above exchange_ms_per_step
        "exchange_phases_ms_per_step": phases,
        "gc_pauses": pauses.to_json(),  # Python's collections while this rank was timed
    }


def build_in_turn(g: RankGranule, props: decompose.RankProperties, progress: Progress) -> None:
    """Rank r builds (constructs and compiles) after rank r-1 is done, then all ranks go on together.

    Why: every rank compiles its own programs, and N ranks compiling at once on one host take far
    more than N times one rank. dace_gpu, R2B5/80, H200 host (16 cores): 1 rank 171 s with 16
    workers (session 20), 2 ranks with 8 workers each 370 s (session 22), 4 ranks with 4 workers
    each more than 1,000 s (sessions 26-27, cut by the call limit three times). In turn each rank
    has the workers of the whole host (the launcher's GT4PY_BUILD_JOBS). Construction does no halo
    exchange, so a rank that waits is only asleep in a barrier."""
    for turn in range(props.comm_size):
        if props.rank == 0 and turn > 0:  # rank 0 has built (turn 0) and now only waits
            progress(f"{g.name}: ranks compiling in turn, now rank {turn}", turn, props.comm_size)
        if props.rank == turn:
            g.build(progress)
        quiet_barrier(props.comm)


def run_backend(name: str, local: LocalPart, opts: RanksOptions, progress: Progress, log: Callable[[str], None]) -> dict | None:
    g = RankGranule(name, local, opts.exchange, only_used_variants=opts.only_used_variants)
    if opts.compile_in_turn:
        build_in_turn(g, local.props, progress)
    else:
        g.build(progress)
    g.first_calls(progress)
    log(f"{name}: rank 0 set up in " + ", ".join(f"{k} {v:.1f} s" for k, v in g.result.setup_s.items())
        + f"; halo exchange: {g.exchange_used}")  # fmt: skip
    quiet_barrier(local.props.comm)
    comparison = verify_against_one_rank(g, local, opts, progress) if opts.verify else None
    with instrument.quiet_gc() as pauses:
        timings = time_ranked(g, opts, progress)
        phases = exchange_phases_per_step(time_ranked(g, opts, progress, phases=True))
    ranks = local.props.comm.gather(_rank_summary(g, local, timings, phases, pauses), root=0)
    if local.props.rank != 0:
        return None
    return {
        "backend": name,
        "ranks": ranks,
        # a step ends when its slowest rank ends (every rank waits for it in the next exchange)
        "dycore_step_ms": max(r["dycore_step_ms"] for r in ranks),
        "exchange_ms_per_step": max(r["exchange_ms_per_step"] for r in ranks),
        "verification": comparison.to_json() if comparison else None,
    }


def run_ranks(
    opts: RanksOptions,
    props: decompose.RankProperties,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """Every rank calls it (collective); rank 0 gets the report, the others None."""
    from icoforge.granule.backends import check_name

    progress = progress or (lambda what, done, total: None)
    log = log or (lambda text: None)
    if opts.levels <= 0 or opts.steps < 1 or opts.warmup < 0:
        raise IcoforgeError("levels and steps must be positive, warm-up >= 0")
    for name in (*opts.backends, opts.factory_backend):
        check_name(name)
    local = prepare(opts, props, progress)
    sizes = local.props.comm.gather(local.idx.sizes(), root=0)
    if props.rank == 0:
        cells = ", ".join(f"{s['CellDim'][0]}+{s['CellDim'][1]}" for s in sizes)
        log(f"{local.global_grid.name} ({local.global_grid.num_cells:,} cells) on {props.comm_size} ranks "
            f"({decompose.decomposer_used(opts.decomposer)}): owned+halo cells per rank {cells}")  # fmt: skip
    results = [run_backend(name, local, opts, progress, log) for name in opts.backends]
    if props.rank != 0:
        return None
    g = local.global_grid
    return {
        "kind": "greenline-ranks",
        "options": dataclasses.asdict(opts),
        "ranks": props.comm_size,
        "decomposer": decompose.decomposer_used(opts.decomposer),
        "grid": {"name": g.name, "cells": g.num_cells, "edges": g.num_edges, "vertices": g.num_vertices, "levels": opts.levels},
        "backends": results,
        "environment": environment(),
    }


def passed(report: dict[str, Any]) -> bool:
    return all((b["verification"] or {}).get("passed", True) for b in report["backends"])


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as plain text lines: per backend and rank the step, exchange and point counts."""
    g = report["grid"]
    lines = [f"{g['name']}/{g['levels']} levels, {report['ranks']} ranks ({report['decomposer']}); "
             f"times are medians, ms; a dycore step is first + 3 x middle + last"]  # fmt: skip
    head = f"{'backend':<16} {'rank':>4} {'cells own+halo':>15} {'edges own+halo':>15} {'first':>9} {'middle':>9} {'last':>9} {'step':>9} {'exch/step':>9} {'share':>6}"
    lines.append(head)
    for b in report["backends"]:
        for r in b["ranks"]:
            v = r["variants"]
            c, e = r["points"]["cells"], r["points"]["edges"]
            share = r["exchange_ms_per_step"] / r["dycore_step_ms"] if r["dycore_step_ms"] else 0.0
            lines.append(
                f"{b['backend']:<16} {r['rank']:>4} {c['owned']:>8}+{c['halo']:<6} {e['owned']:>8}+{e['halo']:<6} "
                f"{v['first']['step_ms']:>9.2f} {v['middle']['step_ms']:>9.2f} {v['last']['step_ms']:>9.2f} "
                f"{r['dycore_step_ms']:>9.2f} {r['exchange_ms_per_step']:>9.2f} {share:>6.1%}"
            )
        for r in b["ranks"]:
            if phases := r.get("exchange_phases_ms_per_step"):
                split = ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if k != "total")
                lines.append(f"{b['backend']} rank {r['rank']}: exchange phases, ms per step (a pass that waits for the "
                             f"device between phases): {split}; total {phases['total']:.2f}")  # fmt: skip
        stalled = [f"rank {r['rank']} {note} ({gc_note(r.get('gc_pauses'))})" for r in b["ranks"]
                   if (note := stalls({v: x["samples_ms"] for v, x in r["variants"].items()}))]  # fmt: skip
        if stalled:
            lines.append(f"{b['backend']}: {STALL_NOTE}: {'; '.join(stalled)}")
        builds = ", ".join(f"rank {r['rank']} {r['build_window'][1] - r['build_window'][0]:.0f}" for r in b["ranks"])
        how = "in turn" if report["options"].get("compile_in_turn") else "at once"
        lines.append(f"{b['backend']}: build (construct + compile) s, ranks {how}: {builds}")
        lines.append(f"{b['backend']}: dycore step {b['dycore_step_ms']:.2f} ms (slowest rank), exchange "
                     f"{b['exchange_ms_per_step']:.2f} ms per step, {b['ranks'][0]['exchange_calls_per_step']:.0f} "
                     f"exchange calls per step, halo exchange: {b['ranks'][0]['exchange']}")  # fmt: skip
        if ver := b["verification"]:
            worst = ", ".join(f"{k} {v:.2e}" for k, v in ver["worst_rel"].items())
            verdict = "PASS" if ver["passed"] else "FAIL"
            lines.append(f"{b['backend']}: {report['ranks']} ranks vs 1 rank, owned points, 3 substeps, "
                         f"max|a-b|/max|ref| (rtol {ver['rtol']:g}): {worst} -> {verdict}")  # fmt: skip
    return lines
