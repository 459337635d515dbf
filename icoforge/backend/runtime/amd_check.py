"""HIP source compiled for AMD GPUs without one: gfx90a (MI250X) and gfx942 (MI300A).

The compiler is clang with HIP support: ROCm's (`/opt/rocm/llvm/bin/clang`, ROCm 6 or later
knows gfx942) or a distribution's clang 17-20 (Debian 12: `apt-get install clang-19 lld-19
hipcc`; Debian's hipcc, ROCm 5.2, predates gfx942, but its HIP headers and device libraries
serve clang-19). The resources per kernel come from the backend's remarks
(`-Rpass-analysis=kernel-resource-usage`): VGPRs, SGPRs, AGPRs, scratch per lane, spills, LDS
and the compiler's own occupancy.

Device libraries: clang links ROCm's bitcode libraries (ocml, ockl, oclc_*) for the math
functions. A library folder without the arch's `oclc_isa_version_<N>.bc` (Debian's ROCm 5.2 has
none for gfx942) gets a shadow folder in the icoforge cache: links to every library and that one
file, made from a sibling's (gfx940's) with only the version constant changed (9402 for gfx942).
That constant is what ocml reads the ISA from; nothing else differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import subprocess

from icoforge.backend.runtime.gpu_check import GPUCompileError, _compile
from icoforge.cache import atomic_path, cache_dir, file_lock

CLANG_CANDIDATES = ("/opt/rocm/llvm/bin/clang", "clang-19", "clang-20", "clang-18", "clang-17")
BITCODE_DIRS = (
    "/opt/rocm/amdgcn/bitcode",
    "/opt/rocm/lib/llvm/lib/clang/amdgcn/bitcode",
    "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
    "/usr/lib/amdgcn/bitcode",
)
INSTALL_HINT = "apt-get install clang-19 lld-19 hipcc (Debian 12), or ROCm 6+ (/opt/rocm/llvm/bin/clang)"


@dataclasses.dataclass(frozen=True)
class AMDKernelResources:
    kernel: str
    vgprs: int
    sgprs: int
    agprs: int
    scratch_bytes: int  # per lane
    vgpr_spill: int
    sgpr_spill: int
    lds_bytes: int
    compiler_occupancy: int  # waves per SIMD as the compiler reports it (0: not reported)

    @property
    def spills(self) -> bool:
        """Spills that reach memory: VGPRs (and anything else) to scratch. A failure."""
        return bool(self.vgpr_spill or self.scratch_bytes)

    @property
    def sgpr_lane_spills(self) -> bool:
        """SGPRs spilt into VGPR lanes (v_writelane/v_readlane): extra instructions, no memory
        traffic while scratch stays 0. Reported beside the table, not a failure."""
        return bool(self.sgpr_spill) and not self.scratch_bytes


def find_amd_clang() -> str | None:
    for c in CLANG_CANDIDATES:
        path = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if path:
            return path
    return None


def _rocm_path(clang: str) -> str:
    if clang.startswith("/opt/rocm"):
        return "/opt/rocm"
    if os.path.exists("/usr/include/hip/hip_runtime.h"):
        return "/usr"
    raise GPUCompileError(f"no HIP headers for {clang} (/usr/include/hip); {INSTALL_HINT}")


def _isa_version(arch: str) -> int:
    m = re.fullmatch(r"gfx(\d+)([0-9a-f])([0-9a-f])", arch)
    if not m:
        raise GPUCompileError(f"not an AMD architecture name: {arch!r} (e.g. gfx90a, gfx942)")
    return int(m.group(1)) * 1000 + int(m.group(2), 16) * 100 + int(m.group(3), 16)


def device_library_dir(clang: str, arch: str) -> str:
    """A bitcode folder holding the arch's ISA-version library (the shadow folder, made once)."""
    found = next((d for d in BITCODE_DIRS if os.path.exists(os.path.join(d, "ocml.bc"))), None)
    if found is None:
        raise GPUCompileError(f"no ROCm device libraries (ocml.bc) in {', '.join(BITCODE_DIRS)}; {INSTALL_HINT}")
    isa = f"oclc_isa_version_{arch[3:]}.bc"
    if os.path.exists(os.path.join(found, isa)):
        return found
    shadow = cache_dir("amdgcn-bitcode") / hashlib.sha256(f"{found}:{arch}".encode()).hexdigest()[:16]
    if (shadow / isa).exists():
        return str(shadow)
    with file_lock(shadow.with_suffix(".lock")):
        if not (shadow / isa).exists():
            _make_shadow(pathlib.Path(found), shadow, arch, clang)
    return str(shadow)


