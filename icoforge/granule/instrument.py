"""Per-program timing inside one SolveNonhydro step, and what each program compiled to.

icon4py binds every GT4Py program of `SolveNonhydro` and its `VelocityAdvection` once, at
construction, as a `functools.partial` around a compiled `Program` (icon4py's `setup_program`).
`find_programs` lists those attributes; `Profiler` swaps each for a wrapper that synchronises the
device, times the call and synchronises again, and swaps the originals back afterwards -- the
step-time measurement runs without wrappers, the per-program table with them (on a GPU the extra
synchronisation per call costs a little; the table reports the instrumented step total it is a
share of).

Each call gets three times, so that host overhead and device time are never confused:
- wall: from a synchronised device to the synchronised end of the call (host + device, serialised);
- host: until the call returns (Python, GT4Py's argument handling, launches; a backend that waits
  for the device inside its call includes that wait);
- device: CUDA/HIP events on the current stream before and after the call (GPU backends only).
  All three GPU backends launch on the default stream (icoforge: CuPy's current stream; gtfn:
  stream 0; dace: `max_concurrent_streams = -1`), so the events bracket the call's kernels.

`DeviceBusy` records only the events (no synchronisation inside a substep). Two sums per substep:
- calls (every backend): the event intervals around program calls. An upper bound of the busy
  time: a start event recorded on an idle device is passed at once, so the host's time inside
  the call before its first launch counts as busy. Only the gaps between calls count as idle.
- kernels (icoforge backends): event intervals around every kernel launch of the programs'
  runtimes (a launch observer on each `icoforge_runtime`), i.e. the kernels alone: 1 - kernels /
  wall is the GPU's real idle fraction, what replaying a substep as a CUDA graph could remove.

Every pair of events here, and in `perf.timing`'s per-kernel timer, is made and recorded by
`backend.events` (`EventClock`, `record_around`).

GT4Py's own metrics collection (`gt4py.next.instrumentation.metrics`, GT4PY_COLLECT_METRICS_LEVEL)
records a "compute" time only for backends that measure it themselves; the wrapper gives one
definition for every backend, ours included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import pathlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from icoforge.backend.codegen.cuda import WIDE_SUFFIX
from icoforge.backend.runtime.events import EventClock, cupy_event_clock, record_around


@dataclasses.dataclass(frozen=True)
class BoundProgram:
    owner: Any  # SolveNonhydro, VelocityAdvection, or an object another granule holds
    attr: str
    name: str  # the GT4Py program's name
    partial: functools.partial


def _program_name(program: Any) -> str | None:
    try:
        return program.definition_stage.definition.__name__
    except AttributeError:
        return None


# objects of these modules held by a granule may bind programs themselves (the tracer advection's
# horizontal and vertical schemes and their limiters: attributes of attributes; the muphys
# granule's SeparateStep, which holds muphys' two programs)
COMPONENT_MODULES = ("icon4py.model.atmosphere.", "icoforge.granule.muphys")


def _is_component(value: Any) -> bool:
    return hasattr(value, "__dict__") and type(value).__module__.startswith(COMPONENT_MODULES)


def find_programs(solver: Any) -> list[BoundProgram]:
    """The GT4Py programs bound on `solver`, its velocity advection, then on the icon4py objects
    they hold (breadth first), each in attribute order."""
    out: list[BoundProgram] = []
    queue = [solver, getattr(solver, "velocity_advection", None)]
    seen: set[int] = set()
    while queue:
        owner = queue.pop(0)
        if owner is None or id(owner) in seen:
            continue
        seen.add(id(owner))
        for attr, value in vars(owner).items():
            if isinstance(value, functools.partial):
                name = _program_name(value.func)
                if name is not None:
                    out.append(BoundProgram(owner, attr, name, value))
            elif _is_component(value):
                queue.append(value)
    return out


def loaded_variants(bound: BoundProgram) -> list[Any]:
    """The loaded callables of the program's compiled variants (those called so far)."""
    pool = getattr(bound.partial.func, "__dict__", {}).get("_compiled_programs")
    if pool is None:
        return []
    return list(getattr(pool, "compiled_programs", {}).values())


