"""CPU benchmark: icoforge's C++/OpenMP target vs GT4Py's gtfn_cpu and dace_cpu.

Each (program, backend, grid) runs in a fresh process with empty caches (icoforge's and GT4Py's),
so "compile" is a cold compile: GT4Py's passes, code generation and the C++ build. Then the median
of --repeat calls. Prints a table and writes it (Markdown) to --out.

    python scripts/bench/cpu_bench.py --grids R2B4 R2B5 --levels 80 --backends icoforge-cpu gtfn_cpu dace_cpu
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

PROGRAMS = (
    "vertically_implicit_solver_at_predictor_step",
    "compute_rho_theta_pgrad_and_update_vn",
    "compute_advection_in_horizontal_momentum",
    "compute_divergence_of_fluxes_of_rho_and_theta",
)

CHILD = """
import json, sys, warnings
warnings.filterwarnings("ignore")
from icoforge.grids import load_grid
from icoforge.suite.catalogue import get_program
from icoforge.suite.runner import run_program
name, backend, grid, levels, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
g = load_grid(grid, levels=levels, show_progress=False)
r = run_program(get_program(name), backend, g, seed=3, repeat=repeat)
print("RESULT " + json.dumps({"compile_s": r.compile_s, "median_ms": r.median_ms, "min_ms": r.min_ms, "checksum": r.checksum}))
"""


def run_one(name: str, backend: str, grid: str, levels: int, repeat: int, grid_cache: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env["ICOFORGE_CACHE"] = tmp  # cold icoforge caches ...
        env["GT4PY_BUILD_CACHE_LIFETIME"] = "session"  # ... and cold GT4Py caches
        grids = pathlib.Path(tmp) / "grids"
        grids.symlink_to(grid_cache)  # but reuse generated grids: not what we measure
        res = subprocess.run([sys.executable, "-c", CHILD, name, backend, grid, str(levels), str(repeat)],
                             env=env, capture_output=True, text=True)  # fmt: skip
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (res.stderr or res.stdout)[-400:]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", nargs="*", default=list(PROGRAMS))
    ap.add_argument("--backends", nargs="*", default=["icoforge-cpu", "gtfn_cpu", "dace_cpu"])
    ap.add_argument("--grids", nargs="*", default=["R2B4", "R2B5"])
    ap.add_argument("--levels", type=int, default=80)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", default=f"benchmarks/cpu-bench-{datetime.date.today()}.md")
    opts = ap.parse_args()

    from icoforge.cache import cache_dir
    from icoforge.grids import resolve_grid_path

    for g in opts.grids:
        resolve_grid_path(g)  # generate once, outside the timed children
    grid_cache = str(cache_dir("grids"))

    import gt4py
    import icon4py.model.common

    rows = []
    header = [
        f"# CPU benchmark, {datetime.date.today()}",
        "",
        f"Host {platform.node()}, {os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, gt4py {gt4py.__version__}, icon4py {getattr(icon4py.model.common, '__version__', '0.4.1')}. "
        f"{opts.levels} levels; cold compile (fresh process, empty caches); median/min of {opts.repeat} calls after one warm-up.",
        "",
        "| program | grid | backend | cold compile s | median ms | min ms | checksum |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for grid in opts.grids:
        for name in opts.programs:
            for backend in opts.backends:
                r = run_one(name, backend, grid, opts.levels, opts.repeat, grid_cache)
                row = ({"program": name, "grid": grid, "backend": backend} | r)
                rows.append(row)
                if "error" in r:
                    line = f"| {name} | {grid} | {backend} | error | | | {r['error'].splitlines()[-1][:80] if r['error'] else ''} |"
                else:
                    line = f"| {name} | {grid} | {backend} | {r['compile_s']:.1f} | {r['median_ms']:.2f} | {r['min_ms']:.2f} | {r['checksum']} |"
                print(line, flush=True)
                header.append(line)
                pathlib.Path(opts.out).write_text("\n".join(header) + "\n")
    pathlib.Path(opts.out).with_suffix(".json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
