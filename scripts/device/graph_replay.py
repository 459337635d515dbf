"""Issue 17, step 4, first measurement: a substep of icoforge-cuda captured as one CUDA graph and
replayed, against the same substep called as icon4py calls it (Python, GT4Py, one launch per
kernel). Prints and writes (--json) per substep variant: the normal call's and the replay's
median wall time (20 calls each, between device synchronisations), the replay's bit-identity with
a normal call from the same fresh state, and, if the capture fails, the error (which operation of
the substep cannot be captured).

Why a replay is the same substep: stream capture records every operation the substep enqueues on
the capturing stream (icoforge launches on CuPy's current stream; CuPy's reductions in icon4py's
velocity advection too) with the pointers of this call's arguments; replaying it on the same
state pair is what icon4py's benchmark loop does (the same variant again and again on the same
states). What a substep allocates while captured comes from a private CuPy pool that lives as long
as the graph, so no other allocation can reuse those blocks between replays.

    source scripts/device/setup.sh && python3 scripts/device/graph_replay.py --grid REGIONAL --levels 80
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def median_ms(call, sync, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def identical(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bit-identical and free of NaN (NaN never passes)."""
    return all(not np.isnan(a[k]).any() and np.array_equal(a[k], b[k]) for k in a)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="REGIONAL")
    ap.add_argument("--levels", type=int, default=80)
    ap.add_argument("--backend", default="icoforge-cuda")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()

    import cupy as cp

    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.runner import VARIANTS, Granule
    from icoforge.granule.state import initial_state, prognostic_to_numpy
    from icoforge.grids import load_grid

    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    static = build_static_fields(grid, "icoforge-cpu+roundtrip-passes", in_child=True)
    g = Granule(args.backend, grid, static, initial_state(static, args.levels, 0), only_used_variants=True)
    t0 = time.perf_counter()
    g.setup()
    print(f"{args.backend} on {args.grid}/{args.levels}: setup {time.perf_counter() - t0:.1f} s, python optimized: {bool(sys.flags.optimize)}", flush=True)
    sync = cp.cuda.runtime.deviceSynchronize
    rows = []
    for variant in VARIANTS:
        row: dict = {"variant": variant, "normal_ms": median_ms(lambda: g.step(variant), sync, args.repeat)}
        fresh = g.fresh_states()
        g.step(variant, fresh)
        sync()
        reference = prognostic_to_numpy(fresh[0].next)
        states = g.fresh_states()
        stream = cp.cuda.Stream(non_blocking=True)
        pool = cp.cuda.MemoryPool()  # lives with the graph: blocks the capture allocated stay its own
        try:
            with cp.cuda.using_allocator(pool.malloc), stream:
                stream.begin_capture()
                try:
                    g.step(variant, states)
                finally:
                    graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            row["bit_identical"] = identical(prognostic_to_numpy(states[0].next), reference)
            row["replay_ms"] = median_ms(lambda: graph.launch(stream), stream.synchronize, args.repeat)
        except Exception as e:  # which operation of the substep cannot be captured is the finding
            row["capture_error"] = f"{type(e).__name__}: {e}"[:400]
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'variant':8} {'normal ms':>10} {'replay ms':>10} {'saved':>7}  bit-identical")
    for r in rows:
        if "replay_ms" in r:
            saved = 1 - r["replay_ms"] / r["normal_ms"]
            print(f"{r['variant']:8} {r['normal_ms']:10.3f} {r['replay_ms']:10.3f} {100 * saved:6.1f} %  {r['bit_identical']}")
        else:
            print(f"{r['variant']:8} {r['normal_ms']:10.3f} {'-':>10} {'-':>7}  capture failed: {r['capture_error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"grid": args.grid, "levels": args.levels, "backend": args.backend,
                       "python_optimized": bool(sys.flags.optimize), "rows": rows}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
