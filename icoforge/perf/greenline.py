"""Roofline of the greenline granule: every kernel of every icoforge-compiled program in one dycore
step, with compulsory bytes and flops of each call's own arguments (`icoforge roofline greenline`).

How (one backend, data flowing down):

1. the granule as `icoforge greenline` builds it (`icoforge.granule`: static fields, initial state,
   `Granule.setup`: SolveNonhydro, compilation of the variants the steps call, a first call of each
   variant), then one untimed warm-up dycore step (first + 3 x middle + last substep);
2. `steps` instrumented dycore steps: every loaded compiled variant of every program bound on the
   solver is swapped for a wrapper (`Capture`) that synchronises the device, calls it, synchronises
   again and records the program, its positional arguments, the offset provider and the seconds;
   each substep is timed too (the "instrumented step");
3. costs: `cost_of_call` with the variant's kernel IR (`icoforge_artifact.program_ir`, set by our
   executors) and the recorded arguments: bytes and flops per kernel of that very call;
4. time per kernel:
   * GPU: `steps` more dycore steps with a `timing.KernelTimer` on each variant's runtime (CUDA/HIP
     events around each launch) and a queue primer before each program call (see timing.py), so
     each launch is timed on the device alone;
   * CPU (`cpu_timing="kernels"`, the default): the C++ target runs a program's kernels in one C
     call, so each executed kernel is built as a program of its own (timing.single_kernel_program,
     same arguments and temporaries) and, for every recorded call, run alone `repeat` times on that
     call's arguments (median); the fields the kernels write are saved before and restored after,
     so the solver's state is left as the step left it;
   * CPU (`cpu_timing="program"`): one point per program (sum of its calls), labelled program-level;
5. `step_points.aggregate`: per (program, kernel), summed over calls and divided by `steps`.
6. floors (floors.py): the kernel, program and substep compulsory-byte floors of the recorded calls,
   buffers identified by their arrays, substeps by the wrapped `time_step`; `granule_floors` does
   steps 2 and 6 alone for another caller (the side-by-side greenline's granule-latest.json).

The copy-bandwidth ceiling is measured in the same run (timing.py), the FP64 peak as for one
program (measure.py). With `gpu_lock`, steps 2, 4 and the ceiling hold an exclusive flock on that
file (`icoforge.granule.gpulock.GpuLock`, shared with `icoforge greenline --gpu-lock`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.perf import timing
from icoforge.perf.floors import FloorCall, FusionPair, StepFloors, fusion_pairs, interface_buffers, step_floors
from icoforge.perf.model import CallSizes, ProgramCost, program_cost
from icoforge.perf.step_points import Launch, Row, aggregate, totals

BACKENDS = ("icoforge-cpu", "icoforge-cuda", "icoforge-hip")
CPU_TIMING = ("kernels", "program")


# --- recording the program calls of a step ------------------------------------------------------


@dataclasses.dataclass
class Call:
    """One call of a compiled program variant inside the instrumented steps."""

    program: str  # display name of the bound program
    fn: Any  # the loaded variant (the unwrapped callable)
    args: tuple
    offset_provider: Any
    seconds: float  # wall clock between device synchronisations
    launches: list[tuple[str, Any, Any]] = dataclasses.field(default_factory=list)  # GPU: KernelTimer records
    substep: int = -1  # which `time_step` call of the capture it ran in (-1: outside one)

    @property
    def program_ir(self) -> Any:
        return getattr(getattr(self.fn, "icoforge_artifact", None), "program_ir", None)


def bound_pools(solver: Any) -> list[tuple[str, Any]]:
    """(display name, GT4Py CompiledProgramsPool) of every program bound on `solver`; a program
    bound twice is told apart by its attribute, as in `icoforge greenline`'s program table."""
    from icoforge.granule.instrument import find_programs

    programs = find_programs(solver)
    counts: dict[str, int] = {}
    for b in programs:
        counts[b.name] = counts.get(b.name, 0) + 1
    out = []
    for b in programs:
        pool = getattr(b.partial.func, "__dict__", {}).get("_compiled_programs")
        if pool is not None and hasattr(pool, "compiled_programs"):
            out.append((b.name if counts[b.name] == 1 else f"{b.name} ({b.attr.lstrip('_')})", pool))
    return out


