"""Run every candidate schedule of the search space on all kernels of PROGRAM, check each one's outputs
against the vendor default's (bit for bit), time each kernel, and give every kernel the candidate that
timed fastest for it (if it beats the default by --min-gain). The picks together are verified and timed
once more. --out writes them as a schedule file (merged into an existing one) for `--schedule FILE`.
"""  # `icoforge tune PROGRAM` (the autotuner, icoforge.tune); this text is also its --help

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import pathlib

from rich.console import Console

from icoforge.cli import common_args
from icoforge.console import Col, StepProgress, fit_table, make_console
from icoforge.errors import IcoforgeError

BACKENDS = ("icoforge-cuda", "icoforge-hip", "icoforge-emulated-cuda", "icoforge-emulated-hip")


def register(subparsers: argparse._SubParsersAction) -> None:
    summary = "autotune a program's kernel schedules on the GPU (verified against the default; writes a schedule file)"
    p = subparsers.add_parser("tune", help=summary, description=__doc__)
    p.add_argument("programs", nargs="+", metavar="PROGRAM",
                   help="program name(s) (see `icoforge list`); several are tuned one after the other into one --out file")  # fmt: skip
    common_args.grid(p, "R2B4", 80)
    p.add_argument("--backend", default="icoforge-cuda", choices=BACKENDS,
                   help="where to run: a GPU, or the CPU emulation of the GPU code (checks the search, times mean "
                   "nothing) (default icoforge-cuda)")  # fmt: skip
    p.add_argument("--space", default="quick", choices=("quick", "full"),
                   help="search space: quick (15 schedules) or full (about 30) (default quick)")  # fmt: skip
    p.add_argument("--repeat", type=int, default=20, help="timed calls per candidate (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--min-gain", type=float, default=0.03,
                   help="a kernel leaves the default only for a candidate at least this much faster (default 0.03)")  # fmt: skip
    p.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)),
                   help="processes compiling the candidates before the runs (GPU only; default: half the cores, at most 8)")  # fmt: skip
    common_args.static_values(p)
    p.add_argument("--out", metavar="FILE", help="write (or merge into) this schedule file")
    p.add_argument("--json", metavar="FILE", help="write every candidate's times and the picks as JSON")
    p.add_argument("--markdown", metavar="FILE", help="write the tables as Markdown (for benchmarks/)")
    common_args.gpu_lock(p, "while a program's candidates run, not while they compile")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    from icoforge.grids import load_grid
    from icoforge.suite import get_program
    from icoforge.tune import target_for_backend, tune_suite_program, write_schedule

    common_args.require_counts(args, "repeat", "jobs")
    if not 0.0 <= args.min_gain < 1.0:
        raise IcoforgeError(f"--min-gain must be in [0, 1), got {args.min_gain}")
    target_for_backend(args.backend)  # clear errors before loading anything
    for name in args.programs:
        get_program(name)
    static_values = common_args.parse_static_values(args, args.programs)
    err = make_console(stderr=True, wide=args.wide)
    console = make_console(wide=args.wide)
    lock = common_args.open_gpu_lock(args, lambda text: err.print(text, highlight=False, markup=False, soft_wrap=True))
    grid = load_grid(args.grid, levels=args.levels)
    results = []
    for name in args.programs:
        with StepProgress(err) as step:

            def progress(what: str, done: int, total: int) -> None:
                step(f"{name}: {what}", done, total)

            result = tune_suite_program(
                name, grid, args.backend, args.space, repeat=args.repeat, seed=args.seed,
                min_gain=args.min_gain, progress=progress, jobs=args.jobs, static_values=static_values,
                measuring=contextlib.nullcontext if lock is None else lambda name=name: lock.hold(args.backend, f"tune {name}"),
            )  # fmt: skip
        results.append(result)
        print_result(result, console)
        # after each program: a long run that is cut off keeps what it has found
        if args.out:
            write_schedule(result, args.out)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps({"results": [r.to_json() for r in results]}, indent=1) + "\n")
        if args.markdown:
            pathlib.Path(args.markdown).write_text(markdown_report(results, args))
    if args.out:
        console.print(f"schedule written to {args.out}: use it with --schedule {args.out}")
    for what, path in (("candidates and picks", args.json), ("Markdown tables", args.markdown)):
        if path:
            console.print(f"{what} written to {path}")
    return 1 if any(r.differing for r in results) else 0


def _pick_rows(result) -> list[tuple[str, ...]]:
    return [
        (p.kernel, f"{p.default_s * 1e6:.1f}", f"{p.best_s * 1e6:.1f}", f"{p.default_s / p.best_s:.2f}x", p.best_id,
         "vendor default" if p.best_id == "default" else p.schedule.describe())
        for p in result.picks
    ]  # fmt: skip


PICK_COLUMNS = ("kernel", "default µs", "best µs", "speed-up", "best candidate", "schedule")


def markdown_report(results: list, args: argparse.Namespace) -> str:
    import datetime

    first = results[0]
    lines = [
        f"# icoforge tune, {datetime.date.today()}", "",
        f"{first.device}; grid {first.grid}, {first.levels} levels; backend {args.backend}; space {args.space}; "
        f"{args.repeat} timed calls per candidate; min gain {args.min_gain:.0%}; seed {args.seed}.",
    ]  # fmt: skip
    if first.emulated:
        lines += ["", "CPU emulation: the times are the emulation's, not a GPU's."]
    for r in results:
        lines += ["", f"## {r.program}", "", "| " + " | ".join(PICK_COLUMNS) + " |", "| --- | ---: | ---: | ---: | --- | --- |"]
        lines += ["| " + " | ".join(row) + " |" for row in _pick_rows(r)]
        whole, counts = _summary(r)
        lines += ["", f"Whole call: {whole}. Candidates: {counts}."]
    return "\n".join(lines) + "\n"


def _summary(result) -> tuple[str, str]:
    """(whole call default vs tuned, candidates by status): the lines under each table."""
    whole = (f"default {result.default_whole_s * 1e6:.1f} µs, tuned {result.tuned_whole_s * 1e6:.1f} µs "
             f"({result.default_whole_s / result.tuned_whole_s:.2f}x)")  # fmt: skip
    if result.kept_default:
        whole += "; not faster together, so the vendor default is kept for this program"
    counts = collections.Counter(r.status for r in result.runs)
    return whole, ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def print_result(result, console: Console) -> None:
    where = f"{result.program} on {result.grid}/{result.levels} levels, {result.device}"
    if result.emulated:
        console.print("[yellow]CPU emulation: the times are the emulation's, not a GPU's; the picks below check the "
                      "search, they are not a tuning[/yellow]")  # fmt: skip
    priority = {"best candidate": 2, "default µs": 1}  # dropped first on a narrow terminal: highest
    columns = [
        Col(c, priority=priority.get(c, 0), no_wrap=c == "kernel",
            justify="left" if c in ("kernel", "best candidate", "schedule") else "right")
        for c in PICK_COLUMNS
    ]  # fmt: skip
    console.print(fit_table(console, f"tuned kernels: {where}", columns, _pick_rows(result), title_justify="left"))
    whole, counts = _summary(result)
    console.print(f"whole call: {whole}; the tuned schedule's outputs equal the default's")
    console.print(f"candidates: {counts}")
    for r in result.runs:
        if r.status == "DIFFERS":
            console.print(f"[red]{r.id}: outputs differ from the default's ({r.detail}): a code generator bug[/red]")
        elif r.status in ("REFUSED", "ERROR"):
            console.print(f"[dim]{r.id}: {r.status.lower()}: {r.detail[:200]}[/dim]")
