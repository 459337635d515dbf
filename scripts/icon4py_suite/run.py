"""Run icon4py 0.4.1's own stencil tests with icoforge's CPU backend (`make test-icon4py`).

    python scripts/icon4py_suite/run.py [RUN ...] [--out-dir build/icon4py-suite] [--markdown M.md]
    python scripts/icon4py_suite/run.py --backend icoforge.backend:cuda ...   # on a GPU
    python scripts/icon4py_suite/run.py --list

Each RUN (RUNS below; default: every one) is one pytest process started in icon4py's tests folder
($ICON4PY_TESTS, default ../shared/icon4py-0.4.1-tests beside the project: icon4py's files, used
from there, never copied), with its pyproject.toml as pytest's configuration,
`--backend icoforge.backend:cpu` (or --backend's) and our plugin (suite_plugin.py: precision check, known GT4Py
failures as strict xfails, outcomes and whose error to JSON). pytest prints a line per test (-v).
Afterwards table.py writes the Markdown table per package. Exit status: 0 when every run had no
failure, error or XPASS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import resource
import shlex
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_TESTS = ROOT.parent / "shared" / "icon4py-0.4.1-tests"

STENCIL_TESTS = {
    "dycore": "model/atmosphere/dycore/tests/dycore/stencil_tests",
    "diffusion": "model/atmosphere/diffusion/tests/diffusion/stencil_tests",
    "tracer_advection": "model/atmosphere/tracer_advection/tests/tracer_advection/stencil_tests",
    "muphys": "model/atmosphere/subgrid_scale_physics/muphys/tests/muphys/stencil_tests",
    "common/interpolation": "model/common/tests/common/interpolation/stencil_tests",
    "common/math": "model/common/tests/common/math/stencil_tests",
}


@dataclasses.dataclass(frozen=True)
class Run:
    name: str
    precision: str  # "double" or "mixed" (icon4py's FLOAT_PRECISION)
    grid: str  # "simple", or PRESET:LEVELS / FILE:LEVELS (icon4py's --grid FILE:LEVELS)
    paths: tuple[str, ...]  # test folders or files, relative to icon4py's tests folder
    why: str


_DYCORE = STENCIL_TESTS["dycore"]
_DIFFUSION = STENCIL_TESTS["diffusion"]

# What `make test-icon4py` (and CI) runs; see the Makefile and README for the times behind the choice.
RUNS = {
    r.name: r
    for r in (
        Run("double-simple", "double", "simple", tuple(STENCIL_TESTS.values()),
            "every stencil test of the six packages, icon4py's default precision"),
        Run("mixed-simple", "mixed", "simple", (_DYCORE, _DIFFUSION),
            "the packages whose programs use vpfloat (float32 in mixed precision)"),
        Run("double-r2b4", "double", "R2B4:30", (
            f"{_DYCORE}/test_vertically_implicit_dycore_solver_at_predictor_step.py",
            f"{_DYCORE}/test_compute_theta_rho_face_values_and_pressure_gradient_and_update_vn.py",
            f"{_DIFFUSION}/test_apply_diffusion_to_vn.py",
        ), "three dycore/diffusion programs on an ICON grid (icoforge's R2B4 preset, 30 levels): real "
           "connectivities, boundary zones and skip values, which the simple grid does not have"),
    )
}


def grid_option(grid: str) -> tuple[str, str]:
    """(icon4py's --grid value, kind for the known-failure list) for `simple` or PRESET/FILE:LEVELS."""
    if grid == "simple":
        return "simple", "simple"
    where, sep, levels = grid.rpartition(":")
    if not sep or not levels.isdigit() or int(levels) <= 0:
        raise SystemExit(f"grid {grid!r}: give `simple`, PRESET:LEVELS (e.g. R2B4:30) or FILE:LEVELS")
    from icoforge.grids import resolve_grid_path  # generates a preset into the cache if needed

    return f"{resolve_grid_path(where)}:{levels}", "icon"


def run_one(run: Run, tests: pathlib.Path, out_dir: pathlib.Path, extra: list[str], backend: str = "icoforge.backend:cpu") -> dict:
    grid, kind = grid_option(run.grid)
    results = out_dir / f"{run.name}.json"
    results.unlink(missing_ok=True)
    env = {
        **os.environ,
        "FLOAT_PRECISION": run.precision,  # before pytest starts: see suite_plugin.py
        "ICOFORGE_I4P_PRECISION": run.precision,
        "ICOFORGE_I4P_GRID_KIND": kind,
        "ICOFORGE_I4P_GRID": run.grid,
        "ICOFORGE_I4P_RUN": run.name,
        "ICOFORGE_I4P_TESTS": str(tests),
        "ICOFORGE_I4P_RESULTS": str(results),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    }
    cmd = [
        sys.executable, "-m", "pytest", "-p", "suite_plugin", "-p", "no:cacheprovider", "--benchmark-disable",
        "-v", "-rfEX", "--durations=5", "--backend", backend, "--grid", grid,
        *(["--enable-mixed-precision"] if run.precision == "mixed" else []), *extra, *run.paths,
    ]
    print(f"icon4py-suite: {run.name} ({run.why})\n  in {tests}: {' '.join(cmd[1:])}", flush=True)
    load_before = load_average_text()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    rc, output = run_printing(cmd, tests, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    data = json.loads(results.read_text()) if results.is_file() else collection_failure(run, rc, output, backend)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    data.update(pytest_rc=rc, wall_s=time.time() - t0, cpu_s=cpu, load_before=load_before,
                paths=list(run.paths), why=run.why, cores=os.cpu_count())
    results.write_text(json.dumps(data, indent=1))
    print(f"icon4py-suite: {run.name}: pytest exit {rc}, {data['wall_s'] / 60:.1f} min wall, "
          f"{cpu / 60:.1f} min CPU (pytest and its compile workers)", flush=True)
    return data


def run_printing(cmd: list[str], cwd: pathlib.Path, env: dict[str, str]) -> tuple[int, str]:
    """Run pytest, its output passed through line by line; (exit status, its last 400 lines)."""
    tail: list[str] = []
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            tail = (tail + [line])[-400:]
    sys.stdout.flush()
    return proc.returncode, "".join(tail)


def collection_failure(run: Run, rc: int, output: str, backend: str = "icoforge.backend:cpu") -> dict:
    """pytest stopped before any test (no results file): the known collection failure it matches
    (then the run is as expected), else an unknown one that fails the run."""
    from known_failures import known_collection_failure

    known = known_collection_failure(output, run.precision)
    errors = [line.strip() for line in output.splitlines() if line.startswith("E ")]
    message = known.reason if known else (errors[0] if errors else output.strip().splitlines()[-1:])
    print(f"icon4py-suite: {run.name}: no test collected; " + (f"known, {known.owner} error: {known.reason}" if known else "not a known failure"))
    return {"run": run.name, "precision": run.precision, "vpfloat": "-", "wpfloat": "-", "grid": run.grid,
            "backend": backend, "exitstatus": rc, "tests": [],
            "collection_error": {"known": bool(known), "whose": known.owner if known else "unknown",
                                 "message": str(message), "first_error": errors[0] if errors else ""}}


def is_clean(data: dict) -> bool:
    if "collection_error" in data:
        return data["collection_error"]["known"]
    return data["pytest_rc"] == 0


def load_average_text() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", metavar="RUN", help=f"default: all of {', '.join(RUNS)}")
    parser.add_argument("--list", action="store_true", help="list the runs and exit")
    parser.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "build" / "icon4py-suite")
    parser.add_argument("--markdown", type=pathlib.Path, help="write the tables (table.py) here")
    backends = ("icoforge.backend:cpu", "icoforge.backend:cuda", "icoforge.backend:hip", "icoforge.backend:gpu")
    parser.add_argument("--backend", default=backends[0], choices=backends,
                        help="icoforge's backend object icon4py's --backend gets (default: the CPU one)")
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, e.g. \"-k 'nabla'\"")
    args = parser.parse_args(argv)
    if args.list:
        for r in RUNS.values():
            print(f"{r.name:14} {r.precision:6} grid {r.grid:8} {len(r.paths)} path(s): {r.why}")
        return 0
    unknown = [n for n in args.runs if n not in RUNS]
    if unknown:
        parser.error(f"unknown run(s) {', '.join(unknown)}; valid: {', '.join(RUNS)}")
    tests = pathlib.Path(os.environ.get("ICON4PY_TESTS", DEFAULT_TESTS))
    if not (tests / "pyproject.toml").is_file():
        raise SystemExit(f"icon4py's tests not found at {tests} (set ICON4PY_TESTS to icon4py 0.4.1's tests folder)")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    done = [run_one(RUNS[n], tests, args.out_dir, shlex.split(args.pytest_args), args.backend) for n in (args.runs or RUNS)]
    if args.markdown:
        from table import write_markdown

        write_markdown([args.out_dir / f"{d['run']}.json" for d in done], args.markdown)
        print(f"icon4py-suite: tables written to {args.markdown}")
    bad = [d["run"] for d in done if not is_clean(d)]
    print(f"icon4py-suite: {len(done) - len(bad)} of {len(done)} run(s) clean" + (f"; not clean: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
