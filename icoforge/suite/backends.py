"""Backends by name: GT4Py's own ones and ours; the one registry of backend names
(`BACKEND_FACTORIES`; the granule adds "A+B" fallback pairs of these names).

`get_backend(name)` returns what icon4py's components take as `backend`: None for GT4Py's embedded
(Python) execution; for the peers `gtfn_cpu`, `gtfn_gpu`, `dace_cpu`, `dace_gpu` icon4py's own
descriptor (`model_backends.BACKENDS[name]`, a dict that icon4py customizes per program:
`peers.py`; `peers.for_program` gives one program's backend); else a `gt4py.next.backend.Backend`
(icoforge's, and GT4Py's plain objects under `dace_gpu_plain`, ...). Backends are built on first
use: DaCe and GT4Py's runners are imported only when asked for.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from icoforge import settings
from icoforge.backend import make_backend
from icoforge.backend.schedule.schedule import ProgramSchedule, ScheduleError, schedule_from_text
from icoforge.errors import UnknownNameError
from icoforge.suite import peers


def _embedded() -> None:
    return None


def _peer(name: str) -> Callable[[], Any]:
    """icon4py's descriptor for a peer name, handed to icon4py unchanged (peers.py)."""
    return lambda: peers.descriptor(name)


def _plain(name: str) -> Callable[[], Any]:
    """GT4Py's ready-made object, for whoever asks for the plain backend by its own name."""
    return lambda: peers.plain(name)


def schedule_vendor(backend: str) -> str:
    """Whose schedules an icoforge backend (its name, or its target) compiles with: HIP's for the
    HIP targets (hip-on-cuda too), else CUDA's (the C++ target takes only their inline policy)."""
    return "hip" if "hip" in backend else "cuda"


def _icoforge(target: str) -> Callable[[], Any]:
    def make() -> Any:
        vendor = schedule_vendor(target)
        # None without --schedule: the backend's default then carries the tuned schedules measured
        # on this device (backend/schedule/tuned.py); a vendor default given here would have none.
        return make_backend(target, schedule=schedule_from_env(vendor) if settings.current().schedule else None)

    return make


def schedule_from_env(vendor: str) -> ProgramSchedule:
    """The schedule of icoforge GPU backends made by name (`icoforge-cuda` in the granule, `icoforge
    run`): `--schedule` / `$ICOFORGE_SCHEDULE` (ProgramSchedule JSON, or the path of a JSON file)
    if set, else the vendor default. A JSON without "default" keeps the vendor default for
    unlisted kernels."""
    return schedule_from_text(settings.current().schedule, vendor, "$ICOFORGE_SCHEDULE")


def use_schedule(text: str) -> None:
    """`--schedule` of `icoforge greenline` and `icoforge run`: check the schedule (JSON or a JSON
    file) now, before minutes of compiling, and make it the schedule of the icoforge GPU backends
    made by name, in this process and the processes it starts (`settings.schedule`)."""
    try:
        schedule_from_text(text, "cuda", "--schedule").default.validate("--schedule")
    except ScheduleError as e:
        msg = str(e)
        raise ScheduleError(msg if msg.startswith("--schedule:") else f"--schedule: {msg}") from None
    settings.update(schedule=text)


def _roundtrip(kind: str) -> Callable[[], Any]:
    def make() -> Any:
        from gt4py.next.program_processors.runners import roundtrip

        return getattr(roundtrip, kind)

    return make


@dataclasses.dataclass(frozen=True)
class _Fixed:
    """A GTIR transform that returns a program transformed beforehand."""

    program: Any

    def __call__(self, ir: Any, *, offset_provider: Any) -> Any:
        return self.program


@dataclasses.dataclass(frozen=True)
class PassesRoundtripExecutor:
    """GT4Py's roundtrip executor (GTIR -> Python over GT4Py's embedded iterator builtins) run on
    the output of GT4Py's passes exactly as icoforge translates it (`extract_temporaries=True`,
    `unroll_reduce=True`), taken from icoforge's pass cache.

    As a reference for icoforge it shares GT4Py's passes and checks everything after them: our
    lowering, hoisting, code generation, build and runtime. No C++ compiler is involved; the
    price is Python speed at run time (per grid point), fine on small grids."""

    def __call__(self, inp: Any) -> Any:
        from gt4py.next.program_processors.runners import roundtrip

        from icoforge.backend.runtime import workflow  # GT4Py's pass manager: only when used

        transformed, _ = workflow.cached_passes(inp)
        return roundtrip.Roundtrip(transforms=_Fixed(transformed))(inp)


