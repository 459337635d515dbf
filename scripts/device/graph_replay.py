"""Issue 17, step 4, first measurement: a substep of icoforge-cuda captured as one CUDA graph and
replayed, against the same substep called as icon4py calls it (Python, GT4Py, one launch per
kernel). Prints and writes (--json) per substep variant: the normal call's and the replay's
median wall time (20 calls each, between device synchronisations), the replay's bit-identity with
a normal call from the same fresh state, and, if the capture fails, the error (which operation of
the substep cannot be captured).

Why a replay is the same substep, and when it is not counted: icoforge/granule/graph_replay.py
(`icoforge greenline --graph-replay` does the same inside the greenline, beside its other tables).

    source scripts/device/setup.sh && python3 scripts/device/graph_replay.py --grid REGIONAL --levels 80
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="REGIONAL")
    ap.add_argument("--levels", type=int, default=80)
    ap.add_argument("--backend", default="icoforge-cuda")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()

    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.graph_replay import median_ms, replay_variant
    from icoforge.granule.runner import VARIANTS, Granule
    from icoforge.granule.state import initial_state
    from icoforge.grids import load_grid

    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    static = build_static_fields(grid, "icoforge-cpu+roundtrip-passes", in_child=True)
    g = Granule(args.backend, grid, static, initial_state(static, args.levels, 0), only_used_variants=True)
    t0 = time.perf_counter()
    g.setup()
    print(f"{args.backend} on {args.grid}/{args.levels}: setup {time.perf_counter() - t0:.1f} s, python optimized: {bool(sys.flags.optimize)}", flush=True)
    rows = []
    for variant in VARIANTS:
        g.step(variant)  # as the greenline's timing after its warm-up
        row: dict = {"variant": variant, "normal_ms": median_ms(lambda: g.step(variant), g.sync, args.repeat)}
        row |= replay_variant(g, variant, args.repeat)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'variant':8} {'normal ms':>10} {'replay ms':>10} {'saved':>7}  bit-identical")
    for r in rows:
        if "replay_ms" in r:
            saved = 1 - r["replay_ms"] / r["normal_ms"]
            print(f"{r['variant']:8} {r['normal_ms']:10.3f} {r['replay_ms']:10.3f} {100 * saved:6.1f} %  {r['bit_identical']}")
        else:
            print(f"{r['variant']:8} {r['normal_ms']:10.3f} {'-':>10} {'-':>7}  {r.get('capture_error', 'not bit-identical: no time')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"grid": args.grid, "levels": args.levels, "backend": args.backend,
                       "python_optimized": bool(sys.flags.optimize), "rows": rows}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
