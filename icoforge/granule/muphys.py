"""The muphys granule: icon4py's `MuphysComponent` (icon4py.model.atmosphere.subgrid_scale_physics.
muphys: saturation adjustment, then the graupel microphysics scan) with any backend, through the
dycore greenline's machinery (`icoforge greenline --granule muphys`).

What differs from the dycore's `Granule` (runner.py), and only that:

- construction: `MuphysComponent` as icon4py's driver builds it (`driver_utils`: grid, dtime, qnc
  and scheme of `MuphysConfig()`, the configuration icoforge's model runs: AES graupel, 50e6 cloud
  droplets per m3), the backend handed over unchanged (a peer's descriptor included, so that
  icon4py's graupel hooks for DaCe apply); GT4Py's passes over `graupel_run` need the later C
  recursion limit on CPython 3.12.1 (suite/recursion.py). The component's step, a
  `functools.partial` of icon4py's `_muphys_step_separate` over its two programs, is held as a
  `SeparateStep` that calls the same function with the same programs, so that the per-program
  table finds them;
- state: muphys' inputs from the dycore greenline's plausible state (state.py: the reference
  atmosphere): p from exner, the temperature from theta_v and exner less the vapour's part of the
  virtual temperature, dz the layers' thickness; water vapour at a relative humidity drawn from
  [RH_LOW, RH_HIGH] over water (Tetens), so that a part of the points is supersaturated; cloud
  water where it is near saturation, cloud ice where it is cold, rain, snow and graupel in random
  patches (warm or cold), so that every process and the sedimentation have something to do;
- variants: "step", the one call the physics driver makes per model step;
- verification: two successive calls from fresh states, the second on the temperature and water
  species the first left (muphys updates them in place); after each call the tendencies and the
  six precipitation fluxes compared (verify.py's measure).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import numpy as np

from icoforge.granule.fields import StaticFields
from icoforge.granule.runner import Granule, dtime_for

VARIANTS: dict[str, dict[str, Any]] = {"step": {}}
STEP_MIX = ("step",)
VERIFY_SEQUENCE = ("step", "step")
SPECIES = ("v", "c", "i", "r", "s", "g")
RESULT_FIELDS = ("tend_temperature", *(f"tend_q{s}" for s in SPECIES), "pflx", "pr", "ps", "pi", "pg", "pre")
CONFIG: dict[str, Any] = {"scheme": "AES_GRAUPEL", "qnc": 50.0e6}  # MuphysConfig()'s defaults

# icon4py's constants (icon4py.model.common.constants), here so that the state needs no import
RD, CPD, RV, P0REF, TMELT = 287.04, 1004.64, 461.51, 100000.0, 273.15
RH_LOW, RH_HIGH = 0.7, 1.05  # relative humidity over water, drawn uniformly
FIXED_POINT_ITERATIONS = 6  # each shrinks the humidity's error ~4x (dqsat/dT ~7 %/K): ~1e-3 after six
MOISTURE_SEED_SALT = 77  # the water species' own stream of the seed; the dycore's state draws unchanged
# (mixing ratio scale kg/kg, share of eligible points that get some); eligible: see muphys_state
HYDROMETEORS = {"qc": (2e-4, 1.0), "qi": (5e-5, 0.5), "qr": (1e-4, 0.3), "qs": (1e-4, 0.3), "qg": (5e-5, 0.1)}


def saturation_mixing_ratio(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Over water (Tetens' saturation pressure), kg/kg."""
    e = 610.78 * np.exp(17.27 * (t - TMELT) / (t - 35.86))
    return (RD / RV) * e / (p - (1.0 - RD / RV) * e)


def muphys_state(state: dict[str, np.ndarray], static: StaticFields, seed: int) -> dict[str, np.ndarray]:
    """muphys' inputs (name -> array) from the dycore's initial state (module doc)."""
    rng = np.random.default_rng((seed, MOISTURE_SEED_SALT))
    exner, theta_v = state["exner"], state["theta_v"]
    p = P0REF * exner ** (CPD / RD)
    t_virtual = theta_v * exner
    humidity = rng.uniform(RH_LOW, RH_HIGH, p.shape)
    te = t_virtual
    for _ in range(FIXED_POINT_ITERATIONS):  # qv at that humidity of te, te from t_virtual and qv
        qv = humidity * saturation_mixing_ratio(te, p)
        te = t_virtual / (1.0 + (RV / RD - 1.0) * qv)
    relative = qv / saturation_mixing_ratio(te, p)
    eligible = {"qc": relative > 0.95, "qi": te < TMELT - 20.0, "qr": te > TMELT, "qs": te < TMELT, "qg": te < TMELT}
    out = {"dz": static.metrics["ddqz_z_full"].values, "te": te, "p": p, "rho": state["rho"], "qv": qv}
    for name, (scale, share) in HYDROMETEORS.items():
        some = eligible[name] & (rng.uniform(size=p.shape) < share)
        out[name] = np.where(some, scale * rng.uniform(size=p.shape), 0.0)
    return {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in out.items()}


