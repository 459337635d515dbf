"""Set up and time the granule for one backend: setup phases, per-variant step times, per-program
table.

One `Granule` per backend, all built from the same static fields and the same initial state
(plain NumPy arrays, copied with each backend's allocator). Order of work, identical for every
backend so that their solvers have the same history:

1. setup: device grid (GPU backends), SolveNonhydro construction (icon4py submits its programs'
   compilation to GT4Py's worker pool), waiting for compilation, first call of each variant
   (whatever a backend compiles lazily, at its first call, is compiled here: the later phases
   call the same variants and compile nothing, so `--gpu-lock` can hold the GPU for them alone);
2. optionally `verify.py`'s substeps;
3. timing: per variant, warm-up calls then timed calls, each between device synchronisations;
4. profile: a dycore step of `SUBSTEP_MIX` (first, 3 x middle, last) with every program call
   timed (`instrument.Profiler`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import importlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from icoforge.backend.runtime import compile_pool
from icoforge.backend.frontend import gt4py_compat
from icoforge.errors import IcoforgeError
from icoforge.granule import graph_replay, instrument
from icoforge.granule.backends import is_gpu, resolve_backend
from icoforge.granule.fields import StaticFields
from icoforge.granule.solver import (
    SECOND_ORDER_DIVDAMP_FACTOR,
    GranuleGrid,
    build_solver,
    grid_for_backend,
    solver_inputs,
)
from icoforge.granule.state import initial_state, refill_states, to_states
from icoforge.owners import OwnerSampler
from icoforge.suite import peers
from icoforge.suite.backends import warm_compile_workers

# (at_first_substep, at_last_substep) of SolveNonhydro.time_step
VARIANTS: dict[str, tuple[bool, bool]] = {"first": (True, False), "middle": (False, False), "last": (False, True)}
NDYN_SUBSTEPS = 5
SUBSTEP_MIX = ("first", "middle", "middle", "middle", "last")  # one dycore step of 5 substeps
DTIME_GLOBAL = 90.0  # s
DTIME_LIMITED_AREA = 10.0  # s


def substep_fusion_backends() -> list[str]:
    """The backends whose program calls a SubstepFusion block defers: icoforge's GPU targets and
    their CPU emulation."""
    from icoforge.suite.backends import backend_names

    return [n for n in backend_names() if n.startswith("icoforge-") and n != "icoforge-cpu"]


def substep_fusion_block(backend_name: str) -> Any:
    """A SubstepFusion for the backend's substeps: each sequence composed at first sight and its
    first composed run proven bit-identical to the calls one by one (check); the composed programs
    take the backend's schedule (--schedule: its defaults, fuse_columns, inline)."""
    from icoforge.backend.runtime.substep import SubstepFusion
    from icoforge.suite.backends import schedule_from_env

    if backend_name not in (valid := substep_fusion_backends()):
        raise IcoforgeError(f"substep fusion: backend one of {', '.join(valid)}, got {backend_name!r}")
    return SubstepFusion(schedule=schedule_from_env("hip" if "hip" in backend_name else "cuda"), after=0, check=True)


def dtime_for(grid: Any) -> float:
    return DTIME_LIMITED_AREA if grid.limited_area else DTIME_GLOBAL


def config_from_names(config_class: Any, enums: dict[str, Any], values: dict[str, Any]) -> Any:
    """An icon4py component's config from plain values, enum members given by name."""
    return config_class(**{k: enums[k][v] if k in enums else v for k, v in values.items()})


def device_sync(gpu: bool) -> Callable[[], None]:
    if not gpu:
        return lambda: None
    import cupy as cp

    def sync() -> None:
        cp.cuda.runtime.deviceSynchronize()

    return sync


@dataclasses.dataclass
class ProgramRow:
    name: str
    calls_per_step: float  # per dycore step of SUBSTEP_MIX
    median_ms: float  # per call
    ms_per_step: float
    share: float  # of the instrumented dycore step
    kernels: int | None  # icoforge backends: kernels in the compiled program
    compile_s: float | None = None  # icoforge backends: translation + build of its loaded variants
    host_ms: float | None = None  # median per call: until the call returned (see instrument.py)
    device_ms: float | None = None  # median per call: between events around it (GPU backends)


