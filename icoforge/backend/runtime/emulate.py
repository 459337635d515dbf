"""Run the generated CUDA/HIP kernels on the CPU: the GPU code path without a GPU.

The device module (`codegen.device.DeviceModule`: kernels with names, parameters and source, as
the printer made them) is compiled by the host C++ compiler under a small header that stands in
for CUDA's built-ins (`blockIdx`, `threadIdx`, `__shared__`, `__syncthreads`, ...); each kernel
gets a wrapper that loops over the launch grid. The generated host plan runs unchanged, with a
NumPy-backed runtime. This checks index arithmetic of every schedule knob, host plan,
temporaries and shared-memory staging.

Threads and barriers. A kernel without a barrier runs one thread after the other (a plain loop).
A kernel that calls `__syncthreads()` (shared-memory staging, `DeviceKernel.barriers`) runs each
block's threads as fibers (`ucontext`) on one OS thread: each thread runs until it reaches the
barrier or returns; when every thread of the block waits, all go on. `__shared__` variables are
function statics, so the block's fibers share them, as the threads of a block share shared
memory; blocks run one after the other. Why fibers rather than the alternatives:
- splitting a kernel into phases at its barriers would need every local that crosses a barrier
  (block number, first point, loop state) kept per thread: a second code generator;
- OpenMP or OS threads with a real barrier need one OS thread per GPU thread (up to 1024 per
  block) on machines with 2 cores, and run in an order that changes from run to run.
Fibers are deterministic, honour barriers anywhere (also inside loops), and can be run in any
order: `thread_order="reversed"` runs the threads of each phase backwards, so a kernel that reads
another thread's shared memory before the barrier that orders it gives other results (a cheap
race check), and a thread that returns while others wait at a barrier is an error, never a hang
(`EmulationError`; CUDA leaves it undefined).
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

import numpy as np

from icoforge.backend.runtime.build import build_cpu_module
from icoforge.backend.codegen.device import DeviceKernel, DeviceModule
from icoforge.backend.runtime.gpu import GPUArtifact, GPUExecutor, Runtime, bind_program
from icoforge.backend.schedule.schedule import ProgramSchedule, default_program_schedule
from icoforge.errors import IcoforgeError

THREAD_ORDERS = ("forward", "reversed")


class EmulationError(IcoforgeError):
    pass


EMU_HEADER = r"""// icoforge CUDA emulation on the CPU: threads one at a time, blocks with barriers as fibers.
#include <algorithm>
#include <cmath>
#include <math.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>
struct icf_dim3 { unsigned int x = 1, y = 1, z = 1; };
static icf_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __shared__ static
#define __syncthreads() icf_emu::barrier()
using std::isnan; using std::isinf; using std::isfinite;
namespace icf_emu {
enum State { READY, AT_BARRIER, DONE };
struct Fiber { ucontext_t ctx; State state; unsigned tx, ty; };
static const size_t STACK = 256 * 1024;  // per emulated thread (a guard page below it)
static std::vector<Fiber> fibers;
static std::vector<char*> stacks;
static ucontext_t scheduler;
static Fiber* current = nullptr;
static void (*body)(void*) = nullptr;
static void* body_args = nullptr;
static const char* error = nullptr;
static int reversed = 0;
static unsigned long long barriers_passed = 0;
inline void barrier() {
  if (current == nullptr) { error = "__syncthreads() in a kernel not marked as having barriers"; return; }
  current->state = AT_BARRIER;
  swapcontext(&current->ctx, &scheduler);
}
static void trampoline() { body(body_args); current->state = DONE; }  // then uc_link: the scheduler
static bool ensure(size_t n) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  while (stacks.size() < n) {
    void* p = mmap(nullptr, STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    mprotect(p, page, PROT_NONE);  // a stack overflow faults instead of writing into a neighbour
    stacks.push_back((char*)p + page);
  }
  if (fibers.size() < n) fibers.resize(n);
  return true;
}
// one block: every thread a fiber, released together at each barrier; 0 or an error message
static const char* run_block(unsigned bx, unsigned by, void (*fn)(void*), void* args) {
  const size_t n = (size_t)bx * by;
  if (!ensure(n)) return "cannot allocate the stacks of the emulated threads";
  body = fn; body_args = args;
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = fibers[i];
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stacks[i]; f.ctx.uc_stack.ss_size = STACK; f.ctx.uc_link = &scheduler;
    makecontext(&f.ctx, trampoline, 0);
    f.state = READY; f.tx = (unsigned)(i % bx); f.ty = (unsigned)(i / bx);
  }
  for (;;) {
    for (size_t j = 0; j < n; ++j) {
      Fiber& f = fibers[reversed ? n - 1 - j : j];
      if (f.state != READY) continue;
      current = &f; threadIdx.x = f.tx; threadIdx.y = f.ty;
      swapcontext(&scheduler, &f.ctx);
      current = nullptr;
      if (error) return error;
    }
    size_t waiting = 0;
    for (size_t i = 0; i < n; ++i) waiting += fibers[i].state == AT_BARRIER;
    if (waiting == 0) return nullptr;  // every thread returned
    if (waiting < n) return "a thread returned while others of its block wait at __syncthreads()";
    for (size_t i = 0; i < n; ++i) fibers[i].state = READY;
    ++barriers_passed;
  }
}
}  // namespace icf_emu
extern "C" const char* emu_error() { return icf_emu::error; }
extern "C" void emu_set_order(int reversed) { icf_emu::reversed = reversed; }
extern "C" unsigned long long emu_barriers_passed() { return icf_emu::barriers_passed; }
"""


def _unpack(k: DeviceKernel) -> str:
    """The kernel's arguments from the launch's `void** a` (each points at one value)."""
    types = [p.ctype for p in k.params]
    return ", ".join(f"*({t}*)a[{j}]" for j, t in enumerate(types))


def _wrapper(k: DeviceKernel) -> list[str]:
    """`int emu_<name>(grid x, y, block x, y, args)`: the launch on the CPU; 0 or 1 (see emu_error)."""
    head = [
        f'extern "C" int emu_{k.name}(unsigned gx, unsigned gy, unsigned bx, unsigned by, void** a) {{',
        "  icf_emu::error = nullptr;",
        "  gridDim.x = gx; gridDim.y = gy; blockDim.x = bx; blockDim.y = by;",
        "  for (unsigned yb = 0; yb < gy; ++yb) for (unsigned xb = 0; xb < gx; ++xb) {",
        "    blockIdx.x = xb; blockIdx.y = yb;",
    ]
    if not k.barriers:  # one thread after the other
        order = "icf_emu::reversed ? bx * by - 1 - t : t"
        loop = [
            "    for (unsigned t = 0; t < bx * by; ++t) {",
            f"      const unsigned i = {order};",
            "      threadIdx.x = i % bx; threadIdx.y = i / bx;",
            f"      {k.name}({_unpack(k)});",
            "      if (icf_emu::error) return 1;",
            "    }",
        ]
    else:  # the block's threads as fibers, together at each barrier
        loop = [
            f"    auto thread = [](void* p) {{ void** a = (void**)p; {k.name}({_unpack(k)}); }};",
            "    if ((icf_emu::error = icf_emu::run_block(bx, by, thread, a))) return 1;",
        ]
    return [*head, *loop, "  }", "  return 0;", "}"]


def emulation_source(device: DeviceModule) -> str:
    """The C++ source of the emulation: header, the module's kernels as written, a wrapper each."""
    lines = [EMU_HEADER, device.header]
    for k in device.kernels:
        lines += [k.source, ""]
    for k in device.kernels:
        lines += _wrapper(k)
    return "\n".join(lines) + "\n"


