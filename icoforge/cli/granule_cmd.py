"""`icoforge greenline`: icon4py's dycore step (SolveNonhydro.time_step) with any backends;
`icoforge greenline-merge`: several of its JSON reports (e.g. parallel runs, one backend each) as one."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from rich.console import Console

from icoforge.cli import common_args, pymode, ranks_cmd
from icoforge.console import StepProgress, make_console


def register(subparsers: argparse._SubParsersAction) -> None:
    from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND, GRANULES
    from icoforge.granule.verify import DEFAULT_RTOL

    p = subparsers.add_parser(
        "greenline",
        help="the dycore granule (SolveNonhydro.time_step; --granule diffusion: Diffusion.run; --granule "
        "advection: tracer Advection.run): setup cost, step time per variant, per-program table",
        description=(
            "Build icon4py's SolveNonhydro as icon4py's benchmark does (static fields from its factories, "
            "random plausible state, combined divergence damping, 5 substeps) for each backend, then time "
            "the first/middle/last substep variants and every program inside the step."
        ),
    )
    common_args.grid(p, "R2B3", 10)
    p.add_argument(
        "--granule", default="dycore", choices=list(GRANULES),
        help="icon4py's component: dycore (SolveNonhydro.time_step, 5 substeps), diffusion (Diffusion.run as "
        "icon4py's benchmark configures it; one call per step) or advection (tracer Advection.run of qv, MIURA + "
        "PPM as icoforge's model; one call per step); same inputs, peers and report (default dycore)",
    )  # fmt: skip
    p.add_argument(
        "--backend", default="icoforge-cpu", help="backend to time; the reference of --verify (default icoforge-cpu)"
    )
    p.add_argument("--compare", nargs="+", default=[], metavar="BACKEND", help="more backends, same inputs")
    p.add_argument("--steps", type=int, default=5, help="timed steps per variant (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per variant before timing (default 1)")
    p.add_argument(
        "--profile-steps", type=int, default=1,
        help="dycore steps (5 substeps) with every program call timed; 0 skips the per-program table (default 1)",
    )  # fmt: skip
    p.add_argument(
        "--timing-rounds", type=int, default=1, metavar="N",
        help="time the steps in N turns on --gpu-lock, steps/N each: parallel runs then alternate, so a drift "
        "of the GPU's state is shared by all of them (default 1: all steps in one turn)",
    )  # fmt: skip
    p.add_argument("--verify", action="store_true", help="check each --compare backend against --backend (3 substeps)")
    p.add_argument(
        "--rtol",
        type=float,
        default=None,
        help=f"--verify tolerance on max|a-b|/max|ref| (default {DEFAULT_RTOL:g}; with --ranks 1e-12)",
    )
    p.add_argument(
        "--factory-backend", default=DEFAULT_FACTORY_BACKEND,
        help=f"backend of icon4py's geometry/interpolation/metric factories, run once per grid and cached "
        f"(default {DEFAULT_FACTORY_BACKEND}: ours, GT4Py's Python roundtrip for the programs we do not lower)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the initial state (default 0)")
    p.add_argument(
        "--floors-steps", type=int, default=0, metavar="N",
        help="icoforge backends, after the timing: N dycore steps with every program call recorded for the "
        "kernel/program/substep compulsory-byte floors (report and --latest; default 0: none)",
    )  # fmt: skip
    pymode.add_argument(p)
    p.add_argument("--cold", action="store_true", help="compile into an empty temporary icoforge cache (cold compile)")
    p.add_argument(
        "--only-used-variants", action="store_true",
        help="compile only the program variants the steps call (about half of icon4py's compile jobs)",
    )  # fmt: skip
    p.add_argument(
        "--substep-fusion", action="store_true",
        help="icoforge GPU backends (and their emulation): each substep's program calls run as one program, "
        "fused across programs (backend/runtime/substep.py); the per-program table still times them one by one",
    )  # fmt: skip
    p.add_argument(
        "--graph-replay", action="store_true",
        help="GPU backends, after the timing: each substep variant also captured as one CUDA graph and replayed "
        "(checked bit for bit against a normal call): what the host's part of a substep costs",
    )  # fmt: skip
    p.add_argument(
        "--save-reference", metavar="PATH",
        help="record --backend's results of the verification substeps (a compact fingerprint, JSON)",
    )  # fmt: skip
    p.add_argument(
        "--save-fields", metavar="PATH.npz",
        help="record --backend's results of the verification substeps whole (NumPy .npz; ~1.2 GB per substep on "
        "R2B6/80), for an element-wise comparison between two runs: python -m icoforge.granule.golden "
        "compare-fields REF.npz TEST.npz (a fingerprint reads rounding spread over all points as one point off)",
    )  # fmt: skip
    p.add_argument(
        "--reference", metavar="PATH", dest="reference_file",
        help="verify every backend against a recorded fingerprint (see --save-reference)",
    )  # fmt: skip
    common_args.gpu_lock(
        p, "during each backend's verification, timed and profiled steps, and shared while setting up: parallel "
        "runs (one backend each) never measure while another one compiles",
    )  # fmt: skip
    common_args.schedule(p)
    _output_arguments(p)
    ranks_cmd.add_arguments(p)
    p.set_defaults(func=cmd_greenline)

    m = subparsers.add_parser(
        "greenline-merge",
        help="several `greenline --json` reports of the same inputs as one side-by-side report",
        description=(
            "Print reports of `icoforge greenline --json` (e.g. one process per backend, run in parallel with "
            "--gpu-lock) as one report, as if their backends had been given together with --compare; the first "
            "file's backend is the reference column. Refused unless grid, levels, seed, steps and static fields "
            "agree and every backend appears once. LABEL=REPORT.json names the run (e.g. off=a.json fused=b.json): "
            "its backends are shown as 'icoforge-cuda (fused)', so one backend can be compared with itself "
            "(two schedules, two commits)."
        ),
    )
    m.add_argument(
        "reports",
        nargs="+",
        metavar="[LABEL=]REPORT.json",
        help="reports written by greenline --json, optionally labelled",
    )
    _output_arguments(m, "merged report")
    m.set_defaults(func=cmd_greenline_merge)


def _output_arguments(p: argparse.ArgumentParser, what: str = "report") -> None:
    """What `_output` writes besides the tables, for both commands: --json, --markdown and --latest."""
    common_args.report_files(p, what)
    p.add_argument(
        "--latest", metavar="PATH",
        help="also write the headline record (benchmarks/granule-latest.json: step ms and cold compile per "
        "backend, floors, commit, machine)",
    )  # fmt: skip
    p.add_argument("--floors", metavar="ROOFLINE.json", help="with --latest: floors_ms from `roofline greenline --json`"
                   " (default: the report's own, from --floors-steps)")  # fmt: skip
    p.add_argument("--commit", help="with --latest: the commit measured (default: git rev-parse HEAD, if any)")


def cmd_greenline(args: argparse.Namespace) -> int:
    from icoforge.granule.greenline import GreenlineOptions, run_greenline
    from icoforge.granule.verify import DEFAULT_RTOL

    pymode.ensure(args.python_mode, args.cli_argv)  # before anything is imported or compiled
    if args.schedule:
        from icoforge.suite.backends import use_schedule

        use_schedule(args.schedule)
    if ranks_cmd.wanted(args):  # decomposed over MPI ranks (starts mpirun outside MPI)
        if args.granule != "dycore":
            from icoforge.errors import IcoforgeError

            raise IcoforgeError(f"--ranks: the dycore granule only, not --granule {args.granule}")
        return ranks_cmd.run(args)
    ranks_cmd.refuse_ranks_options(args)
    if args.rtol is None:  # --ranks has its own default
        args.rtol = DEFAULT_RTOL
    opts = common_args.options(GreenlineOptions, args, backends=tuple(dict.fromkeys([args.backend, *args.compare])))
    json_only = args.json == "-"
    console = make_console(stderr=True, wide=args.wide) if json_only else make_console(wide=args.wide)
    if args.verify and len(opts.backends) < 2:
        console.print("[yellow]--verify needs a --compare backend; nothing to verify[/yellow]")

    from icoforge.perf.greenline import granule_floors
    from icoforge.perf.model import sequence_bytes

    with StepProgress(console) as step:
        report = run_greenline(opts, progress=step, log=step.log, byte_model=sequence_bytes, floor_model=granule_floors)

    _output(report.to_json(), args, console)
    failed = [c for c in report.comparisons if not c.passed]
    return 1 if failed else 0


def _output(data: dict, args: argparse.Namespace, console: Console) -> None:
    """Tables on the console (none with --json -), and the --json / --markdown files."""
    from icoforge.granule.report import markdown_report, print_report

    if args.json == "-":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print_report(data, console)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
            console.print(f"report written to {args.json}")
    if args.markdown:
        from icoforge.granule.charts import pictures_markdown

        md = pathlib.Path(args.markdown)
        md.write_text(markdown_report(data) + pictures_markdown(data, md))
        console.print(f"Markdown report written to {args.markdown} (pictures beside it)")
    if args.latest:
        from icoforge.granule.latest import git_commit, write_latest

        write_latest(args.latest, data, args.commit or git_commit(), args.floors)
        console.print(f"headline record written to {args.latest}")


def cmd_greenline_merge(args: argparse.Namespace) -> int:
    from icoforge.granule.merge import load_labelled, merge_reports

    merged = merge_reports([load_labelled(arg) for arg in args.reports])
    console = make_console(stderr=True, wide=args.wide) if args.json == "-" else make_console(wide=args.wide)
    _output(merged, args, console)
    failed = [c for c in merged["verification"] if not c.get("passed", True)]
    return 1 if failed else 0
