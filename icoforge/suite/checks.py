"""Whole-catalogue checks: every dycore program through the icoforge backend.

* `compile_all`: generate CUDA and HIP for every program and compile with nvcc (sm_90) and hipcc
  (gfx90a), and the HIP source with nvcc through the HIP-on-CUDA header ("hip-on-cuda");
  registers, spills and shared memory per kernel. Needs no GPU.
* `verify_all`: every program on the CPU target (or another backend, e.g. the HIP source on an
  NVIDIA GPU) against a GT4Py backend (or icoforge-cpu) on real inputs.
Both run GT4Py's passes first, in parallel processes (they dominate the time).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import multiprocessing
import os
import time
from typing import Callable

from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.runtime.gpu_check import GPUCompileError, available_compilers, hipcc_check, nvcc_check
from icoforge.backend.runtime.hip_on_cuda import hip_source_on_cuda
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.schedule.schedule import default_program_schedule
from icoforge.grids import load_grid
from icoforge.suite.catalogue import get_program
from icoforge.suite.verify import verify


@dataclasses.dataclass(frozen=True)
class CompileRow:
    program: str
    compiler: str  # nvcc-sm_90 | hipcc-gfx90a | nvcc-sm_90-hip (the HIP source through hip_on_cuda.h)
    kernel: str
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    error: str | None = None


def compile_program(name: str, grid, compilers: tuple[str, ...]) -> list[CompileRow]:
    program = program_ir(get_program(name).program, grid.connectivities)
    rows: list[CompileRow] = []
    for compiler in compilers:
        vendor = "cuda" if compiler == "nvcc" else "hip"
        art = gpu_artifact(program, vendor, default_program_schedule(vendor))
        label = COMPILER_LABELS[compiler]
        try:
            if compiler == "hipcc":
                resources = hipcc_check(art.module_source)
            else:
                resources = nvcc_check(art.module_source if vendor == "cuda" else hip_source_on_cuda(art.module_source))
        except GPUCompileError as e:
            rows.append(CompileRow(name, label, "*", 0, 0, 0, 0, str(e)[-500:]))
            continue
        found = {r.kernel for r in resources}
        for r in resources:
            rows.append(CompileRow(name, label, r.kernel, r.registers, r.spill_stores, r.spill_loads, r.shared_bytes))
        for missing in sorted(set(art.kernel_names) - found):
            rows.append(CompileRow(name, label, missing, 0, 0, 0, 0, "no resource report for this kernel"))
    return rows


COMPILER_LABELS = {"nvcc": "nvcc-sm_90", "hipcc": "hipcc-gfx90a", "hip-on-cuda": "nvcc-sm_90-hip"}


def _compile_one(name: str, grid_name: str, levels: int, compilers: tuple[str, ...]) -> list[CompileRow]:
    """In a worker process: GT4Py's passes, code generation and both compilers for one program."""
    try:
        grid = load_grid(grid_name, levels=levels, show_progress=False)
        return compile_program(name, grid, compilers)
    except Exception as e:  # a lowering error is a row, the others go on
        return [CompileRow(name, "-", "*", 0, 0, 0, 0, f"{type(e).__name__}: {e}"[-500:])]


def compile_all(
    names: list[str], grid_name: str, levels: int, jobs: int, on_row: Callable[[CompileRow], None] | None = None,
    compilers: tuple[str, ...] | None = None,
) -> list[CompileRow]:
    """Every program in `jobs` processes (passes and compilers both take seconds per program);
    rows come back in the order of `names`. `compilers`: of "nvcc", "hipcc", "hip-on-cuda" (the
    HIP source with nvcc); default: nvcc and hipcc, whichever is installed."""
    compilers = compilers or available_compilers()
    if not compilers:
        raise GPUCompileError("neither nvcc nor hipcc is installed")
    have = available_compilers()
    for c in compilers:
        if c not in COMPILER_LABELS:
            raise GPUCompileError(f"unknown compiler {c!r}; choose of {', '.join(COMPILER_LABELS)}")
        if ("hipcc" if c == "hipcc" else "nvcc") not in have:
            raise GPUCompileError(f"{c}: {'hipcc' if c == 'hipcc' else 'nvcc'} is not installed")
    load_grid(grid_name, levels=levels, show_progress=False)  # generate once, before the workers
    by_name: dict[str, list[CompileRow]] = {}
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_compile_one, n, grid_name, levels, compilers): n for n in names}
        for fut in cf.as_completed(futures):
            by_name[futures[fut]] = got = fut.result()
            if on_row:
                for r in got:
                    on_row(r)
    return [r for n in names for r in by_name[n]]


def compile_table_markdown(rows: list[CompileRow], header: str) -> str:
    lines = [header, "", "| program | compiler | kernel | registers | spill st/ld (B) | smem (B) | status |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]  # fmt: skip
    for r in rows:
        status = "ok" if r.error is None else "ERROR: " + r.error.splitlines()[0][:120]
        lines.append(
            f"| {r.program} | {r.compiler} | {r.kernel} | {r.registers} | {r.spill_stores}/{r.spill_loads} | {r.shared_bytes} | {status} |"
        )
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class VerifyRow:
    program: str
    status: str  # PASS | FAIL | ERROR
    max_rel_err: float
    compile_s: float
    detail: str = ""


def verify_one(name: str, grid_name: str, levels: int, reference: str, seed: int, backend: str = "icoforge-cpu") -> VerifyRow:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per worker: the workers fill the cores
    t0 = time.perf_counter()
    try:
        g = load_grid(grid_name, levels=levels, show_progress=False)
        res = verify(get_program(name), backend, reference, g, seed=seed)
        return VerifyRow(name, "PASS" if res.passed else "FAIL", res.max_rel_err, time.perf_counter() - t0,
                         "" if res.passed else res.summary()[-600:])  # fmt: skip
    except Exception as e:
        return VerifyRow(name, "ERROR", float("nan"), time.perf_counter() - t0, f"{type(e).__name__}: {e}"[-600:])
