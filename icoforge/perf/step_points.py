"""Roofline points of a whole dycore step: kernel runs of many program calls summed per kernel.

Plain data in, plain data out (no GT4Py, no device): `measure_greenline` (greenline.py) records
one `Launch` per kernel run (or per program call, for program-level timing) with the compulsory
bytes and flops of that call's own arguments; `aggregate` sums them per (program, kernel) and
divides by the number of instrumented steps, so a row is "per dycore step" and its bandwidth is
bytes / time. `markdown_table` and `plot_step_roofline` draw the rows; with many points only the
`top` rows by time are labelled on the plot (numbered as in the table), all are in the table.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence

from icoforge.perf import roofline


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel run inside one program call (level "kernel"), or one program call ("program")."""

    program: str  # display name of the bound program (`name (attr)` when bound twice)
    kernel: str  # short kernel name; the program's name for a program-level record
    bytes: int
    flops: int
    seconds: float | None  # None: not timed


@dataclasses.dataclass(frozen=True)
class Row(roofline.Rates):
    """A kernel (or a program, level "program") summed over `steps` instrumented dycore steps;
    `ai` and `bytes_per_s` are the same per step as over all steps."""

    kernel: str
    program: str
    level: str  # "kernel" | "program"
    calls: int  # runs over all steps
    steps: int
    bytes: int  # over all steps
    flops: int
    seconds: float | None  # over all steps; None when any run was not timed

    @property
    def calls_per_step(self) -> float:
        return self.calls / self.steps

    @property
    def bytes_per_step(self) -> float:
        return self.bytes / self.steps

    @property
    def flops_per_step(self) -> float:
        return self.flops / self.steps

    @property
    def seconds_per_step(self) -> float | None:
        return None if self.seconds is None else self.seconds / self.steps

    def point(self, name: str | None = None) -> roofline.Point:
        return roofline.Point(name or self.kernel, self.bytes_per_step, self.flops_per_step, self.seconds_per_step)


