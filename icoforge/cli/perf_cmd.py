"""`icoforge explain | roofline | profile`: what the compiler made of a program, and where it stands
against the hardware."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import pathlib
import shutil
import subprocess

from rich.console import Console
from rich.table import Table

from icoforge.cli import common_args
from icoforge.console import Col, StepProgress, fit_table, make_console
from icoforge.errors import IcoforgeError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explain", help="a program page by page: GT4Py source, GTIR, GTIR after passes, kernel IR with costs, generated code"
    )
    p.add_argument("program", help="program name (see `icoforge list`)")
    common_args.grid(p, "R2B3", 10)
    p.add_argument("--target", default="cuda", choices=("cpp", "cuda", "hip"), help="generated code to show (default cuda)")
    p.add_argument(
        "--stage", action="append", default=[], metavar="STAGE",
        help="all | source | gtir | passes | ir | code | pipeline (the IR after each pass; not in all) (repeatable or comma-separated; default all, or only the diff with --diff)",
    )  # fmt: skip
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                   help="schedule parameter for the GPU pages, e.g. block=256,1 k_per_thread=4 (repeatable)")  # fmt: skip
    p.add_argument("--diff", metavar="BLOCKX,BLOCKY",
                   help="unified diff of the generated GPU code against this block (or 'NAME=VALUE;...' settings)")  # fmt: skip
    p.add_argument("--schedule", metavar="JSON|FILE", default="",
                   help='program schedule of the GPU pages (ProgramSchedule JSON or a file), e.g. \'{"fuse_sweeps": ["*"]}\'; '
                        "--set applies to its default; default: the vendor default")  # fmt: skip
    common_args.static_scalars(p)
    p.add_argument("--inline", default="auto", choices=("auto", "all", "off"),
                   help="temporaries recomputed in their readers: auto = where fewer bytes move (default), all, off")  # fmt: skip
    p.add_argument("--pager", action="store_true", help="page through the output (terminal only)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="syntax highlighting (default: on a terminal)")
    p.set_defaults(func=cmd_explain)

    p = subparsers.add_parser(
        "roofline",
        help="time a program (or the greenline dycore step) per kernel and draw its roofline (PNG + Markdown table)",
        description=(
            "PROGRAM: one dycore program, timed per kernel. 'greenline': icon4py's SolveNonhydro step "
            "(the granule of `icoforge greenline`) -- every kernel of every program the step calls, with "
            "bytes and flops of each call's own arguments, summed per dycore step."
        ),
    )
    p.add_argument("program", help="program name (see `icoforge list`), or 'greenline' for the whole dycore step")
    common_args.grid(p, "R2B4", 80)
    p.add_argument("--backend", default="icoforge-cpu", choices=("icoforge-cpu", "icoforge-cuda", "icoforge-hip"))
    p.add_argument("--out", default=None, help="PNG path (default roofline_<program>_<grid>_<levels>.png); a .md lands beside it")
    p.add_argument("--repeat", type=int, default=10,
                   help="timed calls (default 10); greenline on the CPU: runs of each kernel alone per call")  # fmt: skip
    p.add_argument("--peak-gflops", type=float, default=None, help="FP64 peak in GFLOP/s (default: data sheet / nominal CPU)")
    p.add_argument("--steps", type=int, default=3, help="greenline: instrumented dycore steps (default 3)")
    p.add_argument(
        "--cpu-timing", default="kernels", choices=("kernels", "program"),
        help="greenline on icoforge-cpu: kernels = each kernel built alone and run on every call's arguments "
        "(default); program = one program-level point per program (its calls' wall time)",
    )  # fmt: skip
    common_args.gpu_lock(
        p, "while timing (greenline: steps, kernel timing and copy ceiling, not the setup; one program: the whole "
        "measurement)",
    )  # fmt: skip
    p.set_defaults(func=cmd_roofline)

    p = subparsers.add_parser(
        "profile", help="ncu / nsys / rocprof command line restricted to the program's kernels; --run runs it and parses the metrics"
    )
    p.add_argument("program", help="program name (see `icoforge list`)")
    common_args.grid(p, "R2B4", 80)
    p.add_argument("--tool", required=True, choices=("ncu", "nsys", "rocprof"))
    p.add_argument("--backend", default=None, help="backend the profiled run uses (default icoforge-cuda, icoforge-hip for rocprof)")
    p.add_argument("--repeat", type=int, default=3, help="timed calls of the profiled run (default 3)")
    common_args.static_values(p)
    common_args.schedule(p)
    p.add_argument("--out", default="icoforge-profile", help="output prefix / directory (default icoforge-profile)")
    p.add_argument("--run", action="store_true", help="run the profiler and print the parsed metrics beside the model")
    p.set_defaults(func=cmd_profile)


def _load_grid(args: argparse.Namespace):
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import get_program

    if args.program != "greenline":
        get_program(args.program)  # a misspelt name fails now, not after the grid is generated

    common_args.require_counts(args, "levels")
    return load_grid(args.grid, levels=args.levels)


# --- explain --------------------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    from icoforge.perf.explain import STAGES, explain, render

    stages = [s.strip() for item in args.stage for s in item.split(",") if s.strip()]
    if not stages:
        stages = [] if args.diff else list(STAGES)
    if "all" in stages:
        stages = list(STAGES)
    needs_grid = bool({"passes", "ir", "code", "pipeline"} & set(stages)) or args.diff is not None
    grid = _load_grid(args) if needs_grid else None
    pages = explain(args.program, grid, args.target, stages, args.settings, args.diff, static_params=args.static,
                    inline_policy=args.inline, schedule_text=args.schedule)  # fmt: skip
    color = None if args.color == "auto" else args.color == "always"
    render(pages, color=color, pager=args.pager)
    return 0


# --- roofline -------------------------------------------------------------------------------------


def cmd_roofline(args: argparse.Namespace) -> int:
    from icoforge.perf.measure import measure, write_roofline

    common_args.require_counts(args, "repeat")
    if args.program == "greenline":
        return cmd_roofline_greenline(args)
    console = make_console(wide=args.wide)
    lock = _gpu_lock(args, console)
    grid = _load_grid(args)
    with StepProgress(console) as step:
        step("measuring")
        with contextlib.nullcontext() if lock is None else lock.hold(args.backend, f"roofline {args.program}"):
            m = measure(args.program, grid, args.backend, args.repeat, peak_gflops=args.peak_gflops, status=step)
        fig = write_roofline(m, args.out)
    priority = {"MB": 3, "MFLOP": 4, "flop/B": 2, "GB/s": 1}  # dropped first on a narrow terminal: highest
    columns = [
        Col(c, priority=priority.get(c, 0), justify="left" if c == "kernel" else "right")
        for c in ("kernel", "MB", "MFLOP", "flop/B", "median ms", "GB/s", "% of copy")
    ]
    rows = []
    bw = m.ceiling.bytes_per_s
    for p in m.points():
        gbs = p.bytes_per_s
        rows.append([
            f"[bold]{p.name}[/bold]" if p.kind == "program" else p.name,
            f"{p.bytes / 1e6:.3f}", f"{p.flops / 1e6:.3f}", f"{p.ai:.3f}",
            "–" if p.seconds is None else f"{p.seconds * 1e3:.4f}",
            "–" if gbs is None else f"{gbs / 1e9:.1f}",
            "–" if gbs is None else f"{100 * gbs / bw:.1f}",
        ])  # fmt: skip
    console.print(fit_table(console, f"{m.program} on {m.grid}/{m.levels}, {m.backend} ({m.device})", columns, rows))
    console.print(f"copy bandwidth {bw / 1e9:.1f} GB/s ({m.ceiling.how}); FP64 peak {m.peak_flops / 1e9:.0f} GFLOP/s ({m.peak_how})")
    if m.floors is not None:
        console.print(m.floors_note())
    console.print(f"wrote {fig.png} and {fig.markdown}")
    return 0


def _gpu_lock(args: argparse.Namespace, console: Console):
    """`--gpu-lock PATH`: the flock helper `icoforge greenline` uses (checked before any work)."""
    return common_args.open_gpu_lock(args, lambda text: console.print(f"[dim]{text}[/dim]"))


def cmd_roofline_greenline(args: argparse.Namespace) -> int:
    from icoforge.perf.greenline import measure_greenline
    from icoforge.perf.greenline_files import write_greenline_roofline

    common_args.require_counts(args, "levels", "steps")
    console = make_console(wide=args.wide)
    with StepProgress(console) as step:
        step("greenline roofline")
        r = measure_greenline(
            args.grid, args.levels, args.backend, steps=args.steps, repeat=args.repeat, cpu_timing=args.cpu_timing,
            peak_gflops=args.peak_gflops, gpu_lock=args.gpu_lock, status=step,
        )  # fmt: skip
        fig = write_greenline_roofline(r, args.out)
    level = "program (program-level time)" if r.program_level else "kernel"
    if r.floors is not None:  # above the kernel table, as in the Markdown
        console.print(_floors_table(r.floors, r.ceiling.bytes_per_s))
    priority = {"program": 2, "calls": 3, "MB": 5, "MFLOP": 6, "flop/B": 4, "GB/s": 1}  # highest dropped first
    columns = [
        Col(c, priority=priority.get(c, 0), justify="left" if c in (level, "program") else "right")
        for c in (level, "program", "calls", "MB", "MFLOP", "flop/B", "ms", "GB/s", "% of copy")
    ]
    rows = []
    bw = r.ceiling.bytes_per_s
    for row in r.rows:
        gbs = row.bytes_per_s
        ms = row.seconds_per_step
        rows.append([
            row.kernel, "" if r.program_level else row.program, f"{row.calls_per_step:g}",
            f"{row.bytes_per_step / 1e6:.3f}", f"{row.flops_per_step / 1e6:.3f}", f"{row.ai:.3f}",
            "–" if ms is None else f"{ms * 1e3:.4f}", "–" if gbs is None else f"{gbs / 1e9:.1f}",
            "–" if gbs is None else f"{100 * gbs / bw:.1f}",
        ])  # fmt: skip
    title = f"greenline on {r.grid}/{r.levels}, {r.backend} ({r.device}), per dycore step"
    console.print(fit_table(console, title, columns, rows))
    ks = r.kernel_seconds
    console.print(
        f"instrumented dycore step {r.step_seconds * 1e3:.3f} ms; program calls {r.program_seconds * 1e3:.3f} ms"
        + ("" if ks is None else f"; rows summed {ks * 1e3:.3f} ms")
        + f"; {len(r.not_executed)} kernels not executed"
    )
    console.print(f"time: {r.timing}")
    console.print(f"copy bandwidth {bw / 1e9:.1f} GB/s ({r.ceiling.how}); FP64 peak {r.peak_flops / 1e9:.0f} GFLOP/s ({r.peak_how})")
    console.print(f"wrote {fig.png}, {fig.markdown} and {fig.markdown.with_suffix('.json')}")
    return 0


def _floors_table(floors, bw: float) -> Table:
    table = Table(title="compulsory-byte floors per dycore step (icoforge/perf/floors.py)")
    for col in ("floor", "MB", "ms at copy bandwidth", "of kernel floor"):
        table.add_column(col, justify="left" if col == "floor" else "right")
    ms = floors.ms(bw)
    for key in ("kernel", "program", "substep"):
        b = getattr(floors, key)
        table.add_row(f"per {key}", f"{b / 1e6:.3f}", f"{ms[key]:.4f}", f"{100 * b / floors.kernel if floors.kernel else 0:.1f} %")
    return table


# --- profile --------------------------------------------------------------------------------------


def _kernel_names(args: argparse.Namespace, grid, static_values: dict[str, str], backend: str) -> tuple[list[str], object]:
    from icoforge.backend.schedule import pipeline
    from icoforge.backend.schedule.tuned import dim_sizes_of
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_program
    from icoforge.suite.backends import schedule_from_env, schedule_vendor
    from icoforge.suite.runner import static_variant

    # the kernels `icoforge run` compiles: int/bool scalars static (kernel names depend on it),
    # with the --static-values it is given, fused as its schedule says (fused kernels get other
    # names: the predictor solver's k2to5 is not matched by k2 ... k5)
    info = get_program(args.program)
    sizes = suite_sizes(info, grid)
    overrides, statics = static_variant(info, "icon4py", static_values)
    sizes = dataclasses.replace(sizes, scalars={**sizes.scalars, **overrides})
    pir = suite_program_ir(info, grid, sizes.scalars, statics)
    # at the grid's sizes: the default fuses a column walk only on grids with enough columns
    pir = pipeline.fuse(pir, schedule_from_env(schedule_vendor(backend)), dim_sizes_of(grid.connectivities))
    return [k.name for k in pir.kernels()], program_cost(pir, sizes)


def cmd_profile(args: argparse.Namespace) -> int:
    from icoforge.perf import profile

    backend = args.backend or ("icoforge-hip" if args.tool == "rocprof" else "icoforge-cuda")
    console = make_console(wide=args.wide)
    static_values = common_args.parse_static_values(args, [args.program])  # checked before the grid loads
    if args.schedule:
        from icoforge.suite.backends import use_schedule

        use_schedule(args.schedule)  # also the profiled `icoforge run`'s ($ICOFORGE_SCHEDULE)
    grid = _load_grid(args)
    with StepProgress(make_console(stderr=True)) as step:  # stderr: stdout is the command line to copy
        step("GT4Py passes and lowering (for the kernel names)")
        names, cost = _kernel_names(args, grid, static_values, backend)
    target = profile.target_command(args.program, args.grid, args.levels, backend, args.repeat, static_values)
    cmds = profile.profile_commands(args.tool, names, target, args.out)
    if not args.run:
        for c in cmds:
            print(profile.shell_line(c))
        return 0
    exe = cmds[0][0]
    if shutil.which(exe) is None:
        raise IcoforgeError(f"{exe} is not on PATH")
    for c in cmds:
        console.print(f"[dim]$ {profile.shell_line(c)}[/dim]", soft_wrap=True)
        res = subprocess.run(c)
        if res.returncode != 0:
            raise IcoforgeError(f"{exe} exited with status {res.returncode}")
    metrics = _read_metrics(args.tool, args.out, names)
    _print_profile(console, args, cost, metrics)
    return 0 if metrics else 1


def _read_metrics(tool: str, out: str, names: list[str]):
    from icoforge.perf import profile

    if tool == "ncu":
        return profile.parse_ncu_csv(pathlib.Path(f"{out}.csv").read_text())
    if tool == "nsys":
        found = sorted(pathlib.Path(out).parent.glob(f"{pathlib.Path(out).name}*kern_sum*.csv"))
        if not found:
            raise IcoforgeError(f"nsys stats wrote no cuda_gpu_kern_sum CSV next to {out}")
        return profile.only(profile.parse_nsys_kernsum(found[-1].read_text()), names)
    found = sorted(pathlib.Path(out).rglob("*kernel_trace.csv"))
    if not found:
        raise IcoforgeError(f"rocprofv3 wrote no kernel_trace.csv under {out}")
    return profile.only(profile.parse_rocprof_kernel_trace(found[-1].read_text()), names)


def _print_profile(console: Console, args: argparse.Namespace, cost, metrics) -> None:
    def f(v, scale=1.0, fmt="{:.1f}"):
        return "–" if v is None else fmt.format(v / scale)

    # on a narrow terminal (80 columns when piped) the counters go before the verdict columns:
    # time, DRAM bytes against the model and the bandwidth say whether the kernel is at its floor
    columns = [
        Col("kernel", no_wrap=True), Col("launches", 3, "right"), Col("median ms", 0, "right"),
        Col("model MB", 2, "right"), Col("DRAM MB", 2, "right"), Col("DRAM/model", 0, "right"),
        Col("DRAM GB/s", 0, "right"), Col("L1 hit %", 1, "right"), Col("L2 hit %", 1, "right"),
        Col("occupancy %", 1, "right"), Col("registers", 2, "right"),
    ]  # fmt: skip
    rows = []
    for k in cost.kernels:
        m = metrics.get(k.name)
        if m is None:
            rows.append([k.name, "0", *["–"] * 9])
            continue
        ratio = m.dram_bytes / k.bytes if m.dram_bytes is not None and k.bytes else None
        rows.append([
            k.name, str(m.launches), f(m.seconds, 1e-3, "{:.4f}"), f(k.bytes, 1e6, "{:.3f}"), f(m.dram_bytes, 1e6, "{:.3f}"),
            f(ratio, 1, "{:.2f}"), f(m.dram_bytes_per_s, 1e9), f(m.l1_hit_pct), f(m.l2_hit_pct), f(m.occupancy_pct),
            f(m.registers, 1, "{:.0f}"),
        ])  # fmt: skip
    title = f"{args.program} on {args.grid}/{args.levels}: {args.tool} vs the byte model"
    table = fit_table(console, title, columns, rows, wide=getattr(args, "wide", False))
    console.print(table)
