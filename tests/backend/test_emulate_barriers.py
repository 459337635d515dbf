"""The CPU emulation's barrier (icoforge.backend.runtime.emulate): a block's threads run as fibers and meet
at `__syncthreads()`; shared memory is the block's; a thread that returns while others wait is an
error; running each phase's threads backwards exposes a read that no barrier orders. Small
hand-written device modules, as the CUDA printer makes them (codegen.device)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from icoforge.backend.codegen.device import DeviceKernel, DeviceModule, DeviceParam
from icoforge.backend.runtime.emulate import EmulationError, emulation_source, load_kernels

PARAMS = (DeviceParam("double*", "out"), DeviceParam("const int", "n"))


def module(body: str, barriers: bool = True) -> DeviceModule:
    src = f'extern "C" __global__ void rotate(double* __restrict__ out, const int n) {{\n{body}\n}}'
    return DeviceModule("barrier_test", "cuda", "// test module", (DeviceKernel("rotate", PARAMS, src, barriers),))


# every thread writes its slot, then reads its right neighbour's: needs the barrier between
ROTATE = """  __shared__ double s[64];
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
  s[t] = 100.0 * blockIdx.x + t;
  {barrier}
  out[blockIdx.x * nt + t] = s[(t + 1) % nt];
  {barrier}
  s[t] = -1.0;  // a second phase: the next block must not see these before it stages its own"""


def run(mod: DeviceModule, grid: int, block: tuple[int, int], order: str = "forward") -> np.ndarray:
    kernels, _ = load_kernels(mod, order)
    n = grid * block[0] * block[1]
    out = np.full(n, np.nan)
    args = [np.array([out.ctypes.data], dtype=np.uint64), np.array([n], dtype=np.int32)]
    ptrs = (ctypes.c_void_p * 2)(*(a.ctypes.data for a in args))
    kernels["rotate"]((grid, 1, 1), (block[0], block[1], 1), ptrs)
    return out


def expected(grid: int, nt: int) -> np.ndarray:
    return np.array([100.0 * b + (t + 1) % nt for b in range(grid) for t in range(nt)])


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_barrier_orders_the_shared_memory_of_a_block(order, icoforge_cache):
    mod = module(ROTATE.format(barrier="__syncthreads();"))
    assert "__syncthreads();" in emulation_source(mod)
    np.testing.assert_array_equal(run(mod, 3, (8, 4), order), expected(3, 32))


def test_a_missing_barrier_shows_as_other_results_in_reversed_order(icoforge_cache):
    mod = module(ROTATE.format(barrier=""), barriers=False)
    forward, backward = run(mod, 3, (16, 1)), run(mod, 3, (16, 1), "reversed")
    right = expected(3, 16)
    assert not np.array_equal(forward, right) or not np.array_equal(backward, right)
    assert not np.array_equal(forward, backward)


def test_a_thread_that_returns_before_the_barrier_is_an_error(icoforge_cache):
    body = "  if (threadIdx.x == 3) return;\n" + ROTATE.format(barrier="__syncthreads();")
    with pytest.raises(EmulationError, match="rotate: a thread returned while others of its block wait"):
        run(module(body), 2, (8, 1))


def test_a_barrier_in_a_kernel_not_marked_as_having_one_is_an_error(icoforge_cache):
    with pytest.raises(EmulationError, match="not marked as having barriers"):
        run(module(ROTATE.format(barrier="__syncthreads();"), barriers=False), 1, (4, 1))
