"""`icoforge gpu-check` and `icoforge verify-all`: the backend over the whole catalogue."""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import pathlib
import platform
import random

from rich.console import Console

from icoforge.console import StepProgress
from icoforge.errors import IcoforgeError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpu-check", help="compile every program's CUDA (nvcc sm_90) and HIP (hipcc gfx90a); no GPU needed")
    p.add_argument("--programs", nargs="*", help="default: all dycore programs")
    p.add_argument("--grid", default="R2B3")
    p.add_argument("--levels", type=int, default=10)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for GT4Py's passes")
    p.add_argument("--out", help="write the register/spill table (Markdown) here")
    p.add_argument("--compilers", default="", help="comma list of nvcc, hipcc, hip-on-cuda (the HIP source with nvcc "
                   "through the HIP-on-CUDA header); default: nvcc and hipcc, whichever is installed")
    p.set_defaults(func=gpu_check)

    v = sub.add_parser("verify-all", help="every program: icoforge-cpu (or --backend) vs a GT4Py backend, whole outputs compared")
    v.add_argument("--programs", nargs="*")
    v.add_argument("--grid", default="R2B4")
    v.add_argument("--levels", type=int, nargs="+", default=[80, 17])
    v.add_argument("--reference", default="gtfn_cpu")
    v.add_argument("--backend", default="icoforge-cpu",
                   help="the backend checked, e.g. icoforge-hip-on-cuda (the HIP source on an NVIDIA GPU) with --reference icoforge-cpu")
    v.add_argument("--schedule", default="", metavar="JSON|FILE", help="schedule of the icoforge GPU backends (ProgramSchedule JSON)")
    v.add_argument("--seed", type=int, default=None, help="input seed of every case (default: a random one per case)")
    v.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    v.add_argument("--out", help="write the result table (Markdown) here")
    v.set_defaults(func=verify_all)


def _names(args) -> list[str]:
    from icoforge.suite.catalogue import get_program, program_names

    if args.programs:
        return [get_program(n).name for n in args.programs]  # misspelt names fail here, with suggestions
    return list(program_names())


def gpu_check(args) -> int:
    from icoforge.suite.checks import compile_all, compile_table_markdown

    console = Console(stderr=True)
    names = _names(args)
    bad: list = []
    seen: set[str] = set()
    with StepProgress(console) as step:  # a bar on a terminal, timed lines when piped
        step(f"GT4Py passes + compile, {len(names)} programs", 0, len(names))

        def on_row(r):
            seen.add(r.program)
            step(f"compiled {r.program} ({r.compiler})", len(seen), len(names))
            if r.error or r.spill_stores or r.spill_loads:
                bad.append(r)

        compilers = tuple(c for c in args.compilers.split(",") if c) or None
        rows = compile_all(names, args.grid, args.levels, args.jobs, on_row, compilers)
    header = (
        f"# GPU compile check, {datetime.date.today()}\n\nGrid {args.grid}, {args.levels} levels, default schedules; "
        f"host {platform.node() or 'unknown'}; {len(names)} programs, {len({(r.program, r.kernel) for r in rows})} kernels."
    )
    table = compile_table_markdown(rows, header)
    if args.out:
        pathlib.Path(args.out).write_text(table)
    print(table)
    for r in bad:
        console.print(f"[red]{r.program} {r.compiler} {r.kernel}: {r.error or 'spills'}[/red]")
    return 1 if bad else 0


def verify_all(args) -> int:
    from icoforge.suite.checks import VerifyRow
    from icoforge.parallel import WorkerDied, map_isolated

    from icoforge.errors import UnknownNameError
    from icoforge.suite.backends import backend_names, use_schedule

    names = _names(args)
    for name in (args.backend, args.reference):  # misspelt names fail here, before the workers
        if name not in backend_names():
            raise UnknownNameError("backend", name, backend_names())
    if args.schedule:
        use_schedule(args.schedule)  # checked now; the workers inherit it (settings)
    if any(lv <= 0 for lv in args.levels):
        raise IcoforgeError("--levels must be positive")
    results = {}
    seed = (lambda: args.seed) if args.seed is not None else (lambda: random.randrange(1 << 16))
    cases = [(n, lv, seed()) for lv in args.levels for n in names]  # a rerun keeps its seed
    with StepProgress(Console(stderr=True)) as step:
        step("verifying", 0, len(cases))
        verify = functools.partial(_verify_case, args.grid, args.reference, args.backend)
        for (n, lv, _), row in map_isolated(verify, cases, args.jobs):
            if isinstance(row, BaseException):  # verify_one reports its own errors: its worker died (or pickling)
                detail = str(row) if isinstance(row, WorkerDied) else f"{type(row).__name__}: {row}"
                row = VerifyRow(n, "ERROR", float("nan"), 0.0, detail)
            results[(n, lv)] = row
            step(f"{row.status} {row.program}", len(results), len(cases))
            if args.out:  # the table so far: a long run that is cut off still leaves its results
                pathlib.Path(args.out).write_text(_verify_table(args, results, len(cases)))
    text = _verify_table(args, results, len(cases))
    if args.out:
        pathlib.Path(args.out).write_text(text)
    print(text)
    failed = [r for r in results.values() if r.status != "PASS"]
    return 1 if failed else 0


def _verify_case(grid: str, reference: str, backend: str, case: tuple[str, int, int]):
    """One verify-all case in a worker (module level, so that spawned workers can import it)."""
    from icoforge.suite.checks import verify_one

    name, levels, seed = case
    return verify_one(name, grid, levels, reference, seed, backend)


def _verify_table(args, results: dict, expected: int) -> str:
    seed = getattr(args, "seed", None)
    inputs = "fresh random inputs" if seed is None else f"inputs of seed {seed}"
    lines = [
        f"# verify-all: {args.backend} vs {args.reference}, {datetime.date.today()}",
        "",
        f"Grid {args.grid}, levels {', '.join(map(str, args.levels))}; {inputs}, poisoned outputs, whole arrays; "
        f"rtol 1e-10. Seconds = both builds + runs. Host {platform.node()}, {os.cpu_count()} cores."
        + (f" Schedule: `{args.schedule}`." if getattr(args, "schedule", "") else ""),
        "",
        "| program | levels | status | max rel err | seconds |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for (n, lv), r in sorted(results.items()):
        lines.append(f"| {n} | {lv} | {r.status} | {r.max_rel_err:.2e} | {r.compile_s:.0f} |")
    failed = [r for r in results.values() if r.status != "PASS"]
    lines += ["", f"{len(results) - len(failed)} of {len(results)} passed ({expected - len(results)} not run yet)."]
    for r in failed:
        lines += ["", f"## {r.program}: {r.status}", "```", r.detail, "```"]
    return "\n".join(lines) + "\n"
