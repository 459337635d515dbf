"""`icoforge` command line: one entry point, one module per sub-command family.

Each module in COMMAND_MODULES exposes `register(subparsers)`, which adds its sub-commands and
sets `func` on them. Errors derived from IcoforgeError print as one line (exit 2); pass
`--traceback` to see the full trace.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from icoforge.errors import IcoforgeError

COMMAND_MODULES = (
    "icoforge.cli.grid_cmd",
    "icoforge.cli.suite_cmd",
    "icoforge.cli.backend_cmd",  # gpu-check, verify-all
    "icoforge.cli.schedule_cmd",  # schedules: show, validate, sweep
    "icoforge.cli.perf_cmd",  # explain, roofline, profile
    "icoforge.cli.granule_cmd",  # greenline
    "icoforge.cli.tune_cmd",  # tune
    "icoforge.cli.references_cmd",  # stored GT4Py references: make, check
    "icoforge.cli.hpc_cmd",  # hpc-references, hpc-trend (the ReFrame checks in hpc/)
    "icoforge.cli.model_cmd",  # model: icon4py's driver with a backend (icoforge/model)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="icoforge", description=__doc__.splitlines()[0])
    parser.add_argument("--traceback", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # a command family not written yet
                continue
            raise
        module.register(sub)
    _add_wide(parser)
    return parser


def _add_wide(parser: argparse.ArgumentParser) -> None:
    """`--wide` on every command that runs (tables keep all their columns)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        parser.add_argument(
            "--wide", action="store_true",
            help="tables with every column (default: the least important are dropped where they do not fit the "
            "terminal; 80 columns when piped unless $COLUMNS says otherwise)",
        )  # fmt: skip
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):
            _add_wide(child)


def main(argv: list[str] | None = None) -> int:
    from icoforge.console import filter_known_warnings

    filter_known_warnings()
    parser = build_parser()
    args = parser.parse_args(argv)
    # the words this process was started with, for commands that re-run themselves (pymode.py);
    # None when called from Python (tests), which must never be replaced by another process
    args.cli_argv = sys.argv[1:] if argv is None else None
    try:
        return int(args.func(args) or 0)
    except IcoforgeError as e:
        if args.traceback:
            raise
        print(f"icoforge: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("icoforge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `icoforge ... | head`: the reader went away, nothing to report
        # the interpreter flushes stdout once more at exit: send that to /dev/null, not to the pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