def aggregate(launches: Iterable[Launch], steps: int, level: str = "kernel") -> list[Row]:
    """Sum `launches` per (program, kernel); rows sorted by time (longest first, untimed last),
    then by bytes."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    acc: dict[tuple[str, str], list] = {}
    for x in launches:
        a = acc.setdefault((x.program, x.kernel), [0, 0, 0, 0.0, True])
        a[0] += 1
        a[1] += int(x.bytes)
        a[2] += int(x.flops)
        if x.seconds is None:
            a[4] = False
        else:
            a[3] += x.seconds
    rows = [
        Row(kernel, program, level, n, steps, b, f, s if timed else None)
        for (program, kernel), (n, b, f, s, timed) in acc.items()
    ]
    rows.sort(key=lambda r: (r.seconds is None, -(r.seconds or 0.0), -r.bytes, r.program, r.kernel))
    return rows


def totals(rows: Sequence[Row]) -> Row:
    """All rows as one (time None unless every row is timed)."""
    steps = rows[0].steps if rows else 1
    timed = all(r.seconds is not None for r in rows)
    return Row(
        "all kernels" if not rows or rows[0].level == "kernel" else "all programs", "", "total",
        sum(r.calls for r in rows), steps, sum(r.bytes for r in rows), sum(r.flops for r in rows),
        sum(r.seconds for r in rows) if timed else None,  # type: ignore[misc]
    )  # fmt: skip


def labelled(rows: Sequence[Row], top: int) -> list[int]:
    """Indices of the rows the plot labels: the `top` longest timed ones (rows are sorted)."""
    return [i for i, r in enumerate(rows) if r.seconds and r.bytes][:top]


def plot_label(row: Row, number: int, width: int = 22) -> str:
    return f"{number} {roofline.short_label(row.kernel, width)}"


# --- Markdown -------------------------------------------------------------------------------------


def _f(v: float | None, scale: float, digits: int = 4) -> str:
    return "–" if v is None else f"{v / scale:.{digits}g}"


def markdown_table(rows: Sequence[Row], bandwidth: float, top: int = 15) -> str:
    """Rows per dycore step, sorted as given; `#` numbers the points labelled on the plot."""
    numbers = {i: n + 1 for n, i in enumerate(labelled(rows, top))}
    out = [
        "| # | kernel | program | calls/step | MB | MFLOP | flop/B | ms/step | GB/s | % of copy |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate([*rows, totals(rows)] if rows else []):
        bps = r.bytes_per_s
        frac = None if bps is None else 100 * bps / bandwidth
        if r.level == "program":
            name, program = "*(program-level)*", r.program
        else:
            name, program = (f"**{r.kernel}**" if r.level == "total" else f"`{r.kernel}`"), r.program
        out.append(
            f"| {numbers.get(i, '')} | {name} | {program} | {r.calls_per_step:g} | {_f(r.bytes_per_step, 1e6)} | "
            f"{_f(r.flops_per_step, 1e6)} | {r.ai:.3g} | {_f(r.seconds_per_step, 1e-3)} | {_f(bps, 1e9)} | "
            f"{'–' if frac is None else f'{frac:.1f}'} |"
        )
    return "\n".join(out)


def parse_markdown_table(text: str) -> list[dict[str, str]]:
    """The rows of the first table in `text` as header -> cell (for tests and scripts)."""
    all_lines = text.splitlines()
    start = next((i for i, ln in enumerate(all_lines) if ln.startswith("|")), None)
    if start is None:
        return []
    lines = []
    for ln in all_lines[start:]:
        if not ln.startswith("|"):
            break
        lines.append(ln)
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]


# --- plot -----------------------------------------------------------------------------------------


def plot_step_roofline(
    rows: Sequence[Row], bandwidth: float, peak_flops: float, out: str | os.PathLike, title: str = "", top: int = 15,
) -> roofline.Figure:  # fmt: skip
    """Every timed row as a point (colour per program, legend); the `top` longest carry their table
    number beside the point and are named in a key beside the plot (dozens of long names do not fit
    between the points); no-flop kernels hollow at the left edge, as `roofline.plot_roofline`."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    png = roofline.safe_path(out, ".png")
    png.parent.mkdir(parents=True, exist_ok=True)
    drawn = [i for i, r in enumerate(rows) if r.seconds and r.bytes]
    numbers = {i: n + 1 for n, i in enumerate(labelled(rows, top))}
    ridge = peak_flops / bandwidth
    ais = [rows[i].ai for i in drawn if rows[i].ai > 0]
    x_lo = min([ridge / 1e2, *(a / 4 for a in ais)])
    x_hi = max([ridge * 8, *(a * 4 for a in ais)])
    xs, ys = [], []
    for i in drawn:
        p = rows[i].point()
        if p.ai > 0:
            xs.append(p.ai)
            ys.append(p.flops_per_s)
        else:
            xs.append(x_lo)
            ys.append(p.bytes_per_s * x_lo)
    y_lo = min([bandwidth * x_lo / 10, *(y / 4 for y in ys if y > 0)])
    y_hi = peak_flops * 4

    programs = list(dict.fromkeys(rows[i].program for i in drawn))
    cmap = plt.get_cmap("tab20")
    color = {p: cmap(n % 20) for n, p in enumerate(programs)}
    fig, ax = plt.subplots(figsize=(11, 6.5), dpi=120)
    bw_text = roofline.draw_roofs(ax, bandwidth, peak_flops, x_lo, x_hi, "measured copy bandwidth", "FP64 peak")
    labels = []
    seen: set[str] = set()
    for n, (i, x, y) in enumerate(zip(drawn, xs, ys)):
        r = rows[i]
        hollow = r.ai <= 0
        c = color[r.program]
        legend = roofline.short_label(r.program, 44) if r.program not in seen else None
        seen.add(r.program)
        ax.plot([x], [y], ls="", marker="o", ms=6 if i in numbers else 4, mfc="none" if hollow else c, color=c,
                label=legend)  # fmt: skip
        if i in numbers:
            labels.append(plot_label(r, numbers[i], 34))
            dx, dy = [(4, 3), (4, -9), (-4, 3), (-4, -9)][numbers[i] % 4]
            if hollow:
                dx = 4
            ax.annotate(str(numbers[i]), (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7,
                        fontweight="bold", ha="left" if dx > 0 else "right")  # fmt: skip
    ax.set_xlim(x_lo / 1.5, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (flop / compulsory byte)")
    ax.set_ylabel("performance (flop/s)")
    ax.grid(True, which="both", alpha=0.25)
    heading = roofline.short_label(title, 90) if title else "roofline"
    heading += f"\n{len(drawn)} points; the {len(numbers)} longest numbered as in the table"
    ax.set_title(heading, fontsize=10)
    if programs:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, title="program",
                  title_fontsize=7)  # fmt: skip
    if labels:
        ax.text(1.01, 0.0, "\n".join(labels), transform=ax.transAxes, fontsize=6.5, family="monospace",
                va="bottom", ha="left")  # fmt: skip
    if any(rows[i].ai <= 0 for i in drawn):
        ax.text(0.01, 0.01, "hollow: no flops, drawn at the bandwidth fraction reached", transform=ax.transAxes, fontsize=7)
    fig.tight_layout()
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x_lo, bandwidth * x_lo), (ridge, peak_flops)])
    bw_text.set_rotation(math.degrees(math.atan2(ay1 - ay0, ax1 - ax0)))
    fig.savefig(png, bbox_inches="tight")
    result = roofline.Figure(png, None, ax.get_xscale(), ax.get_yscale(), tuple(xs), tuple(ys), tuple(labels),
                             tuple(ax.get_xlim()), tuple(ax.get_ylim()))  # fmt: skip
    plt.close(fig)
    return result
