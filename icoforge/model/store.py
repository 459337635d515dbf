"""Stored results of one JW run by a GT4Py backend (gtfn_cpu), and the check of another backend's
run of the same configuration against them, without compiling gtfn_cpu (~18 min on 2 cores).

The store (`jw_references.json`, beside this module) holds, for every step of the run, a digest
of each prognostic field (vn, w, rho, exner, theta_v): SHA-256 of its bytes, count, sum, sum |x|,
sum x^2, min, max and the values at `SAMPLES` seeded points; and for the last step the whole
fields (float64, byte planes split and LZMA-compressed, base64). It records the backend that made
everything (grid geometry, interpolation and metric fields, the initial condition and the steps
are all computed by the run's own backend), icon4py/GT4Py/NumPy versions, grid, levels, steps.

A check says one of:
- "bitwise": every field of every step has the stored SHA-256;
- "within icon4py's JW tolerances": not bitwise, but every point of the last step lies within
  `_TOLERANCES[JW]` of icon4py's `test_driver.py` (|a - b| <= atol + rtol |b|), and the sampled
  points of the earlier steps too;
- failures, one line each (a NaN never passes).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import lzma
import pathlib
from typing import Any

import numpy as np

from icoforge.portable_numpy import require_portable_rounding

STORE = pathlib.Path(__file__).with_name("jw_references.json")
FORMAT = 1
SAMPLES = 16
VERSIONED = ("gt4py", "icon4py-common", "icon4py-atmosphere-dycore", "icon4py-atmosphere-diffusion",
             "icon4py-driver", "icon-grid-generator", "numpy")
# icon4py 0.4.1, model/driver/tests/driver/integration_tests/test_driver.py, _TOLERANCES[JW]:
# (atol, rtol) per field, "measured across the CSCS CI backends". tests/model checks these
# numbers against that file where it is present.
JW_TOLERANCES = {
    "vn": (5.3e-7, 0.0),
    "w": (8e-9, 0.0),
    "exner": (4.5e-11, 5.5e-11),
    "theta_v": (5.5e-8, 1.3e-10),
    "rho": (1.5e-10, 2.2e-10),
}
FIELDS = tuple(JW_TOLERANCES)
# the moist runs' stores (`icoforge model --check --muphys` / `--tracers`): the same digests, also
# of the advected tracers (qv, and with muphys qc qi qr qs qg). icon4py gives no tolerance for
# tracers: they must match bit for bit (a difference fails, with its size said).
MOIST_STORES = {moist: STORE.with_name(f"jw_{moist}_references.json") for moist in ("muphys", "tracers")}


def fields_of(step: dict[str, Any]) -> tuple[str, ...]:
    """The prognostic fields, then the tracers a run's step holds (sorted)."""
    return FIELDS + tuple(sorted(k for k in step if k not in FIELDS))


def store_path(moist: str = "") -> pathlib.Path:
    """The store of the dry run ("") or of a moist one ("muphys", "tracers")."""
    return MOIST_STORES[moist] if moist else STORE


def _sample_points(name: str, size: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).choice(size, size=min(SAMPLES, size), replace=False)


def digest(name: str, a: np.ndarray) -> dict[str, Any]:
    a = np.ascontiguousarray(a, dtype=np.float64)
    flat = a.ravel()
    points = _sample_points(name, flat.size)
    return {
        "shape": list(a.shape),
        "sha256": hashlib.sha256(flat.tobytes()).hexdigest(),
        "sum": float(flat.sum()),
        "sum_abs": float(np.abs(flat).sum()),
        "sum_sq": float((flat * flat).sum()),
        "min": float(flat.min()),
        "max": float(flat.max()),
        "points": points.tolist(),
        "values": flat[points].tolist(),
    }


def pack(a: np.ndarray) -> str:
    """float64 array -> base64 of LZMA over its 8 byte planes (high bytes compress well)."""
    planes = np.ascontiguousarray(a, dtype="<f8").view(np.uint8).reshape(-1, 8).T.copy()
    return base64.b64encode(lzma.compress(planes.tobytes(), preset=9 | lzma.PRESET_EXTREME)).decode()


