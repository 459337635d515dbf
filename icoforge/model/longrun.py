"""The report of a long run with `--diagnostics`: a Markdown table and a PNG (dry-mass change per
step, minimum surface pressure over time) beside it, and what the JW case leads one to expect."""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
from typing import Any

from icoforge.model import experiments, report
from icoforge.model.diagnostics import Diagnostic
from icoforge.model.run import Session

EXPECTATIONS = """\
What the JW case leads one to expect (Jablonowski and Williamson 2006, QJRMS 132, on which
icon4py's analytic initial condition and topography are built):
- the initial state is a steady, balanced zonal flow with a surface pressure of 1000 hPa
  everywhere (the topography is what balances it); the perturbation of the zonal wind (1 m/s,
  centred at 20 deg E, 40 deg N) triggers a baroclinic wave in the northern mid-latitudes;
- for about the first four days the surface pressure stays close to 1000 hPa (small gravity-wave
  adjustment only); the wave becomes visible around day 4-6 and its lows deepen quickly from
  day 6-7 to day 9-10; coarse grids (R2B3 ~ 440 km, R2B4 ~ 220 km between cell centres) resolve
  the wave poorly: it deepens later and less than in the paper's converged solutions;
- the dry-air mass is conserved by ICON's flux-form continuity equation: the relative change per
  step should stay at round-off level (1e-16..1e-13), with no drift.
"""


def write(markdown: pathlib.Path, cfg: experiments.RunConfig, args: argparse.Namespace, session: Session,
          rows: list[Diagnostic]) -> None:
    png = markdown.with_suffix(".png")
    markdown.parent.mkdir(parents=True, exist_ok=True)
    _plot(rows, png, f"{cfg.source}, {args.grid}/{cfg.config.vertical_grid.num_levels} levels, {args.backend}")
    markdown.write_text(_markdown(cfg, args, session, rows, png.name))


def _plot(rows: list[Diagnostic], png: pathlib.Path, title: str) -> None:
    from matplotlib.figure import Figure

    hours = [r.hours for r in rows]
    m0 = rows[0].dry_mass_kg
    fig = Figure(figsize=(8, 6), layout="constrained")
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    ax1.plot([h / 24 for h in hours], [r.min_surface_pressure_pa / 100 for r in rows])
    ax1.set_ylabel("min surface pressure [hPa]")
    ax1.set_title(title, fontsize=9)
    ax2.plot([h / 24 for h in hours], [(r.dry_mass_kg - m0) / m0 for r in rows])
    ax2.set_ylabel("dry mass: (M - M0) / M0")
    ax2.set_xlabel("days")
    fig.savefig(png, dpi=110)


def _markdown(cfg: experiments.RunConfig, args: argparse.Namespace, session: Session, rows: list[Diagnostic],
              png_name: str) -> str:
    m0 = rows[0].dry_mass_kg
    per_step = [abs(b.dry_mass_kg - a.dry_mass_kg) / m0 for a, b in zip(rows, rows[1:])]
    lines = [
        f"# icon4py's driver, {cfg.source}, {args.grid}, {args.backend}",
        "",
        f"Run {datetime.date.today().isoformat()} on {platform.node()} ({os.cpu_count()} cores; load average at the end "
        f"{os.getloadavg()[0]:.1f}: other jobs shared the machine, so times are inflated), with",
        "",
        "    " + _command(args),
        "",
        "## Configuration",
        "",
        *[f"- {k}: {v}" for k, v in experiments.describe(cfg)],
        *[f"- changed/said: {n}" for n in cfg.notes],
        "",
        "## Results",
        "",
        f"![min surface pressure and dry mass]({png_name})",
        "",
        f"- steps: {len(rows) - 1}, {rows[-1].hours / 24:.2f} days",
        f"- dry mass: M0 = {m0:.9e} kg; largest relative change in one step {max(per_step, default=0):.2e}; "
        f"after the last step {(rows[-1].dry_mass_kg - m0) / m0:+.2e}",
        f"- minimum surface pressure: start {rows[0].min_surface_pressure_pa / 100:.2f} hPa, lowest "
        f"{min(r.min_surface_pressure_pa for r in rows) / 100:.2f} hPa, end {rows[-1].min_surface_pressure_pa / 100:.2f} hPa",
        "",
        "| day | min surface pressure [hPa] | (M - M0) / M0 |",
        "| ---: | ---: | ---: |",
        *_daily(rows),
        "",
        "## Timings",
        "",
        "| what | time |",
        "| --- | ---: |",
        *[f"| {k} | {v} |" for k, v in report.summary_rows(session)],
        *[f"\n- {c}" for c in report.timing_caveats(session, load=None)],
        "",
        "## What to expect",
        "",
        EXPECTATIONS,
    ]
    return "\n".join(lines)


def _daily(rows: list[Diagnostic]) -> list[str]:
    m0 = rows[0].dry_mass_kg
    out, next_day = [], 0.0
    for r in rows:
        if r.hours / 24 >= next_day - 1e-9 or r is rows[-1]:
            out.append(f"| {r.hours / 24:.2f} | {r.min_surface_pressure_pa / 100:.2f} | {(r.dry_mass_kg - m0) / m0:+.2e} |")
            next_day = r.hours // 24 + 1
    return out


def _command(args: argparse.Namespace) -> str:
    words = ["icoforge model", f"--grid {args.grid}", f"--backend {args.backend}"]
    for name in ("experiment", "levels", "steps", "dtime"):
        value = getattr(args, name)
        if value is not None:
            words.append(f"--{name} {value:g}" if isinstance(value, float) else f"--{name} {value}")
    if args.config_dir is not None:
        words.append(f"--config-dir {args.config_dir}")
    return " ".join(words + ["--diagnostics", f"--markdown {args.markdown}"])


def summarize(rows: list[Diagnostic]) -> dict[str, Any]:
    m0 = rows[0].dry_mass_kg
    return {"max_rel_mass_change": max(abs(r.dry_mass_kg - m0) / m0 for r in rows),
            "min_surface_pressure_pa": min(r.min_surface_pressure_pa for r in rows)}