@dataclasses.dataclass
class SeparateStep:
    """icon4py's muphys step (`run_full_muphys._muphys_step_separate`: saturation adjustment, then
    graupel) over the two programs `setup_muphys` bound, as attributes the granule's
    instrumentation can wrap (the partial icon4py returns holds them as keywords)."""

    graupel_program: Any
    saturation_adjustment_program: Any
    function: Any

    def __call__(self, **fields: Any) -> None:
        self.function(
            graupel_program=self.graupel_program, saturation_adjustment_program=self.saturation_adjustment_program, **fields
        )


def _separate(step: Any) -> SeparateStep:
    keywords = dict(step.keywords)
    return SeparateStep(keywords.pop("graupel_program"), keywords.pop("saturation_adjustment_program"), step.func)


class MuphysGranule(Granule):
    """icon4py's MuphysComponent + states for one backend (module doc)."""

    kind = "muphys"
    component = "MuphysComponent"
    component_module = "icon4py.model.atmosphere.subgrid_scale_physics.muphys.component"
    variants = VARIANTS
    step_mix = STEP_MIX
    verify_sequence = VERIFY_SEQUENCE

    @classmethod
    def initial_state(cls, static: StaticFields, grid: Any, levels: int, seed: int) -> dict[str, np.ndarray]:
        state = super().initial_state(static, grid, levels, seed)
        return {**state, **muphys_state(state, static, seed)}

    def inputs(self) -> dict[str, Any]:
        return {}  # MuphysComponent takes no static fields

    def construct(self, inputs: dict[str, Any]) -> Any:
        from icon4py.model.atmosphere.subgrid_scale_physics.muphys import component, config

        from icoforge.suite import peers
        from icoforge.suite.recursion import descriptor_with_c_recursion_limit, with_c_recursion_limit

        assert self.grid is not None
        backend = self.backend
        backend = descriptor_with_c_recursion_limit(backend) if peers.is_descriptor(backend) else with_c_recursion_limit(backend)
        muphys = component.MuphysComponent(
            grid=self.grid.icon_grid,
            dtime=datetime.timedelta(seconds=dtime_for(self.grid)),
            qnc=CONFIG["qnc"],
            backend=backend,
            scheme=config.MuphysScheme[CONFIG["scheme"]],
        )
        muphys._step = _separate(muphys._step)
        return muphys

    def fresh_states(self) -> dict[str, Any]:  # type: ignore[override]
        """muphys' input fields (dz, te, p, rho, qv ... qg) on this backend's device, copies."""
        return self._fields(self.state_arrays)

    def _fields(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        import gt4py.next as gtx
        from icon4py.model.common import dimension as dims
        from icon4py.model.common import model_backends

        allocator = model_backends.get_allocator(self.backend)
        names = ("dz", "te", "p", "rho", *(f"q{s}" for s in SPECIES))
        return {k: gtx.as_field((dims.CellDim, dims.KDim), arrays[k].copy(), allocator=allocator) for k in names}

    def refill_states(self, states: Any) -> None:
        from icoforge.errors import IcoforgeError

        raise IcoforgeError("the muphys granule does not refill states (no CUDA graph replay for it)")

    def step(self, variant: str, states: Any = None) -> Any:  # type: ignore[override]
        assert variant in VARIANTS
        return self.solver(states or self.states, datetime.datetime(2000, 1, 1))

    def verification_sequence(self) -> list[dict[str, np.ndarray]]:
        """The tendencies and precipitation fluxes (NumPy) after each call of VERIFY_SEQUENCE; the
        first from fresh states, each later one from the temperature and species the one before
        left."""
        states = self.fresh_states()
        results = []
        for i, variant in enumerate(VERIFY_SEQUENCE):
            if i:
                updated = {"te": self.solver._te_in, **{f"q{s}": getattr(self.solver._q_in, s) for s in SPECIES}}
                arrays = {**{k: v.asnumpy() for k, v in states.items()}, **{k: f.asnumpy() for k, f in updated.items()}}
                states = self._fields(arrays)
            out = self.step(variant, states)
            self.sync()
            results.append({k: np.array(out[k].asnumpy(), copy=True) for k in RESULT_FIELDS})
        return results

    @classmethod
    def input_description(cls, grid: Any, levels: int, seed: int) -> dict[str, Any]:
        from icoforge.granule import golden

        moisture = [RH_LOW, RH_HIGH, MOISTURE_SEED_SALT, {k: list(v) for k, v in HYDROMETEORS.items()}]
        return golden.component_inputs(cls.kind, grid, levels, seed, config=CONFIG, dtime=dtime_for(grid), sequence=VERIFY_SEQUENCE,
                                       package="icon4py-atmosphere-muphys", moisture=moisture)  # fmt: skip
