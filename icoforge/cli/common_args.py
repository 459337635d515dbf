"""Arguments that several sub-commands share, defined once (same name, same help everywhere)."""

from __future__ import annotations

import argparse


def schedule(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--schedule", metavar="JSON|FILE",
        help='schedule of the icoforge GPU backends (ProgramSchedule JSON or a file), e.g. \'{"fuse": ["*"]}\'; '
        "sets $ICOFORGE_SCHEDULE; kernels it does not name keep the vendor default",
    )  # fmt: skip


def report_files(p: argparse.ArgumentParser, what: str = "report") -> None:
    """--json and --markdown: the report written to files besides the console's tables."""
    p.add_argument("--json", metavar="PATH", help=f"also write the {what} as JSON ('-' for stdout, no tables)")
    p.add_argument("--markdown", metavar="PATH", help=f"also write the {what} as Markdown (for benchmarks/)")
