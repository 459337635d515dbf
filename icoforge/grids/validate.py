"""Checks that turn a bad grid file into one clear IcoforgeError line instead of a netCDF or
icon4py traceback: before GridManager reads the file (format, dimensions, variables,
attributes) and after (every neighbour index in range, since generated C++/GPU code indexes
with them unchecked).
"""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.grids import netcdf3

# What icon4py 0.4.1's GridManager reads from an ICON grid file (icon4py.model.common.grid.gridfile);
# tests/grids check these names against icon4py's enums. Connectivity: variable -> (offset, source dim).
CONNECTIVITY_VARIABLES = {
    "neighbor_cell_index": ("C2E2C", "cell"),
    "edge_of_cell": ("C2E", "cell"),
    "vertex_of_cell": ("C2V", "cell"),
    "adjacent_cell_of_edge": ("E2C", "edge"),
    "edge_vertices": ("E2V", "edge"),
    "edges_of_vertex": ("V2E", "vertex"),
    "cells_of_vertex": ("V2C", "vertex"),
    "vertices_of_vertex": ("V2E2V", "vertex"),
}
OTHER_VARIABLES = (
    "refin_c_ctrl", "refin_e_ctrl", "refin_v_ctrl",
    "clon", "clat", "elon", "elat", "vlon", "vlat",
    "cell_area", "dual_area", "edge_length", "dual_edge_length",
    "edge_cell_distance", "edge_vert_distance",
    "edge_system_orientation", "orientation_of_normal", "edge_orientation",
)  # fmt: skip
DIMENSIONS = ("cell", "edge", "vertex")
ATTRIBUTES = ("uuidOfHGrid", "grid_root", "grid_level")


def check_grid_file(path: pathlib.Path) -> None:
    """Raise IcoforgeError unless `path` is a NetCDF file with what GridManager needs."""
    if not path.is_file():
        raise IcoforgeError(f"grid file {path} not found")
    import netCDF4

    try:
        ds = netCDF4.Dataset(path, "r")
    except OSError as e:
        raise IcoforgeError(f"{path}: {_explain_open_error(e)}") from None
    with ds:
        problems = _structure_problems(ds)
    if not problems and (end := netcdf3.classic_data_end(path)) and path.stat().st_size < end:
        problems = f"truncated classic NetCDF file ({path.stat().st_size:,} of {end:,} bytes)"
    if problems:
        raise IcoforgeError(f"{path}: {problems}")


def _explain_open_error(e: OSError) -> str:
    msg = str(e)
    if "Unknown file format" in msg:
        return "not a NetCDF file (unknown file format), so not an ICON grid file"
    if "HDF error" in msg:
        return "unreadable NetCDF-4/HDF5 file (truncated or corrupt?)"
    return f"cannot be opened as NetCDF ({msg})"


def _structure_problems(ds: Any) -> str:
    dims, variables, attrs = set(ds.dimensions), set(ds.variables), set(ds.ncattrs())
    if not dims & set(DIMENSIONS) and not variables & set(CONNECTIVITY_VARIABLES):
        return (
            "NetCDF file but not an ICON grid file (no cell/edge/vertex dimensions, "
            "no ICON connectivity variables)"
        )
    problems = []
    if missing := [d for d in DIMENSIONS if d not in dims]:
        problems.append(f"lacks dimension(s) {_names(missing)}")
    if missing := [v for v in CONNECTIVITY_VARIABLES if v not in variables]:
        listed = ", ".join(f"'{v}' ({CONNECTIVITY_VARIABLES[v][0]})" for v in missing)
        problems.append(f"lacks connectivity variable(s) {listed}")
    if missing := [v for v in OTHER_VARIABLES if v not in variables]:
        problems.append(f"lacks variable(s) {_names(missing)}")
    if missing := [a for a in ATTRIBUTES if a not in attrs]:
        problems.append(f"lacks global attribute(s) {_names(missing)}")
    for name, (offset, source) in CONNECTIVITY_VARIABLES.items():
        var_dims = ds.variables[name].dimensions if name in variables else None
        if var_dims is not None and (len(var_dims) != 2 or var_dims[1] != source):
            problems.append(
                f"connectivity '{name}' ({offset}) has dimensions {var_dims}, expected (n, {source!r})"
            )
    return ("not a usable ICON grid file: " + "; ".join(problems)) if problems else ""


def _names(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def check_connectivities(icon_grid: Any, path: pathlib.Path) -> None:
    """Every neighbour index must lie in [0, size of the target dimension) or be the skip value."""
    for name, conn in icon_grid.connectivities.items():
        table = np.asarray(conn.ndarray)
        size = icon_grid.size[conn.codomain]
        ok = (table >= 0) & (table < size)
        if conn.skip_value is not None:
            ok |= table == conn.skip_value
        if not ok.all():
            row = int(np.argwhere(~ok)[0][0])
            raise IcoforgeError(
                f"{path}: connectivity {name} has {int((~ok).sum())} entries outside "
                f"[0, {size}) that are not the skip value {conn.skip_value} "
                f"(first in row {row}: {table[row].tolist()})"
            )
