"""The granule's grid split into MPI ranks with icon4py's own decomposition (issue 23).

One rank's view of a global grid:

- `mpi_world()`: MPI's world communicator as icon4py's `ProcessProperties` (rank, size), plus the
  node-local rank (for one GPU per rank). mpi4py is imported here, never at module import.
- `cell_partition(grid, ranks)`: which rank owns each cell. icon4py's `MetisDecomposer` (pymetis)
  on the cell-to-cell table when pymetis is installed; otherwise `bfs_partition`, cells in
  breadth-first order from cell 0 cut into equal runs (compact pieces, no dependency).
  Every rank computes it from the same table, so every rank gets the same answer.
- `load_local_grid(grid, props, partition)`: icon4py's `GridManager` run with that partition as
  its decomposer: `IconLikeHaloConstructor` builds ICON's halo (two cell lines, edges and vertices
  to the third line), the neighbour tables are renumbered to local indices, start/end indices of
  the zones (owned, halo lines) come from the decomposition. Limited-area grids are refused by
  icon4py 0.4.1 in distributed runs ("Limited-area grids are not supported"); we say so first.
- `local_static_fields` / `local_state`: the global static fields and initial state (computed
  once per grid, cached, as for one rank) restricted to the rank's points, halo included, by the
  decomposition's global indices; the cell owner mask is the rank's own. Every rank thus starts
  from the single-rank run's values, so the decomposed step can be compared with it point by point.
- `gather_owned`: the owned points of every rank back on rank 0, in global order.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.granule.fields import Array, StaticFields

HORIZONTAL = {"CellDim": "cells", "EdgeDim": "edges", "VertexDim": "vertices"}
# the prognostic / state fields by their horizontal dimension
STATE_DIMS = {
    "vn": "EdgeDim",
    "w": "CellDim",
    "rho": "CellDim",
    "exner": "CellDim",
    "theta_v": "CellDim",
    "perturbed_exner_at_cells_on_model_levels": "CellDim",
    "rho_at_cells_on_half_levels": "CellDim",
    "theta_v_at_cells_on_half_levels": "CellDim",
}
DECOMPOSERS = ("metis", "bfs")
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK")


def mpi_available() -> str | None:
    """None if mpi4py imports and finds an MPI library; else why not (one line)."""
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed: `pip install -e '.[mpi]'` (make setup), and an MPI (Debian: openmpi-bin libopenmpi-dev)"
    try:
        from mpi4py import MPI  # noqa: F401  (initialises MPI: call only where ranks are wanted)
    except (ImportError, RuntimeError) as e:  # mpi4py without a loadable libmpi
        return f"mpi4py cannot load an MPI library ({type(e).__name__}: {e}); Debian: apt-get install openmpi-bin libopenmpi-dev"
    return None


@dataclasses.dataclass(frozen=True)
class RankProperties:
    """icon4py's `ProcessProperties` protocol over an mpi4py communicator (what the halo
    constructor and GridManager read); icon4py's own `MPICommProcessProperties` exists only when
    GHEX imports, we need it without GHEX too."""

    comm: Any
    rank: int
    comm_size: int
    local_rank: int
    comm_name: str = "MPI_COMM_WORLD"

    def is_single_rank(self) -> bool:
        return self.comm_size == 1


def mpi_world() -> RankProperties:
    if why := mpi_available():
        raise IcoforgeError(why)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank = local.Get_rank()
    local.Free()
    return RankProperties(comm, comm.Get_rank(), comm.Get_size(), local_rank)


def local_rank_from_environment() -> int | None:
    """The node-local rank the launcher exported (before MPI is initialised), if any."""
    for name in LOCAL_RANK_VARIABLES:
        if (value := os.environ.get(name, "")).isdigit():
            return int(value)
    return None


def bfs_partition(c2e2c: np.ndarray, ranks: int) -> np.ndarray:
    """Cells in breadth-first order from cell 0 (neighbours in table order), cut into `ranks`
    runs of equal length: rank r owns run r. Deterministic; a piece is a band of BFS layers (it
    may fall apart at the cut; the halo construction does not need connected pieces)."""
    n = c2e2c.shape[0]
    order = np.empty(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    head = tail = 0
    for start in range(n):  # every component (a connected grid has one)
        if seen[start]:
            continue
        seen[start] = True
        order[tail] = start
        tail += 1
        while head < tail:
            c = order[head]
            head += 1
            for nb in c2e2c[c]:
                if nb >= 0 and not seen[nb]:
                    seen[nb] = True
                    order[tail] = nb
                    tail += 1
    labels = np.empty(n, dtype=np.int32)
    labels[order] = (np.arange(n) * ranks) // n
    return labels


def cell_partition(c2e2c: np.ndarray, ranks: int, method: str = "metis") -> np.ndarray:
    """Owner rank of every cell of the global grid (see the module docstring)."""
    if method not in DECOMPOSERS:
        raise IcoforgeError(f"decomposer {method!r}: choose one of {', '.join(DECOMPOSERS)}")
    if ranks < 1 or ranks > c2e2c.shape[0]:
        raise IcoforgeError(f"cannot split {c2e2c.shape[0]} cells into {ranks} ranks")
    if ranks == 1:
        return np.zeros(c2e2c.shape[0], dtype=np.int32)
    if method == "metis":
        try:
            from icon4py.model.common.decomposition import decomposer

            return np.asarray(decomposer.MetisDecomposer()(c2e2c, ranks), dtype=np.int32)
        except ImportError:  # pymetis missing: the dependency-free split
            pass
    return bfs_partition(c2e2c, ranks)


def decomposer_used(method: str) -> str:
    if method == "metis":
        try:
            import pymetis  # noqa: F401
        except ImportError:
            return "bfs (pymetis not installed)"
    return method


class FixedPartition:
    """An icon4py `Decomposer` that returns a partition computed beforehand (so a second grid
    load, e.g. with device tables, gets exactly the same split)."""

    def __init__(self, labels: np.ndarray):
        self.labels = labels

    def __call__(self, adjacency_matrix: Any, num_partitions: int) -> Any:
        if int(self.labels.max()) >= num_partitions or self.labels.shape[0] != adjacency_matrix.shape[0]:
            raise IcoforgeError("the partition does not fit this grid or number of ranks")
        from icon4py.model.common.utils import data_allocation as data_alloc

        return data_alloc.array_namespace(adjacency_matrix).asarray(self.labels)


def global_c2e2c(grid: Any) -> np.ndarray:
    """The cell-to-cell table of a (global, single-rank) `icoforge.grids.Grid`, as NumPy."""
    table = grid.connectivities["C2E2C"]
    return np.asarray(getattr(table, "ndarray", table))


def check_decomposable(grid: Any, ranks: int) -> None:
    if ranks > 1 and grid.limited_area:
        raise IcoforgeError(
            f"{grid.name} is a limited-area grid: icon4py 0.4.1 refuses to decompose limited-area grids "
            "(GridManager: 'Limited-area grids are not supported in distributed runs'); use a global grid "
            "(R2B3 ... R2B6) for --ranks"
        )


def load_local_grid(grid: Any, props: RankProperties, partition: np.ndarray, allocator: Any = None) -> Any:
    """This rank's part of `grid` (with halos) as an icon4py `GridManager` that has run."""
    import gt4py.next as gtx
    from gt4py.next import custom_layout_allocators as allocators
    from icon4py.model.common.grid import grid_manager as gm
    from icon4py.model.common.grid import gridfile
    from icon4py.model.common.grid import vertical as v_grid

    check_decomposable(grid, props.comm_size)
    manager = gm.GridManager(
        grid_file=grid.path,
        config=v_grid.VerticalGridConfig(num_levels=grid.num_levels),
        offset_transformation=gridfile.ToZeroBasedIndexTransformation(),
    )
    manager(
        allocator=allocator or allocators.device_allocators[gtx.DeviceType.CPU],
        keep_skip_values=True,
        decomposer=FixedPartition(partition),
        process_props=props,
    )
    return manager


