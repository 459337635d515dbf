"""Per-step diagnostics of a run: global dry-air mass and minimum surface pressure.

- dry mass: sum over cells and levels of rho * cell area * layer thickness (icon4py's geometry
  and metric fields). The JW case is dry and icon4py's dycore is mass-conserving in flux form, so
  the relative change per step should stay at round-off (~1e-15..1e-13 per step).
- surface pressure: icon4py's `diagnose_pressure_surface_to_top` (hydrostatic extrapolation
  from the lowest levels) with the run's backend, on virtual temperature = theta_v * exner (dry).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from icoforge.model.run import Session


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    step: int
    hours: float
    dry_mass_kg: float
    min_surface_pressure_pa: float


class Diagnostics:
    """Buffers allocated once; `measure(session, step)` after each step."""

    def __init__(self, session: Session):
        from icon4py.model.common import dimension as dims
        from icon4py.model.common import model_backends
        from icon4py.model.common.grid import geometry_attributes as geom
        from icon4py.model.common.metrics import metrics_attributes as metrics
        from icon4py.model.common.utils import data_allocation as alloc

        drv = session.driver
        self.grid, self.backend = drv.grid, drv.backend
        allocator = model_backends.get_allocator(drv.backend)
        self.area = drv.static_field_factories.geometry.get(geom.CELL_AREA).asnumpy()
        self.ddqz = drv.static_field_factories.metrics.get(metrics.DDQZ_Z_FULL)
        self.dz = self.ddqz.asnumpy()
        self.owned = np.asarray(drv.decomposition_info.owner_mask(dims.CellDim))
        self.dtime_h = drv.model_time_variables.dtime_in_seconds / 3600.0
        zero = lambda *d, **kw: alloc.zero_field(self.grid, *d, allocator=allocator, **kw)  # noqa: E731
        self.tv = zero(dims.CellDim, dims.KDim)
        self.p_sfc = zero(dims.CellDim)
        self.p = zero(dims.CellDim, dims.KDim)
        self.p_half = zero(dims.CellDim, dims.KDim, extend={dims.KDim: 1})

    def measure(self, session: Session, step: int) -> Diagnostic:
        from icon4py.model.common.diagnostic_calculations import pressure

        p = session.prognostics
        rho = p.rho.asnumpy()
        mass = float(np.sum((rho * self.area[:, None] * self.dz)[self.owned]))
        tv = p.theta_v.asnumpy() * p.exner.asnumpy()
        self.tv.ndarray[...] = _like(self.tv.ndarray, tv)
        pressure.diagnose_pressure_surface_to_top(
            grid=self.grid, backend=self.backend, exner=p.exner, virtual_temperature=self.tv,
            ddqz_z_full=self.ddqz, surface_pressure=self.p_sfc, pressure=self.p,
            pressure_on_cells_half_levels=self.p_half,
        )
        p_sfc = self.p_sfc.asnumpy()[self.owned]
        return Diagnostic(step, step * self.dtime_h, mass, float(p_sfc.min()))


def _like(target: Any, values: np.ndarray) -> Any:
    """`values` in the array namespace of `target` (CuPy for a GPU backend)."""
    if isinstance(target, np.ndarray):
        return values
    import cupy as cp  # a GPU backend's buffers

    return cp.asarray(values)
