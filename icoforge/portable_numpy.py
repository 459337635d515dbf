"""numpy rounding the same on every x86-64 machine, for the bitwise references.

Two places in numpy round differently on CPUs with AVX-512 than on AVX2 ones:
- numpy 2.x sends float64 trigonometry (sin, cos, arctan2, ...) to Intel's SVML on AVX-512 (its
  dispatch group X86_V4). The grid that icon-grid-generator makes, and every static field and step
  computed on it, then differ in their last bits. Switched off with `NPY_DISABLE_CPU_FEATURES`.
- numpy's linear algebra (OpenBLAS, built for every x86 core and choosing at load time) runs its
  SkylakeX kernels on AVX-512 and its Haswell ones on AVX2 (AMD Zen included): the RBF and
  least-squares coefficients (`np.linalg` in icon4py's interpolation factory) differ in their last
  bits. `OPENBLAS_CORETYPE=Haswell` picks the AVX2 kernels everywhere.
The references recorded on an Intel AVX-512 VM until 2026-12-05 failed on the AMD EPYC (AVX2) one
CI ran on from 2026-12-06; CI has run on Intel AVX-512 again since 2026-12-07. Both settings are
read once, when numpy is imported: the test suite sets them first (tests/conftest.py, the
Makefile) and recording a reference requires them. Nothing here imports numpy at module level."""

from __future__ import annotations

import os

from icoforge.errors import IcoforgeError

NPY_DISABLE_CPU_FEATURES = "X86_V4 AVX512_ICL AVX512_SPR"
OPENBLAS_CORETYPE = "Haswell"
# OpenBLAS cores whose double-precision kernels are Haswell's (Zen's are the same code)
PORTABLE_OPENBLAS_CORES = ("Haswell", "Zen")
ENVIRONMENT = {"NPY_DISABLE_CPU_FEATURES": NPY_DISABLE_CPU_FEATURES, "OPENBLAS_CORETYPE": OPENBLAS_CORETYPE}


def set_portable_environment() -> None:
    """Before numpy is imported: this process and those it starts round as an AVX2 machine does
    (a value the caller set already is kept)."""
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)


def avx512_paths_on() -> bool:
    """Whether this process's numpy dispatches to its AVX-512 code."""
    from numpy._core._multiarray_umath import __cpu_features__

    return bool(__cpu_features__.get("X86_V4") or __cpu_features__.get("AVX512_SKX"))


def openblas_core() -> str | None:
    """The core OpenBLAS chose for numpy's linear algebra in this process (None where numpy links
    no OpenBLAS of its own, e.g. a distribution's numpy)."""
    import ctypes
    import glob

    import numpy

    libs = os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*.so*"))):
        lib = ctypes.CDLL(path)
        for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_", "openblas_get_corename"):
            get = getattr(lib, symbol, None)
            if get is not None:
                get.restype = ctypes.c_char_p
                return get().decode()
    return None


def rounding_problems() -> list[str]:
    """What in this process rounds otherwise than an AVX2 machine (empty when nothing does)."""
    problems = []
    if avx512_paths_on():
        problems.append(f'numpy rounds with its AVX-512 paths (set NPY_DISABLE_CPU_FEATURES="{NPY_DISABLE_CPU_FEATURES}")')
    core = openblas_core()
    if core is not None and core not in PORTABLE_OPENBLAS_CORES:
        problems.append(f"numpy's OpenBLAS runs its {core} kernels (set OPENBLAS_CORETYPE={OPENBLAS_CORETYPE})")
    return problems


def require_portable_rounding(what: str) -> None:
    """Refuse `what` (recording or checking a bitwise reference) where numpy rounds otherwise than
    on an AVX2 machine."""
    problems = rounding_problems()
    if problems:
        raise IcoforgeError(
            f"{what}: {'; '.join(problems)}, so its results would not match bit for bit those of AVX2 machines "
            f"(where the references are recorded). Both must be in the environment before numpy is imported."
        )
