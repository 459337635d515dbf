"""Hand-chosen argument values: the one table to read or edit.

`PROGRAM_ARGS[program][param]` says how to build one argument of one program; `SHARED_ARGS[param]`
applies to every program with a parameter of that name, and `FIELD_VALUES[field]` gives the value
range of a float field of that name; anything else gets the generic default of `inputs.py` (whole
horizontal dimension, levels 0..nlev, random floats in [0.1, 1.1)).

The entries for the programs icon4py's granule calls mirror `solve_nonhydro.py` and
`velocity_advection.py` of icon4py-atmosphere-dycore 0.4.1 (their `setup_program` calls: horizontal
and vertical sizes, variants, constant args); the config values are NonHydrostaticConfig's
defaults. Programs with vertical shifts that the granule does not call follow the ranges of
icon4py's own stencil tests (e.g. start at level 1 when level k-1 is read).
"""

from __future__ import annotations

from icon4py.model.common import constants

from icoforge.suite.specs import (
    CELL,
    EDGE,
    Const,
    Derived,
    IndexIn,
    KOffsets,
    Levels,
    OneOf,
    Position,
    Spec,
    SpecContext,
    Uniform,
    VerticalIndex,
    ZoneEnd,
    ZoneStart,
)

# --- helpers that keep the table short --------------------------------------------------------


def horizontal(dim: str, start_zone: str, end_zone: str, *, or_else: str | None = None) -> dict[str, Spec]:
    return {
        "horizontal_start": ZoneStart(dim, start_zone, or_else),
        "horizontal_end": ZoneEnd(dim, end_zone, or_else),
    }


def vertical(start: Spec, end: Spec) -> dict[str, Spec]:
    return {"vertical_start": start, "vertical_end": end}


TOP = Const(0)
NLEV = Levels(0)  # number of full levels
SURFACE = Levels(1)  # nlev + 1: the surface half level is included

# Zones icon4py uses only on limited-area grids (lateral boundary) or with halos; on a grid where
# they are empty we take the whole local domain so that the program still does work.
LATERAL_BOUNDARY_CELLS = horizontal(CELL, "LATERAL_BOUNDARY", "LATERAL_BOUNDARY_LEVEL_4", or_else="LOCAL")

DTIME = 10.0  # s, dynamics substep
NDYN_SUBSTEPS = 5  # DEFAULT_DYNAMICS_TO_PHYSICS_TIMESTEP_RATIO
CFL_W_LIMIT, SCALFAC_EXDIFF = 0.65, 0.05  # VelocityAdvection._cfl_w_limit, _scalfac_exdiff
VELADV_OFFCTR, RHOTHETA_OFFCTR = 0.25, -0.1  # NonHydrostaticConfig defaults
SECOND_ORDER_DIVDAMP_FACTOR = 0.004  # <= 4 * divdamp_fac, so both damping orders are applied


def mean_cell_area(ctx: SpecContext) -> float:
    return 4.0 * 3.141592653589793 * constants.EARTH_RADIUS**2 / ctx.grid.num_cells


# --- parameters with the same meaning in every program ----------------------------------------