@dataclasses.dataclass
class BackendResult:
    backend: str
    setup_s: dict[str, float] = dataclasses.field(default_factory=dict)
    compile_jobs: int = 0
    cache: dict[str, Any] = dataclasses.field(default_factory=dict)
    step_ms: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # variant -> timed steps
    # GPU backends: variant -> the device's busy time in each of its substeps (events, no syncs):
    # around program calls (an upper bound), and around kernel launches (icoforge backends only)
    busy_ms: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    kernel_busy_ms: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    programs: list[ProgramRow] = dataclasses.field(default_factory=list)
    profiled_step_ms: float = 0.0  # dycore step (SUBSTEP_MIX) with per-program syncs
    fallbacks: list[str] = dataclasses.field(default_factory=list)
    gpu_lock_wait_s: float | None = None  # --gpu-lock: seconds waited for it before measuring
    substep_fusion: dict[str, Any] | None = None  # SubstepFusion.summary() where it was on
    # whole dycore steps (SUBSTEP_MIX back to back) with one device sync per step, as a model run
    # calls them: host work of one substep may overlap the kernels of the one before
    chained_step_ms: list[float] = dataclasses.field(default_factory=list)
    floors: dict[str, Any] | None = None  # --floors-steps: the byte floors of this backend's kernels
    # --graph-replay: variant -> graph_replay.replay_variant's result (each substep as one CUDA graph)
    graph_replay: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # Python's garbage collections during the timed phases (instrument.quiet_gc)
    gc_pauses: dict[str, Any] | None = None
    # where the backend's configuration comes from and, for icon4py's peers, the options icon4py
    # gave each program it customized (logged by icon4py while constructing: suite/peers.py)
    peer_config: dict[str, Any] | None = None
    # the variants of one step of the granule (the dycore's 5 substeps; the diffusion's one call)
    step_mix: tuple[str, ...] = SUBSTEP_MIX
    # the construction's wall time by whose Python ran (icoforge.owners: ours, GT4Py's, icon4py's, ...)
    construct_owners: dict[str, float] = dataclasses.field(default_factory=dict)
    # icoforge's share of it by function (innermost icoforge frame), the largest first
    construct_our_sites: dict[str, float] = dataclasses.field(default_factory=dict)
    construct_gt4py_sites: dict[str, float] = dataclasses.field(default_factory=dict)  # inclusive

    def median_ms(self, variant: str) -> float:
        return statistics.median(self.step_ms[variant])

    def min_ms(self, variant: str) -> float:
        return min(self.step_ms[variant])

    def dycore_step_ms(self) -> float:
        """Median-based time of one step of the granule: the dycore's NDYN_SUBSTEPS substeps (first +
        middle*3 + last), or the variants of another granule's `step_mix`."""
        return sum(self.median_ms(v) for v in self.step_mix)

    def idle_fraction(self, variant: str) -> float | None:
        """The GPU's idle share of a substep's wall time, 1 - busy / wall (medians), from the kernels'
        busy time where it was measured (icoforge), else from the program calls' (a lower bound)."""
        busy = self.kernel_busy_ms.get(variant) or self.busy_ms.get(variant)
        if not busy:
            return None
        return max(0.0, 1.0 - statistics.median(busy) / self.median_ms(variant))

    def to_json(self) -> dict[str, Any]:
        variants = {
            v: {"median_ms": self.median_ms(v), "min_ms": self.min_ms(v), "samples_ms": self.step_ms[v]}
            for v in self.step_ms
        }
        for v, samples in self.busy_ms.items():
            if v in variants and samples:
                variants[v] |= {"busy_ms": statistics.median(samples), "idle_fraction": self.idle_fraction(v)}
                if kernels := self.kernel_busy_ms.get(v):
                    variants[v]["kernel_busy_ms"] = statistics.median(kernels)
        return {
            "backend": self.backend,
            "setup_s": self.setup_s,
            "compile_jobs": self.compile_jobs,
            "cache": self.cache,
            "variants": variants,
            "dycore_step_ms": self.dycore_step_ms() if all(v in self.step_ms for v in self.step_mix) else None,
            "profiled_dycore_step_ms": self.profiled_step_ms,
            "programs": [dataclasses.asdict(p) for p in self.programs],
            "fallbacks": self.fallbacks,
            "gpu_lock_wait_s": self.gpu_lock_wait_s,
            "substep_fusion": self.substep_fusion,
            "chained_step_ms": statistics.median(self.chained_step_ms) if self.chained_step_ms else None,
            "chained_step_samples_ms": self.chained_step_ms,
            "floors": self.floors,
            "graph_replay": self.graph_replay or None,
            "replayed_step_ms": graph_replay.replayed_step_ms(self.graph_replay, SUBSTEP_MIX) if self.graph_replay else None,
            "gc_pauses": self.gc_pauses,
            "peer_config": self.peer_config,
            "construct_owners": self.construct_owners,
            "construct_our_sites": self.construct_our_sites,
            "construct_gt4py_sites": self.construct_gt4py_sites,
        }


