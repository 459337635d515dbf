"""GPU targets (CUDA, HIP) through CuPy: NVRTC/hiprtc builds, CuPy arrays, a persistent
temporary pool and a generated host launch plan.

CuPy caches compiled modules on disk keyed by source, options, architecture and toolkit version,
so a program compiles once per machine. Temporaries live in a pool owned by the loaded program and
are reused across calls (no allocation per call once sizes are known); ICOFORGE_TEMPORARIES=per-call
or async takes them per call instead (settings.TEMPORARY_POLICIES).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from gt4py._core import definitions as core_defs
from gt4py.next import common
from gt4py.next.otf import definitions, stages

from icoforge import settings
from icoforge.backend.runtime import graphs as graphs_mod
from icoforge.backend.ir import ir
from icoforge.backend.schedule import pipeline, tuned
from icoforge.backend.runtime import deferral
from icoforge.backend.runtime.build import gpu_compile_options
from icoforge.backend.runtime.gpu_device import cupy_vendor, device_arch, device_name
from icoforge.backend.codegen.cuda import device_module, render_module_gpu
from icoforge.backend.codegen.device import DeviceModule
from icoforge.backend.codegen.host import render_host_plan
from icoforge.backend.schedule.schedule import KernelLaunch, ProgramSchedule, default_program_schedule
from icoforge.backend.runtime.host_checks import StrideSetMismatch
from icoforge.backend.runtime.workflow import flat_call_args, translate, yield_to_main_process
from icoforge.errors import IcoforgeError


# Called around a launch as `observer(kernel, stream, launch)`: it must call `launch()` (no
# arguments) once, and may do what it likes before and after (record events, read a clock).
# `stream` is the runtime's stream, None for CuPy's current one.
LaunchObserver = Callable[[Any, Any, Callable[[], None]], None]


def _is_gt4py_field(x: Any) -> bool:
    """A GT4Py field: frozen (its array, strides and domain never change), so what is derived
    from it may be kept per object. A bare array's shape or strides may change in place."""
    return hasattr(x, "ndarray")


