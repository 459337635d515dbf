"""Compile checks for generated GPU code without a GPU: nvcc (sm_90, `-Xptxas -v`) and hipcc
(gfx90a). Registers, spills and shared memory per kernel are parsed from the assembler report."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from icoforge import settings
from icoforge.errors import IcoforgeError


@dataclass(frozen=True)
class KernelResources:
    kernel: str
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int


class GPUCompileError(IcoforgeError):
    pass


def find_nvcc() -> str | None:
    return shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None
    )


def find_hipcc() -> str | None:
    return shutil.which("hipcc")


_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")


def available_compilers() -> tuple[str, ...]:
    """"nvcc" and/or "hipcc", whichever is installed here."""
    return tuple(c for c, found in (("nvcc", find_nvcc()), ("hipcc", find_hipcc())) if found)


def parse_ptxas(report: str) -> list[KernelResources]:
    out: list[KernelResources] = []
    current = None
    stack = spill_s = spill_l = 0
    for line in report.splitlines():
        if m := _FUNC.search(line):
            current = m.group(1)
            stack = spill_s = spill_l = 0
        elif (m := _SPILL.search(line)) and current:
            stack, spill_s, spill_l = (int(x) for x in m.groups())
        elif (m := _USED.search(line)) and current:
            smem = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            out.append(KernelResources(current, int(m.group(1)), spill_s, spill_l, smem, stack))
            current = None
    return out


def _compile(compiler: str, source: str, suffix: str, args: list[str], env: dict[str, str] | None = None) -> str:
    """Compile `source` (device code only: the runtime loads modules through NVRTC/hiprtc, so
    there is no host code to check, and the host pass doubled the time) into a scratch folder;
    the compiler's diagnostics (stderr), which hold the resource report."""
    name = os.path.basename(compiler)
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, f"k.{suffix}")
        with open(src, "w") as f:
            f.write(source)
        cmd = [compiler, *args, src, "-o", os.path.join(d, "k.out")]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            raise GPUCompileError(f"{name} failed:\n{res.stderr[-4000:]}")
        return res.stderr


def nvcc_check(source: str, arch: str = "sm_90", extra: tuple[str, ...] = ()) -> list[KernelResources]:
    nvcc = find_nvcc()
    if nvcc is None:
        raise GPUCompileError("nvcc not found")
    return parse_ptxas(_compile(nvcc, source, "cu", [f"-arch={arch}", "-std=c++17", "-Xptxas", "-v", "-cubin", *extra]))


def hipcc_check(source: str, arch: str = "gfx90a") -> list[KernelResources]:
    hipcc = find_hipcc()
    if hipcc is None:
        raise GPUCompileError("hipcc not found (apt-get install hipcc)")
    args = [f"--offload-arch={arch}", "-std=c++17", "-O3", "-Rpass-analysis=kernel-resource-usage", "--cuda-device-only", "-c"]
    return parse_amdgpu_remarks(_compile(hipcc, source, "hip", args, settings.environment(HIP_PLATFORM="amd")))


_AMD_FN = re.compile(r"Function Name: (\w+)")
_AMD_VGPR = re.compile(r"VGPRs: (\d+)")
_AMD_SPILL = re.compile(r"VGPRs Spill: (\d+)")
_AMD_LDS = re.compile(r"LDS Size \[bytes/block\]: (\d+)")
_AMD_SCRATCH = re.compile(r"ScratchSize \[bytes/lane\]: (\d+)")


def parse_amdgpu_remarks(report: str) -> list[KernelResources]:
    out: list[KernelResources] = []
    cur: dict = {}
    for line in report.splitlines():
        if m := _AMD_FN.search(line):
            if cur.get("name"):
                out.append(_amd_res(cur))
            cur = {"name": m.group(1)}
        for key, rx in (("vgpr", _AMD_VGPR), ("spill", _AMD_SPILL), ("lds", _AMD_LDS), ("scratch", _AMD_SCRATCH)):
            if (m := rx.search(line)) and cur:
                cur.setdefault(key, int(m.group(1)))
    if cur.get("name"):
        out.append(_amd_res(cur))
    return out


def _amd_res(cur: dict) -> KernelResources:
    return KernelResources(cur["name"], cur.get("vgpr", 0), cur.get("spill", 0), 0, cur.get("lds", 0), cur.get("scratch", 0))
