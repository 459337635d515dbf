"""The autotuner: a schedule per kernel of one program, found by running it.

1. The program's kernel IR (GT4Py passes, our lowering) and random inputs on the target.
2. The vendor default runs first: its outputs are the reference, its kernels' times the baseline.
3. Every candidate of the search space (`space.py`) is applied to all kernels at once, built,
   run on poisoned outputs and compared with the reference. A candidate whose outputs differ is
   a bug in the code generator: it is reported and never chosen. Then it is timed, kernel by kernel.
4. Each kernel takes the candidate that timed fastest for it, if that beats the default by at
   least `min_gain` (timing noise must not pick schedules).
5. The picks together (per-kernel overrides on the vendor default) are built, verified and timed
   once more as a whole call: the schedule the tuner hands out has been run and checked. Picks
   that are not faster together than the default as a whole call are not handed out (the H200's
   first tuning, 2026-11-30: two kernels each 3-4 % faster alone, the whole call 1 % slower).

Where the kernels run is a `Target`: a GPU through CuPy (events around each launch), or the CPU
emulation of the generated GPU code (`backend.emulate`: same code path, times of the emulation,
useful to check the search and the schedules, not to pick them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from icoforge.backend.schedule import tuned as tuned_db
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule, ScheduleError
from icoforge.errors import IcoforgeError
from icoforge.perf.timing import Stats

Progress = Callable[[str, int, int], None]


# --- where candidates run ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    """Builds, runs and times GPU artifacts: on a GPU, or by CPU emulation."""

    vendor: str
    emulated: bool

    @property
    def xp(self) -> Any:
        if self.emulated:
            import numpy

            return numpy
        import cupy

        return cupy

    def describe(self) -> str:
        if self.emulated:
            return f"CPU emulation of the {self.vendor.upper()} code"
        from icoforge.perf.measure import gpu_description

        return gpu_description()[0]

    def arch(self) -> str:
        if self.emulated:
            return ""
        from icoforge.backend.runtime.gpu_device import device_arch

        return device_arch() or ""

    def load(self, art: Any) -> Any:
        if self.emulated:
            from icoforge.backend.runtime.emulate import load_emulated

            return load_emulated(art)
        return art.load()

    def sync(self) -> None:
        if not self.emulated:
            self.xp.cuda.runtime.deviceSynchronize()

    def time(self, fn: Any, call: Callable[[], Any], repeat: int) -> tuple[dict[str, Stats], Stats]:
        from icoforge.perf import timing

        if self.emulated:
            return timing.time_loaded_host_kernels(fn, call, repeat, warmup=1)
        return timing.time_loaded_gpu_kernels(fn, call, self.xp, repeat, warmup=2)


def target_for_backend(backend: str) -> Target:
    """icoforge-cuda, icoforge-hip, icoforge-emulated-cuda, icoforge-emulated-hip."""
    for vendor in ("cuda", "hip"):
        if backend == f"icoforge-{vendor}":
            return Target(vendor, emulated=False)
        if backend == f"icoforge-emulated-{vendor}":
            return Target(vendor, emulated=True)
    raise IcoforgeError(
        f"tune: backend {backend!r} has no schedules; use icoforge-cuda, icoforge-hip, "
        "or icoforge-emulated-cuda / icoforge-emulated-hip (no GPU needed)"
    )


# --- results -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CandidateRun:
    """One candidate applied to every kernel: status OK, REFUSED (the schedule cannot apply to
    some kernel: ScheduleError before compiling; or the inputs do not fit its stride sets, so it ran
    its per-field-strides variant), DIFFERS (outputs not equal to the default's) or ERROR (build
    or run failed)."""

    id: str
    schedule: Schedule
    status: str
    detail: str = ""
    whole: Stats | None = None
    kernels: Mapping[str, Stats] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class KernelPick:
    kernel: str
    default_s: float
    best_s: float  # the default's time when nothing beat it by min_gain
    best_id: str  # "default" when nothing beat it
    schedule: Schedule


@dataclasses.dataclass(frozen=True)
class TuneResult:
    program: str
    grid: str
    levels: int
    vendor: str
    device: str
    emulated: bool
    min_gain: float
    runs: tuple[CandidateRun, ...]
    picks: tuple[KernelPick, ...]
    schedule: ProgramSchedule  # vendor default + the picks as per-kernel overrides
    default_whole_s: float
    tuned_whole_s: float  # the picks together
    kept_default: bool = False  # the picks together were not faster: `schedule` is the vendor default
    # what the package's database of tuned schedules needs (icoforge/backend/schedule/tuned.py): each
    # kernel's code fingerprint and the grid's horizontal sizes (`python -m icoforge.tune.database`)
    fingerprints: tuple[tuple[str, str], ...] = ()
    dim_sizes: tuple[tuple[str, int], ...] = ()
    static_values: tuple[tuple[str, str], ...] = ()  # `--static-value`s it was tuned with (NAME, text)
    arch: str = ""  # the GPU's architecture ("sm_90"; "" emulated): tuned entries hold across it

    @property
    def differing(self) -> list[CandidateRun]:
        return [r for r in self.runs if r.status == "DIFFERS"]

    def to_json(self) -> dict[str, Any]:
        def stats(s: Stats | None) -> dict | None:
            return None if s is None else {"median_s": s.median, "min_s": s.min, "samples": len(s.samples)}

        return {
            "program": self.program, "grid": self.grid, "levels": self.levels, "vendor": self.vendor,
            "device": self.device, "arch": self.arch, "emulated": self.emulated, "min_gain": self.min_gain,
            "default_whole_s": self.default_whole_s, "tuned_whole_s": self.tuned_whole_s, "kept_default": self.kept_default,
            "schedule": self.schedule.to_json(),
            "fingerprints": dict(self.fingerprints), "dim_sizes": dict(self.dim_sizes),
            "static_values": dict(self.static_values),
            "picks": [{"kernel": p.kernel, "default_s": p.default_s, "best_s": p.best_s, "best": p.best_id,
                       "schedule": p.schedule.to_json()} for p in self.picks],
            "candidates": [{"id": r.id, "schedule": r.schedule.to_json(), "status": r.status, "detail": r.detail,
                            "whole": stats(r.whole), "kernels": {k: stats(s) for k, s in r.kernels.items()}}
                           for r in self.runs],
        }  # fmt: skip


# --- the search ----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Bench:
    """The program's inputs on the target and how to run, check and time one artifact."""

    target: Target
    pir: Any
    args: dict[str, Any]
    offset_provider: Any
    outputs: tuple[str, ...]
    inouts: tuple[str, ...]
    repeat: int

    def __post_init__(self) -> None:
        from icoforge.perf.timing import positional

        self.positional = positional(self.pir, self.args)
        # in-out fields start every checked run from their input values, pure outputs from NaN
        self.pristine = {o: self.args[o].ndarray.copy() for o in self.inouts}
        self.reference: dict[str, Any] | None = None

    def checked_run(self, fn: Any) -> dict[str, Any]:
        """Outputs of one call: in-out fields start from their inputs, pure outputs from the
        suite's poison (a NaN with a private payload, or an int sentinel)."""
        from icoforge.suite.verify import poison_value

        for o in self.outputs:
            a = self.args[o].ndarray
            if o in self.pristine:
                a[...] = self.pristine[o]
            elif (value := poison_value(a.dtype)) is not None:
                a[...] = value
        fn(*self.positional, offset_provider=self.offset_provider)
        self.target.sync()
        return {o: self.args[o].ndarray.copy() for o in self.outputs}

    def _bits(self, a: Any) -> Any:
        """Floats as their bit patterns: equal means bit-identical, and a computed NaN never
        equals the poison (equal_nan would let it pass)."""
        if a.dtype.kind != "f":
            return a
        return self.target.xp.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")

    def check_reference(self) -> None:
        """The default's outputs: each pure output written somewhere, no NaN computed anywhere.
        The tuner compares schedules with the default; a default that is wrong would make every
        candidate that repeats it look right."""
        from icoforge.suite.verify import POISON_BITS

        xp = self.target.xp
        for o, ref in (self.reference or {}).items():
            if ref.dtype.kind != "f":
                continue
            poisoned = self._bits(ref) == POISON_BITS[ref.dtype]
            computed_nan = int((xp.isnan(ref) & ~poisoned).sum())
            if computed_nan:
                raise IcoforgeError(f"tune: the default schedule computes NaN in {o} ({computed_nan} points); "
                                    "check the program with `icoforge run --compare` first")  # fmt: skip
            if o not in self.pristine and bool(poisoned.all()):
                raise IcoforgeError(f"tune: the default schedule writes nothing to {o}; check the program's domain")

    def differences(self, got: dict[str, Any]) -> str:
        """"" when `got` equals the reference bit for bit (the poison where the reference has it)."""
        xp = self.target.xp
        bad = []
        for o, ref in (self.reference or {}).items():
            if not bool(xp.array_equal(self._bits(got[o]), self._bits(ref))):
                finite = xp.isfinite(ref) & xp.isfinite(got[o])
                diff = float(xp.max(xp.abs(got[o] - ref)[finite])) if bool(finite.any()) else float("nan")
                nan_mismatch = bool((xp.isnan(got[o]) != xp.isnan(ref)).any())
                bad.append(f"{o}: max abs diff {diff:.3g}" + ("; NaN at other points than the default's" if nan_mismatch else ""))
        return "; ".join(bad)

    def time(self, fn: Any) -> tuple[dict[str, Stats], Stats]:
        return self.target.time(fn, lambda: fn(*self.positional, offset_provider=self.offset_provider), self.repeat)


