"""ICOFORGE_STREAMS' analysis on real programs: which kernels the host graphs may run side by side."""

from __future__ import annotations

import pytest

from icoforge.backend.runtime import graphs
from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.schedule.schedule import default_program_schedule


@pytest.mark.parametrize(
    "program, groups",
    [
        # its first three maps touch no common field (benchmarks/streams-opportunity-R2B4-80.md)
        ("vertically_implicit_solver_at_corrector_step", [[0, 1, 2], [3], [4], [5], [6]]),
        ("compute_advection_in_horizontal_momentum", [[0, 1], [2]]),
        ("compute_perturbed_quantities_and_interpolation", [[0], [1]]),  # a chain after fusion
    ],
)
def test_branch_groups_of_the_cuda_default_kernels(program, groups):
    from icoforge.grids import load_grid
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_program, make_inputs

    grid = load_grid("R2B3", levels=10, show_progress=False)
    info = get_program(program)
    art = gpu_artifact(suite_program_ir(info, grid, make_inputs(info, grid, 0)), "cuda", default_program_schedule("cuda"))
    fields = graphs.kernel_fields(art.program_ir, art.kernel_names)
    assert set(fields) == set(art.kernel_names)  # every device kernel, 64-bit twins included, has its fields
    narrow = [n for n in art.kernel_names if not n.endswith("_w")]
    assert graphs.branch_groups(narrow, fields, 4) == groups
    wide = [n + "_w" if n + "_w" in fields else n for n in narrow]  # a call with 64-bit indices: the same groups
    assert graphs.branch_groups(wide, fields, 4) == groups
