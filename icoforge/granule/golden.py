"""Recorded reference results: a compact fingerprint of one backend's verification substeps.

GT4Py's CPU backends cannot run the granule within CI's time on 2 cores (gtfn_cpu needs tens of
minutes to compile it; embedded and roundtrip_gtir fail on it; the Python roundtrip takes tens of
minutes per substep on R2B3). So a reference run records, per substep of
`verify.VERIFY_SEQUENCE` and per prognostic field:

- the largest magnitude, max|x|;
- `N_PROJECTIONS` random projections sum_i r_i x_i, with r ~ N(0, 1) drawn from a seed fixed per
  field and shape: every value of the field enters, so a wrong kernel anywhere shows;
- `N_SAMPLES` values at fixed positions (spread over the field, plus its extremes).

`compare_golden` turns those into the same kind of number as a live verification:
max|a - b| / max|b| over the samples, and over the projections the smallest one-point error
that could explain their difference: max_j |p_j(a) - p_j(b)| / (max|b| w_min), where w_min is
the smallest, over the field's points, of the largest weight any projection gives a point
(`single_point_weight`; 0.32-0.69 for R2B3/10's fields). One point off by d max|b|, sampled or
not, moves some projection by at least d max|b| w_min, so this number is at least d: a single
wrong point larger than the tolerance fails (issue 51; before, the projections were divided by
sqrt(n) max|b| and one point off by ~1e-7 max|b| passed on R2B3). Legitimate rounding
differences at many points add up like sqrt(n) (the 2026-11-29 recording found icoforge-cpu
bitwise equal to gtfn_cpu on R2B3/10; not measured again with this check).
The file also records what the inputs depended on (grid file, levels, seed, configuration,
versions); `check_inputs` refuses a comparison when they differ.

Write one with `icoforge greenline ... --backend gtfn_cpu --save-reference PATH`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
import pathlib
from typing import Any

import numpy as np

from icoforge.granule import verify
from icoforge.granule.state import PROGNOSTIC_FIELDS

GOLDEN_VERSION = 2  # what `write` records; `load` also reads version 1 (other projections)
READABLE_VERSIONS = (1, 2)
N_PROJECTIONS = 16
N_SAMPLES = 48


def _field_seed(field: str, shape: tuple[int, ...]) -> int:
    return int.from_bytes(hashlib.sha256(f"{field}{shape}".encode()).digest()[:8], "little")


def _projections(field: str, x: np.ndarray, version: int = GOLDEN_VERSION) -> np.ndarray:
    rng = np.random.default_rng(_field_seed(field, x.shape))
    if version == 1:
        # a dense Gaussian weight per value: N_PROJECTIONS x size random numbers, ~110 s for the
        # five fields of three substeps on R2B6/80 (measured on the H200 host, 2026-11-30)
        r = rng.standard_normal((N_PROJECTIONS, x.size))
        return r @ x.reshape(-1)
    # version 2: the weight of x[i, k] is u[i] * v[k], u and v Gaussian: still zero mean and unit
    # variance, still every value enters, but only N_PROJECTIONS x (rows + columns) random numbers
    rows = x.shape[0] if x.ndim else 1
    m = x.reshape(rows, x.size // rows if rows else 0)
    u = rng.standard_normal((N_PROJECTIONS, m.shape[0]))
    v = rng.standard_normal((N_PROJECTIONS, m.shape[1]))
    return ((u @ m) * v).sum(axis=1)


@functools.lru_cache(maxsize=64)
def single_point_weight(field: str, shape: tuple[int, ...], version: int = GOLDEN_VERSION) -> float:
    """min over the points i of max over the projections j of |w_ji|: one point off by e moves
    some projection by at least e times this (exactly the weights `_projections` draws)."""
    rng = np.random.default_rng(_field_seed(field, tuple(shape)))
    size = int(np.prod(shape))
    if version == 1:
        return float(np.abs(rng.standard_normal((N_PROJECTIONS, size))).max(axis=0).min()) if size else 1.0
    rows = shape[0] if len(shape) else 1
    cols = size // rows if rows else 0
    u = np.abs(rng.standard_normal((N_PROJECTIONS, rows)))
    v = np.abs(rng.standard_normal((N_PROJECTIONS, cols)))
    return float((u[:, :, None] * v[:, None, :]).max(axis=0).min()) if size else 1.0


def _sample_positions(field: str, x: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(_field_seed(field, x.shape) + 1)
    flat = x.reshape(-1)
    spread = rng.choice(flat.size, size=min(N_SAMPLES, flat.size), replace=False)
    return np.unique(np.concatenate([spread, [int(np.argmax(flat)), int(np.argmin(flat))]]))


def fingerprint(
    results: list[dict[str, np.ndarray]], version: int = GOLDEN_VERSION, sequence: tuple[str, ...] = verify.VERIFY_SEQUENCE
) -> list[dict[str, Any]]:
    """`sequence`: the labels of the results (another granule's, e.g. diffusion.py's, differ)."""
    out = []
    for variant, fields in zip(sequence, results):
        entry: dict[str, Any] = {"variant": variant, "fields": {}}
        for name in PROGNOSTIC_FIELDS:
            x = np.asarray(fields[name], dtype=np.float64)
            pos = _sample_positions(name, x)
            entry["fields"][name] = {
                "shape": list(x.shape),
                "max_abs": float(np.max(np.abs(x))),
                "projections": [float(v) for v in _projections(name, x, version)],
                "sample_positions": [int(p) for p in pos],
                "samples": [float(v) for v in x.reshape(-1)[pos]],
            }
        out.append(entry)
    return out


def grid_and_state_inputs(grid: Any, levels: int, seed: int) -> dict[str, Any]:
    """The inputs every granule's recording shares: grid, levels, seed, static fields, initial state."""
    from icoforge.granule import fields, state

    return {
        "grid": grid.name,
        "grid_file": pathlib.Path(grid.path).name,
        "levels": int(levels),
        "seed": int(seed),
        "static_fields": fields.FIELDS_VERSION,
        "state": [state.ZONAL_WIND, state.WIND_NOISE, state.W_NOISE, state.RHO_NOISE, state.THETA_NOISE],
    }