class Runtime:
    """What a host plan needs at call time: argument views, the temporary pool, launches."""

    def __init__(self, program_name: str, xp: Any = None):
        if xp is None:
            import cupy as xp
        self.cp = xp  # the array module of device memory (NumPy in the CPU emulation)
        self.program = program_name
        self.pool: dict[str, Any] = {}
        self.stream = None  # a cupy.cuda.Stream to launch on; None: CuPy's current stream
        # around every launch, the first outermost (timers attach here: perf.timing.KernelTimer,
        # granule.instrument.DeviceBusy); a launch costs nothing more while the list is empty
        self.observers: list[LaunchObserver] = []
        # id(GT4Py field) -> (weak reference, key, value) for `field` and `span`: icon4py passes the
        # same field objects step after step, and a field's array, strides and domain never change
        # (frozen); the weak reference tells a live entry from one whose id was reused
        self._fields: dict[int, tuple] = {}
        self._spans: dict[int, tuple] = {}
        # where temporaries live (settings.TEMPORARY_POLICIES): only persistent ones keep their
        # pointers from call to call, so only with them can a call be replayed (see `run`; off with
        # ICOFORGE_HOST_REPLAY=0)
        self.temporaries = settings.current().temporaries
        self.replay = settings.current().host_replay and self.temporaries == "persistent"
        # ICOFORGE_HOST_GRAPHS: a replayed call's launches as one CUDA graph, through this module
        # (cupy.cuda; None: kernel by kernel); see `_launch_graph`. CuPy captures no graphs on HIP.
        graphs = self.replay and settings.current().host_graphs and self.cp is not np
        self.graphs = self.cp.cuda if graphs and not self.cp.cuda.runtime.is_hip else None
        # ICOFORGE_STREAMS: independent kernels as branches of those graphs, by the fields each
        # kernel reads and writes (graphs.kernel_fields of the program's IR; set by bind_program)
        self.streams = settings.current().streams if self.graphs is not None else 1
        self.kernel_fields: dict[str, graphs_mod.Access] = {}
        self._branches: list[Any] = []  # the side streams of the branches, made once
        self._call_buffers: list[Any] = []  # per-call and async: this call's temporaries, freed at its end
        self.copied = False
        self._plans: dict[tuple, _Replay] = {}
        self._recording: list[tuple] | None = None
        self._pool_generation = 0  # counts temporary buffers (re)allocated: recorded pointers die then

    def run(self, launch: Any, args: tuple, offset_provider: Any, kernels: dict) -> None:
        """One call of the generated host plan `launch`. A call with the very field objects,
        scalar values and offset provider of an earlier call replays that call's launches: the
        views, bounds, checks and launch configurations the plan would compute are the same
        (GT4Py fields are immutable, the pool keeps its buffers), so only the launches remain.
        Plan per call on the workstation, no-op launches: predictor 257 -> 27 µs, horizontal
        velocity 42 -> 13 µs (benchmarks/host-plan-overhead-cpu.md)."""
        key = self._call_key(args, offset_provider) if self.replay else None
        if key is not None:
            plan = self._plans.get(key)
            if plan is not None and plan.matches(args, self._pool_generation):
                if self.graphs is not None and not self.observers and self._launch_graph(plan, kernels):
                    return
                for kernel, grid, block, kargs in plan.launches:
                    self.launch(kernel, grid, block, kargs)  # not _launch: observers see replays too
                return
        self._recording = []
        self.copied = False  # host_checks._statement_inputs copied an input for this call only
        try:
            launch(args, offset_provider, kernels, self)
            launches = self._recording
        finally:
            self._recording = None
            # per-call and async temporaries go back now: their pools reuse a block only in stream
            # order, after the kernels launched on this stream that use it
            self._call_buffers.clear()
        if key is not None and not self.copied:
            if len(self._plans) >= 16:  # a caller with new fields on every call
                self._plans.clear()
            replay = _Replay(args, offset_provider, self._pool_generation, tuple(launches))
            # branches trust the IR's field names only where no two field arguments share memory
            replay.may_branch = self.streams > 1 and not graphs_mod.overlapping([self.span(a) for a in args if _is_gt4py_field(a)])
            self._plans[key] = replay

    def _launch_graph(self, plan: "_Replay", kernels: dict) -> bool:
        """Launch a replayed call's kernels as one CUDA graph, captured at its first replay: the
        launches and their arguments are the recorded call's (the replay key proves it), so the graph
        is too, and one graph launch replaces a launch per kernel. False: launch kernel by kernel
        (observers time each kernel, the stream is itself being captured, or capture failed)."""
        stream = self.stream if self.stream is not None else self.graphs.get_current_stream()
        if plan.graph is False or graphs_mod.capturing(stream):  # a substep captured whole takes our launches
            return False
        if plan.graph is None:
            groups = [[i] for i in range(len(plan.launches))]
            if plan.may_branch:
                name_of = {id(fn): name for name, fn in kernels.items()}
                names = [name_of.get(id(launch[0])) for launch in plan.launches]
                groups = graphs_mod.branch_groups(names, self.kernel_fields, self.streams)
            plan.graph = graphs_mod.capture(self.graphs, plan.launches, groups, self._branches, self.program)
            if plan.graph is False:
                return False
        plan.graph.launch(stream)
        return True

    @staticmethod
    def _call_key(args: tuple, offset_provider: Any) -> tuple | None:
        parts: list[Any] = [id(offset_provider)]
        for a in args:
            if _is_gt4py_field(a):
                parts.append(id(a))
            elif isinstance(a, (bool, int, float, np.generic)):
                parts.append((type(a), a))
            else:  # a bare array (its shape or strides may change in place): no replay
                return None
        return tuple(parts)

    def _ptr(self, arr: Any) -> int:
        return arr.data.ptr

    def view(self, field: Any, ndim: int, dtype: type) -> tuple:
        arr = getattr(field, "ndarray", field)
        if not isinstance(arr, self.cp.ndarray):
            raise IcoforgeError(f"{self.program}: a GPU program got a non-{self.cp.__name__} field ({type(arr).__name__})")
        if arr.ndim != ndim or arr.dtype != dtype:
            raise IcoforgeError(
                f"{self.program}: field of shape {arr.shape} and dtype {arr.dtype}, expected {ndim} dims of {np.dtype(dtype)}"
            )
        origin = getattr(field, "__gt_origin__", (0,) * ndim)
        item = arr.itemsize
        ptr = self._ptr(arr) + sum(o * s for o, s in zip(origin, arr.strides))
        return (np.uint64(ptr), *(np.int64(s // item) for s in arr.strides))

    def _per_field(self, cache: dict[int, tuple], field: Any, key: tuple, make: Any) -> Any:
        """`make()` once per GT4Py field object and `key`; a bare array (whose shape or strides may
        be changed in place) is never cached."""
        if not _is_gt4py_field(field):
            return make()
        hit = cache.get(id(field))
        if hit is not None and hit[0]() is field and hit[1] == key:
            return hit[2]
        value = make()
        if len(cache) > 4096:  # a caller making new fields for every call
            cache.clear()
        cache[id(field)] = (weakref.ref(field), key, value)
        return value

    def field(self, field: Any, ndim: int, dtype: type) -> tuple[tuple, list[tuple[int, int]]]:
        """(view, index range per dimension) of a field argument; made once per GT4Py field."""
        return self._per_field(self._fields, field, (ndim, dtype), lambda: (self.view(field, ndim, dtype), self.ranges(field, ndim)))

    @staticmethod
    def ranges(field: Any, ndim: int) -> list[tuple[int, int]]:
        """Index range [lo, hi) per dimension in which kernels address `field` (absolute indices)."""
        dom = getattr(field, "domain", None)
        if dom is not None:
            return [(int(r.start), int(r.stop)) for r in dom.ranges]
        return [(0, int(n)) for n in getattr(field, "ndarray", field).shape]

    @staticmethod
    def bound(field: Any, axis: int, stop: bool) -> int:
        r = field.domain.ranges[axis]
        return int(r.stop if stop else r.start)

    def span(self, field: Any) -> tuple[int, int]:
        """[first, last + 1) byte address of the memory `field` covers (for aliasing checks);
        made once per GT4Py field, like `field`."""
        return self._per_field(self._spans, field, (), lambda: self._span(getattr(field, "ndarray", field)))

    def _span(self, arr: Any) -> tuple[int, int]:
        lo = hi = self._ptr(arr)
        for n, stride in zip(arr.shape, arr.strides):
            if n == 0:
                return (lo, lo)
            if stride < 0:
                lo += (n - 1) * stride
            else:
                hi += (n - 1) * stride
        return (lo, hi + arr.itemsize)

    def table(self, offset_provider: dict, tag: str) -> tuple:
        if tag not in offset_provider:
            raise IcoforgeError(f"{self.program}: offset_provider lacks connectivity {tag!r}")
        arr = offset_provider[tag].ndarray
        # tables do not change between calls: the view (and, for a CPU grid's table, its copy on
        # the device) is made once per table array; the entry holds the array, so its id stays its own
        key = ("table", tag, id(arr))
        if key not in self.pool:
            device = arr if isinstance(arr, self.cp.ndarray) else self.cp.asarray(arr)
            self.pool[key] = (arr, device, self.view(device, 2, device.dtype.type))
        return self.pool[key][2]

    def table_targets(self, offset_provider: dict, tag: str, h0: int, h1: int, skip: int | None) -> tuple[int, int]:
        """[lo, hi) of the indices rows [h0, h1) of table `tag` hold (skip entries ignored; (0, 0)
        when none): what a kernel over those rows reads of the target dimension. Computed once
        per table array and row range (it synchronises the device), like the table's copy."""
        arr = offset_provider[tag].ndarray
        key = ("targets", tag, id(arr), h0, h1)
        if key not in self.pool:
            rows = arr[max(h0, 0) : h1]
            if skip is not None:
                rows = rows[rows != skip]
            self.pool[key] = (arr, (int(rows.min()), int(rows.max()) + 1) if rows.size else (0, 0))
        return self.pool[key][1]

    def temporary(self, name: str, hr: tuple[int, int] | None, kr: tuple[int, int] | None, dtype: type) -> tuple:
        h0, h1 = (int(hr[0]), int(hr[1])) if hr else (0, 1)
        k0, k1 = (int(kr[0]), int(kr[1])) if kr else (0, 1)
        nh, nk = max(h1 - h0, 0), max(k1 - k0, 0)
        if self.temporaries != "persistent":  # a fresh buffer for this call only
            buf = self._new_temporary(max(nh * nk, 1), dtype)
            self._call_buffers.append(buf)
            return self._temporary_view(buf, hr, kr, h0, k0, nh)
        buf = self.pool.get(name)
        if buf is None or buf.size < nh * nk or buf.dtype != dtype:
            buf = self._new_temporary(max(nh * nk, 1), dtype)
            self.pool[name] = buf
            self._pool_generation += 1
        shape = (hr is not None, kr is not None, h0, h1, k0, k1)
        last = self.pool.get(("temporary view", name))  # the same temporary every call: one view
        if last is not None and last[0] is buf and last[1] == shape:
            return last[2]
        view = self._temporary_view(buf, hr, kr, h0, k0, nh)
        self.pool[("temporary view", name)] = (buf, shape, view)
        return view

    def _temporary_view(self, buf: Any, hr: Any, kr: Any, h0: int, k0: int, nh: int) -> tuple:
        item = buf.itemsize
        # horizontal unit stride: element (i, k) at (k - k0) * nh + (i - h0)
        strides = []
        offset = 0
        if hr:
            strides.append(1)
            offset += h0
        if kr:
            strides.append(nh)
            offset += k0 * nh
        ptr = self._ptr(buf) - offset * item
        return (np.uint64(ptr), *(np.int64(s) for s in strides))

    def _new_temporary(self, n: int, dtype: type) -> Any:
        """A poisoned buffer of `n` elements from the policy's allocator (CuPy's memory pool, NumPy in
        the emulation; CUDA's stream-ordered pool for async): stale data would pass where NaN shows."""
        if self.temporaries != "async":
            buf = self.cp.empty(n, dtype=dtype)
        elif self.cp is np:
            raise IcoforgeError("ICOFORGE_TEMPORARIES=async needs CuPy and a GPU (CUDA's stream-ordered allocator); "
                                "the emulation takes persistent or per-call")  # fmt: skip
        else:
            buf = self.cp.ndarray((n,), dtype=dtype, memptr=_async_pool(self.cp).malloc(n * np.dtype(dtype).itemsize))
        poison_new_temporary(buf)
        return buf

    def launch(self, kernel: Any, grid: tuple, block: tuple, args: tuple) -> None:
        if self._recording is not None:
            self._recording.append((kernel, grid, block, args))
        if not self.observers:
            self._launch(kernel, grid, block, args)
            return
        go = functools.partial(self._launch, kernel, grid, block, args)
        for observe in reversed(self.observers):
            go = functools.partial(observe, kernel, self.stream, go)
        go()

    def _launch(self, kernel: Any, grid: tuple, block: tuple, args: tuple) -> None:
        if self.stream is None:
            kernel(grid, block, args)  # CuPy's current stream
        else:
            with self.stream:
                kernel(grid, block, args)


class _Replay:
    """The launches of one recorded call, valid while its field arguments are alive (weak
    references: a new field whose id reuses a dead one's does not match) and the pool has not
    reallocated a temporary. The offset provider is held (its id stays its own) and, like
    GT4Py's connectivities, taken not to change while it lives."""

    def __init__(self, args: tuple, offset_provider: Any, generation: int, launches: tuple):
        self.fields = tuple((i, weakref.ref(a)) for i, a in enumerate(args) if _is_gt4py_field(a))
        self.offset_provider = offset_provider
        self.generation = generation
        self.launches = launches
        self.graph: Any = None  # ICOFORGE_HOST_GRAPHS: the launches as a CUDA graph once captured; False: capture failed
        self.may_branch = False  # ICOFORGE_STREAMS > 1 and no two field arguments share memory

    def matches(self, args: tuple, generation: int) -> bool:
        return generation == self.generation and all(ref() is args[i] for i, ref in self.fields)


@dataclasses.dataclass(frozen=True)
class GPUArtifact:
    program_name: str
    vendor: str
    device: DeviceModule  # the kernels as data (names, parameters, source); `module_source` is its text
    host_plan: str
    options: tuple[str, ...]
    timings: tuple[tuple[str, float], ...] = ()
    program_ir: ir.ProgramIR | None = dataclasses.field(default=None, compare=False, repr=False)  # for perf models
    tuple_params: tuple[tuple[int, int], ...] = ()  # ir.ProgramIR.tuple_params
    # every kernel's launch (schedule.resolve of program_ir): what `per_field_variant` prints again
    launches: dict[str, KernelLaunch] | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def stride_sets(self) -> bool:
        """Has a kernel with the schedule's `stride_sets` on (a call may need `per_field_variant`)."""
        return self.launches is not None and any(la.schedule.stride_sets for la in self.launches.values())

    def per_field_variant(self) -> "GPUArtifact":
        """The same IR and launches with `stride_sets` off in every kernel, printed again: each array
        passes its own strides, any layout fits (what a call whose fields do not fit a stride set
        runs, `bind_program`)."""
        if self.launches is None or self.program_ir is None:
            raise IcoforgeError(f"{self.program_name}: the artifact lacks its IR and launches; no per-field-strides variant")
        launches = {n: dataclasses.replace(la, schedule=la.schedule.replace(stride_sets=False)) for n, la in self.launches.items()}
        final = pipeline.hoist_per_launch(self.program_ir, launches)
        return dataclasses.replace(
            self, device=device_module(final, launches, self.vendor), host_plan=render_host_plan(final, launches), launches=launches
        )  # fmt: skip

    @property
    def module_source(self) -> str:
        return self.device.source

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return self.device.kernel_names

    def load_kernels(self) -> dict[str, Any]:
        """The module compiled (NVRTC/hiprtc, or CuPy's disk cache) and loaded: name -> CuPy function."""
        import cupy as cp

        module = cp.RawModule(code=self.module_source, options=self.options, name_expressions=None)
        return {n: module.get_function(n) for n in self.kernel_names}  # CuPy functions: num_regs, local_size_bytes

    def load(self) -> stages.ExecutableProgram:
        t0 = time.perf_counter()
        kernels = self.load_kernels()
        program = bind_program(self, kernels, Runtime(self.program_name), GPUArtifact.load_kernels)
        program.icoforge_load_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
        if settings.current().trace:
            print(f"[icoforge {time.strftime('%H:%M:%S')}] {self.program_name}: {len(kernels)} kernels loaded "
                  f"(NVRTC or CuPy's disk cache) in {program.icoforge_load_seconds:.2f} s", file=sys.stderr, flush=True)  # fmt: skip
        return program


def _host_plan(art: GPUArtifact) -> Callable:
    namespace: dict[str, Any] = {}
    exec(compile(art.host_plan, f"<icoforge host plan {art.program_name}>", "exec"), namespace)
    return namespace["launch"]


def bind_program(
    art: GPUArtifact, kernels: dict[str, Any], rt: Runtime, load_kernels: Callable[[GPUArtifact], dict[str, Any]] | None = None,
) -> stages.ExecutableProgram:  # fmt: skip
    """The callable of `art` once its kernels are loaded (`kernels`: name -> launchable, on a GPU
    or in the CPU emulation): its host plan compiled once, run by `rt` on GT4Py's arguments
    (tuples of fields flattened). Carries the artifact, runtime and kernels for the lab's timers
    and reports.

    Stride sets (the schedule's `stride_sets`): a call whose fields do not fit them (the plan raises
    StrideSetMismatch before any launch) runs the artifact's per-field-strides variant, loaded by
    `load_kernels` at the first such call (one log line names the field and why) and sharing `rt`;
    later calls try the stride sets first. Without `load_kernels` the StrideSetMismatch is raised."""
    launch = _host_plan(art)
    variant: dict[str, Any] = {}  # "launch", "kernels", "artifact" of the per-field-strides variant, once built

    def per_field(mismatch: StrideSetMismatch) -> tuple[Callable, dict[str, Any]]:
        if not variant:
            if load_kernels is None:
                raise mismatch
            t0 = time.perf_counter()
            other = art.per_field_variant()
            variant.update(launch=_host_plan(other), kernels=load_kernels(other), artifact=other)
            print(f"[icoforge] {art.program_name}: stride sets do not fit this call: field {mismatch.field!r} {mismatch.why}; "
                  f"running the per-field-strides variant (built in {time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip
            program.icoforge_per_field_variant = other  # type: ignore[attr-defined]
        program.icoforge_per_field_calls += 1  # type: ignore[attr-defined]
        return variant["launch"], variant["kernels"]

    def run(args: tuple, offset_provider: Any) -> None:
        try:
            rt.run(launch, args, offset_provider, kernels)
        except StrideSetMismatch as mismatch:  # raised before any launch, nothing recorded
            other_launch, other_kernels = per_field(mismatch)
            rt.run(other_launch, args, offset_provider, other_kernels)

    def program(*args: Any, offset_provider: common.OffsetProvider, out: Any = None, **kwargs: Any) -> None:
        if out is not None:
            args = (*args, out)
        args = flat_call_args(args, art.tuple_params, art.program_name)
        block = deferral.active()
        if block is None:
            run(args, offset_provider)
        else:  # inside a SubstepFusion block: recorded, run when the block ends
            block.defer(program, art, rt, lambda: run(args, offset_provider), args, offset_provider)

    if art.program_ir is not None:
        rt.kernel_fields = graphs_mod.kernel_fields(art.program_ir, art.kernel_names)
    program.icoforge_artifact = art  # type: ignore[attr-defined]
    program.icoforge_runtime = rt  # type: ignore[attr-defined]  # timers attach to it (Runtime.observers)
    program.icoforge_kernels = kernels  # type: ignore[attr-defined]
    program.icoforge_per_field_variant = None  # type: ignore[attr-defined]  # GPUArtifact, once a call needed it
    program.icoforge_per_field_calls = 0  # type: ignore[attr-defined]  # calls that ran it (replays not counted)
    return program


def compile_module(source_and_options: tuple[str, tuple[str, ...]]) -> float:
    """Compile one module with NVRTC/hiprtc (no launch): CuPy keeps it in this process and in its disk
    cache, so a later `load()` of the same source here, or in a process that shares the cache
    directory, does not compile again. Returns the seconds."""
    import cupy as cp

    t0 = time.perf_counter()
    cp.RawModule(code=source_and_options[0], options=source_and_options[1]).compile()
    return time.perf_counter() - t0


def precompile_modules(artifacts: Iterable[GPUArtifact], jobs: int) -> list[float]:
    """Compile the artifacts' modules in `jobs` processes, so that their `load()` later finds them
    in CuPy's disk cache: NVRTC takes seconds per big module and runs one module at a time in a
    process. Returns the seconds of each distinct module; a module that fails here fails again,
    with its message, when it is loaded."""
    from icoforge.parallel import map_isolated

    sources = list(dict.fromkeys((a.module_source, a.options) for a in artifacts))
    return [r for _, r in map_isolated(compile_module, sources, jobs) if isinstance(r, float)]


@dataclasses.dataclass(frozen=True)
class GPUExecutor:
    vendor: str
    schedule: ProgramSchedule = ProgramSchedule()

    def __call__(self, inp: definitions.CompilableProgramDef) -> GPUArtifact:
        # No NVRTC here: GT4Py hides the GPUs from its compile workers (CUDA_VISIBLE_DEVICES=""),
        # and CuPy's disk cache is per process. The granule compiles loaded modules in the main
        # process while slower jobs still run (runner.Granule.setup).
        started_at = time.time()
        yield_to_main_process()
        t0 = time.perf_counter()
        tr, hit = translate(inp, inline_policy=self.schedule.inline)
        timings = (("translate", time.perf_counter() - t0), ("translation_cache_hit", float(hit)))
        decisions: list[tuned.Decision] = []
        # the call's sizes: for the tuned entries' size classes and the fusions' column count
        needs_sizes = self.schedule.tuned or self.schedule.fuse_scan_min_columns
        sizes = tuned.dim_sizes_of(inp.args.offset_provider) if needs_sizes else None
        artifact = gpu_artifact(tr.program, self.vendor, self.schedule, dim_sizes=sizes, decisions=decisions)
        notes = [str(d) for d in decisions]
        if any(d.status == tuned.CODE_CHANGED for d in decisions):  # what `icoforge tune --static-value` needs for this variant
            notes.append(f"this variant's static arguments: {_static_arguments(inp) or 'none'}")
        for line in notes:  # which tuned schedules this compile used, why others not, fusions refused
            print(f"[icoforge] {tr.program.name}: {line}", file=sys.stderr, flush=True)
        return dataclasses.replace(artifact, timings=(*timings, ("started_at", started_at), ("finished_at", time.time())))


@functools.cache
def _async_pool(cp: Any) -> Any:
    """One stream-ordered pool (cudaMallocAsync) per process for ICOFORGE_TEMPORARIES=async."""
    return cp.cuda.MemoryAsyncPool()


def poison_new_temporary(buf: Any) -> None:
    """A new temporary buffer starts as NaN (floats) or -1 (integers), as the C++ runtime's
    (runtime/icf_cpu.h, TempBuffer): a kernel reading a point no kernel wrote then shows NaN in
    the outputs of its first call, where uninitialised device memory (often zero) would pass."""
    kind = buf.dtype.kind
    if kind == "f":
        buf.fill(float("nan"))
    elif kind in "iu":
        buf.fill(-1 if kind == "i" else np.iinfo(buf.dtype).max)  # all bits set


def static_arguments(inp: definitions.CompilableProgramDef) -> tuple[tuple[str, Any], ...]:
    """The call's compile-time (static) arguments, (name, value) by name."""
    from gt4py.next.otf import arguments

    statics = inp.args.argument_descriptor_contexts.get(arguments.StaticArg, {})
    return tuple((name, arg.value) for name, arg in sorted(statics.items()) if arg is not None)


def static_arguments_text(pairs: Iterable[tuple[str, Any]]) -> str:
    """(name, value) pairs as NAME=VALUE ..., the form of `icoforge tune --static-value`."""
    return " ".join(f"{name}={value}" for name, value in pairs)


def _static_arguments(inp: definitions.CompilableProgramDef) -> str:
    """The call's static arguments as the log prints them."""
    return static_arguments_text(static_arguments(inp))


def gpu_artifact(
    program: ir.ProgramIR, vendor: str, schedule: ProgramSchedule, timings=(), dim_sizes=None, decisions: list[tuned.Decision] | None = None,
) -> GPUArtifact:  # fmt: skip
    """The GPU passes (the schedule resolved once: ScheduleError before generating anything), then
    the printers on the final IR. `program_ir` is the IR the schedule applied to (fused, kernels
    as launched), what the byte model reads. `dim_sizes`: the call's horizontal sizes, for the
    schedule's tuned entries (tuned.py)."""
    scheduled, final, launches = pipeline.gpu_passes(program, schedule, vendor, dim_sizes, decisions)
    return GPUArtifact(
        program_name=final.name,
        vendor=vendor,
        device=device_module(final, launches, vendor),
        host_plan=render_host_plan(final, launches),
        options=gpu_compile_options(vendor, schedule.fp_contract),
        timings=tuple(timings),
        program_ir=scheduled,
        tuple_params=final.tuple_params,
        launches=launches,
    )


def make_gpu_backend(target: str, schedule: ProgramSchedule | None = None):
    from gt4py.next import backend as gt_backend
    from gt4py.next import custom_layout_allocators as allocators

    from icoforge.backend.frontend import fast_frontend

    vendor = target
    if target == "gpu":
        vendor = cupy_vendor()
        if vendor is None:
            raise IcoforgeError("backend 'gpu': CuPy finds no CUDA or ROCm device here")
    if schedule is None:  # the default, with what the tuner measured on this device (tuned.py)
        schedule = dataclasses.replace(default_program_schedule(vendor), tuned=tuned.for_device(vendor, device_name(), arch=device_arch()))
    elif schedule.use_tuned and not schedule.tuned:  # a given schedule that asks for them ("tuned": true or a device's name)
        schedule = dataclasses.replace(schedule, tuned=tuned.for_schedule(vendor, device_name(), schedule.use_tuned, arch=device_arch()))
    return gt_backend.Backend(
        name=f"icoforge_{vendor}",
        executor=GPUExecutor(vendor, schedule),
        allocator=allocators.StandardGPUFieldBufferAllocator(),
        transforms=fast_frontend.transforms(),  # GT4Py's front end, less repeated work
    )


__all__ = ["GPUArtifact", "GPUExecutor", "LaunchObserver", "Runtime", "bind_program", "cupy_vendor", "gpu_artifact", "make_gpu_backend", "core_defs"]