def unpack(text: str, shape: list[int]) -> np.ndarray:
    planes = np.frombuffer(lzma.decompress(base64.b64decode(text)), dtype=np.uint8).reshape(8, -1)
    return planes.T.copy().view("<f8").reshape(shape)


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for name in VERSIONED:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


def make_store(run_meta: dict[str, Any], steps: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """The store from the fields after steps 1..n (`steps[i]` = after step i+1) of one run."""
    return {
        "format": FORMAT,
        "meta": {**run_meta, "versions": versions(), "recorded": datetime.date.today().isoformat(),
                 "tolerances": {k: list(v) for k, v in JW_TOLERANCES.items()},
                 "tolerances_source": "icon4py 0.4.1 test_driver.py _TOLERANCES[Experiments.JW]"},
        "steps": [{f: digest(f, s[f]) for f in fields_of(steps[0])} for s in steps],
        "final": {f: pack(steps[-1][f]) for f in fields_of(steps[0])},
    }


def write_store(path: pathlib.Path, store: dict[str, Any]) -> None:
    require_portable_rounding(f"recording {path}")
    tmp = path.with_suffix(".json.part")
    tmp.write_text(json.dumps(store, indent=0, sort_keys=True) + "\n")
    tmp.replace(path)


def load_store(path: pathlib.Path = STORE) -> dict[str, Any]:
    store = json.loads(path.read_text())
    if store.get("format") != FORMAT:
        raise ValueError(f"{path}: store format {store.get('format')}, expected {FORMAT}: regenerate it")
    return store


def within(test: np.ndarray, ref: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Per point: |test - ref| <= atol + rtol |ref| (NaN never)."""
    return np.abs(test - ref) <= atol + rtol * np.abs(ref)


def compare(store: dict[str, Any], steps: list[dict[str, np.ndarray]]) -> tuple[str, list[str]]:
    """("bitwise" | "tolerance" | "failed", lines): the run's fields after steps 1..n against the store."""
    want = store["steps"]
    if len(steps) != len(want):
        return "failed", [f"the run has {len(steps)} steps, the store {len(want)}"]
    fields = tuple(want[0])
    if set(steps[0]) != set(fields):
        return "failed", [f"the run has fields {sorted(steps[0])}, the store {sorted(fields)}"]
    lines: list[str] = []
    if all(digest(f, s[f])["sha256"] == w[f]["sha256"] for s, w in zip(steps, want) for f in fields):
        return "bitwise", [f"all {len(fields)} fields of all {len(steps)} steps bitwise equal to the store"]
    # tracers: no tolerance (bitwise or failed; the difference is said)
    tol = {f: (0.0, 0.0) for f in fields} | {k: tuple(v) for k, v in store["meta"]["tolerances"].items()}
    for i, (s, w) in enumerate(zip(steps[:-1], want[:-1]), start=1):
        for f in fields:
            got = np.ascontiguousarray(s[f], dtype=np.float64).ravel()[w[f]["points"]]
            ok = within(got, np.asarray(w[f]["values"]), *tol[f])
            if not ok.all():
                lines.append(f"step {i} {f}: {int((~ok).sum())} of {ok.size} sampled points outside atol/rtol {tol[f]}")
    for f in fields:
        ref = unpack(store["final"][f], want[-1][f]["shape"])
        got = np.asarray(steps[-1][f], dtype=np.float64)
        if got.shape != ref.shape:
            lines.append(f"step {len(steps)} {f}: shape {got.shape}, stored {ref.shape}")
            continue
        ok = within(got, ref, *tol[f])
        err = float(np.nanmax(np.abs(got - ref))) if np.isfinite(got).all() else float("nan")
        status = "ok" if ok.all() else f"{int((~ok).sum())} of {ok.size} points outside"
        lines.append(f"step {len(steps)} {f}: max |diff| {err:.3g} (atol {tol[f][0]:g}, rtol {tol[f][1]:g}): {status}")
    failed = any(not line.endswith(": ok") for line in lines)
    return ("failed" if failed else "tolerance"), lines
