"""HIP on an NVIDIA GPU: the generated HIP module, compiled by NVRTC (or nvcc) through a thin
header (`codegen/hip_on_cuda.h`: HIP names as CUDA names, AMD kernel attributes as CUDA's).

The artifact is the HIP target's, unchanged (HIP schedule, vendor defaults, host plan, the HIP
kernel attributes and the chiplet remap as hipcc would compile them); only the header goes in
front of its device module, and NVRTC's options replace hiprtc's (both keep rounding as
written: no contraction into fused multiply-adds). So the HIP source is run and verified on
an H200 (`icoforge verify-all --backend icoforge-hip-on-cuda --reference icoforge-cpu`).
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from typing import Any

from icoforge.backend.runtime.build import gpu_compile_options
from icoforge.backend.runtime.gpu import GPUArtifact, GPUExecutor
from icoforge.backend.schedule.schedule import ProgramSchedule, default_program_schedule
from icoforge.errors import IcoforgeError

HEADER_PATH = pathlib.Path(__file__).resolve().parents[1] / "codegen" / "hip_on_cuda.h"


@functools.cache
def header() -> str:
    return HEADER_PATH.read_text()


def on_cuda(art: GPUArtifact) -> GPUArtifact:
    """The HIP artifact `art`, its module to be compiled for CUDA (header in front, NVRTC options)."""
    if art.vendor != "hip":
        raise IcoforgeError(f"{art.program_name}: HIP-on-CUDA takes a HIP artifact, got {art.vendor}")
    device = dataclasses.replace(art.device, header=f"{header()}\n{art.device.header}")
    return dataclasses.replace(art, device=device, options=gpu_compile_options("cuda", "-ffp-contract=fast" in art.options))


def hip_source_on_cuda(hip_source: str) -> str:
    """A HIP module's text with the header in front (for nvcc)."""
    return f"{header()}\n{hip_source}"


@dataclasses.dataclass(frozen=True)
class HipOnCudaExecutor:
    """GT4Py executor: the HIP target's executor, its artifact built for CUDA."""

    hip: GPUExecutor

    def __call__(self, inp: Any) -> GPUArtifact:
        return on_cuda(self.hip(inp))


def make_hip_on_cuda_backend(schedule: ProgramSchedule | None = None):
    """A GT4Py backend running the generated HIP code on an NVIDIA GPU (CuPy arrays)."""
    from gt4py.next import backend as gt_backend
    from gt4py.next import custom_layout_allocators as allocators

    from icoforge.backend.frontend import fast_frontend

    schedule = schedule or default_program_schedule("hip")
    return gt_backend.Backend(
        name="icoforge_hip_on_cuda",
        executor=HipOnCudaExecutor(GPUExecutor("hip", schedule)),
        allocator=allocators.StandardGPUFieldBufferAllocator(),
        transforms=fast_frontend.transforms(),  # GT4Py's front end, less repeated work
    )
