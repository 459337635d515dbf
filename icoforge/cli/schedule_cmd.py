"""`icoforge schedule show PROGRAM` and `icoforge schedule check PROGRAM --set NAME=VALUE ...`:
kernel schedules of a program, checked, generated and compiled (nvcc sm_90 / hipcc gfx90a)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib

from icoforge.cli import common_args
from icoforge.console import Col, StepProgress, fit_table, make_console
from icoforge.errors import IcoforgeError, UnknownNameError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", help="program name (see `icoforge list`)")
    p.add_argument("--target", default="cuda", choices=("cuda", "hip"), help="GPU target (default cuda)")
    common_args.grid(p, "R2B4", 80)
    p.add_argument("--schedule", metavar="FILE", help="start from a ProgramSchedule JSON file instead of the vendor default")
    p.add_argument("--smem-limit", type=int, default=None, metavar="BYTES",
                   help="shared memory per block for staged tables (default: 48 KiB CUDA, 64 KiB HIP)")  # fmt: skip
    p.add_argument("--no-compile", action="store_true", help="check and generate only, do not run nvcc/hipcc")
    p.add_argument("--emit", metavar="FILE", help="also write the generated kernel source to FILE")
    p.add_argument("--fuse", action="store_true",
                   help="fuse neighbouring same-domain kernels (the schedule's fuse knob for this program)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the schedule and resources as JSON")


def register(subparsers: argparse._SubParsersAction) -> None:
    sched = subparsers.add_parser("schedule", help="kernel schedules: show a program's, check a modified one")
    sub = sched.add_subparsers(dest="schedule_command", required=True, metavar="{show,check}")

    p = sub.add_parser("show", help="a program's kernels with their schedules and registers/spills (nvcc/hipcc)")
    _common(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser(
        "check", help="apply --set NAME=VALUE to the schedule, validate, generate and compile; print resources"
    )
    _common(p)
    p.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="NAME=VALUE",
        help="schedule parameter, e.g. block=256,1 k_per_thread=4 k_unroll=2 h_per_thread=2 smem_tables=C2E "
        "max_registers=64 min_blocks_per_sm=2 index_bits=32|64|auto chiplet_remap=true chiplets=8 stride_sets=true|false "
        "(repeatable)",
    )  # fmt: skip
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help="apply the settings to this kernel only (repeatable; default: every kernel)")  # fmt: skip
    p.set_defaults(func=cmd_check)


def _program_schedule(args: argparse.Namespace, settings: list[str], kernels: list[str]):
    from icoforge.backend.schedule.schedule import ProgramSchedule, default_program_schedule

    if args.schedule:
        try:
            ps = ProgramSchedule.loads(pathlib.Path(args.schedule).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise IcoforgeError(f"cannot read schedule file {args.schedule}: {e}") from None
    else:
        ps = default_program_schedule(args.target)
    if args.smem_limit is not None:
        ps = dataclasses.replace(ps, smem_limit_bytes=args.smem_limit)
    if args.fuse:
        ps = dataclasses.replace(ps, fuse=(*ps.fuse, args.program))
    if settings and not kernels:  # as this program's schedule: tables it cannot stage are refused
        ps = ps.with_program(args.program, ps.for_kernel("", args.program).with_settings(settings))
    for name in kernels:
        ps = ps.with_kernel(name, ps.for_kernel(name).with_settings(settings))
    return ps


def _run(args: argparse.Namespace, settings: list[str], kernels: list[str]) -> int:
    from icoforge.backend.passes.fuse import fuse_kernels
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.gpu_check import find_hipcc, find_nvcc, hipcc_check, nvcc_check
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import resolve
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import get_program

    info = get_program(args.program)
    console = make_console(wide=args.wide)
    # parse the settings before the (slow) GT4Py passes: a typo fails at once
    parsed = _program_schedule(args, settings, [])
    with StepProgress(make_console(stderr=True)) as step:  # stderr: --json output stays parseable
        step(f"GT4Py passes for {info.name} (cached after the first time)")
        grid = load_grid(args.grid, levels=args.levels, show_progress=False)
        program = program_ir(info.program, grid.connectivities, parsed.inline)
    if parsed.fuses(program.name):  # kernel names are the fused ones then
        program = fuse_kernels(program)
    names = [k.name for k in program.kernels()]
    for name in kernels:
        if name not in names:
            raise UnknownNameError(f"kernel of {info.name}", name, names)
    ps = _program_schedule(args, settings, kernels)
    launches = resolve(program, ps, args.target)  # ScheduleError before generating or compiling
    art = gpu_artifact(program, args.target, dataclasses.replace(ps, fuse=()))  # fused above
    if args.emit:
        pathlib.Path(args.emit).write_text(art.module_source)

    resources: dict = {}
    note = ""
    if args.no_compile:
        note = "not compiled (--no-compile)"
    else:
        compiler, check = (find_nvcc(), nvcc_check) if args.target == "cuda" else (find_hipcc(), hipcc_check)
        what = "nvcc sm_90" if args.target == "cuda" else "hipcc gfx90a"
        if compiler is None:
            if args.schedule_command == "check":
                raise IcoforgeError(f"schedule valid and generated, but {what.split()[0]} is not installed: not compiled")
            note = f"{what.split()[0]} not installed: no register counts"
        else:
            with StepProgress(make_console(stderr=True)) as step:
                step(f"compiling with {what}")
                resources = {r.kernel: r for r in check(art.module_source)}
            note = f"resources from {what}"

    if args.json:
        out = {"program": info.name, "target": args.target, "schedule": ps.to_json(), "kernels": []}
        for name in names:
            la, r = launches[name], resources.get(name)
            out["kernels"].append({
                "kernel": name, "kind": la.kind, "schedule": la.schedule.to_json(), "effective": la.describe(),
                "smem_bytes": la.smem_bytes,
                "resources": None if r is None else {"registers": r.registers, "spill_stores": r.spill_stores,
                                                     "spill_loads": r.spill_loads, "shared_bytes": r.shared_bytes,
                                                     "stack_bytes": r.stack_bytes},
            })  # fmt: skip
        print(json.dumps(out, indent=2))
        return 0

    priority = {"kind": 3, "shared B": 2, "spills (st/ld B)": 1}  # dropped first on a narrow terminal: highest
    columns = [
        Col(c, priority=priority.get(c, 0), justify="right" if c in ("registers", "shared B") else "left")
        for c in ("kernel", "kind", "schedule (effective)", "registers", "spills (st/ld B)", "shared B")
    ]
    rows = []
    for name in names:
        la, r = launches[name], resources.get(name)
        regs = "-" if r is None else str(r.registers)
        spills = "-" if r is None else f"{r.spill_stores}/{r.spill_loads}"
        shared = str(la.smem_bytes) if r is None else str(r.shared_bytes)
        rows.append([name, la.kind, la.describe(), regs, spills, shared])
    console.print(fit_table(console, f"{info.name}: kernels on {args.target.upper()}", columns, rows, caption=note))
    if args.emit:
        console.print(f"source written to {args.emit}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    return _run(args, [], [])


def cmd_check(args: argparse.Namespace) -> int:
    if args.kernel and not args.settings:
        raise IcoforgeError("--kernel needs at least one --set NAME=VALUE")
    return _run(args, args.settings, args.kernel)
