"""`icoforge model`: icon4py's driver (the model: dycore, diffusion, ...) with a backend by name.

    icoforge model --experiment jw --grid R2B4 --levels 35 --backend icoforge-cpu --steps 20
    icoforge model --config-dir DIR --grid FILE.nc --backend icoforge-cpu
    icoforge model --check                        # the stored JW run, compared with gtfn_cpu's results
    icoforge model --check --muphys               # the stored moist JW run with muphys (--tracers: qv advected only)
    icoforge model --experiment jw --grid R2B4 --steps 2880 --diagnostics --markdown benchmarks/model-jw.md
    icoforge model --grid R2B6 --levels 80 --backend icoforge-cuda --steps 20 --component-steps 5 --json model.json
    icoforge model --merge model-*.json            # time to solution side by side (Markdown, 80 columns)

Time to solution (--json, the summary): time to the first step (process start to the end of step
1, and icon4py's setup phases plus step 1), per-step median and min after --warmup steps (steps
while a GT4Py compile worker was busy and stalls above 2x the median named apart), and with
--component-steps N, N more steps with each component (dycore, diffusion, advection,
microphysics) timed between device synchronisations and the driver's rest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import sys
import tempfile
import time

from icoforge.cli import common_args
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
    p.add_argument("--warmup", type=int, default=1, help="steps left out of the step statistics (default 1: step 1 compiles)")
    p.add_argument("--component-steps", type=int, default=0, metavar="N",
                   help="after --steps, N more steps with each component timed between device synchronisations "
                   "(they change the step: never in the step statistics)")
    p.add_argument("--json", type=pathlib.Path, metavar="FILE",
                   help="the timings as JSON, written after every phase and step (a run cut by a deadline leaves what it had)")
    p.add_argument("--peer-programs", choices=("per-program", "driver"), default="per-program",
                   help="icon4py descriptors (gtfn_gpu, dace_gpu, ...): per-program = the granules get the descriptor, "
                   "each program icon4py's options (default); driver = one backend for everything, as icon4py's driver CLI")
    p.add_argument("--merge", type=pathlib.Path, nargs="+", metavar="JSON",
                   help="no run: the --json files of several runs as one Markdown table (stdout)")
    common_args.gpu_lock(p, "for the whole run (setup, compiling and steps: the time to the first step is timed)")
    p.set_defaults(func=cmd_model)


def say(message: str) -> None:
    """Progress, one line each, on stderr: also when piped (no spinner)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cmd_model(args: argparse.Namespace) -> int:
    from icoforge.grids.load import resolve_grid_path
    from icoforge.model import experiments, run, timing
    from icoforge.suite.backends import get_backend, warm_compile_workers

    if args.merge:
        return _merge(args.merge)
    if args.check:
        return _check(args)
    process_start = timing.process_start_epoch()
    backend = get_backend(args.backend)  # a misspelt name fails here, before anything is built
    warm_compile_workers(args.backend, backend)  # they import while the configuration is built
    if args.config_dir is None:
        experiments.lookup_experiment(args.experiment or "jw")
    if args.markdown and not args.diagnostics:
        raise IcoforgeError("--markdown writes the --diagnostics report: add --diagnostics")
    if args.warmup < 0 or args.component_steps < 0:
        raise IcoforgeError("--warmup and --component-steps take a count >= 0")
    lock = common_args.open_gpu_lock(args, say)
    # the record first: a run stopped while it still builds its configuration leaves its time too
    record = timing.Record(args.backend, {"grid": args.grid, "levels": args.levels}, warmup=args.warmup,
                           process_start=process_start, path=args.json)  # fmt: skip
    record.phase("configuration ...")
    grid_file = resolve_grid_path(args.grid)
    run.quiet_icon4py(args.verbose)
    with tempfile.TemporaryDirectory(prefix="icoforge-model-") as tmp, contextlib.ExitStack() as stack:
        record.lock_wait_s = stack.enter_context(lock.hold(args.backend, "model run")) if lock else 0.0
        cfg = _config(args, pathlib.Path(tmp) / "output")
        _print_config(cfg, args, grid_file)
        record.meta = _meta(args, cfg, backend)
        record.t_start = time.time()  # the driver's setup begins
        record.write()

        def progress(message: str) -> None:
            say(message)
            record.phase(message)

        with record.heartbeat() if args.json else contextlib.nullcontext():
            session = run.start(cfg.config, grid_file, backend, progress, per_program=args.peer_programs == "per-program",
                                times=record.setup_s, owners=record.setup_owners_s)  # fmt: skip
            record.meta["peer_config"] = _peer_config(args.backend, session.peer_options)
            diag = _step_all(session, args.diagnostics, record, args.component_steps)
        record.finished = True
        record.write()
    _print_summary(session, args, record)
    if args.json:
        say(f"wrote {args.json}")
    if args.markdown:
        from icoforge.model import longrun

        longrun.write(args.markdown, cfg, args, session, diag)
        say(f"wrote {args.markdown} and {args.markdown.with_suffix('.png')}")
    return 0


