"""On a GPU: every schedule knob, alone and combined, leaves results equal to GT4Py's and identical
to the CPU target.

Each representative icon4py program (conftest.REPRESENTATIVES) and each small kind program
(kind_programs.py: levels only, points only, chained lookups, backward scan, one-column scan)
runs with icoforge's GPU backend under each schedule of GPU_SCHEDULES. The icon4py programs are
compared with gtfn_cpu's stored outputs (icoforge/suite/gt4py_references.json: the same variant,
icon4py's int/bool scalars static, seed 0), the kind programs with GT4Py's embedded execution (run
here, no compile); then both with icoforge-cpu on the same random inputs (outputs poisoned with
NaN first, whole arrays, rtol 1e-12). The tiny grid (R2B3, 10 levels) leaves partial blocks, partial level chunks and unroll
remainders everywhere. Skipped without CuPy and a GPU; on the CPU, the last test checks that
every schedule of the grid is legal for every program on both vendors, and compiles with nvcc.

More programs (e.g. the big four of the GPU issue) via the environment:
    ICOFORGE_GPU_SCHEDULE_PROGRAMS=name1,name2 pytest -m gpu tests/schedule
"""

from __future__ import annotations

import os

import gt4py.next as gtx
import numpy as np
import pytest
from conftest import GPU_TEST_SEED, REPRESENTATIVES
from kind_programs import KIND_PROGRAMS, CellDim, EdgeDim, KDim, C2EDim

from icoforge.backend.codegen.cuda import PRELUDE
from icoforge.backend.passes.fuse import fuse_kernels
from icoforge.backend.runtime.gpu import cupy_vendor, gpu_artifact, make_gpu_backend
from icoforge.backend.runtime.gpu_check import find_nvcc, nvcc_check
from icoforge.backend.schedule.schedule import ProgramSchedule, Schedule, resolve
from icoforge.suite import references as refs
from icoforge.suite.catalogue import get_program
from icoforge.suite.verify import verify


def gpu(f):
    return pytest.mark.gpu(pytest.mark.skipif(cupy_vendor() is None, reason="needs CuPy and a CUDA/ROCm GPU")(f))


S = Schedule
# every knob alone, then together; levels per thread and unroll factors that leave remainders on 10 levels
GPU_SCHEDULES: dict[str, ProgramSchedule] = {
    "default": ProgramSchedule(),
    "block256x1": ProgramSchedule(S(block=(256, 1))),
    "block32x8": ProgramSchedule(S(block=(32, 8))),
    "block1024x1": ProgramSchedule(S(block=(1024, 1))),
    "kpt3": ProgramSchedule(S(block=(64, 4), k_per_thread=3)),
    "kpt8": ProgramSchedule(S(block=(128, 1), k_per_thread=8)),
    "kpt4_unroll3": ProgramSchedule(S(block=(128, 2), k_per_thread=4, k_unroll=3)),
    "unroll4": ProgramSchedule(S(k_unroll=4)),  # scans walk 10 levels: 2 steps + 2 remainder
    "hpt3": ProgramSchedule(S(block=(64, 1), h_per_thread=3)),
    "hpt2_kpt2": ProgramSchedule(S(block=(32, 4), h_per_thread=2, k_per_thread=2)),
    "smem": ProgramSchedule(S(smem_tables=("*",))),
    "smem_hpt4_2d": ProgramSchedule(S(block=(32, 4), h_per_thread=4, k_per_thread=2, smem_tables=("*",))),
    "maxreg32": ProgramSchedule(S(max_registers=32)),
    "minblocks4": ProgramSchedule(S(block=(256, 1), min_blocks_per_sm=4)),
    "idx32": ProgramSchedule(S(index_bits=32)),
    "idx32_hpt2_kpt2": ProgramSchedule(S(index_bits=32, h_per_thread=2, k_per_thread=2, smem_tables=("*",))),
    "chiplet8": ProgramSchedule(S(chiplet_remap=True)),
    "chiplet3_1024": ProgramSchedule(S(block=(1024, 1), chiplet_remap=True, chiplets=3)),  # blocks % 3 != 0
    "chiplet5_hpt2_smem": ProgramSchedule(S(block=(64, 2), h_per_thread=2, chiplet_remap=True, chiplets=5, smem_tables=("*",))),
    "everything": ProgramSchedule(
        S(block=(64, 2), k_per_thread=4, k_unroll=2, h_per_thread=3, smem_tables=("*",), max_registers=64,
          index_bits=32, chiplet_remap=True, chiplets=5)
    ),
    "per_kernel_and_program": ProgramSchedule(
        S(block=(256, 1), k_per_thread=2),
        per_kernel={
            "appl_dive_damp_upda_vn_k0": S(block=(32, 8), smem_tables=("E2C",), k_per_thread=3, k_unroll=2),
            "appl_dive_damp_upda_vn_k1": S(h_per_thread=2, smem_tables=("E2C2EO",), index_bits=32),
            "comp_dive_flux_rho_thet_k0": S(h_per_thread=2, smem_tables=("C2E",)),
            "solv_trid_matr_w_forw_swee_k0": S(block=(64, 1), k_unroll=3, h_per_thread=2),
        },
        per_program={"extrapolate_at_top": S(block=(64, 4), k_per_thread=3, k_unroll=2)},
    ),
    "fuse": ProgramSchedule(S(block=(32, 4)), fuse=("*",)),  # kernel fusion, with the CUDA default
    "fuse_smem_kpt2": ProgramSchedule(S(block=(64, 2), k_per_thread=2, smem_tables=("*",)), fuse=("*",)),
}  # fmt: skip

