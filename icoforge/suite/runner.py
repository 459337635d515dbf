"""Compile and time one program on one backend.

`prepare` compiles a program for a grid and an argument set and returns a call that runs it in
place; `run_program` times compilation, a first call, warm-up and `repeat` timed calls on fresh
random inputs. Static arguments: like icon4py's `setup_program`, the integer and bool scalars
(domain bounds, level indices, switches) are compile-time constants by default; floats stay
run-time arguments.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from icoforge.backend.frontend import gt4py_compat
from icoforge.errors import IcoforgeError
from icoforge.suite import faults, peers
from icoforge.suite.backends import get_backend
from icoforge.suite.catalogue import ProgramInfo
from icoforge.suite.inputs import copy_args, is_field, make_inputs, to_numpy
from icoforge.suite.specs import parse_scalar

Call = Callable[[dict[str, Any]], None]
StatusCallback = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class CustomBackend:
    """Runs programs without being a GT4Py backend: fault injectors in tests, hand-written
    kernels. `prepare(info, grid, args)` returns a call that runs the program in place on args."""

    name: str
    prepare: Callable[[ProgramInfo, Any, dict[str, Any]], Call]
    allocator: Any = None


BackendLike = str | CustomBackend | Any  # a name, a CustomBackend, a GT4Py Backend or None (embedded)


def resolve_backend(backend: BackendLike) -> tuple[str, Any]:
    """(display name, backend object) for a name, a GT4Py Backend, None or a CustomBackend."""
    if isinstance(backend, str):
        return backend, get_backend(backend)
    if backend is None:
        return "embedded", None
    return getattr(backend, "name", type(backend).__name__), backend


def allocator_for(backend_obj: Any) -> Any:
    """What `gtx.as_field(allocator=...)` needs for this backend's memory (None: numpy)."""
    if backend_obj is None:
        return None
    if isinstance(backend_obj, CustomBackend):
        return backend_obj.allocator
    if peers.is_descriptor(backend_obj):  # icon4py's descriptor: its device's allocator, as icon4py picks it
        from icon4py.model.common import model_backends

        return model_backends.get_allocator(backend_obj)
    return backend_obj  # a GT4Py Backend is an allocator factory for its device


def static_param_names(
    info: ProgramInfo, static_params: str | Sequence[str], also: Iterable[str] = ()
) -> tuple[str, ...]:
    """"icon4py": all int32 and bool scalars (what icon4py's setup_program binds at compile
    time); "none": nothing; or an explicit list of names. `also`: more names made static (the
    `--static-value`s: icon4py's SolveNonhydro also binds some float scalars, e.g. weights)."""
    if static_params == "icon4py":
        names = tuple(p.name for p in info.scalars if p.dtype in ("int32", "bool"))
    elif static_params == "none":
        names = ()
    else:
        names = tuple(static_params)
    return names + tuple(n for n in also if n not in names)


def static_overrides(info: ProgramInfo, texts: Mapping[str, str]) -> dict[str, Any]:
    """`--static-value NAME=VALUE`s (NAME -> text) as values of the program's scalars, e.g. a
    granule variant's (its compile log prints them); each named scalar is compiled as a static
    value (static_param_names' `also`). An unknown name or a bad value is an error that lists the
    program's scalars."""
    valid = [p.name for p in info.scalars]
    unknown = sorted(set(texts) - set(valid))
    if unknown:
        raise IcoforgeError(f"--static-value: {', '.join(unknown)} not a scalar of {info.name}; "
                            f"its scalars: {', '.join(valid) or 'none'}")  # fmt: skip
    try:
        return {n: parse_scalar(t, info.param(n).dtype) for n, t in texts.items()}
    except ValueError as e:
        raise IcoforgeError(f"--static-value: {e}") from None


