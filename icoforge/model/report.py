"""The summary of a model run: setup phases, time to the first step, per-step times with the
steps that compile workers may have spoiled kept apart; the time-to-solution table of one or
several runs' timing records (`timing.Record`, `icoforge model --json`), Markdown in 80 columns."""

from __future__ import annotations

import statistics
import textwrap
from typing import Any

from icoforge.model import timing
from icoforge.model.run import BUSY_WORKER_FRACTION, Session
from icoforge.owners import OWNER_LABELS, OWNER_ORDER


OWNER_SHOWN_S = 0.05  # an owner's share of a setup phase below this is left out of the summary


def summary_rows(session: Session) -> list[tuple[str, str]]:
    """(what, value) rows of the run's timings; under each setup phase, its wall time by whose
    Python ran."""
    rows = []
    for name, seconds in session.setup_s.items():
        rows.append((name, f"{seconds:.1f} s"))
        whose = session.setup_owners.get(name, {})
        rows += [(f"  in {OWNER_LABELS[o]}", f"{whose[o]:.1f} s") for o in OWNER_ORDER if whose.get(o, 0.0) >= OWNER_SHOWN_S]
    steps = [s for s in session.steps if s.components is None]  # component-timed steps synchronise: apart
    if not steps:
        return rows
    setup = sum(session.setup_s.values())
    rows.append(("time to first step (setup + step 1)", f"{setup + steps[0].seconds:.1f} s"))
    rows.append(("step 1 (first call of every program)", f"{steps[0].seconds:.3f} s"))
    later = steps[1:]
    quiet = [s.seconds for s in later if not s.worker_busy]
    busy = [s.seconds for s in later if s.worker_busy]
    if quiet:
        rows.append((f"steps 2..{len(steps)}, compile workers idle ({len(quiet)})",
                     f"median {statistics.median(quiet):.3f} s, min {min(quiet):.3f} s"))
    if busy:
        rows.append((f"steps while a compile worker was busy ({len(busy)}, not steady state)",
                     f"median {statistics.median(busy):.3f} s"))
    rows.append(("steps", f"{len(steps)}"))
    return rows


def timing_caveats(session: Session, *, load: float | None) -> list[str]:
    out = []
    busy = [s.index for s in session.steps if s.worker_busy]
    if busy:
        out.append(
            f"steps {', '.join(map(str, busy))}: GT4Py compile workers used more than {BUSY_WORKER_FRACTION:.0%} "
            "of the step's wall time in CPU: those times are not the model's own"
        )
    if load is not None:
        out.append(f"load average at the end {load:.1f} (other processes share the CPU: times are inflated when it exceeds the cores)")
    return out


def step_line(step: Any, total: int, extra: str = "") -> str:
    flag = "  (a compile worker was busy)" if step.worker_busy else ""
    return f"step {step.index}/{total}: {step.seconds:.3f} s{extra}{flag}"


