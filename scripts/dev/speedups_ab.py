"""Issue 20, session 19: gt4py_speedups' fixes 8 (ConstantFolding of leaves) and 9 (the garbage
collector paused) on and off, interleaved in one process: CPU seconds of the early path's passes
(`gt4py_early.early_transforms` inside `gt4py_speedups.patched()`, as a compile job runs them) and
whether the GTIR is the same (`==` and `str`). R2B3/10, seed 0, the static scalars of the stored
references (the inputs of scripts/dev/dead_code_ab.py).

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/speedups_ab.py [PROGRAM ...] --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from dead_code_ab import _inputs

ARMS = {"before (fixes 1-7)": (False, False), "fix 8": (True, False), "fix 9": (False, True), "fixes 8+9": (True, True)}


def passes(inp, fold_leaves: bool, pause_gc: bool):
    """(GTIR, CPU s) of the early path with the chosen fixes."""
    from icoforge.backend.frontend import gt4py_early, gt4py_speedups

    real = gt4py_speedups._constant_folding_patch
    if not fold_leaves:
        gt4py_speedups._constant_folding_patch = lambda: []
    try:
        t0 = time.process_time()
        with gt4py_speedups.patched():
            if not pause_gc:
                gc.enable()  # the collector as before fix 9; patched() restores the caller's state
            gtir = gt4py_early.early_transforms(inp.data, inp.args.offset_provider)
            seconds = time.process_time() - t0
    finally:
        gt4py_speedups._constant_folding_patch = real
    return gtir, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="*", default=["vertically_implicit_solver_at_predictor_step", "vertically_implicit_solver_at_corrector_step"])
    ap.add_argument("--repeat", type=int, default=3)
    opts = ap.parse_args()
    from icoforge.grids import load_grid

    grid = load_grid("R2B3", levels=10, show_progress=False)
    print("| program | " + " | ".join(ARMS) + " | GTIR the same |")
    print("| :--- |" + " ---: |" * len(ARMS) + " :--- |")
    for name in opts.programs:
        inp = _inputs(name, grid)
        times: dict[str, list[float]] = {arm: [] for arm in ARMS}
        gtirs = {}
        for r in range(opts.repeat):
            order = list(ARMS) if r % 2 == 0 else list(reversed(ARMS))
            for arm in order:
                gtirs[arm], seconds = passes(inp, *ARMS[arm])
                times[arm].append(seconds)
        ref = gtirs["before (fixes 1-7)"]
        same = all(g == ref and str(g) == str(ref) for g in gtirs.values())
        cells = [f"{statistics.median(times[a]):.2f} ({min(times[a]):.2f}-{max(times[a]):.2f})" for a in ARMS]
        print(f"| {name} | " + " | ".join(cells) + f" | {'yes' if same else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
