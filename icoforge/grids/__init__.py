"""ICON grids for icoforge: named presets generated once into the cache, any ICON NetCDF file,
loaded with icon4py's GridManager.

    from icoforge.grids import load_grid
    g = load_grid("R2B4", levels=80)
    g.connectivities["C2E"], g.start_index(domain), g.info()
"""

from icoforge.grids.info import ConnectivityInfo, GridInfo, ZoneRange
from icoforge.grids.load import Grid, forget_loaded_grids, load_grid, resolve_grid_path
from icoforge.grids.presets import PRESETS, Preset

__all__ = [
    "PRESETS",
    "ConnectivityInfo",
    "Grid",
    "GridInfo",
    "Preset",
    "ZoneRange",
    "forget_loaded_grids",
    "load_grid",
    "resolve_grid_path",
]
