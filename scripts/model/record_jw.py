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
    p.add_argument("--out", type=pathlib.Path, required=True)
    a = p.parse_args()
    from icoforge.grids.load import resolve_grid_path
    from icoforge.model import experiments, run
    from icoforge.suite.backends import get_backend

    if a.store_only:
        return write_store(a.out)
    a.out.mkdir(parents=True, exist_ok=True)
    say = lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)  # noqa: E731
    run.quiet_icon4py(False)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = experiments.jw_config(levels=a.levels, dtime_s=a.dtime, steps=a.steps, output=pathlib.Path(tmp) / "out")
        for n in cfg.notes:
            say(f"note: {n}")
        session = run.start(cfg.config, resolve_grid_path(a.grid), get_backend(a.backend), say)
        np.savez(a.out / "step0.npz", **run.prognostic_arrays(session))
        for _ in range(a.steps):
            st = session.step()
            np.savez(a.out / f"step{st.index}.npz", **run.prognostic_arrays(session))
            say(f"step {st.index}: {st.seconds:.3f} s, compile workers used {st.worker_cpu_s:.2f} CPU s")
    meta = {"backend": a.backend, "grid": a.grid, "levels": a.levels, "steps": a.steps, "dtime": a.dtime,
            "setup_s": session.setup_s, "step_s": [s.seconds for s in session.steps]}
    (a.out / "meta.json").write_text(json.dumps(meta, indent=1))
    say(f"done: {a.out}")
    return write_store(a.out) if a.store else 0


def write_store(out: pathlib.Path) -> int:
    from icoforge.model import check, store

    m = json.loads((out / "meta.json").read_text())
    meta = {"experiment": "jw", "grid": m["grid"], "levels": m["levels"], "steps": m["steps"], "dtime_s": m["dtime"],
            "substeps": 5, "backend": m["backend"],
            "reference_timings_s": {"setup": m["setup_s"], "steps": m["step_s"]}}
    check.store_from_files(out, meta, store.STORE)
    print(f"wrote {store.STORE} ({store.STORE.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
