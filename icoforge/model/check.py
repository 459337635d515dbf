"""The stored JW run (store.py) repeated with another backend and compared; and the store made
from a run of the reference backend (or from the per-step files `scripts/model/record_jw.py`
writes, so that a recording of many minutes is not lost to a later error)."""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from icoforge.model import experiments, run, store


@dataclasses.dataclass
class CheckResult:
    verdict: str  # "bitwise" | "tolerance" | "failed"
    lines: list[str]
    session: run.Session
    stored_meta: dict[str, Any]  # the stored run's configuration (grid, levels, steps, backend, ...)

    @property
    def reference(self) -> str:
        """The backend that made the stored results."""
        return self.stored_meta["backend"]


def stored_run_meta(meta: dict[str, Any]) -> dict[str, Any]:
    keys = ("experiment", "grid", "levels", "steps", "dtime_s", "substeps")
    return {k: meta[k] for k in keys} | {"moist": meta.get("moist", "")}


def run_and_collect(meta: dict[str, Any], backend_name: str, progress: Callable[[str], None],
                    *, verbose: bool = False, tamper: Callable[[list[dict]], None] | None = None) -> tuple[run.Session, list[dict]]:
    """The JW configuration `meta` describes, run with `backend_name`; the prognostic fields after
    every step. `tamper` (tests only) may change the collected fields before they are returned."""
    from icoforge.grids.load import resolve_grid_path
    from icoforge.suite.backends import get_backend, warm_compile_workers

    if meta["experiment"] != "jw":
        raise ValueError(f"stored experiment {meta['experiment']!r}: only jw is known")
    backend = get_backend(backend_name)
    warm_compile_workers(backend_name, backend)
    run.quiet_icon4py(verbose)
    with tempfile.TemporaryDirectory(prefix="icoforge-model-") as tmp:
        moist = meta.get("moist", "")  # "", "tracers" or "muphys"
        cfg = experiments.jw_config(levels=meta["levels"], dtime_s=meta["dtime_s"], steps=meta["steps"],
                                    substeps=meta["substeps"], output=pathlib.Path(tmp) / "output",
                                    tracers=moist == "tracers", muphys=moist == "muphys")
        session = run.start(cfg.config, resolve_grid_path(meta["grid"]), backend, progress)
        fields = []
        for _ in range(meta["steps"]):
            step = session.step()
            fields.append(run.prognostic_arrays(session))
            progress(f"step {step.index}/{meta['steps']}: {step.seconds:.3f} s")
    if tamper is not None:
        tamper(fields)
    return session, fields


def run_check(backend_name: str, progress: Callable[[str], None], *, path: pathlib.Path = store.STORE,
              verbose: bool = False, tamper: Callable[[list[dict]], None] | None = None) -> CheckResult:
    stored = store.load_store(path)
    meta = stored["meta"]
    moist = f" + {meta['moist']}" if meta.get("moist") else ""
    progress(f"stored run: {meta['experiment']}{moist} on {meta['grid']}/{meta['levels']} levels, {meta['steps']} steps of "
             f"{meta['dtime_s']:g} s, by {meta['backend']} ({meta['recorded']})")
    session, fields = run_and_collect(stored_run_meta(meta), backend_name, progress, verbose=verbose, tamper=tamper)
    verdict, lines = store.compare(stored, fields)
    return CheckResult(verdict, lines, session, meta)


def record(backend_name: str, meta: dict[str, Any], out: pathlib.Path, progress: Callable[[str], None]) -> dict:
    """Run the configuration with the reference backend and write the store."""
    _, fields = run_and_collect(meta, backend_name, progress)
    data = store.make_store({**meta, "backend": backend_name, "made_by": _made_by(backend_name)}, fields)
    store.write_store(out, data)
    return data


def store_from_files(directory: pathlib.Path, meta: dict[str, Any], out: pathlib.Path) -> dict:
    """The store from `step1.npz .. stepN.npz` of `scripts/model/record_jw.py`."""
    fields = []
    for i in range(1, meta["steps"] + 1):
        with np.load(directory / f"step{i}.npz") as f:
            fields.append({k: f[k] for k in (store.fields_of(f) if meta.get("moist") else store.FIELDS)})
    data = store.make_store({**meta, "made_by": _made_by(meta["backend"])}, fields)
    store.write_store(out, data)
    return data


def _made_by(backend_name: str) -> str:
    return (f"{backend_name} made everything: grid geometry, interpolation and metric fields, the analytic JW "
            f"topography and initial condition, and every step (icon4py's driver with the backend passed "
            f"to it unchanged); the grid file is icoforge's preset, made by icon-grid-generator")
