"""numpy rounding the same on every x86-64 machine, for the bitwise references.

numpy 2.x sends float64 trigonometry (sin, cos, arctan2, ...) to Intel's SVML on CPUs with AVX-512
(its dispatch group X86_V4) and to other code on AVX2 ones, and the last bits differ. The grid that
icon-grid-generator makes, and every static field and step computed on it, then differ between the
two kinds of machine: the references recorded on an Intel AVX-512 VM until 2026-12-05 failed on the
AMD EPYC (AVX2) one CI ran on from 2026-12-06. With those paths switched off
(`NPY_DISABLE_CPU_FEATURES`, read once when numpy is imported) an AVX-512 machine rounds as an
AVX2 one does. The test suite runs so (tests/conftest.py, the Makefile) and recording a reference
requires it. Nothing here imports numpy at module level: the setting must come first."""

from __future__ import annotations

from icoforge.errors import IcoforgeError

NPY_DISABLE_CPU_FEATURES = "X86_V4 AVX512_ICL AVX512_SPR"


def avx512_paths_on() -> bool:
    """Whether this process's numpy dispatches to its AVX-512 code."""
    from numpy._core._multiarray_umath import __cpu_features__

    return bool(__cpu_features__.get("X86_V4") or __cpu_features__.get("AVX512_SKX"))


def require_portable_rounding(what: str) -> None:
    """Refuse `what` (recording or checking a bitwise reference) with numpy's AVX-512 paths on."""
    if avx512_paths_on():
        raise IcoforgeError(
            f"{what}: numpy rounds with its AVX-512 paths in this process, so its results would not match "
            f"bit for bit those of AVX2 machines (where the references are recorded and CI runs). Run it with "
            f'NPY_DISABLE_CPU_FEATURES="{NPY_DISABLE_CPU_FEATURES}" in the environment.'
        )
