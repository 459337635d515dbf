"""`run_greenline`: the whole greenline job for several backends, as one plain report.

Grid and static fields are shared by all backends and timed once ("common" setup); each backend
then has its own setup (construction, compilation, first calls), optional verification against
the first backend, timed steps and a per-program profile (see `runner.py`).

With `gpu_lock` (`--gpu-lock PATH`) every measurement phase (verification substeps, warm-up +
timed steps, profile) holds an exclusive flock on PATH (`gpulock.py`) and setup holds it shared.
Several processes, one backend each, can then compile at the same time and still time the GPU one
at a time, never beside another one's compiling; `merge.py` puts their JSON reports side by side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from icoforge import settings
from icoforge.errors import IcoforgeError
from icoforge.granule import golden, instrument
from icoforge.granule import verify as verify_mod
from icoforge.granule.backends import check_name, is_gpu
from icoforge.granule.fields import build_static_fields, static_fields_key
from icoforge.granule.gpulock import GpuLock
from icoforge.granule.runner import SUBSTEP_MIX, VARIANTS, BackendResult, Granule, Progress, dtime_for, substep_fusion_backends
from icoforge.suite.backends import GPU_BACKENDS

DEFAULT_FACTORY_BACKEND = "icoforge-cpu+roundtrip-passes"
# --granule: icon4py's component timed (module:class, imported when chosen); "dycore" is runner.Granule
GRANULES: dict[str, str] = {
    "dycore": "icoforge.granule.runner:Granule",  # SolveNonhydro.time_step
    "diffusion": "icoforge.granule.diffusion:DiffusionGranule",  # Diffusion.run
    "advection": "icoforge.granule.advection:AdvectionGranule",  # tracer Advection.run (qv)
    "muphys": "icoforge.granule.muphys:MuphysGranule",  # MuphysComponent (AES graupel)
}
# what only the dycore granule supports (its substeps, its byte model, its state refill)
DYCORE_ONLY_OPTIONS = ("substep_fusion", "graph_replay", "floors_steps")


def granule_class(name: str) -> type[Granule]:
    """The Granule class of --granule NAME; a clear error listing the valid names otherwise."""
    import importlib

    if name not in GRANULES:
        raise IcoforgeError(f"unknown granule {name!r}; valid: {', '.join(GRANULES)}")
    module, cls = GRANULES[name].split(":")
    return getattr(importlib.import_module(module), cls)
# (granule, dycore steps) -> {"floors_ms", "floors_bytes", "floors_bandwidth_GBps"}: perf's, passed down
FloorModel = Callable[[Any, int], dict[str, Any]]


@dataclasses.dataclass
class GranuleOptions:
    """What a greenline run takes on one process (GreenlineOptions) and decomposed over MPI ranks
    (ranks.RanksOptions): defined once, so that both build the same grid, static fields and state."""

    grid: str = "R2B3"
    levels: int = 10
    backends: tuple[str, ...] = ("icoforge-cpu",)
    steps: int = 5
    warmup: int = 1
    verify: bool = False
    rtol: float = verify_mod.DEFAULT_RTOL
    factory_backend: str = DEFAULT_FACTORY_BACKEND
    seed: int = 0
    only_used_variants: bool = False  # compile only the program variants the steps call (CI)


@dataclasses.dataclass
class GreenlineOptions(GranuleOptions):
    profile_steps: int = 1  # dycore steps of SUBSTEP_MIX with per-program timing (0: none)
    # the timed steps in this many turns on the GPU lock, each with steps/rounds of every variant and
    # of the chained steps: processes timed one after the other then take turns, so a drift of the
    # machine's state (clocks, heat) spreads over all of them instead of landing on whoever is last
    timing_rounds: int = 1
    cold: bool = False  # compile into an empty, temporary icoforge cache
    save_reference: str | None = None  # write the first backend's verification fingerprint here
    save_fields: str | None = None  # write the first backend's verification results, whole (.npz), here
    reference_file: str | None = None  # compare every backend with a recorded fingerprint
    gpu_lock: str | None = None  # hold an exclusive flock on this file while measuring (see gpulock.py)
    substep_fusion: bool = False  # icoforge GPU backends: each substep's calls as one program (backend/runtime/substep.py)
    floors_steps: int = 0  # icoforge backends: dycore steps recorded for the three byte floors (0: none)
    graph_replay: bool = False  # GPU backends: each substep also replayed as one CUDA graph (graph_replay.py)
    granule: str = "dycore"  # which icon4py component (GRANULES)


@dataclasses.dataclass
class GreenlineReport:
    options: GreenlineOptions
    grid: dict[str, Any]
    common_setup_s: dict[str, float]
    fields_cached: bool
    results: list[BackendResult]
    comparisons: list[verify_mod.Comparison]
    environment: dict[str, Any]
    static_fields_key: str | None = None  # what the static fields depend on (merged runs must share it)

    def to_json(self) -> dict[str, Any]:
        return {
            "options": dataclasses.asdict(self.options),
            "grid": self.grid,
            "common_setup_s": self.common_setup_s,
            "static_fields_cached": self.fields_cached,
            "static_fields_key": self.static_fields_key,
            "granule": self.options.granule,
            "component": granule_class(self.options.granule).component,
            "variants": _variants_json(self.options.granule),
            "dycore_step": list(granule_class(self.options.granule).step_mix),  # the key: older reports
            "backends": [r.to_json() for r in self.results],
            "verification": [c.to_json() for c in self.comparisons],
            "environment": self.environment,
        }


def _variants_json(granule: str) -> dict[str, Any]:
    if granule == "dycore":
        return {k: {"at_first_substep": f, "at_last_substep": l} for k, (f, l) in VARIANTS.items()}
    return dict(granule_class(granule).variants)


def environment() -> dict[str, Any]:
    versions = {}
    for dist in (
        "icoforge",
        "gt4py",
        "icon4py-common",
        "icon4py-atmosphere-dycore",
        "icon4py-atmosphere-diffusion",
        "icon4py-atmosphere-tracer_advection",
        "dace",
        "numpy",
        "cupy-cuda13x",
        "cupy-cuda12x",
    ):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        # GT4Py checks every program call's arguments unless Python runs optimized (-O): on small
        # grids that host work is most of a substep, so a figure means little without this flag
        "python_optimized": bool(sys.flags.optimize),
        "versions": versions,
    }
    if gpu := _gpu_name():
        env["gpu"] = gpu
    if schedule := settings.current().schedule:  # icoforge GPU backends use it
        env["icoforge_schedule"] = schedule
    if changed := _settings_off_default():
        env["icoforge_settings"] = changed
    return env


def _settings_off_default() -> str:
    """The ICOFORGE_* variables of this run that change what is timed and differ from the defaults
    (e.g. "ICOFORGE_HOST_GRAPHS=1"): a figure is only read right with them."""
    timed = ("fast_passes", "host_replay", "host_graphs", "streams", "early_gtir", "temporaries")
    now, default = settings.current().to_env(), settings.Settings().to_env()
    return " ".join(f"{v}={now[v]}" for f, v in settings.VARIABLES.items() if f in timed and now[v] != default[v])


def _gpu_name() -> str | None:
    """The current CUDA/ROCm device's name when a GPU backend has loaded CuPy (never imports it)."""
    if "cupy" not in sys.modules:
        return None
    from icoforge.backend.runtime.gpu import device_name

    return device_name()  # None without a device: the name is optional


