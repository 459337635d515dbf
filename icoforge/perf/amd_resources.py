"""Per-kernel resources and occupancy of every program on AMD (gfx90a, gfx942) beside sm_90.

One schedule per row set, the HIP vendor default unless `k_unroll` is given (then the default
with that unroll factor): the HIP module is compiled with clang for each AMD architecture
(`icoforge.backend.runtime.amd_check`) and, for the H200 column, the same module (same kernels, same
schedule) with nvcc for sm_90 through the HIP-on-CUDA header. Occupancy follows from the
resources (`icoforge.backend.schedule.occupancy`): waves per SIMD on AMD (at most 8), warps per
scheduler on sm_90 (at most 16). `icoforge gpu-check --target hip` prints it.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import multiprocessing
from typing import Callable

from icoforge.backend.runtime.amd_check import AMDKernelResources, amd_check
from icoforge.backend.runtime.gpu_check import GPUCompileError, KernelResources, find_nvcc, nvcc_check
from icoforge.backend.runtime.hip_on_cuda import hip_source_on_cuda
from icoforge.backend.schedule.occupancy import AMD_ARCHS, amd_limiter, amd_waves_per_simd, sm90_warps_per_scheduler


@dataclasses.dataclass(frozen=True)
class ResourceRow:
    program: str
    kernel: str
    kind: str  # map2d | vmap | hmap | scan | single (schedule.KernelLaunch.kind)
    threads: int
    k_unroll: int  # the schedule's factor (1: none)
    amd: tuple[tuple[str, AMDKernelResources | None], ...]
    sm90: KernelResources | None
    model_bytes: int = 0  # the byte model's compulsory bytes of this kernel (grid of the run)
    error: str | None = None

    def res(self, arch: str) -> AMDKernelResources | None:
        return dict(self.amd).get(arch)

    def waves(self, arch: str) -> int | None:
        r = self.res(arch)
        return None if r is None else amd_waves_per_simd(arch, r.vgprs, r.agprs, r.sgprs, r.lds_bytes, self.threads)

    def limiter(self, arch: str) -> str:
        r = self.res(arch)
        return "?" if r is None else amd_limiter(arch, r.vgprs, r.agprs, r.sgprs, r.lds_bytes, self.threads)

    def sm90_warps(self) -> float | None:
        s = self.sm90
        return None if s is None else sm90_warps_per_scheduler(s.registers, self.threads, s.shared_bytes)

    def problems(self) -> list[str]:
        """What CI fails on: build errors, spills to memory on any architecture (VGPR spills,
        scratch; SGPRs spilt into VGPR lanes are `notes`)."""
        out = [self.error] if self.error else []
        out += [f"{a}: spills (VGPR {r.vgpr_spill}, SGPR {r.sgpr_spill}, scratch {r.scratch_bytes} B/lane)"
                for a, r in self.amd if r is not None and r.spills]  # fmt: skip
        if self.sm90 is not None and (self.sm90.spill_stores or self.sm90.spill_loads):
            out.append(f"sm_90: spills {self.sm90.spill_stores}/{self.sm90.spill_loads} B")
        return out

    def notes(self) -> list[str]:
        """Reported, not failed: SGPRs spilt into VGPR lanes with no scratch."""
        return [f"{a}: {r.sgpr_spill} SGPRs spilt into VGPR lanes (no scratch)" for a, r in self.amd
                if r is not None and r.sgpr_lane_spills]  # fmt: skip


def _launches(program, k_unroll: int | None):
    from icoforge.backend.schedule import pipeline
    from icoforge.backend.codegen.cuda import device_module
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, default_program_schedule

    schedule = default_program_schedule("hip")
    if k_unroll is not None:
        schedule = ProgramSchedule(dataclasses.replace(VENDOR_DEFAULTS["hip"], k_unroll=k_unroll))
    scheduled, final, launches = pipeline.gpu_passes(program, schedule, "hip")
    return scheduled, device_module(final, launches, "hip"), launches


def _compile_all(source: str, archs: tuple[str, ...], with_nvcc: bool):
    """{arch: resources by kernel} and the sm_90 resources by kernel; errors as text."""
    errors: list[str] = []
    amd: dict[str, dict[str, AMDKernelResources]] = {}
    for arch in archs:
        try:
            amd[arch] = {r.kernel: r for r in amd_check(source, arch)}
        except GPUCompileError as e:
            errors.append(f"{arch}: {str(e)[-400:]}")
    sm90: dict[str, KernelResources] = {}
    if with_nvcc:
        try:
            sm90 = {r.kernel: r for r in nvcc_check(hip_source_on_cuda(source))}
        except GPUCompileError as e:
            errors.append(f"sm_90: {str(e)[-400:]}")
    return amd, sm90, errors


def program_rows(name: str, grid, archs: tuple[str, ...], k_unroll: int | None, with_nvcc: bool) -> list[ResourceRow]:
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.suite.catalogue import get_program

    info = get_program(name)
    scheduled, module, launches = _launches(program_ir(info.program, grid.connectivities), k_unroll)
    cost = program_cost(scheduled, suite_sizes(info, grid))
    amd, sm90, errors = _compile_all(module.source, archs, with_nvcc)
    rows = []
    for kernel in module.kernel_names:
        launch = launches[kernel]
        try:
            nbytes = cost.kernel(kernel).bytes
        except (KeyError, ValueError):
            nbytes = 0  # a kernel the byte model does not cost (never executed on these inputs)
        got = tuple((a, amd.get(a, {}).get(kernel)) for a in archs)
        missing = [a for a, r in got if r is None and a in amd] + (["sm_90"] if with_nvcc and sm90 and kernel not in sm90 else [])
        error = "; ".join(errors + [f"no resource report on {', '.join(missing)}"] * bool(missing)) or None
        rows.append(ResourceRow(name, kernel, launch.kind, launch.threads, launch.k_unroll, got, sm90.get(kernel), nbytes, error))
    return rows


def _one(name: str, grid_name: str, levels: int, archs, k_unrolls, with_nvcc) -> list[ResourceRow]:
    from icoforge.grids import load_grid

    try:
        grid = load_grid(grid_name, levels=levels, show_progress=False)
        return [r for u in k_unrolls for r in program_rows(name, grid, archs, u, with_nvcc)]
    except Exception as e:  # a lowering error is a row, the other programs go on
        return [ResourceRow(name, "*", "-", 0, 1, (), None, 0, f"{type(e).__name__}: {e}"[-500:])]


def collect(
    names: list[str], grid_name: str, levels: int, jobs: int, archs: tuple[str, ...] = AMD_ARCHS,
    k_unrolls: tuple[int | None, ...] = (None,), with_nvcc: bool | None = None,
    on_rows: Callable[[list[ResourceRow]], None] | None = None,
) -> list[ResourceRow]:  # fmt: skip
    """Every program in `jobs` processes; rows in the order of `names`."""
    from icoforge.grids import load_grid

    with_nvcc = find_nvcc() is not None if with_nvcc is None else with_nvcc
    load_grid(grid_name, levels=levels, show_progress=False)  # generate once, before the workers
    by_name: dict[str, list[ResourceRow]] = {}
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_one, n, grid_name, levels, archs, k_unrolls, with_nvcc): n for n in names}
        for fut in cf.as_completed(futures):
            by_name[futures[fut]] = got = fut.result()
            if on_rows:
                on_rows(got)
    return [r for n in names for r in by_name[n]]
