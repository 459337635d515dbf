"""The summary of a model run: setup phases, time to the first step, per-step times with the
steps that compile workers may have spoiled kept apart."""

from __future__ import annotations

import statistics
from typing import Any

from icoforge.model.run import BUSY_WORKER_FRACTION, Session


def summary_rows(session: Session) -> list[tuple[str, str]]:
    """(what, value) rows of the run's timings."""
    rows = [(name, f"{s:.1f} s") for name, s in session.setup_s.items()]
    steps = session.steps
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
