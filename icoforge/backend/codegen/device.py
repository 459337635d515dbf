"""The GPU module as data: what the CUDA/HIP printer produces, before it is one string.

A `DeviceModule` is a header (the first comment line and the prelude) and its kernels, each with
its name, its parameters (C type and name, in the order the host plan passes them), its source
text and whether it waits at a barrier (shared-memory staging). `source` joins them into the
text NVRTC/hiprtc compile; the CPU emulation (`backend.emulate`) and the HIP-on-CUDA build
(`backend.hip_on_cuda`) read the parts instead of searching the text.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DeviceParam:
    ctype: str  # "const double*", "double*", "const long long", "const int", ...
    name: str

    @property
    def pointer(self) -> bool:
        return self.ctype.endswith("*")

    def declaration(self) -> str:
        """As printed in the kernel's signature (pointers `__restrict__`)."""
        return f"{self.ctype} __restrict__ {self.name}" if self.pointer else f"{self.ctype} {self.name}"


@dataclasses.dataclass(frozen=True)
class DeviceKernel:
    name: str
    params: tuple[DeviceParam, ...]
    source: str  # the `extern "C" __global__` function, its comment lines included
    barriers: bool = False  # calls __syncthreads(): the threads of a block must run together
    smem_bytes: int = 0  # static shared memory per block


@dataclasses.dataclass(frozen=True)
class DeviceModule:
    program: str
    vendor: str  # "cuda" | "hip"
    header: str  # the module's first line and the prelude (helpers every kernel may call)
    kernels: tuple[DeviceKernel, ...]

    @property
    def source(self) -> str:
        """The module as one translation unit (what NVRTC/hiprtc, nvcc and hipcc compile)."""
        return "\n".join([self.header, *(part for k in self.kernels for part in (k.source, ""))])

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kernels)

    def kernel(self, name: str) -> DeviceKernel:
        return next(k for k in self.kernels if k.name == name)