Progress = Callable[[str, int, int], None]  # (what, done, total)


def _no_progress(what: str, done: int, total: int) -> None:
    pass


class Granule:
    """SolveNonhydro + states for one backend. Other icon4py granules (diffusion.py, advection.py)
    subclass it: `construct`, `fresh_states`, `step`, `initial_state` and the class attributes below."""

    kind = "dycore"  # --granule
    component = "SolveNonhydro"  # what `construct` builds (progress lines)
    component_module = "icon4py.model.atmosphere.dycore.solve_nonhydro"  # imported as part of construction
    variants: dict[str, Any] = VARIANTS  # variant -> its arguments (JSON-able)
    step_mix: tuple[str, ...] = SUBSTEP_MIX  # the variants of one step

    def __init__(
        self,
        backend_name: str,
        cpu_grid: Any,
        static: StaticFields,
        state_arrays: dict[str, Any],
        *,
        only_used_variants: bool = False,
        substep_fusion: bool = False,
    ):
        self.only_used_variants = only_used_variants
        self.name = backend_name
        self.backend = resolve_backend(backend_name)
        self.gpu = is_gpu(backend_name)
        self.sync = device_sync(self.gpu)
        self.cpu_grid = cpu_grid
        self.static = static
        self.state_arrays = state_arrays
        self.result = BackendResult(backend_name, step_mix=self.step_mix)
        self.grid: GranuleGrid | None = None
        self.solver: Any = None
        self.states: tuple[Any, Any, Any] | None = None
        self._construct_started_at = 0.0
        self._submitted: list[tuple[float, str]] = []  # (seconds after construction began, task)
        self._nvrtc_s = 0.0
        self._fallbacks_before = 0  # FALLEN_BACK's length when build began
        self.build_window = (0.0, 0.0)  # wall clock (time.time()) when build began and ended
        self.exchange: Any = None  # icon4py's halo exchange runtime; None: single node (decomposed: ranks.py)
        # each substep's program calls composed and fused across programs (backend/runtime/substep.py);
        # composed at first sight, so that compiling them falls in the first calls of setup
        self.fusion = substep_fusion_block(backend_name) if substep_fusion else None
        self._fusing = self.fusion is not None  # off while programs are timed one by one (profile)

    # -- setup ------------------------------------------------------------------------------

    def setup(self, progress: Progress = _no_progress) -> BackendResult:
        """Build (grid on the device, construct, compile), then the first call of each variant."""
        self.build(progress)
        return self.first_calls(progress)

    def build(self, progress: Progress = _no_progress) -> None:
        """The grid on the device, icon4py's SolveNonhydro constructed and every program it submitted
        compiled. No halo exchange happens here: decomposed ranks may build one after another."""
        import gt4py.next as gtx

        from icoforge.granule import backends as gb

        s = self.result.setup_s
        self._fallbacks_before = len(gb.FALLEN_BACK)
        started = time.time()
        # before the grid goes to the device (H200, REGIONAL/80 cold, workers started at
        # construction: the first job still began 6.7 s after its submission, 16.5 s into it; s14)
        warm_compile_workers(self.name, self.backend)
        t0 = time.perf_counter()
        self.grid = self.granule_grid()
        if self.gpu:
            s["device_grid"] = time.perf_counter() - t0

        progress(f"{self.name}: constructing {self.component}", 0, 0)
        before = _ongoing_futures()
        self._construct_started_at = time.time()  # wall clock: compile workers stamp their jobs with it
        # icon4py's modules first: GT4Py reads their programs at import, which is part of the compile
        whose = OwnerSampler()  # entered twice: the import and the constructor, not the copies between
        with whose:
            importlib.import_module(self.component_module)
        # then the static fields icon4py's constructor takes, on the device: copies, not compiling,
        # so neither "construct" nor the cold compile counts them (R2B6/80, H100: 4.5 s)
        t0 = time.perf_counter()
        inputs = self.inputs()
        s["device_fields"] = time.perf_counter() - t0

        def constructing(submitted: int, finished: int, last: str) -> None:  # the total grows as icon4py submits
            what = f"{self.name}: constructing {self.component}, programs compiled/submitted so far; last submitted {last}"
            progress(what, finished, submitted)

        with (
            compile_pool.recorded_submissions(constructing) as submitted,
            peers.recording_options() as options,
            whose,
        ):
            self.solver = self.construct(inputs)
        self.result.construct_owners = whose.seconds
        self.result.construct_our_sites = whose.our_sites()
        self.result.construct_gt4py_sites = whose.gt4py_sites()
        self.result.peer_config = peers.peer_config(self.name, options)
        s["construct"] = whose.wall_s
        self._submitted = [(t - self._construct_started_at, name) for t, name in submitted]

        jobs = [f for f in _ongoing_futures() if f not in before]
        self.result.compile_jobs = len(jobs)
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="icoforge-nvrtc") as nvrtc:
            # NVRTC for each GPU module whose job is done, while the slower jobs still run: CuPy
            # keeps the compiled module in this process, so the first calls only load it
            modules: list[concurrent.futures.Future] = []
            pending = set(jobs)
            while pending:
                progress(f"{self.name}: compiling", len(jobs) - len(pending), len(jobs))
                done, pending = concurrent.futures.wait(pending, timeout=0.5, return_when=concurrent.futures.FIRST_COMPLETED)
                modules += [nvrtc.submit(_compile_gpu_module, f) for f in done if self.gpu]
            progress(f"{self.name}: compiling", len(jobs), len(jobs))
            gtx.wait_for_compilation()  # raises the first compilation error, if any
            self._nvrtc_s = sum(f.result() for f in modules)
        s["compile"] = time.perf_counter() - t0
        self.build_window = (started, time.time())

    def inputs(self) -> dict[str, Any]:
        """The static arguments `construct` hands icon4py's constructor, fields on this backend's device."""
        assert self.grid is not None
        return solver_inputs(self.grid, self.static, self.backend)

    def construct(self, inputs: dict[str, Any]) -> Any:
        """icon4py's granule object for this backend on `self.grid` (submits its compilation)."""
        assert self.grid is not None
        return build_solver(
            self.grid, self.static, self.backend, only_used_variants=self.only_used_variants, exchange=self.exchange,
            inputs=inputs,
        )  # fmt: skip

    @classmethod
    def initial_state(cls, static: StaticFields, grid: Any, levels: int, seed: int) -> dict[str, Any]:
        """The initial state's arrays, shared by every backend (state.py; another granule adds its
        own inputs, e.g. advection.py's mass fluxes and tracer)."""
        return initial_state(static, levels, seed)

    @classmethod
    def input_description(cls, grid: Any, levels: int, seed: int) -> dict[str, Any]:
        """What the verification steps' inputs depend on (recorded fingerprints must match it)."""
        from icoforge.granule import golden

        return golden.input_description(grid, levels, seed, NDYN_SUBSTEPS, dtime_for(grid))

    def first_calls(self, progress: Progress = _no_progress) -> BackendResult:
        """One call of each substep variant on fresh states (after `build`); the result so far."""
        from icoforge.granule import backends as gb

        s = self.result.setup_s
        self.states = self.fresh_states()
        t0 = time.perf_counter()
        for i, variant in enumerate(self.variants):
            progress(f"{self.name}: first call ({variant})", i, len(self.variants))
            self.step(variant)
        self.sync()
        s["first_calls"] = time.perf_counter() - t0
        self.result.fallbacks = [f"{p}: {r}" for p, r in gb.FALLEN_BACK[self._fallbacks_before:]]
        self.result.cache = self._cache_info()
        return self.result

    def granule_grid(self) -> GranuleGrid:
        """The grid on the device this backend needs (a decomposed granule gives its rank's part)."""
        return grid_for_backend(self.cpu_grid, self.gpu)

    def fresh_states(self) -> tuple[Any, Any, Any]:
        from icon4py.model.common import model_backends

        assert self.grid is not None
        return to_states(self.state_arrays, self.grid.icon_grid, model_backends.get_allocator(self.backend))

    def refill_states(self, states: tuple[Any, Any, Any]) -> None:
        """`states` back to the initial values, in their own buffers (a captured graph holds them)."""
        refill_states(states, self.fresh_states())

    def _cache_info(self) -> dict[str, Any]:
        """icoforge backends: how many programs came from the translation / build caches."""
        hits = builds = loaded = 0
        build_s = translate_s = 0.0
        jobs = []  # (finished, started, program, translate s): seconds after construction began
        for b in instrument.find_programs(self.solver):
            for callable_ in instrument.loaded_variants(b):
                artifact = getattr(callable_, "icoforge_artifact", None)
                if artifact is None:
                    continue
                timings = dict(getattr(artifact, "timings", ()))
                loaded += 1
                hits += int(timings.get("translation_cache_hit", 0.0) > 0)
                build_s += timings.get("build", 0.0)
                translate_s += timings.get("translate", 0.0)
                builds += int(timings.get("build", 0.0) > 0)
                if "started_at" in timings:
                    t0 = self._construct_started_at
                    jobs.append((timings["finished_at"] - t0, timings["started_at"] - t0, artifact.program_name, timings.get("translate", 0.0)))
        if not loaded:
            return {}
        info: dict[str, Any] = {
            "programs": loaded,
            "translation_cache_hits": hits,
            "cpp_builds": builds,
            "translate_s": round(translate_s, 3),
            "build_s": round(build_s, 3),
            "nvrtc_s": round(self._nvrtc_s, 3),  # in this process, during the compile phase
            "submitted_s": [round(t, 2) for t, _ in self._submitted],  # seconds after construction began
        }
        # The compile's timeline (seconds after construction began), last finished first: the
        # first entries are its critical path.
        info["jobs"] = [
            {"program": name, "started_s": round(start, 2), "finished_s": round(end, 2), "translate_s": round(tr, 2)}
            for end, start, name, tr in sorted(jobs, reverse=True)
        ]
        return info

    # -- stepping ---------------------------------------------------------------------------

    def step(self, variant: str, states: tuple[Any, Any, Any] | None = None) -> None:
        first, last = VARIANTS[variant]
        prognostic, diagnostic, prep_adv = states or self.states
        with self.fusion if self._fusing else contextlib.nullcontext():
            self._time_step(first, last, prognostic, diagnostic, prep_adv)

    def fusion_summary(self, byte_model: Callable[[Any], dict[str, int]] | None = None) -> dict[str, Any] | None:
        """The substep fusion's summary, with `byte_model(sequence)` of each composed sequence
        merged in (the lab's byte model: perf.model.sequence_bytes); None without substep fusion.
        Not in `step`: that is timed."""
        if self.fusion is None:
            return None
        summary = self.fusion.summary()
        for entry, seq in zip(summary["sequences"], self.fusion.sequences()):
            entry.update(byte_model(seq) if byte_model is not None else {})
        return summary

    def _time_step(self, first: bool, last: bool, prognostic: Any, diagnostic: Any, prep_adv: Any) -> None:
        assert self.grid is not None
        self.solver.time_step(
            diagnostic_state_nh=diagnostic,
            prognostic_states=prognostic,
            prep_adv=prep_adv,
            second_order_divdamp_factor=SECOND_ORDER_DIVDAMP_FACTOR,
            dtime=dtime_for(self.grid),
            ndyn_substeps_var=NDYN_SUBSTEPS,
            at_initial_timestep=False,
            lprep_adv=True,
            at_first_substep=first,
            at_last_substep=last,
        )

    def time_variants(self, steps: int, warmup: int, progress: Progress = _no_progress, append: bool = False) -> None:
        """icon4py's benchmark loop: the same variant again and again on the same state pair
        (`append`: the samples join those of an earlier round, after this round's own warm-up)."""
        total = len(self.variants) * (steps + warmup)
        done = 0
        for variant in self.variants:
            samples: list[float] = list(self.result.step_ms.get(variant, [])) if append else []
            for i in range(warmup + steps):
                progress(f"{self.name}: timing ({variant})", done, total)
                self.sync()
                t0 = time.perf_counter()
                self.step(variant)
                self.sync()
                if i >= warmup:
                    samples.append((time.perf_counter() - t0) * 1e3)
                done += 1
            self.result.step_ms[variant] = samples
        progress(f"{self.name}: timing", total, total)

    def time_chained_steps(self, steps: int, progress: Progress = _no_progress) -> None:
        """Whole dycore steps, one device sync per step (after `time_variants`' warm-up): the figure
        a model run sees, where a substep's host work may overlap the previous substep's kernels
        (`time_variants` syncs around every substep)."""
        for i in range(steps):
            progress(f"{self.name}: {self.kind} steps, one sync each", i, steps)
            self.sync()
            t0 = time.perf_counter()
            for variant in self.step_mix:
                self.step(variant)
            self.sync()
            self.result.chained_step_ms.append((time.perf_counter() - t0) * 1e3)
        progress(f"{self.name}: {self.kind} steps, one sync each", steps, steps)

    def time_graph_replay(self, steps: int, progress: Progress = _no_progress) -> None:
        """GPU backends: each substep variant captured as one CUDA graph, checked bit for bit against
        a normal call and replayed `steps` times (granule/graph_replay.py)."""
        for i, variant in enumerate(self.variants):
            progress(f"{self.name}: substeps replayed as CUDA graphs", i, len(self.variants))
            self.result.graph_replay[variant] = graph_replay.replay_variant(self, variant, steps)
        progress(f"{self.name}: substeps replayed as CUDA graphs", len(self.variants), len(self.variants))

    def timed_dycore_steps(self, n: int, on_step: Callable[[int], None] | None = None) -> float:
        """Run `n` dycore steps of SUBSTEP_MIX; seconds spent in the substeps, each substep between
        device synchronisations (so host work between substeps is not counted)."""
        total_s = 0.0
        for i in range(n):
            if on_step is not None:
                on_step(i)
            for variant in self.step_mix:
                self.sync()
                t0 = time.perf_counter()
                self.step(variant)
                self.sync()
                total_s += time.perf_counter() - t0
        return total_s

    def measure_busy(self, steps: int, progress: Progress = _no_progress) -> None:
        """GPU backends: the device's busy time per substep variant, from events around every program
        call and no synchronisation inside the substep (compare with `time_variants`' wall times)."""
        clock = instrument.gpu_event_clock(self.gpu)
        if clock is None:
            return
        with self.unfused(), instrument.DeviceBusy(self.solver, clock) as busy:
            for i, variant in enumerate(self.variants):
                progress(f"{self.name}: device busy time ({variant})", i, len(self.variants))
                calls, kernels = [], []
                for _ in range(steps):
                    self.sync()
                    busy.reset()
                    self.step(variant)
                    self.sync()
                    calls.append(busy.busy_seconds() * 1e3)
                    if (k := busy.kernel_seconds()) is not None:
                        kernels.append(k * 1e3)
                self.result.busy_ms[variant] = calls
                if kernels:
                    self.result.kernel_busy_ms[variant] = kernels

    @contextlib.contextmanager
    def unfused(self) -> Iterator[None]:
        """Program calls run one by one inside (per-program timers need them so)."""
        fusing, self._fusing = self._fusing, False
        try:
            yield
        finally:
            self._fusing = fusing

    def profile(self, rounds: int, progress: Progress = _no_progress) -> None:
        """Per-program times over `rounds` dycore steps of SUBSTEP_MIX."""
        profiler = instrument.Profiler(self.solver, self.sync, instrument.gpu_event_clock(self.gpu))
        with self.unfused(), profiler:
            total_s = self.timed_dycore_steps(
                rounds, on_step=lambda r: progress(f"{self.name}: per-program profile", r, rounds)
            )
        progress(f"{self.name}: per-program profile", rounds, rounds)
        step_ms = total_s * 1e3 / rounds
        kernels = profiler.kernels()
        compile_s = profiler.compile_seconds()
        rows = []
        for name, t in profiler.times.items():
            if not t.calls:
                continue
            ms = t.total * 1e3 / rounds
            device = profiler.device_seconds(t)
            rows.append(
                ProgramRow(
                    name=name,
                    calls_per_step=t.calls / rounds,
                    median_ms=t.median * 1e3,
                    ms_per_step=ms,
                    share=ms / step_ms if step_ms else 0.0,
                    kernels=kernels.get(name),
                    compile_s=compile_s.get(name),
                    host_ms=t.host_median * 1e3,
                    device_ms=statistics.median(device) * 1e3 if device else None,
                )
            )
        rows.sort(key=lambda r: -r.ms_per_step)
        self.result.programs = rows
        self.result.profiled_step_ms = step_ms


def _compile_gpu_module(job: concurrent.futures.Future) -> float:
    """NVRTC/hiprtc for a finished job's GPU module, kept by CuPy in this process (seconds; 0 for
    a failed job, whose error `wait_for_compilation` raises, or an artifact that is no GPU one)."""
    from icoforge.backend.runtime.gpu import GPUArtifact, compile_module

    if job.exception() is not None:
        return 0.0
    artifact = job.result()
    if not isinstance(artifact, GPUArtifact):
        return 0.0
    return compile_module((artifact.module_source, artifact.options))


def _ongoing_futures() -> list[Any]:
    """GT4Py's in-flight compilation futures (internal registry; empty if it moved)."""
    return gt4py_compat.ongoing_compilations()
