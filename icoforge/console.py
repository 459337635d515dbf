"""What every command prints through: a console that fits terminals and pipes, tables that drop
their least important columns when they do not fit, progress that a log file can read, and the
third-party warnings we know to be harmless filtered once.

    console = make_console()                 # terminal width; 80 columns when piped, or $COLUMNS
    console.print(fit_table(console, "programs", [Col("name"), Col("dims", priority=2)], rows))
    with StepProgress(console) as step:      # a live bar on a terminal, timed plain lines when piped
        step("compiling", 3, 25)             # the progress callback of icoforge's long steps
        step.log("gtfn_cpu: 12.3 s")         # a line above the bar

Nothing here imports icoforge's other modules: the compiler, the granule and the CLI may all use it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


class QuietConsole(Console):
    """A rich Console that exits with status 0 when its reader goes away (`icoforge list | head`):
    rich's default exits with 1, which reads as a failure in a shell pipeline."""

    wide = False  # set by make_console: fit_table then keeps every column

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail either
        raise SystemExit(0)


def make_console(*, stderr: bool = False, wide: bool = False) -> Console:
    """The terminal's width on a terminal; when piped, $COLUMNS or 80 columns (rich's default),
    except `wide`: 200 columns, for people who pipe into a file and want every column."""
    console = QuietConsole(stderr=stderr)
    if wide and not console.is_terminal and not os.environ.get("COLUMNS"):
        console = QuietConsole(stderr=stderr, width=200)
    console.wide = wide  # fit_table keeps every column
    return console


# --- tables -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Col:
    """A table column; `priority` 0 is always shown, higher numbers are dropped first when the
    table does not fit."""

    header: str
    priority: int = 0
    justify: str = "left"
    no_wrap: bool = False
    style: str | None = None


def fit_table(
    console: Console,
    title: str | None,
    columns: Sequence[Col],
    rows: Sequence[Sequence[Any]],
    *,
    wide: bool = False,
    **table_kwargs: Any,
) -> Table:
    """A Table of `rows` with the columns that fit `console` without wrapping: the highest
    priorities go first, and the caption says which were left out (all of them stay with `wide`
    or a console made wide). When the priority-0 columns alone do not fit, they wrap (overflow
    "fold", also those marked no_wrap) rather than being cut."""
    kept = list(range(len(columns)))

    def build(indices: list[int], dropped: list[str], wrap_all: bool = False) -> Table:
        caption = table_kwargs.get("caption")
        if dropped:
            note = f"not shown (narrow terminal; --wide for all): {', '.join(dropped)}"
            caption = f"{caption}\n{note}" if caption else note
        table = Table(title=title, **{**table_kwargs, "caption": caption})
        for i in indices:
            c = columns[i]
            no_wrap = c.no_wrap and not wrap_all
            table.add_column(c.header, justify=c.justify, no_wrap=no_wrap, overflow="fold", style=c.style)  # type: ignore[arg-type]
        for row in rows:
            table.add_row(*(row[i] if isinstance(row[i], str) or row[i] is None else str(row[i]) for i in indices))
        return table

    def measure(table: Table) -> Measurement:
        unbounded = console.options.update_width(1_000_000)  # a bounded measure is clamped to the width
        return Measurement.get(console, unbounded, table)

    dropped: list[str] = []
    table = build(kept, dropped)
    if wide or getattr(console, "wide", False):
        return table
    # drop until the rest fits unwrapped: a table squeezed to its narrowest folds numbers mid-digit
    while measure(table).maximum > console.width:
        droppable = [i for i in kept if columns[i].priority > 0]
        if not droppable:
            break
        victim = max(droppable, key=lambda i: (columns[i].priority, i))
        kept.remove(victim)
        dropped.insert(0, columns[victim].header)
        table = build(kept, dropped)
    if measure(table).minimum > console.width:  # the essential columns alone are too wide: let them wrap too
        table = build(kept, dropped, wrap_all=True)
    return table