@dataclasses.dataclass
class EmulatedKernel:
    """A kernel's launch on the CPU (what the host plan's `kernels[name]` holds)."""

    name: str
    fn: Any  # ctypes function emu_<name>
    lib: Any

    def __call__(self, grid: tuple, block: tuple, ptrs: Any) -> None:
        if self.fn(grid[0], grid[1], block[0], block[1], ptrs) != 0:
            raise EmulationError(f"{self.name}: {self.lib.emu_error().decode()}")


class EmulatedRuntime(Runtime):
    """The GPU runtime over NumPy memory; launches run the emulation wrappers."""

    def __init__(self, program_name: str):
        super().__init__(program_name, xp=np)

    def _ptr(self, arr: np.ndarray) -> int:
        return arr.ctypes.data

    def _launch(self, kernel: Any, grid: tuple, block: tuple, args: tuple) -> None:
        boxes = [np.array([a]) for a in args]  # keep every scalar alive while the call runs
        ptrs = (ctypes.c_void_p * len(boxes))(*(b.ctypes.data for b in boxes))
        kernel(grid, block, ptrs)


def load_kernels(device: DeviceModule, thread_order: str = "forward") -> tuple[dict[str, EmulatedKernel], Any]:
    """Build the emulation of `device`: (name -> kernel, the loaded library)."""
    if thread_order not in THREAD_ORDERS:
        raise IcoforgeError(f"thread_order must be one of {THREAD_ORDERS}, got {thread_order!r}")
    if not device.kernels:
        raise IcoforgeError(f"{device.program}: the device module has no kernels")
    so, _ = build_cpu_module(emulation_source(device), f"emu_{device.program[:40]}")
    lib = ctypes.CDLL(str(so))
    lib.emu_error.restype = ctypes.c_char_p
    lib.emu_barriers_passed.restype = ctypes.c_ulonglong
    lib.emu_set_order(THREAD_ORDERS.index(thread_order))
    kernels = {}
    for k in device.kernels:
        fn = getattr(lib, f"emu_{k.name}")
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        kernels[k.name] = EmulatedKernel(k.name, fn, lib)
    return kernels, lib