def _make_shadow(found: pathlib.Path, shadow: pathlib.Path, arch: str, clang: str) -> None:
    siblings = sorted(found.glob(f"oclc_isa_version_{arch[3:5]}*.bc")) or sorted(found.glob("oclc_isa_version_9*.bc"))
    if not siblings:
        raise GPUCompileError(f"{found}: no oclc_isa_version_9*.bc to make {arch}'s from")
    version = re.search(r"clang(-\d+)?$", clang)
    suffix = version.group(1) or "" if version else ""  # clang-19 -> llvm-dis-19; ROCm's clang -> llvm-dis
    tools = []
    for tool in ("llvm-dis", "llvm-as"):
        beside = os.path.join(os.path.dirname(clang), tool + suffix)
        tools.append(beside if os.path.exists(beside) else shutil.which(tool + suffix))
    if not all(tools):
        raise GPUCompileError(f"llvm-dis{suffix} and llvm-as{suffix} are needed to make {arch}'s ISA library")
    text = subprocess.run([tools[0], str(siblings[-1]), "-o", "-"], capture_output=True, text=True, check=True).stdout
    text, n = re.subn(r"(@__oclc_ISA_version = .* i32 )\d+", rf"\g<1>{_isa_version(arch)}", text)
    if n != 1:
        raise GPUCompileError(f"{siblings[-1]}: no __oclc_ISA_version constant found")
    shadow.mkdir(parents=True, exist_ok=True)
    for f in found.glob("*.bc"):
        if not (shadow / f.name).exists():
            os.symlink(f, shadow / f.name)
    with atomic_path(shadow / f"oclc_isa_version_{arch[3:]}.bc") as tmp:
        subprocess.run([tools[1], "-o", str(tmp)], input=text, text=True, check=True, capture_output=True)


def amd_check(source: str, arch: str, clang: str | None = None) -> list[AMDKernelResources]:
    """Compile the HIP module `source` for `arch` (device code only, linked into a code object)."""
    _isa_version(arch)  # a bad name fails here, before any compiler runs
    clang = clang or find_amd_clang()
    if clang is None:
        raise GPUCompileError(f"no clang with HIP support found ({', '.join(CLANG_CANDIDATES)}); {INSTALL_HINT}")
    args = [
        "-x", "hip", f"--offload-arch={arch}", "-std=c++17", "-O3", "--cuda-device-only", "-c",
        "-Rpass-analysis=kernel-resource-usage", f"--rocm-path={_rocm_path(clang)}",
        f"--rocm-device-lib-path={device_library_dir(clang, arch)}",
    ]  # fmt: skip
    return parse_resource_remarks(_compile(clang, source, "hip", args))


_REMARK = re.compile(r"remark:\s+(Function Name|SGPRs|VGPRs|AGPRs|ScratchSize \[bytes/lane\]|Occupancy \[waves/SIMD\]"
                     r"|SGPRs Spill|VGPRs Spill|LDS Size \[bytes/block\]): (\w+)")  # fmt: skip
_FIELDS = {"SGPRs": "sgprs", "VGPRs": "vgprs", "AGPRs": "agprs", "ScratchSize [bytes/lane]": "scratch_bytes",
           "Occupancy [waves/SIMD]": "compiler_occupancy", "SGPRs Spill": "sgpr_spill", "VGPRs Spill": "vgpr_spill",
           "LDS Size [bytes/block]": "lds_bytes"}  # fmt: skip


def parse_resource_remarks(report: str) -> list[AMDKernelResources]:
    """The `kernel-resource-usage` remarks of clang's AMDGPU backend, one record per kernel."""
    out: list[AMDKernelResources] = []
    cur: dict = {}

    def close() -> None:
        if cur:
            out.append(AMDKernelResources(**{f: cur.get(f, 0) for f in _FIELDS.values()}, kernel=cur["kernel"]))

    for m in _REMARK.finditer(report):
        key, value = m.groups()
        if key == "Function Name":
            close()
            cur = {"kernel": value}
        elif cur and _FIELDS[key] not in cur:
            cur[_FIELDS[key]] = int(value)
    close()
    return out
