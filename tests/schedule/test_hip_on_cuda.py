"""HIP on CUDA (icoforge.backend.runtime.hip_on_cuda): the generated HIP module, unchanged but for the
header in front, compiles with nvcc for sm_90 (here, no GPU needed) -- vendor default and an
MI300-style schedule with every HIP-only piece (launch bounds, waves per EU, chiplet remap,
shared-memory staging) -- and on a GPU gives GT4Py's results (gtfn_cpu's stored outputs,
icoforge/suite/gt4py_references.json, seed 0) and the CPU target's (seed 3).

Every program: `icoforge gpu-check --compilers hip-on-cuda` (tests/backend/test_gpu_compile_all.py,
slow); on the H200: scripts/device/hip_on_cuda.sh."""

from __future__ import annotations

import dataclasses
import re

import pytest
from conftest import REPRESENTATIVES

from icoforge.backend.runtime.gpu import cupy_vendor, gpu_artifact
from icoforge.backend.runtime.gpu_check import find_nvcc, nvcc_check
from icoforge.backend.runtime.hip_on_cuda import header, hip_source_on_cuda, make_hip_on_cuda_backend, on_cuda
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule
from icoforge.suite import references as refs
from icoforge.suite.catalogue import get_program
from icoforge.suite.verify import verify

MI300 = Schedule(block=(256, 1), chiplet_remap=True, chiplets=8, max_registers=128, smem_tables=("*",), k_per_thread=2)
SCHEDULES = {"hip-default": VENDOR_DEFAULTS["hip"], "mi300": MI300}


def test_on_cuda_keeps_the_hip_module_and_puts_the_header_in_front(representative_irs):
    art = gpu_artifact(representative_irs["apply_divergence_damping_and_update_vn"], "hip", ProgramSchedule(MI300))
    cu = on_cuda(art)
    assert cu.module_source == header() + "\n" + art.module_source
    assert cu.device.kernels == art.device.kernels and cu.host_plan == art.host_plan
    assert cu.options == ("-std=c++17", "--fmad=false")  # NVRTC's, no contraction (as hiprtc's -ffp-contract=off)
    src = cu.module_source
    assert "amdgpu_flat_work_group_size(1, 256)" in src and "amdgpu_waves_per_eu(" in src  # HIP's attributes, as printed
    assert "icf_chiplet_block(" in src and "__syncthreads()" in src
    with pytest.raises(Exception, match="HIP artifact"):
        on_cuda(dataclasses.replace(art, vendor="cuda"))


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("name", list(REPRESENTATIVES)[2:])
def test_hip_source_compiles_with_nvcc_through_the_header(name, schedule, representative_irs):
    art = gpu_artifact(representative_irs[name], "hip", ProgramSchedule(SCHEDULES[schedule]))
    resources = nvcc_check(hip_source_on_cuda(art.module_source))
    assert {r.kernel for r in resources} == set(art.kernel_names)
    for k in art.device.kernels:  # staged tables: CUDA's static shared memory, as on AMD
        assert next(r for r in resources if r.kernel == k.name).shared_bytes == k.smem_bytes


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_the_hip_launch_bounds_reach_ptx(tmp_path, representative_irs):
    """amdgpu_flat_work_group_size(1, N) becomes CUDA's launch_bounds(N): .maxntid N in the PTX."""
    import subprocess

    art = gpu_artifact(representative_irs["compute_divergence_of_fluxes_of_rho_and_theta"], "hip", ProgramSchedule(MI300))
    (tmp_path / "k.cu").write_text(hip_source_on_cuda(art.module_source))
    subprocess.run([find_nvcc(), "-arch=sm_90", "-std=c++17", "-ptx", "k.cu", "-o", "k.ptx"], cwd=tmp_path, check=True)
    ptx = (tmp_path / "k.ptx").read_text()
    assert len(re.findall(r"\.maxntid 256, 1, 1", ptx)) == len(art.kernel_names)


@pytest.mark.gpu
@pytest.mark.skipif(cupy_vendor() != "cuda", reason="needs CuPy and an NVIDIA GPU")
@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("name", list(REPRESENTATIVES))
def test_hip_source_on_an_nvidia_gpu_equals_the_cpu_target(name, schedule, tiny_grid):
    backend = make_hip_on_cuda_backend(ProgramSchedule(SCHEDULES[schedule]))
    stored = refs.check_program(get_program(name), backend, tiny_grid, refs.load_store(static="icon4py"))
    assert stored.passed, stored.summary()
    res = verify(get_program(name), backend, "icoforge-cpu", tiny_grid, seed=3, rtol=1e-12)
    assert res.passed, res.summary()
