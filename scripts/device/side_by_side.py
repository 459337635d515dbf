"""GPU side-by-side and schedule sweep for the big programs (issues 4 and 5), one device call.

Three roles, meant to run as parallel processes on the device machine. Compilation overlaps;
everything that runs on the GPU for a measurement holds an exclusive lock (`--lock`), so no two
timings share the GPU. Results are JSON lines under $OUT.

  peer BACKEND PROGRAM LEVELS   compile PROGRAM with BACKEND (icoforge-cuda, gtfn_gpu, dace_gpu)
                                through GT4Py's call path, then time it -> peers.jsonl
  sweep PROGRAM[,..] LEVELS..   icoforge-cuda under a list of schedules (each knob alone, then
                                promising pairs): every schedule's outputs must equal the default
                                schedule's bit for bit (outputs NaN-poisoned before each run),
                                then device time, registers and spills per kernel -> sweep.jsonl
  report DIR                    tables from DIR/peers.jsonl and DIR/sweep.jsonl (Markdown files
                                beside them; the short table printed last)

Inputs: `make_inputs(seed=7)` on the grid (same values in every process), neighbour tables on
the GPU for every backend (icoforge.grids.load.DeviceGrid). Timing, all with CUDA events:
  device ms  -- a spin kernel is queued first so the whole call waits on the GPU: the events then
                bracket GPU work only (no host/launch gaps); median and min of `--reps` calls
  call ms    -- events around one call on an idle queue (includes the host side of the call)
  stream ms  -- 20 calls back to back between two events, per call (throughput)
Bandwidth: compulsory bytes of the program from our kernel IR (icoforge.perf.model: every field
a kernel touches once, tables counted, temporaries between kernels included), and the bytes of
the program's field arguments (each once, in-out twice); ceiling: a 2 x 1 GiB CuPy copy timed
in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import sys
import time
import traceback

from icoforge.suite.catalogue import BIG_FOUR
OUT = pathlib.Path(os.environ.get("OUT", "device-out"))


def log(*a) -> None:
    print(f"[{time.strftime('%H:%M:%S')} {os.getpid()}]", *a, flush=True)


def gpu_lock(path: str | None, what: str):
    """Exclusive GPU for a measurement (icoforge.granule.gpulock); yields the seconds waited."""
    if not path:
        return contextlib.nullcontext(0.0)
    from icoforge.granule.gpulock import GpuLock

    return GpuLock(path, log).hold(f"side_by_side pid {os.getpid()}", what)


@contextlib.contextmanager
def generation_slot(slots: int = 4):
    """One of `slots` machine-wide tokens (flock on /tmp/icf-gen-N.lock), waited for in turn."""
    while True:
        for n in range(slots):
            f = open(f"/tmp/icf-gen-{n}.lock", "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        time.sleep(0.5)


def append(name: str, row: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / name, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(row) + "\n")


# --- timing -----------------------------------------------------------------------------------


def time_gpu(call, reps: int, sync) -> dict:
    """device/call/stream milliseconds of `call()` (see the module docstring)."""
    import cupy as cp

    from icoforge.perf.timing import queue_primer

    for _ in range(3):
        call()
    sync()
    ev = lambda: cp.cuda.Event()  # noqa: E731

    def one(prime) -> float:
        s, e = ev(), ev()
        prime()
        s.record()
        call()
        e.record()
        e.synchronize()
        return cp.cuda.get_elapsed_time(s, e)

    calls = sorted(one(lambda: None) for _ in range(reps))
    primer = queue_primer(cp, min(max(4 * calls[len(calls) // 2] * 1e-3, 2e-3), 0.2))
    device = sorted(one(primer) for _ in range(reps))
    streams = []
    for _ in range(3):
        s, e = ev(), ev()
        s.record()
        for _ in range(20):
            call()
        e.record()
        e.synchronize()
        streams.append(cp.cuda.get_elapsed_time(s, e) / 20)
    med = lambda v: v[len(v) // 2]  # noqa: E731
    return {
        "device_ms": med(device), "device_min_ms": device[0], "call_ms": med(calls), "call_min_ms": calls[0],
        "stream_ms": min(streams), "reps": reps,
    }  # fmt: skip


def field_arg_bytes(info, args) -> int:
    from gpu_verify_and_bench import compulsory_bytes  # this script's sibling (same folder)

    return compulsory_bytes(info, args)


def to_device(host: dict, allocator) -> dict:
    import gt4py.next as gtx

    from icoforge.suite.inputs import is_field

    return {k: gtx.as_field(v.domain, v.asnumpy(), allocator=allocator) if is_field(v) else v for k, v in host.items()}


def free_gpu() -> None:
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


# --- peer: one backend, one program, through GT4Py's call path ---------------------------------


def run_peer(backend: str, program: str, levels: int, grid_name: str, reps: int, lock: str | None) -> int:
    import cupy as cp

    from icoforge.grids import load_grid
    from icoforge.grids.load import DeviceGrid
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_inputs, make_scalars
    from icoforge.suite.runner import allocator_for, prepare, resolve_backend

    row = {"role": "peer", "backend": backend, "program": program, "grid": grid_name, "levels": levels}
    t_start = time.perf_counter()
    try:
        info = get_program(program)
        grid = DeviceGrid(load_grid(grid_name, levels=levels, show_progress=False))
        scalars = make_scalars(info, grid.host, seed=7)  # make_inputs' scalars, no GBs of fields
        log(f"compiling {program} L{levels} for {backend}")
        call, compile_s = prepare(info, backend, grid, scalars)  # static values come from scalars
        row["compile_s"] = round(compile_s, 1)
        log(f"compiled {program} L{levels} for {backend} in {compile_s:.0f} s")
        _, backend_obj = resolve_backend(backend)
        # the slot is held until the inputs are freed: at most `slots` peers hold GBs of host
        # inputs while they wait for the GPU (sixteen at once ran the host out of memory)
        with generation_slot():
            host = make_inputs(info, grid.host, seed=7)  # same seed: the same values again
            with gpu_lock(lock, f"peer {backend} {program} L{levels}") as waited:
                row["lock_wait_s"] = round(waited, 1)
                args = to_device(host, allocator_for(backend_obj))
                row["field_arg_GB"] = field_arg_bytes(info, args) / 1e9
                row.update(time_gpu(lambda: call(args), reps, cp.cuda.runtime.deviceSynchronize))
                del args, host
                free_gpu()
        row["status"] = "OK"
    except Exception as e:
        row.update(status="ERROR", detail=f"{type(e).__name__}: {e}"[-1500:], trace=traceback.format_exc()[-3000:])
    row["seconds"] = round(time.perf_counter() - t_start, 1)
    append("peers.jsonl", row)
    log(f"{row['status']} peer {backend} {program} L{levels}: {row.get('device_ms', float('nan')):.3f} ms")
    return 0 if row["status"] == "OK" else 1


# --- sweep: icoforge-cuda under many schedules ----------------------------------------------------


def sweep_schedules(levels: int, full: bool) -> dict:
    """id -> ProgramSchedule: the autotuner's search space (icoforge/tune/space.py) on the CUDA
    vendor default, the full one for the first level count, the quick one for the others.
    (Until session 7 this script kept its own list; the ids of earlier sweeps differ a little:
    block256 is block256x1 now, block32x8_auto is idx_auto on 32x4.)"""
    from icoforge.backend.schedule.schedule import ProgramSchedule
    from icoforge.tune.space import candidates

    return {k: ProgramSchedule(default=s) for k, s in candidates("cuda", "full" if full else "quick").items()}


def plan_sweep(programs: list[str], levels_list: list[int], grid_name: str) -> list[tuple]:
    """(program, levels, info, IR, cost, {schedule id: (ProgramSchedule, GPUArtifact)}) for every
    program and level count; refused schedules are logged to sweep.jsonl. Needs no GPU."""
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.schedule.schedule import ScheduleError
    from icoforge.grids import load_grid
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars

    plans = []
    for li, levels in enumerate(levels_list):
        grid = load_grid(grid_name, levels=levels, show_progress=False)
        for name in programs:
            info = get_program(name)
            t0 = time.perf_counter()
            pir = suite_program_ir(info, grid, make_scalars(info, grid, seed=7))  # fast: passes in .devcache
            log(f"IR of {name} L{levels}: {time.perf_counter() - t0:.0f} s")
            cost = program_cost(pir, suite_sizes(info, grid, seed=7))  # sizes without building fields
            arts = {}
            for sid, ps in sweep_schedules(levels, full=(li == 0)).items():
                try:
                    arts[sid] = (ps, gpu_artifact(pir, "cuda", ps))
                except ScheduleError as e:
                    append("sweep.jsonl", {"role": "sweep", "program": name, "levels": levels, "schedule": sid,
                                           "status": "REFUSED", "detail": str(e)[:500]})  # fmt: skip
            plans.append((name, levels, info, pir, cost, arts))
    return plans


def run_sweep(programs: list[str], levels_list: list[int], grid_name: str, reps: int, lock: str | None, jobs: int) -> int:
    import cupy as cp
    import numpy as np

    from icoforge.backend.runtime.gpu import make_gpu_backend, precompile_modules
    from icoforge.grids import load_grid
    from icoforge.grids.load import DeviceGrid
    from icoforge.perf.timing import gpu_copy_bandwidth, positional
    from icoforge.suite.inputs import make_inputs

    # 1. every (program, levels, schedule) source, then NVRTC in parallel into CuPy's disk cache
    plans = plan_sweep(programs, levels_list, grid_name)
    t0 = time.perf_counter()
    secs = precompile_modules([a for p in plans for _, a in p[5].values()], jobs)
    log(f"NVRTC: {len(secs)} modules in {time.perf_counter() - t0:.0f} s ({jobs} processes, median {sorted(secs)[len(secs) // 2] if secs else 0:.1f} s)")

    # 2. time, one program and level count at a time, holding the GPU lock
    alloc = make_gpu_backend("cuda")
    copy_tbs = None
    for name, levels, info, pir, cost, arts in plans:
        grid = DeviceGrid(load_grid(grid_name, levels=levels, show_progress=False))
        host = make_inputs(info, grid.host, seed=7)
        fns = {}
        for sid, (_, art) in arts.items():
            try:
                fns[sid] = art.load()
            except Exception as e:
                append("sweep.jsonl", {"role": "sweep", "program": name, "levels": levels, "schedule": sid,
                                       "status": "ERROR", "detail": f"{type(e).__name__}: {e}"[:1500]})  # fmt: skip
        with gpu_lock(lock, f"sweep {name} L{levels}"):
            if copy_tbs is None:
                copy_tbs = gpu_copy_bandwidth().bytes_per_s / 1e12
                append("sweep.jsonl", {"role": "copy", "copy_TBs": copy_tbs})
            args = to_device(host, alloc)
            arg_bytes = field_arg_bytes(info, args)
            pos = positional(pir, args)
            outs = [o for o in info.outputs if o in args]
            # in-out fields start from their input values in every run, pure outputs from NaN
            pristine = {o: args[o].ndarray.copy() for o in info.inouts if o in args}
            reference = None
            for sid, fn in fns.items():
                row = {"role": "sweep", "program": name, "grid": grid_name, "levels": levels, "schedule": sid,
                       "schedule_json": arts[sid][0].to_json(), "ir_GB": cost.bytes / 1e9,
                       "field_arg_GB": arg_bytes / 1e9}  # fmt: skip
                try:
                    for o in outs:  # poison: a point the kernels forget stays NaN
                        if o in pristine:
                            args[o].ndarray[...] = pristine[o]
                        else:
                            args[o].ndarray[...] = np.nan
                    fn(*pos, offset_provider=grid.connectivities)
                    cp.cuda.runtime.deviceSynchronize()
                    # compared on the device: copying GBs of outputs to the host took seconds a row
                    got = {o: args[o].ndarray.copy() for o in outs}
                    if reference is None:
                        reference = got  # the default schedule runs first
                        row["identical"] = True
                    else:
                        same = all(bool(cp.array_equal(got[o], reference[o], equal_nan=True)) for o in outs)
                        rel = max(
                            float(cp.nanmax(cp.abs(got[o] - reference[o])) / max(float(cp.nanmax(cp.abs(reference[o]))), 1e-300))
                            if bool(cp.isfinite(reference[o]).any()) else 0.0
                            for o in outs
                        )  # fmt: skip
                        nan_mismatch = any(bool((cp.isnan(got[o]) != cp.isnan(reference[o])).any()) for o in outs)
                        row.update(identical=bool(same), max_rel_diff=rel, nan_mismatch=bool(nan_mismatch))
                        del got
                    row.update(time_gpu(lambda: fn(*pos, offset_provider=grid.connectivities), reps,
                                        cp.cuda.runtime.deviceSynchronize))  # fmt: skip
                    row["kernels"] = {
                        k: {"regs": f.num_regs, "local_bytes": f.local_size_bytes, "smem_bytes": f.shared_size_bytes}
                        for k, f in fn.icoforge_kernels.items()
                    }
                    row["status"] = "OK" if row.get("identical") or (row.get("max_rel_diff", 1) <= 1e-12 and not row.get("nan_mismatch")) else "DIFF"
                except Exception as e:
                    row.update(status="ERROR", detail=f"{type(e).__name__}: {e}"[:1500])
                row["copy_TBs"] = copy_tbs
                append("sweep.jsonl", row)
            log(f"sweep {name} L{levels}: {len(fns)} schedules timed")
            del args, fns, pristine, reference
            free_gpu()
    return 0


# --- report -------------------------------------------------------------------------------------


def _rows(path: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def shared_gpu(r: dict) -> bool:
    """A timing disturbed by other work on the GPU: with the queue primed, the device time of a
    call can only be shorter than the call timed on an idle queue, unless something else ran."""
    return r["device_ms"] > 1.02 * r["call_ms"]


def plot_sweep(d: pathlib.Path, prog: str, levels: int, rows: list[dict], peers: dict) -> str | None:
    """One horizontal bar chart per program: device ms per schedule, GT4Py's backends as lines."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ok = sorted((r for r in rows if r.get("status") == "OK"), key=lambda r: -r["device_ms"])
    if not ok:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(ok) + 1.6))
    y = range(len(ok))
    ax.barh(y, [r["device_ms"] for r in ok], color=["#bbbbbb" if shared_gpu(r) else "#3b75af" for r in ok])
    ax.set_yticks(list(y), [r["schedule"] + (" (!)" if shared_gpu(r) else "") for r in ok], fontsize=7)
    for backend, style in (("dace_gpu", "--"), ("gtfn_gpu", ":"), ("icoforge-cuda", "-")):
        p = peers.get((prog, levels, backend))
        if p:
            label = f"{backend} {p['device_ms']:.2f} ms" + (" (default, GT4Py call path)" if backend == "icoforge-cuda" else "")
            ax.axvline(p["device_ms"], color="k", linestyle=style, linewidth=1, label=label)
    ax.set_xlabel("device ms per call (median, H200)")
    ax.set_title(f"{prog}\nR2B6, {levels} levels: icoforge-cuda schedules", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    name = f"sweep-{''.join(w[:4] for w in prog.split('_'))[:24]}-L{levels}.png"
    fig.savefig(d / name, dpi=110)
    plt.close(fig)
    return name


def report(d: pathlib.Path) -> int:
    peers, sweep = _rows(d / "peers.jsonl"), _rows(d / "sweep.jsonl")
    copy = next((r["copy_TBs"] for r in sweep if r.get("role") == "copy"), None)
    timed = [r for r in sweep if r.get("role") == "sweep" and r.get("status") in ("OK", "DIFF")]
    ir_gb = {(r["program"], r["levels"]): r["ir_GB"] for r in timed}
    lines = []
    out = lines.append
    out(f"copy ceiling (CuPy, 2 x 1 GiB, read+write): {copy:.2f} TB/s" if copy else "copy ceiling: not measured")
    # side by side
    out("\n## Side by side (GT4Py call path, same inputs, device time with the queue primed)\n")
    out("| program | levels | backend | device ms (median) | min | call ms | stream ms | compile s | IR GB | TB/s | of copy |")
    out("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in sorted(peers, key=lambda r: (BIG_FOUR.index(r["program"]) if r["program"] in BIG_FOUR else 9, r["levels"], r["backend"])):
        if r["status"] != "OK":
            out(f"| {r['program']} | {r['levels']} | {r['backend']} | {r['status']}: {r.get('detail', '')[:80]} | | | | | | | |")
            continue
        gb = ir_gb.get((r["program"], r["levels"]))
        tbs = gb / r["device_ms"] if gb else None
        out(f"| {r['program']} | {r['levels']} | {r['backend']} | {r['device_ms']:.3f} | {r['device_min_ms']:.3f} | "
            f"{r['call_ms']:.3f} | {r['stream_ms']:.3f} | {r.get('compile_s', 0):.0f} | {gb or float('nan'):.2f} | "
            f"{tbs or float('nan'):.2f} | {(tbs / copy if tbs and copy else float('nan')):.0%} |")  # fmt: skip
    # sweep
    out("\n## Schedule sweep, icoforge-cuda (device ms, median; identical = bit-identical to the default schedule)\n")
    out("(!) = disturbed by other work on the GPU (device time above the idle-queue call time): not a clean measurement.\n")
    by = {}
    for r in sweep:
        if r.get("role") == "sweep":
            by.setdefault((r["program"], r["levels"]), []).append(r)
    best_rows = []
    for (prog, levels), rows in by.items():
        ok = [r for r in rows if r.get("status") == "OK"]
        default = next((r for r in ok if r["schedule"] == "default"), None)
        out(f"\n### {prog}, {levels} levels\n")
        out("| schedule | device ms | vs default | stream ms | TB/s | max regs | spill bytes | identical |")
        out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for r in sorted(rows, key=lambda r: r.get("device_ms", 1e9)):
            if r.get("status") not in ("OK", "DIFF"):
                out(f"| {r['schedule']} | {r['status']} | | | | | | {r.get('detail', '')[:60]} |")
                continue
            ks = r.get("kernels", {}).values()
            flag = " (!)" if shared_gpu(r) else ""
            out(f"| {r['schedule']}{flag} | {r['device_ms']:.3f} | {(default['device_ms'] / r['device_ms'] if default else float('nan')):.2f}x | "
                f"{r['stream_ms']:.3f} | {r['ir_GB'] / r['device_ms']:.2f} | {max((k['regs'] for k in ks), default=0)} | "
                f"{max((k['local_bytes'] for k in ks), default=0)} | {r.get('identical')} |")  # fmt: skip
        if ok:
            b = min(ok, key=lambda r: r["device_ms"])
            best_rows.append((prog, levels, default, b))
        png = plot_sweep(d, prog, levels, rows, {(r["program"], r["levels"], r["backend"]): r for r in peers if r["status"] == "OK"})
        if png:
            out(f"\n![{prog}]({png})")
    md = "\n".join(lines) + "\n"
    (d / "side_by_side.md").write_text(md)
    # short table last
    print(md if len(md) < 6000 else md[:2500] + "\n...\n")
    print("== best schedule per program (device ms) ==")
    peer = {(r["program"], r["levels"], r["backend"]): r for r in peers if r["status"] == "OK"}
    for prog, levels, default, b in best_rows:
        dace = peer.get((prog, levels, "dace_gpu"))
        gtfn = peer.get((prog, levels, "gtfn_gpu"))
        print(f"{prog[:44]:44} L{levels:<4} default {default['device_ms'] if default else float('nan'):7.3f}  best {b['device_ms']:7.3f} "
              f"({b['schedule']})  dace {dace['device_ms'] if dace else float('nan'):7.3f}  gtfn {gtfn['device_ms'] if gtfn else float('nan'):7.3f}")  # fmt: skip
    bad = [r for r in sweep if r.get("role") == "sweep" and r.get("status") not in ("OK", "REFUSED")]
    print(f"sweep rows: {sum(1 for r in sweep if r.get('role') == 'sweep')}, not OK/refused: {len(bad)}")
    for r in bad[:10]:
        print("  ", r["program"], r["levels"], r["schedule"], r["status"], r.get("max_rel_diff"), r.get("detail", "")[:200])
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="role", required=True)
    p = sub.add_parser("peer")
    p.add_argument("backend")
    p.add_argument("program")
    p.add_argument("levels", type=int)
    s = sub.add_parser("sweep")
    s.add_argument("programs")
    s.add_argument("levels", type=int, nargs="+")
    s.add_argument("--jobs", type=int, default=4)
    r = sub.add_parser("report")
    r.add_argument("dir")
    for q in (p, s):
        q.add_argument("--grid", default="R2B6")
        q.add_argument("--reps", type=int, default=30)
        q.add_argument("--lock")
    a = ap.parse_args()
    if a.role == "peer":
        return run_peer(a.backend, a.program, a.levels, a.grid, a.reps, a.lock)
    if a.role == "sweep":
        names = BIG_FOUR if a.programs == "big4" else a.programs.split(",")
        return run_sweep(list(names), a.levels, a.grid, a.reps, a.lock, a.jobs)
    return report(pathlib.Path(a.dir))


if __name__ == "__main__":
    sys.exit(main())
