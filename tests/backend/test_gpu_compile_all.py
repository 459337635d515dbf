"""CI's compile check of every dycore program: CUDA for sm_90 (nvcc), HIP for gfx90a (hipcc) and
the HIP source for sm_90 through the HIP-on-CUDA header (nvcc), default schedules, no spills; the
register/spill table is written to build/gpu-compile-check.md."""

from __future__ import annotations

import pathlib

import pytest

from icoforge.backend.gpu_check import available_compilers
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
