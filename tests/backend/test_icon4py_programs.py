"""icon4py dycore programs through the icoforge backend, against GT4Py's gtfn_cpu, on a real ICON
grid with an odd level count. The full set (78 programs) runs on the device machine
(`icoforge verify-all --backend icoforge-cuda`, scripts/device/run_verify_sweep.sh); CI checks a subset
covering every construct."""

from __future__ import annotations

import pytest

from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.runtime.gpu_check import find_nvcc, nvcc_check
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule
from icoforge.grids import load_grid
from icoforge.suite.catalogue import get_program
from icoforge.suite.verify import verify

SUBSET = (
    "compute_tangential_wind",  # sparse coefficient field, unrolled C2E2C2E-like reduction
    "mo_math_divrot_rot_vertex_ri_dsl",  # V2E reduction over skip values (pentagons)
    "solve_tridiagonal_matrix_for_w_forward_sweep",  # forward scan with tuple state
    "solve_tridiagonal_matrix_for_w_back_substitution",  # backward scan
    "compute_hydrostatic_correction_term",  # data-dependent vertical offsets
)


@pytest.fixture(scope="module")
def odd_grid(icoforge_cache):
    return load_grid("R2B3", levels=13, show_progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_matches_gtfn_cpu(name, odd_grid):
    res = verify(get_program(name), "icoforge-cpu", "gtfn_cpu", odd_grid, seed=11)
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs), "an output was never written: nothing compared"


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", SUBSET[:3])
def test_cuda_source_compiles_for_sm90_without_spills(name, odd_grid):
    program = program_ir(get_program(name).program, odd_grid.connectivities)
    art = gpu_artifact(program, "cuda", ProgramSchedule(VENDOR_DEFAULTS["cuda"]))
    resources = nvcc_check(art.module_source)
    assert {r.kernel for r in resources} == set(art.kernel_names)
    for r in resources:
        assert 0 < r.registers <= 255 and r.spill_stores == 0 and r.spill_loads == 0, r
