"""Arguments that several sub-commands share, defined once (same name, same help everywhere)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from icoforge.errors import IcoforgeError


def grid(p: argparse.ArgumentParser, grid: str, levels: int) -> None:
    """--grid and --levels with the command's defaults."""
    p.add_argument("--grid", default=grid, help=f"grid preset or ICON NetCDF file (default {grid})")
    p.add_argument("--levels", type=int, default=levels, help=f"vertical levels (default {levels})")


def schedule(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--schedule", metavar="JSON|FILE",
        help='schedule of the icoforge GPU backends (ProgramSchedule JSON or a file), e.g. \'{"fuse": ["*"]}\'; '
        "sets $ICOFORGE_SCHEDULE; kernels it does not name keep the vendor default",
    )  # fmt: skip


def gpu_lock(p: argparse.ArgumentParser, held: str) -> None:
    """--gpu-lock PATH (granule.gpulock.GpuLock) of `greenline`, `roofline`, `run` and `tune`; `held`:
    when the command holds it."""
    p.add_argument(
        "--gpu-lock", metavar="PATH",
        help=f"hold an exclusive flock on PATH (created if missing) {held}; processes given the same PATH "
        "(greenline, roofline, run, tune) time one at a time",
    )  # fmt: skip


def open_gpu_lock(args: argparse.Namespace, log: Callable[[str], None]) -> Any:
    """`--gpu-lock PATH` as a `GpuLock` logging to `log`, checked now (a bad path fails before any
    work), or None without the option."""
    if not getattr(args, "gpu_lock", None):
        return None
    from icoforge.granule.gpulock import GpuLock

    lock = GpuLock(args.gpu_lock, log)
    lock.check()
    return lock


def static_scalars(p: argparse.ArgumentParser) -> None:
    """--static: which scalars `run` and `explain` compile in (explain shows what run compiles)."""
    p.add_argument(
        "--static", default="icon4py", choices=("icon4py", "none"),
        help="compile-time scalars: icon4py = int and bool scalars, like icon4py's setup_program (default)",
    )  # fmt: skip


def static_values(p: argparse.ArgumentParser) -> None:
    """--static-value NAME=VALUE (repeatable): `run`, `profile` and `tune` on a granule variant."""
    p.add_argument(
        "--static-value", dest="static_values", action="append", default=[], metavar="NAME=VALUE",
        help="compile a scalar of the suite's inputs as this static value, e.g. a granule variant's "
        "(its compile log prints them: 'this variant's static arguments: ...'; floats too); repeatable",
    )  # fmt: skip


def parse_static_values(args: argparse.Namespace, programs: list[str]) -> dict[str, str]:
    """--static-value NAME=VALUE ... as a dict, checked against the program before the grid loads."""
    from icoforge.suite import get_program
    from icoforge.suite.runner import static_overrides

    if not args.static_values:
        return {}
    if len(programs) != 1:
        raise IcoforgeError("--static-value: name one PROGRAM (static scalars differ between programs)")
    pairs = [text.partition("=") for text in args.static_values]
    bad = [text for text, (name, eq, value) in zip(args.static_values, pairs) if not (name and eq and value)]
    if bad:
        raise IcoforgeError(f"--static-value: expected NAME=VALUE, got {', '.join(map(repr, bad))}")
    values = {name: value for name, _, value in pairs}
    static_overrides(get_program(programs[0]), values)  # unknown names and bad values: an error now
    return values


def report_files(p: argparse.ArgumentParser, what: str = "report") -> None:
    """--json and --markdown: the report written to files besides the console's tables."""
    p.add_argument("--json", metavar="PATH", help=f"also write the {what} as JSON ('-' for stdout, no tables)")
    p.add_argument("--markdown", metavar="PATH", help=f"also write the {what} as Markdown (for benchmarks/)")


def require_counts(args: argparse.Namespace, *names: str) -> None:
    """Refuse a count option below 1 (--levels, --repeat, --steps, --jobs) before anything runs."""
    for name in names:
        value = getattr(args, name)
        if value < 1:
            what = "a positive number of levels" if name == "levels" else "at least 1"
            raise IcoforgeError(f"--{name} must be {what}, got {value}")


def options(cls: type, args: argparse.Namespace, **given: Any) -> Any:
    """The dataclass `cls` (a command's options) from the parsed arguments: each field not `given`
    takes the argument of its name (options and arguments are named alike)."""
    taken = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.name not in given}
    return cls(**taken, **given)
