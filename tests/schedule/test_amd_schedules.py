"""AMD schedules (issue 50 item 4): the HIP vendor default (256x1), the chiplet (XCD) remap for 6
(MI300A) and 8 (MI300X) chiplets, wave64 block shapes and VGPR caps.

* On the CPU (CI): the HIP module of each schedule, run by the emulator (icoforge.backend.runtime.emulate),
  equals the HIP vendor default's bit for bit (rtol 0, atol 0, outputs poisoned, whole arrays);
  the HIP default itself is checked against icoforge-cpu in tests/backend/test_gpu_emulation.py.
* With clang (gfx942): the cap reaches the compiler: a kernel under `max_registers` R
  (`amdgpu_waves_per_eu(512 // R)`) uses at most 512 // waves VGPRs, with no scratch.
* On an NVIDIA GPU (a device session), the same schedules through HIP-on-CUDA:
      ICOFORGE_GPU_SCHEDULE_PROGRAMS=... pytest -m gpu tests/schedule/test_amd_schedules.py
  (`test_amd_schedules_on_an_nvidia_gpu`, skipped without CuPy and a GPU).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPRESENTATIVES

from icoforge.backend.runtime.amd_check import amd_check, find_amd_clang
from icoforge.backend.runtime.emulate import emulated_allocator, load_emulated
from icoforge.backend.runtime.gpu import cupy_vendor, gpu_artifact
from icoforge.backend.schedule.occupancy import amd_vgpr_waves
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule
from icoforge.suite.catalogue import get_program
from icoforge.suite.runner import CustomBackend
from icoforge.suite.verify import verify

S = Schedule
AMD_SCHEDULES: dict[str, Schedule] = {
    "chiplet6": S(block=(256, 1), chiplet_remap=True, chiplets=6),  # MI300A: 6 XCDs
    "chiplet8": S(block=(256, 1), chiplet_remap=True, chiplets=8),  # MI300X: 8 XCDs
    "wave64-64x1": S(block=(64, 1)),
    "wave64-64x4": S(block=(64, 4)),
    "wave64-128x2": S(block=(128, 2)),
    "wave64-1024x1": S(block=(1024, 1)),
    "vgpr-cap-64": S(block=(256, 1), max_registers=64),
    "vgpr-cap-128": S(block=(256, 1), max_registers=128),
    "mi300a": S(block=(256, 1), chiplet_remap=True, chiplets=6, max_registers=128, k_per_thread=2, smem_tables=("*",)),
}
# a C2E reduction, a scan with tuple state, temporaries with host conditionals
PROGRAMS = ("compute_divergence_of_fluxes_of_rho_and_theta", "solve_tridiagonal_matrix_for_w_forward_sweep",
            "apply_divergence_damping_and_update_vn")  # fmt: skip
assert set(PROGRAMS) <= set(REPRESENTATIVES)


def emulated_hip(schedule: Schedule) -> CustomBackend:
    def prepare(info, grid, args):
        art = gpu_artifact(program_ir(info.program, grid.connectivities), "hip", ProgramSchedule(schedule))
        program = load_emulated(art)
        names = [p.name for p in info.params]
        return lambda a: program(*[a[n] for n in names], offset_provider=grid.connectivities)

    return CustomBackend("emulated-hip", prepare, allocator=emulated_allocator())


def check_bit_for_bit(name: str, schedule: Schedule, grid) -> None:
    res = verify(get_program(name), emulated_hip(schedule), emulated_hip(VENDOR_DEFAULTS["hip"]), grid, seed=29,
                 rtol=0.0, atol=0.0, static_params="none")  # fmt: skip
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs), "nothing written: nothing compared"


def test_the_mi300a_schedule_equals_the_hip_default_bit_for_bit(tiny_grid):
    check_bit_for_bit("apply_divergence_damping_and_update_vn", AMD_SCHEDULES["mi300a"], tiny_grid)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", list(AMD_SCHEDULES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_amd_schedules_equal_the_hip_default_bit_for_bit(name, schedule, tiny_grid):
    check_bit_for_bit(name, AMD_SCHEDULES[schedule], tiny_grid)


def test_the_amd_knobs_reach_the_hip_source(representative_irs):
    """What the emulator cannot see: the attributes the AMD compiler acts on."""
    ir = representative_irs["apply_divergence_damping_and_update_vn"]
    for label, s, expect in (("chiplet6", AMD_SCHEDULES["chiplet6"], "6u)"),
                             ("vgpr-cap-64", AMD_SCHEDULES["vgpr-cap-64"], "amdgpu_waves_per_eu(8)"),
                             ("vgpr-cap-128", AMD_SCHEDULES["vgpr-cap-128"], "amdgpu_waves_per_eu(4)"),
                             ("wave64-64x4", AMD_SCHEDULES["wave64-64x4"], "amdgpu_flat_work_group_size(1, 256)"),
                             ("wave64-1024x1", AMD_SCHEDULES["wave64-1024x1"], "amdgpu_flat_work_group_size(1, 1024)")):  # fmt: skip
        source = gpu_artifact(ir, "hip", ProgramSchedule(s)).module_source
        assert expect in source, f"{label}: {expect!r} not in the HIP source"
    default = gpu_artifact(ir, "hip", ProgramSchedule(VENDOR_DEFAULTS["hip"])).module_source
    assert "amdgpu_waves_per_eu" not in default and "icf_chiplet_block(blockIdx" not in default


@pytest.mark.skipif(find_amd_clang() is None, reason="no clang with HIP support (apt-get install clang-19 lld-19 hipcc)")
@pytest.mark.parametrize("cap", [64, 128])
def test_a_vgpr_cap_bounds_the_gfx942_registers(cap, representative_irs):
    ir = representative_irs["apply_divergence_damping_and_update_vn"]
    art = gpu_artifact(ir, "hip", ProgramSchedule(S(block=(256, 1), max_registers=cap)))
    resources = amd_check(art.module_source, "gfx942")
    assert {r.kernel for r in resources} == set(art.kernel_names)
    for r in resources:
        assert r.vgprs + r.agprs <= cap, f"{r.kernel}: {r.vgprs} VGPRs + {r.agprs} AGPRs above the cap {cap}"
        assert amd_vgpr_waves("gfx942", r.vgprs, r.agprs) >= 512 // cap
        assert not r.scratch_bytes, f"{r.kernel}: {r.scratch_bytes} B scratch under the cap {cap}"


@pytest.mark.gpu
@pytest.mark.skipif(cupy_vendor() != "cuda", reason="needs CuPy and an NVIDIA GPU (HIP-on-CUDA)")
@pytest.mark.parametrize("schedule", list(AMD_SCHEDULES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_amd_schedules_on_an_nvidia_gpu(name, schedule, tiny_grid):
    from icoforge.backend.runtime.hip_on_cuda import make_hip_on_cuda_backend

    backend = make_hip_on_cuda_backend(ProgramSchedule(AMD_SCHEDULES[schedule]))
    reference = make_hip_on_cuda_backend(ProgramSchedule(VENDOR_DEFAULTS["hip"]))
    res = verify(get_program(name), backend, reference, tiny_grid, seed=29, rtol=0.0, atol=0.0)
    assert res.passed, res.summary()
