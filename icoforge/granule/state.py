"""The granule's initial state: random, but physically plausible, and identical for every backend.

`initial_state(static, grid, seed)` gives plain NumPy arrays (one dict, see `STATE_FIELDS`);
`to_states(arrays, grid, allocator)` turns a copy of them into icon4py's `PrognosticState` pair,
`DiagnosticStateNonHydro` and `PrepAdvection` with one backend's allocator, so that two backends
start from bit-identical inputs.

icon4py's own benchmark draws every prognostic value from U(-1, 1) (negative densities and
Exner pressures). We start instead from the reference atmosphere of the metric fields:

- rho = rho_ref (1 + 1 % noise), theta_v = theta_ref + 1 K noise,
- exner from the equation of state, exner = (rd/p0 * rho * theta_v) ** (rd/cvd),
- vn = a 20 m/s solid-body zonal wind projected on the edge normals + 1 m/s noise,
- w = 5 cm/s noise, 0 at the model top and the surface,
- perturbed Exner = exner - exner_ref; rho and theta_v on half levels interpolated;
  everything else (tendencies, increments, fluxes) zero, as icon4py initialises it.
The next time level starts as a copy of the current one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from icoforge.granule.fields import StaticFields

PROGNOSTIC_FIELDS = ("vn", "w", "rho", "exner", "theta_v")

ZONAL_WIND = 20.0  # m/s at the equator
WIND_NOISE = 1.0  # m/s
W_NOISE = 0.05  # m/s
RHO_NOISE = 0.01  # relative
THETA_NOISE = 1.0  # K


def _half_levels(full: np.ndarray) -> np.ndarray:
    """(n, nlev) -> (n, nlev + 1): mean of neighbours inside, constant extrapolation at the ends."""
    out = np.empty((full.shape[0], full.shape[1] + 1), dtype=full.dtype)
    out[:, 1:-1] = 0.5 * (full[:, 1:] + full[:, :-1])
    out[:, 0] = full[:, 0]
    out[:, -1] = full[:, -1]
    return out


def initial_state(static: StaticFields, num_levels: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Initial prognostic and diagnostic values (name -> array), see the module docstring."""
    from icon4py.model.common import constants

    rng = np.random.default_rng(seed)
    m = static.metrics
    g = static.geometry
    rho_ref = m["reference_rho_at_cells_on_model_levels"].values
    theta_ref = m["reference_theta_at_cells_on_model_levels"].values
    exner_ref = m["reference_exner_at_cells_on_model_levels"].values
    theta_ref_ic = m["reference_theta_at_cells_on_half_levels"].values
    num_cells, nlev = rho_ref.shape
    if nlev != num_levels:
        raise ValueError(f"static fields have {nlev} levels, expected {num_levels}")
    num_edges = g["primal_normal_x"].values.shape[0]

    rho = rho_ref * (1.0 + RHO_NOISE * rng.uniform(-1.0, 1.0, rho_ref.shape))
    theta_v = theta_ref + THETA_NOISE * rng.uniform(-1.0, 1.0, theta_ref.shape)
    exner = (constants.RD_O_P0REF * rho * theta_v) ** constants.RD_O_CVD

    lat = g["edge_center_lat"].values
    u = ZONAL_WIND * np.cos(lat)
    vn_mean = (u * g["primal_normal_x"].values)[:, None]
    vn = vn_mean + WIND_NOISE * rng.uniform(-1.0, 1.0, (num_edges, nlev))

    w = W_NOISE * rng.uniform(-1.0, 1.0, (num_cells, nlev + 1))
    w[:, 0] = 0.0
    w[:, -1] = 0.0

    state = {
        "vn": vn,
        "w": w,
        "rho": rho,
        "exner": exner,
        "theta_v": theta_v,
        "perturbed_exner_at_cells_on_model_levels": exner - exner_ref,
        "rho_at_cells_on_half_levels": _half_levels(rho),
        "theta_v_at_cells_on_half_levels": (
            np.broadcast_to(theta_ref_ic[:, : nlev + 1], (num_cells, nlev + 1)).copy()
            if theta_ref_ic.shape[1] >= nlev + 1
            else _half_levels(theta_v)
        ),
    }
    return {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in state.items()}


def to_states(arrays: dict[str, np.ndarray], grid: Any, allocator: Any) -> tuple[Any, Any, Any]:
    """(TimeStepPair of PrognosticState, DiagnosticStateNonHydro, PrepAdvection) on `allocator`'s
    device, filled from `arrays` (copied: the arrays are not modified)."""
    import gt4py.next as gtx
    from icon4py.model.atmosphere.dycore import dycore_states
    from icon4py.model.common import dimension as dims
    from icon4py.model.common import utils as common_utils
    from icon4py.model.common.states import nonhydro_states
    from icon4py.model.common.states import prognostic_state as prognostics

    def cell_k(name: str) -> Any:
        return gtx.as_field((dims.CellDim, dims.KDim), arrays[name].copy(), allocator=allocator)

    def edge_k(name: str) -> Any:
        return gtx.as_field((dims.EdgeDim, dims.KDim), arrays[name].copy(), allocator=allocator)

    def prognostic() -> Any:
        return prognostics.PrognosticState(
            rho=cell_k("rho"), w=cell_k("w"), vn=edge_k("vn"), exner=cell_k("exner"), theta_v=cell_k("theta_v")
        )

    pair = common_utils.TimeStepPair(prognostic(), prognostic())
    diagnostic = nonhydro_states.initialize_solve_nonhydro_diagnostic_state(grid, allocator)
    for name in (
        "perturbed_exner_at_cells_on_model_levels",
        "rho_at_cells_on_half_levels",
        "theta_v_at_cells_on_half_levels",
    ):
        setattr(diagnostic, name, cell_k(name))
    prep_adv = dycore_states.initialize_prep_advection(grid, allocator)
    return pair, diagnostic, prep_adv


def state_fields(states: tuple[Any, Any, Any]) -> list[Any]:
    """Every GT4Py field of `to_states`' (pair, diagnostic, prep_adv), in one fixed order."""
    pair, diagnostic, prep_adv = states
    return [
        value
        for holder in (pair.current, pair.next, diagnostic, prep_adv)
        for value in (getattr(holder, f.name) for f in dataclasses.fields(holder))
        if hasattr(value, "ndarray")
    ]


def refill_states(dst: tuple[Any, Any, Any], src: tuple[Any, Any, Any]) -> None:
    """Copy the values of `src`'s fields into `dst`'s buffers, in place (their pointers stay)."""
    for d, s in zip(state_fields(dst), state_fields(src), strict=True):
        d.ndarray[...] = s.ndarray


def prognostic_to_numpy(state: Any) -> dict[str, np.ndarray]:
    """The five prognostic fields of a PrognosticState as NumPy arrays (copied from the device)."""
    return {name: np.array(getattr(state, name).asnumpy(), copy=True) for name in PROGNOSTIC_FIELDS}
