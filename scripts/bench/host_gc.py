"""Whether Python's cyclic garbage collector shows in a substep's host time, on the granule
(benchmarks/host-gc-cpu-R2B3-10.md: not established on the 2-core workstation, its noise is larger).

Sets up the granule (icoforge-cpu by default) and times the middle substep 30 times each: with the
collector on (as icon4py runs), after `gc.freeze()` (everything alive after setup moved out of the
collector's sight), with the collector off, and on again. Run it once per path to compare GT4Py's
full pass list with the early GTIR (`ICOFORGE_EARLY_GTIR=0/1`): a process-wide slowdown of one
path (more objects alive after setup, more collector work) shows in every row.

    .venv/bin/python -O scripts/bench/host_gc.py [--grid R2B3 --levels 10 --backend icoforge-cpu]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time


def main() -> None:
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.runner import Granule
    from icoforge.granule.state import initial_state
    from icoforge.grids import load_grid

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="R2B3")
    p.add_argument("--levels", type=int, default=10)
    p.add_argument("--backend", default="icoforge-cpu")
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()

    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    static = build_static_fields(grid, "icoforge-cpu+roundtrip-passes", in_child=True)
    g = Granule(args.backend, grid, static, initial_state(static, args.levels, 0), only_used_variants=True)
    g.setup()
    print(f"{args.backend}, {args.grid}/{args.levels}: {len(gc.get_objects()):,} objects tracked after setup")

    def middle_substeps(label: str) -> None:
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            g.step("middle")
            g.sync()
            times.append(time.perf_counter() - t0)
        print(f"| {label} | {statistics.median(times) * 1e3:.3f} | {min(times) * 1e3:.3f} |")

    print("| collector | median ms | min ms |\n| --- | ---: | ---: |")
    middle_substeps("on")
    gc.collect()
    gc.freeze()
    middle_substeps("frozen after setup")
    gc.unfreeze()
    gc.disable()
    middle_substeps("off")
    gc.enable()
    middle_substeps("on again")


if __name__ == "__main__":
    main()