def build_candidate(pir: Any, vendor: str, program_schedule: ProgramSchedule) -> Any:
    """The candidate's GPU artifact, or the ScheduleError that refuses it (before compiling)."""
    from icoforge.backend.runtime.gpu import gpu_artifact

    try:
        return gpu_artifact(pir, vendor, program_schedule)
    except ScheduleError as e:
        return e


def run_candidate(bench: _Bench, cid: str, art: Any, schedule: Schedule) -> CandidateRun:
    """Run, check against the reference (the first run is the reference) and time one built
    candidate (`art` from build_candidate)."""
    if isinstance(art, ScheduleError):
        return CandidateRun(cid, schedule, "REFUSED", str(art))
    try:
        fn = bench.target.load(art)
        got = bench.checked_run(fn)
        if getattr(fn, "icoforge_per_field_calls", 0):  # its stride sets did not fit the inputs (gpu.bind_program)
            return CandidateRun(cid, schedule, "REFUSED", "the inputs' layout does not fit its stride sets: the call ran "
                                "its per-field-strides variant, which is not the candidate")  # fmt: skip
        if bench.reference is None:
            bench.reference = got
            bench.check_reference()
        elif detail := bench.differences(got):
            return CandidateRun(cid, schedule, "DIFFERS", detail)
        kernels, whole = bench.time(fn)
    except Exception as e:  # a build or launch failure of this candidate, not of the search
        return CandidateRun(cid, schedule, "ERROR", f"{type(e).__name__}: {e}"[:1000])
    return CandidateRun(cid, schedule, "OK", whole=whole, kernels=kernels)


