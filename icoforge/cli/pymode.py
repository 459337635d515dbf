"""Python's optimized mode for measuring commands.

GT4Py validates every program call's arguments (`type_translation.from_value` per argument) and
eve validates node fields unless Python runs optimized (`-O`, `PYTHONOPTIMIZE=1`), which is how
icon4py's benchmarks and production runs call it. On small grids that host work is most of a
substep: `icoforge greenline` on REGIONAL/80 measured 3x the step time of an optimized harness
(2026-12-01). Measuring commands therefore re-run themselves in the mode asked for, before
anything is imported or compiled, and the report records the mode (`python_optimized`).
"""

from __future__ import annotations

import os
import sys

MODES = ("optimized", "debug")
_GUARD = "ICOFORGE_PYTHON_MODE_SET"  # set on the re-run: never re-run twice


def add_argument(parser) -> None:  # noqa: ANN001 (an argparse parser)
    parser.add_argument(
        "--python-mode", choices=MODES, default="optimized",
        help="optimized (default): run under Python -O as users run GT4Py (no per-call argument checks); "
        "debug: without -O, GT4Py checks every call's arguments (for comparison)",
    )  # fmt: skip


def ensure(mode: str, argv: list[str] | None, prefix: tuple[str, ...] | list[str] = ("-m", "icoforge")) -> None:
    """Re-run `python PREFIX ARGV` (`icoforge ARGV`) in `mode` unless this process already runs in
    it. `argv` is None when the command was not started from the command line (a test calling
    `main([...])`): it then runs as it is, and its report says which mode that was."""
    if mode not in MODES:
        raise ValueError(f"python mode {mode!r}: choose one of {', '.join(MODES)}")
    optimized = bool(sys.flags.optimize)
    if optimized == (mode == "optimized") or argv is None or os.environ.get(_GUARD):
        return
    env = dict(os.environ, **{_GUARD: "1"})
    if mode == "optimized":
        env["PYTHONOPTIMIZE"] = "1"
    else:
        env.pop("PYTHONOPTIMIZE", None)
    print(f"icoforge: re-running in Python's {mode} mode ({'-O' if mode == 'optimized' else 'no -O'})",
          file=sys.stderr, flush=True)  # fmt: skip
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *prefix, *argv], env)