SHARED_ARGS: dict[str, Spec] = {
    # physical constants
    "cpd": Const(constants.CPD),
    "cvd": Const(constants.CVD),
    "rd": Const(constants.RD),
    "rd_o_cvd": Const(constants.RD_O_CVD),
    "rd_o_p0ref": Const(constants.RD_O_P0REF),
    "grav_o_cpd": Const(constants.GRAV_O_CPD),
    "dbl_eps": Const(constants.DBL_EPS),
    # time stepping (SolveNonhydro / VelocityAdvection derive these from dtime and the config)
    "dtime": Const(DTIME),
    "r_nsubsteps": Const(1.0 / NDYN_SUBSTEPS),
    "ndyn_substeps_var": Const(float(NDYN_SUBSTEPS)),
    "cfl_w_limit": Const(CFL_W_LIMIT / DTIME),
    "scalfac_exdiff": Const(SCALFAC_EXDIFF / (DTIME * (0.85 - CFL_W_LIMIT))),
    "advection_explicit_weight_parameter": Const(0.5 - VELADV_OFFCTR),
    "advection_implicit_weight_parameter": Const(0.5 + VELADV_OFFCTR),
    "wgt_nnow_vel": Const(0.5 - VELADV_OFFCTR),
    "wgt_nnew_vel": Const(0.5 + VELADV_OFFCTR),
    "rhotheta_explicit_weight_parameter": Const(0.5 - RHOTHETA_OFFCTR),
    "rhotheta_implicit_weight_parameter": Const(0.5 + RHOTHETA_OFFCTR),
    "wgt_nnow_rth": Const(0.5 - RHOTHETA_OFFCTR),
    "wgt_nnew_rth": Const(0.5 + RHOTHETA_OFFCTR),
    # divergence damping (NonHydrostaticConfig defaults: divdamp_order COMBINED, 3D damping)
    "divdamp_order": Const(24),
    "divdamp_type": Const(3),
    "rayleigh_type": Const(int(constants.RayleighType.KLEMP)),
    "igradp_method": Const(3),  # TAYLOR_HYDRO, the only one icon4py implements
    "mean_cell_area": Derived(mean_cell_area, "CellParams.mean_cell_area of a uniform sphere"),
    "second_order_divdamp_factor": Const(SECOND_ORDER_DIVDAMP_FACTOR),
    "second_order_divdamp_scaling_coeff": Derived(
        lambda ctx: SECOND_ORDER_DIVDAMP_FACTOR * mean_cell_area(ctx),
        "second_order_divdamp_factor * mean_cell_area (run_corrector_step)",
    ),
    "scal_divdamp_o2": Derived(
        lambda ctx: SECOND_ORDER_DIVDAMP_FACTOR * mean_cell_area(ctx), "as second_order_divdamp_scaling_coeff"
    ),
    "max_nudging_coefficient": Const(NDYN_SUBSTEPS * 0.02),
    "iau_wgt_dyn": Const(0.5),
    # switches: icon4py's default configuration, taking the branch that does the work
    "limited_area": Derived(lambda ctx: ctx.grid.limited_area, "icon4py's grid.limited_area"),
    "is_iau_active": Const(False),
    "at_first_substep": Const(True),
    "at_last_substep": Const(True),
    "lprep_adv": Const(True),
    "prepare_advection": Const(True),
    "skip_compute_predictor_vertical_advection": Const(False),
    "apply_extra_diffusion_on_vn": Const(True),
    "apply_2nd_order_divergence_damping": Const(True),
    "apply_4th_order_divergence_damping": Const(True),
    # level indices of icon4py's vertical grid
    "nflatlev": VerticalIndex("nflatlev"),
    "nflat_gradp": VerticalIndex("nflat_gradp"),
    "end_index_of_damping_layer": VerticalIndex("end_index_of_damping_layer"),
    "kstart_moist": VerticalIndex("kstart_moist"),
    # fields that are not plain random floats
    "ikoffset": KOffsets(),
}


# --- magnitudes of field values (SI units) -------------------------------------------------------
# Fields not listed get uniform [0.1, 1.1). These are the inputs of the granule programs: with
# O(1) random values everywhere, e.g. dtime * div(mass flux) is as large as rho itself, rho_new
# passes through zero, theta_v = .../rho_new explodes, and legitimate rounding differences between
# two backends grow past 1e-8 in the vertically implicit solver. With magnitudes like these (a
# ~100 km grid, an atmosphere at rest plus noise) they stay below 1e-12.


def _signed(magnitude: float) -> Uniform:
    return Uniform(-magnitude, magnitude)


RHO, THETA_V, EXNER = Uniform(0.5, 1.2), Uniform(280.0, 320.0), Uniform(0.8, 1.0)
VN, W = _signed(20.0), _signed(0.5)
EDGE_LENGTH_INVERSE = Uniform(0.8e-5, 1.2e-5)  # 1/m, edges of ~100 km
LAYER_THICKNESS = Uniform(50.0, 500.0)  # m

