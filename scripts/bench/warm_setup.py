"""Whose is the granule's warm setup (issue 20: "warm setup, everything cached: what is left and
whose it is")? Sets the granule up in a fresh process with every cache filled by an earlier
process, under cProfile, and splits the main process's time by the package whose code ran it
(own time of each function, by its file; time in Python itself or other libraries counts for
the package that called it): icon4py, GT4Py, icoforge, NumPy/CuPy, waiting for the compile
workers (GT4Py's process pool).

    .venv/bin/python -O scripts/bench/warm_setup.py [--grid R2B3 --levels 10 --backend icoforge-cpu]

The first process fills the caches (grid, static fields, GT4Py's and icoforge's caches); the
second is the one measured. Prints the setup phases as the greenline names them and the split.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import time

PACKAGES = (  # (label, path fragment), first match wins
    ("icon4py", "/icon4py/"),
    ("GT4Py", "/gt4py/"),
    ("icoforge", "/icoforge/"),
    ("NumPy / CuPy", "/numpy/"),
    ("NumPy / CuPy", "/cupy/"),
)
WAITING = ("acquire", "wait", "select", "poll", "_recv", "recv_into", "sleep")  # builtins a waiting main process sits in


def package_of(filename: str) -> str | None:
    return next((label for label, fragment in PACKAGES if fragment in filename), None)


def split_by_owner(stats: dict) -> dict[str, float]:
    """Own time per owner. A function of Python itself or of another library (builtins, the
    standard library, attrs, ...) counts for the packages that called it, by the time spent in
    it from each caller, followed up to a few calls; waiting builtins stay apart."""
    memo: dict = {}

    def owners(key: tuple, depth: int = 0) -> dict[str, float]:  # owner -> fraction of key's time
        if key in memo:
            return memo[key]
        filename, _, function = key
        if (pkg := package_of(filename)) is not None:
            out = {pkg: 1.0}
        elif filename == "~" and any(w in function for w in WAITING):
            out = {"waiting (compile workers, locks)": 1.0}
        else:
            callers = stats[key][4] if key in stats else {}
            total = sum(c[2] for c in callers.values())
            out = {}
            if depth < 6 and total > 0:
                for caller, c in callers.items():
                    for who, f in owners(caller, depth + 1).items():
                        out[who] = out.get(who, 0.0) + f * c[2] / total
            out = out or {"Python and other libraries": 1.0}
        memo[key] = out
        return out

    split: dict[str, float] = {}
    for key, (_, _, own, _, _) in stats.items():
        for who, f in owners(key).items():
            split[who] = split.get(who, 0.0) + own * f
    return split


def measured_setup(grid_name: str, levels: int, backend: str) -> dict:
    """In this process: the granule set up under cProfile; phases and the split by owner."""
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.runner import Granule
    from icoforge.granule.state import initial_state
    from icoforge.grids import load_grid

    grid = load_grid(grid_name, levels=levels, show_progress=False)
    static = build_static_fields(grid, "icoforge-cpu+roundtrip-passes", in_child=True)
    g = Granule(backend, grid, static, initial_state(static, levels, 0), only_used_variants=True)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    g.setup()
    prof.disable()
    total = time.perf_counter() - t0
    split = split_by_owner(pstats.Stats(prof).stats)  # type: ignore[attr-defined]
    return {"total_s": total, "phases_s": dict(g.result.setup_s), "cache": g.result.cache, "split_s": split}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="R2B3")
    p.add_argument("--levels", type=int, default=10)
    p.add_argument("--backend", default="icoforge-cpu")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(measured_setup(args.grid, args.levels, args.backend)))
        return
    cmd = [sys.executable, *(["-O"] if not __debug__ else []), __file__, "--child",
           "--grid", args.grid, "--levels", str(args.levels), "--backend", args.backend]  # fmt: skip
    for run in ("fills the caches", "warm, measured"):
        print(f"{args.backend} {args.grid}/{args.levels}: setup in a new process ({run})", file=sys.stderr, flush=True)
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"warm setup of the granule, {args.backend}, {args.grid}/{args.levels}, Python {'debug' if __debug__ else '-O'}: "
          f"{r['total_s']:.1f} s")  # fmt: skip
    print("\n| phase | s |\n| --- | ---: |")
    for phase, s in r["phases_s"].items():
        print(f"| {phase} | {s:.2f} |")
    cache = r["cache"] or {}
    print(f"\ntranslation cache hits {cache.get('translation_cache_hits')}/{cache.get('programs')}, "
          f"C++ builds {cache.get('cpp_builds')}\n")  # fmt: skip
    print("| whose code (main process; Python and libraries count for their callers) | s | share |\n| --- | ---: | ---: |")
    profiled = sum(r["split_s"].values())
    for who, s in sorted(r["split_s"].items(), key=lambda kv: -kv[1]):
        print(f"| {who} | {s:.2f} | {s / profiled:.0%} |")


if __name__ == "__main__":
    main()
