"""Fill the GT4Py-passes cache here (workstation) for the device's verification runs, so the GPU
machine skips minutes of passes: one entry per (program, grid, levels, static scalars of the seed).

    .venv/bin/python scripts/device/precompute_passes.py --seeds R2B4=11,R2B6=12 --levels 80 [--programs @file] [--jobs 2]
    scripts/device/pack_cache.sh        # then carry .devcache

The seeds must be those of the device run (`gpu_verify_and_bench.py --seeds`): the static scalars
(vertical bounds, ...) come from the same `make_scalars` and are part of the cache key.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import time


def _one(name: str, grid_name: str, levels: int, seed: int) -> tuple[str, str, float, str | None]:
    from icoforge.grids import load_grid
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars

    t0 = time.perf_counter()
    try:
        info = get_program(name)
        g = load_grid(grid_name, levels=levels, show_progress=False)
        suite_program_ir(info, g, make_scalars(info, g, seed=seed))
        return name, grid_name, time.perf_counter() - t0, None
    except Exception as e:  # reported, the others go on
        return name, grid_name, time.perf_counter() - t0, f"{type(e).__name__}: {e}"[:300]


def main() -> None:
    from gpu_verify_and_bench import read_names  # this script's folder is on sys.path

    from icoforge.suite.catalogue import program_names

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", required=True, help="GRID=SEED,... as given to gpu_verify_and_bench.py")
    ap.add_argument("--levels", type=int, default=80)
    ap.add_argument("--programs", default="", help="comma list or @file; default: every catalogue program")
    ap.add_argument("--jobs", type=int, default=2)
    opts = ap.parse_args()
    seeds = {k: int(v) for k, v in (kv.split("=") for kv in opts.seeds.split(",") if kv)}
    names = read_names(opts.programs) or list(program_names())
    ctx = multiprocessing.get_context("spawn")
    failed = 0
    with cf.ProcessPoolExecutor(max_workers=opts.jobs, mp_context=ctx) as pool:
        futs = [pool.submit(_one, n, g, opts.levels, s) for n in names for g, s in seeds.items()]
        for i, fut in enumerate(cf.as_completed(futs), 1):
            name, g, secs, err = fut.result()
            failed += err is not None
            print(f"[{i}/{len(futs)}] {'ERROR' if err else 'ok   '} {name} {g} {secs:.1f}s {err or ''}", flush=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
