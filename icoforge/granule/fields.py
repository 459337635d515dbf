"""The granule's static fields: geometry, interpolation and metric fields from icon4py's factories.

`build_static_fields(grid, backend_name)` runs icon4py's `GridGeometry`,
`InterpolationFieldsFactory` and `MetricsFieldsFactory` on a CPU grid with one backend (the
"factory backend") and returns plain NumPy arrays: every backend under test then gets the very
same inputs (copied with its own allocator, see `solver.py`), and the factories run once per grid,
not once per backend. The set-up mirrors icon4py's benchmark fixtures
(`model/testing/.../fixtures/benchmark.py` in icon4py's repository): vertical grid with model top
23.5 km, lowest layer 50 m, Jablonowski-Williamson topography, default Interpolation/MetricsConfig.

The result is cached on disk (`$ICOFORGE_CACHE/granule-fields/`), keyed by the grid file, the
number of levels, icon4py's version and this module's field list: the factories take minutes on
bigger grids and their result never depends on the backend beyond rounding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import io
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from icoforge.cache import atomic_write_bytes, cache_dir, file_lock
from icoforge.errors import IcoforgeError

# Vertical grid of icon4py's benchmark (test_benchmark_solve_nonhydro / fixtures/benchmark.py).
MODEL_TOP_HEIGHT = 23500.0
LOWEST_LAYER_THICKNESS = 50.0
STRETCH_FACTOR = 1.0
RAYLEIGH_DAMPING_HEIGHT = 1.0  # as icon4py's benchmark: Rayleigh damping on every level above 1 m

# (name in StaticFields, factory attribute name). Geometry fields of EdgeParams / CellParams.
GEOMETRY_FIELDS: dict[str, str] = {
    "cell_center_lat": "CELL_LAT",
    "cell_center_lon": "CELL_LON",
    "cell_area": "CELL_AREA",
    "tangent_orientation": "TANGENT_ORIENTATION",
    "inverse_primal_edge_lengths": "inverse_of_EDGE_LENGTH",
    "inverse_dual_edge_lengths": "inverse_of_DUAL_EDGE_LENGTH",
    "inverse_vertex_vertex_lengths": "inverse_of_VERTEX_VERTEX_LENGTH",
    "primal_normal_vert_x": "EDGE_NORMAL_VERTEX_U",
    "primal_normal_vert_y": "EDGE_NORMAL_VERTEX_V",
    "dual_normal_vert_x": "EDGE_TANGENT_VERTEX_U",
    # icon4py's benchmark passes EDGE_NORMAL_VERTEX_V here (a slip); the dual normal is the tangent.
    "dual_normal_vert_y": "EDGE_TANGENT_VERTEX_V",
    "primal_normal_cell_x": "EDGE_NORMAL_CELL_U",
    "dual_normal_cell_x": "EDGE_TANGENT_CELL_U",
    "primal_normal_cell_y": "EDGE_NORMAL_CELL_V",
    "dual_normal_cell_y": "EDGE_TANGENT_CELL_V",
    "edge_areas": "EDGE_AREA",
    "coriolis_frequency": "CORIOLIS_PARAMETER",
    "edge_center_lat": "EDGE_LAT",
    "edge_center_lon": "EDGE_LON",
    "primal_normal_x": "EDGE_NORMAL_U",
    "primal_normal_y": "EDGE_NORMAL_V",
    "cell_owner_mask": "=cell_owner_mask",
    # the diffusion granule's EdgeParams (granule/diffusion.py); SolveNonhydro takes only the inverses
    "primal_edge_lengths": "EDGE_LENGTH",
    "dual_edge_lengths": "DUAL_EDGE_LENGTH",
}
GEOMETRY_SCALARS: dict[str, str] = {"mean_cell_area": "MEAN_CELL_AREA"}

# InterpolationState field -> interpolation_attributes name
INTERPOLATION_FIELDS: dict[str, str] = {
    "c_lin_e": "C_LIN_E",
    "c_intp": "CELL_AW_VERTS",
    "e_flx_avg": "E_FLX_AVG",
    "geofac_grdiv": "GEOFAC_GRDIV",
    "geofac_rot": "GEOFAC_ROT",
    "pos_on_tplane_e_1": "POS_ON_TPLANE_E_X",
    "pos_on_tplane_e_2": "POS_ON_TPLANE_E_Y",
    "rbf_vec_coeff_e": "RBF_VEC_COEFF_E",
    "e_bln_c_s": "E_BLN_C_S",
    "rbf_coeff_1": "RBF_VEC_COEFF_V1",
    "rbf_coeff_2": "RBF_VEC_COEFF_V2",
    "geofac_div": "GEOFAC_DIV",
    "geofac_n2s": "GEOFAC_N2S",
    "geofac_grg_x": "GEOFAC_GRG_X",
    "geofac_grg_y": "GEOFAC_GRG_Y",
    "nudgecoeff_e": "NUDGECOEFFS_E",
}

# MetricStateNonHydro field -> metrics_attributes name
METRIC_FIELDS: dict[str, str] = {
    "mask_prog_halo_c": "MASK_PROG_HALO_C",
    "rayleigh_w": "RAYLEIGH_W",
    "time_extrapolation_parameter_for_exner": "EXNER_EXFAC",
    "reference_exner_at_cells_on_model_levels": "EXNER_REF_MC",
    "wgtfac_c": "WGTFAC_C",
    "wgtfacq_c": "WGTFACQ_C",
    "inv_ddqz_z_full": "INV_DDQZ_Z_FULL",
    "reference_rho_at_cells_on_model_levels": "RHO_REF_MC",
    "reference_theta_at_cells_on_model_levels": "THETA_REF_MC",
    "exner_w_explicit_weight_parameter": "EXNER_W_EXPLICIT_WEIGHT_PARAMETER",
    "ddz_of_reference_exner_at_cells_on_half_levels": "D_EXNER_DZ_REF_IC",
    "ddqz_z_half": "DDQZ_Z_HALF",
    "reference_theta_at_cells_on_half_levels": "THETA_REF_IC",
    "d2dexdz2_fac1_mc": "D2DEXDZ2_FAC1_MC",
    # icon4py's benchmark passes FAC1 twice (a slip); the metric state has its own FAC2.
    "d2dexdz2_fac2_mc": "D2DEXDZ2_FAC2_MC",
    "reference_rho_at_edges_on_model_levels": "RHO_REF_ME",
    "reference_theta_at_edges_on_model_levels": "THETA_REF_ME",
    "ddxn_z_full": "DDXN_Z_FULL",
    "zdiff_gradp": "ZDIFF_GRADP",
    "vertoffset_gradp": "VERTOFFSET_GRADP",
    "pg_exdist": "PG_EXDIST_DSL",
    "ddqz_z_full_e": "DDQZ_Z_FULL_E",
    "ddxt_z_full": "DDXT_Z_FULL",
    "wgtfac_e": "WGTFAC_E",
    "wgtfacq_e": "WGTFACQ_E",
    "exner_w_implicit_weight_parameter": "EXNER_W_IMPLICIT_WEIGHT_PARAMETER",
    "horizontal_mask_for_3d_divdamp": "HORIZONTAL_MASK_FOR_3D_DIVDAMP",
    "scaling_factor_for_3d_divdamp": "SCALING_FACTOR_FOR_3D_DIVDAMP",
    "coeff1_dwdz": "COEFF1_DWDZ",
    "coeff2_dwdz": "COEFF2_DWDZ",
    "coeff_gradekin": "COEFF_GRADEKIN",
}
METRIC_SCALARS: dict[str, str] = {"nflat_gradp": "NFLAT_GRADP"}
# DiffusionMetricState's fields that MetricStateNonHydro lacks (kept in `metrics`; solver.py passes
# only METRIC_FIELDS to SolveNonhydro; the diffusion granule, granule/diffusion.py, takes these)
DIFFUSION_METRIC_FIELDS: dict[str, str] = {
    "zd_intcoef": "ZD_INTCOEF",
    "zd_vertoffset": "ZD_VERTOFFSET",
    "zd_diffcoef": "ZD_DIFFCOEF",
}
# The tracer advection granule's (granule/advection.py) fields that neither SolveNonhydro nor
# Diffusion takes (kept in `interpolation` / `metrics`; solver.py passes SolveNonhydro only
# INTERPOLATION_FIELDS and METRIC_FIELDS). lsq_pseudoinv is (CellDim, LsqUnkDim, C2E2CDim): the
# driver passes its two LsqUnkDim slices as lsq_pseudoinv_1/2.
ADVECTION_INTERPOLATION_FIELDS: dict[str, str] = {"lsq_pseudoinv": "LSQ_PSEUDOINV"}
ADVECTION_METRIC_FIELDS: dict[str, str] = {"ddqz_z_full": "DDQZ_Z_FULL"}

FIELDS_VERSION = "granule-fields-v1"


@dataclasses.dataclass(frozen=True)
class Array:
    """One static field as plain data: dimension names (icon4py's `dims` attribute names, e.g.
    "EdgeDim", "E2CDim", "KDim"), the domain start per dimension, and the values."""

    dims: tuple[str, ...]
    origin: tuple[int, ...]
    values: np.ndarray


@dataclasses.dataclass(frozen=True)
class StaticFields:
    """Everything SolveNonhydro needs besides the grid and the states, as NumPy arrays."""

    geometry: dict[str, Array]
    interpolation: dict[str, Array]
    metrics: dict[str, Array]
    scalars: dict[str, float | int]
    vct_a: np.ndarray
    vct_b: np.ndarray
    factory_backend: str
    timings: dict[str, float]  # seconds per factory ("geometry", "interpolation", "metrics")
    cached: bool = False

    def arrays(self) -> dict[str, Array]:
        return {**self.geometry, **self.interpolation, **self.metrics}


def vertical_config(num_levels: int) -> Any:
    from icon4py.model.common.grid import vertical as v_grid

    return v_grid.VerticalGridConfig(
        num_levels,
        lowest_layer_thickness=LOWEST_LAYER_THICKNESS,
        model_top_height=MODEL_TOP_HEIGHT,
        stretch_factor=STRETCH_FACTOR,
        rayleigh_damping_height=RAYLEIGH_DAMPING_HEIGHT,
    )


def vertical_grid(num_levels: int, allocator: Any = None) -> Any:
    from icon4py.model.common.grid import vertical as v_grid

    config = vertical_config(num_levels)
    vct_a, vct_b = v_grid.get_vct_a_and_vct_b(config, allocator=allocator)
    return v_grid.VerticalGrid(config=config, vct_a=vct_a, vct_b=vct_b)


def _to_array(field: Any) -> Array:
    from icon4py.model.common.utils import data_allocation as data_alloc

    names = tuple(_dim_attr(d) for d in field.domain.dims)
    origin = tuple(int(r.start) for r in field.domain.ranges)
    return Array(names, origin, np.array(data_alloc.as_numpy(field.ndarray), copy=True))


def _dim_attr(dim: Any) -> str:
    """The attribute of `icon4py.model.common.dimension` naming `dim` (e.g. "E2CDim")."""
    from icon4py.model.common import dimension as dims

    for name, value in vars(dims).items():
        if name.endswith("Dim") and value == dim:
            return name
    raise KeyError(f"dimension {dim} is not in icon4py.model.common.dimension")


def _scalar(value: Any) -> float | int:
    arr = np.asarray(getattr(value, "ndarray", value))
    v = arr.reshape(-1)[0].item() if arr.size else arr.item()
    return v


def static_fields_key(grid: Any, factory_backend: str) -> str:
    """What the cached static fields depend on (also in the greenline report: runs to be merged must
    share it)."""
    st = grid.path.stat()
    parts = [
        str(grid.path),
        str(st.st_size),
        str(st.st_mtime_ns),
        str(grid.num_levels),
        importlib.metadata.version("icon4py-common"),
        importlib.metadata.version("gt4py"),
        FIELDS_VERSION,
        repr(sorted(GEOMETRY_FIELDS.items())),
        repr(sorted(INTERPOLATION_FIELDS.items())),
        repr(sorted(METRIC_FIELDS.items())),
        repr(sorted(DIFFUSION_METRIC_FIELDS.items())),
        repr(sorted(ADVECTION_INTERPOLATION_FIELDS.items())),
        repr(sorted(ADVECTION_METRIC_FIELDS.items())),
        repr((MODEL_TOP_HEIGHT, LOWEST_LAYER_THICKNESS, STRETCH_FACTOR, RAYLEIGH_DAMPING_HEIGHT)),
        factory_backend,
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def build_static_fields(
    grid: Any,
    factory_backend: str = "icoforge-cpu",
    *,
    use_cache: bool = True,
    in_child: bool = False,
    on_status: Callable[[str], None] | None = None,
) -> StaticFields:
    """Static fields of `grid` (an `icoforge.grids.Grid` on the CPU) from icon4py's factories run
    with the backend named `factory_backend` (see `icoforge.suite.backends`).

    in_child: run the factories in a child process and read its result from the cache. The
    greenline does so: a process that ran the factories itself (about 40 compiled CPU modules,
    their OpenMP threads, the factories' heap) may time its steps with a slower host. On the H200
    (session 6) the two runs that computed their fields in-process spent 1.7x (R2B6/80) and 2.5x
    (REGIONAL/80) the Python time between programs of earlier runs that read them from the cache,
    and REGIONAL/80's step took 98.7 ms instead of 48.6 ms. The cause is not confirmed yet."""
    status = on_status or (lambda text: None)
    key = static_fields_key(grid, factory_backend)
    path = cache_dir("granule-fields") / f"{grid.name}-L{grid.num_levels}-{key}.npz"
    if use_cache:
        cached = _read(path)
        if cached is not None:
            return cached
    with file_lock(path.with_suffix(".lock")):
        if use_cache and (cached := _read(path)) is not None:
            return cached
        if in_child:
            status(f"static fields ({factory_backend}, in a child process)")
            return dataclasses.replace(_compute_in_child(grid, factory_backend, path), cached=False)
        fields = _compute(grid, factory_backend, status)
        _write(path, fields)
    return fields


def _compute_in_child(grid: Any, factory_backend: str, path: Any) -> StaticFields:
    """Compute the static fields in a fresh (spawned) process that writes them to `path`."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # not fork: nothing of this process is inherited
    child = ctx.Process(
        target=_child_main, args=(str(grid.path), grid.num_levels, factory_backend, str(path)), name="icoforge-static-fields"
    )
    child.start()
    child.join()
    fields = _read(path)
    if child.exitcode != 0 or fields is None:
        raise IcoforgeError(
            f"computing the static fields of {grid.name}/{grid.num_levels} in a child process failed "
            f"(exit code {child.exitcode}); its traceback is above"
        )
    return fields


def _child_main(grid_path: str, levels: int, factory_backend: str, out_path: str) -> None:
    import pathlib

    from icoforge.console import filter_known_warnings
    from icoforge.grids import load_grid

    filter_known_warnings()  # a spawned process starts with Python's default filters: icon4py's divide warnings
    grid = load_grid(pathlib.Path(grid_path), levels=levels, show_progress=False)
    _write(pathlib.Path(out_path), _compute(grid, factory_backend, lambda text: print(f"  {text}", flush=True)))


def _compute(grid: Any, factory_backend: str, status: Callable[[str], None]) -> StaticFields:
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims
    from icon4py.model.common import topography
    from icon4py.model.common.decomposition import definitions as decomposition
    from icon4py.model.common.grid import geometry as grid_geometry
    from icon4py.model.common.grid import geometry_attributes as geometry_meta
    from icon4py.model.common.grid import geometry_config
    from icon4py.model.common.interpolation import interpolation_attributes, interpolation_factory
    from icon4py.model.common.metrics import metrics_attributes, metrics_factory
    from icon4py.model.common.states import factory as states_factory
    from icon4py.model.common.topography.analytical import jablonowski_williamson as jw_topo

    from icoforge.granule.backends import resolve_backend
    from icoforge.suite import peers

    # icon4py 0.4.1's field factories take a GT4Py Backend object, not a descriptor: for a peer
    # name, the one icon4py's own fixtures give them (customize_backend with no program)
    backend = peers.generic(factory_backend) if peers.is_peer(factory_backend) else resolve_backend(factory_backend)
    manager = grid.manager
    mesh = grid.icon_grid
    timings: dict[str, float] = {}

    status(f"geometry fields ({factory_backend})")
    t0 = time.perf_counter()
    geometry = grid_geometry.GridGeometry(
        grid=mesh,
        decomposition_info=manager.decomposition_info,
        backend=backend,
        coordinates=manager.coordinates,
        extra_fields=manager.geometry_fields,
        metadata=geometry_meta.attrs,
        config=geometry_config.GeometryConfig(),
        process_props=decomposition.SingleNodeProcessProperties(),
        exchange=decomposition.single_node_exchange,
    )

    def geometry_name(spec: str) -> str:
        if spec.startswith("="):
            return spec[1:]
        if spec.startswith("inverse_of_"):
            return "inverse_of_" + getattr(geometry_meta, spec[len("inverse_of_") :])
        return getattr(geometry_meta, spec)

    geometry_arrays = {k: _to_array(geometry.get(geometry_name(v))) for k, v in GEOMETRY_FIELDS.items()}
    scalars: dict[str, float | int] = {
        k: _scalar(geometry.get(geometry_name(v), states_factory.RetrievalType.SCALAR))
        for k, v in GEOMETRY_SCALARS.items()
    }
    timings["geometry"] = time.perf_counter() - t0

    status(f"interpolation fields ({factory_backend})")
    t0 = time.perf_counter()
    interpolation = interpolation_factory.InterpolationFieldsFactory(
        config=interpolation_factory.InterpolationConfig(),
        grid=mesh,
        decomposition_info=manager.decomposition_info,
        exchange=decomposition.single_node_exchange,
        geometry_source=geometry,
        backend=backend,
        metadata=interpolation_attributes.attrs,
    )
    interpolation_arrays = {
        k: _to_array(interpolation.get(getattr(interpolation_attributes, v)))
        for k, v in {**INTERPOLATION_FIELDS, **ADVECTION_INTERPOLATION_FIELDS}.items()
    }
    timings["interpolation"] = time.perf_counter() - t0

    status(f"metric fields ({factory_backend})")
    t0 = time.perf_counter()
    vgrid = vertical_grid(mesh.num_levels)
    topo_c = topography.create(
        config=topography.TopographyConfig(config=jw_topo.JablonowskiWilliamsonConfig()),
        grid_manager=manager,
        backend=backend,
        exchange=decomposition.single_node_exchange,
    )
    metrics = metrics_factory.MetricsFieldsFactory(
        grid=mesh,
        vertical_grid=vgrid,
        decomposition_info=manager.decomposition_info,
        exchange=decomposition.single_node_exchange,
        geometry_source=geometry,
        topography=gtx.as_field((dims.CellDim,), data=topo_c),
        interpolation_source=interpolation,
        config=metrics_factory.MetricsConfig(),
        backend=backend,
        metadata=metrics_attributes.attrs,
    )
    metric_arrays = {
        k: _to_array(metrics.get(getattr(metrics_attributes, v)))
        for k, v in {**METRIC_FIELDS, **DIFFUSION_METRIC_FIELDS, **ADVECTION_METRIC_FIELDS}.items()
    }
    for k, v in METRIC_SCALARS.items():
        scalars[k] = int(_scalar(metrics.get(getattr(metrics_attributes, v), states_factory.RetrievalType.SCALAR)))
    timings["metrics"] = time.perf_counter() - t0

    return StaticFields(
        geometry=geometry_arrays,
        interpolation=interpolation_arrays,
        metrics=metric_arrays,
        scalars=scalars,
        vct_a=np.asarray(vgrid.vct_a.asnumpy()),
        vct_b=np.asarray(vgrid.vct_b.asnumpy()),
        factory_backend=factory_backend,
        timings=timings,
    )


# --- on-disk cache: one .npz, checksummed by numpy's zip CRCs; written atomically ----------------


def _write(path: Any, f: StaticFields) -> None:
    payload: dict[str, np.ndarray] = {}
    meta: list[str] = []
    for group in ("geometry", "interpolation", "metrics"):
        for name, arr in getattr(f, group).items():
            payload[f"{group}/{name}"] = arr.values
            meta.append(f"{group}/{name}|{','.join(arr.dims)}|{','.join(map(str, arr.origin))}")
    payload["__vct_a"] = f.vct_a
    payload["__vct_b"] = f.vct_b
    payload["__meta"] = np.array(meta)
    payload["__scalars"] = np.array([f"{k}|{type(v).__name__}|{v!r}" for k, v in f.scalars.items()])
    payload["__info"] = np.array([FIELDS_VERSION, f.factory_backend, *(f"{k}|{v!r}" for k, v in f.timings.items())])
    buf = io.BytesIO()
    np.savez(buf, **payload)
    atomic_write_bytes(path, buf.getvalue())


def _read(path: Any) -> StaticFields | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            info = [str(s) for s in z["__info"]]
            if info[0] != FIELDS_VERSION:
                return None
            groups: dict[str, dict[str, Array]] = {"geometry": {}, "interpolation": {}, "metrics": {}}
            for line in z["__meta"]:
                key, dims, origin = str(line).split("|")
                group, name = key.split("/")
                groups[group][name] = Array(
                    tuple(dims.split(",")) if dims else (),
                    tuple(int(o) for o in origin.split(",")) if origin else (),
                    np.array(z[key]),
                )
            scalars: dict[str, float | int] = {}
            for line in z["__scalars"]:
                k, typ, v = str(line).split("|")
                scalars[k] = int(v) if typ == "int" else float(v)
            timings = {k: float(v) for k, v in (s.split("|") for s in info[2:])}
            return StaticFields(
                geometry=groups["geometry"],
                interpolation=groups["interpolation"],
                metrics=groups["metrics"],
                scalars=scalars,
                vct_a=np.array(z["__vct_a"]),
                vct_b=np.array(z["__vct_b"]),
                factory_backend=info[1],
                timings=timings,
                cached=True,
            )
    except FileNotFoundError:
        return None
    except Exception:  # a corrupt or foreign file: recompute (and overwrite) it
        return None
