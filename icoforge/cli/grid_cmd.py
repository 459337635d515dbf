"""`icoforge grid list | make NAME... | info NAME|PATH [--levels N] [--json]`."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from icoforge.console import Col, fit_table, make_console


def register(subparsers: argparse._SubParsersAction) -> None:
    grid = subparsers.add_parser(
        "grid", help="ICON grids: list presets, generate them, inspect one"
    )
    sub = grid.add_subparsers(dest="grid_command", required=True, metavar="{list,make,info}")

    p = sub.add_parser("list", help="preset grids, their sizes and whether they are cached")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("make", help="generate preset grids into the cache (no-op if cached)")
    p.add_argument("names", nargs="+", metavar="NAME", help="preset name(s), e.g. R2B6 REGIONAL")
    p.set_defaults(func=cmd_make)

    p = sub.add_parser("info", help="sizes, neighbour tables and zone index ranges of a grid")
    p.add_argument("grid", metavar="NAME|PATH", help="preset name or ICON NetCDF grid file")
    p.add_argument("--levels", type=int, default=80, help="vertical levels (default 80; a grid file has none, so info shows them for presets only)")
    p.add_argument("--json", action="store_true", help="print GridInfo as JSON instead of tables")
    p.set_defaults(func=cmd_info)


def cmd_list(args: argparse.Namespace) -> int:
    from icoforge.cache import cache_dir
    from icoforge.grids import PRESETS
    from icoforge.grids.generate import is_cached, preset_path

    priority = {"generation": 3, "kind": 2, "vertices": 1}  # dropped first on a narrow terminal: highest
    columns = [
        Col(c, priority=priority.get(c, 0), justify="right" if c in ("cells", "edges", "vertices") else "left")
        for c in ("name", "kind", "cells", "edges", "vertices", "generation", "cached")
    ]
    rows = []
    for p in PRESETS.values():
        cached = f"yes, {preset_path(p).stat().st_size / 1e6:.1f} MB" if is_cached(p) else "no"
        kind = "regional" if p.limited_area else "global"
        rows.append([p.name, kind, f"{p.cells:,}", f"{p.edges:,}", f"{p.vertices:,}", f"~{p.approx_seconds:g} s", cached])
    console = make_console(wide=args.wide)
    console.print(fit_table(console, "icoforge grid presets", columns, rows, caption=f"cache: {cache_dir('grids')}"))
    return 0


def cmd_make(args: argparse.Namespace) -> int:
    from icoforge.grids.generate import ensure_grid_file, is_cached
    from icoforge.grids.presets import lookup_preset

    presets = [lookup_preset(n) for n in args.names]  # fail on a typo before generating anything
    console = make_console(wide=args.wide)
    for preset in presets:
        if is_cached(preset):
            console.print(f"{preset.name}: cached at {ensure_grid_file(preset)}", soft_wrap=True)
        else:
            ensure_grid_file(preset)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from icoforge.grids import load_grid
    from icoforge.grids.load import is_grid_file

    info = load_grid(args.grid, levels=args.levels).info()
    if args.json:
        print(json.dumps(info.as_dict(), indent=2))
        return 0
    console = make_console(wide=args.wide)

    sizes = Table(title=f"grid {info.name}", show_header=False)
    sizes.add_column(style="bold")
    sizes.add_column()
    sizes.add_row("path", info.path)
    sizes.add_row("kind", "limited area" if info.limited_area else "global")
    sizes_shown = [("cells", info.num_cells), ("edges", info.num_edges), ("vertices", info.num_vertices)]
    if not is_grid_file(args.grid):  # a grid file has no levels; --levels only loads it
        sizes_shown.append(("levels", info.num_levels))
    for label, n in sizes_shown:
        sizes.add_row(label, f"{n:,}")
    console.print(sizes)

    conns = Table(title="connectivities (neighbour tables)")
    for col in ("offset", "source", "target", "neighbours", "skip value", "skipped entries"):
        conns.add_column(
            col, justify="right" if col in ("neighbours", "skipped entries") else "left"
        )
    for c in info.connectivities:
        skip = "-" if c.skip_value is None else str(c.skip_value)
        conns.add_row(c.name, c.source, c.target, str(c.max_neighbors), skip, f"{c.num_skipped:,}")
    console.print(conns)

    console.print(_zone_table(info))
    return 0


def _zone_table(info) -> Table:
    """One row per zone, one column per dimension: [start, end) and its length."""
    dims = ("Cell", "Edge", "Vertex")
    ranges = {(z.zone, z.dim): (z.start, z.end) for z in info.zones}
    # Edges have every zone, in icon4py's order; cells and vertices a subset.
    zone_names = list(dict.fromkeys(z.zone for z in (*info.zones_of("Edge"), *info.zones)))
    table = Table(title="horizontal zones: index range [start, end)")
    table.add_column("zone", no_wrap=True)
    for d in dims:
        table.add_column(d, justify="right")
    for zone in zone_names:
        cells = []
        for d in dims:
            r = ranges.get((zone, d))
            cells.append("" if r is None else f"{r[0]:,}:{r[1]:,} ({r[1] - r[0]:,})")
        table.add_row(zone, *cells)
    return table