FIELD_VALUES: dict[str, Uniform] = {
    # prognostic and diagnostic state
    **dict.fromkeys(
        ["rho", "rho_now", "rho_new", "rho_ic", "current_rho", "next_rho", "rho_at_cells_on_half_levels",
         "rho_at_edges_on_model_levels", "reference_rho_at_cells_on_model_levels",
         "reference_rho_at_edges_on_model_levels"], RHO),  # fmt: skip
    **dict.fromkeys(
        ["theta_v", "theta_v_now", "theta_v_ic", "current_theta_v", "next_theta_v",
         "theta_v_at_cells_on_half_levels", "theta_v_at_edges_on_model_levels",
         "reference_theta_at_cells_on_half_levels", "reference_theta_at_cells_on_model_levels",
         "reference_theta_at_edges_on_model_levels"], THETA_V),  # fmt: skip
    **dict.fromkeys(
        ["exner", "exner_now", "exner_new", "current_exner", "reference_exner_at_cells_on_model_levels"], EXNER
    ),
    **dict.fromkeys(
        ["vn", "current_vn", "next_vn", "vn_on_half_levels", "tangential_wind", "tangential_wind_on_half_levels",
         "substep_and_spatially_averaged_vn"], VN),  # fmt: skip
    **dict.fromkeys(
        ["w", "w_now", "w_new", "current_w", "next_w", "contravariant_corrected_w_at_cells_on_model_levels"], W
    ),
    **dict.fromkeys(
        ["w_concorr_c", "contravariant_correction_at_cells_on_half_levels",
         "contravariant_correction_at_edges_on_model_levels"], _signed(0.05)),  # fmt: skip
    **dict.fromkeys(
        ["perturbed_exner_at_cells_on_model_levels", "temporal_extrapolation_of_perturbed_exner"], _signed(1e-3)
    ),
    "perturbed_rho_at_cells_on_model_levels": _signed(0.05),
    "perturbed_theta_v_at_cells_on_model_levels": _signed(5.0),
    "ddz_of_temporal_extrapolation_of_perturbed_exner_on_model_levels": _signed(1e-6),
    "d2dz2_of_temporal_extrapolation_of_perturbed_exner_on_model_levels": _signed(1e-8),
    "ddz_of_reference_exner_at_cells_on_half_levels": Uniform(-4e-5, -2e-5),  # -g / (cpd theta)
    "horizontal_kinetic_energy_at_edges_on_model_levels": Uniform(0.0, 200.0),
    "horizontal_pressure_gradient": _signed(1e-6),
    "hydrostatic_correction_on_lowest_level": _signed(1e-6),
    "horizontal_gradient_of_normal_wind_divergence": _signed(1e-8),
    "horizontal_advection_of_w_at_edges_on_half_levels": _signed(1e-3),
    "nonhydro_buoy_at_cells_on_half_levels": _signed(2e-3),
    **dict.fromkeys(["dwdz_at_cells_on_model_levels"], _signed(1e-3)),
    # fluxes
    **dict.fromkeys(["mass_flux_at_edges_on_model_levels", "substep_averaged_mass_flux"], _signed(10.0)),
    "theta_v_flux_at_edges_on_model_levels": _signed(3000.0),
    **dict.fromkeys(
        ["mass_flx_ic", "dynamical_vertical_mass_flux_at_cells_on_half_levels",
         "dynamical_vertical_volumetric_flux_at_cells_on_half_levels"], _signed(0.5)),  # fmt: skip
    # tendencies and increments
    **dict.fromkeys(
        ["vertical_wind_advective_tendency", "predictor_vertical_wind_advective_tendency",
         "corrector_vertical_wind_advective_tendency", "predictor_normal_wind_advective_tendency",
         "corrector_normal_wind_advective_tendency", "normal_wind_tendency_due_to_slow_physics_process",
         "normal_wind_iau_increment", "grf_tend_vn"], _signed(1e-3)),  # fmt: skip
    **dict.fromkeys(
        ["exner_tendency_due_to_slow_physics", "exner_iau_increment", "rho_iau_increment"], _signed(1e-6)
    ),
    "exner_dynamical_increment": _signed(1e-4),
    # vertical grid and metrics
    **dict.fromkeys(["ddqz_z_half", "ddqz_z_full_e"], LAYER_THICKNESS),
    "inv_ddqz_z_full": Uniform(1 / 500.0, 1 / 50.0),
    **dict.fromkeys(["coeff1_dwdz", "coeff2_dwdz"], Uniform(1e-3, 1e-2)),
    **dict.fromkeys(["ddxn_z_full", "ddxt_z_full"], _signed(0.05)),  # terrain slopes
    **dict.fromkeys(["wgtfac_c", "wgtfac_e"], Uniform(0.4, 0.6)),
    **dict.fromkeys(["wgtfacq_c", "wgtfacq_e"], Uniform(0.2, 0.5)),
    **dict.fromkeys(["exner_w_explicit_weight_parameter", "vwind_expl_wgt"], Uniform(0.35, 0.45)),
    **dict.fromkeys(["exner_w_implicit_weight_parameter", "vwind_impl_wgt"], Uniform(0.55, 0.65)),
    "time_extrapolation_parameter_for_exner": Uniform(0.3, 0.4),
    **dict.fromkeys(["d2dexdz2_fac1_mc", "d2dexdz2_fac2_mc"], _signed(1e-7)),
    "zdiff_gradp": _signed(200.0),  # m
    "pg_exdist": _signed(100.0),  # m
    "rayleigh_damping_factor": Uniform(0.0, 0.1),
    "interpolated_fourth_order_divdamp_factor": Uniform(0.0025, 0.004),
    "scaling_factor_for_3d_divdamp": Uniform(0.0, 1.0),
    "horizontal_mask_for_3d_divdamp": Uniform(0.0, 1.0),
    "nudgecoeff_e": Uniform(0.0, 0.1),
    # horizontal grid geometry and interpolation coefficients
    **dict.fromkeys(["inv_dual_edge_length", "inv_primal_edge_length"], EDGE_LENGTH_INVERSE),
    **dict.fromkeys(["area", "area_edge"], Uniform(0.8e10, 1.2e10)),  # m^2
    **dict.fromkeys(["geofac_div", "geofac_rot", "geofac_grdiv", "geofac_grg_x", "geofac_grg_y", "coeff_gradekin"],
                    _signed(1.2e-5)),  # fmt: skip
    "geofac_n2s": _signed(4e-10),
    "coriolis_frequency": _signed(1.5e-4),
    **dict.fromkeys(
        ["primal_normal_cell_x", "primal_normal_cell_y", "dual_normal_cell_x", "dual_normal_cell_y",
         "tangent_orientation"], _signed(1.0)),  # fmt: skip
    **dict.fromkeys(["pos_on_tplane_e_x", "pos_on_tplane_e_y"], _signed(6e4)),  # m
    "e_bln_c_s": Uniform(0.3, 0.36),
    "c_intp": Uniform(0.15, 0.18),
    "c_lin_e": Uniform(0.45, 0.55),
    "e_flx_avg": Uniform(0.1, 0.5),
    "rbf_vec_coeff_e": _signed(0.5),
}