@contextlib.contextmanager
def cold_icoforge_cache(enabled: bool) -> Iterator[None]:
    """Point icoforge's caches (GT4Py passes, C++ builds) at an empty temporary directory.
    CuPy's kernel cache is not among them: CuPy 14 fixes its directory once per process, at its
    first compile; a cold run sets CUPY_CACHE_DIR to an empty directory for the whole process.

    GT4Py's compile workers are spawned lazily and read the environment when they start;
    `wait_for_compilation()` first shuts down the current pool so that new workers see the new
    cache. GT4Py's own build cache (gtfn, dace) lives per process by default
    (GT4PY_BUILD_CACHE_LIFETIME=session): those backends always compile cold.
    """
    if not enabled:
        yield
        return
    import gt4py.next as gtx

    gtx.wait_for_compilation()
    tmp = tempfile.mkdtemp(prefix="icoforge-cold-")
    try:
        with settings.overridden(cache=tmp):
            try:
                yield
            finally:
                gtx.wait_for_compilation()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_greenline(
    opts: GreenlineOptions,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
    byte_model: Callable[[Any], dict[str, int]] | None = None,
    floor_model: FloorModel | None = None,
) -> GreenlineReport:
    """The greenline (module doc). `byte_model`: bytes of a composed substep sequence for the
    substep-fusion table (the CLI passes perf.model.sequence_bytes; the granule sits below perf).
    `floor_model(granule, steps)`: the compulsory-byte floors of `steps` recorded dycore steps, for
    `opts.floors_steps` (the CLI passes perf.greenline.granule_floors)."""
    from icoforge.grids import load_grid

    progress = progress or (lambda what, done, total: None)
    log = log or (lambda text: None)
    kind = granule_class(opts.granule)
    if kind is not Granule and (unsupported := [o for o in DYCORE_ONLY_OPTIONS if getattr(opts, o)]):
        raise IcoforgeError(f"{', '.join('--' + o.replace('_', '-') for o in unsupported)}: the dycore granule only, not {opts.granule}")
    if opts.levels <= 0:
        raise IcoforgeError(f"levels must be positive, got {opts.levels}")
    if opts.steps < 1 or opts.warmup < 0 or opts.profile_steps < 0 or opts.floors_steps < 0:
        raise IcoforgeError("steps must be >= 1, warm-up, profile and floors steps >= 0")
    if not 1 <= opts.timing_rounds <= opts.steps:
        raise IcoforgeError(f"timing rounds must be between 1 and --steps ({opts.steps}), got {opts.timing_rounds}")
    if opts.floors_steps and floor_model is None:
        raise IcoforgeError("floors steps need a floor model (the CLI passes the byte model's)")
    if not opts.backends:
        raise IcoforgeError("no backend given")
    for name in (*opts.backends, opts.factory_backend):
        check_name(name)  # a typo fails now, not after minutes of compiling
    if opts.graph_replay and (cpu := [b for b in opts.backends if not is_gpu(b)]):
        raise IcoforgeError(f"--graph-replay captures CUDA graphs: {', '.join(cpu)} is not a GPU backend (GPU backends: {', '.join(sorted(GPU_BACKENDS))})")
    lock = None
    if opts.gpu_lock:
        lock = GpuLock(opts.gpu_lock, log)
        lock.check()

    # setup holds the lock shared: no other process measures while this one sets up, and this one
    # measures only when no other is setting up (their GPU transfers and compiling would be timed too)
    who = ", ".join(opts.backends)  # the lock's log lines
    with contextlib.ExitStack() as setup_hold:
        if lock:
            setup_hold.enter_context(lock.setting_up(who))
        common: dict[str, float] = {}
        progress("loading grid", 0, 0)
        t0 = time.perf_counter()
        grid = load_grid(opts.grid, levels=opts.levels, show_progress=False)
        common["grid_load"] = time.perf_counter() - t0

        progress(f"static fields ({opts.factory_backend})", 0, 0)
        t0 = time.perf_counter()
        static = build_static_fields(grid, opts.factory_backend, in_child=True, on_status=lambda s: progress(s, 0, 0))
        common["static_fields"] = time.perf_counter() - t0
        if not static.cached:
            common.update({f"factory_{k}": v for k, v in static.timings.items()})

        t0 = time.perf_counter()
        state = kind.initial_state(static, grid, opts.levels, opts.seed)
        common["initial_state"] = time.perf_counter() - t0

        grid_info = {
            "name": grid.name,
            "path": str(grid.path),
            "cells": grid.num_cells,
            "edges": grid.num_edges,
            "vertices": grid.num_vertices,
            "levels": opts.levels,
            "limited_area": bool(grid.limited_area),
            "dtime_s": dtime_for(grid),
        }
        log(
            f"{grid.name}: {grid.num_cells:,} cells, {grid.num_edges:,} edges, {opts.levels} levels, "
            f"dtime {dtime_for(grid):g} s; static fields {'from cache' if static.cached else 'computed'}"
        )

        inputs = kind.input_description(grid, opts.levels, opts.seed)
        recorded = None
        if opts.reference_file:  # checked before minutes of compiling
            try:
                recorded = golden.load(opts.reference_file)
            except (OSError, ValueError) as e:
                raise IcoforgeError(f"reference {opts.reference_file}: {e}") from e
            if problems := golden.check_inputs(recorded, inputs):
                raise IcoforgeError(f"{opts.reference_file} was recorded for other inputs: " + "; ".join(problems))
            for problem in golden.independence_problems(recorded):  # compared all the same, but said
                log(f"warning: {opts.reference_file} is no reference independent of icoforge: {problem}")

        granules: list[Granule] = []
        with cold_icoforge_cache(opts.cold):
            for name in opts.backends:  # setup (compiling, first calls): the lock held shared
                g = kind(name, grid, static, state, only_used_variants=opts.only_used_variants,
                            substep_fusion=opts.substep_fusion and name in substep_fusion_backends())
                g.setup(progress)
                granules.append(g)
                log(_setup_line(g.result))
            setup_hold.close()
            # inside: a cold cache's generated sources are read for kernel counts
            comparisons = measure(granules, opts, inputs, recorded, lock, progress, log, floor_model)
            if lock:  # measured: the rest of this process (reports, exit) beside no one's measurement
                lock.shared_until_exit(who)
            for g in granules:
                g.result.substep_fusion = g.fusion_summary(byte_model)

    return GreenlineReport(
        options=opts,
        grid=grid_info,
        common_setup_s=common,
        fields_cached=static.cached,
        results=[g.result for g in granules],
        comparisons=comparisons,
        environment=environment(),
        static_fields_key=static_fields_key(grid, opts.factory_backend),
    )