def pick_per_kernel(runs: list[CandidateRun], min_gain: float) -> list[KernelPick]:
    """For each kernel the default ran, the verified candidate that timed fastest for it, if it
    beats the default's median by at least `min_gain` (a fraction)."""
    default = next(r for r in runs if r.id == "default")
    picks = []
    for kernel, base in default.kernels.items():
        best: CandidateRun = default
        best_s = base.median
        for r in runs:
            if r.status != "OK" or kernel not in r.kernels:
                continue
            t = r.kernels[kernel].median
            if t < best_s and t <= base.median * (1.0 - min_gain):
                best, best_s = r, t
        picks.append(KernelPick(kernel, base.median, best_s, best.id, best.schedule))
    return picks


def tune_program(
    pir: Any, args: dict[str, Any], offset_provider: Any, outputs: tuple[str, ...], inouts: tuple[str, ...],
    target: Target, candidates: Mapping[str, Schedule], *, repeat: int = 20, min_gain: float = 0.03,
    progress: Progress = lambda what, done, total: None, program: str = "", grid: str = "", levels: int = 0,
    jobs: int = 1, measuring: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> TuneResult:  # fmt: skip
    """Tune `pir` (kernel IR) with `args` (GT4Py fields on the target, scalars). `candidates`
    must start with "default" (the vendor default): its outputs are the reference. `jobs`: on a
    GPU, processes that compile the candidates before the runs. `measuring()` is entered around
    the candidates' runs, then around the run of the picks together, not around generating their
    code: e.g. a GPU lock (`icoforge tune --gpu-lock`)."""
    if next(iter(candidates), None) != "default":
        raise IcoforgeError("tune: the candidates must start with 'default' (the reference)")
    bench = _Bench(target, pir, args, offset_provider, outputs, tuple(o for o in inouts if o in outputs), repeat)
    base = VENDOR_DEFAULTS[target.vendor]
    total = len(candidates) + 1
    progress("generating every candidate's code", 0, total)
    built = {cid: build_candidate(pir, target.vendor, ProgramSchedule(default=s)) for cid, s in candidates.items()}
    if not target.emulated and jobs > 1:  # NVRTC for all candidates at once, into CuPy's disk cache
        from icoforge.backend.runtime.gpu import precompile_modules

        progress(f"compiling {len(built)} candidates in {jobs} processes", 0, total)
        precompile_modules([a for a in built.values() if not isinstance(a, ScheduleError)], jobs)
    runs: list[CandidateRun] = []
    with measuring():
        for i, (cid, sched) in enumerate(candidates.items()):
            progress(f"candidate {cid}", i, total)
            runs.append(run_candidate(bench, cid, built[cid], sched))
            if cid == "default" and runs[-1].status != "OK":
                raise IcoforgeError(f"tune: the default schedule itself failed ({runs[-1].status}: {runs[-1].detail})")

    picks = pick_per_kernel(runs, min_gain)
    tuned = ProgramSchedule(default=base, per_kernel={p.kernel: p.schedule for p in picks if p.best_id != "default"})
    progress("the picks together", total - 1, total)
    combined = build_candidate(pir, target.vendor, tuned)
    with measuring():
        final = run_candidate(bench, "tuned", combined, base)
    progress("done", total, total)
    if final.status != "OK":  # each pick passed alone: together they must too
        raise IcoforgeError(f"tune: the combined schedule failed ({final.status}: {final.detail})")
    default_run = runs[0]
    # kernels that win alone may not win together (they share caches and bandwidth), or the wins
    # were noise: only a schedule that is faster as a whole call is handed out
    kept_default = bool(tuned.per_kernel) and final.whole.median >= default_run.whole.median
    return TuneResult(
        program=program or pir.name, grid=grid, levels=levels, vendor=target.vendor, device=target.describe(),
        arch=target.arch(),
        emulated=target.emulated, min_gain=min_gain, runs=tuple(runs), picks=tuple(picks),
        schedule=ProgramSchedule(default=base) if kept_default else tuned,
        default_whole_s=default_run.whole.median, tuned_whole_s=final.whole.median, kept_default=kept_default,
        fingerprints=_fingerprints(pir),
        dim_sizes=tuple(sorted(tuned_db.dim_sizes_of(offset_provider or {}).items())),
    )  # fmt: skip


def _fingerprints(pir: Any) -> tuple[tuple[str, str], ...]:
    """Each kernel's code fingerprint (the database's check that an entry is for today's code)."""
    from icoforge.backend.ir import ir

    return tuple((k.name, tuned_db.kernel_fingerprint(k)) for k in pir.kernels()) if isinstance(pir, ir.ProgramIR) else ()


def tune_suite_program(
    name: str, grid: Any, backend: str = "icoforge-cuda", space: str = "quick", *, repeat: int = 20,
    seed: int = 0, min_gain: float = 0.03, progress: Progress = lambda what, done, total: None, jobs: int = 1,
    static_values: Mapping[str, str] | None = None,
    measuring: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> TuneResult:  # fmt: skip
    """Tune suite program `name` on `grid` (an icoforge grid) with the suite's random inputs and
    static scalars, as `icoforge run` compiles it. `static_values` (NAME -> text) replace static
    scalars, e.g. those of a granule variant (its log prints them where a tuned entry did not apply)."""
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_backend, get_program, make_inputs
    from icoforge.suite.runner import static_variant
    from icoforge.tune.space import candidates

    target = target_for_backend(backend)
    info = get_program(name)
    overrides, statics = static_variant(info, "icon4py", static_values or {})
    progress(f"inputs and kernel IR of {name}", 0, 1)
    if target.emulated:  # laid out as on the GPU (what stride sets take; NumPy's C order would not fit them)
        from icoforge.backend.runtime.emulate import emulated_allocator

        allocator = emulated_allocator()
    else:
        allocator = get_backend(f"icoforge-{target.vendor}")
    args = {**make_inputs(info, grid, seed, allocator=allocator), **overrides}
    pir = suite_program_ir(info, grid, args, statics)
    outputs = tuple(o for o in info.outputs if o in args)
    result = tune_program(
        pir, args, grid.connectivities, outputs, tuple(info.inouts), target,
        candidates(target.vendor, space), repeat=repeat, min_gain=min_gain,
        progress=progress, program=name, grid=grid.name, levels=int(grid.num_levels), jobs=jobs, measuring=measuring,
    )  # fmt: skip
    return dataclasses.replace(result, static_values=tuple(sorted((static_values or {}).items())))


def write_schedule(result: TuneResult, path: str | pathlib.Path) -> ProgramSchedule:
    """Write the tuned schedule to `path` (for `--schedule FILE` / $ICOFORGE_SCHEDULE). An existing
    file keeps its default, its other kernels and programs: this program's kernels are replaced
    (tuning several programs one after the other fills one file)."""
    path = pathlib.Path(path)
    schedule = result.schedule
    if path.exists():
        try:
            old = ProgramSchedule.from_json(json.loads(path.read_text()))
        except (ScheduleError, ValueError, TypeError, AttributeError) as e:
            raise IcoforgeError(f"{path}: exists and is not a schedule file ({e}); choose another --out") from None
        kernels = {p.kernel for p in result.picks}
        kept = {k: s for k, s in old.per_kernel if k not in kernels}
        schedule = dataclasses.replace(old, per_kernel={**kept, **dict(result.schedule.per_kernel)})
    path.write_text(json.dumps(schedule.to_json(), indent=1, sort_keys=True) + "\n")
    return schedule