def kernel_count(callable_: Any) -> int | None:
    """Kernels in an icoforge-compiled program (None for other backends)."""
    artifact = getattr(callable_, "icoforge_artifact", None)
    if artifact is None:
        return None
    names = getattr(artifact, "kernel_names", None)  # GPU artifact
    if names is not None:
        return len([n for n in names if not n.endswith(WIDE_SUFFIX)])  # not the 64-bit twins
    module_path = getattr(artifact, "module_path", None)  # CPU artifact: the source's header
    if module_path is None:
        return None
    src = pathlib.Path(module_path).parent / f"{artifact.module_name}.cpp"
    try:
        with open(src) as f:
            for line in f:
                if line.startswith("// Kernels:"):
                    listed = line.split(":", 1)[1].strip()
                    return len([k for k in listed.split(",") if k.strip()])
    except OSError:
        return None
    return None


def compile_seconds(callable_: Any) -> float | None:
    """icoforge backends: seconds the program's translation and build took in this run (GT4Py's
    passes are nearly all of a cold compile; a warm one reads them from the cache)."""
    artifact = getattr(callable_, "icoforge_artifact", None)
    if artifact is None:
        return None
    timings = dict(getattr(artifact, "timings", ()))
    return timings.get("translate", 0.0) + timings.get("build", 0.0)


def program_compile_seconds(bound: BoundProgram) -> float | None:
    values = [c for c in (compile_seconds(v) for v in loaded_variants(bound)) if c is not None]
    return sum(values) if values else None


def program_kernels(bound: BoundProgram) -> int | None:
    counts = [c for c in (kernel_count(v) for v in loaded_variants(bound)) if c is not None]
    return max(counts) if counts else None


