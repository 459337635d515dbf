"""Fill the GT4Py-passes cache here for the device's greenline runs: builds icon4py's granule
exactly as `icoforge greenline` does (same static fields, same compiled variants), but with a
backend that only runs GT4Py's passes (icoforge.backend.runtime.precompile.passes_only_backend), so no
C++ is compiled; construction and one no-op call of each substep variant (icon4py compiles some
programs lazily at their first call).

    .venv/bin/python scripts/device/precompute_granule.py R2B6/80 REGIONAL/80 --construct-only
    scripts/device/pack_cache.sh        # then carry .devcache

On this 23 GB workstation the no-op calls fit up to R2B4-sized grids; with R2B6/80 fields and a
state they ran out of memory, so use --construct-only there (on R2B4/10 the calls compiled no
program that construction had not, 2026-11-30). R2B6/120 ran out of memory even so.

The static fields are computed (and cached) with the default factory backend, whose programs'
passes land in the same cache: the device then skips both.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    import gt4py.next as gtx

    from icoforge.backend.runtime.precompile import passes_only_backend
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND
    from icoforge.granule.runner import Granule
    from icoforge.granule.state import initial_state
    from icoforge.granule.solver import build_solver, grid_for_backend
    from icoforge.grids import load_grid

    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+", help="GRID/LEVELS")
    ap.add_argument("--all-variants", action="store_true", help="not --only-used-variants")
    ap.add_argument("--construct-only", action="store_true", help="no first calls (programs compiled lazily are missed)")
    opts = ap.parse_args()
    backend = passes_only_backend()
    for spec in opts.configs:
        name, levels = spec.split("/")
        t0 = time.perf_counter()
        grid = load_grid(name, levels=int(levels), show_progress=False)
        static = build_static_fields(grid, DEFAULT_FACTORY_BACKEND, on_status=lambda s: print(f"  {spec}: {s}", flush=True))
        print(f"{spec}: static fields {'cached' if static.cached else 'computed'} after {time.perf_counter() - t0:.0f} s", flush=True)
        before = _entries()
        if opts.construct_only:
            # construction submits the compile jobs (icon4py's setup_program); programs compiled
            # lazily at their first call are not covered
            solver = build_solver(grid_for_backend(grid, False), static, backend, only_used_variants=not opts.all_variants)
            gtx.wait_for_compilation()
            del solver
        else:
            # construction and one call of each substep variant: the calls do nothing (the
            # backend's programs are no-ops), so memory stays at fields + state, but the programs
            # icon4py compiles lazily at their first call get their passes too
            g = Granule("icoforge-cpu", grid, static, initial_state(static, int(levels)), only_used_variants=not opts.all_variants)
            g.backend = backend
            g.setup()
            del g
        added = len(_entries() - before)
        print(f"{spec}: passes done after {time.perf_counter() - t0:.0f} s; {added} new cache entries", flush=True)
        del static


def _entries() -> set[str]:
    from icoforge.cache import cache_dir

    return {p.name for p in cache_dir("gt4py-passes").glob("*.pkl")}

if __name__ == "__main__":
    main()