WIDTH = 80  # the Markdown tables' lines fit this many columns


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _first_step(r: dict[str, Any]) -> tuple[str, str]:
    """(from process start, from driver setup) in s; a run cut before step 1 ended gives a lower
    bound (">N", its elapsed time)."""
    first = r.get("time_to_first_step")
    if first:
        process = first.get("from_process_start_s")
        return ("-" if process is None else f"{process:.1f}", f"{first['from_driver_setup_s']:.1f}")
    return (f">{r['elapsed_s']:.0f}" if not r.get("finished") else "-", "-")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table, columns as wide as their widest cell, the first left-aligned, the others
    right-aligned."""
    widths = [max(3, *(len(str(x)) for x in col)) for col in zip(header, *rows, strict=True)]
    def fmt(cells: list[str]) -> str:
        return _row([c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))])
    rule = _row(["-" * widths[0]] + ["-" * (w - 1) + ":" for w in widths[1:]])
    return [fmt(header), rule, *map(fmt, rows)]


def markdown(records: list[dict[str, Any]]) -> str:
    """Time to solution of one or several runs (timing records as JSON dicts), side by side: the
    time to the first step and the step times, then the components per step, then the ratios of
    the first run against the others; every line fits WIDTH columns."""
    if not records:
        return "no timing records"
    first = records[0]
    lines = [f"Time to solution: {first.get('source', '?')}, {first.get('grid')}/{first.get('levels')}, "
             f"{', '.join(first.get('components_on', []))}",
             f"device: {first.get('device', '?')}; -O: {first.get('python_optimized')}", ""]  # fmt: skip
    header = ["backend", "1st step s", "setup+1 s", "step ms", "min ms", "n", "stalls"]
    rows = []
    for r in records:
        stats = r.get("step_stats") or {}
        process, setup = _first_step(r)
        rows.append([_name(r), process, setup, _ms(stats.get("median_s")), _ms(stats.get("min_s")), str(stats.get("n", 0)),
                     str(len(stats.get("stalls", [])) + len(stats.get("worker_busy_steps", [])))])  # fmt: skip
    lines += _table(header, rows)
    lines += ["", "1st step: process start to the end of step 1; setup+1: icon4py's setup phases",
              "and step 1; step: median after the warm-up, compile workers idle; stalls: steps",
              f"above {timing.STALL_FACTOR:g}x the median or while a compile worker was busy (left out)."]  # fmt: skip
    with_components = [r for r in records if r.get("components")]
    if with_components:
        names = [c for c in timing.COMPONENTS if any(c in r["components"] for r in with_components)]
        names += [timing.REST, "step"]
        rows = [[n if n != "step" else "step (synced)"] + [_ms((r["components"].get(n) or {}).get("median_s"))
                for r in with_components] for n in names]  # fmt: skip
        lines += ["", "Per step, ms: median of the component-timed steps (device synchronised around",
                  "each component):", ""]
        lines += _table(["component"] + [_name(r) for r in with_components], rows)
    lines += _setup_owners(records)
    lines += _warm_notes(records)
    lines += _ratios(records)
    return "\n".join(lines)


def _setup_owners(records: list[dict[str, Any]]) -> list[str]:
    """The setup phases together (grid manager, initialize_driver, initial condition) by whose
    Python ran, s; records before 2026-12-08 have no split."""
    split = [r for r in records if r.get("setup_owners_s")]
    if not split:
        return []

    def total(r: dict[str, Any], owner: str) -> float:
        return sum(phase.get(owner, 0.0) for phase in r["setup_owners_s"].values())

    owners = [o for o in OWNER_ORDER if any(total(r, o) for r in split)]
    rows = [[OWNER_LABELS[o]] + [f"{total(r, o):.1f}" for r in split] for o in owners]
    rows.append(["setup (all phases)"] + [f"{sum(r['setup_s'].values()):.1f}" for r in split])
    return ["", "Setup before step 1 (grid manager, initialize_driver, initial condition) by", "whose code ran, s (sampled):", "",
            *_table(["setup, whose", *(_name(r) for r in split)], rows)]  # fmt: skip


def _warm_notes(records: list[dict[str, Any]]) -> list[str]:
    """A line for each run whose compile caches held entries when it began: its time to the first
    step is not a cold one."""
    out = []
    for r in records:
        held = {k: n for k, n in (r.get("cache_entries_at_start") or {}).items() if n}
        if held:
            text = f"{r['backend']}: warm caches at the start (" + ", ".join(f"{k} {n}" for k, n in held.items()) + ")"
            out += textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    return [""] + out if out else []


def _name(r: dict[str, Any]) -> str:
    return r["backend"] + ("" if r.get("finished", True) else " (cut)")


def _ratios(records: list[dict[str, Any]]) -> list[str]:
    """'X vs Y: 1.31x faster per step, 6.2x to the first step' (Y's time over X's) for the first
    record X against each other one; '>' where Y was cut before its first step ended (its elapsed
    time, last written, is a lower bound)."""
    if len(records) < 2:
        return []
    ours = records[0]
    ours_step = (ours.get("step_stats") or {}).get("median_s")
    ours_first = (ours.get("time_to_first_step") or {}).get("from_process_start_s")
    out = [""]
    for other in records[1:]:
        parts = []
        step = (other.get("step_stats") or {}).get("median_s")
        if ours_step and step:
            parts.append(f"{step / ours_step:.2f}x faster per step")
        first = (other.get("time_to_first_step") or {}).get("from_process_start_s")
        if ours_first and first:
            parts.append(f"{first / ours_first:.1f}x to the first step")
        elif ours_first and not other.get("finished"):
            parts.append(f">{other['elapsed_s'] / ours_first:.1f}x to the first step ({other['backend']} cut)")
        out.append(f"{ours['backend']} vs {other['backend']}: {', '.join(parts) or 'no common figures'}")
    return out
