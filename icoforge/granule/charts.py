"""Pictures beside a greenline Markdown report: each program's ms per granule step, one bar per
backend (the first backend is the reference, the others its peers), and links to the roofline
PNGs of `icoforge roofline greenline` where they lie beside the report."""

from __future__ import annotations

import pathlib
from typing import Any

Data = dict[str, Any]  # a report in its JSON form

# Programs beyond this many (by the reference's ms per step) are summed into one "other" row:
# a chart of 40 programs is a wall of bars nobody reads.
MAX_PROGRAMS = 20


def program_rows(data: Data, limit: int = MAX_PROGRAMS) -> tuple[list[str], list[str], list[list[float]]]:
    """(programs, backends, ms[backend][program]) for the chart: the programs of the first
    backend's table by its ms per step, the rest summed into "other programs"; a program a
    backend did not run counts 0."""
    backends = [b for b in data["backends"] if b.get("programs")]
    if not backends:
        return [], [], []
    per_backend = [{p["name"]: p["ms_per_step"] for p in b["programs"]} for b in backends]
    order = sorted(
        dict.fromkeys(name for table in per_backend for name in table), key=lambda n: -per_backend[0].get(n, 0.0)
    )
    shown, rest = order[:limit], order[limit:]
    values = [[table.get(n, 0.0) for n in shown] for table in per_backend]
    if rest:
        shown.append(f"other programs ({len(rest)})")
        for row, table in zip(values, per_backend):
            row.append(sum(table.get(n, 0.0) for n in rest))
    return shown, [b["backend"] for b in backends], values


def granule_step(data: Data) -> str:
    """What one step of the report's granule is called ("dycore step", "muphys step", ...)."""
    return f"{data.get('granule', 'dycore')} step"


def write_program_chart(data: Data, png: pathlib.Path) -> pathlib.Path | None:
    """A horizontal grouped bar chart of `program_rows` as `png`; None without program tables."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, safe in any thread (Agg)

    programs, backends, values = program_rows(data)
    if not programs:
        return None
    height = 0.8 / len(backends)
    fig = Figure(figsize=(10, 1.2 + 0.32 * len(programs) * max(1, len(backends) / 2)))
    ax = fig.add_subplot()
    for i, (backend, row) in enumerate(zip(backends, values)):
        # the reference on top of each group: bars go downwards from the group's centre line
        ys = [p + (i - (len(backends) - 1) / 2) * height for p in range(len(programs))]
        ax.barh(ys, row, height=height, label=backend)
    ax.set_yticks(range(len(programs)), programs, fontsize=8)
    ax.invert_yaxis()  # the most expensive program first
    ax.set_xlabel(f"ms per {granule_step(data)}")
    opts, grid = data["options"], data["grid"]
    ax.set_title(f"greenline per program: {grid.get('name', opts['grid'])}, {opts['levels']} levels")
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(png, dpi=110, bbox_inches="tight")
    return png


def roofline_pngs(data: Data, folder: pathlib.Path) -> list[pathlib.Path]:
    """The `icoforge roofline greenline` PNGs of this report's grid, levels and backends found in
    `folder` (their default names, roofline_greenline_<grid>_<levels>_<backend>.png)."""
    opts, grid = data["options"], data["grid"]
    name = grid.get("name", opts["grid"])
    found = []
    for b in data["backends"]:
        png = folder / f"roofline_greenline_{name}_{opts['levels']}_{b['backend']}.png"
        if png.is_file():
            found.append(png)
    return found


def pictures_markdown(data: Data, markdown: pathlib.Path) -> str:
    """The "pictures" section of a Markdown report written to `markdown`: writes the program chart
    beside it and links that and any roofline PNGs; "" when there is nothing to show."""
    chart = write_program_chart(data, markdown.with_name(f"{markdown.stem}-programs.png"))
    links = []
    if chart is not None:
        links.append(f"![ms per {granule_step(data)} per program and backend]({chart.name})")
    links += [f"![roofline: {png.stem.removeprefix('roofline_greenline_')}]({png.name})" for png in roofline_pngs(data, markdown.parent)]
    if not links:
        return ""
    return "\n### pictures\n\n" + "\n\n".join(links) + "\n"


__all__ = ["MAX_PROGRAMS", "granule_step", "pictures_markdown", "program_rows", "roofline_pngs", "write_program_chart"]