class Capture:
    """While active, every loaded compiled variant of the solver's programs is wrapped: device
    synchronisation, the call (optionally after `prime(program)` and with its runtime's
    KernelTimer records collected), synchronisation; one `Call` per call in `calls`. The solver's
    `time_step` is wrapped too: each call is tagged with its substep, and `interface` collects the
    buffers of `time_step`'s arguments (the floors' interface, floors.py)."""

    def __init__(
        self, solver: Any, sync: Callable[[], None], prime: Callable[[str], None] | None = None,
        timers: dict[int, timing.KernelTimer] | None = None,
    ):  # fmt: skip
        self.solver, self.sync, self.prime, self.timers = solver, sync, prime, timers or {}
        self.calls: list[Call] = []
        self._swapped: list[tuple[Any, Any, Any]] = []
        self.substep = -1
        self.interface: set[Any] = set()
        self._time_step: tuple[Any, bool] | None = None

    def variants(self) -> list[tuple[str, Any]]:
        """(program, loaded variant) of every program; a variant seen twice counts once."""
        seen, out = set(), []
        for name, pool in bound_pools(self.solver):
            for fn in pool.compiled_programs.values():
                if id(fn) not in seen:
                    seen.add(id(fn))
                    out.append((name, fn))
        return out

    def _wrap(self, program: str, fn: Any) -> Callable[..., Any]:
        sync, prime, clock = self.sync, self.prime, time.perf_counter
        timer = self.timers.get(id(getattr(fn, "icoforge_runtime", None)))
        calls = self.calls

        def wrapped(*args: Any, offset_provider: Any, **kwargs: Any) -> Any:
            sync()
            if prime is not None:
                prime(program)
            n0 = len(timer.records) if timer is not None else 0
            t0 = clock()
            result = fn(*args, offset_provider=offset_provider, **kwargs)
            sync()
            call = Call(program, fn, args, offset_provider, clock() - t0, substep=self.substep)
            if timer is not None:
                call.launches = timer.records[n0:]
            calls.append(call)
            return result

        return wrapped

    def __enter__(self) -> Capture:
        seen: set[int] = set()
        for name, pool in bound_pools(self.solver):
            for key, fn in list(pool.compiled_programs.items()):
                if id(fn) in seen:
                    continue
                seen.add(id(fn))
                pool.compiled_programs[key] = self._wrap(name, fn)
                self._swapped.append((pool, key, fn))
        original = getattr(self.solver, "time_step", None)
        if original is not None:
            own = "time_step" in vars(self.solver)

            def time_step(*args: Any, **kwargs: Any) -> Any:
                self.substep += 1
                self.interface |= interface_buffers(*args, *kwargs.values())
                return original(*args, **kwargs)

            self.solver.time_step = time_step  # an instance attribute shadows the method
            self._time_step = (original, own)
        return self

    def __exit__(self, *exc: Any) -> None:
        for pool, key, fn in self._swapped:
            pool.compiled_programs[key] = fn
        self._swapped.clear()
        if self._time_step is not None:
            original, own = self._time_step
            if own:
                self.solver.time_step = original
            else:
                del self.solver.time_step
            self._time_step = None


# --- costs ----------------------------------------------------------------------------------------


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


