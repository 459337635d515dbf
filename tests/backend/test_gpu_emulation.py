"""The generated CUDA/HIP code, run on the CPU by emulation (icoforge.backend.runtime.emulate), against
the CPU target: every dycore program with the vendor defaults and with shared-memory staging, and
a grid of schedules covering every knob (staging and its barrier included) on representative
programs. Outputs poisoned, whole arrays, rtol 1e-12. On a GPU, tests/schedule/test_gpu_schedules.py
runs the same comparisons for real. The emulator's barrier itself: tests/backend/test_emulate_barriers.py."""

from __future__ import annotations

import numpy as np
import pytest

from icoforge.backend.runtime.emulate import load_emulated
from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule
from icoforge.grids import load_grid
from icoforge.suite.catalogue import get_program, program_names
from icoforge.suite.runner import CustomBackend
from icoforge.suite.verify import verify

REPRESENTATIVE = (
    "compute_contravariant_correction_of_w",  # pure vertical
    "compute_divergence_of_fluxes_of_rho_and_theta",  # C2E / E2C
    "mo_math_divrot_rot_vertex_ri_dsl",  # V2E with skip values
    "solve_tridiagonal_matrix_for_w_forward_sweep",  # forward scan, tuple state
    "apply_divergence_damping_and_update_vn",  # temporaries, host conditionals
)

SCHEDULES = {
    "2d-block": Schedule(block=(32, 4)),
    "kloop": Schedule(block=(64, 2), k_per_thread=3),
    "kloop-unroll": Schedule(k_per_thread=4, k_unroll=2),
    "unroll-only": Schedule(k_unroll=3),
    "hblock": Schedule(block=(64, 1), h_per_thread=3),
    "int32-chiplets": Schedule(index_bits=32, chiplet_remap=True, chiplets=8),
    "regcap": Schedule(block=(128, 1), max_registers=64),
    "auto-index-32x8": Schedule(block=(32, 8), index_bits="auto"),  # the best schedule of the H200 sweeps
    "everything": Schedule(block=(32, 4), k_per_thread=3, k_unroll=2, h_per_thread=2, index_bits=32, chiplet_remap=True),
    # shared-memory staging: every thread of a block stages, one barrier, then the points
    "smem": Schedule(smem_tables=("*",)),
    "smem-everything": Schedule(block=(32, 4), k_per_thread=3, k_unroll=2, h_per_thread=3, smem_tables=("*",),
                                index_bits="auto", chiplet_remap=True, chiplets=5),
}
SMEM = Schedule(block=(64, 2), h_per_thread=2, smem_tables=("*",))


@pytest.fixture(scope="module")
def grid(icoforge_cache):
    return load_grid("R2B3", levels=10, show_progress=False)


def emulated(vendor: str, schedule: Schedule, thread_order: str = "forward") -> CustomBackend:
    def prepare(info, grid, args):
        art = gpu_artifact(program_ir(info.program, grid.connectivities), vendor, ProgramSchedule(schedule))
        program = load_emulated(art, thread_order)
        names = [p.name for p in info.params]
        return lambda a: program(*[a[n] for n in names], offset_provider=grid.connectivities)

    return CustomBackend(f"emulated-{vendor}", prepare, allocator=np)


def check(name: str, vendor: str, schedule: Schedule, grid, thread_order: str = "forward") -> None:
    # static_params="none": the same GTIR as program_ir, so GT4Py's passes are shared
    backend = emulated(vendor, schedule, thread_order)
    res = verify(get_program(name), backend, "icoforge-cpu", grid, seed=23, rtol=1e-12, static_params="none")
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs), "nothing written: nothing compared"


@pytest.mark.parametrize("schedule", list(SCHEDULES), ids=list(SCHEDULES))
@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_schedules_preserve_results(name, schedule, grid):
    check(name, "cuda", SCHEDULES[schedule], grid)


@pytest.mark.parametrize("name", REPRESENTATIVE[:3])
def test_hip_default(name, grid):
    check(name, "hip", VENDOR_DEFAULTS["hip"], grid)


@pytest.mark.parametrize("name", ["compute_divergence_of_fluxes_of_rho_and_theta", "apply_divergence_damping_and_update_vn"])
def test_smem_staging_is_emulated_with_its_barrier(name, grid):
    """The staged kernels wait at a barrier (the block's threads run as fibers); with the threads
    of each phase run backwards, a read of shared memory not ordered by the barrier would differ."""
    info = get_program(name)
    art = gpu_artifact(program_ir(info.program, grid.connectivities), "cuda", ProgramSchedule(SMEM))
    assert any(k.barriers for k in art.device.kernels) and all(
        (k.smem_bytes > 0) == k.barriers == ("__syncthreads()" in k.source) for k in art.device.kernels
    )
    check(name, "cuda", SMEM, grid, thread_order="reversed")
    check(name, "hip", SMEM.replace(block=(256, 1), chiplet_remap=True), grid)


@pytest.mark.slow
@pytest.mark.parametrize("name", program_names())
def test_every_program_cuda_default(name, grid):
    check(name, "cuda", VENDOR_DEFAULTS["cuda"], grid)


@pytest.mark.slow
@pytest.mark.parametrize("name", program_names())
def test_every_program_cuda_smem(name, grid):
    """Every program with every table it reads by its own row staged in shared memory (kernels
    without such a table are plain; the comparison holds either way)."""
    check(name, "cuda", SMEM.replace(k_per_thread=2, index_bits="auto"), grid)


def test_verify_all_checks_another_backend_with_its_schedule(tmp_path, grid, monkeypatch, capsys):
    """`icoforge verify-all --backend B --reference R --schedule S --seed N` (what
    scripts/device/hip_on_cuda.sh runs with icoforge-hip-on-cuda on the H200), here with the HIP
    code emulated on the CPU: the table names the pair and the schedule and ends in "1 of 1"."""
    from icoforge.cli.main import main

    monkeypatch.setenv("ICOFORGE_SCHEDULE", "")  # --schedule exports it: undone after the test
    out = tmp_path / "verify.md"
    sched = '{"default": {"block": [256, 1], "smem_tables": ["*"], "chiplet_remap": true}}'
    argv = ["verify-all", "--programs", "mo_math_divrot_rot_vertex_ri_dsl", "--grid", "R2B3", "--levels", "10",
            "--backend", "icoforge-emulated-hip", "--reference", "icoforge-cpu", "--seed", "5", "--jobs", "1",
            "--schedule", sched, "--out", str(out)]  # fmt: skip
    assert main(argv) == 0, out.read_text()
    text = out.read_text()
    assert "# verify-all: icoforge-emulated-hip vs icoforge-cpu" in text and sched in text and "inputs of seed 5" in text
    assert text.rstrip().endswith("1 of 1 passed (0 not run yet).")
    capsys.readouterr()
    assert main([*argv[:8], "icoforge-hip-on-cud", *argv[9:]]) != 0  # a misspelt backend: refused before any work
    assert "icoforge-hip-on-cud" in capsys.readouterr().err