@dataclasses.dataclass
class ProgramTimes:
    name: str
    attr: str
    seconds: list[float] = dataclasses.field(default_factory=list)  # wall, between device syncs
    host_seconds: list[float] = dataclasses.field(default_factory=list)  # until the call returned
    device_events: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)  # (start, end)

    @property
    def host_median(self) -> float:
        return statistics.median(self.host_seconds) if self.host_seconds else 0.0

    @property
    def calls(self) -> int:
        return len(self.seconds)

    @property
    def total(self) -> float:
        return sum(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else 0.0


class _Wrapping:
    """Base of the context managers that swap every bound program for a wrapper (`_wrap`) while
    active and put the originals back afterwards."""

    programs: list[BoundProgram]

    def _wrap(self, b: BoundProgram) -> Callable[..., Any]:
        raise NotImplementedError

    def __enter__(self):  # noqa: ANN204 (returns the subclass)
        for b in self.programs:
            setattr(b.owner, b.attr, self._wrap(b))
        return self

    def __exit__(self, *exc: Any) -> None:
        for b in self.programs:
            setattr(b.owner, b.attr, b.partial)


def gpu_event_clock(gpu: bool) -> EventClock | None:
    """CuPy events on the current stream for GPU backends; None on the CPU."""
    return cupy_event_clock() if gpu else None


class Profiler(_Wrapping):
    """Context manager: while active, every bound program call is timed (with device syncs)."""

    def __init__(self, solver: Any, sync: Callable[[], None], clock: EventClock | None = None):
        self.programs = find_programs(solver)
        self.sync = sync
        self.clock = clock  # GPU backends: device time per call from events
        self.times: dict[str, ProgramTimes] = {}
        self._names = self._display_names()

    def _display_names(self) -> dict[tuple[int, str], str]:
        # A program bound twice (e.g. with other ranges) is told apart by its attribute.
        counts: dict[str, int] = {}
        for b in self.programs:
            counts[b.name] = counts.get(b.name, 0) + 1
        return {
            (id(b.owner), b.attr): b.name if counts[b.name] == 1 else f"{b.name} ({b.attr.lstrip('_')})"
            for b in self.programs
        }

    def _wrap(self, b: BoundProgram) -> Callable[..., Any]:
        name = self._names[(id(b.owner), b.attr)]
        record = self.times.setdefault(name, ProgramTimes(name, b.attr))
        inner, sync, clock = b.partial, self.sync, time.perf_counter
        events = self.clock.make if self.clock is not None else None

        def timed(*args: Any, **kwargs: Any) -> Any:
            sync()
            pair = events() if events is not None else None
            t0 = clock()
            result = inner(*args, **kwargs) if pair is None else record_around(pair, None, inner, *args, **kwargs)
            t_host = clock()
            sync()
            t1 = clock()
            record.seconds.append(t1 - t0)
            record.host_seconds.append(t_host - t0)
            if pair is not None:
                record.device_events.append(pair)
            return result

        return timed

    def device_seconds(self, times: ProgramTimes) -> list[float]:
        """A program's event intervals (read after the device was synchronised)."""
        if self.clock is None:
            return []
        return [self.clock.seconds(start, end) for start, end in times.device_events]

    def kernels(self) -> dict[str, int | None]:
        return {self._names[(id(b.owner), b.attr)]: program_kernels(b) for b in self.programs}

    def compile_seconds(self) -> dict[str, float | None]:
        return {self._names[(id(b.owner), b.attr)]: program_compile_seconds(b) for b in self.programs}


class DeviceBusy(_Wrapping):
    """Context manager: while active, events bracket every bound program call and, for icoforge
    programs, every kernel launch; nothing is synchronised. After a device synchronisation,
    `busy_seconds()` and `kernel_seconds()` sum the intervals since the last `reset()` (programs
    and kernels run one after the other on the default stream, so the intervals do not overlap)."""

    def __init__(self, solver: Any, clock: EventClock):
        self.programs = find_programs(solver)
        self.clock = clock
        self.pairs: list[tuple[Any, Any]] = []  # around program calls
        self.kernel_pairs: list[tuple[Any, Any]] = []  # around icoforge kernel launches
        runtimes = (getattr(fn, "icoforge_runtime", None) for b in self.programs for fn in loaded_variants(b))
        self.runtimes = list({id(rt): rt for rt in runtimes if rt is not None}.values())

    def _wrap(self, b: BoundProgram) -> Callable[..., Any]:
        inner, make, pairs = b.partial, self.clock.make, self.pairs

        def bracketed(*args: Any, **kwargs: Any) -> Any:
            pair = make()
            result = record_around(pair, None, inner, *args, **kwargs)
            pairs.append(pair)
            return result

        return bracketed

    def _observe(self, kernel: Any, stream: Any, launch: Callable[[], None]) -> None:
        """The runtimes' launch observer: events on the stream the kernel goes to."""
        pair = self.clock.make()
        record_around(pair, stream, launch)
        self.kernel_pairs.append(pair)

    def __enter__(self) -> DeviceBusy:
        super().__enter__()
        for rt in self.runtimes:
            rt.observers.append(self._observe)
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for rt in self.runtimes:
            rt.observers.remove(self._observe)

    def reset(self) -> None:
        self.pairs.clear()
        self.kernel_pairs.clear()

    def busy_seconds(self) -> float:
        return sum(self.clock.seconds(s, e) for s, e in self.pairs)

    def kernel_seconds(self) -> float | None:
        """Sum over kernel launches; None where no icoforge runtime launched (other backends)."""
        if not self.kernel_pairs:
            return None
        return sum(self.clock.seconds(s, e) for s, e in self.kernel_pairs)


# Python's garbage collector during timed steps. A full (generation 2) collection scans every object
# the process holds; after a granule's setup that is grids, fields, GT4Py's programs and caches
# (535k objects for R2B3/10 on icoforge-cpu, whose full collections took 170-260 ms each on the 2-core
# workstation, session 28). One inside a timed sample makes a stall: H200 session 28 had a 488 ms
# sample against a median of 18.3 ms on all four ranks at once (its cause not recorded). So the
# timed phases run with the setup's objects frozen (`gc.freeze`: out of every scan, collected again
# once unfrozen), the collector still on for what the steps allocate, and every collection in them
# recorded.
@dataclasses.dataclass
class GcPauses:
    """Collections of Python's garbage collector while `quiet_gc` was active."""

    frozen_objects: int = 0
    collections: dict[int, int] = dataclasses.field(default_factory=lambda: {0: 0, 1: 0, 2: 0})
    total_ms: float = 0.0
    longest_ms: float = 0.0
    _started: float | None = None

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            ms = (time.perf_counter() - self._started) * 1e3
            self.collections[info["generation"]] += 1
            self.total_ms += ms
            self.longest_ms = max(self.longest_ms, ms)
            self._started = None

    def to_json(self) -> dict[str, Any]:
        return {"frozen_objects": self.frozen_objects, "collections": {str(g): n for g, n in self.collections.items()},
                "total_ms": self.total_ms, "longest_ms": self.longest_ms}  # fmt: skip


@contextlib.contextmanager
def quiet_gc() -> Iterator[GcPauses]:
    """Collect once, freeze what is left for the block (the setup's objects), record the block's
    collections; unfreeze after it, so that a granule dropped later is collected as before. (The
    unfreeze also returns the few hundred tuples CPython 3.12 starts with frozen to the oldest
    generation: a full collection then scans them too, which costs nothing measurable.)"""
    gc.collect()
    gc.freeze()
    pauses = GcPauses(frozen_objects=gc.get_freeze_count())
    gc.callbacks.append(pauses._callback)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(pauses._callback)
        gc.unfreeze()