class CostCache:
    """`cost_of_call` per call, computed once per (variant, scalar values, field ranges)."""

    def __init__(self) -> None:
        self._memo: dict[tuple, ProgramCost] = {}

    def __call__(self, call: Call) -> ProgramCost | None:
        pir = call.program_ir
        if pir is None:
            return None
        names = [p.name for p in pir.params]
        if len(call.args) != len(names):
            raise IcoforgeError(f"{call.program}: {len(call.args)} arguments for {len(names)} parameters of {pir.name}")
        sizes = CallSizes.from_args(dict(zip(names, call.args)), call.offset_provider)
        key = (
            id(pir),
            tuple(sorted((k, _hashable(v)) for k, v in sizes.scalars.items())),
            tuple(sorted(sizes.fields.items())),
            tuple(sorted(sizes.tables.items())),
        )
        if key not in self._memo:
            self._memo[key] = program_cost(pir, sizes)
        return self._memo[key]


def floor_calls(calls: list[Call], costs: list[ProgramCost | None]) -> list[FloorCall]:
    """The recorded calls with kernel IR (compiled by icoforge) as floors.py takes them."""
    out = []
    for c, cost in zip(calls, costs):
        if cost is None:
            continue
        names = [p.name for p in c.program_ir.params]
        out.append(FloorCall(c.program, c.program_ir, dict(zip(names, c.args)), c.offset_provider, cost, c.substep))
    return out


def floors_of(calls: list[Call], costs: list[ProgramCost | None], steps: int, interface: set[Any] | None) -> StepFloors:
    """The three floors (floors.py) of recorded calls, per dycore step; calls without kernel IR
    (not compiled by icoforge) are in no floor."""
    return step_floors(floor_calls(calls, costs), steps, interface)


def granule_floors(granule: Any, steps: int = 1, bytes_per_s: float | None = None) -> dict[str, Any]:
    """For benchmarks/granule-latest.json: run `steps` dycore steps of a set-up icoforge granule
    (`icoforge.granule.runner.Granule`; the state advances) with every program call recorded and
    return `{"floors_ms": {"kernel", "program", "substep"}, "floors_bytes": {...},
    "floors_bandwidth_GBps"}` at `bytes_per_s` (default: the copy bandwidth measured now, as the
    roofline does). Only icoforge backends have kernel IR: for a peer backend every floor is 0."""
    capture = Capture(granule.solver, granule.sync)
    with capture:
        granule.timed_dycore_steps(steps)
    costs_of = CostCache()
    floors = floors_of(capture.calls, [costs_of(c) for c in capture.calls], steps, capture.interface)
    if bytes_per_s is None:
        bytes_per_s = (timing.gpu_copy_bandwidth() if granule.gpu else timing.cpu_copy_bandwidth()).bytes_per_s
    return floors.to_json(bytes_per_s)


def kernel_launches(call: Call, cost: ProgramCost, seconds: dict[str, float] | None) -> list[Launch]:
    """The executed kernels of one call with their model costs and `seconds` (None: untimed)."""
    return [
        Launch(call.program, k.name, k.bytes, k.flops, None if seconds is None else seconds.get(k.name))
        for k in cost.kernels
        if k.executed
    ]


def gpu_launches(call: Call, cost: ProgramCost, elapsed: list[tuple[str, float]]) -> list[Launch]:
    """Launches of one call timed with events: matched to the model's kernels by name (by order
    among the executed kernels when a launch's name is not a kernel name)."""
    by_name = {k.name: k for k in cost.kernels}
    executed = [k for k in cost.kernels if k.executed]
    out = []
    for i, (name, secs) in enumerate(elapsed):
        k = by_name.get(name) or (executed[i] if i < len(executed) else None)
        if k is None:
            raise IcoforgeError(f"{call.program}: launch {name!r} matches no kernel of {cost.name}")
        out.append(Launch(call.program, k.name, k.bytes, k.flops, secs))
    return out


# --- CPU: kernels alone ---------------------------------------------------------------------------


def build_kernel_callables(pairs: list[tuple[Any, Any]], status: Callable[[str], None]) -> dict[tuple[int, str], Callable]:
    """(id(program IR), kernel name) -> callable running that kernel alone (same arguments);
    the C++ builds run in parallel threads, one per core."""
    return timing.single_kernel_callables(pairs, os.cpu_count() or 1, status)


