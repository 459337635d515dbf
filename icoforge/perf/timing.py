"""Timing: whole programs, each kernel, and the machine's copy bandwidth, measured the same way.

* Whole program: wall clock around `call()` with a device synchronisation (any target).
* Per kernel on a GPU: CUDA/HIP events around each `rt.launch(...)` of the generated host plan,
  the launches queued behind a short spin kernel so that the events time the GPU, not Python.
  `KernelTimer.attach(rt)` adds a launch observer to one loaded program's `Runtime` instance
  (`Runtime.observers`), so production calls of other programs pay nothing; the events are those
  of `backend.events`, as the granule's per-program timers; NVTX ranges named after the short
  kernel names when `cupy.cuda.nvtx` is available.
* Per kernel on the CPU: the C++ target runs all kernels in one C call, so each kernel is built
  as a program of its own (same arguments, same temporaries) and timed alone.
* Ceiling: a device-to-device copy (read + write bytes) -- CuPy on a GPU, threaded NumPy on the CPU.
CuPy is imported only on GPU paths.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from icoforge.backend.ir import ir
from icoforge.backend.codegen.cuda import WIDE_SUFFIX
from icoforge.backend.runtime.events import EventClock, event_clock, record_around


@dataclasses.dataclass(frozen=True)
class Stats:
    """Seconds over repetitions."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def min(self) -> float:
        return min(self.samples) if self.samples else float("nan")

    @property
    def max(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    @property
    def spread(self) -> float:
        """(max - min) / median: how noisy the measurement was."""
        m = self.median
        return (self.max - self.min) / m if m and m == m else float("nan")


def time_call(call: Callable[[], Any], repeat: int = 10, warmup: int = 1, sync: Callable[[], None] = lambda: None) -> Stats:
    for _ in range(warmup):
        call()
    sync()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        sync()
        out.append(time.perf_counter() - t0)
    return Stats(tuple(out))


def positional(program: ir.ProgramIR, args: Mapping[str, Any]) -> list[Any]:
    """GT4Py's positional order (what our artifacts' callables take); scalars as Python values."""
    return [args[p.name].item() if isinstance(p, ir.Param) and hasattr(args[p.name], "item") else args[p.name] for p in program.params]


# --- GPU: events around each launch ---------------------------------------------------------------


def _nvtx():
    try:
        from cupy.cuda import nvtx

        return nvtx if getattr(nvtx, "available", True) else None
    except Exception:
        return None


def _kernel_name(kernel: Any) -> str:
    """The IR kernel's name: the 64-bit twin of an index_bits="auto" kernel is timed as the kernel.
    CuPy kernels carry `.name`; the CPU emulation's ctypes functions are named `emu_<kernel>`."""
    name = getattr(kernel, "name", None) or getattr(kernel, "__name__", "").removeprefix("emu_") or repr(kernel)
    return name.removesuffix(WIDE_SUFFIX)  # kernel names end in _k<number>: only twins end in the suffix


def _by_kernel(records: Iterable[tuple[str, float]]) -> dict[str, Stats]:
    """(kernel name, seconds) of every launch -> seconds per launch by kernel name."""
    out: dict[str, list[float]] = {}
    for name, seconds in records:
        out.setdefault(name, []).append(seconds)
    return {n: Stats(tuple(v)) for n, v in out.items()}


class KernelTimer:
    """Events around every launch of one `Runtime` (icoforge.backend.runtime.gpu), as one of its launch
    observers. Off until attached."""

    def __init__(self, nvtx: bool = True):
        self.records: list[tuple[str, Any, Any]] = []
        self._nvtx = _nvtx() if nvtx else None
        self._rt = None
        self._clock: EventClock | None = None  # the attached runtime's events; kept after detach

    def attach(self, rt: Any) -> KernelTimer:
        self._clock = event_clock(rt.cp)
        rt.observers.append(self._observe)
        self._rt = rt
        return self

    def _observe(self, kernel: Any, stream: Any, launch: Callable[[], None]) -> None:
        name = _kernel_name(kernel)
        pair = self._clock.make()
        # the stream the kernel goes to (CuPy's current one unless the runtime has its own):
        # an event on another stream would not wait for the work queued before the kernel
        if stream is None:
            stream = self._rt.cp.cuda.get_current_stream()
        if self._nvtx is not None:
            self._nvtx.RangePush(name)
        record_around(pair, stream, launch)
        if self._nvtx is not None:
            self._nvtx.RangePop()
        self.records.append((name, *pair))

    def detach(self) -> None:
        if self._rt is not None and self._observe in self._rt.observers:
            self._rt.observers.remove(self._observe)
        self._rt = None

    def clear(self) -> None:
        self.records.clear()

    def per_kernel(self) -> dict[str, Stats]:
        """Seconds per launch, by kernel name (synchronises on the last event)."""
        if not self.records:
            return {}
        self.records[-1][2].synchronize()
        return _by_kernel((name, self._clock.seconds(start, end)) for name, start, end in self.records)


def time_gpu_kernels(
    program: ir.ProgramIR, args: Mapping[str, Any], offset_provider: Any, vendor: str, schedule: Any = None,
    repeat: int = 20, warmup: int = 2,
) -> tuple[dict[str, Stats], Stats]:  # fmt: skip
    """(per-kernel seconds, whole-call seconds) of `program` built for the GPU; args on the device."""
    import cupy as cp

    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.schedule.schedule import default_program_schedule

    from icoforge.backend.schedule.tuned import dim_sizes_of

    schedule = schedule or default_program_schedule(vendor)
    # at the grid's sizes, as a GT4Py call compiles it (the fusions' column-count rule)
    fn = gpu_artifact(program, vendor, schedule, dim_sizes=dim_sizes_of(offset_provider)).load()
    pos = positional(program, args)
    return time_loaded_gpu_kernels(fn, lambda: fn(*pos, offset_provider=offset_provider), cp, repeat, warmup)


def time_loaded_gpu_kernels(
    fn: Any, call: Callable[[], Any], cp: Any, repeat: int = 20, warmup: int = 2
) -> tuple[dict[str, Stats], Stats]:
    """(per-kernel seconds, whole-call seconds) of a loaded GPU program `fn` run by `call()`."""
    sync = cp.cuda.runtime.deviceSynchronize
    whole = time_call(call, repeat, warmup, sync)
    prime = queue_primer(cp, min(max(3 * whole.median, 2e-3), 0.05))
    timer = KernelTimer().attach(fn.icoforge_runtime)
    try:
        for _ in range(repeat):
            prime()
            call()
        sync()
        return timer.per_kernel(), whole
    finally:
        timer.detach()


class HostKernelTimer(KernelTimer):
    """Wall clock around every launch of one `Runtime` whose launches run on the host (the CPU
    emulation of the GPU code: `backend.emulate`); records are (kernel, seconds)."""

    def __init__(self):
        super().__init__(nvtx=False)

    def attach(self, rt: Any) -> HostKernelTimer:
        rt.observers.append(self._observe)
        self._rt = rt
        return self

    def _observe(self, kernel: Any, stream: Any, launch: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        launch()
        self.records.append((_kernel_name(kernel), time.perf_counter() - t0))

    def per_kernel(self) -> dict[str, Stats]:
        return _by_kernel(self.records)


def time_loaded_host_kernels(fn: Any, call: Callable[[], Any], repeat: int = 10, warmup: int = 1) -> tuple[dict[str, Stats], Stats]:
    """`time_loaded_gpu_kernels` for a program whose kernels run on the host (CPU emulation)."""
    whole = time_call(call, repeat, warmup)
    timer = HostKernelTimer().attach(fn.icoforge_runtime)
    try:
        for _ in range(repeat):
            call()
        return timer.per_kernel(), whole
    finally:
        timer.detach()


_SPIN = r"""extern "C" __global__ void icf_spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) { }
}"""


def queue_primer(cp: Any, seconds: float) -> Callable[[], None]:
    """A call that occupies the GPU for about `seconds` (one thread spinning on its clock).

    Why: on an idle GPU an event recorded before a launch fires at once, while the kernel starts
    only when Python has finished submitting it (tens of microseconds, as long as a small kernel),
    so events would time the host. Queued behind a spin, each kernel's events bracket it on the
    GPU alone. The clock rate is calibrated with events (no device attribute needed). Falls back
    to doing nothing if the spin kernel cannot be built."""
    import warnings

    try:
        spin = cp.RawKernel(_SPIN, "icf_spin")
        start, end = cp.cuda.Event(), cp.cuda.Event()
        probe = 10**6
        spin((1,), (1,), (np.int64(probe),))  # compile and warm up
        start.record()
        spin((1,), (1,), (np.int64(probe),))
        end.record()
        end.synchronize()
        per_s = probe / max(cp.cuda.get_elapsed_time(start, end) * 1e-3, 1e-6)
        cycles = np.int64(per_s * seconds)
    except Exception as e:  # timing still works, small kernels then include launch latency
        warnings.warn(f"no queue primer ({type(e).__name__}: {e}); kernel times include launch latency", stacklevel=2)
        return lambda: None
    return lambda: spin((1,), (1,), (cycles,))


# --- CPU: one module per kernel -------------------------------------------------------------------


def single_kernel_program(program: ir.ProgramIR, kernel: ir.Kernel) -> ir.ProgramIR:
    """`program` running only `kernel` (unconditionally): same parameters, temporaries, tables."""
    return dataclasses.replace(program, steps=(kernel,))


def single_kernel_callables(
    pairs: Iterable[tuple[ir.ProgramIR, ir.Kernel]], workers: int = 1, status: Callable[[str], None] = lambda _: None
) -> dict[tuple[int, str], Callable]:
    """(id(program), kernel name) -> callable(*positional_args, offset_provider=...) running that
    kernel alone: one C++ module per distinct single-kernel program, built in `workers` threads
    (each a compiler process) and cached on disk."""
    from icoforge.backend.runtime.build import build_cpu_module
    from icoforge.backend.codegen.cpp import render_program_cpp
    from icoforge.backend.runtime.workflow import CPUArtifact, module_name_for

    sources: dict[str, tuple[str, str]] = {}  # module name -> (source, program name)
    module_of: dict[tuple[int, str], str] = {}
    for program, k in pairs:
        sub = single_kernel_program(program, k)
        name = module_name_for(sub)
        module_of[(id(program), k.name)] = name
        if name not in sources:
            sources[name] = (render_program_cpp(sub, name), program.name)
    status(f"building {len(sources)} single-kernel C++ modules")
    with cf.ThreadPoolExecutor(max(1, min(len(sources), workers))) as pool:
        built = dict(zip(sources, pool.map(lambda n: build_cpu_module(sources[n][0], n)[0], sources)))
    loaded = {n: CPUArtifact(str(built[n]), n, sources[n][1]).load() for n in sources}
    return {key: loaded[name] for key, name in module_of.items()}


def cpu_kernel_callables(program: ir.ProgramIR, kernels: Sequence[str] | None = None) -> dict[str, Callable]:
    """name -> callable(*positional_args, offset_provider=...) running that kernel alone."""
    chosen = [(program, k) for k in program.kernels() if kernels is None or k.name in kernels]
    return {name: fn for (_, name), fn in single_kernel_callables(chosen).items()}


def time_cpu_kernels(
    program: ir.ProgramIR, args: Mapping[str, Any], offset_provider: Any, kernels: Sequence[str] | None = None,
    repeat: int = 10, warmup: int = 1,
) -> dict[str, Stats]:  # fmt: skip
    """Seconds of each kernel run alone on the CPU (outputs are overwritten: pass scratch args)."""
    pos = positional(program, args)
    calls = cpu_kernel_callables(program, kernels)
    return {n: time_call(lambda f=f: f(*pos, offset_provider=offset_provider), repeat, warmup) for n, f in calls.items()}


# --- copy bandwidth ceiling ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Ceiling:
    bytes_per_s: float  # read + write bytes of the best copy
    how: str


def cpu_copy_bandwidth(nbytes: int = 256 << 20, repeat: int = 8, threads: int | None = None) -> Ceiling:
    """Best read+write bandwidth of a NumPy copy split over `threads` (np.copyto releases the GIL),
    arrays far larger than any cache."""
    threads = threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or os.cpu_count() or 1
    n = nbytes // 8
    src, dst = np.ones(n), np.empty(n)
    bounds = np.linspace(0, n, threads + 1).astype(int)
    chunks = [(dst[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    with cf.ThreadPoolExecutor(threads) as pool:

        def copy() -> None:
            list(pool.map(lambda c: np.copyto(*c), chunks))

        stats = time_call(copy, repeat, warmup=1)
    return Ceiling(2 * n * 8 / stats.min, f"NumPy copy, {threads} threads, 2 x {n * 8 >> 20} MiB")


def gpu_copy_bandwidth(nbytes: int = 1 << 30, repeat: int = 10) -> Ceiling:
    """Best read+write bandwidth of a CuPy device-to-device copy, timed with events."""
    import cupy as cp

    n = nbytes // 8
    src, dst = cp.ones(n), cp.empty(n)
    best = float("inf")
    for i in range(repeat + 1):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        cp.copyto(dst, src)
        end.record()
        end.synchronize()
        if i:  # the first is warm-up
            best = min(best, cp.cuda.get_elapsed_time(start, end) * 1e-3)
    del src, dst
    return Ceiling(2 * n * 8 / best, f"CuPy copy, 2 x {n * 8 >> 20} MiB")