def input_description(grid: Any, levels: int, seed: int, substeps: int, dtime: float) -> dict[str, Any]:
    """What the verification substeps' inputs depend on (besides the code; the factory backend
    changes the static fields at most by rounding and is left out). `substeps` and `dtime` are the
    runner's, which calls this: passed in, so golden does not import the runner back."""
    from icoforge.granule import solver

    return {
        **grid_and_state_inputs(grid, levels, seed),
        "solver": [
            solver.FOURTH_ORDER_DIVDAMP_FACTOR,
            solver.MAX_NUDGING_COEFFICIENT,
            solver.SECOND_ORDER_DIVDAMP_FACTOR,
            substeps,
            dtime,
        ],
        "sequence": list(verify.VERIFY_SEQUENCE),
        "icon4py": importlib.metadata.version("icon4py-atmosphere-dycore"),
        "gt4py": importlib.metadata.version("gt4py"),
    }


def write(
    path: str | pathlib.Path,
    backend: str,
    inputs: dict[str, Any],
    results: list[dict[str, np.ndarray]],
    environment: dict[str, Any],
    version: int = GOLDEN_VERSION,
    sequence: tuple[str, ...] = verify.VERIFY_SEQUENCE,
) -> None:
    data = {
        "golden_version": version,
        "backend": backend,
        "inputs": inputs,
        "environment": environment,
        "substeps": fingerprint(results, version, sequence),
    }
    pathlib.Path(path).write_text(json.dumps(data, indent=1) + "\n")


def load(path: str | pathlib.Path) -> dict[str, Any]:
    data = json.loads(pathlib.Path(path).read_text())
    if data.get("golden_version") not in READABLE_VERSIONS:
        raise ValueError(f"{path}: golden version {data.get('golden_version')}, readable: {READABLE_VERSIONS}")
    return data


def check_inputs(golden: dict[str, Any], inputs: dict[str, Any]) -> list[str]:
    """Differences between the recorded inputs and these (empty: comparable)."""
    recorded = golden["inputs"]
    return [f"{k}: recorded {recorded.get(k)!r}, now {v!r}" for k, v in inputs.items() if recorded.get(k) != v]


