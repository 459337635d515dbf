"""icon4py's `SolveNonhydro` built for one backend from the shared static fields.

The configuration is icon4py's benchmark's (`test_benchmark_solve_nonhydro.py`): combined
(2nd + 4th order) divergence damping with fourth_order_divdamp_factor 0.004, maximal nudging
coefficient 0.375, everything else NonHydrostaticConfig's defaults (the Rayleigh coefficient lives
in MetricsConfig in icon4py 0.4.1, default 0.05). Constructing SolveNonhydro runs icon4py's
`setup_program` for its ~22 programs, which submits their compilation (asynchronously, in GT4Py's
worker pool); `gt4py.next.wait_for_compilation()` waits for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Iterator
from typing import Any

from icoforge.granule.fields import Array, StaticFields

FOURTH_ORDER_DIVDAMP_FACTOR = 0.004
MAX_NUDGING_COEFFICIENT = 0.375
# time_step's factor, as icon4py's benchmark: 0.02 > 4 * FOURTH_ORDER_DIVDAMP_FACTOR, so the
# combined damping applies its 2nd-order part only (the 4th-order part switches on below 0.016).
SECOND_ORDER_DIVDAMP_FACTOR = 0.02

# Programs icon4py binds but the granule never calls: on global grids the limited-area ones, and
# the test-field initialisation (SolveNonhydro.p_test_run is False).
LIMITED_AREA_ONLY = (
    "compute_exner_from_rhotheta",
    "stencils_61_62",
    "compute_dwdz_for_divergence_damping",
    "init_cell_kdim_field_with_zero_wp",
    "update_mass_flux_weighted",
)
NEVER_CALLED = ("init_test_fields",)


def nonhydro_config() -> Any:
    from icon4py.model.atmosphere.dycore import dycore_states
    from icon4py.model.atmosphere.dycore import solve_nonhydro as solve_nh

    return solve_nh.NonHydrostaticConfig(
        divdamp_order=dycore_states.DivergenceDampingOrder.COMBINED,
        fourth_order_divdamp_factor=FOURTH_ORDER_DIVDAMP_FACTOR,
        max_nudging_coefficient=MAX_NUDGING_COEFFICIENT,
    )


def as_field(a: Array, allocator: Any) -> Any:
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    dim_objs = [getattr(dims, name) for name in a.dims]
    domain = gtx.domain({d: (o, o + n) for d, o, n in zip(dim_objs, a.origin, a.values.shape)})
    return gtx.as_field(domain, a.values.copy(), allocator=allocator)


@dataclasses.dataclass
class GranuleGrid:
    """An icon4py IconGrid on the device a backend needs, plus where it came from."""

    name: str
    icon_grid: Any
    on_gpu: bool

    @property
    def limited_area(self) -> bool:
        return bool(self.icon_grid.limited_area)


_gpu_grids: dict[tuple, Any] = {}
_gpu_lock = threading.Lock()


def grid_for_backend(cpu_grid: Any, on_gpu: bool) -> GranuleGrid:
    """The CPU grid itself, or the same file loaded again with connectivities on the GPU (GT4Py's
    GPU backends need device tables; icoforge's CUDA target takes either)."""
    if not on_gpu:
        return GranuleGrid(cpu_grid.name, cpu_grid.icon_grid, False)
    key = (str(cpu_grid.path), cpu_grid.num_levels)
    with _gpu_lock:
        if key not in _gpu_grids:
            import gt4py.next as gtx
            from gt4py.next import custom_layout_allocators as allocators
            from icon4py.model.common.grid import grid_manager as gm
            from icon4py.model.common.grid import gridfile
            from icon4py.model.common.grid import vertical as v_grid

            manager = gm.GridManager(
                grid_file=cpu_grid.path,
                config=v_grid.VerticalGridConfig(num_levels=cpu_grid.num_levels),
                offset_transformation=gridfile.ToZeroBasedIndexTransformation(),
            )
            manager(allocator=allocators.device_allocators[gtx.DeviceType.CUDA], keep_skip_values=True)
            _gpu_grids[key] = manager.grid
        return GranuleGrid(cpu_grid.name, _gpu_grids[key], True)


def used_variant_values(mean_cell_area: float) -> dict[str, list[Any]]:
    """The values the granule's steps pass for icon4py's compile-time variants (`setup_program`'s
    `variants`); variants not listed here (at_first_substep, at_last_substep) take all values."""
    return {
        "is_iau_active": [False],
        "lprep_adv": [True],
        "prepare_advection": [True],
        # MOST_EFFICIENT time scheme and never the initial time step
        "skip_compute_predictor_vertical_advection": [True],
        # VelocityAdvection sets it to True unconditionally (icon4py 0.4.1)
        "apply_extra_diffusion_on_vn": [True],
        # SolveNonhydro.run_corrector_step with COMBINED divergence damping
        "apply_2nd_order_divergence_damping": [SECOND_ORDER_DIVDAMP_FACTOR * mean_cell_area > 1.0e-6],
        "apply_4th_order_divergence_damping": [SECOND_ORDER_DIVDAMP_FACTOR <= 4.0 * FOURTH_ORDER_DIVDAMP_FACTOR],
    }


def _keep_used(values: list[Any], used: list[Any] | None) -> list[Any]:
    if used is None:
        return values
    kept = [v for v in values if v in used]
    return kept or values  # a value icon4py does not offer: leave icon4py's list alone


class _NotCompiled:
    """Stands in for a program that `only_used_variants` did not compile."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        from icoforge.errors import IcoforgeError

        raise IcoforgeError(
            f"program {self.name} was not compiled (only_used_variants): the granule should not call it"
        )


@contextlib.contextmanager
def _pruned_setup_program(limited_area: bool, mean_cell_area: float) -> Iterator[None]:
    """Make icon4py's `setup_program` compile only the variants and programs the granule calls."""
    from icon4py.model.atmosphere.dycore import solve_nonhydro as solve_nh
    from icon4py.model.atmosphere.dycore import velocity_advection as vel_adv

    original = solve_nh.setup_program
    used = used_variant_values(mean_cell_area)
    skip = NEVER_CALLED + (() if limited_area else LIMITED_AREA_ONLY)

    def pruned(*, program: Any, variants: dict[str, list[Any]] | None = None, **kwargs: Any) -> Any:
        name = program.definition_stage.definition.__name__
        if name in skip:
            return _NotCompiled(name)
        if variants:
            variants = {k: _keep_used(values, used.get(k)) for k, values in variants.items()}
        return original(program=program, variants=variants, **kwargs)

    solve_nh.setup_program = vel_adv.setup_program = pruned
    try:
        yield
    finally:
        solve_nh.setup_program = vel_adv.setup_program = original


def solver_inputs(grid: GranuleGrid, static: StaticFields, backend: Any) -> dict[str, Any]:
    """SolveNonhydro's static arguments (metric, interpolation and geometry states, vertical grid,
    configuration), their fields on `backend`'s device. Host-to-device copies, not compiling: the
    granule builds them before construction and times them apart (R2B6/80 on an H100: 4.5 s)."""
    from icon4py.model.atmosphere.dycore import dycore_states
    from icon4py.model.atmosphere.dycore import solve_nonhydro as solve_nh
    from icon4py.model.common import model_backends
    from icon4py.model.common.grid import states as grid_states
    from icon4py.model.common.grid import vertical as v_grid

    from icoforge.granule.fields import INTERPOLATION_FIELDS, METRIC_FIELDS, vertical_config

    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    allocator = model_backends.get_allocator(backend)
    field = functools.partial(as_field, allocator=allocator)
    g = {k: field(v) for k, v in static.geometry.items()}
    config = nonhydro_config()
    vconfig = vertical_config(grid.icon_grid.num_levels)
    vgrid = v_grid.VerticalGrid(
        config=vconfig,
        vct_a=gtx.as_field((dims.KDim,), static.vct_a.copy(), allocator=allocator),
        vct_b=gtx.as_field((dims.KDim,), static.vct_b.copy(), allocator=allocator),
    )
    cell_geometry = grid_states.CellParams(
        cell_center_lat=g["cell_center_lat"],
        cell_center_lon=g["cell_center_lon"],
        area=g["cell_area"],
        mean_cell_area=float(static.scalars["mean_cell_area"]),
    )
    edge_geometry = grid_states.EdgeParams(
        **{
            k: g[k]
            for k in (
                "tangent_orientation",
                "inverse_primal_edge_lengths",
                "inverse_dual_edge_lengths",
                "inverse_vertex_vertex_lengths",
                "primal_normal_vert_x",
                "primal_normal_vert_y",
                "dual_normal_vert_x",
                "dual_normal_vert_y",
                "primal_normal_cell_x",
                "dual_normal_cell_x",
                "primal_normal_cell_y",
                "dual_normal_cell_y",
                "edge_areas",
                "coriolis_frequency",
                "edge_center_lat",
                "edge_center_lon",
                "primal_normal_x",
                "primal_normal_y",
            )
        }
    )
    interpolation_state = dycore_states.InterpolationState(
        **{k: field(v) for k, v in static.interpolation.items() if k in INTERPOLATION_FIELDS}  # not advection's
    )
    metric_state = dycore_states.MetricStateNonHydro(
        **{k: field(v) for k, v in static.metrics.items() if k in METRIC_FIELDS},  # not the diffusion's
        nflat_gradp=gtx.int32(static.scalars["nflat_gradp"]),
    )
    return dict(
        config=config,
        params=solve_nh.NonHydrostaticParams(config),
        metric_state_nonhydro=metric_state,
        interpolation_state=interpolation_state,
        vertical_params=vgrid,
        edge_geometry=edge_geometry,
        cell_geometry=cell_geometry,
        owner_mask=g["cell_owner_mask"],
    )


def build_solver(
    grid: GranuleGrid,
    static: StaticFields,
    backend: Any,
    *,
    only_used_variants: bool = False,
    exchange: Any = None,
    inputs: dict[str, Any] | None = None,
) -> Any:
    """A SolveNonhydro for `backend` (a GT4Py Backend, or None for embedded) on `grid`.

    inputs: `solver_inputs(grid, static, backend)` made beforehand (default: made here).
    exchange: icon4py's halo exchange runtime (default: the single-node one, which does nothing);
    a decomposed granule passes its MPI/GHEX exchange (`decompose.py`, `halo_exchange.py`).

    only_used_variants: compile only the program variants the granule's steps call (about half
    of icon4py's 38 compile jobs on a global grid) instead of all of them as icon4py does; the
    compiled variants are the same programs. For CI; benchmarks compile what icon4py compiles."""
    from icon4py.model.atmosphere.dycore import solve_nonhydro as solve_nh
    from icon4py.model.common.decomposition import definitions as decomposition

    if inputs is None:
        inputs = solver_inputs(grid, static, backend)
    pruning = (
        _pruned_setup_program(grid.limited_area, float(static.scalars["mean_cell_area"]))
        if only_used_variants
        else contextlib.nullcontext()
    )
    with pruning:
        return solve_nh.SolveNonhydro(
            grid=grid.icon_grid,
            **inputs,
            backend=backend,
            exchange=decomposition.single_node_exchange if exchange is None else exchange,
        )