@contextlib.contextmanager
def measuring(lock: GpuLock | None, g: Granule, what: str) -> Iterator[None]:
    """A measurement phase of `g`: under the GPU lock when there is one (its wait is recorded)."""
    if lock is None:
        yield
        return
    with lock.hold(g.name, what) as waited:
        g.result.gpu_lock_wait_s = (g.result.gpu_lock_wait_s or 0.0) + waited
        yield


def measure(
    granules: list[Granule],
    opts: GreenlineOptions,
    inputs: dict[str, Any],
    recorded: dict[str, Any] | None,
    lock: GpuLock | None,
    progress: Progress,
    log: Callable[[str], None],
    floor_model: FloorModel | None = None,
) -> list[verify_mod.Comparison]:
    """The phases after setup, each backend's on the GPU alone under `lock`: verification
    substeps, timed steps, per-program profile, and last (they advance the state) the recorded
    steps of the byte floors. Returns the verification comparisons."""
    sequences: dict[str, list[Any]] = {}

    def sequence(g: Granule) -> list[Any]:
        if g.name not in sequences:
            progress(f"verification substeps: {g.name}", 0, 0)
            with measuring(lock, g, "verification substeps"):
                sequences[g.name] = verify_mod.run_sequence(g)
        return sequences[g.name]

    labels = getattr(granules[0], "verify_sequence", verify_mod.VERIFY_SEQUENCE)  # the granule's calls
    comparisons: list[verify_mod.Comparison] = []
    if recorded is not None:
        for g in granules:
            comparisons.append(golden.compare_golden(sequence(g), recorded, g.name, opts.rtol, labels))
    if opts.verify and len(granules) > 1:
        reference = granules[0]
        for g in granules[1:]:
            comparisons.append(
                verify_mod.compare_runs(g.name, sequence(g), reference.name, sequence(reference), opts.rtol, labels)
            )
    if opts.save_reference:
        first = granules[0]  # its backend and its static fields' factory backend recorded from the objects
        golden.write(opts.save_reference, first, first.static, inputs, sequence(first), environment(), sequence=labels)
        log(f"reference fingerprint of {granules[0].name} written to {opts.save_reference}")
    if opts.save_fields:
        golden.write_fields(opts.save_fields, sequence(granules[0]), labels)
        log(f"verification results of {granules[0].name}, whole fields, written to {opts.save_fields}")

    rounds = opts.timing_rounds
    pauses_of: dict[str, list[dict[str, Any]]] = {g.name: [] for g in granules}
    for r in range(rounds):  # steps/rounds each, then the lock goes to the others; the last round measures the rest
        last = r == rounds - 1
        if r and lock is not None:
            time.sleep(ROUND_PAUSE_S)  # a waiting process takes the lock before this one asks again
        for g in granules:
            what = "warm-up, timed steps" + (f" (round {r + 1} of {rounds})" if rounds > 1 else "") + (", profile" if last and opts.profile_steps else "")
            with instrument.quiet_gc() as pauses, measuring(lock, g, what):  # collect before holding the GPU
                share = _round_share(opts.steps, rounds, r)
                g.time_variants(share, opts.warmup, progress, append=rounds > 1)
                g.time_chained_steps(share, progress)
                if last:
                    _measure_the_rest(g, opts, progress, log)
            pauses_of[g.name].append(pauses.to_json())
            if not last:
                continue
            g.result.gc_pauses = _summed_pauses(pauses_of[g.name])
            # only icoforge's programs carry kernel IR: a peer's floors would all be 0
            if opts.floors_steps and not g.name.startswith("icoforge"):
                log(f"{g.name}: no byte floors (--floors-steps needs an icoforge backend's kernel IR)")
            elif opts.floors_steps and floor_model is not None:
                progress(f"byte floors: {g.name}", 0, 0)
                with measuring(lock, g, "byte floors (recorded steps, copy bandwidth)"):
                    g.result.floors = floor_model(g, opts.floors_steps)
                log(f"{g.name}: floors per dycore step " + ", ".join(f"{k} {v:.2f} ms" for k, v in g.result.floors["floors_ms"].items()))
    return comparisons


