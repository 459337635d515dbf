"""`icoforge list` and `icoforge run PROGRAM ...`: the program catalogue, timing and verification."""

from __future__ import annotations

import argparse
import contextlib

from icoforge.cli import common_args
from icoforge.console import Col, StepProgress, fit_table, make_console
from icoforge.errors import IcoforgeError
from icoforge.suite.backends import backend_names


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("list", help="icon4py dycore programs: dimensions, neighbour tables, outputs")
    p.add_argument(
        "pattern", nargs="*", default=[],
        help="only programs whose name contains this, or its words (split at spaces, _ or -) in any order: theta rho",
    )  # fmt: skip
    p.set_defaults(func=cmd_list)

    p = subparsers.add_parser(
        "run", help="compile and time one program on a grid; --compare verifies other backends against the first"
    )
    p.add_argument("program", help="program name (see `icoforge list`)")
    p.add_argument("--grid", help="grid preset or ICON NetCDF file (default R2B4; with --reference the store's)")
    p.add_argument("--levels", type=int, help="vertical levels (default 80; with --reference the store's)")
    p.add_argument(
        "--backend", default="gtfn_cpu", metavar="BACKEND",
        help=f"backend to time (default gtfn_cpu); one of {', '.join(backend_names())}",
    )  # fmt: skip
    p.add_argument(
        "--compare", nargs="+", default=[], metavar="BACKEND",
        help="more backends (same names as --backend): timed, and verified against --backend",
    )  # fmt: skip
    common_args.schedule(p)
    p.add_argument("--repeat", type=int, default=10, help="timed calls per backend (default 10)")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default 0; with --reference the store's)")
    p.add_argument(
        "--reference", action="store_true",
        help="check --backend against the stored gtfn_cpu outputs (icoforge/suite/gt4py_references.json): "
        "no GT4Py compile; runs on the store's grid, levels and seed",
    )  # fmt: skip
    common_args.static_scalars(p)
    common_args.static_values(p)
    p.add_argument(
        "--in-worker", action="store_true",
        help="compile in a GT4Py compile worker, as the granule does (started while the grid loads; "
        "its import of GT4Py may fall into the compile time); default: in this process",
    )  # fmt: skip
    p.add_argument("--rtol", type=float, default=1e-10, help="relative tolerance of --compare (default 1e-10)")
    p.add_argument(
        "--atol", type=float, default=None,
        help="absolute tolerance of --compare (default: 1e-12 x each output's largest value)",
    )  # fmt: skip
    common_args.gpu_lock(p, "while each backend's calls run (first, warm-up, timed), not while it compiles")
    p.set_defaults(func=cmd_run)


def cmd_list(args: argparse.Namespace) -> int:
    from icoforge.suite.catalogue import all_programs, matches
    from icoforge.suite.ranges import GRANULE_PROGRAMS

    console = make_console(wide=args.wide)
    with console.status("importing icon4py's dycore programs"):
        pattern = " ".join(args.pattern)
        programs = [p for p in all_programs() if matches(pattern, p.name)]
    columns = [
        Col("program", no_wrap=True),
        Col("dims", priority=1),
        Col("granule", priority=2),
        Col("scan", priority=3),
        Col("outputs", priority=4),
        Col("connectivities", priority=5),
    ]
    rows = []
    for p in programs:
        outputs = ", ".join(f"{o}*" if p.param(o).is_inout else o for o in p.outputs)
        granule = "yes" if p.name in GRANULE_PROGRAMS else ""
        rows.append([p.name, " ".join(p.dims), granule, "yes" if p.has_scan else "no", outputs, " ".join(p.connectivities) or "-"])
    console.print(
        fit_table(
            console, f"icon4py dycore programs ({len(programs)})", columns, rows,
            caption="granule: called by icon4py's SolveNonhydro / VelocityAdvection; * also read by the program (in-out)",
        )  # fmt: skip
    )
    if not programs and pattern:
        console.print(f"no program matches {pattern!r}; `icoforge list` shows all of them")
    return 0


def _fmt_seconds(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.3f}"