def _written_args(call: Call, kernels: list[Any]) -> list[Any]:
    pir = call.program_ir
    written = {f for k in kernels for f in k.fields_written()}
    return [a for p, a in zip(pir.params, call.args) if p.name in written and hasattr(a, "ndarray")]


def time_kernels_alone(
    calls: list[Call], costs: list[ProgramCost | None], repeat: int, status: Callable[[str], None],
) -> list[dict[str, float] | None]:  # fmt: skip
    """Per call: executed kernel -> median seconds run alone on that call's arguments."""
    pairs, seen = [], set()
    for call, cost in zip(calls, costs):
        if cost is None:
            continue
        pir = call.program_ir
        for k in pir.kernels():
            if cost.kernel(k.name).executed and (id(pir), k.name) not in seen:
                seen.add((id(pir), k.name))
                pairs.append((pir, k))
    fns = build_kernel_callables(pairs, status)
    out: list[dict[str, float] | None] = []
    for n, (call, cost) in enumerate(zip(calls, costs)):
        if cost is None:
            out.append(None)
            continue
        status(f"timing kernels alone: call {n + 1}/{len(calls)} ({call.program})")
        pir = call.program_ir
        kernels = [k for k in pir.kernels() if cost.kernel(k.name).executed]
        saved = [(a, np.array(a.ndarray, copy=True)) for a in _written_args(call, kernels)]
        times = {}
        try:
            for k in kernels:
                f = fns[(id(pir), k.name)]
                run = lambda f=f: f(*call.args, offset_provider=call.offset_provider)  # noqa: E731
                times[k.name] = timing.time_call(run, repeat, warmup=1).median
        finally:
            for a, values in saved:  # the step's results, not those of repeated single kernels
                a.ndarray[...] = values
        out.append(times)
    return out


# --- the measurement ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GreenlineRoofline:
    grid: str
    levels: int
    backend: str
    device: str
    steps: int  # instrumented dycore steps
    timing: str  # how kernels were timed (words)
    rows: list[Row]  # per (program, kernel); level "program" for program-level CPU timing
    program_rows: list[Row]  # per program: model totals and measured call times
    not_executed: list[tuple[str, str]]  # (program, kernel) of called variants never executed
    unmodelled: list[Row]  # programs not compiled by icoforge (no kernel IR): time only
    untimed: list[Row]  # program-level timing: the kernels behind the program points (model only)
    variants: list[tuple[str, Any]]  # (program, icoforge artifact) of every compiled variant called
    step_seconds: float  # instrumented dycore step (wall clock, device syncs around each call), per step
    ceiling: timing.Ceiling
    peak_flops: float
    peak_how: str
    floors: StepFloors | None = None  # the three compulsory-byte floors per dycore step
    pairs: list[FusionPair] = dataclasses.field(default_factory=list)  # producer -> consumer inside programs

    @property
    def kernel_seconds(self) -> float | None:
        return totals(self.rows).seconds_per_step

    @property
    def program_seconds(self) -> float:
        return sum(r.seconds_per_step or 0.0 for r in (*self.program_rows, *self.unmodelled))

    @property
    def program_level(self) -> bool:
        return bool(self.rows) and self.rows[0].level == "program"

    def kernel_names(self) -> set[str]:
        """Every kernel with a row (timed, or model only behind program-level points)."""
        return {r.kernel for r in (self.untimed if self.program_level else self.rows)}


@contextlib.contextmanager
def _holding(lock: Any, what: str, backend: str) -> Iterator[None]:
    if lock is None:
        yield
    else:
        with lock.hold(backend, what):
            yield


