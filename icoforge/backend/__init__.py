"""The icoforge GT4Py backend: `program.with_backend(icoforge.backend.make_backend("cpu"))`."""

from __future__ import annotations

from icoforge.errors import UnknownNameError

TARGETS = ("cpu", "cuda", "hip", "gpu", "hip-on-cuda", "emulated-cuda", "emulated-hip")


def make_backend(target: str = "cpu", schedule=None):
    """A `gt4py.next.backend.Backend` compiling with icoforge for `target`. `schedule` (a
    `schedule.ProgramSchedule`; None: the vendor default) lays out the GPU targets' kernels; the
    C++ target takes only its inline policy."""
    from gt4py.next import backend as gt_backend
    from gt4py.next import custom_layout_allocators as allocators

    from icoforge.backend.frontend import fast_frontend

    if target == "cpu":
        from icoforge.backend.runtime.workflow import CPUExecutor

        return gt_backend.Backend(
            name="icoforge_cpu",
            executor=CPUExecutor(inline_policy=schedule.inline if schedule is not None else "auto"),
            allocator=allocators.StandardCPUFieldBufferAllocator(),
            transforms=fast_frontend.transforms(),  # GT4Py's front end, less repeated work
        )
    if target in ("cuda", "hip", "gpu"):
        from icoforge.backend.runtime.gpu import make_gpu_backend

        return make_gpu_backend(target, schedule)
    if target == "hip-on-cuda":  # the HIP code on an NVIDIA GPU (codegen/hip_on_cuda.h)
        from icoforge.backend.runtime.hip_on_cuda import make_hip_on_cuda_backend

        return make_hip_on_cuda_backend(schedule)
    if target.startswith("emulated-"):  # the GPU code on the CPU, one thread at a time (tests)
        from icoforge.backend.runtime.emulate import make_emulated_backend

        return make_emulated_backend(target.removeprefix("emulated-"), schedule)
    raise UnknownNameError("icoforge target", target, TARGETS)


# --- ready-made backend objects: `--backend icoforge.backend:cpu` in icon4py's tests -------------
# icon4py's pytest option `--backend module:symbol` resolves the symbol with `pkgutil.resolve_name`,
# a `getattr` on this package. The objects are made on first access (module `__getattr__`, PEP 562)
# and cached: importing this package, or touching `cpu`, creates no CUDA context and compiles nothing
# (compiling starts when a program first runs). `any_gpu` is `make_backend("gpu")` (whichever GPU
# CuPy has); it is not called `gpu`, the name the GPU runtime module had (now `runtime/gpu.py`).
BACKEND_OBJECTS = {"cpu": "cpu", "cuda": "cuda", "hip": "hip", "any_gpu": "gpu"}
_made_backends: dict[str, object] = {}


def __getattr__(name: str):
    if name not in BACKEND_OBJECTS:
        # An AttributeError (not UnknownNameError): `from icoforge.backend import runtime` and
        # `hasattr` rely on it; the message still lists the backend objects.
        raise AttributeError(
            f"module {__name__!r} has no attribute {name!r}; its backend objects are {', '.join(BACKEND_OBJECTS)}"
        )
    if name not in _made_backends:  # an error (no GPU) is raised again at the next access, never cached
        _made_backends[name] = make_backend(BACKEND_OBJECTS[name])
    return _made_backends[name]


def __dir__() -> list[str]:
    return sorted([*globals(), *BACKEND_OBJECTS])
