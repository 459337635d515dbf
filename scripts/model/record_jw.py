"""Run the JW baroclinic wave with one backend and save the prognostic fields after every step
(`stepN.npz` under --out, written as soon as each step ends), then, with --store, the stored
reference of icoforge/model (`icoforge/model/jw_references.json`, see store.py) from them.

    nice .venv/bin/python scripts/model/record_jw.py --backend gtfn_cpu --out /tmp/jw-gtfn_cpu --store
    .venv/bin/python scripts/model/record_jw.py --out /tmp/jw-gtfn_cpu --store-only   # files already there

gtfn_cpu compiles the whole model cold (GT4Py's build cache lives for one session): ~18 min on
2 idle cores, much longer on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="gtfn_cpu")
    p.add_argument("--store", action="store_true", help="write icoforge/model/jw_references.json from the run")
    p.add_argument("--store-only", action="store_true", help="only write the store from the files in --out")
    p.add_argument("--grid", default="R2B3")
    p.add_argument("--levels", type=int, default=10)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--dtime", type=float, default=60.0)
    p.add_argument("--out", type=pathlib.Path)
    p.add_argument("--moist", default="", help="comma list of moist configurations: muphys, tracers (each under --out/NAME)")
    p.add_argument("--compare", type=pathlib.Path, nargs=2, metavar=("REF", "TEST"), help="compare two --out directories")
    a = p.parse_args()
    if a.compare:
        return compare_dirs(*a.compare)
    if a.out is None:
        p.error("--out is required")
    if a.store_only and not a.moist:
        return write_store(a.out)
    from icoforge.model import run

    say = lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)  # noqa: E731
    run.quiet_icon4py(False)
    if not a.moist:
        record(a, a.out, say)
        return write_store(a.out) if a.store else 0
    names = a.moist.split(",")
    if any(name not in ("muphys", "tracers") for name in names):
        p.error(f"--moist {a.moist!r}: muphys and/or tracers")
    for name in names:
        if not a.store_only:
            record(a, a.out / name, say, **{name: True})
        if a.store or a.store_only:
            write_store(a.out / name, name)
    return 0


def record(a: argparse.Namespace, out: pathlib.Path, say, **moist: bool) -> None:
    from icoforge.grids.load import resolve_grid_path
    from icoforge.model import experiments, run
    from icoforge.suite.backends import get_backend

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = experiments.jw_config(levels=a.levels, dtime_s=a.dtime, steps=a.steps, output=pathlib.Path(tmp) / "out", **moist)
        say(f"{cfg.source} with {a.backend} -> {out}")
        for n in cfg.notes:
            say(f"note: {n}")
        session = run.start(cfg.config, resolve_grid_path(a.grid), get_backend(a.backend), say)
        np.savez(out / "step0.npz", **run.prognostic_arrays(session))
        for _ in range(a.steps):
            st = session.step()
            np.savez(out / f"step{st.index}.npz", **run.prognostic_arrays(session))
            say(f"step {st.index}: {st.seconds:.3f} s, compile workers used {st.worker_cpu_s:.2f} CPU s")
    meta = {"backend": a.backend, "grid": a.grid, "levels": a.levels, "steps": a.steps, "dtime": a.dtime,
            "source": cfg.source, "setup_s": session.setup_s, "step_s": [s.seconds for s in session.steps],
            "wall_s": time.perf_counter() - t0}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    say(f"done: {out}")


def compare_dirs(ref: pathlib.Path, test: pathlib.Path) -> int:
    """Per configuration (sub-directory, or the directory itself), step and field: bitwise, or
    the largest |test - ref| and that over max |ref|. Returns 1 if a field differs in shape or
    names, or holds a NaN, else 0 (differences are printed, not judged)."""
    bad = 0
    subs = sorted(d.name for d in ref.iterdir() if (d / "meta.json").is_file()) or [""]
    for sub in subs:
        steps = sorted((ref / sub).glob("step*.npz"), key=lambda f: int(f.stem[4:]))
        for f in steps:
            with np.load(f) as r, np.load(test / sub / f.name) as t:
                if set(r) != set(t):
                    print(f"{sub} {f.stem}: fields {sorted(r)} vs {sorted(t)}")
                    bad = 1
                    continue
                for k in sorted(r):
                    x, y = r[k], t[k]
                    if x.shape != y.shape or not np.isfinite(y).all():
                        print(f"{sub} {f.stem} {k}: shape {y.shape} vs {x.shape} or non-finite")
                        bad = 1
                    elif np.array_equal(x.view(np.uint64), y.view(np.uint64)):
                        print(f"{sub} {f.stem} {k}: bitwise")
                    else:
                        d = np.abs(y - x)
                        print(f"{sub} {f.stem} {k}: max |diff| {d.max():.3g}, / max|ref| {d.max() / max(np.abs(x).max(), 1e-300):.3g}, "
                              f"{int((d > 0).sum())} of {d.size} points differ")
    return bad


def write_store(out: pathlib.Path, moist: str = "") -> int:
    """The store (`store.store_path(moist)`) from a recorded directory."""
    from icoforge.model import check, store

    m = json.loads((out / "meta.json").read_text())
    meta = {"experiment": "jw", "grid": m["grid"], "levels": m["levels"], "steps": m["steps"], "dtime_s": m["dtime"],
            "substeps": 5, "backend": m["backend"],
            "reference_timings_s": {"setup": m["setup_s"], "steps": m["step_s"]}}
    if moist:
        meta["moist"] = moist
    path = store.store_path(moist)
    check.store_from_files(out, meta, path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