def _meta(args: argparse.Namespace, cfg, backend) -> dict:
    """What the timing record says about the run besides its times."""
    from icoforge.model import experiments

    c = cfg.config
    return {
        "grid": args.grid, "levels": c.vertical_grid.num_levels, "source": cfg.source,
        "components_on": experiments.components(c), "dtime_s": float(c.driver.dtime.total_seconds()),
        "substeps": c.driver.ndyn_substeps, "python_optimized": not __debug__, "device": _device(backend),
        "tree": os.environ.get("ICF_TREE"), "peer_programs": args.peer_programs, "cache_entries_at_start": _cache_state(),
    }  # fmt: skip


def _cache_state() -> dict:
    """Entries in the compile caches when the run began (none anywhere: a cold time to the first
    step): icoforge's per kind, GT4Py's build cache (when persistent: GT4Py's
    `config.BUILD_CACHE_DIR`, i.e. $GT4PY_BUILD_CACHE_DIR/.gt4py_cache), CuPy's kernel cache."""
    from icoforge.cache import cache_root

    def count(path: pathlib.Path) -> int:
        return sum(1 for _ in path.iterdir()) if path.is_dir() else 0

    root = cache_root()
    out = {f"icoforge {d.name}": count(d) for d in sorted(root.iterdir()) if d.is_dir() and d.name not in ("grids", "granule-fields")}
    from gt4py.next import config as gt4py_config

    if gt4py_config.BUILD_CACHE_LIFETIME.name == "PERSISTENT":  # else a fresh session directory: nothing held
        out["gt4py"] = count(pathlib.Path(gt4py_config.BUILD_CACHE_DIR))  # $GT4PY_BUILD_CACHE_DIR/.gt4py_cache
    out["cupy"] = count(pathlib.Path(os.environ.get("CUPY_CACHE_DIR", pathlib.Path.home() / ".cupy" / "kernel_cache")))
    return out


def _device(backend) -> str:
    """The GPU's name for a GPU backend, else the CPU's model and core count."""
    from icon4py.model.common import model_backends

    try:
        if model_backends.is_gpu_backend(backend if backend is not None else None):
            import cupy as cp

            name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as e:  # a record without the device's name is still a record
        return f"GPU ({type(e).__name__})"
    model = next((line.split(":", 1)[1].strip() for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "CPU") if pathlib.Path("/proc/cpuinfo").exists() else "CPU"  # fmt: skip
    return f"{model}, {os.cpu_count()} cores"


def _peer_config(name: str, options: dict[str, str]) -> dict:
    from icoforge.suite import peers

    return peers.peer_config(name, options)


def _merge(paths: list[pathlib.Path]) -> int:
    import json

    from icoforge.model import report

    records = []
    for path in paths:
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            raise IcoforgeError(f"--merge {path}: {e}") from e
    print(report.markdown(records))
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


def _step_all(session, diagnostics: bool, record=None, component_steps: int = 0) -> list:
    from icoforge.model import report, run

    total = session.driver.model_time_variables.n_time_steps
    diag, rows = None, []
    if diagnostics:
        from icoforge.model.diagnostics import Diagnostics

        diag = Diagnostics(session)
        rows.append(diag.measure(session, 0))
    more = f" + {component_steps} with each component timed between device synchronisations" if component_steps else ""
    say(f"stepping: {total} steps{more} (step 1 compiles what initialize_driver did not)")
    clock = session.component_clock() if component_steps else None
    for i in range(total + component_steps):
        step = session.step(clock if i >= total else None)
        extra = ""
        if diag is not None:
            d = diag.measure(session, step.index)
            rows.append(d)
            rel = (d.dry_mass_kg - rows[0].dry_mass_kg) / rows[0].dry_mass_kg
            extra = f", dry mass rel. change {rel:+.2e}, min p_sfc {d.min_surface_pressure_pa / 100:.2f} hPa"
        if record is not None:
            record.add_step(step.seconds, step.worker_cpu_s, step.worker_busy, step.gc_ms, step.components)
        if step.components is not None:
            extra += " (components timed: " + ", ".join(f"{c} {s * 1e3:.1f} ms" for c, s in step.components.items()) + ")"
        say(report.step_line(step, total + component_steps, extra))
    if run.workers_alive():
        say(f"{run.workers_alive()} GT4Py compile worker process(es) still alive at the end")
    return rows


def _print_summary(session, args: argparse.Namespace, record=None, grid: str | None = None) -> None:
    from icoforge.console import Col, fit_table, make_console
    from icoforge.model import report

    console = make_console(wide=args.wide)
    rows = [list(r) for r in report.summary_rows(session)]
    title = f"icon4py driver, {args.backend}, {grid or args.grid}"
    console.print(fit_table(console, title, [Col("what"), Col("time", justify="right")], rows))
    for line in report.timing_caveats(session, load=os.getloadavg()[0]):
        console.print(f"note: {line}")
    if record is not None:
        print(report.markdown([record.to_json()]))  # plain: Markdown, neither rich markup nor re-wrapped


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
    meta = result.stored_meta
    _print_summary(result.session, args, grid=f"{meta['grid']}/{meta['levels']} levels")  # the stored run's, not --grid's default
    for line in result.lines:
        print(line)
    print(f"{args.backend} vs {result.reference}: {result.verdict.upper()}")
    return 0 if result.verdict != "failed" else 1