# --- per-program choices ------------------------------------------------------------------------

PROGRAM_ARGS: dict[str, dict[str, Spec]] = {
    # velocity_advection.py
    "compute_diagnostics_from_normal_wind": {
        **horizontal(EDGE, "LATERAL_BOUNDARY_LEVEL_5", "HALO_LEVEL_2"),
        **vertical(TOP, SURFACE),
    },
    "compute_advection_in_predictor_vertical_momentum": {
        **horizontal(CELL, "LATERAL_BOUNDARY_LEVEL_4", "HALO"),
        **vertical(TOP, NLEV),
    },
    "compute_advection_in_corrector_vertical_momentum": {
        **horizontal(CELL, "LATERAL_BOUNDARY_LEVEL_4", "HALO"),
        **vertical(TOP, NLEV),
    },
    "compute_advection_in_horizontal_momentum": {
        **horizontal(EDGE, "NUDGING_LEVEL_2", "LOCAL"),
        **vertical(TOP, NLEV),
    },
    # solve_nonhydro.py, in call order
    "compute_perturbed_quantities_and_interpolation": {
        "start_cell_lateral_boundary_level_3": ZoneStart(CELL, "LATERAL_BOUNDARY_LEVEL_3"),
        "end_cell_local": ZoneEnd(CELL, "LOCAL"),
        "end_cell_halo": ZoneEnd(CELL, "HALO"),
        "end_cell_halo_level_2": ZoneEnd(CELL, "HALO_LEVEL_2"),
        "model_top": TOP,
        "surface_level": SURFACE,
    },
    "compute_hydrostatic_correction_term": {
        **horizontal(EDGE, "NUDGING_LEVEL_2", "LOCAL"),
        **vertical(Levels(-1), NLEV),  # the lowest full level only
    },
    "compute_rho_theta_pgrad_and_update_vn": {
        "start_edge_lateral_boundary": ZoneStart(EDGE, "LATERAL_BOUNDARY"),
        "start_edge_lateral_boundary_level_7": ZoneStart(EDGE, "LATERAL_BOUNDARY_LEVEL_7"),
        "start_edge_nudging_level_2": ZoneStart(EDGE, "NUDGING_LEVEL_2"),
        "end_edge_nudging": ZoneEnd(EDGE, "NUDGING"),
        "end_edge_local": ZoneEnd(EDGE, "LOCAL"),
        "end_edge_halo": ZoneEnd(EDGE, "HALO"),
        "horizontal_start": Const(0),
        "horizontal_end": ZoneEnd(EDGE, "HALO_LEVEL_2"),
        **vertical(TOP, NLEV),
    },
    "compute_horizontal_velocity_quantities_and_fluxes": {
        **horizontal(EDGE, "LATERAL_BOUNDARY_LEVEL_5", "HALO_LEVEL_2"),
        **vertical(TOP, SURFACE),
    },
    "vertically_implicit_solver_at_predictor_step": {
        "start_cell_index_nudging": ZoneStart(CELL, "NUDGING"),
        "end_cell_index_local": ZoneEnd(CELL, "LOCAL"),
        "start_cell_index_lateral_lvl3": ZoneStart(CELL, "LATERAL_BOUNDARY_LEVEL_3"),
        "end_cell_index_halo_lvl1": ZoneEnd(CELL, "HALO"),
        "flat_level_index_plus1": VerticalIndex("nflatlev", 1),
        "vertical_start_index_model_top": TOP,
        "vertical_end_index_model_surface": SURFACE,
    },
    "compute_dwdz_for_divergence_damping": {**LATERAL_BOUNDARY_CELLS, **vertical(TOP, NLEV)},
    "compute_interpolation_and_nonhydro_buoy": {
        **horizontal(CELL, "LATERAL_BOUNDARY_LEVEL_3", "LOCAL"),
        **vertical(Const(1), NLEV),
    },
    "apply_divergence_damping_and_update_vn": {
        **horizontal(EDGE, "NUDGING_LEVEL_2", "LOCAL"),
        **vertical(TOP, NLEV),
    },
    "compute_averaged_vn_and_fluxes": {
        **horizontal(EDGE, "LATERAL_BOUNDARY_LEVEL_5", "HALO_LEVEL_2"),
        **vertical(TOP, NLEV),
    },
    "vertically_implicit_solver_at_corrector_step": {
        "start_cell_index_nudging": ZoneStart(CELL, "NUDGING"),
        "end_cell_index_local": ZoneEnd(CELL, "LOCAL"),
        "vertical_start_index_model_top": TOP,
        "vertical_end_index_model_surface": SURFACE,
    },
    "init_cell_kdim_field_with_zero_wp": {**LATERAL_BOUNDARY_CELLS, **vertical(TOP, SURFACE)},
    "update_mass_flux_weighted": {**LATERAL_BOUNDARY_CELLS, **vertical(Const(1), NLEV)},
    "compute_exner_from_rhotheta": {**LATERAL_BOUNDARY_CELLS, **vertical(TOP, NLEV)},
    "update_theta_and_exner_in_halo": {
        **horizontal(CELL, "HALO", "END", or_else="LOCAL"),
        **vertical(TOP, NLEV),
    },
    # not called by the granule; vertical ranges as in icon4py's stencil tests
    "compute_advective_vertical_wind_tendency": vertical(Const(1), NLEV),
    "compute_contravariant_correction_of_w": vertical(Const(1), NLEV),
    "compute_contravariant_correction_of_w_for_lower_boundary": vertical(NLEV, SURFACE),
    "compute_perturbation_of_rho_and_theta_and_rho_interface_cell_centers": vertical(Const(1), NLEV),
    "compute_rho_virtual_potential_temperatures_and_pressure_gradient": vertical(Const(1), NLEV),
    "compute_virtual_potential_temperatures_and_pressure_gradient": vertical(Const(1), NLEV),
    "compute_horizontal_gradient_of_exner_pressure_for_multiple_levels": vertical(
        VerticalIndex("nflat_gradp"), NLEV
    ),
    "extrapolate_at_top": vertical(NLEV, SURFACE),
    "extrapolate_quadratically_to_surface": vertical(NLEV, SURFACE),
    "set_theta_v_prime_ic_at_lower_boundary": vertical(NLEV, SURFACE),
    "interpolate_vn_and_vt_to_ie_and_compute_ekin_on_edges": vertical(Const(1), NLEV),
    "interpolate_vn_to_half_levels_and_compute_kinetic_energy_on_edges": vertical(Const(1), NLEV),
    "interpolate_vt_to_interface_edges": vertical(Const(1), NLEV),
    "solve_tridiagonal_matrix_for_w_forward_sweep": vertical(Const(1), NLEV),
    "solve_tridiagonal_matrix_for_w_back_substitution": vertical(Const(1), NLEV),
}

