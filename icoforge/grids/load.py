"""Load a grid (preset name or ICON NetCDF path) with icon4py's GridManager, on the CPU.

Loaded grids are kept for the life of the process: the same file and number of levels
give the same `Grid` object, so programs compiled against its connectivities can share it.
"""

from __future__ import annotations

import numbers
import os
import pathlib
import threading
from typing import Any

from icoforge.errors import IcoforgeError
from icoforge.grids import generate, validate
from icoforge.grids.info import GridInfo, grid_info
from icoforge.grids.presets import PRESETS, canonical_name, lookup_preset


class Grid:
    """An icon4py IconGrid plus where it came from; see `load_grid`."""

    def __init__(self, name: str, path: pathlib.Path, manager: Any):
        self.name = name
        self.path = path
        self.manager = manager  # GridManager: geometry_fields, coordinates for the granule
        self.icon_grid = manager.grid
        self._info: GridInfo | None = None

    num_levels = property(lambda self: self.icon_grid.num_levels)
    num_cells = property(lambda self: self.icon_grid.num_cells)
    num_edges = property(lambda self: self.icon_grid.num_edges)
    num_vertices = property(lambda self: self.icon_grid.num_vertices)
    limited_area = property(lambda self: self.icon_grid.limited_area)

    @property
    def connectivities(self) -> dict[str, Any]:
        """Offset name -> gt4py NeighborTable (the offset provider for GT4Py programs)."""
        return self.icon_grid.connectivities

    def start_index(self, domain: Any) -> int:
        return int(self.icon_grid.start_index(domain))

    def end_index(self, domain: Any) -> int:
        return int(self.icon_grid.end_index(domain))

    def info(self) -> GridInfo:
        if self._info is None:
            self._info = grid_info(self.name, self.path, self.icon_grid)
        return self._info

    def __repr__(self) -> str:
        return (
            f"Grid({self.name!r}, cells={self.num_cells}, edges={self.num_edges}, "
            f"vertices={self.num_vertices}, levels={self.num_levels}, path='{self.path}')"
        )


class DeviceGrid:
    """`grid` with its neighbour tables copied to the GPU once (CuPy). GT4Py's GPU backends
    (gtfn_gpu, dace_gpu) require the offset provider on the device; handing them host tables is
    an error (or, under `python -O`, a wrong pointer). Everything else is the host grid's."""

    def __init__(self, grid: Grid):
        import cupy as cp
        import gt4py.next as gtx

        self.host = grid
        self._connectivities = {}
        for name, conn in grid.connectivities.items():
            if hasattr(conn, "ndarray"):
                conn = gtx.as_connectivity(
                    domain=conn.domain.dims, codomain=conn.codomain, data=cp.asarray(conn.ndarray), skip_value=conn.skip_value
                )
            self._connectivities[name] = conn

    @property
    def connectivities(self) -> dict[str, Any]:
        return self._connectivities

    def __getattr__(self, name: str) -> Any:  # name, num_levels, start_index, ... of the host grid
        return getattr(self.host, name)

    def __repr__(self) -> str:
        return f"DeviceGrid({self.host!r})"


_loaded: dict[tuple, Grid] = {}
_loaded_lock = threading.Lock()


def resolve_grid_path(
    name_or_path: str | os.PathLike, *, generate_missing: bool = True, show_progress: bool = True
) -> pathlib.Path:
    """The grid file for a preset name (generated into the cache if needed) or a file path."""
    if is_grid_file(name_or_path):
        path = pathlib.Path(name_or_path).expanduser()
        if not path.is_file():
            raise IcoforgeError(f"grid file {path} not found")
        return path.resolve()
    preset = lookup_preset(str(name_or_path))
    if not generate_missing:
        return generate.preset_path(preset)
    return generate.ensure_grid_file(preset, show_progress=show_progress)


def is_grid_file(name_or_path: str | os.PathLike) -> bool:
    """Whether `name_or_path` names an ICON grid file rather than a preset."""
    if not isinstance(name_or_path, str):
        return True
    s = name_or_path
    if "/" in s or os.sep in s or s.lower().endswith(".nc"):
        return True
    # A bare word is a preset name unless it is not one and a file of that name exists.
    return canonical_name(s) not in PRESETS and pathlib.Path(s).is_file()


def load_grid(
    name_or_path: str | os.PathLike,
    levels: int,
    *,
    keep_skip_values: bool = True,
    show_progress: bool = True,
) -> Grid:
    """Load a preset (case-insensitive name) or an ICON grid file with `levels` vertical levels.

    keep_skip_values=False lets icon4py replace -1 entries by a valid neighbour (what some
    icon4py set-ups do for speed); the default keeps them, as icon4py's GridConfig does.
    """
    if isinstance(levels, bool) or not isinstance(levels, numbers.Integral) or levels <= 0:
        raise IcoforgeError(f"levels must be a positive integer, got {levels!r}")
    path = resolve_grid_path(name_or_path, show_progress=show_progress)
    is_preset = not is_grid_file(name_or_path)
    name = canonical_name(str(name_or_path)) if is_preset else path.stem

    def key_of(path: pathlib.Path) -> tuple:
        stat = path.stat()  # a file replaced on disk is a different grid
        return (str(path), stat.st_mtime_ns, stat.st_size, int(levels), bool(keep_skip_values))

    key = key_of(path)
    with _loaded_lock:
        if key not in _loaded:
            if is_preset:
                path = _readable_preset(str(name_or_path), path, show_progress)
                key = key_of(path)
            manager = _run_grid_manager(path, int(levels), keep_skip_values)
            _loaded[key] = Grid(name, path, manager)
        return _loaded[key]


def _readable_preset(name: str, path: pathlib.Path, show_progress: bool) -> pathlib.Path:
    """A cached preset that no longer reads (truncated or overwritten behind our back: our own
    writes are atomic) is made again rather than refused on every later run."""
    try:
        validate.check_grid_file(path)
    except IcoforgeError:
        path.unlink(missing_ok=True)
        path = resolve_grid_path(name, show_progress=show_progress)
        validate.check_grid_file(path)
    return path


def forget_loaded_grids() -> None:
    """Drop the per-process cache (tests; or to free memory)."""
    with _loaded_lock:
        _loaded.clear()


def _run_grid_manager(path: pathlib.Path, levels: int, keep_skip_values: bool) -> Any:
    validate.check_grid_file(path)

    import gt4py.next as gtx
    from gt4py.next import custom_layout_allocators as allocators
    from icon4py.model.common.grid import grid_manager as gm
    from icon4py.model.common.grid import gridfile
    from icon4py.model.common.grid import vertical as v_grid

    manager = gm.GridManager(
        grid_file=path,
        config=v_grid.VerticalGridConfig(num_levels=levels),
        offset_transformation=gridfile.ToZeroBasedIndexTransformation(),
    )
    try:
        manager(
            allocator=allocators.device_allocators[gtx.DeviceType.CPU],  # numpy arrays
            keep_skip_values=keep_skip_values,
        )
    except (OSError, RuntimeError, KeyError, ValueError, IndexError, TypeError) as e:
        _close_quietly(manager)
        first_line = (str(e).strip().splitlines() or [""])[0]
        raise IcoforgeError(
            f"{path}: icon4py's GridManager could not read it "
            f"({type(e).__name__}: {first_line}); truncated or not an ICON grid file?"
        ) from e
    validate.check_connectivities(manager.grid, path)
    return manager


def _close_quietly(manager: Any) -> None:
    try:
        manager.close()
    except Exception:  # already closed or never opened: nothing to release
        pass
