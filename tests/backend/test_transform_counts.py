"""The count check of the fusion and inline tests (tests/transform_counts.py, issue 51 item 3) fails
when the transformation does not happen: with the schedule's `{"fuse": []}`, with the inline
policy "off", and with a fuse pass that returns its input. Programs: the perturbed quantities
(fusion: 8 kernels to 2 on the early path) and the predictor's solver (inlining: 10 kernels and 8
temporaries to 5 and 3), both of the tables the tests use; and rho_theta with the default inline
policy, the case test_fuse.py used to run that fuses nothing."""

from __future__ import annotations

import pytest

from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule
from tests.transform_counts import FUSED, INLINED, Counts, assert_transformed, expected, fuse_counts, inline_counts

PQ = "compute_perturbed_quantities_and_interpolation"
PREDICTOR = "vertically_implicit_solver_at_predictor_step"


def test_the_fusion_check_passes_with_fusion_on(tiny_grid):
    """The control: the same check, `fuse: *`, passes (so the failures below are the schedule's)."""
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=("*",))
    assert_transformed(PQ, *fuse_counts(PQ, tiny_grid, schedule, seed=31), expected(FUSED, (PQ, "auto")))


def test_the_fusion_check_fails_with_fusion_off(tiny_grid):
    off = ProgramSchedule.from_json({"fuse": []})
    before, after = fuse_counts(PQ, tiny_grid, off, seed=31)
    assert before == after  # nothing fused
    with pytest.raises(AssertionError, match=rf"{PQ}: .* -> {after.kernels} kernels, .*expected"):
        assert_transformed(PQ, before, after, expected(FUSED, (PQ, "auto")))


def test_the_fusion_check_fails_when_the_fuse_pass_does_nothing(tiny_grid, monkeypatch):
    """A planted fault in the compiler, not the schedule: the fuse pass returns its input."""
    from icoforge.backend.schedule import pipeline

    monkeypatch.setattr(pipeline, "fuse_kernels", lambda program, *args, **kwargs: program)
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=("*",))
    before, after = fuse_counts(PQ, tiny_grid, schedule, seed=31)
    assert before == after
    with pytest.raises(AssertionError, match="expected"):
        assert_transformed(PQ, before, after, expected(FUSED, (PQ, "auto")))


def test_the_inline_check_fails_with_inlining_off(tiny_grid):
    assert_transformed(PREDICTOR, *inline_counts(PREDICTOR, tiny_grid, "all", seed=43), expected(INLINED, PREDICTOR))  # control
    before, after = inline_counts(PREDICTOR, tiny_grid, "off", seed=43)
    assert before == after
    with pytest.raises(AssertionError, match=rf"{PREDICTOR}: .*expected"):
        assert_transformed(PREDICTOR, before, after, expected(INLINED, PREDICTOR))


def test_the_check_refuses_a_table_that_expects_no_change(tiny_grid):
    """rho_theta under `fuse: *` with the default inline policy: one kernel before and after (the
    inline pass already recomputed its gradients). Recording that as the expected counts would
    make a test that covers no fusion; the check refuses such a table, and the real one fails."""
    name = "compute_rho_theta_pgrad_and_update_vn"
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=("*",))
    before, after = fuse_counts(name, tiny_grid, schedule, seed=31)
    assert before == after and before.kernels == 1
    with pytest.raises(AssertionError, match="covers no transformation"):
        assert_transformed(name, before, after, (before, after))
    with pytest.raises(AssertionError, match="expected"):
        assert_transformed(name, before, after, expected(FUSED, (name, "off")))
    # a table recording a change that removes nothing (a kernel more) covers no fusion either
    with pytest.raises(AssertionError, match="nothing removed"):
        assert_transformed(name, Counts(2, 1), Counts(3, 1), (Counts(2, 1), Counts(3, 1)))
