"""The diffusion granule: icon4py's `Diffusion.run` (icon4py.model.atmosphere.diffusion) with any
backend, through the dycore greenline's machinery (`icoforge greenline --granule diffusion`).

What differs from the dycore's `Granule` (runner.py), and only that:

- construction: icon4py's `Diffusion` as icon4py's own benchmark builds it
  (`model/atmosphere/diffusion/tests/diffusion/integration_tests/test_benchmark_diffusion.py` in
  ../shared/icon4py-0.4.1-tests): its `DiffusionConfig` (Smagorinsky + 4th order, diffusion of
  vn, w and theta, diamond-vertices stencil, 5 substeps, nudging 0.375), the same static fields as
  the dycore's (fields.py, plus the edge lengths and the three zd_* metric fields diffusion takes),
  the dycore's vertical grid;
- state: the dycore greenline's plausible prognostic state (state.py: vn, w, rho, exner,
  theta_v), diffusion's four diagnostic fields (div_ic, hdef_ic, dwdx, dwdy: outputs) zero;
- variants: "step" (`run(initial_run=False)`, what every model step calls) and "initial"
  (`initial_run=True`, the driver's extra call before the first step); one granule step is one
  "step" call. dtime is the dycore greenline's (`runner.dtime_for`: 90 s global, 10 s limited area);
- verification: three successive calls (initial, step, step) from fresh states, the five
  prognostic fields compared after each (verify.py's measure; rho is not touched by diffusion and
  must stay equal).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from icoforge.granule.runner import Granule, config_from_names, dtime_for

VARIANTS: dict[str, dict[str, bool]] = {"initial": {"initial_run": True}, "step": {"initial_run": False}}
STEP_MIX = ("step",)
VERIFY_SEQUENCE = ("initial", "step", "step")
DIAGNOSTIC_FIELDS = ("hdef_ic", "div_ic", "dwdx", "dwdy")
# the static geometry fields of icon4py's EdgeParams (the advection granule passes the same)
EDGE_PARAMS = (
    "edge_center_lat", "edge_center_lon", "tangent_orientation", "coriolis_frequency", "edge_areas",
    "primal_edge_lengths", "inverse_primal_edge_lengths", "dual_edge_lengths", "inverse_dual_edge_lengths",
    "inverse_vertex_vertex_lengths", "primal_normal_x", "primal_normal_y", "primal_normal_cell_x",
    "primal_normal_cell_y", "primal_normal_vert_x", "primal_normal_vert_y", "dual_normal_cell_x",
    "dual_normal_cell_y", "dual_normal_vert_x", "dual_normal_vert_y",
)  # fmt: skip

def grid_params(static: Any, field: Any) -> dict[str, Any]:
    """icon4py's EdgeParams and CellParams, as Diffusion and tracer advection take them, from the
    static geometry (`StaticFields`); `field` puts an array on the backend's device."""
    from icon4py.model.common.grid import states as grid_states

    g = static.geometry
    return dict(
        edge_params=grid_states.EdgeParams(**{k: field(g[k]) for k in EDGE_PARAMS}),
        cell_params=grid_states.CellParams(
            cell_center_lat=field(g["cell_center_lat"]),
            cell_center_lon=field(g["cell_center_lon"]),
            area=field(g["cell_area"]),
            mean_cell_area=float(static.scalars["mean_cell_area"]),
        ),
    )


# DiffusionConfig of icon4py's benchmark (test_benchmark_diffusion.py), by keyword
CONFIG: dict[str, Any] = {
    "diffusion_type": "SMAGORINSKY_4TH_ORDER",
    "apply_to_vertical_wind": True,
    "apply_to_horizontal_wind": True,
    "type_t_diffu": "HETEROGENEOUS",
    "type_vn_diffu": "DIAMOND_VERTICES",
    "hdiff_efdt_ratio": 24.0,
    "hdiff_w_efdt_ratio": 15.0,
    "smagorinski_scaling_factor": 0.025,
    "apply_zdiffusion_t": False,
    "velocity_boundary_diffusion_denominator": 150.0,
    "max_nudging_coefficient": 0.375,
    "ndyn_substeps": 5,
    "shear_type": "VERTICAL_HORIZONTAL_OF_HORIZONTAL_VERTICAL_WIND",
}


def diffusion_config() -> Any:
    from icon4py.model.atmosphere.diffusion import diffusion

    enums = {
        "diffusion_type": diffusion.DiffusionType,
        "type_t_diffu": diffusion.TemperatureDiscretizationType,
        "type_vn_diffu": diffusion.SmagorinskyStencilType,
        "shear_type": diffusion.TurbulenceShearForcingType,
    }
    return config_from_names(diffusion.DiffusionConfig, enums, CONFIG)