EXTRA = tuple(n for n in os.environ.get("ICOFORGE_GPU_SCHEDULE_PROGRAMS", "").split(",") if n)
PROGRAMS = (*REPRESENTATIVES, *EXTRA)


@pytest.fixture(scope="module")
def gpu_backends():
    vendor = cupy_vendor()
    return {sid: make_gpu_backend(vendor, ps) for sid, ps in GPU_SCHEDULES.items()}


@gpu
@pytest.mark.parametrize("sid", GPU_SCHEDULES)
@pytest.mark.parametrize("name", PROGRAMS)
def test_icon4py_program_identical_to_cpu_under_schedule(name, sid, tiny_grid, gpu_backends):
    stored = refs.check_program(get_program(name), gpu_backends[sid], tiny_grid, refs.load_store(static="icon4py"))
    assert stored.passed, f"{sid}: {GPU_SCHEDULES[sid].dumps()}\n{stored.summary()}"  # GT4Py's results
    res = verify(get_program(name), gpu_backends[sid], "icoforge-cpu", tiny_grid, seed=GPU_TEST_SEED, rtol=1e-12)
    assert res.passed, f"{sid}: {GPU_SCHEDULES[sid].dumps()}\n{res.summary()}"
    assert all(o.written > 0 for o in res.outputs), "an output was never written: nothing compared"


# --- the small kind programs -------------------------------------------------------------------------


def kind_inputs(name: str, grid, rng) -> tuple[dict, list[str]]:
    """(numpy arguments with their dims, output names) of a kind program."""
    nc, ne, nk = grid.num_cells, grid.num_edges, 10
    r = lambda *shape: rng.random(shape) + 0.1  # noqa: E731
    nan = lambda *shape: np.full(shape, np.nan)  # noqa: E731
    if name == "levels_only":
        return {"z": ([KDim], r(nk)), "out": ([KDim], nan(nk)), "nk": gtx.int32(nk)}, ["out"]
    if name == "points_only":
        return {"ee": ([EdgeDim], r(ne)), "w": ([CellDim, C2EDim], r(nc, 3)), "out": ([CellDim], nan(nc))}, ["out"]
    if name == "chained":
        return {"c": ([CellDim, KDim], r(nc, nk)), "out": ([CellDim, KDim], nan(nc, nk))}, ["out"]
    if name == "backward_scan":
        return {"a": ([EdgeDim, KDim], r(ne, nk)), "b": ([EdgeDim, KDim], r(ne, nk)), "out": ([EdgeDim, KDim], nan(ne, nk))}, ["out"]
    if name == "column_scan":
        return {"z": ([KDim], r(nk)), "out": ([KDim], nan(nk))}, ["out"]
    raise KeyError(name)


