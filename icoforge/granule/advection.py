"""The tracer advection granule: icon4py's `Advection.run` (icon4py.model.atmosphere.tracer_advection)
with any backend, through the dycore greenline's machinery (`icoforge greenline --granule advection`).

What differs from the dycore's `Granule` (runner.py), and only that:

- construction: icon4py's `convert_config_to_advection`, as icon4py's driver builds it
  (`driver_utils.initialize_granules`; a peer's descriptor made into the one GT4Py backend the
  driver passes, as its main.py does), with the configuration icoforge's model runs
  (model/experiments.py, icon4py's APE/AES transport_nml): MIURA with linear reconstruction
  (LINEAR_2ND_ORDER) and the POSITIVE_DEFINITE limiter horizontally, PPM_3RD_ORDER with the
  SEMI_MONOTONIC limiter vertically -- a GodunovSplittingAdvection. The static fields are the
  dycore's (fields.py) plus the least-squares pseudo-inverse and ddqz_z_full; the deep-atmosphere
  factors are 1, as the driver passes them;
- state: one tracer, qv (what icoforge's model advects without muphys; the six water species would
  be six calls per step, the same programs). From the dycore greenline's plausible state (state.py)
  and the seed: vn_traj = vn, mass_flx_me = rho_e vn ddqz_z_full_e (rho_e the mean of the edge's
  two cells), mass_flx_ic = rho_ic w (no flux at the top and the surface, where w is 0),
  airmass_now = rho ddqz_z_full and airmass_new from it by the continuity equation with those
  fluxes; qv > 0 decaying with height and latitude, 20 % noise. hfl/vfl_tracer (outputs) zero;
- variants: "step", the one call the driver makes per tracer and model step (`run(...)`, dtime the
  dycore greenline's, `runner.dtime_for`). icon4py flips the order of the Godunov splitting after
  every call (horizontal first, then vertical first, ...), so successive timed calls alternate
  between the two, as successive model steps do;
- verification: three successive calls (horizontal first, vertical first, horizontal first) from
  fresh states, the tracer time levels swapped between calls as the driver does; after each call
  qv and the two tracer fluxes compared (verify.py's measure). The sequence starts horizontal
  first whatever ran before (one call on scratch states when an odd number of calls has run).

The per-program table lists the programs icon4py binds with `setup_program` (found on the schemes
and limiters the granule holds, instrument.find_programs); the two calls per step of
init_constant_cell_kdim_field that NoFluxCondition binds with `with_backend` instead (the zero
tracer flux at the top and the surface) are not among them and fall into the "outside GT4Py
programs" row.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from icoforge.granule.fields import Array, StaticFields
from icoforge.granule.runner import Granule, config_from_names, dtime_for

VARIANTS: dict[str, dict[str, Any]] = {"step": {}}
STEP_MIX = ("step",)
# the order icon4py's GodunovSplittingAdvection takes on the 1st, 2nd, 3rd call of a fresh sequence
VERIFY_SEQUENCE = ("horizontal_first", "vertical_first", "horizontal_first")
RESULT_FIELDS = ("qv", "hfl_tracer", "vfl_tracer")  # compared after each call

# AdvectionConfig of icoforge's model (model/experiments.py, `_moist`), by keyword
CONFIG: dict[str, str] = {
    "horizontal_advection_type": "LINEAR_2ND_ORDER",
    "horizontal_advection_limiter": "POSITIVE_DEFINITE",
    "vertical_advection_type": "PPM_3RD_ORDER",
    "vertical_advection_limiter": "SEMI_MONOTONIC",
}

QV_SURFACE = 0.015  # kg/kg at the equator's surface
QV_SCALE_HEIGHT = 2500.0  # m
QV_NOISE = 0.2  # relative
QV_SEED_SALT = 48  # qv's noise: its own stream of the seed, the dycore's state draws unchanged


def advection_config() -> Any:
    from icon4py.model.atmosphere.tracer_advection import tracer_advection as adv

    enums = {
        "horizontal_advection_type": adv.HorizontalAdvectionType,
        "horizontal_advection_limiter": adv.HorizontalAdvectionLimiter,
        "vertical_advection_type": adv.VerticalAdvectionType,
        "vertical_advection_limiter": adv.VerticalAdvectionLimiter,
    }
    return config_from_names(adv.AdvectionConfig, enums, CONFIG)


def _table(grid: Any, name: str) -> np.ndarray:
    from icon4py.model.common.utils import data_allocation as data_alloc

    return np.asarray(data_alloc.as_numpy(grid.get_connectivity(name).ndarray))


def advection_state(
    state: dict[str, np.ndarray], static: StaticFields, icon_grid: Any, dtime: float, seed: int
) -> dict[str, np.ndarray]:
    """Advection's inputs (name -> array) from the dycore's initial state (module doc)."""
    m = static.metrics
    rho, vn, w = state["rho"], state["vn"], state["w"]
    ddqz_full = m["ddqz_z_full"].values
    e2c, c2e = _table(icon_grid, "E2C"), _table(icon_grid, "C2E")
    rho_e = 0.5 * (rho[e2c[:, 0]] + rho[e2c[:, 1]])
    mass_flx_me = rho_e * vn * m["ddqz_z_full_e"].values
    mass_flx_ic = state["rho_at_cells_on_half_levels"] * w
    divergence = np.einsum("cj,cjk->ck", static.interpolation["geofac_div"].values, mass_flx_me[c2e])
    airmass_now = rho * ddqz_full
    airmass_new = airmass_now - dtime * divergence + dtime * (mass_flx_ic[:, 1:] - mass_flx_ic[:, :-1])

    rng = np.random.default_rng((seed, QV_SEED_SALT))
    vct_a = static.vct_a
    height = 0.5 * (vct_a[:-1] + vct_a[1:])[: rho.shape[1]]  # nominal full-level heights, top first
    lat = static.geometry["cell_center_lat"].values
    qv = (QV_SURFACE * np.exp(-height / QV_SCALE_HEIGHT)[None, :] * (0.2 + 0.8 * np.cos(lat) ** 2)[:, None]
          * (1.0 + QV_NOISE * rng.uniform(-1.0, 1.0, rho.shape)))  # fmt: skip
    out = {
        "vn_traj": vn,
        "mass_flx_me": mass_flx_me,
        "mass_flx_ic": mass_flx_ic,
        "airmass_now": airmass_now,
        "airmass_new": airmass_new,
        "qv": qv,
    }
    return {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in out.items()}


def _lsq_slice(a: Array, unknown: int) -> Array:
    """One LsqUnkDim slice of the (CellDim, LsqUnkDim, C2E2CDim) pseudo-inverse, as the driver
    passes `LSQ_PSEUDOINV[:, unknown, :]`."""
    return Array((a.dims[0], a.dims[2]), (a.origin[0], a.origin[2]), np.ascontiguousarray(a.values[:, unknown, :]))


class AdvectionGranule(Granule):
    """icon4py's tracer advection + states for one backend (module doc)."""

    kind = "advection"
    component = "Advection"
    component_module = "icon4py.model.atmosphere.tracer_advection.tracer_advection"
    variants = VARIANTS
    step_mix = STEP_MIX
    verify_sequence = VERIFY_SEQUENCE

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.calls = 0  # Advection.run calls so far: icon4py's Godunov order is horizontal first when even

    @classmethod
    def initial_state(cls, static: StaticFields, grid: Any, levels: int, seed: int) -> dict[str, np.ndarray]:
        state = super().initial_state(static, grid, levels, seed)
        return {**state, **advection_state(state, static, grid.icon_grid, dtime_for(grid), seed)}

    def inputs(self) -> dict[str, Any]:
        """Advection's static arguments, fields on this backend's device (Granule.inputs)."""
        from icon4py.model.atmosphere.tracer_advection import tracer_advection_states as adv_states
        from icon4py.model.common import dimension as dims
        from icon4py.model.common import model_backends
        from icon4py.model.common.utils import data_allocation as data_alloc

        from icoforge.granule.diffusion import grid_params
        from icoforge.granule.solver import as_field

        assert self.grid is not None
        static = self.static
        allocator = model_backends.get_allocator(self.backend)
        field = functools.partial(as_field, allocator=allocator)
        i = static.interpolation
        shallow = data_alloc.constant_field(self.grid.icon_grid, 1.0, dims.KDim, allocator=allocator)
        return dict(
            interpolation_state=adv_states.AdvectionInterpolationState(
                **{k: field(i[k]) for k in ("geofac_div", "rbf_vec_coeff_e", "pos_on_tplane_e_1", "pos_on_tplane_e_2")}
            ),
            least_squares_state=adv_states.AdvectionLeastSquaresState(
                lsq_pseudoinv_1=field(_lsq_slice(i["lsq_pseudoinv"], 0)),
                lsq_pseudoinv_2=field(_lsq_slice(i["lsq_pseudoinv"], 1)),
            ),
            metric_state=adv_states.AdvectionMetricState(
                deepatmo_divh=shallow,
                deepatmo_divzl=shallow,
                deepatmo_divzu=shallow,
                ddqz_z_full=field(static.metrics["ddqz_z_full"]),
            ),
            **grid_params(static, field),
        )

    def construct(self, inputs: dict[str, Any]) -> Any:
        from icon4py.model.atmosphere.tracer_advection import tracer_advection as adv
        from icon4py.model.common.decomposition import definitions as decomposition

        from icoforge.suite import peers

        assert self.grid is not None
        # a peer as icon4py's driver hands it to its granules (main.py: customize_backend(None,
        # descriptor)): icon4py 0.4.1's NoFluxCondition binds its program with `with_backend(backend)`,
        # which takes a GT4Py backend, not the descriptor its setup_program calls take
        backend = peers.for_program(self.backend, None) if peers.is_descriptor(self.backend) else self.backend
        exchange = decomposition.single_node_exchange if self.exchange is None else self.exchange
        return adv.convert_config_to_advection(
            config=advection_config(), grid=self.grid.icon_grid, **inputs, backend=backend, exchange=exchange
        )

    def fresh_states(self) -> tuple[Any, Any, Any]:  # type: ignore[override]
        """(AdvectionDiagnosticState, AdvectionPrepAdvState, TimeStepPair of qv) on this backend's
        device, from copies of the shared arrays; qv's next level starts as a copy of the current."""
        import gt4py.next as gtx
        from icon4py.model.atmosphere.tracer_advection import tracer_advection_states as adv_states
        from icon4py.model.common import dimension as dims
        from icon4py.model.common import model_backends
        from icon4py.model.common import utils as common_utils

        allocator = model_backends.get_allocator(self.backend)
        a = self.state_arrays

        def cell_k(values: np.ndarray) -> Any:
            return gtx.as_field((dims.CellDim, dims.KDim), values.copy(), allocator=allocator)

        def edge_k(values: np.ndarray) -> Any:
            return gtx.as_field((dims.EdgeDim, dims.KDim), values.copy(), allocator=allocator)

        diagnostic = adv_states.AdvectionDiagnosticState(
            airmass_now=cell_k(a["airmass_now"]),
            airmass_new=cell_k(a["airmass_new"]),
            grf_tend_tracer=cell_k(np.zeros_like(a["qv"])),
            hfl_tracer=edge_k(np.zeros_like(a["vn_traj"])),
            vfl_tracer=cell_k(np.zeros_like(a["mass_flx_ic"])),
        )
        prep_adv = adv_states.AdvectionPrepAdvState(
            vn_traj=edge_k(a["vn_traj"]), mass_flx_me=edge_k(a["mass_flx_me"]), mass_flx_ic=cell_k(a["mass_flx_ic"])
        )
        return diagnostic, prep_adv, common_utils.TimeStepPair(cell_k(a["qv"]), cell_k(a["qv"]))

    def refill_states(self, states: Any) -> None:
        from icoforge.errors import IcoforgeError

        raise IcoforgeError("the advection granule does not refill states (no CUDA graph replay for it)")

    def step(self, variant: str, states: Any = None) -> None:  # type: ignore[override]
        assert self.grid is not None and variant in VARIANTS
        diagnostic, prep_adv, qv = states or self.states
        self.solver.run(
            diagnostic_state=diagnostic,
            prep_adv=prep_adv,
            p_tracer_now=qv.current,
            p_tracer_new=qv.next,
            dtime=dtime_for(self.grid),
        )
        self.calls += 1

    def verification_sequence(self) -> list[dict[str, np.ndarray]]:
        """qv and the tracer fluxes (NumPy) after each call of VERIFY_SEQUENCE, from fresh states."""
        if self.calls % 2:  # icon4py would start vertical first: one call on scratch states
            self.step("step", self.fresh_states())
        states = self.fresh_states()
        diagnostic, _, qv = states
        results = []
        for i, _ in enumerate(VERIFY_SEQUENCE):
            if i:
                qv.swap()
            self.step("step", states)
            self.sync()
            fields = {"qv": qv.next, "hfl_tracer": diagnostic.hfl_tracer, "vfl_tracer": diagnostic.vfl_tracer}
            results.append({k: np.array(f.asnumpy(), copy=True) for k, f in fields.items()})
        return results

    @classmethod
    def input_description(cls, grid: Any, levels: int, seed: int) -> dict[str, Any]:
        from icoforge.granule import golden

        tracer = ["qv", QV_SURFACE, QV_SCALE_HEIGHT, QV_NOISE, QV_SEED_SALT]
        return golden.component_inputs(cls.kind, grid, levels, seed, config=CONFIG, dtime=dtime_for(grid), sequence=VERIFY_SEQUENCE,
                                       package="icon4py-atmosphere-tracer_advection", tracer=tracer)  # fmt: skip
