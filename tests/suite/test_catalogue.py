"""The catalogue finds every dycore program and reads outputs, tables and scans from the GTIR."""

import pytest

from icoforge.errors import UnknownNameError
from icoforge.suite.catalogue import all_programs, get_program, program_names
from icoforge.suite.ranges import FIELD_VALUES, GRANULE_PROGRAMS, PROGRAM_ARGS, SHARED_ARGS


def test_finds_all_78_programs_each_once():
    names = program_names()
    assert len(names) == 78
    assert len(set(names)) == 78
    assert list(names) == sorted(names)
    # modules defining several programs contribute all of them
    for name in (
        "vertically_implicit_solver_at_predictor_step",
        "vertically_implicit_solver_at_corrector_step",
        "compute_rho_theta_pgrad_and_update_vn",
        "apply_divergence_damping_and_update_vn",
        "compute_perturbed_quantities_and_interpolation",
        "compute_interpolation_and_nonhydro_buoy",
    ):
        assert name in names


def test_programs_are_listed_under_their_defining_module():
    # compute_divergence_of_fluxes_of_rho_and_theta is imported by other modules too
    info = get_program("compute_divergence_of_fluxes_of_rho_and_theta")
    assert info.module == "icon4py.model.atmosphere.dycore.stencils.compute_divergence_of_fluxes_of_rho_and_theta"
    assert info.program.__name__ == info.name


def test_outputs_from_set_at_targets():
    info = get_program("compute_divergence_of_fluxes_of_rho_and_theta")
    assert info.outputs == ("z_flxdiv_mass", "z_flxdiv_theta")
    assert info.inouts == ()
    assert info.connectivities == ("C2E",)
    assert not info.has_scan and not info.has_vertical_shift
    assert [p.name for p in info.params] == [
        "geofac_div", "mass_fl_e", "z_theta_v_fl_e", "z_flxdiv_mass", "z_flxdiv_theta",
        "horizontal_start", "horizontal_end", "vertical_start", "vertical_end",
    ]  # fmt: skip
    geofac = info.param("geofac_div")
    assert geofac.dims == ("Cell", "C2E") and geofac.dtype == "float64"
    assert info.param("horizontal_end").dtype == "int32" and not info.param("horizontal_end").is_field
    assert info.bound_of("horizontal_start") == ("Cell", "start")
    assert info.bound_of("vertical_end") == ("K", "stop")
    assert info.bound_of("geofac_div") is None


def test_predictor_solver_outputs_inouts_and_scan():
    info = get_program("vertically_implicit_solver_at_predictor_step")
    assert set(info.outputs) == {
        "contravariant_correction_at_cells_on_half_levels", "next_w", "next_rho", "next_exner",
        "next_theta_v", "dwdz_at_cells_on_model_levels", "exner_dynamical_increment",
    }  # fmt: skip
    # next_w's surface level is set by one statement and read by the solver
    assert "next_w" in info.inouts
    assert "next_rho" not in info.inouts
    assert info.has_scan and info.has_vertical_shift
    assert info.connectivities == ("C2E",)
    assert info.dims == ("Cell", "Edge", "K")


def test_scans_and_connectivities_over_the_whole_catalogue():
    scans = {p.name for p in all_programs() if p.has_scan}
    assert scans == {
        "solve_tridiagonal_matrix_for_w_back_substitution",
        "solve_tridiagonal_matrix_for_w_forward_sweep",
        "vertically_implicit_solver_at_corrector_step",
        "vertically_implicit_solver_at_predictor_step",
    }
    horizontal = get_program("compute_advection_in_horizontal_momentum")
    assert set(horizontal.connectivities) == {"C2E", "E2C", "E2C2EO", "E2V", "V2E"}
    # every program writes something, and every output is a field
    for p in all_programs():
        assert p.outputs, p.name
        assert all(p.param(o).is_field for o in p.outputs), p.name


def test_misspelt_program_suggests_close_names():
    with pytest.raises(UnknownNameError) as err:
        get_program("vertically_implicit_solver_at_predictor")
    assert "vertically_implicit_solver_at_predictor_step" in err.value.suggestions
    assert "Did you mean" in str(err.value)
    with pytest.raises(KeyError):  # UnknownNameError is also a KeyError
        get_program("compute_rho_theta_pgrad_and_update")


def test_unknown_parameter_name():
    with pytest.raises(UnknownNameError):
        get_program("compute_divergence_of_fluxes_of_rho_and_theta").param("mass_fl")


def test_ranges_table_names_exist():
    """Every program and parameter named in the table exists (a rename upstream fails here)."""
    names = set(program_names())
    assert set(GRANULE_PROGRAMS) <= names
    for program, specs in PROGRAM_ARGS.items():
        assert program in names, program
        params = {p.name for p in get_program(program).params}
        assert set(specs) <= params, (program, set(specs) - params)
    all_params = {p.name: p for info in all_programs() for p in info.params}
    assert set(SHARED_ARGS) <= set(all_params), set(SHARED_ARGS) - set(all_params)
    assert set(FIELD_VALUES) <= set(all_params), set(FIELD_VALUES) - set(all_params)
    assert all(all_params[name].dtype == "float64" for name in FIELD_VALUES)