def run_kind(name: str, backend, grid) -> dict[str, np.ndarray]:
    """backend None: GT4Py's embedded execution (NumPy)."""
    raw, outputs = kind_inputs(name, grid, np.random.default_rng(7))
    args = {k: gtx.as_field(v[0], v[1], allocator=backend) if isinstance(v, tuple) else v for k, v in raw.items()}
    KIND_PROGRAMS[name].with_backend(backend)(**args, offset_provider=grid.connectivities)
    return {o: args[o].asnumpy().copy() for o in outputs}


def assert_same_points(got: dict, ref: dict, msg: str) -> None:
    """Written points equal (NaN is the poison), values to rtol 1e-12; the reference wrote something."""
    for out, want in ref.items():
        written = ~np.isnan(want)
        assert written.any(), "the reference wrote nothing"
        np.testing.assert_array_equal(~np.isnan(got[out]), written, err_msg=f"{msg}: written points differ")
        np.testing.assert_allclose(got[out][written], want[written], rtol=1e-12, atol=0, err_msg=msg)


@pytest.fixture(scope="module")
def kind_gt4py(tiny_grid):
    """GT4Py's results of the kind programs: embedded execution."""
    return {name: run_kind(name, None, tiny_grid) for name in KIND_PROGRAMS}


@pytest.fixture(scope="module")
def kind_reference(tiny_grid):
    from icoforge.backend import make_backend

    cpu = make_backend("cpu")
    return {name: run_kind(name, cpu, tiny_grid) for name in KIND_PROGRAMS}


@gpu
@pytest.mark.parametrize("sid", GPU_SCHEDULES)
@pytest.mark.parametrize("name", KIND_PROGRAMS)
def test_kind_program_identical_to_cpu_under_schedule(name, sid, tiny_grid, gpu_backends, kind_reference, kind_gt4py):
    got = run_kind(name, gpu_backends[sid], tiny_grid)
    assert_same_points(got, kind_gt4py[name], f"{sid} vs GT4Py embedded")
    assert_same_points(got, kind_reference[name], f"{sid} vs icoforge-cpu")


@pytest.mark.parametrize("name", KIND_PROGRAMS)
def test_kind_program_reference_cpu_target_equals_gt4py(name, kind_reference, kind_gt4py):
    """On the CPU: the second opinion of the GPU test above (icoforge-cpu) agrees with its first
    (GT4Py embedded), so each GPU failure names the one that differs."""
    assert_same_points(kind_reference[name], kind_gt4py[name], "icoforge-cpu vs GT4Py embedded")


# --- on the CPU: the grid above is legal everywhere, and its combined schedules compile -----------


def test_gpu_schedule_grid_is_legal_for_every_program_and_vendor(representative_irs, gpu_test_irs, kind_irs):
    # the IRs the GPU tests really compile (static scalars bound), and the unbound ones
    for programs in ({**gpu_test_irs, **kind_irs}, representative_irs):
        for sid, ps in GPU_SCHEDULES.items():
            if sid == "per_kernel_and_program" and programs is representative_irs:
                continue  # its per-kernel entries are for the kernels of the bound variant
            for vendor in ("cuda", "hip"):
                for name, program in programs.items():
                    resolve(fuse_kernels(program) if ps.fuses(name) else program, ps, vendor)  # ScheduleError if illegal
    # the per-kernel entries name kernels the GPU tests compile (a renamed kernel is refused there)
    kernels = {k.name for p in gpu_test_irs.values() for k in p.kernels()}
    assert set(dict(GPU_SCHEDULES["per_kernel_and_program"].per_kernel)) <= kernels
    programs = {**gpu_test_irs, **kind_irs}
    if find_nvcc() is not None:
        for sid in ("everything", "per_kernel_and_program", "fuse_smem_kpt2"):  # all programs as one translation unit
            arts = [gpu_artifact(program, "cuda", GPU_SCHEDULES[sid]) for program in programs.values()]
            unit = "\n".join(a.module_source if n == 0 else a.module_source.split(PRELUDE, 1)[1] for n, a in enumerate(arts))
            assert {r.kernel for r in nvcc_check(unit)} == {k for a in arts for k in a.kernel_names}, sid
