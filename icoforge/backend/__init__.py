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

    if target == "cpu":
        from icoforge.backend.workflow import CPUExecutor

        return gt_backend.Backend(
            name="icoforge_cpu",
            executor=CPUExecutor(inline_policy=schedule.inline if schedule is not None else "auto"),
            allocator=allocators.StandardCPUFieldBufferAllocator(),
            transforms=gt_backend.DEFAULT_TRANSFORMS,
        )
    if target in ("cuda", "hip", "gpu"):
        from icoforge.backend.gpu import make_gpu_backend

        return make_gpu_backend(target, schedule)
    if target == "hip-on-cuda":  # the HIP code on an NVIDIA GPU (codegen/hip_on_cuda.h)
        from icoforge.backend.hip_on_cuda import make_hip_on_cuda_backend

        return make_hip_on_cuda_backend(schedule)
    if target.startswith("emulated-"):  # the GPU code on the CPU, one thread at a time (tests)
        from icoforge.backend.emulate import make_emulated_backend

        return make_emulated_backend(target.removeprefix("emulated-"), schedule)
    raise UnknownNameError("icoforge target", target, TARGETS)