class DiffusionGranule(Granule):
    """icon4py's Diffusion + states for one backend (module doc)."""

    kind = "diffusion"
    component = "Diffusion"
    component_module = "icon4py.model.atmosphere.diffusion.diffusion"
    variants = VARIANTS
    step_mix = STEP_MIX
    verify_sequence = VERIFY_SEQUENCE

    def inputs(self) -> dict[str, Any]:
        """Diffusion's static arguments, fields on this backend's device (Granule.inputs)."""
        import gt4py.next as gtx
        from icon4py.model.atmosphere.diffusion import diffusion, diffusion_states
        from icon4py.model.common import dimension as dims
        from icon4py.model.common import model_backends
        from icon4py.model.common.grid import vertical as v_grid

        from icoforge.granule.fields import vertical_config
        from icoforge.granule.solver import as_field

        assert self.grid is not None
        static = self.static
        allocator = model_backends.get_allocator(self.backend)
        field = functools.partial(as_field, allocator=allocator)
        i = static.interpolation
        m = static.metrics
        config = diffusion_config()
        vgrid = v_grid.VerticalGrid(
            config=vertical_config(self.grid.icon_grid.num_levels),
            vct_a=gtx.as_field((dims.KDim,), static.vct_a.copy(), allocator=allocator),
            vct_b=gtx.as_field((dims.KDim,), static.vct_b.copy(), allocator=allocator),
        )
        interpolation_names = (
            "e_bln_c_s", "rbf_coeff_1", "rbf_coeff_2", "geofac_div", "geofac_n2s", "geofac_grg_x", "geofac_grg_y",
            "nudgecoeff_e",
        )  # fmt: skip
        return dict(
            config=config,
            params=diffusion.DiffusionParams(config),
            vertical_grid=vgrid,
            metric_state=diffusion_states.DiffusionMetricState(
                theta_ref_mc=field(m["reference_theta_at_cells_on_model_levels"]),
                wgtfac_c=field(m["wgtfac_c"]),
                zd_intcoef=field(m["zd_intcoef"]),
                zd_vertoffset=field(m["zd_vertoffset"]),
                zd_diffcoef=field(m["zd_diffcoef"]),
            ),
            interpolation_state=diffusion_states.DiffusionInterpolationState(
                **{k: field(i[k]) for k in interpolation_names}
            ),
            **grid_params(static, field),
        )

    def construct(self, inputs: dict[str, Any]) -> Any:
        from icon4py.model.atmosphere.diffusion import diffusion
        from icon4py.model.common.decomposition import definitions as decomposition

        assert self.grid is not None
        exchange = decomposition.single_node_exchange if self.exchange is None else self.exchange
        return diffusion.Diffusion(grid=self.grid.icon_grid, **inputs, backend=self.backend, exchange=exchange)

    def fresh_states(self) -> tuple[Any, Any]:  # type: ignore[override]
        """(PrognosticState, DiffusionDiagnosticState) on this backend's device, from copies of the
        shared arrays."""
        import gt4py.next as gtx
        from icon4py.model.atmosphere.diffusion import diffusion_states
        from icon4py.model.common import dimension as dims
        from icon4py.model.common import model_backends
        from icon4py.model.common.states import prognostic_state as prognostics

        assert self.grid is not None
        allocator = model_backends.get_allocator(self.backend)
        a = self.state_arrays

        def cell_k(values: np.ndarray) -> Any:
            return gtx.as_field((dims.CellDim, dims.KDim), values.copy(), allocator=allocator)

        prognostic = prognostics.PrognosticState(
            rho=cell_k(a["rho"]),
            w=cell_k(a["w"]),
            vn=gtx.as_field((dims.EdgeDim, dims.KDim), a["vn"].copy(), allocator=allocator),
            exner=cell_k(a["exner"]),
            theta_v=cell_k(a["theta_v"]),
        )
        zeros = np.zeros_like(a["rho"])
        diagnostic = diffusion_states.DiffusionDiagnosticState(**{k: cell_k(zeros) for k in DIAGNOSTIC_FIELDS})
        return prognostic, diagnostic

    def refill_states(self, states: Any) -> None:
        from icoforge.errors import IcoforgeError

        raise IcoforgeError("the diffusion granule does not refill states (no CUDA graph replay for it)")

    def step(self, variant: str, states: Any = None) -> None:  # type: ignore[override]
        assert self.grid is not None
        prognostic, diagnostic = states or self.states
        self.solver.run(
            diagnostic_state=diagnostic,
            prognostic_state=prognostic,
            dtime=dtime_for(self.grid),
            initial_run=VARIANTS[variant]["initial_run"],
        )

    def verification_sequence(self) -> list[dict[str, np.ndarray]]:
        """The prognostic fields (NumPy) after each call of VERIFY_SEQUENCE, from fresh states."""
        from icoforge.granule.state import prognostic_to_numpy

        states = self.fresh_states()
        results = []
        for variant in VERIFY_SEQUENCE:
            self.step(variant, states)
            self.sync()
            results.append(prognostic_to_numpy(states[0]))
        return results

    @classmethod
    def input_description(cls, grid: Any, levels: int, seed: int) -> dict[str, Any]:
        from icoforge.granule import golden

        return golden.component_inputs(cls.kind, grid, levels, seed, config=CONFIG, dtime=dtime_for(grid), sequence=VERIFY_SEQUENCE,
                                       package="icon4py-atmosphere-diffusion")  # fmt: skip