def static_variant(
    info: ProgramInfo, static_params: str | Sequence[str], texts: Mapping[str, str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`--static-value`s (NAME -> text) as (their values, the scalars compiled static with them):
    one call for both, since a value given for a float scalar is static only if it is named."""
    overrides = static_overrides(info, texts)
    return overrides, static_param_names(info, static_params, overrides)


def synchronizer(args: dict[str, Any]) -> Callable[[], None]:
    """A function that waits for the device of the fields in args (no-op on the CPU)."""
    if any(type(v.ndarray).__module__.startswith("cupy") for v in args.values() if is_field(v)):
        import cupy

        return cupy.cuda.runtime.deviceSynchronize
    return lambda: None


def _wait_for_compilation(program: Any) -> None:
    """Block until `program`'s pending compilations are loaded.

    GT4Py's public `wait_for_compilation()` also shuts its worker pool down, so every later
    compile would pay for starting worker processes again (seconds: they import gt4py). Waiting
    on this program's own jobs keeps the pool; we fall back to the public function if the
    private attributes of gt4py 1.2 change.
    """
    if not gt4py_compat.finish_compilations(program):
        from gt4py.next.otf import compiled_program

        compiled_program.wait_for_compilation()


# Compiled programs of this process: (program, backend, grid, static values) -> (grid, call).
# `verify` after `run_program` (as `icoforge run --compare` does) then compiles nothing twice.
_compiled: dict[tuple, tuple[Any, Call]] = {}


def _with_test_faults(prepare_fn: Callable[..., tuple[Call, float]]) -> Callable[..., tuple[Call, float]]:
    """The call `prepare` returns, with the test-only faults of $ICOFORGE_TEST_FAULT
    (icoforge.suite.faults) when it names this backend."""

    @functools.wraps(prepare_fn)
    def prepare(info: ProgramInfo, backend: BackendLike, *args: Any, **kwargs: Any) -> tuple[Call, float]:
        call, compile_s = prepare_fn(info, backend, *args, **kwargs)
        return faults.wrap(call, resolve_backend(backend)[0], tuple(info.outputs)), compile_s

    return prepare


@_with_test_faults
def prepare(
    info: ProgramInfo,
    backend: BackendLike,
    grid: Any,
    args: dict[str, Any],
    *,
    static_params: str | Sequence[str] = "icon4py",
) -> tuple[Call, float]:
    """Compile `info.program` for `backend`, `grid` and the types/static values of `args`.

    Returns (call, compile seconds); `call(args)` runs the program in place. GT4Py may compile in
    worker processes: we wait for them, so the seconds are the full compile time. A program
    already compiled in this process for the same backend, grid and static values is reused
    (0 seconds).
    """
    _, backend_obj = resolve_backend(backend)
    if isinstance(backend_obj, CustomBackend):
        start = time.perf_counter()
        call = backend_obj.prepare(info, grid, args)
        return call, time.perf_counter() - start

    connectivities = grid.connectivities
    if peers.is_descriptor(backend_obj):  # a peer: the backend icon4py's setup_program gives this program
        backend_obj = peers.for_program(backend_obj, info.program)
    program = info.program.with_backend(backend_obj)
    if backend_obj is None:  # embedded: nothing to compile

        def run_embedded(call_args: dict[str, Any]) -> None:
            with warnings.catch_warnings():  # "Using Python execution": chosen on purpose here
                warnings.filterwarnings("ignore", "Field View Program", UserWarning)
                program(**call_args, offset_provider=connectivities)

        return run_embedded, 0.0

    static = {name: [args[name]] for name in static_param_names(info, static_params)}
    key = (info.name, id(backend_obj), id(grid), tuple((k, repr(v)) for k, v in static.items()))
    if key in _compiled and _compiled[key][0] is grid:
        return _compiled[key][1], 0.0

    # enable_jit=False: a call that does not match the compiled variant is an error, never a
    # silent recompilation inside the timed loop
    program = program.with_compilation_options(enable_jit=False)
    start = time.perf_counter()
    with warnings.catch_warnings():  # GT4Py's advice to run `python -O`; the CLI is not `-O`
        warnings.filterwarnings("ignore", "Python is not running in optimized mode", UserWarning)
        program.compile(offset_provider=connectivities, **static)
    _wait_for_compilation(program)
    compile_s = time.perf_counter() - start

    def run_compiled(call_args: dict[str, Any]) -> None:
        program(**call_args, offset_provider=connectivities)

    _compiled[key] = (grid, run_compiled)
    return run_compiled, compile_s


# --- timing ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunResult:
    program: str
    backend: str
    grid: str
    num_levels: int
    seed: int
    compile_s: float
    first_call_s: float  # includes loading the compiled module and first-touch effects
    times_s: tuple[float, ...]  # the timed calls
    checksum: str  # of the outputs after one call on the pristine inputs
    output_sums: dict[str, float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_s) * 1e3 if self.times_s else float("nan")

    @property
    def min_ms(self) -> float:
        return min(self.times_s) * 1e3 if self.times_s else float("nan")


def grid_fields(grid: Any) -> dict[str, Any]:
    """`grid` and `num_levels` of a result (RunResult, verify's VerifyResult): the grid's name
    (its type's for a grid without one) and its level count."""
    return {"grid": getattr(grid, "name", type(grid).__name__), "num_levels": int(grid.num_levels)}


def checksum(arrays: dict[str, np.ndarray]) -> str:
    """Short hash of the outputs rounded to float32 (~7 digits): equal outputs up to rounding
    give equal checksums, almost always -- `verify` is the real comparison."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(arrays[name], dtype=np.float32).tobytes())
    return digest.hexdigest()[:12]


def output_arrays(info: ProgramInfo, args: dict[str, Any]) -> dict[str, np.ndarray]:
    return {name: to_numpy(args[name]) for name in info.outputs}


def run_program(
    info: ProgramInfo,
    backend: BackendLike,
    grid: Any,
    seed: int = 0,
    repeat: int = 10,
    *,
    warmup: int = 1,
    static_params: str | Sequence[str] = "icon4py",
    static_values: Mapping[str, str] | None = None,
    on_status: StatusCallback | None = None,
    measuring: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> RunResult:
    """Compile `info.program` on `backend`, then time it on random inputs (seed) on `grid`;
    `static_values` (NAME -> text) replace static scalars of the inputs (`static_variant`).
    `measuring()` is entered around the calls (first, warm-up, timed), not the compile: e.g. a
    GPU lock (`icoforge run --gpu-lock`) that parallel processes take turns on.

    Fields the program both reads and writes (`info.inouts`) are restored before every call, so
    each timed call sees the same inputs; restoring is not timed.
    """
    status = on_status or (lambda _: None)
    name, backend_obj = resolve_backend(backend)
    allocator = allocator_for(backend_obj)

    status(f"building inputs for {info.name}")
    overrides, statics = static_variant(info, static_params, static_values or {})
    args = {**make_inputs(info, grid, seed, allocator=allocator), **overrides}
    pristine = copy_args(args)
    sync = synchronizer(args)

    status(f"compiling {info.name} for {name}")
    call, compile_s = prepare(info, backend, grid, args, static_params=statics)

    def restore_inouts() -> None:
        for param in info.inouts:
            args[param].ndarray[...] = pristine[param].ndarray

    with measuring():
        status(f"running {info.name} on {name}")
        sync()
        start = time.perf_counter()
        call(args)
        sync()
        first_call_s = time.perf_counter() - start
        outputs = output_arrays(info, args)

        for _ in range(warmup):
            restore_inouts()
            call(args)
        times = []
        for _ in range(repeat):
            restore_inouts()
            sync()
            start = time.perf_counter()
            call(args)
            sync()
            times.append(time.perf_counter() - start)

    return RunResult(
        program=info.name,
        backend=name,
        **grid_fields(grid),
        seed=seed,
        compile_s=compile_s,
        first_call_s=first_call_s,
        times_s=tuple(times),
        checksum=checksum(outputs),
        output_sums={k: float(np.sum(v, dtype=np.float64)) for k, v in outputs.items()},
    )
