"""Kernel IR of the programs the schedule tests use, made once per session on the tiny grid.

REPRESENTATIVES: icon4py programs covering the constructs (pure vertical, C2E, skip values, a
scan, temporaries with host conditionals); kind_programs.py adds the kernel kinds they lack.
"""

from __future__ import annotations

import pytest

REPRESENTATIVES = {
    "compute_contravariant_correction_of_w": "C2E with level shifts",
    "extrapolate_at_top": "pure vertical (level shifts, no neighbours)",
    "compute_divergence_of_fluxes_of_rho_and_theta": "C2E reduction with a sparse coefficient field",
    "mo_math_divrot_rot_vertex_ri_dsl": "V2E reduction over skip values",
    "solve_tridiagonal_matrix_for_w_forward_sweep": "forward scan with tuple state",
    "apply_divergence_damping_and_update_vn": "temporaries, E2C/E2C2EO, host conditionals",
}


@pytest.fixture(scope="session")
def representative_irs(tiny_grid):
    """name -> ProgramIR (GT4Py's passes: ~1 minute on 2 cores for all, once per session)."""
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.suite.catalogue import get_program

    return {name: program_ir(get_program(name).program, tiny_grid.connectivities) for name in REPRESENTATIVES}


GPU_TEST_SEED = 3  # inputs of the GPU schedule tests; their static scalars decide the kernel names


@pytest.fixture(scope="session")
def gpu_test_irs(tiny_grid):
    """name -> ProgramIR as the GPU schedule tests compile it: icon4py's int/bool scalars bound to
    the values `make_inputs(seed=GPU_TEST_SEED)` gives (static arguments fold host conditions, so
    the kernels -- and their names -- differ from `representative_irs`)."""
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars

    out = {}
    for name in REPRESENTATIVES:
        info = get_program(name)
        out[name] = suite_program_ir(info, tiny_grid, make_scalars(info, tiny_grid, GPU_TEST_SEED))
    return out


@pytest.fixture(scope="session")
def kind_irs(tiny_grid):
    from kind_programs import KIND_PROGRAMS

    from icoforge.backend.runtime.precompile import program_ir

    return {name: program_ir(p, tiny_grid.connectivities) for name, p in KIND_PROGRAMS.items()}
