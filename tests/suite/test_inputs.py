"""make_inputs builds arguments every program accepts; argcheck finds arguments that do not fit."""

import gt4py.next as gtx
import numpy as np
import pytest
from icon4py.model.common import dimension as dims

from icoforge.suite.argcheck import check_args, write_domains
from icoforge.suite.catalogue import all_programs, get_program
from icoforge.suite.inputs import copy_args, field_shape, is_field, make_inputs, make_scalars
from icoforge.suite.specs import vertical_indices

ALL_NAMES = [p.name for p in all_programs()]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_program_gets_arguments_gt4py_accepts(name, tiny_grid):
    """GT4Py's own type check, write domains inside the outputs, tables present and sized."""
    info = get_program(name)
    args = make_inputs(info, tiny_grid, seed=1)
    assert set(args) == {p.name for p in info.params}
    assert check_args(info, args, tiny_grid) == []
    # every program has work to do on a global grid
    for output, ranges in write_domains(info, args):
        assert all(start < stop for start, stop in ranges.values()), (output, ranges)


def test_shapes_levels_and_local_dimensions(tiny_grid):
    info = get_program("vertically_implicit_solver_at_predictor_step")
    args = make_inputs(info, tiny_grid, seed=0)
    nlev = tiny_grid.num_levels
    assert args["next_w"].ndarray.shape == (tiny_grid.num_cells, nlev + 1)
    assert args["mass_flux_at_edges_on_model_levels"].ndarray.shape == (tiny_grid.num_edges, nlev + 1)
    assert args["geofac_div"].ndarray.shape == (tiny_grid.num_cells, 3)  # C2E
    assert args["rayleigh_damping_factor"].ndarray.shape == (nlev + 1,)
    assert field_shape(get_program("compute_advection_in_horizontal_momentum").param("geofac_grdiv"), tiny_grid) == (
        tiny_grid.num_edges, 5,  # E2C2EO
    )  # fmt: skip


def test_scalars_follow_icon4py(tiny_grid):
    nlev = tiny_grid.num_levels
    levels = vertical_indices(nlev)
    pred = make_inputs(get_program("vertically_implicit_solver_at_predictor_step"), tiny_grid, seed=0)
    assert pred["vertical_end_index_model_surface"] == nlev + 1
    assert pred["vertical_start_index_model_top"] == 0
    assert pred["flat_level_index_plus1"] == levels["nflatlev"] + 1
    assert pred["kstart_moist"] == levels["kstart_moist"]
    assert pred["end_cell_index_local"] == tiny_grid.num_cells  # global grid: no halo
    assert pred["rayleigh_type"] == 2 and pred["divdamp_type"] == 3
    assert isinstance(pred["dtime"], np.float64) and pred["dtime"] == 10.0
    assert isinstance(pred["at_first_substep"], bool)

    corr = make_inputs(get_program("compute_advection_in_corrector_vertical_momentum"), tiny_grid, seed=0)
    assert corr["cfl_w_limit"] == pytest.approx(0.065)
    assert corr["scalfac_exdiff"] == pytest.approx(0.05 / (10.0 * (0.85 - 0.65)))

    hydro = make_inputs(get_program("compute_hydrostatic_correction_term"), tiny_grid, seed=0)
    assert (hydro["vertical_start"], hydro["vertical_end"]) == (nlev - 1, nlev)

    # zones empty on a global grid (lateral boundary, halo) fall back to the local domain
    halo = make_inputs(get_program("update_theta_and_exner_in_halo"), tiny_grid, seed=0)
    assert (halo["horizontal_start"], halo["horizontal_end"]) == (0, tiny_grid.num_cells)

    assert 0 < levels["end_index_of_damping_layer"] < levels["nflatlev"] <= levels["nflat_gradp"] < nlev


def test_random_values_are_seeded_and_in_range(tiny_grid):
    info = get_program("compute_solver_coefficients_matrix")
    a, b, c = (make_inputs(info, tiny_grid, seed=s) for s in (7, 7, 8))
    for name in ("exner_nnow", "rho_nnow", "theta_v_nnow"):
        x = a[name].asnumpy()
        assert np.array_equal(x, b[name].asnumpy())
        assert not np.array_equal(x, c[name].asnumpy())
        assert x.min() >= 0.1 and x.max() < 1.1
        assert len(np.unique(x)) > x.size // 2  # not constant, not zeros