def device_icon_grid(icon_grid: Any, xp: Any = None) -> Any:
    """The rank's icon4py grid with its neighbour tables copied to the GPU (`xp`: CuPy by default),
    everything else (sizes, zone bounds) the host grid's: GT4Py's GPU backends need device tables.
    The halo construction is not run again (icon4py's runs its per-index loops on host arrays)."""
    import gt4py.next as gtx

    if xp is None:
        import cupy as xp
    tables = {}
    for name, conn in icon_grid.connectivities.items():
        if hasattr(conn, "ndarray"):
            conn = gtx.as_connectivity(
                domain=conn.domain.dims, codomain=conn.codomain, data=xp.asarray(conn.ndarray), skip_value=conn.skip_value
            )
        tables[name] = conn
    return dataclasses.replace(icon_grid, connectivities=tables)


@dataclasses.dataclass(frozen=True)
class LocalIndices:
    """Global index of every local point per horizontal dimension (owned points first, then the
    halo lines), and which of them this rank owns. NumPy on the host."""

    global_index: dict[str, np.ndarray]  # "CellDim" -> int array
    owned: dict[str, np.ndarray]  # "CellDim" -> bool array

    @classmethod
    def from_decomposition(cls, info: Any) -> LocalIndices:
        from icon4py.model.common import dimension as dims
        from icon4py.model.common.utils import data_allocation as data_alloc

        gi, own = {}, {}
        for name in HORIZONTAL:
            dim = getattr(dims, name)
            gi[name] = np.asarray(data_alloc.as_numpy(info.global_index(dim)), dtype=np.int64)
            own[name] = np.asarray(data_alloc.as_numpy(info.owner_mask(dim)), dtype=bool)
        return cls(gi, own)

    def sizes(self) -> dict[str, tuple[int, int]]:
        """dimension -> (owned, halo) point counts."""
        return {d: (int(o.sum()), int((~o).sum())) for d, o in self.owned.items()}


