"""verify(): poisoning, whole-array comparison, and detection of planted faults."""

import numpy as np
import pytest

from icoforge.suite.catalogue import all_programs, get_program
from icoforge.suite.inputs import make_inputs
from icoforge.suite.runner import CustomBackend, prepare
from icoforge.suite.verify import compare_output, is_poisoned, poison, poison_value, verify

# GT4Py's embedded backend cannot run these (open UnitRange in concat_where, a GT4Py limitation);
# the scans run, but take seconds per level on it. Both kinds are covered with gtfn_cpu below.
EMBEDDED_UNSUPPORTED = {
    "compute_advection_in_corrector_vertical_momentum",
    "compute_advection_in_predictor_vertical_momentum",
    "compute_rho_theta_pgrad_and_update_vn",
    "vertically_implicit_solver_at_corrector_step",
    "vertically_implicit_solver_at_predictor_step",
}
EMBEDDED_PROGRAMS = [p.name for p in all_programs() if not p.has_scan and p.name not in EMBEDDED_UNSUPPORTED]


def poisoned(shape, dtype=np.float64):
    array = np.empty(shape, dtype=dtype)
    poison(array)
    return array


# --- the comparison on plain arrays ------------------------------------------------------------


def test_poison_is_a_nan_no_arithmetic_produces():
    array = poisoned((3,))
    assert np.isnan(array).all() and is_poisoned(array).all()
    with np.errstate(invalid="ignore"):
        computed = np.array([np.nan, np.inf - np.inf, np.sqrt(-1.0), np.float64(0.0) / 0.0])
    assert np.isnan(computed).all() and not is_poisoned(computed).any()
    assert is_poisoned(poisoned((2,), np.float32)).all()
    assert poison_value(np.int32) == np.iinfo(np.int32).min + 7
    assert poison_value(bool) is None


def test_identical_arrays_with_untouched_border_pass():
    ref = poisoned((4, 5))
    ref[1:3, :4] = np.arange(8.0).reshape(2, 4)
    stats = compare_output("x", ref.copy(), ref, rtol=1e-10, atol=0.0)
    assert stats.passed
    assert (stats.written, stats.untouched) == (8, 12)
    assert stats.max_abs_err == stats.max_rel_err == 0.0


def test_error_beyond_tolerance_fails_with_its_size_and_place():
    ref = poisoned((4, 5))
    ref[1:3, :4] = 1.0 + np.arange(8.0).reshape(2, 4)
    test = ref.copy()
    test[2, 1] += 1e-6
    stats = compare_output("x", test, ref, rtol=1e-10, atol=1e-12)
    assert not stats.passed
    assert stats.mismatches == 1 and stats.worst_index == (2, 1)
    assert stats.max_abs_err == pytest.approx(1e-6)
    assert stats.max_rel_err == pytest.approx(1e-6 / ref[2, 1])
    # within tolerance: passes, and still reports the error
    loose = compare_output("x", test, ref, rtol=1e-5, atol=0.0)
    assert loose.passed and loose.max_abs_err == pytest.approx(1e-6)


def test_default_absolute_tolerance_follows_the_output_scale():
    ref = np.array([1e-5, 2e-5, 1e-20])  # a divergence-sized output with a near-zero point
    near_zero_noise = ref + np.array([0.0, 0.0, 1e-18])  # cancellation noise: 1e-13 of the scale
    stats = compare_output("div", near_zero_noise, ref, rtol=1e-10)
    assert stats.passed and stats.atol == pytest.approx(2e-17)
    assert stats.max_rel_err > 1  # relative to the point itself it is large
    real_error = ref * np.array([1.0, 1.0 + 1e-8, 1.0])  # 1e-8 relative on a large point
    assert not compare_output("div", real_error, ref, rtol=1e-10).passed
    # the same arrays scaled to ~300 (a temperature): same verdicts
    assert compare_output("t", near_zero_noise * 3e7, ref * 3e7, rtol=1e-10).passed
    assert not compare_output("t", real_error * 3e7, ref * 3e7, rtol=1e-10).passed


def test_unwritten_and_extra_written_points_fail():
    ref = poisoned((4, 5))
    ref[1:3] = 1.0
    skipped = ref.copy()
    skipped[2, 3] = poison_value(np.float64)
    stats = compare_output("x", skipped, ref, rtol=1e-10, atol=0.0)
    assert (stats.unwritten, stats.extra_written, stats.passed) == (1, 0, False)
    assert stats.worst_index == (2, 3)

    overwrote = ref.copy()
    overwrote[0, 0] = 1.0  # outside the reference's domain
    stats = compare_output("x", overwrote, ref, rtol=1e-10, atol=0.0)
    assert (stats.unwritten, stats.extra_written, stats.passed) == (0, 1, False)


def test_nan_in_a_written_region_never_passes_even_if_both_agree():
    ref = poisoned((3, 3))
    ref[1] = [1.0, np.nan, np.inf]
    stats = compare_output("x", ref.copy(), ref, rtol=1e-10, atol=0.0)
    assert stats.non_finite == 2 and not stats.passed