# --- progress -------------------------------------------------------------------------------------


class StepProgress:
    """Progress of a long step as `step(what, done, total)` (total 0: not known yet), the
    callback type of icoforge's long-running functions.

    On a terminal: a transient rich bar with what is running, done/total and the elapsed time.
    Piped (CI logs, tee): plain lines `[  12 s] what (3/25)` when `what` changes, when the count
    moves after `every_s` of silence, and every `heartbeat_s` while nothing changes, so a log
    never goes quiet for long."""

    def __init__(self, console: Console, *, every_s: float = 10.0, heartbeat_s: float = 30.0):
        self.console = console
        self.live = console.is_terminal
        self.every_s, self.heartbeat_s = every_s, heartbeat_s
        self._lock = threading.Lock()
        self._what, self._done, self._total = "", 0, 0
        self._last_line = 0.0
        self._stop = threading.Event()
        self._started = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StepProgress:
        self._started = self._last_line = time.perf_counter()
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), console=self.console, transient=True,
            )  # fmt: skip
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=None)
        else:
            self._thread = threading.Thread(target=self._heartbeat, name="icoforge-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def __call__(self, what: str, done: int = 0, total: int = 0) -> None:
        with self._lock:
            changed, moved = what != self._what, done != self._done
            self._what, self._done, self._total = what, done, total
            if self.live:
                self._bar.update(self._task, description=what, completed=done, total=total or None)
                return
            now = time.perf_counter()
            if changed or (moved and (now - self._last_line >= self.every_s or (total and done == total))):
                self._line(now)

    def log(self, text: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        with self._lock:
            self.console.print(text, highlight=False, soft_wrap=True)
            self._last_line = time.perf_counter()

    def _line(self, now: float, suffix: str = "") -> None:
        count = f" ({self._done}/{self._total})" if self._total else ""
        self.console.print(f"[{now - self._started:6.0f} s] {self._what}{count}{suffix}", highlight=False, markup=False, soft_wrap=True)
        self._last_line = now

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s / 2)):
            with self._lock:
                now = time.perf_counter()
                if self._what and now - self._last_line >= self.heartbeat_s:
                    self._line(now, ", still running")


# --- warnings -------------------------------------------------------------------------------------

# (message regex, category, module regex): third-party warnings we know to be harmless here.
KNOWN_HARMLESS_WARNINGS: tuple[tuple[str, type[Warning], str], ...] = (
    # GT4Py advises `python -O`; icoforge's timings say which mode they ran in, and the advice
    # would otherwise interrupt every progress display
    ("Python is not running in optimized mode", UserWarning, ""),
    # GT4Py on embedded (Python) execution, which icoforge chooses on purpose as a reference
    ("Field View Program .*Using Python execution", UserWarning, ""),  # no colon: pytest splits its filters at colons
    # icon4py's geometry and interpolation factories divide by zero-length vectors at the poles
    # and pentagons on purpose; the results there are masked or overwritten
    (".*(divide by zero|invalid value) encountered", RuntimeWarning, r"icon4py\."),
    # xarray (imported by icon4py's grid I/O) on NumPy 2's deprecated generic timedelta unit
    ("The 'generic' unit for NumPy timedelta is deprecated", DeprecationWarning, r"xarray\."),
)


def filter_known_warnings() -> None:
    """Ignore KNOWN_HARMLESS_WARNINGS; other user and runtime warnings are shown once per process
    (not once per call site: one raised for each of 78 programs would otherwise repeat). The
    categories Python hides by default (ResourceWarning, DeprecationWarning, ...) stay hidden."""
    for category in (UserWarning, RuntimeWarning):
        warnings.simplefilter("once", category)
    for message, category, module in KNOWN_HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


__all__ = ["Col", "KNOWN_HARMLESS_WARNINGS", "QuietConsole", "StepProgress", "filter_known_warnings", "fit_table", "make_console"]