def _restrict(a: Array, idx: LocalIndices, name: str) -> Array:
    if not a.dims or a.dims[0] not in HORIZONTAL:
        if any(d in HORIZONTAL for d in a.dims):
            raise IcoforgeError(f"static field {name}: horizontal dimension not first ({a.dims})")
        return a  # vertical-only or scalar-like: the same on every rank
    if a.origin[0] != 0:
        raise IcoforgeError(f"static field {name} starts at {a.dims[0]} {a.origin[0]}, not 0: cannot restrict it")
    return Array(a.dims, a.origin, np.ascontiguousarray(a.values[idx.global_index[a.dims[0]]]))


def mask_prog_halo_c(icon_grid: Any) -> np.ndarray:
    """icon4py's MASK_PROG_HALO_C of a rank's grid: on the halo cells ([HALO, END) of the cell
    zones) True unless the cell is in the lateral boundary (refin_ctrl 1..4), False elsewhere, as
    the metrics factory computes it. It depends on the decomposition: on one rank the halo is
    empty and the mask False everywhere, so the global field cannot be restricted. Read by
    `update_theta_and_exner_in_halo` after the last exchange of a substep: with False on halo
    cells it recomputes exner there from rho and exner (the lateral-boundary formula) and the
    halo's exner and theta_v are wrong from the second substep on."""
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import horizontal as h_grid
    from icon4py.model.common.utils import data_allocation as data_alloc

    refin = np.asarray(data_alloc.as_numpy(icon_grid.refinement_control[dims.CellDim].ndarray))
    cells = h_grid.domain(dims.CellDim)
    start, end = int(icon_grid.start_index(cells(h_grid.Zone.HALO))), int(icon_grid.end_index(cells(h_grid.Zone.END)))
    mask = np.zeros(icon_grid.num_cells, dtype=bool)
    mask[start:end] = ~((refin[start:end] >= 1) & (refin[start:end] <= 4))
    return mask


def local_static_fields(static: StaticFields, idx: LocalIndices, icon_grid: Any = None) -> StaticFields:
    """The global static fields at this rank's points. The fields that depend on the
    decomposition are the rank's own: the cell owner mask, and (given the rank's `icon_grid`)
    `mask_prog_halo_c`."""
    geometry = {k: _restrict(v, idx, k) for k, v in static.geometry.items()}
    if "cell_owner_mask" in geometry:
        geometry["cell_owner_mask"] = Array(("CellDim",), (0,), idx.owned["CellDim"].copy())
    metrics = {k: _restrict(v, idx, k) for k, v in static.metrics.items()}
    if icon_grid is not None and "mask_prog_halo_c" in metrics:
        metrics["mask_prog_halo_c"] = Array(("CellDim",), (0,), mask_prog_halo_c(icon_grid))
    return dataclasses.replace(
        static,
        geometry=geometry,
        interpolation={k: _restrict(v, idx, k) for k, v in static.interpolation.items()},
        metrics=metrics,
    )


def local_state(state: dict[str, np.ndarray], idx: LocalIndices) -> dict[str, np.ndarray]:
    out = {}
    for name, values in state.items():
        dim = STATE_DIMS.get(name)
        if dim is None:
            raise IcoforgeError(f"state field {name}: its horizontal dimension is not known (decompose.STATE_DIMS)")
        out[name] = np.ascontiguousarray(values[idx.global_index[dim]])
    return out


def gather_owned(
    props: RankProperties, idx: LocalIndices, fields: dict[str, np.ndarray], global_sizes: dict[str, int]
) -> dict[str, np.ndarray] | None:
    """Every rank's owned points of `fields` (name -> local array, horizontal first) assembled on
    rank 0 in global order (None elsewhere). Points no rank owns stay NaN, so they fail any check."""
    comm = props.comm
    result: dict[str, np.ndarray] | None = {} if props.rank == 0 else None
    for name, values in fields.items():
        dim = STATE_DIMS[name]
        mask = idx.owned[dim]
        mine = (idx.global_index[dim][mask], np.ascontiguousarray(values[mask]))
        parts = comm.gather(mine, root=0)
        if result is not None:
            full = np.full((global_sizes[dim], *values.shape[1:]), np.nan, dtype=values.dtype)
            for gidx, vals in parts:
                full[gidx] = vals
            result[name] = full
    return result


@functools.cache
def _n_gpus() -> int:
    import cupy as cp

    return int(cp.cuda.runtime.getDeviceCount())


def select_device(local_rank: int, n_gpus: int | None = None) -> int:
    """One GPU per rank: rank -> `cupy.cuda.Device(local_rank % n_gpus)`, made current for this
    process before anything allocates. Returns the device id."""
    import cupy as cp

    n = n_gpus if n_gpus is not None else _n_gpus()
    if n < 1:
        raise IcoforgeError("no GPU visible to this rank (cupy.cuda.runtime.getDeviceCount() == 0)")
    device = local_rank % n
    cp.cuda.Device(device).use()
    return device
