"""Issue 47 item 5: seconds of a granule's construction (icon4py's constructor; GT4Py's front end
in this process, compile jobs submitted) with icoforge's front end (`backend/frontend/
fast_frontend.py`) and with GT4Py's own (ICOFORGE_FAST_PASSES=0), in alternating child processes.
Compile the granule once beforehand so that its translations are cached: then construction is
mostly the front end and the workers have little left to do. The workers are started (and have
imported GT4Py) before construction begins, as in the greenline; each row also gives construct's
split by whose code ran (icoforge.owners).

    PYTHONOPTIMIZE=1 PYTHONPATH=$PWD .venv/bin/python scripts/bench/construct_front_end.py \
        [--granule dycore] [--grid R2B3] [--levels 10] [--backend icoforge-cpu] [--pairs 2]

Prints one row per run and the medians (with NPY_DISABLE_CPU_FEATURES/OPENBLAS_CORETYPE set as
the Makefile sets them on an AVX-512 machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys


def construct_seconds(granule: str, grid_name: str, levels: int, backend: str) -> dict:
    """One construction in this process (child mode): its seconds and their split by whose code
    ran. GT4Py's compile workers are started and have imported before it begins, as in the
    greenline (where they start with the setup): otherwise construct mostly waits for their start."""
    import concurrent.futures
    import importlib
    import time

    from icoforge.backend.runtime import compile_pool
    from icoforge.owners import OwnerSampler
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.greenline import granule_class
    from icoforge.grids import load_grid

    grid = load_grid(grid_name, levels=levels, show_progress=False)
    static = build_static_fields(grid, "icoforge-cpu+roundtrip-passes", in_child=True)
    kind = granule_class(granule)
    g = kind(backend, grid, static, kind.initial_state(static, grid, levels, 0), only_used_variants=True)
    g.grid = g.granule_grid()
    importlib.import_module(g.component_module)  # as Granule.build: imported, then the fields
    inputs = g.inputs()
    concurrent.futures.wait(compile_pool.warm_up_for(g.backend))
    t0 = time.perf_counter()
    with OwnerSampler() as whose:
        g.construct(inputs)
    return {"seconds": time.perf_counter() - t0, "owners": whose.seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--granule", default="dycore")
    p.add_argument("--grid", default="R2B3")
    p.add_argument("--levels", type=int, default=10)
    p.add_argument("--backend", default="icoforge-cpu")
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(construct_seconds(a.granule, a.grid, a.levels, a.backend)))
        return
    runs: dict[str, list[float]] = {"icoforge's front end": [], "GT4Py's (ICOFORGE_FAST_PASSES=0)": []}
    print(f"construction of the {a.granule} granule, {a.grid}/{a.levels}, {a.backend}, seconds")
    for i in range(a.pairs):
        for label, fast in (("icoforge's front end", "1"), ("GT4Py's (ICOFORGE_FAST_PASSES=0)", "0")):
            cmd = [sys.executable, __file__, "--child", "--granule", a.granule, "--grid", a.grid,
                   "--levels", str(a.levels), "--backend", a.backend]  # fmt: skip
            out = subprocess.run(cmd, env={**os.environ, "ICOFORGE_FAST_PASSES": fast}, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{label}: the child failed:\n{out.stderr[-2000:]}")
            child = json.loads(out.stdout.strip().splitlines()[-1])
            runs[label].append(child["seconds"])
            whose = ", ".join(f"{owner} {sec:.2f}" for owner, sec in sorted(child["owners"].items(), key=lambda kv: -kv[1]))
            print(f"  pair {i + 1}: {label:<34} {runs[label][-1]:6.2f}  ({whose})", flush=True)
    for label, seconds in runs.items():
        print(f"median {label:<34} {statistics.median(seconds):6.2f}")


if __name__ == "__main__":
    main()