def _measure_the_rest(g: Granule, opts: GreenlineOptions, progress: Progress, log: Callable[[str], None]) -> None:
    """After the last round's timed steps, still holding the lock: the GPU's idle fraction, the
    per-program profile and the graph replays."""
    g.measure_busy(opts.steps, progress)  # GPU backends: the idle fraction per substep
    if opts.profile_steps:
        g.profile(opts.profile_steps, progress)
    if opts.graph_replay:  # last: a backend whose work a capture cannot hold may leave errors behind
        g.time_graph_replay(opts.steps, progress)
        for variant, r in g.result.graph_replay.items():
            if "replay_ms" not in r:  # the reason is the finding: which operation, or that the result differs
                log(f"{g.name}, {variant} substep replayed: {r.get('capture_error', 'not bit-identical with a normal call')}")


ROUND_PAUSE_S = 0.5  # between timing rounds: long enough for a process blocked on the lock to get it


def _summed_pauses(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The garbage collector's pauses of several timing rounds (instrument.GcPauses.to_json) as one."""
    if len(rounds) == 1:
        return rounds[0]
    collections = {g: sum(r["collections"].get(g, 0) for r in rounds) for g in rounds[0]["collections"]}
    return {"frozen_objects": max(r["frozen_objects"] for r in rounds), "collections": collections,
            "total_ms": sum(r["total_ms"] for r in rounds), "longest_ms": max(r["longest_ms"] for r in rounds)}  # fmt: skip


def _round_share(steps: int, rounds: int, r: int) -> int:
    """Round r's share of `steps` timed steps (the first rounds take the remainder)."""
    return steps // rounds + (1 if r < steps % rounds else 0)


def _setup_line(r: BackendResult) -> str:
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in r.setup_s.items())
    cache = ""
    if r.cache:
        cache = f"; translation cache {r.cache['translation_cache_hits']}/{r.cache['programs']} hits"
        if jobs := r.cache.get("jobs"):
            j = jobs[0]
            cache += (f"; last job done {j['finished_s']:.1f} s after construction began: {j['program']} "
                      f"(started at {j['started_s']:.1f} s, translated in {j['translate_s']:.1f} s)")  # fmt: skip
    return f"{r.backend}: {parts} ({r.compile_jobs} compile jobs{cache})"
