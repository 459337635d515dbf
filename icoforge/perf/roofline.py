"""Roofline plot (PNG, matplotlib Agg) and a Markdown table beside it.

Kernel names never break the plot: labels drop the prefix all kernels share (it goes into the
title), are cut to a few characters with the distinguishing tail kept, and numbered; the table
has the full names. File names are sanitised and short whatever the program is called.
Kernels with no flops (copies) have no place on a flop/s axis: they are drawn hollow at the left
edge, at the same fraction of the bandwidth roof as their achieved bandwidth.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import pathlib
import re

FILENAME_MAX = 48


class Rates:
    """Arithmetic intensity and achieved rates of anything with `bytes`, `flops` and `seconds`
    (None: not timed): a roofline `Point`, a dycore step's `step_points.Row`."""

    @property
    def ai(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def flops_per_s(self) -> float | None:
        return self.flops / self.seconds if self.seconds else None

    @property
    def bytes_per_s(self) -> float | None:
        return self.bytes / self.seconds if self.seconds else None


@dataclasses.dataclass(frozen=True)
class Point(Rates):
    name: str
    bytes: int  # compulsory bytes (model)
    flops: int
    seconds: float | None  # None: not timed (listed in the table only)
    kind: str = "kernel"  # "kernel" | "program" (sum of its kernels) | "call" (wall clock: table only)


@dataclasses.dataclass(frozen=True)
class Figure:
    """What was drawn, for tests and callers: axis scales, point coordinates and labels."""

    png: pathlib.Path
    markdown: pathlib.Path | None
    xscale: str
    yscale: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    labels: tuple[str, ...]
    xlim: tuple[float, float]
    ylim: tuple[float, float]


def safe_stem(name: str, max_len: int = FILENAME_MAX) -> str:
    """A short file-name stem made of [A-Za-z0-9._-]; long names keep a hash of the full one."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-") or "roofline"
    if len(stem) > max_len:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        stem = stem[: max_len - 9].rstrip("._-") + "_" + digest
    return stem


def safe_path(path: str | os.PathLike, suffix: str = ".png") -> pathlib.Path:
    p = pathlib.Path(path)
    stem = p.name[: -len(p.suffix)] if p.suffix.lower() in (".png", ".md", ".svg", ".pdf") else p.name
    return p.parent / (safe_stem(stem) + suffix)


def common_prefix(names: list[str]) -> str:
    """Prefix shared by all names, cut at an underscore (`vert_impl_solv_pred_step_`)."""
    if len(names) < 2:
        return ""
    prefix = os.path.commonprefix(names)
    cut = prefix.rfind("_")
    return prefix[: cut + 1] if cut > 0 else ""


def short_label(name: str, width: int = 16) -> str:
    """At most `width` characters; a long name keeps its head and its tail (`_k12`)."""
    if len(name) <= width:
        return name
    tail = name[-(width // 2) :]
    return name[: width - len(tail) - 1] + "…" + tail


def labels_for(points: list[Point], width: int = 16) -> tuple[str, list[str]]:
    """(prefix shared by the kernels, numbered short labels); a program point is "all kernels"."""
    prefix = common_prefix([p.name for p in points if p.kind == "kernel"])
    labels = []
    for i, p in enumerate(points):
        text = "all kernels" if p.kind == "program" else short_label(p.name[len(prefix) :] or p.name, width)
        labels.append(f"{i + 1} {text}")
    return prefix, labels


def draw_roofs(ax, bandwidth: float, peak_flops: float, x_lo: float, x_hi: float, bandwidth_label: str,
               peak_label: str):  # fmt: skip
    """Log axes, the bandwidth and FP64 roofs with their labels; returns the bandwidth label (its
    rotation is set once the axes limits are final)."""
    ridge = peak_flops / bandwidth
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([x_lo, ridge], [bandwidth * x_lo, peak_flops], color="tab:blue", lw=2)
    ax.plot([ridge, x_hi], [peak_flops, peak_flops], color="tab:red", lw=2)
    bw_text = ax.text(x_lo * 2, bandwidth * x_lo * 2 / 3, f"{bandwidth_label}: {bandwidth / 1e9:.1f} GB/s",
                      color="tab:blue", fontsize=8, rotation_mode="anchor", va="top")  # fmt: skip
    ax.text(x_hi / 1.2, peak_flops * 1.25, f"{peak_label}: {peak_flops / 1e9:.0f} GFLOP/s", color="tab:red",
            fontsize=8, ha="right")  # fmt: skip
    return bw_text


def plot_roofline(
    points: list[Point], bandwidth: float, peak_flops: float, out: str | os.PathLike, title: str = "",
    bandwidth_label: str = "measured copy bandwidth", peak_label: str = "FP64 peak",
) -> Figure:  # fmt: skip
    """Draw the roofline of `points` (timed ones) under `bandwidth` (B/s) and `peak_flops` (flop/s)."""
    import matplotlib

    matplotlib.use("Agg", force=False)  # no display needed; a no-op when already Agg
    import matplotlib.pyplot as plt

    png = safe_path(out, ".png")
    png.parent.mkdir(parents=True, exist_ok=True)
    timed = [p for p in points if p.seconds and p.kind != "call"]
    prefix, labels = labels_for(timed)
    ridge = peak_flops / bandwidth
    ais = [p.ai for p in timed if p.ai > 0]
    x_lo = min([ridge / 1e4, *(a / 4 for a in ais)])
    x_hi = max([ridge * 8, *(a * 4 for a in ais)])
    xs, ys = [], []
    for p in timed:
        if p.ai > 0:
            xs.append(p.ai)
            ys.append(p.flops_per_s)
        else:  # no flops: same fraction of the roof as of the bandwidth, at the left edge
            xs.append(x_lo)
            ys.append(p.bytes_per_s * x_lo)
    y_lo = min([bandwidth * x_lo / 10, *(y / 4 for y in ys if y > 0)])
    y_hi = peak_flops * 4

    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    bw_text = draw_roofs(ax, bandwidth, peak_flops, x_lo, x_hi, bandwidth_label, peak_label)
    for i, (p, x, y, lab) in enumerate(zip(timed, xs, ys, labels)):
        hollow = p.ai <= 0
        style = dict(marker="s" if p.kind == "program" else "o", ms=7 if p.kind == "program" else 5)
        color = "black" if p.kind == "program" else f"C{i % 10}"
        ax.plot([x], [y], ls="", mfc="none" if hollow else color, color=color, **style)
        # alternate label offsets so that neighbours overlap less; left-edge points label rightwards
        dx, dy = [(6, 4), (6, -10), (-6, 6), (-6, -10)][i % 4]
        if hollow:
            dx = 6
        ax.annotate(lab, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7,
                    ha="left" if dx > 0 else "right")  # fmt: skip
    ax.set_xlim(x_lo / 1.5, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (flop / compulsory byte)")
    ax.set_ylabel("performance (flop/s)")
    ax.grid(True, which="both", alpha=0.25)
    heading = short_label(title, 70) if title else "roofline"
    if prefix:
        heading += f"\nkernels {short_label(prefix, 40)}*"
    ax.set_title(heading, fontsize=10)
    if any(p.ai <= 0 for p in timed):
        ax.text(0.01, 0.01, "hollow: no flops, drawn at the bandwidth fraction reached", transform=ax.transAxes, fontsize=7)
    fig.tight_layout()
    # the bandwidth label follows the roof's slope on screen (known once the layout is fixed)
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x_lo, bandwidth * x_lo), (ridge, peak_flops)])
    bw_text.set_rotation(math.degrees(math.atan2(ay1 - ay0, ax1 - ax0)))
    fig.savefig(png, bbox_inches="tight")
    result = Figure(png, None, ax.get_xscale(), ax.get_yscale(), tuple(xs), tuple(ys), tuple(labels),
                    tuple(ax.get_xlim()), tuple(ax.get_ylim()))  # fmt: skip
    plt.close(fig)
    return result


def _fmt(v: float | None, scale: float, digits: int = 3) -> str:
    return "–" if v is None else f"{v / scale:.{digits}g}"


def markdown_table(points: list[Point], bandwidth: float) -> str:
    _, labels = labels_for([p for p in points if p.seconds and p.kind != "call"])
    num = iter(labels)
    rows = [
        "| # | kernel | MB | MFLOP | flop/B | time ms | GB/s | % of copy BW |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        n = next(num).split(" ", 1)[0] if p.seconds and p.kind != "call" else ""
        frac = None if p.bytes_per_s is None else 100 * p.bytes_per_s / bandwidth
        name = {"program": f"**{p.name}** (all kernels)", "call": f"*{p.name}*"}.get(p.kind, f"`{p.name}`")
        rows.append(
            f"| {n} | {name} | {_fmt(p.bytes, 1e6)} | {_fmt(p.flops, 1e6)} | {p.ai:.3g} | "
            f"{_fmt(p.seconds, 1e-3)} | {_fmt(p.bytes_per_s, 1e9)} | {'–' if frac is None else f'{frac:.1f}'} |"
        )
    return "\n".join(rows)


def write_report(
    points: list[Point], bandwidth: float, peak_flops: float, png: pathlib.Path, title: str, notes: list[str] = (),
) -> pathlib.Path:  # fmt: skip
    """Markdown beside `png` (same stem): what was measured and the table."""
    md = png.with_suffix(".md")
    lines = [f"# {title}", "", f"![roofline]({png.name})", ""]
    lines += [f"- {n}" for n in notes]
    lines += [
        f"- bandwidth ceiling (measured, same run): {bandwidth / 1e9:.1f} GB/s; FP64 peak: {peak_flops / 1e9:.0f} GFLOP/s",
        "- bytes: compulsory traffic from the kernel IR (each element read once, written once, tables counted);"
        " time: median; GB/s = compulsory bytes / time",
        "",
        markdown_table(points, bandwidth),
        "",
    ]
    md.write_text("\n".join(lines))
    return md
