"""One device run: verify every dycore program on the GPU, then time the big four.

Phase 1 (process pool, one program per task): on R2B4/80 levels, icoforge-cpu vs gtfn_cpu and
icoforge-cuda vs icoforge-cpu; on R2B6/80, icoforge-cuda vs icoforge-cpu. Fresh random inputs,
outputs poisoned, whole arrays compared (icoforge.suite.verify).
Phase 2 (this process): icoforge-cuda on R2B6/80 for the four big programs: median device time
of many calls with CUDA events, achieved bandwidth from compulsory bytes, copy-kernel ceiling.

Writes JSON lines and a Markdown table under $OUT (or ./device-out); prints a short table last.
Usage: python scripts/device/gpu_verify_and_bench.py [--jobs N] [--programs a,b] [--gtfn-for all|none|a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
import traceback

from icoforge.suite.catalogue import BIG_FOUR


def _verify_task(name: str, with_gtfn: bool, seeds: dict[str, int] | None = None, schedule: str = "") -> list[dict]:
    """`schedule`: a ProgramSchedule as JSON for icoforge-cuda (default: the vendor default)."""
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    info = get_program(name)
    rows = []
    cuda: object = "icoforge-cuda"
    if schedule:
        from icoforge.backend.runtime.gpu import make_gpu_backend
        from icoforge.backend.schedule.schedule import ProgramSchedule

        cuda = make_gpu_backend("cuda", ProgramSchedule.from_json(json.loads(schedule)))
    cases = [("R2B4", 80, cuda, "icoforge-cpu"), ("R2B6", 80, cuda, "icoforge-cpu")]
    if with_gtfn:
        cases.insert(0, ("R2B4", 80, "icoforge-cpu", "gtfn_cpu"))
    for grid_name, levels, test, ref in cases:
        t0 = time.perf_counter()
        row = {"program": name, "grid": grid_name, "levels": levels, "backend": test if isinstance(test, str) else "icoforge-cuda", "reference": ref}
        if schedule and test is cuda:
            row["schedule"] = json.loads(schedule)
        try:
            g = load_grid(grid_name, levels=levels, show_progress=False)
            seed = (seeds or {}).get(grid_name)
            seed = int.from_bytes(os.urandom(2), "little") if seed is None else seed
            row["seed"] = seed
            res = verify(info, test, ref, g, seed=seed)
            row.update(status="PASS" if res.passed else "FAIL", max_rel_err=res.max_rel_err, max_abs_err=res.max_abs_err)
            if not res.passed:
                row["detail"] = res.summary()[-2000:]
        except Exception as e:
            row.update(status="ERROR", detail=f"{type(e).__name__}: {e}"[-2000:], trace=traceback.format_exc()[-3000:])
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
    return rows


def _verify_case(case: tuple) -> list[dict]:
    """`_verify_task(*case)`: map_isolated passes one argument."""
    return _verify_task(*case)


def compulsory_bytes(info, args) -> int:
    """Each field argument the program reads or writes, moved once (in-out fields twice)."""
    from icoforge.suite.inputs import is_field

    total = 0
    for p in info.params:
        v = args.get(p.name)
        if v is None or not is_field(v):
            continue
        n = v.ndarray.nbytes
        total += 2 * n if (p.name in info.outputs and p.is_inout) else n
    return total


def bench(names, grid_name: str, levels: int, reps: int) -> list[dict]:
    import cupy as cp
    import gt4py.next as gtx

    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import is_field, make_inputs
    from icoforge.suite.runner import allocator_for, prepare, resolve_backend

    g = load_grid(grid_name, levels=levels, show_progress=False)
    # copy ceiling: 2 GiB device-to-device copy, bytes read + written
    a = cp.random.random(2**28)
    b = cp.empty_like(a)
    for _ in range(3):
        cp.copyto(b, a)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    for _ in range(20):
        cp.copyto(b, a)
    e1.record()
    e1.synchronize()
    copy_bw = 2 * a.nbytes * 20 / (cp.cuda.get_elapsed_time(e0, e1) / 1e3)
    del a, b
    rows = []
    for name in names:
        info = get_program(name)
        _, backend = resolve_backend("icoforge-cuda")
        host = make_inputs(info, g, seed=7)
        args = {k: gtx.as_field(v.domain, v.asnumpy(), allocator=allocator_for(backend)) if is_field(v) else v for k, v in host.items()}
        call, compile_s = prepare(info, "icoforge-cuda", g, args)
        for _ in range(5):
            call(args)
        cp.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(reps):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            call(args)
            e.record()
            e.synchronize()
            times.append(cp.cuda.get_elapsed_time(s, e))
        times.sort()
        med = times[len(times) // 2]
        nbytes = compulsory_bytes(info, args)
        rows.append({
            "program": name, "grid": grid_name, "levels": levels, "backend": "icoforge-cuda",
            "median_ms": med, "min_ms": times[0], "compile_s": compile_s, "compulsory_GB": nbytes / 1e9,
            "achieved_TBs": nbytes / (med / 1e3) / 1e12, "copy_TBs": copy_bw / 1e12,
            "fraction_of_copy": (nbytes / (med / 1e3)) / copy_bw,
        })  # fmt: skip
    return rows


def read_names(spec: str) -> list[str]:
    """Program names from "a,b" or "@file" (names separated by commas or lines; "#" comment lines)."""
    text = spec
    if spec.startswith("@"):
        text = "\n".join(ln for ln in pathlib.Path(spec[1:]).read_text().splitlines() if not ln.lstrip().startswith("#"))
    return [n.strip() for ln in text.splitlines() for n in ln.split(",") if n.strip()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--programs", default="", help="comma list or @file (names by commas or lines, in submission order); default: all")
    ap.add_argument("--gtfn-for", default="all", help="programs also checked icoforge-cpu vs gtfn_cpu: all | none | a,b")
    ap.add_argument("--skip-verify", action="store_true")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--skip-bench", action="store_true", help="verification only (side_by_side.py times)")
    ap.add_argument(
        "--seeds", default="",
        help="GRID=SEED,...: input seed per grid (default: fresh from os.urandom per case). A seed fixes the "
        "static scalars too, so GT4Py's passes can be precomputed elsewhere and carried (.devcache)",
    )  # fmt: skip
    ap.add_argument("--schedule", default="", metavar="JSON",
                    help='icoforge-cuda\'s ProgramSchedule, e.g. \'{"default": {"block": [32, 8], "index_bits": "auto"}}\'')  # fmt: skip
    opts = ap.parse_args()
    if opts.schedule:  # refused here, before any worker starts
        from icoforge.backend.schedule.schedule import ProgramSchedule

        ProgramSchedule.from_json(json.loads(opts.schedule))
    for key in ("programs", "gtfn_for"):
        setattr(opts, key, ",".join(read_names(getattr(opts, key))))
    out = pathlib.Path(os.environ.get("OUT", "device-out"))
    out.mkdir(parents=True, exist_ok=True)

    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import program_names

    names = [n for n in opts.programs.split(",") if n] or list(program_names())
    for grid_name in ("R2B4", "R2B6"):  # generate once, before the workers start
        load_grid(grid_name, levels=80, show_progress=False)

    rows: list[dict] = []
    if not opts.skip_verify:
        t0 = time.perf_counter()
        from icoforge.parallel import WorkerDied, map_isolated

        with open(out / "verify.jsonl", "w") as log:
            gtfn = set(names) if opts.gtfn_for == "all" else set(opts.gtfn_for.split(",")) - {"none"}
            seeds = {k: int(v) for k, v in (kv.split("=") for kv in opts.seeds.split(",") if kv)}
            cases = [(n, n in gtfn, seeds, opts.schedule) for n in names]
            # a worker that dies (out of memory, segfault) costs only its own program: map_isolated reruns the others
            for case, got in map_isolated(_verify_case, cases, opts.jobs):
                if isinstance(got, BaseException):  # _verify_task reports its own errors: its worker died
                    detail = str(got) if isinstance(got, WorkerDied) else repr(got)
                    got = [{"program": case[0], "status": "ERROR", "detail": detail}]
                for r in got:
                    log.write(json.dumps(r) + "\n")
                    log.flush()
                    print(f"{r['status']:5} {r['program']} {r.get('grid')} {r.get('backend')} vs {r.get('reference')} "
                          f"rel={r.get('max_rel_err', float('nan')):.2e} {r.get('seconds')}s", flush=True)  # fmt: skip
                rows.extend(got)
        print(f"verification: {time.perf_counter() - t0:.0f} s", flush=True)

    bench_rows = [] if opts.skip_bench else bench([n for n in BIG_FOUR if n in names] or BIG_FOUR[:1], "R2B6", 80, opts.reps)
    if bench_rows:
        with open(out / "bench.json", "w") as f:
            json.dump(bench_rows, f, indent=1)

    # short table last
    from collections import Counter

    by = Counter((r.get("grid"), r.get("backend"), r.get("reference"), r["status"]) for r in rows)
    print("\n== verification summary ==")
    for (grid, b, ref, st), n in sorted(by.items(), key=str):
        print(f"{grid} {b} vs {ref}: {st} x{n}")
    bad = [r for r in rows if r["status"] != "PASS"]
    for r in bad[:15]:
        print(f"  {r['status']} {r['program']} {r.get('grid')} {r.get('backend')}: {r.get('detail', '')[:300]}")
    if not bench_rows:
        return 1 if bad else 0
    print("\n== icoforge-cuda, R2B6, 80 levels (H200) ==")
    print(f"{'program':52} {'median ms':>9} {'min ms':>8} {'GB':>6} {'TB/s':>6} {'of copy':>7}")
    for r in bench_rows:
        print(f"{r['program']:52} {r['median_ms']:9.3f} {r['min_ms']:8.3f} {r['compulsory_GB']:6.2f} "
              f"{r['achieved_TBs']:6.2f} {r['fraction_of_copy']:7.1%}")  # fmt: skip
    if bench_rows:
        print(f"copy ceiling: {bench_rows[0]['copy_TBs']:.2f} TB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