# icon4py programs outside the dycore with integer index and mask fields, as
# `catalogue.program_info(program)` names them; OTHER_PROGRAMS says where each is defined.
OTHER_PROGRAMS = {
    "compute_nudgecoeffs": "icon4py.model.common.interpolation.stencils.compute_nudgecoeffs",
    "compute_pressure_gradient_downward_extrapolation_mask_distance": "icon4py.model.common.metrics.metric_fields",
}
OTHER_PROGRAM_ARGS: dict[str, dict[str, Spec]] = {
    "compute_nudgecoeffs": {
        # refin_ctrl of edges: 0 inside, 1..14 rows from a nest boundary, < 0 in the overlap
        "refin_ctrl": OneOf(tuple(range(-4, 15))),
        "grf_nudge_start_e": Const(10),  # GRF_BOUNDARY_WIDTH_EDGES + 1
        "nudge_zone_width": Const(8),
        "max_nudging_coefficient": Const(0.375),
        "nudge_efold_width": Const(2.0),
    },
    "compute_pressure_gradient_downward_extrapolation_mask_distance": {
        "flat_idx_max": IndexIn("K"),  # a level index per edge
        "e_lev": Position(EDGE),  # edge indices
        "k_lev": Position("K"),  # level indices
        "horizontal_start_distance": ZoneStart(EDGE, "NUDGING"),
        "horizontal_end_distance": ZoneEnd(EDGE, "LOCAL"),
        "z_mc": Uniform(0.0, 20000.0),
        "topography": Uniform(0.0, 3000.0),
    },
}

