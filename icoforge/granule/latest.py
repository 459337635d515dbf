"""`benchmarks/granule-latest.json`: the headline of the newest side-by-side granule run.

Written by `icoforge greenline ... --latest PATH` or `icoforge greenline-merge ... --latest PATH`
from one report (all backends from one machine state), in the format the performance issue asks
for: date, commit, machine, grid, levels, dycore step per backend (ms), cold compile per backend
(s, only for runs that compiled cold), and the three byte floors (ms) when a granule roofline's JSON
(`icoforge roofline greenline --json`) of the same grid is given. Everything else a reader needs
to trust the numbers (Python mode, substep medians, the GPU's idle fraction) comes along.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

from icoforge.errors import IcoforgeError
from icoforge.granule.merge import python_optimized_modes, run_environments

Data = dict[str, Any]
FLOORS = ("kernel", "program", "substep")


def git_commit(root: pathlib.Path | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None  # e.g. the device machine's copy of the tree has no .git
    return out.stdout.strip() or None


def _cold_compile_s(data: Data, b: Data) -> float | None:
    """Construction + compile + first calls, for a run that compiled cold (`--cold`); else None."""
    sources = data.get("merged_from") or [{"options": data["options"], "backends": [b["backend"]]}]
    src = next((s for s in sources if b["backend"] in s["backends"]), sources[0])
    if not (src.get("options") or data["options"]).get("cold"):
        return None
    return round(sum(v for k, v in b["setup_s"].items() if k in ("construct", "compile", "first_calls")), 2)


def floors_from_roofline(path: str | pathlib.Path) -> dict[str, float]:
    """The `floors_ms` of a granule roofline's JSON report."""
    try:
        data = json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError) as e:
        raise IcoforgeError(f"floors: cannot read {path}: {e}") from e
    floors = data.get("floors_ms")
    if not isinstance(floors, dict) or not all(k in floors for k in FLOORS):
        raise IcoforgeError(f"floors: {path} has no floors_ms with {', '.join(FLOORS)} (a granule roofline's --json?)")
    return {k: float(floors[k]) for k in FLOORS}


def report_floors(data: Data) -> tuple[str, Data] | None:
    """(backend, floors) of the first backend of a report that recorded byte floors (greenline
    --floors-steps), or None."""
    return next(((b["backend"], b["floors"]) for b in data["backends"] if b.get("floors")), None)


def _round(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)


def latest(data: Data, commit: str | None, floors_ms: dict[str, float] | None = None) -> Data:
    """The granule-latest record of a (merged) greenline report; without `floors_ms` (a roofline's),
    the floors an icoforge backend recorded in this very run."""
    envs = [env for _, env in run_environments(data)]
    optimized = python_optimized_modes(data)
    backends = [b for b in data["backends"] if b.get("dycore_step_ms") is not None]
    if not backends:
        raise IcoforgeError("latest: the report has no backend with a timed dycore step")
    machine = envs[0].get("gpu") or envs[0].get("host")
    floors_source = "roofline report" if floors_ms is not None else None
    if floors_ms is None and (recorded := report_floors(data)):
        floors_source = f"this run, {recorded[0]}'s kernels at {recorded[1]['floors_bandwidth_GBps']:.1f} GB/s copy bandwidth"
        floors_ms = {k: round(float(recorded[1]["floors_ms"][k]), 3) for k in FLOORS}
    return {
        "date": envs[0].get("date"),
        "commit": commit,
        "machine": f"{machine} ({envs[0].get('host')}, {envs[0].get('cpus')} CPUs)",
        "grid": data["grid"].get("name", data["options"]["grid"]),
        "levels": data["options"]["levels"],
        "python_optimized": optimized.pop() if len(optimized) == 1 else None,
        "step_ms": {b["backend"]: round(b["dycore_step_ms"], 3) for b in backends},
        "substep_ms": {
            b["backend"]: {v: round(vv["median_ms"], 3) for v, vv in b["variants"].items()} for b in backends
        },
        "gpu_idle_fraction": {
            b["backend"]: {v: round(vv["idle_fraction"], 3) for v, vv in b["variants"].items() if "idle_fraction" in vv}
            for b in backends
            if any("idle_fraction" in vv for vv in b["variants"].values())
        },
        "cold_compile_s": {b["backend"]: _cold_compile_s(data, b) for b in backends},
        # each backend's configuration: icon4py's descriptor and the options it gave each program
        # (a report written before the peers became icon4py's descriptors did not record it)
        "peer_config": {b["backend"]: b.get("peer_config") or {"source": "not recorded"} for b in backends},
        # --graph-replay: the step from substeps replayed as CUDA graphs (None: a replay failed or differed)
        **({"replayed_step_ms": {b["backend"]: _round(b.get("replayed_step_ms")) for b in backends if b.get("graph_replay")}}
           if any(b.get("graph_replay") for b in backends) else {}),  # fmt: skip
        "floors_ms": floors_ms,
        "floors_source": floors_source,
        "versions": envs[0].get("versions", {}),
    }


def write_latest(path: str | pathlib.Path, data: Data, commit: str | None, floors: str | None = None) -> Data:
    record = latest(data, commit, floors_from_roofline(floors) if floors else None)
    pathlib.Path(path).write_text(json.dumps(record, indent=1) + "\n")
    return record
