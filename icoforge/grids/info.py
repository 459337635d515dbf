"""A plain-value summary of a loaded grid: sizes, neighbour tables and horizontal zones.

Plain ints and strings only, so it can be printed, compared, or put into cache keys
(skip values and neighbour counts are part of a compiled program's identity).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class ConnectivityInfo:
    name: str  # offset name, e.g. "C2E"
    source: str  # dimension the table is indexed by, e.g. "Cell"
    target: str  # dimension the entries point into, e.g. "Edge"
    max_neighbors: int
    skip_value: int | None  # declared by the table; None: every entry is a valid index
    num_skipped: int  # entries that actually hold the skip value

    @property
    def has_skip_values(self) -> bool:
        """GT4Py's notion: the table may contain skip values (code must guard lookups)."""
        return self.skip_value is not None


@dataclasses.dataclass(frozen=True)
class ZoneRange:
    dim: str  # "Cell", "Edge" or "Vertex"
    zone: str  # icon4py h_grid.Zone member name, e.g. "LATERAL_BOUNDARY_LEVEL_2"
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class GridInfo:
    name: str
    path: str
    num_cells: int
    num_edges: int
    num_vertices: int
    num_levels: int
    limited_area: bool
    connectivities: tuple[ConnectivityInfo, ...]
    zones: tuple[ZoneRange, ...]

    def connectivity(self, name: str) -> ConnectivityInfo:
        for c in self.connectivities:
            if c.name == name:
                return c
        raise KeyError(name)

    def zones_of(self, dim: str) -> tuple[ZoneRange, ...]:
        return tuple(z for z in self.zones if z.dim == dim)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def grid_info(name: str, path: pathlib.Path, icon_grid: Any) -> GridInfo:
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import horizontal as h_grid

    connectivities = []
    for offset, conn in icon_grid.connectivities.items():
        table = np.asarray(conn.ndarray)
        skip = None if conn.skip_value is None else int(conn.skip_value)
        connectivities.append(
            ConnectivityInfo(
                name=offset,
                source=conn.domain.dims[0].value,
                target=conn.codomain.value,
                max_neighbors=int(table.shape[1]),
                skip_value=skip,
                num_skipped=0 if skip is None else int((table == skip).sum()),
            )
        )
    zones = [
        ZoneRange(
            dim=dim.value,
            zone=domain.zone.name,
            start=int(icon_grid.start_index(domain)),
            end=int(icon_grid.end_index(domain)),
        )
        for dim in (dims.CellDim, dims.EdgeDim, dims.VertexDim)
        for domain in h_grid.get_domains_for_dim(dim)
    ]
    return GridInfo(
        name=name,
        path=str(path),
        num_cells=int(icon_grid.num_cells),
        num_edges=int(icon_grid.num_edges),
        num_vertices=int(icon_grid.num_vertices),
        num_levels=int(icon_grid.num_levels),
        limited_area=bool(icon_grid.limited_area),
        connectivities=tuple(connectivities),
        zones=tuple(zones),
    )
