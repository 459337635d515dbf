"""Run the generated CUDA/HIP kernels on the CPU, one emulated thread at a time.

The GPU source is compiled by the host C++ compiler under a small header that stands in for
CUDA's built-ins (`blockIdx`, `threadIdx`, ...); each kernel gets a wrapper that loops over the
launch grid and block and calls the kernel once per thread. The generated host plan runs
unchanged, with a NumPy-backed runtime. This checks the GPU code path -- index arithmetic of
every schedule knob, host plan, temporaries -- without a GPU. Not emulated: shared-memory staging
(`smem_tables`; a barrier needs the threads of a block to run together).
"""

from __future__ import annotations

import ctypes
import dataclasses
import re
from typing import Any

import numpy as np

from icoforge.backend import ir
from icoforge.backend.build import build_cpu_module
from icoforge.backend.gpu import GPUArtifact, GPUExecutor, Runtime
from icoforge.backend.schedule import VENDOR_DEFAULTS, ProgramSchedule
from icoforge.errors import IcoforgeError

EMU_HEADER = r"""// icoforge CUDA emulation on the CPU: one thread at a time.
#include <algorithm>
#include <cmath>
#include <math.h>
struct icf_dim3 { unsigned int x = 1, y = 1, z = 1; };
static icf_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __shared__ static
#define __syncthreads() icf_emu_no_barriers()
[[noreturn]] inline void icf_emu_no_barriers() { throw "shared-memory staging is not emulated"; }
using std::isnan; using std::isinf; using std::isfinite;
"""

_KERNEL = re.compile(r'extern "C" __global__[^\n]*\n(\w+)\((.*?)\) \{', re.S)


def _param_type(param: str) -> str:
    """`const double* __restrict__ vn` -> `const double*`; `const long long vn_s0` -> `long long`."""
    words = param.replace("__restrict__", "").split()
    return " ".join(words[:-1])


def emulation_source(module_source: str) -> tuple[str, list[str]]:
    kernels = _KERNEL.findall(module_source)
    if not kernels:
        raise IcoforgeError("no kernels found in the GPU source")
    body = module_source.replace('extern "C" __global__', 'extern "C"')
    lines = [EMU_HEADER, body, ""]
    for name, params in kernels:
        types = [_param_type(p) for p in params.split(",")]
        unpack = ", ".join(f"*({t}*)a[{j}]" for j, t in enumerate(types))
        lines += [
            f'extern "C" void emu_{name}(unsigned gx, unsigned gy, unsigned bx, unsigned by, void** a) {{',
            "  gridDim.x = gx; gridDim.y = gy; blockDim.x = bx; blockDim.y = by;",
            "  for (unsigned yb = 0; yb < gy; ++yb) for (unsigned xb = 0; xb < gx; ++xb)",
            "    for (unsigned ty = 0; ty < by; ++ty) for (unsigned tx = 0; tx < bx; ++tx) {",
            "      blockIdx.x = xb; blockIdx.y = yb; threadIdx.x = tx; threadIdx.y = ty;",
            f"      {name}({unpack});",
            "    }",
            "}",
        ]
    return "\n".join(lines), [n for n, _ in kernels]


class EmulatedRuntime(Runtime):
    """The GPU runtime over NumPy memory; launches run the emulation wrappers."""

    def __init__(self, program_name: str):
        super().__init__(program_name, xp=np)

    def _ptr(self, arr: np.ndarray) -> int:
        return arr.ctypes.data

    def _launch(self, kernel: Any, grid: tuple, block: tuple, args: tuple) -> None:
        boxes = [np.array([a]) for a in args]  # keep every scalar alive while the call runs
        ptrs = (ctypes.c_void_p * len(boxes))(*(b.ctypes.data for b in boxes))
        kernel(grid[0], grid[1], block[0], block[1], ptrs)


def load_emulated(art: GPUArtifact):
    """The artifact's program, run by CPU emulation: `program(*args, offset_provider=...)`."""
    source, names = emulation_source(art.module_source)
    so, _ = build_cpu_module(source, f"emu_{art.program_name[:40]}")
    lib = ctypes.CDLL(str(so))
    kernels = {}
    for n in names:
        fn = getattr(lib, f"emu_{n}")
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        fn.restype = None
        kernels[n] = fn
    namespace: dict[str, Any] = {}
    exec(compile(art.host_plan, f"<icoforge host plan {art.program_name}>", "exec"), namespace)
    launch = namespace["launch"]
    rt = EmulatedRuntime(art.program_name)

    def program(*args: Any, offset_provider: dict, out: Any = None) -> None:
        if out is not None:
            args = (*args, out)
        rt.run(launch, ir.flat_call_args(args, art.tuple_params, art.program_name), offset_provider, kernels)

    program.icoforge_artifact = art  # type: ignore[attr-defined]  # kernel names for reports
    program.icoforge_runtime = rt  # type: ignore[attr-defined]  # as on the GPU: timers attach to it
    return program


@dataclasses.dataclass(frozen=True)
class EmulatedArtifact:
    art: GPUArtifact

    def load(self):
        return load_emulated(self.art)


@dataclasses.dataclass(frozen=True)
class EmulatedExecutor:
    """GT4Py executor: the GPU target's executor, its artifact run by CPU emulation."""

    gpu: GPUExecutor

    def __call__(self, inp: Any) -> EmulatedArtifact:
        return EmulatedArtifact(self.gpu(inp))


def make_emulated_backend(vendor: str = "cuda", schedule: ProgramSchedule | None = None):
    """A GT4Py backend whose programs run the generated CUDA/HIP code by CPU emulation (NumPy
    memory): GT4Py programs with static arguments, e.g. the granule's variants, then go
    through exactly the GPU path (schedules, kernel fusion, host plan) on a machine without GPU."""
    from gt4py.next import backend as gt_backend
    from gt4py.next import custom_layout_allocators as allocators

    return gt_backend.Backend(
        name=f"icoforge_emulated_{vendor}",
        executor=EmulatedExecutor(GPUExecutor(vendor, schedule or ProgramSchedule(default=VENDOR_DEFAULTS[vendor]))),
        allocator=allocators.StandardCPUFieldBufferAllocator(),
        transforms=gt_backend.DEFAULT_TRANSFORMS,
    )
