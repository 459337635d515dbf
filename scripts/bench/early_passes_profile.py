"""Issue 20: CPU seconds of each pass of the early GTIR path (`gt4py_early.early_transforms` inside
`gt4py_speedups.patched()`, as a compile job runs them) on one program, and a cProfile of them.
The static scalars of the stored references (seed 0), as scripts/dev/dead_code_ab.py.

    ICOFORGE_CACHE=$(mktemp -d) PYTHONOPTIMIZE=1 PYTHONPATH=$PWD .venv/bin/python \
        scripts/bench/early_passes_profile.py [--program NAME] [--grid R2B4] [--levels 80] \
        [--repeat 3] [--profile 15] [--symbols]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time


def inputs(name: str, grid):
    from icoforge.perf.static import compilable_program_static
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    info = get_program(name)
    scalars = make_scalars(info, grid, seed=0)
    static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}
    return compilable_program_static(info.program, grid.connectivities, static)


def early(inp, timer=None, symbols: list[float] | None = None):
    """The early passes as a compile job runs them; `symbols` gets the wall seconds spent in
    symbol-table collection (`SymbolsCollector.apply`, fix 5) appended."""
    from gt4py.eve.traits import SymbolTableTrait

    from icoforge.backend.frontend import gt4py_early, gt4py_speedups

    collector = SymbolTableTrait.SymbolsCollector
    with gt4py_speedups.patched():
        if symbols is None:
            return gt4py_early.early_transforms(inp.data, inp.args.offset_provider, timer=timer)
        patched_apply, spent = collector.__dict__["apply"], [0.0]

        def apply(cls, node):
            t0 = time.perf_counter()
            try:
                return patched_apply.__func__(cls, node)
            finally:
                spent[0] += time.perf_counter() - t0

        collector.apply = classmethod(apply)
        try:
            return gt4py_early.early_transforms(inp.data, inp.args.offset_provider, timer=timer)
        finally:
            collector.apply = patched_apply
            symbols.append(spent[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", default="vertically_implicit_solver_at_predictor_step")
    ap.add_argument("--grid", default="R2B4")
    ap.add_argument("--levels", type=int, default=80)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, default=0, help="cProfile one more run, print the top N")
    ap.add_argument("--symbols", action="store_true", help="also the wall s of symbol-table collection per run")
    opts = ap.parse_args()
    from icoforge.grids import load_grid

    grid = load_grid(opts.grid, levels=opts.levels, show_progress=False)
    inp = inputs(opts.program, grid)
    runs: list[dict[str, float]] = []
    totals: list[float] = []
    symbols: list[float] | None = [] if opts.symbols else None
    for _ in range(opts.repeat):
        times: dict[str, float] = {}
        t0 = time.process_time()
        early(inp, times.__setitem__, symbols)
        totals.append(time.process_time() - t0)
        runs.append(times)
    print(f"{opts.program} {opts.grid}/{opts.levels}: {opts.repeat} runs, CPU s, median (min-max)\n")
    print("| pass | CPU s |\n| :--- | ---: |")
    for name in runs[0]:
        vals = [r[name] for r in runs]
        print(f"| {name} | {statistics.median(vals):.3f} ({min(vals):.3f}-{max(vals):.3f}) |")
    print(f"| **total (with patched())** | **{statistics.median(totals):.2f}** ({min(totals):.2f}-{max(totals):.2f}) |")
    if symbols:
        print(f"| symbol tables (wall s, inside the passes) | {statistics.median(symbols):.3f} ({min(symbols):.3f}-{max(symbols):.3f}) |")
    if opts.profile:
        prof = cProfile.Profile()
        prof.enable()
        early(inp)
        prof.disable()
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(opts.profile)
            print(f"\n### top {opts.profile} by {key}\n```\n{out.getvalue().strip()}\n```")


if __name__ == "__main__":
    main()