# Programs of solve_nonhydro.py / velocity_advection.py (the "granule"), in call order.
GRANULE_PROGRAMS: tuple[str, ...] = (
    "compute_diagnostics_from_normal_wind",
    "compute_advection_in_predictor_vertical_momentum",
    "compute_advection_in_horizontal_momentum",
    "compute_perturbed_quantities_and_interpolation",
    "compute_hydrostatic_correction_term",
    "compute_rho_theta_pgrad_and_update_vn",
    "compute_horizontal_velocity_quantities_and_fluxes",
    "vertically_implicit_solver_at_predictor_step",
    "compute_dwdz_for_divergence_damping",
    "compute_advection_in_corrector_vertical_momentum",
    "compute_interpolation_and_nonhydro_buoy",
    "apply_divergence_damping_and_update_vn",
    "compute_averaged_vn_and_fluxes",
    "vertically_implicit_solver_at_corrector_step",
    "init_cell_kdim_field_with_zero_wp",
    "update_mass_flux_weighted",
    "compute_exner_from_rhotheta",
    "update_theta_and_exner_in_halo",
)


def spec_for(program: str, param: str) -> Spec | None:
    """The table's spec for one argument, or None for the generic default."""
    specs = PROGRAM_ARGS.get(program) or OTHER_PROGRAM_ARGS.get(program, {})
    if param in specs:
        return specs[param]
    return SHARED_ARGS.get(param, FIELD_VALUES.get(param))
