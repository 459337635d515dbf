"""Named grids that icoforge can generate on demand with icon-grid-generator.

A preset only describes a grid; nothing here generates, reads or imports icon4py, so
`icoforge grid list` stays fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import re
from collections.abc import Callable
from typing import Any

from icoforge.errors import UnknownNameError

# Fields written to generated files: the union that ICON's and icon4py's readers need (46 fields).
# icon-grid-generator's "full" profile (88 fields) is 2.3x bigger and nothing here reads the rest.
NETCDF_FIELDS = "reduced"

_RNBK = re.compile(r"R0*(\d+)B0*(\d+)", re.IGNORECASE)


def global_sizes(root: int, bisections: int) -> tuple[int, int, int]:
    """(cells, edges, vertices) of the global icosahedral grid R<root>B<bisections>."""
    f2 = root**2 * 4**bisections
    return 20 * f2, 30 * f2, 10 * f2 + 2


@dataclasses.dataclass(frozen=True)
class Preset:
    name: str
    description: str
    cells: int
    edges: int
    vertices: int
    limited_area: bool
    # Rough generation time on one core of the 2-core dev machine; only shown to the user.
    approx_seconds: float
    # Builds the icon-grid-generator spec; a callable so that this module does not import it.
    make_spec: Callable[[], Any] = dataclasses.field(repr=False, compare=False)

    def cache_key(self) -> str:
        """Hash of what the file depends on: the spec, the generator version and the field set."""
        version = importlib.metadata.version("icon-grid-generator")
        text = f"{self.make_spec()!r}|icon-grid-generator=={version}|fields={NETCDF_FIELDS}"
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def file_name(self) -> str:
        return f"{self.name}-{self.cache_key()}.nc"


def _global(root: int, bisections: int, approx_seconds: float, note: str = "") -> Preset:
    cells, edges, vertices = global_sizes(root, bisections)

    def make_spec() -> Any:
        from grid_generator import GlobalGridSpec

        return GlobalGridSpec(root=root, bisections=bisections)

    return Preset(
        name=f"R{root}B{bisections}",
        description=f"global icosahedral R{root}B{bisections}{note}",
        cells=cells,
        edges=edges,
        vertices=vertices,
        limited_area=False,
        approx_seconds=approx_seconds,
        make_spec=make_spec,
    )


def _regional_spec() -> Any:
    from grid_generator import LimitedAreaGridSpec, Region

    # A disc over Europe cut from R2B7 (~20 km): 44,640 cells, close to icon4py's regional
    # benchmark grid (44,528 cells). The radius was chosen for that size, not for meteorology.
    return LimitedAreaGridSpec(
        parent="R2B7", region=Region.circle(lon=10.0, lat=50.0, radius_degrees=21.2)
    )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        _global(2, 3, 0.5, " (tiny, for tests)"),
        _global(2, 4, 2),
        _global(2, 5, 7),
        _global(2, 6, 30, " (icon4py's global benchmark size)"),
        _global(2, 7, 150),
        Preset(
            name="REGIONAL",
            description="limited-area disc over Europe cut from R2B7 (~icon4py's regional benchmark)",
            # Measured with icon-grid-generator 0.9.0 (deterministic for a fixed version).
            cells=44_640,
            edges=67_232,
            vertices=22_593,
            limited_area=True,
            approx_seconds=50,
            make_spec=_regional_spec,
        ),
    )
}


def canonical_name(name: str) -> str:
    """Upper-case, and write R02B04-style names as R2B4."""
    name = name.strip().upper()
    if m := _RNBK.fullmatch(name):
        return f"R{int(m.group(1))}B{int(m.group(2))}"
    return name


def lookup_preset(name: str) -> Preset:
    """The preset called `name` (case-insensitive), else UnknownNameError with close names."""
    try:
        return PRESETS[canonical_name(name)]
    except KeyError:
        pass
    # Suggest in the user's spelling style so that difflib's case-sensitive match finds them.
    known = list(PRESETS) if name.upper() == name else [k.lower() for k in PRESETS]
    raise UnknownNameError("grid", name, known) from None
