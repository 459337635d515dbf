"""`icoforge model`: icon4py's driver (the model: dycore, diffusion, ...) with a backend by name.

    icoforge model --experiment jw --grid R2B4 --levels 35 --backend icoforge-cpu --steps 20
    icoforge model --config-dir DIR --grid FILE.nc --backend icoforge-cpu
    icoforge model --check                        # the stored JW run, compared with gtfn_cpu's results
    icoforge model --check --muphys               # the stored moist JW run with muphys (--tracers: qv advected only)
    icoforge model --experiment jw --grid R2B4 --steps 2880 --diagnostics --markdown benchmarks/model-jw.md
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

from icoforge.errors import IcoforgeError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "model",
        help="run icon4py's driver (the model) with a backend: a named experiment (jw) or icon4py's config directory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--experiment", default=None, help="named experiment (default jw): jw = Jablonowski-Williamson baroclinic wave")
    src.add_argument("--config-dir", type=pathlib.Path, help="icon4py's configuration directory (the namelist JSONs its CLI reads)")
    p.add_argument("--grid", default="R2B4", help="grid preset (`icoforge grid list`) or ICON grid file (default R2B4)")
    p.add_argument("--levels", type=int, default=None, help="vertical levels (default 35 for jw; a config directory has its own)")
    p.add_argument("--backend", default="icoforge-cpu", help="backend name (icoforge's registry: icoforge-cpu, icoforge-cuda, gtfn_cpu, dace_gpu, ...)")
    p.add_argument("--steps", type=int, default=None, help="time steps (default 10 for jw; a config directory has its stop date)")
    p.add_argument("--dtime", type=float, default=None, help="time step in s (jw default: 300 s on R2B4, halved per finer level)")
    p.add_argument("--substeps", type=int, default=5, help="dynamics substeps per step (jw; default 5)")
    p.add_argument("--tracers", action="store_true", help="jw: moist, with icon4py's tracer advection of qv")
    p.add_argument("--muphys", action="store_true", help="jw: moist, with muphys (AES graupel) and advection of its six species")
    p.add_argument("--diagnostics", action="store_true", help="global dry mass and minimum surface pressure after every step")
    p.add_argument("--markdown", type=pathlib.Path, help="with --diagnostics: write a Markdown report and a PNG beside it")
    p.add_argument("--check", action="store_true", help="run the stored JW configuration (with --muphys or --tracers: the stored "
                   "moist one) and compare with the stored gtfn_cpu results")
    p.add_argument("--verbose", action="store_true", help="icon4py's own log lines (INFO)")
    p.set_defaults(func=cmd_model)


def say(message: str) -> None:
    """Progress, one line each, on stderr: also when piped (no spinner)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cmd_model(args: argparse.Namespace) -> int:
    from icoforge.grids.load import resolve_grid_path
    from icoforge.model import experiments, run
    from icoforge.suite.backends import get_backend

    if args.check:
        return _check(args)
    backend = get_backend(args.backend)  # a misspelt name fails here, before anything is built
    if args.config_dir is None:
        experiments.lookup_experiment(args.experiment or "jw")
    if args.markdown and not args.diagnostics:
        raise IcoforgeError("--markdown writes the --diagnostics report: add --diagnostics")
    grid_file = resolve_grid_path(args.grid)
    run.quiet_icon4py(args.verbose)
    with tempfile.TemporaryDirectory(prefix="icoforge-model-") as tmp:
        cfg = _config(args, pathlib.Path(tmp) / "output")
        _print_config(cfg, args, grid_file)
        session = run.start(cfg.config, grid_file, backend, say)
        diag = _step_all(session, args.diagnostics)
    _print_summary(session, args)
    if args.markdown:
        from icoforge.model import longrun

        longrun.write(args.markdown, cfg, args, session, diag)
        say(f"wrote {args.markdown} and {args.markdown.with_suffix('.png')}")
    return 0


def _config(args: argparse.Namespace, output: pathlib.Path):
    from icoforge.model import experiments

    if args.config_dir is not None:
        if args.dtime is not None or args.tracers or args.muphys:
            raise IcoforgeError("--dtime, --tracers, --muphys are for named experiments; a config directory has its own")
        return experiments.from_directory(args.config_dir, steps=args.steps, levels=args.levels, output=output)
    dtime = args.dtime if args.dtime is not None else experiments.default_dtime(args.grid) if not _is_file(args.grid) else 300.0
    return experiments.jw_config(levels=args.levels or 35, dtime_s=dtime, steps=args.steps or 10,
                                 substeps=args.substeps, output=output, tracers=args.tracers, muphys=args.muphys)


def _is_file(grid: str) -> bool:
    from icoforge.grids.load import is_grid_file

    return is_grid_file(grid)


def _print_config(cfg, args: argparse.Namespace, grid_file: pathlib.Path) -> None:
    from icoforge.model import experiments

    say(f"grid {args.grid} ({grid_file}), backend {args.backend}")
    for name, value in experiments.describe(cfg):
        say(f"{name}: {value}")
    for note in cfg.notes:
        say(f"changed/said: {note}")
    if not cfg.notes:
        say("configuration: nothing needed changing")


def _step_all(session, diagnostics: bool) -> list:
    from icoforge.model import report, run

    total = session.driver.model_time_variables.n_time_steps
    diag, rows = None, []
    if diagnostics:
        from icoforge.model.diagnostics import Diagnostics

        diag = Diagnostics(session)
        rows.append(diag.measure(session, 0))
    say(f"stepping: {total} steps (step 1 compiles what initialize_driver did not)")
    for _ in range(total):
        step = session.step()
        extra = ""
        if diag is not None:
            d = diag.measure(session, step.index)
            rows.append(d)
            rel = (d.dry_mass_kg - rows[0].dry_mass_kg) / rows[0].dry_mass_kg
            extra = f", dry mass rel. change {rel:+.2e}, min p_sfc {d.min_surface_pressure_pa / 100:.2f} hPa"
        say(report.step_line(step, total, extra))
    if run.workers_alive():
        say(f"{run.workers_alive()} GT4Py compile worker process(es) still alive at the end")
    return rows


def _print_summary(session, args: argparse.Namespace) -> None:
    from icoforge.console import Col, fit_table, make_console
    from icoforge.model import report

    console = make_console(wide=args.wide)
    rows = [list(r) for r in report.summary_rows(session)]
    title = f"icon4py driver, {args.backend}, {args.grid}"
    console.print(fit_table(console, title, [Col("what"), Col("time", justify="right")], rows))
    for line in report.timing_caveats(session, load=os.getloadavg()[0]):
        console.print(f"note: {line}")


def _check(args: argparse.Namespace) -> int:
    """The stored JW configuration with --backend, compared with the stored results."""
    from icoforge.model import check

    from icoforge.model import store

    if args.config_dir is not None or args.experiment not in (None, "jw"):
        raise IcoforgeError("--check runs the stored JW configuration: it takes only --backend (and --muphys or --tracers)")
    if args.muphys and args.tracers:
        raise IcoforgeError("--check takes --muphys or --tracers, not both (one stored run each)")
    moist = "muphys" if args.muphys else "tracers" if args.tracers else ""
    path = store.store_path(moist)
    if not path.is_file():
        raise IcoforgeError(f"no stored {moist or 'dry'} JW run ({path.name}): record one with scripts/model/record_jw.py")
    result = check.run_check(args.backend, say, path=path, verbose=args.verbose)
    _print_summary(result.session, args)
    for line in result.lines:
        print(line)
    print(f"{args.backend} vs {result.reference}: {result.verdict.upper()}")
    return 0 if result.verdict != "failed" else 1