def _cached_passes_roundtrip() -> Any:
    from gt4py.next import backend as gt_backend
    from gt4py.next import custom_layout_allocators as allocators

    return gt_backend.Backend(
        name="roundtrip_icoforge_passes",
        executor=PassesRoundtripExecutor(),
        allocator=allocators.StandardCPUFieldBufferAllocator(),
        transforms=gt_backend.DEFAULT_TRANSFORMS,
    )


# GT4Py's Python "roundtrip" backends: GTIR turned into Python over GT4Py's embedded iterator
# implementation, no C++ compiler involved. "roundtrip" runs GT4Py's full pass pipeline itself
# (without temporaries), "roundtrip_gtir" only the cheap field-view transforms (fails on the
# granule in gt4py 1.2.1: InfinityLiteral in the generated Python), "roundtrip-passes" takes
# icoforge's cached pass output (see PassesRoundtripExecutor).
EXTRA_BACKENDS = {"roundtrip": "default", "roundtrip_gtir": "gtir", "roundtrip-passes": None}  # None: our cached passes

BACKEND_FACTORIES: dict[str, Callable[[], Any]] = {
    "embedded": _embedded,
    # GT4Py's backends as icon4py runs them: icon4py's descriptors, customized per program by icon4py
    **{name: _peer(name) for name in peers.PEERS},
    # GT4Py's ready-made objects, with no per-program options: only when asked for by these names
    **{name: _plain(name) for name in peers.PLAIN_PEERS},
    "icoforge": _icoforge("cpu"),
    "icoforge-cpu": _icoforge("cpu"),
    "icoforge-cuda": _icoforge("cuda"),
    "icoforge-hip": _icoforge("hip"),
    # the HIP code and host plan on an NVIDIA GPU, through a thin HIP-on-CUDA header
    "icoforge-hip-on-cuda": _icoforge("hip-on-cuda"),
    # the CUDA code and host plan run by CPU emulation: slow, for checking the GPU path without a GPU
    "icoforge-emulated-cuda": _icoforge("emulated-cuda"),
    "icoforge-emulated-hip": _icoforge("emulated-hip"),
    "roundtrip": _roundtrip("default"),
    "roundtrip_gtir": _roundtrip("gtir"),
    "roundtrip-passes": _cached_passes_roundtrip,
}

GPU_BACKENDS = frozenset(
    {"gtfn_gpu", "dace_gpu", "gtfn_gpu_plain", "dace_gpu_plain", "icoforge-cuda", "icoforge-hip", "icoforge-hip-on-cuda"}
)


def backend_names() -> tuple[str, ...]:
    return tuple(BACKEND_FACTORIES)


def get_backend(name: str) -> Any:
    """The backend called `name` (None for "embedded"); misspelt names raise UnknownNameError.
    One object per name and process, and for icoforge's GPU backends per `settings.schedule`
    (their schedule): a changed schedule never reuses a backend made under another."""
    schedule = settings.current().schedule if name.startswith("icoforge") else ""
    return _make_backend(name, schedule)


@functools.cache
def _make_backend(name: str, schedule: str) -> Any:
    try:
        factory = BACKEND_FACTORIES[name]
    except KeyError:
        raise UnknownNameError("backend", name, backend_names()) from None
    return factory()


def warm_compile_workers(name: str, backend: Any) -> None:
    """Start GT4Py's compile workers now for an icoforge backend (`ICOFORGE_WARM_POOL=0`: not).
    GT4Py starts them at the first submission, and each imports GT4Py for seconds before its
    first job; started early, they import while the caller sets up (the granule: while the grid
    goes to the device and icon4py constructs; the model: while the configuration is built and
    icon4py's driver imported, before its field factories wait for each program in turn). A
    peer's pool is left as GT4Py starts it."""
    from icoforge.backend.runtime import compile_pool

    if name.startswith("icoforge") and settings.current().warm_pool:
        compile_pool.warm_up_for(backend)


def is_gpu_backend(name: str) -> bool:
    return name in GPU_BACKENDS