def test_int_and_bool_outputs_compare_exactly():
    ref = np.full((2, 3), poison_value(np.int32), dtype=np.int32)
    ref[0] = [1, 2, 3]
    assert compare_output("i", ref.copy(), ref, rtol=0.0, atol=0.0).passed
    off = ref.copy()
    off[0, 1] = 5
    assert compare_output("i", off, ref, rtol=0.0, atol=0.0).mismatches == 1

    flags = np.array([[True, False], [False, True]])
    assert compare_output("b", flags.copy(), flags, rtol=0.0, atol=0.0).passed
    assert not compare_output("b", ~flags, flags, rtol=0.0, atol=0.0).passed


# --- whole programs ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EMBEDDED_PROGRAMS)
def test_programs_verify_against_themselves_on_embedded(name, tiny_grid):
    """Runs each program (GT4Py's embedded backend raises on out-of-bounds reads, so this also
    checks that inputs cover what the program reads) and checks the harness: outputs finite,
    every output written somewhere, untouched parts still poisoned."""
    result = verify(get_program(name), "embedded", "embedded", tiny_grid, seed=5)
    assert result.passed, result.summary()
    assert all(o.written > 0 for o in result.outputs), result.summary()
    assert result.max_abs_err == 0.0


@pytest.fixture(scope="module")
def divergence():
    return get_program("compute_divergence_of_fluxes_of_rho_and_theta")


def _gtfn_then(edit):
    """A CustomBackend running gtfn_cpu, then `edit(args)` on the results: a planted fault."""

    def prepare_faulty(info, grid, args):
        call, _ = prepare(info, "gtfn_cpu", grid, args)

        def run(run_args):
            call(run_args)
            edit(run_args)

        return run

    return CustomBackend(f"gtfn_cpu+{edit.__name__}", prepare_faulty)


def _run_gtfn(info, grid):
    args = make_inputs(info, grid, seed=1)
    call, _ = prepare(info, "gtfn_cpu", grid, args)
    call(args)
    return {name: args[name].asnumpy() for name in info.outputs}


@pytest.mark.slow
def test_gtfn_matches_embedded_and_planted_faults_are_caught(divergence, tiny_grid):
    ok = verify(divergence, "gtfn_cpu", "embedded", tiny_grid, seed=1)
    assert ok.passed, ok.summary()
    assert ok.output("z_flxdiv_mass").written == tiny_grid.num_cells * tiny_grid.num_levels
    assert ok.output("z_flxdiv_mass").untouched == tiny_grid.num_cells  # the extra level nlev

    assert verify(divergence, "gtfn_cpu", "gtfn_cpu", tiny_grid, seed=1).passed

    written_levels = _run_gtfn(divergence, tiny_grid)["z_flxdiv_theta"][:, :-1]
    scale = np.abs(written_levels).max()

    def perturb_one_point(args):
        args["z_flxdiv_theta"].ndarray[17, 3] += 1e-9 * scale

    bad = verify(divergence, _gtfn_then(perturb_one_point), "gtfn_cpu", tiny_grid, seed=1)
    assert not bad.passed
    stats = bad.output("z_flxdiv_theta")
    assert (stats.mismatches, stats.worst_index) == (1, (17, 3))
    assert stats.max_abs_err == pytest.approx(1e-9 * scale, rel=1e-3)
    assert stats.atol == pytest.approx(1e-12 * scale)  # the default absolute tolerance scales
    assert bad.output("z_flxdiv_mass").passed

    def skip_top_level(args):
        args["z_flxdiv_mass"].ndarray[:, 0] = poison_value(np.float64)

    bad = verify(divergence, _gtfn_then(skip_top_level), "gtfn_cpu", tiny_grid, seed=1)
    assert bad.output("z_flxdiv_mass").unwritten == tiny_grid.num_cells and not bad.passed

    def write_extra_level(args):
        args["z_flxdiv_mass"].ndarray[:, -1] = 0.0

    bad = verify(divergence, _gtfn_then(write_extra_level), "gtfn_cpu", tiny_grid, seed=1)
    assert bad.output("z_flxdiv_mass").extra_written == tiny_grid.num_cells and not bad.passed

    def scribble_on_input(args):
        args["mass_fl_e"].ndarray[0, 0] += 1.0

    bad = verify(divergence, _gtfn_then(scribble_on_input), "gtfn_cpu", tiny_grid, seed=1)
    assert bad.modified_inputs == ("mass_fl_e",) and not bad.passed
    assert "input modified" in bad.summary()


@pytest.mark.slow
def test_scan_program_gtfn_matches_embedded(tiny_grid):
    """A vertical scan (tridiagonal forward sweep) end to end. w at k-1 is the scan's carried
    state, not a read of the field: both outputs are pure outputs, poisoned outside [1, nlev)."""
    info = get_program("solve_tridiagonal_matrix_for_w_forward_sweep")
    assert info.outputs == ("z_q", "w") and info.inouts == ()
    result = verify(info, "gtfn_cpu", "embedded", tiny_grid, seed=2)
    assert result.passed, result.summary()
    nlev, cells = tiny_grid.num_levels, tiny_grid.num_cells
    for output in result.outputs:
        assert output.written == cells * (nlev - 1)  # levels 1 .. nlev-1
        assert output.untouched == cells * 2  # level 0 and the extra level nlev
