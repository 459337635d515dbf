"""Kernel and temporary counts of a suite program before and after fusion or inlining (issue 51
item 3): a test that compares a transformed program's results must also show that the
transformation happened on that program, or it checks the untransformed code twice.

The IR is the one the suite compiles (icon4py's static scalars bound, as `verify` binds them,
from `make_scalars(info, grid, seed)`), on the session's GTIR path (ICOFORGE_EARLY_GTIR); kernel
and temporary counts differ between the two paths, so expected counts are given per path.
`assert_transformed` is the check; `tests/backend/test_transform_counts.py` shows it fails when the
transformation is off.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from icoforge import settings
from icoforge.backend.ir import ir
from icoforge.backend.schedule import pipeline
from icoforge.backend.runtime import workflow
from icoforge.backend.schedule.schedule import ProgramSchedule


@dataclasses.dataclass(frozen=True)
class Counts:
    kernels: int
    temporaries: int

    @classmethod
    def of(cls, program: ir.ProgramIR) -> Counts:
        return cls(len(program.kernels()), len(program.temporaries))

    def __str__(self) -> str:
        return f"{self.kernels} kernels, {self.temporaries} temporaries"


def translated(name: str, grid: Any, inline_policy: str = "auto", seed: int = 0) -> ir.ProgramIR:
    """Kernel IR of suite program `name` after the passes every target runs (forward, inline with
    `inline_policy`, hoist, order), with the suite's static scalars of `seed`."""
    from icoforge.perf.static import compilable_program_static
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    info = get_program(name)
    scalars = make_scalars(info, grid, seed)
    static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}
    tr, _ = workflow.translate(compilable_program_static(info.program, grid.connectivities, static), inline_policy=inline_policy)
    return tr.program


def inline_counts(name: str, grid: Any, policy: str, seed: int = 0) -> tuple[Counts, Counts]:
    """(inlining off, inlining with `policy`)."""
    return Counts.of(translated(name, grid, "off", seed)), Counts.of(translated(name, grid, policy, seed))


def fuse_counts(name: str, grid: Any, schedule: ProgramSchedule, seed: int = 0) -> tuple[Counts, Counts]:
    """(before the fuse pass, after it) under `schedule`, at the grid's sizes as a call sees them
    (`fuse_scan_min_columns` compares the grid's columns)."""
    before = translated(name, grid, schedule.inline, seed)
    from icoforge.backend.schedule import tuned

    return Counts.of(before), Counts.of(pipeline.fuse(before, schedule, tuned.dim_sizes_of(grid.connectivities)))


def sweep_counts(name: str, grid: Any, schedule: ProgramSchedule, seed: int = 0) -> tuple[Counts, Counts]:
    """(before the fuse pass, after it and the sweep pass) under `schedule` for CUDA, at the grid's sizes."""
    from icoforge.backend.schedule import tuned

    before = translated(name, grid, schedule.inline, seed)
    fused = pipeline.fuse(before, schedule, tuned.dim_sizes_of(grid.connectivities))
    return Counts.of(before), Counts.of(pipeline.fuse_sweeps(fused, schedule, "cuda"))


def assert_transformed(what: str, before: Counts, after: Counts, expected: tuple[Counts, Counts]) -> None:
    """`before` and `after` are the expected counts, and the transformation removed kernels or
    temporaries (an expected table that says "no change" is refused too: that test would cover
    nothing)."""
    want_before, want_after = expected
    assert (want_after.kernels, want_after.temporaries) != (want_before.kernels, want_before.temporaries), (
        f"{what}: the expected counts say nothing changes ({want_before}): the test covers no transformation"
    )
    assert (before, after) == (want_before, want_after), f"{what}: {before} -> {after}, expected {want_before} -> {want_after}"
    assert after.kernels < before.kernels or after.temporaries < before.temporaries, f"{what}: nothing removed ({before} -> {after})"


def _c(kernels: int, temporaries: int) -> Counts:
    return Counts(kernels, temporaries)


# Measured on R2B3/10 with icon4py's static scalars (the suite's), keyed by the GTIR path
# (settings.early_gtir: True, the default; False, ICOFORGE_EARLY_GTIR=0, GT4Py's full list;
# SAME: as on the early path).
SAME = "same"

# (program, the schedule's inline policy) -> (before fusion, after `fuse: *`). rho_theta is fused
# with inlining off: with the default policy its four gradients are recomputed in the last kernel
# (one kernel, nothing left to fuse), so `fuse: *` would change nothing there.
FUSED = {
    ("compute_rho_theta_pgrad_and_update_vn", "off"): {True: (_c(5, 4), _c(2, 4)), False: SAME},
    ("compute_perturbed_quantities_and_interpolation", "auto"): {True: (_c(8, 0), _c(2, 0)), False: SAME},
    # the back substitution and the update: one scan, one temporary fewer
    ("vertically_implicit_solver_at_predictor_step", "auto"): {True: (_c(8, 6), _c(4, 5)), False: SAME},
    ("vertically_implicit_solver_at_corrector_step", "auto"): {True: (_c(7, 6), _c(4, 5)), False: SAME},
}
# `fuse: *` with `fuse_columns`: the tangential wind and the edge quantities reading it one level down
COLUMN_FUSED = {"compute_horizontal_velocity_quantities_and_fluxes": {True: (_c(3, 0), _c(2, 0)), False: SAME}}

# (program, `fuse`) -> (before fusion, after `fuse` and `fuse_sweeps: *`): the forward and backward
# sweeps as one walk, their two coefficients (__tmp_4, __tmp_5) on chip
SWEEP_FUSED = {
    ("vertically_implicit_solver_at_predictor_step", ()): {True: (_c(8, 6), _c(7, 4)), False: SAME},
    ("vertically_implicit_solver_at_predictor_step", ("*",)): {True: (_c(8, 6), _c(3, 3)), False: SAME},
    ("vertically_implicit_solver_at_corrector_step", ()): {True: (_c(7, 6), _c(6, 4)), False: SAME},
    ("vertically_implicit_solver_at_corrector_step", ("*",)): {True: (_c(7, 6), _c(3, 3)), False: SAME},
}

# program -> (inline "off", inline "all")
INLINED = {
    "vertically_implicit_solver_at_predictor_step": {True: (_c(10, 8), _c(5, 3)), False: SAME},
    "compute_rho_theta_pgrad_and_update_vn": {True: (_c(5, 4), _c(1, 0)), False: SAME},
    # GT4Py's full list leaves 9 kernels and 8 temporaries here, all inlined into one kernel
    "compute_advection_in_corrector_vertical_momentum": {True: (_c(4, 3), _c(2, 1)), False: (_c(9, 8), _c(1, 0))},
    "compute_perturbed_quantities_and_interpolation": {True: (_c(10, 2), _c(8, 0)), False: SAME},
    "compute_advection_in_horizontal_momentum": {True: (_c(3, 2), _c(1, 0)), False: SAME},
}


def expected(table: dict, key: Any) -> tuple[Counts, Counts]:
    """The expected (before, after) of `key` on the session's GTIR path."""
    early = settings.current().early_gtir
    counts = table[key][early]
    if counts == SAME:
        counts = table[key][True]
    assert counts is not None, f"{key}: no counts recorded for ICOFORGE_EARLY_GTIR={int(early)}"
    return counts
