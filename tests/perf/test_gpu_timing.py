"""Per-kernel GPU timing and the copy ceiling (skipped without CuPy and a GPU)."""

from __future__ import annotations

import pytest

from icoforge.backend.runtime.gpu import cupy_vendor

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(cupy_vendor() is None, reason="needs CuPy and a CUDA/ROCm GPU")]


def test_events_per_kernel_and_ceiling(tiny_grid):
    from icoforge.perf import timing
    from icoforge.perf.sizes import suite_sizes
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_backend, get_program, make_inputs

    vendor = cupy_vendor()
    info = get_program("compute_divergence_of_fluxes_of_rho_and_theta")
    args = make_inputs(info, tiny_grid, allocator=get_backend(f"icoforge-{vendor}"))
    pir = suite_program_ir(info, tiny_grid, suite_sizes(info, tiny_grid).scalars)
    kernels, whole = timing.time_gpu_kernels(pir, args, tiny_grid.connectivities, vendor, repeat=5)
    assert set(kernels) == {k.name for k in pir.kernels()}
    assert all(len(s.samples) == 5 and 0 < s.median < whole.median for s in kernels.values())
    assert timing.gpu_copy_bandwidth(nbytes=256 << 20, repeat=3).bytes_per_s > 1e11
