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
    p = sub.add_parser("gpu-check", help="compile every program's CUDA (nvcc sm_90) and HIP (hipcc gfx90a); no GPU needed; "
                       "--target hip: registers and occupancy on gfx90a and gfx942 (clang) beside sm_90")
    p.add_argument("--programs", nargs="*", help="default: all dycore programs")
    p.add_argument("--grid", default="R2B3")
    p.add_argument("--levels", type=int, default=10)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for GT4Py's passes")
    p.add_argument("--out", help="write the register/spill table (Markdown) here")
    p.add_argument("--compilers", default="", help="comma list of nvcc, hipcc, hip-on-cuda (the HIP source with nvcc "
                   "through the HIP-on-CUDA header); default: nvcc and hipcc, whichever is installed")
    p.add_argument("--target", choices=("cuda", "hip"), help="cuda: nvcc only; hip: the HIP module with clang for --archs "
                   "(VGPR/SGPR/AGPR/LDS/scratch, waves per SIMD) beside sm_90 (the same module via the HIP-on-CUDA header)")
    p.add_argument("--archs", default="gfx90a,gfx942", help="AMD architectures of --target hip (comma list)")
    p.add_argument("--k-unroll", default="", metavar="U,U,...", help="--target hip: one table per k_unroll factor of the "
                   "HIP default (the scan kernels; default programs: both vertically implicit solvers)")
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
    if getattr(args, "target", None) == "hip":
        return _amd_check(args)
    if getattr(args, "target", None) == "cuda":
        args.compilers = args.compilers or "nvcc"
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


SCAN_PROGRAMS = ("vertically_implicit_solver_at_predictor_step", "vertically_implicit_solver_at_corrector_step")


def _amd_options(args) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    from icoforge.backend.schedule.occupancy import AMD

    archs = tuple(a.strip() for a in args.archs.split(",") if a.strip())
    for a in archs:
        if a not in AMD:
            raise IcoforgeError(f"--archs: unknown AMD architecture {a!r}; choose of {', '.join(AMD)}")
    try:
        unrolls = tuple(int(u) for u in args.k_unroll.split(",") if u.strip())
    except ValueError:
        raise IcoforgeError(f"--k-unroll: whole numbers separated by commas, e.g. 1,2,4,8; got {args.k_unroll!r}") from None
    if any(u < 1 for u in unrolls):
        raise IcoforgeError(f"--k-unroll: factors of 1 or more, got {args.k_unroll!r}")
    return archs, unrolls or (None,)


def _amd_check(args) -> int:
    """`gpu-check --target hip`: the AMD resource table (icoforge.perf.amd_resources)."""
    from icoforge.backend.runtime.amd_check import INSTALL_HINT, find_amd_clang
    from icoforge.console import fit_table, make_console
    from icoforge.perf import amd_tables
    from icoforge.perf.amd_resources import collect

    archs, unrolls = _amd_options(args)
    if find_amd_clang() is None:
        raise IcoforgeError(f"gpu-check --target hip needs clang with HIP support; {INSTALL_HINT}")
    if args.k_unroll and not args.programs:
        args.programs = list(SCAN_PROGRAMS)
    names = _names(args)
    console = Console(stderr=True)
    done: set[str] = set()
    with StepProgress(console) as step:
        step(f"GT4Py passes + clang ({', '.join(archs)}) + nvcc, {len(names)} programs", 0, len(names))

        def on_rows(rows):
            done.add(rows[0].program)
            step(f"compiled {rows[0].program}", len(done), len(names))

        rows = collect(names, args.grid, args.levels, args.jobs, archs, unrolls, on_rows=on_rows)
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS

    sets = "on" if VENDOR_DEFAULTS["hip"].stride_sets else "off"
    title = (f"# AMD resources, {datetime.date.today()}\n\nGrid {args.grid}, {args.levels} levels; HIP vendor default "
             f"schedule (stride_sets {sets}){' with k_unroll ' + args.k_unroll if args.k_unroll else ''}; "
             f"host {platform.node() or 'unknown'}.")
    text = amd_tables.markdown(rows, archs, title, getattr(args, "wide", False))
    if args.k_unroll:
        text += "\n## Scan kernels per k_unroll\n\n" + "\n".join(amd_tables.unroll_markdown(rows, archs)) + "\n"
    if args.out:
        pathlib.Path(args.out).write_text(text)
    out = make_console(wide=getattr(args, "wide", False))
    cols, cells = amd_tables.terminal_table(rows, archs)
    out.print(fit_table(out, "Registers and occupancy (waves/SIMD of 8; sm90: warps/scheduler of 16)", cols, cells))
    if args.k_unroll:
        out.print(fit_table(out, "Scan kernels per k_unroll", *amd_tables.unroll_terminal(rows, archs)))
        out.print("V: VGPRs, scr: scratch B/lane, w: waves/SIMD; sm90 R: registers, w: warps/scheduler; "
                  "MB: bytes the byte model counts", highlight=False)
    for line in amd_tables.summary(rows, archs):
        out.print(line, highlight=False)
    notes = {f"note: {r.program} {r.kernel} (k_unroll {r.k_unroll}): {n}": None for r in rows for n in r.notes()}
    for note in notes:  # once each: a --k-unroll sweep repeats the kernels that do not scan
        out.print(note, highlight=False)
    # the default schedule must build without spills; the k_unroll sweep's spills are results
    bad = [(r, p) for r in rows for p in r.problems() if r.k_unroll == 1 or r.error]
    for r, p in bad:
        console.print(f"[red]{r.program} {r.kernel}: {p.splitlines()[0][:300]}[/red]")
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