def cmd_run(args: argparse.Namespace) -> int:
    store = _reference_defaults(args) if args.reference else None  # the store's grid, levels, seed
    for key, default in (("grid", "R2B4"), ("levels", 80), ("seed", 0)):
        if getattr(args, key) is None:
            setattr(args, key, default)
    common_args.require_counts(args, "levels", "repeat")
    console = make_console(wide=args.wide)
    with StepProgress(console) as step, contextlib.ExitStack() as scope:
        lock = common_args.open_gpu_lock(args, step.log)
        step("importing GT4Py and icon4py")  # half a minute on a busy 2-core machine
        from icoforge import settings
        from icoforge.backend.runtime import compile_pool
        from icoforge.grids import load_grid
        from icoforge.suite import peers
        from icoforge.suite.backends import get_backend
        from icoforge.suite.catalogue import get_program
        from icoforge.suite.runner import run_program
        from icoforge.suite.verify import verify

        if args.schedule:
            from icoforge.suite.backends import use_schedule

            use_schedule(args.schedule)
        backends = [args.backend, *args.compare]
        if not args.in_worker:
            # one program at a time, waited for: a fresh compile worker would first import GT4Py
            # (as long as this process did), mostly inside the compile time
            scope.enter_context(compile_pool.compiling_here())
        for name in dict.fromkeys(backends):
            backend = get_backend(name)  # a typo fails now, not after minutes of compiling
            if args.in_worker and settings.current().warm_pool:
                # a compile worker imports GT4Py for seconds before its job: let one per backend do
                # it now, while this process finds the program, loads the grid and builds the inputs
                compile_pool.warm_up_for(backend, workers=1)
        info = get_program(args.program)  # a typo fails before the grid is generated
        static_values = common_args.parse_static_values(args, [args.program])
        for name in dict.fromkeys(backends):
            if peers.is_peer(name) or name in peers.PLAIN_PEERS:  # say how GT4Py's backend is configured
                step.log(peers.describe_for(name, info.program))

        step("loading the grid")
        grid = load_grid(args.grid, levels=args.levels)
        step.log(
            f"{info.name} on {grid.name} ({grid.num_cells:,} cells, {grid.num_edges:,} edges, "
            f"{args.levels} levels), seed {args.seed}, static scalars: {args.static}"
            + "".join(f" {n}={v}" for n, v in static_values.items())
        )
        results, checks = [], {}
        for i, name in enumerate(backends):
            # each backend's compile can take minutes: its phases show as they change
            results.append(
                run_program(
                    info, name, grid, args.seed, args.repeat, static_params=args.static, static_values=static_values,
                    on_status=lambda text, i=i: step(f"backend {i + 1}/{len(backends)}: {text}"),
                    measuring=contextlib.nullcontext if lock is None else lambda name=name: lock.hold(name, f"run {info.name}"),
                )  # fmt: skip
            )
            step.log(f"{name}: compiled in {_fmt_seconds(results[-1].compile_s)} s, median {results[-1].median_ms:.3f} ms")
        for name in args.compare:
            step(f"verifying {name} against {args.backend}")
            checks[name] = verify(
                info, name, args.backend, grid, args.seed, args.rtol, args.atol, static_params=args.static,
                static_values=static_values,
            )  # fmt: skip
            # a plain line whatever the table's width (the ReFrame checks read it)
            result = "PASS" if checks[name].passed else "FAIL"
            step.log(f"{name} vs {args.backend}: {result} max rel {checks[name].max_rel_err:.1e}")

    columns = [
        Col("backend"), Col("compile s", justify="right"), Col("first call ms", priority=3, justify="right"),
        Col("median ms", justify="right"), Col("min ms", priority=2, justify="right"), Col("checksum", priority=1),
    ]  # fmt: skip
    if checks:
        columns.append(Col(f"vs {args.backend}"))
    rows = []
    for r in results:
        row = [
            r.backend,
            _fmt_seconds(r.compile_s),
            f"{r.first_call_s * 1e3:.3f}",
            f"{r.median_ms:.3f}",
            f"{r.min_ms:.3f}",
            r.checksum,
        ]
        if checks:
            check = checks.get(r.backend)
            if check is None:
                row.append("reference")
            elif check.passed:
                row.append(f"[green]PASS[/green] max rel {check.max_rel_err:.1e}")
            else:
                row.append("[red]FAIL[/red]")
        rows.append(row)
    console.print(fit_table(console, f"{info.name}: {args.repeat} timed calls", columns, rows))

    failed = [c for c in checks.values() if not c.passed]
    for check in failed:
        console.print(check.summary(), highlight=False, soft_wrap=True)
    if store is not None:
        from icoforge.suite.references import check_program

        with StepProgress(console) as step:
            step(f"checking {args.backend} against the stored reference")
            stored = check_program(info, args.backend, grid, store)
        versions = store["meta"]["versions"]
        console.print(
            f"{stored.summary()}\n  (gt4py {versions['gt4py']}, icon4py {versions['icon4py-atmosphere-dycore']}, "
            f"made {store['meta']['made']}; {args.backend}: median {results[0].median_ms:.3f} ms per call, "
            f"compile {_fmt_seconds(results[0].compile_s)} s)",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
        if not stored.passed:
            failed.append(stored)
    return 1 if failed else 0


def _reference_defaults(args: argparse.Namespace) -> dict:
    """With --reference, grid, levels and seed are the store's; others given are an error."""
    from icoforge.suite.references import load_store

    store = load_store()
    meta = store["meta"]
    wanted = {"grid": meta["grid"]["name"], "levels": meta["levels"], "seed": meta["seed"]}
    for key, value in wanted.items():
        given = getattr(args, key)
        if given is not None and str(given).upper() != str(value).upper():
            raise IcoforgeError(f"--reference: the stored references are for --{key} {value}, not {given}")
        setattr(args, key, value)
    if args.static != "icon4py":
        raise IcoforgeError("--reference: the stored references use --static icon4py")
    if args.static_values:
        raise IcoforgeError("--reference: the stored references use the suite's static scalars (no --static-value)")
    return store