def compare_golden(
    results: list[dict[str, np.ndarray]],
    golden: dict[str, Any],
    backend: str,
    rtol: float,
    sequence: tuple[str, ...] = verify.VERIFY_SEQUENCE,
) -> verify.Comparison:
    """Results of the verification substeps against a recorded fingerprint: the results are
    fingerprinted the same way, with the recorded file's version of the projections (a NaN or
    Inf anywhere reaches the projections) and compared."""
    version = golden["golden_version"]
    test = {"golden_version": version, "backend": backend, "inputs": golden["inputs"], "substeps": fingerprint(results, version, sequence)}
    return compare_fingerprints(test, golden, rtol)


def compare_fingerprints(test: dict[str, Any], ref: dict[str, Any], rtol: float) -> verify.Comparison:
    """Two recorded fingerprints of the same inputs (e.g. two backends run in separate processes):
    the same sampled points, projections and maxima, compared as `compare_golden` does."""
    if problems := check_inputs(ref, test["inputs"]):
        raise ValueError("fingerprints of different inputs: " + "; ".join(problems))
    if test.get("golden_version") != ref.get("golden_version"):  # their projections differ
        raise ValueError(f"fingerprint versions differ: {test.get('golden_version')} and {ref.get('golden_version')}")
    substeps = []
    for t, r in zip(test["substeps"], ref["substeps"], strict=True):
        if t["variant"] != r["variant"]:
            raise ValueError(f"substep {t['variant']!r} vs {r['variant']!r}")
        diffs = []
        for name in PROGNOSTIC_FIELDS:
            tf, rf = t["fields"][name], r["fields"][name]
            if tf["shape"] != rf["shape"]:
                raise ValueError(f"{name}: shape {tuple(tf['shape'])}, reference {tuple(rf['shape'])}")
            values = [np.asarray(tf[k], dtype=np.float64) for k in ("samples", "projections")] + [np.float64(tf["max_abs"])]
            if not all(np.isfinite(v).all() for v in values):  # (a NaN also moves the argmax sample)
                diffs.append(verify.FieldDiff(name, math.inf, math.inf, False))
                continue
            # the random sample points agree (seeded by field and shape); the argmax/argmin points
            # may differ between two results: compare the points both have
            ref_at = dict(zip(rf["sample_positions"], rf["samples"]))
            common = [(v, ref_at[p]) for p, v in zip(tf["sample_positions"], tf["samples"]) if p in ref_at]
            scale = rf["max_abs"] or 1.0
            sample_abs = max(abs(v - w) for v, w in common)
            # the smallest one-point error (relative to max|x|) that moves the projections this much
            weight = single_point_weight(name, tuple(rf["shape"]), int(ref["golden_version"]))
            proj_rel = float(np.max(np.abs(values[1] - np.asarray(rf["projections"])))) / (scale * weight)
            max_abs_rel = abs(tf["max_abs"] - rf["max_abs"]) / scale
            diffs.append(verify.FieldDiff(name, sample_abs, max(sample_abs / scale, proj_rel, max_abs_rel), True))
        substeps.append((t["variant"], diffs))
    return verify.Comparison(backend=test["backend"], reference=f"{ref['backend']} (recorded)", rtol=rtol, substeps=substeps)


def _main(argv: list[str]) -> int:
    """python -m icoforge.granule.golden compare REF.json TEST.json [RTOL]"""
    if len(argv) not in (3, 4) or argv[0] != "compare":
        print(_main.__doc__)
        return 2
    rtol = float(argv[3]) if len(argv) == 4 else verify.DEFAULT_RTOL
    c = compare_fingerprints(load(argv[2]), load(argv[1]), rtol)
    print(json.dumps({k: v for k, v in c.to_json().items() if k != "substeps"}, indent=1))
    return 0 if c.passed else 1


__all__ = [
    "check_inputs",
    "compare_fingerprints",
    "compare_golden",
    "fingerprint",
    "input_description",
    "load",
    "single_point_weight",
    "write",
]

if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