def measure_greenline(
    grid: str, levels: int, backend: str = "icoforge-cpu", steps: int = 3, repeat: int = 10,
    cpu_timing: str = "kernels", peak_gflops: float | None = None, gpu_lock: str | None = None,
    factory_backend: str | None = None, seed: int = 0, status: Callable[[str], None] = lambda s: None,
) -> GreenlineRoofline:  # fmt: skip
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.gpulock import GpuLock
    from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND
    from icoforge.granule.runner import Granule
    from icoforge.granule.state import initial_state
    from icoforge.grids import load_grid
    from icoforge.perf.measure import cpu_description, gpu_description

    if backend not in BACKENDS:
        raise IcoforgeError(f"greenline roofline backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if cpu_timing not in CPU_TIMING:
        raise IcoforgeError(f"cpu timing must be one of {', '.join(CPU_TIMING)}, got {cpu_timing!r}")
    if levels <= 0 or steps < 1 or repeat < 1:
        raise IcoforgeError("levels, steps and repeat must be positive")
    lock = None
    if gpu_lock:
        lock = GpuLock(gpu_lock, status)
        lock.check()  # a bad path fails now, not after minutes of compiling
    gpu = backend != "icoforge-cpu"

    status(f"loading grid {grid}")
    g_cpu = load_grid(grid, levels=levels, show_progress=False)
    status("static fields")
    static = build_static_fields(g_cpu, factory_backend or DEFAULT_FACTORY_BACKEND, on_status=status)
    state = initial_state(static, levels, seed)
    granule = Granule(backend, g_cpu, static, state, only_used_variants=True)
    granule.setup(lambda what, done, total: status(f"{what} {done}/{total}" if total else what))

    dycore_steps = granule.timed_dycore_steps
    with _holding(lock, "greenline roofline: warm-up, instrumented steps, kernel timing", backend):
        status("warm-up dycore step")
        dycore_steps(1)
        status(f"{steps} instrumented dycore step(s)")
        capture = Capture(granule.solver, granule.sync)
        with capture:
            step_total = dycore_steps(steps)
        calls = capture.calls
        costs_of = CostCache()
        costs = [costs_of(c) for c in calls]
        status("floors: kernel, program, substep")
        floors = floors_of(calls, costs, steps, capture.interface)
        pairs = fusion_pairs(floor_calls(calls, costs), steps)

        launches: list[Launch] = []
        if gpu:
            status(f"{steps} dycore step(s) with events around every launch")
            launches = _gpu_kernel_launches(granule, calls, steps, dycore_steps, costs_of)
            how = "CUDA/HIP events around each launch, queued behind a spin kernel (device time)"
        elif cpu_timing == "kernels":
            per_call = time_kernels_alone(calls, costs, repeat, status)
            for call, cost, secs in zip(calls, costs, per_call):
                if cost is not None:
                    launches += kernel_launches(call, cost, secs)
            how = f"each kernel built alone and run on each call's arguments (median of {repeat})"
        else:
            how = "program-level: one point per program, its calls' wall time; kernels listed untimed"

        status("measuring copy bandwidth")
        ceiling = timing.gpu_copy_bandwidth() if gpu else timing.cpu_copy_bandwidth()
    if gpu:
        device, peak = gpu_description()
        peak_how = "data sheet (vector FP64)"
        if peak is None and peak_gflops is None:
            raise IcoforgeError(f"no FP64 peak known for {device}: pass --peak-gflops")
    else:
        device, peak, peak_how = cpu_description()
    if peak_gflops is not None:
        peak, peak_how = peak_gflops * 1e9, "given"

    program_launches = [
        Launch(c.program, c.program, cost.bytes, cost.flops, c.seconds) for c, cost in zip(calls, costs) if cost is not None
    ]
    program_rows = aggregate(program_launches, steps, level="program")
    unmodelled = aggregate([Launch(c.program, c.program, 0, 0, c.seconds) for c, cost in zip(calls, costs) if cost is None],
                           steps, level="program")  # fmt: skip
    untimed: list[Row] = []
    if not gpu and cpu_timing == "program":
        rows = program_rows
        for c, cost in zip(calls, costs):  # kernels untimed: listed in a table of their own
            if cost is not None:
                launches += kernel_launches(c, cost, None)
        untimed = aggregate(launches, steps)
    else:
        rows = aggregate(launches, steps)
    executed = {(x.program, x.kernel) for x in launches} | {
        (c.program, k.name) for c, cost in zip(calls, costs) if cost is not None for k in cost.kernels if k.executed
    }
    every = {(c.program, k.name) for c in calls if c.program_ir is not None for k in c.program_ir.kernels()}
    variants = list({id(c.fn): (c.program, c.fn.icoforge_artifact) for c in calls if c.program_ir is not None}.values())
    return GreenlineRoofline(
        grid=g_cpu.name, levels=levels, backend=backend, device=device, steps=steps, timing=how, rows=rows,
        program_rows=program_rows, not_executed=sorted(every - executed), unmodelled=unmodelled, untimed=untimed,
        variants=variants,
        step_seconds=step_total / steps, ceiling=ceiling, peak_flops=peak, peak_how=peak_how, floors=floors,
        pairs=pairs,
    )  # fmt: skip


def _gpu_kernel_launches(granule: Any, calls: list[Call], steps: int, dycore_steps: Callable[[int], float],
                         costs_of: CostCache) -> list[Launch]:  # fmt: skip
    """`steps` more dycore steps with events around each launch, each program call queued behind a
    spin kernel a few times as long as the call took in the instrumented steps."""
    import cupy as cp

    wall: dict[str, float] = {}
    for c in calls:
        wall[c.program] = max(wall.get(c.program, 0.0), c.seconds)
    primers: dict[str, Callable[[], None]] = {}

    def spin_seconds(program: str) -> float:
        return min(max(3 * wall.get(program, 0.0), 2e-3), 0.05)

    def prime(program: str) -> None:
        if program not in primers:
            primers[program] = timing.queue_primer(cp, spin_seconds(program))
        primers[program]()

    timers: dict[int, timing.KernelTimer] = {}
    for _, fn in Capture(granule.solver, granule.sync).variants():
        rt = getattr(fn, "icoforge_runtime", None)
        if rt is not None and id(rt) not in timers:
            timers[id(rt)] = timing.KernelTimer().attach(rt)
    capture = Capture(granule.solver, granule.sync, prime=prime, timers=timers)
    try:
        with capture:
            dycore_steps(steps)
        cp.cuda.runtime.deviceSynchronize()
        out: list[Launch] = []
        suspect: list[tuple[str, float, float, float]] = []  # (program, events s, wall s, first launch s)
        for c in capture.calls:
            cost = costs_of(c)
            if cost is None:
                continue
            elapsed = [(n, cp.cuda.get_elapsed_time(s, e) * 1e-3) for n, s, e in c.launches]
            # a call's kernels cannot run longer on the device than the slowest synchronised call
            # of that program took in the instrumented steps: if they do, the events did not
            # bracket the kernels alone (seen on the H200, 2026-11-29: 3.7x the step in total)
            events_s = sum(x for _, x in elapsed)
            if elapsed and events_s > 1.1 * wall[c.program] + 20e-6:
                suspect.append((c.program, events_s, wall[c.program], elapsed[0][1]))
            out += gpu_launches(c, cost, elapsed)
        if suspect:
            worst = max(suspect, key=lambda x: x[1] / x[2])
            first_share = sum(x[3] for x in suspect) / sum(x[1] for x in suspect)
            raise IcoforgeError(
                f"GPU kernel events are not trustworthy here: in {len(suspect)} of {len(capture.calls)} calls "
                f"the kernels' events sum to more than the synchronised call took (worst {worst[0]}: "
                f"{worst[1] * 1e3:.3f} ms of events, call {worst[2] * 1e3:.3f} ms); the first launch of a call "
                f"holds {first_share:.0%} of those events (spin primer seconds per call: "
                f"{statistics.median(spin_seconds(x[0]) for x in suspect) * 1e3:.1f} ms median)"
            )
        return out
    finally:
        for t in timers.values():
            t.detach()
