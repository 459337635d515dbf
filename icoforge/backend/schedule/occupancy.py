"""Occupancy from a kernel's resources, without a GPU: waves per SIMD on AMD CDNA2/3 (gfx90a,
gfx942) and warps per scheduler on NVIDIA Hopper (sm_90), so that the two read alike (a CDNA CU
has 4 SIMDs of at most 8 waves, a Hopper SM 4 schedulers of at most 16 warps).

AMD, the rules of LLVM's AMDGPU backend (`AMDGPUBaseInfo.cpp`: getNumWavesPerEUWithNumVGPRs,
getOccupancyWithNumSGPRs, getMaxWorkGroupsPerCU; `llvm-calc-occupancy` prints the same math) for
gfx90a and gfx942 (AMDGPUUsage: "unified register file", 512 VGPR+AGPR per lane, wave64):

  * VGPRs: architected VGPRs rounded up to 4 (the AGPRs start at ACCUM_OFFSET, a multiple of 4),
    plus AGPRs, allocated in granules of 8 out of 512: waves = 512 // roundup(total, 8), at most 8;
  * SGPRs (GFX9 and later): <= 80 -> 10, <= 88 -> 9, <= 100 -> 8, else 7 waves (then at most 8);
  * LDS and work-groups: 64 KiB of LDS per CU; a work-group of N waves (N > 1) needs a barrier,
    16 per CU, so at most min(32 // N, 16) work-groups per CU, and LDS // bytes of them; the CU's
    waves are dealt over its 4 SIMDs.

NVIDIA sm_90 (CUDA occupancy calculator, Hopper tuning guide): 65,536 registers per SM allocated
per warp in units of 256 (registers per thread rounded up to 8), at most 64 warps and 32 blocks
per SM, 228 KiB of shared memory per SM (1 KiB of it reserved per block).
"""

from __future__ import annotations

import dataclasses

AMD_ARCHS = ("gfx90a", "gfx942")


@dataclasses.dataclass(frozen=True)
class AMDArch:
    name: str
    product: str
    vgprs_per_lane: int = 512  # unified VGPR + AGPR file
    vgpr_granule: int = 8
    max_waves_per_simd: int = 8
    simds_per_cu: int = 4
    lds_per_cu: int = 64 * 1024
    wave: int = 64
    cus: int = 0


AMD = {
    "gfx90a": AMDArch("gfx90a", "MI250X (per GCD)", cus=110),
    "gfx942": AMDArch("gfx942", "MI300A", cus=228),
}


def _ceil(x: int, m: int) -> int:
    return -(-x // m) * m


def amd_arch(name: str) -> AMDArch:
    if name not in AMD:
        raise ValueError(f"unknown AMD architecture {name!r}; choose of {', '.join(AMD)}")
    return AMD[name]


def amd_vgpr_waves(arch: str, vgprs: int, agprs: int = 0) -> int:
    a = amd_arch(arch)
    total = (_ceil(vgprs, 4) + agprs) if agprs else vgprs
    if total <= a.vgpr_granule:
        return a.max_waves_per_simd
    return max(1, min(a.max_waves_per_simd, a.vgprs_per_lane // _ceil(total, a.vgpr_granule)))


def amd_sgpr_waves(arch: str, sgprs: int) -> int:
    a = amd_arch(arch)
    waves = 10 if sgprs <= 80 else 9 if sgprs <= 88 else 8 if sgprs <= 100 else 7
    return min(waves, a.max_waves_per_simd)


def amd_group_waves(arch: str, threads: int, lds_bytes: int = 0) -> int:
    """Waves per SIMD that work-groups of `threads` using `lds_bytes` of LDS each allow."""
    a = amd_arch(arch)
    waves_per_group = -(-threads // a.wave)
    max_waves_cu = a.max_waves_per_simd * a.simds_per_cu
    groups = max_waves_cu if waves_per_group == 1 else min(max_waves_cu // waves_per_group, 16)
    if lds_bytes:
        groups = min(groups, a.lds_per_cu // lds_bytes)
    return min(a.max_waves_per_simd, groups * waves_per_group // a.simds_per_cu)


def amd_waves_per_simd(arch: str, vgprs: int, agprs: int, sgprs: int, lds_bytes: int, threads: int) -> int:
    """The occupancy of one kernel: waves per SIMD, the smallest of the three limits."""
    return min(amd_vgpr_waves(arch, vgprs, agprs), amd_sgpr_waves(arch, sgprs), amd_group_waves(arch, threads, lds_bytes))


def amd_limiter(arch: str, vgprs: int, agprs: int, sgprs: int, lds_bytes: int, threads: int) -> str:
    """Which resource sets the occupancy: "vgpr", "sgpr", "lds/wg" or "-" (the hardware maximum)."""
    waves = amd_waves_per_simd(arch, vgprs, agprs, sgprs, lds_bytes, threads)
    if waves == amd_arch(arch).max_waves_per_simd:
        return "-"
    if amd_vgpr_waves(arch, vgprs, agprs) == waves:
        return "vgpr"
    return "sgpr" if amd_sgpr_waves(arch, sgprs) == waves else "lds/wg"


SM90_REGISTERS = 65536
SM90_MAX_WARPS = 64
SM90_MAX_BLOCKS = 32
SM90_SMEM = 228 * 1024
SM90_SCHEDULERS = 4


def sm90_warps_per_scheduler(registers: int, threads: int, smem_bytes: int = 0) -> float:
    """Resident warps per SM scheduler (max 16) for blocks of `threads` using `registers` each."""
    warps_per_block = -(-threads // 32)
    per_warp = _ceil(max(registers, 1) * 32, 256)
    blocks = min(SM90_MAX_BLOCKS, SM90_MAX_WARPS // warps_per_block, (SM90_REGISTERS // per_warp) // warps_per_block)
    if smem_bytes:
        blocks = min(blocks, SM90_SMEM // (smem_bytes + 1024))
    return blocks * warps_per_block / SM90_SCHEDULERS
