"""AMD resources without an AMD GPU (issue 50): clang's resource remarks parsed, the occupancy
rules of icoforge.backend.schedule.occupancy against the occupancy clang itself reports for kernels with
forced VGPR, AGPR and LDS use on gfx90a and gfx942, and sm_90's warps per scheduler. The whole
catalogue: tests/backend/test_gpu_compile_all.py (slow)."""

from __future__ import annotations

import pytest

from icoforge.backend.runtime.amd_check import amd_check, find_amd_clang, parse_resource_remarks
from icoforge.backend.runtime.gpu_check import GPUCompileError
from icoforge.backend.schedule.occupancy import (
    amd_group_waves,
    amd_sgpr_waves,
    amd_vgpr_waves,
    amd_waves_per_simd,
    sm90_warps_per_scheduler,
)

NO_CLANG = "no clang with HIP support (apt-get install clang-19 lld-19 hipcc, or ROCm 6+)"

REMARKS = """\
k.hip:3:1: remark: Function Name: first_k0 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     SGPRs: 26 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs: 42 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     AGPRs: 4 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     SGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs Spill: 2 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     LDS Size [bytes/block]: 2048 [-Rpass-analysis=kernel-resource-usage]
k.hip:9:1: remark: Function Name: second_k1 [-Rpass-analysis=kernel-resource-usage]
k.hip:9:1: remark:     SGPRs: 16 [-Rpass-analysis=kernel-resource-usage]
k.hip:9:1: remark:     VGPRs: 10 [-Rpass-analysis=kernel-resource-usage]
"""


def test_remarks_are_parsed_per_kernel():
    first, second = parse_resource_remarks(REMARKS)
    assert (first.kernel, first.sgprs, first.vgprs, first.agprs, first.scratch_bytes) == ("first_k0", 26, 42, 4, 16)
    assert (first.compiler_occupancy, first.sgpr_spill, first.vgpr_spill, first.lds_bytes) == (8, 3, 2, 2048)
    assert first.spills and not second.spills
    assert (second.kernel, second.vgprs, second.agprs, second.compiler_occupancy) == ("second_k1", 10, 0, 0)


def test_occupancy_rules():
    assert amd_vgpr_waves("gfx942", 64) == 8 and amd_vgpr_waves("gfx942", 65) == 7  # 512 // 72
    assert amd_vgpr_waves("gfx90a", 128) == 4 and amd_vgpr_waves("gfx90a", 256) == 2 and amd_vgpr_waves("gfx90a", 512) == 1
    assert amd_vgpr_waves("gfx942", 61, 40) == 4  # AGPRs start at a multiple of 4: 64 + 40 = 104 -> 512 // 104
    assert amd_vgpr_waves("gfx942", 60, 36) == 5  # 60 + 36 = 96 -> 512 // 96
    assert [amd_sgpr_waves("gfx942", s) for s in (80, 88, 100, 102)] == [8, 8, 8, 7]
    assert amd_group_waves("gfx942", 256) == 8 and amd_group_waves("gfx942", 1024) == 8
    assert amd_group_waves("gfx942", 256, 20 * 1024) == 3  # 3 work-groups of 4 waves over 4 SIMDs
    assert amd_waves_per_simd("gfx942", 100, 0, 30, 0, 256) == 4
    assert sm90_warps_per_scheduler(32, 256) == 16 and sm90_warps_per_scheduler(64, 256) == 8
    assert sm90_warps_per_scheduler(255, 256) == 2 and sm90_warps_per_scheduler(40, 128) == 12
    with pytest.raises(ValueError, match="choose of gfx90a, gfx942"):
        amd_vgpr_waves("gfx1100", 10)


def _kernel(name: str, vgpr: int, agpr: int, lds: int) -> str:
    clobbers = [f'"v{vgpr - 1}"'] + ([f'"a{agpr - 1}"'] if agpr else [])
    smem = f"  __shared__ double s[{lds // 8}];\n  s[threadIdx.x] = x[0];\n  __syncthreads();\n" if lds else ""
    use = "s[threadIdx.x + 1]" if lds else "1.0"
    return (f'extern "C" __global__ void __attribute__((amdgpu_flat_work_group_size(1, 256))) {name}(double* x) {{\n'
            f"{smem}  asm volatile(\"\" ::: {', '.join(clobbers)});\n  x[threadIdx.x] = {use};\n}}\n")  # fmt: skip


CASES = [(24, 0, 0), (65, 0, 0), (100, 0, 0), (130, 0, 0), (200, 0, 0), (256, 0, 0), (61, 40, 0), (128, 128, 0),
         (32, 0, 20 * 1024), (32, 0, 40 * 1024), (96, 0, 12 * 1024)]  # fmt: skip


@pytest.mark.skipif(find_amd_clang() is None, reason=NO_CLANG)
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_our_occupancy_equals_clangs(arch):
    source = "#include <hip/hip_runtime.h>\n" + "".join(_kernel(f"k{i}", *c) for i, c in enumerate(CASES))
    got = {r.kernel: r for r in amd_check(source, arch)}
    assert len(got) == len(CASES)
    for i, (vgpr, agpr, lds) in enumerate(CASES):
        r = got[f"k{i}"]
        assert r.vgprs >= vgpr and r.agprs >= agpr and r.lds_bytes >= lds, (i, r)
        ours = amd_waves_per_simd(arch, r.vgprs, r.agprs, r.sgprs, r.lds_bytes, 256)
        assert ours == r.compiler_occupancy, f"case {i} {(vgpr, agpr, lds)}: ours {ours}, clang {r.compiler_occupancy} ({r})"


@pytest.mark.skipif(find_amd_clang() is None, reason=NO_CLANG)
def test_a_build_error_names_the_compiler_and_the_arch_is_checked():
    with pytest.raises(GPUCompileError, match="failed"):
        amd_check('extern "C" __global__ void k(double* x) { x[0] = undefined_name; }', "gfx942")
    with pytest.raises(GPUCompileError, match="not an AMD architecture name"):
        amd_check('extern "C" __global__ void k(double* x) { x[0] = 1.0; }', "sm_90")


def test_sgprs_in_vgpr_lanes_are_noted_and_memory_spills_fail():
    """SGPRs spilt into VGPR lanes cost instructions, not memory: a note beside the table. A VGPR
    spill or any scratch is a problem (gpu-check exits 1)."""
    from icoforge.backend.runtime.amd_check import AMDKernelResources
    from icoforge.perf.amd_resources import ResourceRow

    def row(vgpr_spill, sgpr_spill, scratch):
        res = AMDKernelResources("k7", 32, 106, 0, scratch, vgpr_spill, sgpr_spill, 0, 8)
        return ResourceRow("p", "k7", "map", 256, 1, (("gfx942", res),), None, 0, None)

    lanes = row(0, 36, 0)
    assert lanes.problems() == [] and lanes.notes() == ["gfx942: 36 SGPRs spilt into VGPR lanes (no scratch)"]
    for bad in (row(2, 0, 0), row(0, 36, 16), row(0, 0, 8)):
        assert bad.problems() and not bad.notes(), bad
