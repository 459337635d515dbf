"""CI's compile check of every dycore program: CUDA for sm_90 (nvcc), HIP for gfx90a (hipcc) and
the HIP source for sm_90 through the HIP-on-CUDA header (nvcc), default schedules, no spills; the
register/spill table is written to build/gpu-compile-check.md."""

from __future__ import annotations

import pathlib

import pytest

from icoforge.backend.runtime.gpu_check import available_compilers
from icoforge.cli.main import main

TABLE = pathlib.Path(__file__).resolve().parents[2] / "build" / "gpu-compile-check.md"


@pytest.mark.slow
@pytest.mark.skipif(not available_compilers(), reason="neither nvcc nor hipcc installed")
def test_every_program_compiles_for_gpus_without_spills(icoforge_cache):
    TABLE.parent.mkdir(exist_ok=True)
    compilers = [*available_compilers(), *(["hip-on-cuda"] if "nvcc" in available_compilers() else [])]
    rc = main(["gpu-check", "--grid", "R2B3", "--levels", "10", "--jobs", "2", "--out", str(TABLE),
               "--compilers", ",".join(compilers)])  # fmt: skip
    text = TABLE.read_text()
    assert rc == 0, text[-3000:]
    from icoforge.suite.catalogue import program_names

    for name in program_names():
        assert f"| {name} |" in text, f"{name} missing from the compile table"
    assert "ERROR" not in text
    for compiler in compilers:
        label = {"nvcc": "nvcc-sm_90", "hipcc": "hipcc-gfx90a", "hip-on-cuda": "nvcc-sm_90-hip"}[compiler]
        assert text.count(f"| {label} |") >= len(program_names())


AMD_TABLE = TABLE.parent / "amd-resources-gfx90a-gfx942.md"


def _amd_skip_reason() -> str | None:
    from icoforge.backend.runtime.amd_check import BITCODE_DIRS, INSTALL_HINT, find_amd_clang

    if find_amd_clang() is None:
        return f"no clang with HIP support for gfx90a/gfx942 ({INSTALL_HINT})"
    if not pathlib.Path("/usr/include/hip/hip_runtime.h").exists() and not pathlib.Path("/opt/rocm").exists():
        return f"no HIP headers (/usr/include/hip or /opt/rocm; {INSTALL_HINT})"
    if not any((pathlib.Path(d) / "ocml.bc").exists() for d in BITCODE_DIRS):
        return f"no ROCm device libraries in {', '.join(BITCODE_DIRS)} ({INSTALL_HINT})"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_amd_skip_reason() is not None, reason=_amd_skip_reason() or "")
def test_every_program_builds_for_gfx90a_and_gfx942_without_spills(icoforge_cache):
    """Issue 50: the HIP module of every program (vendor default) with clang for gfx90a (MI250X)
    and gfx942 (MI300A): no build error, no spill on either arch (nor on sm_90 where nvcc is
    installed); the table goes to build/amd-resources-gfx90a-gfx942.md."""
    from icoforge.suite.catalogue import program_names

    TABLE.parent.mkdir(exist_ok=True)
    rc = main(["gpu-check", "--target", "hip", "--grid", "R2B3", "--levels", "10", "--jobs", "2", "--out", str(AMD_TABLE)])
    text = AMD_TABLE.read_text()
    assert rc == 0, text[-3000:]
    assert f"{len(program_names())} programs," in text and "0 with a build error or a spill" in text
    for arch in ("gfx90a", "gfx942"):
        assert f"- {arch} (" in text and "no results" not in text