def test_bool_and_vertical_offset_fields(tiny_grid):
    mask = make_inputs(get_program("update_theta_and_exner_in_halo"), tiny_grid, seed=3)["mask_prog_halo_c"]
    assert mask.asnumpy().dtype == bool and 0.3 < mask.asnumpy().mean() < 0.7

    nlev = tiny_grid.num_levels
    koff = make_inputs(get_program("compute_hydrostatic_correction_term"), tiny_grid, seed=3)["ikoffset"].asnumpy()
    assert koff.dtype == np.int32 and koff.shape == (tiny_grid.num_edges, 2, nlev + 1)
    k = np.arange(nlev + 1)
    assert (koff >= 0).all()
    assert (k + koff)[:, :, :nlev].max() <= nlev - 1  # shifted reads stay on full levels
    assert koff.max() > 0


def test_copy_args_gives_independent_buffers(tiny_grid):
    info = get_program("compute_airmass")
    args = make_inputs(info, tiny_grid, seed=0)
    copy = copy_args(args)
    copy["rho_in"].ndarray[0, 0] = -1.0
    assert args["rho_in"].ndarray[0, 0] != -1.0
    assert copy["horizontal_end"] == args["horizontal_end"]


def test_check_args_reports_what_does_not_fit(tiny_grid):
    info = get_program("vertically_implicit_solver_at_predictor_step")
    args = make_inputs(info, tiny_grid, seed=0)
    nlev = tiny_grid.num_levels

    too_short = dict(args, next_w=gtx.as_field([dims.CellDim, dims.KDim], np.zeros((tiny_grid.num_cells, nlev))))
    assert check_args(info, too_short, tiny_grid) == [
        f"next_w: written over K [{nlev}, {nlev + 1}) but allocated [0, {nlev})"
    ]

    wrong_dims = dict(args, next_w=gtx.as_field([dims.EdgeDim, dims.KDim], np.zeros((tiny_grid.num_edges, nlev + 1))))
    (problem,) = check_args(info, wrong_dims, tiny_grid)
    assert problem.startswith("type check:") and "next_w" in problem

    wrong_scalar = dict(args, dtime=gtx.int32(3))
    (problem,) = check_args(info, wrong_scalar, tiny_grid)
    assert "dtime" in problem and "float64" in problem

    narrow = dict(args, geofac_div=gtx.as_field([dims.CellDim, dims.C2EDim], np.zeros((tiny_grid.num_cells, 2))))
    assert check_args(info, narrow, tiny_grid) == ["geofac_div: local dimension C2E has 2 entries, table has 3"]

    missing = {k: v for k, v in args.items() if k != "dtime"}
    assert check_args(info, missing, tiny_grid) == ["missing arguments: dtime"]


def test_physical_magnitudes_from_the_table(tiny_grid):
    args = make_inputs(get_program("vertically_implicit_solver_at_predictor_step"), tiny_grid, seed=2)
    theta = args["current_theta_v"].asnumpy()
    assert 280.0 <= theta.min() and theta.max() < 320.0
    w = args["current_w"].asnumpy()
    assert w.min() < 0 < w.max() and np.abs(w).max() <= 0.5  # signed where the physics is
    assert np.abs(args["geofac_div"].asnumpy()).max() <= 1.2e-5
    assert args["ddqz_z_half"].asnumpy().min() >= 50.0  # layer thicknesses: divisors stay large


@pytest.mark.parametrize("seed", [0, 7, 12345])
def test_make_scalars_equals_the_scalars_of_make_inputs(tiny_grid, seed):
    # every program: the bit generator skips each field exactly as make_inputs draws it
    for name in ALL_NAMES:
        info = get_program(name)
        full = make_inputs(info, tiny_grid, seed=seed)
        expected = {k: v for k, v in full.items() if not is_field(v)}
        got = make_scalars(info, tiny_grid, seed=seed)
        assert got.keys() == expected.keys(), name
        for k in expected:
            assert type(got[k]) is type(expected[k]) and got[k] == expected[k], (name, k, got[k], expected[k])