def load_emulated(art: GPUArtifact, thread_order: str = "forward"):
    """The artifact's program, run by CPU emulation: `program(*args, offset_provider=...)`.
    `thread_order` "reversed": the threads of each block (between barriers) in reverse order."""
    kernels, lib = load_kernels(art.device, thread_order)
    # as on the GPU, the per-field-strides variant (a call whose fields do not fit a stride set) too
    program = bind_program(art, kernels, EmulatedRuntime(art.program_name), lambda other: load_kernels(other.device, thread_order)[0])
    program.icoforge_barriers_passed = lib.emu_barriers_passed  # type: ignore[attr-defined]  # block barriers so far
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


def emulated_allocator():
    """The emulated backends' allocator: GT4Py's CPU allocator, which lays fields out as GT4Py's
    GPU allocators do and as the kernels' stride sets take them (horizontal dimension contiguous,
    fields of one dims and dtype alike; codegen/cuda.py `stride_sets`). Arrays of another layout
    (NumPy's C order) run the per-field-strides variant where the schedule has stride sets on
    (gpu.bind_program)."""
    from gt4py.next import custom_layout_allocators as allocators

    return allocators.StandardCPUFieldBufferAllocator()


def make_emulated_backend(vendor: str = "cuda", schedule: ProgramSchedule | None = None):
    """A GT4Py backend whose programs run the generated CUDA/HIP code by CPU emulation (NumPy
    memory): GT4Py programs with static arguments, e.g. the granule's variants, then go
    through exactly the GPU path (schedules, kernel fusion, shared-memory staging, host plan) on a
    machine without GPU."""
    from gt4py.next import backend as gt_backend

    from icoforge.backend.frontend import fast_frontend

    return gt_backend.Backend(
        name=f"icoforge_emulated_{vendor}",
        executor=EmulatedExecutor(GPUExecutor(vendor, schedule or default_program_schedule(vendor))),
        allocator=emulated_allocator(),
        transforms=fast_frontend.transforms(),  # GT4Py's front end, less repeated work
    )
