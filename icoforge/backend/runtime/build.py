"""Build generated C++ into an extension module: content-addressed, locked, verified; and the
compiler options of both targets (the C++ command, `gpu_compile_options` for NVRTC/hiprtc).

Entry `<cache>/cpu-build/<key>/` holds the source, the module and `<module>.sha256`. The key hashes
the source, the compiler command and the compiler version. Two processes building the same key
wait on one lock; the module is renamed into place and its checksum written last, so a crash
mid-build leaves an entry without a valid checksum, which is rebuilt, never loaded.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib
import shutil
import subprocess
import sysconfig
import time

from icoforge.cache import atomic_path, atomic_write_bytes, cache_dir, file_lock
from icoforge.errors import IcoforgeError

RUNTIME_DIR = pathlib.Path(__file__).parent  # icf_cpu.h lies beside this module


class BuildError(IcoforgeError):
    pass


@functools.lru_cache(maxsize=None)
def _compiler_version(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0] if out else cxx


def cpu_compile_command(cxx: str, src: pathlib.Path, out: pathlib.Path, opt: str = "-O3") -> list[str]:
    return [
        cxx, opt, "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17",
        "-fno-math-errno",  # lets the compiler vectorise sqrt/pow; results are unchanged
        "-ffp-contract=off",  # no fused multiply-add: rounding as written, as GT4Py's gtfn_cpu
        f"-I{sysconfig.get_paths()['include']}", f"-I{RUNTIME_DIR}", str(src), "-o", str(out),
    ]  # fmt: skip


def gpu_compile_options(vendor: str, fp_contract: bool = False) -> tuple[str, ...]:
    """NVRTC's (or hiprtc's) options for a GPU module."""
    # No fused multiply-add contraction unless the schedule asks (`fp_contract`, timing A/Bs):
    # results then agree with the CPU target (and gtfn_cpu) to the last bit on most programs.
    # Measured on the H200: with NVRTC's default (--fmad=true) the vertically implicit solver
    # differed from the CPU by up to 2e-6 relative at a few points of random inputs, beyond the
    # 1e-10 verification tolerance.
    if vendor == "cuda":
        return ("-std=c++17", "--fmad=true" if fp_contract else "--fmad=false")
    return ("-std=c++17", "-ffp-contract=fast" if fp_contract else "-ffp-contract=off")


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _runtime_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(RUNTIME_DIR.glob("*.h")):
        h.update(p.read_bytes())
    return h.hexdigest()


def build_cpu_module(source: str, module_name: str, cxx: str | None = None) -> tuple[pathlib.Path, float]:
    """Compile `source` (defining module `module_name`); return (path to the .so, seconds spent
    compiling, 0.0 when the cache had it)."""
    cxx = cxx or shutil.which("g++") or shutil.which("c++") or "c++"
    probe = cpu_compile_command(cxx, pathlib.Path("SRC"), pathlib.Path("OUT"))
    key = hashlib.sha256(
        "\0".join([source, " ".join(probe), _compiler_version(cxx), _runtime_digest()]).encode()
    ).hexdigest()[:24]
    entry = cache_dir("cpu-build") / f"{module_name}-{key}"
    so = entry / f"{module_name}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    digest_file = entry / (so.name + ".sha256")
    if _valid(so, digest_file):
        return so, 0.0
    with file_lock(entry.with_suffix(".lock")):
        if _valid(so, digest_file):  # another process built it while we waited
            return so, 0.0
        entry.mkdir(parents=True, exist_ok=True)
        src = entry / f"{module_name}.cpp"
        atomic_write_bytes(src, source.encode())
        t0 = time.perf_counter()
        with atomic_path(so) as tmp:
            cmd = cpu_compile_command(cxx, src, tmp)
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise BuildError(f"C++ build of {module_name} failed ({src}):\n{res.stderr[-4000:]}")
        elapsed = time.perf_counter() - t0
        atomic_write_bytes(digest_file, _sha256(so).encode())
    return so, elapsed


def _valid(so: pathlib.Path, digest_file: pathlib.Path) -> bool:
    if not (so.exists() and digest_file.exists()):
        return False
    return digest_file.read_text().strip() == _sha256(so)
