"""What the CUDA/HIP host plan costs in Python per call, how much of it is the bounds checks, and
what a replayed call costs (`Runtime.run`: the same fields and scalars as an earlier call).

The host plan (generated Python, codegen/cuda.py) evaluates domain bounds, checks every field's
extent against the kernel's accesses (`_require`, since 2026-11-29), takes temporaries from the
pool and launches the kernels. Here it runs on the CPU with the emulation runtime and launches
that do nothing, so what is timed is the plan's own Python: once as generated, once with the
checks replaced by a no-op. CuPy's launch cost and GT4Py's call path come on top on a GPU.

    .venv/bin/python scripts/bench/host_plan_overhead.py [--grid R2B3 --levels 10 --reps 3000]

The program's GT4Py passes must be in the cache for the grid (the emulation tests fill R2B3/10).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from icoforge.suite.catalogue import BIG_FOUR


def _per_call_us(launch, args, offset_provider, kernels, rt, reps: int) -> float:
    for _ in range(50):  # warm: the pool's temporaries, the memoized table ranges
        launch(args, offset_provider, kernels, rt)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            launch(args, offset_provider, kernels, rt)
        samples.append((time.perf_counter() - t0) / reps * 1e6)
    return statistics.median(samples)


def main() -> None:
    from icoforge.backend.runtime.emulate import EmulatedRuntime
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import default_program_schedule
    from icoforge.backend.runtime.workflow import flat_call_args
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_inputs

    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="R2B3")
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3000)
    opts = ap.parse_args()
    grid = load_grid(opts.grid, levels=opts.levels, show_progress=False)

    class NoLaunch(EmulatedRuntime):
        def _launch(self, kernel, grid_, block, args) -> None:
            self.launches += 1

    print(f"host plan per call, {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{opts.grid}/{opts.levels}, CUDA default schedule, launches that do nothing\n")  # fmt: skip
    print("| program | kernels launched | extent checks | plan µs/call | without checks | checks µs/call | replayed µs/call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in BIG_FOUR:
        info = get_program(name)
        art = gpu_artifact(program_ir(info.program, grid.connectivities), "cuda", default_program_schedule("cuda"))
        inputs = make_inputs(info, grid, seed=0)
        args = flat_call_args(tuple(inputs[p.name] for p in info.params), art.tuple_params, name)
        kernels = dict.fromkeys(art.kernel_names)
        timings = []
        for with_checks in (True, False):
            ns: dict = {}
            exec(compile(art.host_plan, f"<host plan {name}>", "exec"), ns)
            if not with_checks:
                ns["_require"] = lambda *a: None
            rt = NoLaunch(name)
            rt.launches = 0
            timings.append(_per_call_us(ns["launch"], args, grid.connectivities, kernels, rt, opts.reps))
            launched = rt.launches // (50 + 5 * opts.reps)
        checks = art.host_plan.count("_require(") - 1  # minus the helper's definition
        ns = {}
        exec(compile(art.host_plan, f"<host plan {name}>", "exec"), ns)
        rt = NoLaunch(name)
        rt.launches = 0
        plan = ns["launch"]
        replayed = _per_call_us(lambda a, op, k, r: r.run(plan, a, op, k), args, grid.connectivities, kernels, rt, opts.reps)
        assert rt.launches == launched * (50 + 5 * opts.reps), "replay launched other kernels than the plan"
        print(f"| {name} | {launched} | {checks} | {timings[0]:.1f} | {timings[1]:.1f} | {timings[0] - timings[1]:.1f} | {replayed:.1f} |")


if __name__ == "__main__":
    main()
