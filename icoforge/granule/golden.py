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

And it records which backend made every input of the recorded results (`input_backends`, issue
51 item 2), taken by `write` from the objects the run used, never from a string typed in: the
backend that ran the granule's programs (the granule's backend object) and the one that computed
the static fields (geometry, interpolation, metrics: the `StaticFields` object's
`factory_backend`, which the field cache stores with the fields), each with who made it
(`made_by`: "GT4Py" or "icoforge", from the backend object's executor). `independence_problems`
says why a recorded file is no independent reference: backends not recorded (files written
before), or an input made by icoforge itself -- a bug in an icoforge-compiled program would then
be in the reference too.

Write one with `icoforge greenline ... --backend gtfn_cpu --factory-backend gtfn_cpu
--save-reference PATH`.
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
from icoforge.portable_numpy import avx512_paths_on, openblas_core

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


def _point_weights(field: str, shape: tuple[int, ...], version: int = GOLDEN_VERSION) -> np.ndarray:
    """Per point i (flat index) max over the projections j of |w_ji|: exactly the weights
    `_projections` draws."""
    rng = np.random.default_rng(_field_seed(field, tuple(shape)))
    size = int(np.prod(shape))
    if version == 1:
        return np.abs(rng.standard_normal((N_PROJECTIONS, size))).max(axis=0)
    rows = shape[0] if len(shape) else 1
    cols = size // rows if rows else 0
    u = np.abs(rng.standard_normal((N_PROJECTIONS, rows)))
    v = np.abs(rng.standard_normal((N_PROJECTIONS, cols)))
    return (u[:, :, None] * v[:, None, :]).max(axis=0).reshape(-1)


@functools.lru_cache(maxsize=64)
def single_point_weight(field: str, shape: tuple[int, ...], version: int = GOLDEN_VERSION) -> float:
    """min over the points i of max over the projections j of |w_ji|: one point off by e moves
    some projection by at least e times this (exactly the weights `_projections` draws)."""
    w = _point_weights(field, tuple(shape), version)
    return float(w.min()) if w.size else 1.0


def plant_one_point_fault(
    results: list[dict[str, np.ndarray]], substep: int, field: str, rel: float, version: int = GOLDEN_VERSION
) -> tuple[list[dict[str, np.ndarray]], int]:
    """Planted fault for the granule checks (issue 51 item 5), the same for every granule: copies
    of `results` with one point of `results[substep][field]` moved by rel * max|x|, the point the
    projections of `version` weigh least -- the hardest single point for the check to see; it is
    never one of the sampled points (checked). Returns the copies and the flat index moved (C
    order, as the projections and samples count points: whatever the arrays' memory layout -- the
    granules' live fields are not C-contiguous, where `.reshape(-1)` is a copy and a fault written
    through it was lost)."""
    x = np.asarray(results[substep][field])
    point = int(np.argmin(_point_weights(field, x.shape, version)))
    if point in set(_sample_positions(field, x).tolist()):
        raise ValueError(f"{field}: the least-weighted point {point} is sampled; plant the fault elsewhere")
    wrong = [{k: np.array(a, copy=True) for k, a in r.items()} for r in results]
    wrong[substep][field][np.unravel_index(point, x.shape)] += rel * float(np.max(np.abs(x)))
    moved = np.flatnonzero((np.asarray(wrong[substep][field]) != x).reshape(-1))
    if moved.tolist() != [point]:  # (a fault too small to change the value, or written elsewhere)
        raise ValueError(f"{field}: the planted fault moved points {moved.tolist()[:5]}, not just {point}")
    return wrong, point


def _sample_positions(field: str, x: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(_field_seed(field, x.shape) + 1)
    flat = x.reshape(-1)
    spread = rng.choice(flat.size, size=min(N_SAMPLES, flat.size), replace=False)
    return np.unique(np.concatenate([spread, [int(np.argmax(flat)), int(np.argmin(flat))]]))


def fingerprint(
    results: list[dict[str, np.ndarray]], version: int = GOLDEN_VERSION, sequence: tuple[str, ...] = verify.VERIFY_SEQUENCE
) -> list[dict[str, Any]]:
    """`sequence`: the labels of the results (another granule's, e.g. diffusion.py's, differ); every
    field of each result (the prognostic ones; advection.py's tracer fields)."""
    out = []
    for variant, fields in zip(sequence, results):
        entry: dict[str, Any] = {"variant": variant, "fields": {}}
        for name in fields:
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


def component_inputs(
    kind: str, grid: Any, levels: int, seed: int, *, config: dict, dtime: float, sequence: tuple[str, ...], package: str,
    **own: Any,
) -> dict[str, Any]:
    """The inputs of a component granule's recording (diffusion, advection, muphys): its kind, the
    shared grid and state (`grid_and_state_inputs`), its configuration, what else its own inputs
    depend on (`own`), dtime, its verification sequence and the versions of its icon4py `package`
    and of GT4Py."""
    return {
        "granule": kind,
        **grid_and_state_inputs(grid, levels, seed),
        "config": dict(config),
        **own,
        "dtime": dtime,
        "sequence": list(sequence),
        "icon4py": importlib.metadata.version(package),
        "gt4py": importlib.metadata.version("gt4py"),
    }


def input_description(grid: Any, levels: int, seed: int, substeps: int, dtime: float) -> dict[str, Any]:
    """What the verification substeps' inputs depend on (besides the code; the factory backend
    changes the static fields at most by rounding and is left out here, so that a run with other
    factories is comparable: `write` records it separately, `input_backends`). `substeps` and `dtime` are the
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


GT4PY, ICOFORGE = "GT4Py", "icoforge"


def made_by(backend: Any) -> str:
    """Whose code runs the programs of a backend object (what `resolve_backend` returns): "GT4Py"
    for GT4Py's own (embedded: None; icon4py's descriptors of GT4Py's backends; GT4Py's Backend
    objects), "icoforge" for any backend whose executor is icoforge's -- a fallback pair by its
    primary, the Python roundtrip of icoforge's cached passes included (icoforge's pass cache)."""
    if backend is None:
        return GT4PY  # GT4Py's embedded execution
    if isinstance(backend, dict):  # icon4py's descriptor: a factory of GT4Py's backend
        factory = backend.get("backend_factory")
        module = getattr(factory, "__module__", "") or ""
        return ICOFORGE if module.startswith("icoforge") else GT4PY
    executor = getattr(backend, "executor", None)
    executor = getattr(executor, "primary", executor)  # granule.backends.FallbackExecutor
    module = type(executor).__module__ or ""
    if module.startswith("icoforge"):
        return ICOFORGE
    if module.startswith("gt4py"):
        return GT4PY
    raise ValueError(f"backend {getattr(backend, 'name', backend)!r}: executor {type(executor).__qualname__} from "
                     f"{module!r}, neither GT4Py's nor icoforge's")  # fmt: skip


def input_backends(granule: Any, static: Any) -> dict[str, dict[str, Any]]:
    """Which backend made each input of a granule's results, from the objects used: `granule` (a
    runner.Granule: `.name`, the backend object `.backend`) ran the programs; `static`
    (fields.StaticFields) names the backend its factories ran with."""
    from icoforge.granule.backends import resolve_backend

    def entry(name: str, obj: Any) -> dict[str, Any]:
        gt_name = obj.get("backend_factory").__name__ if isinstance(obj, dict) else getattr(obj, "name", "embedded")
        return {"name": name, "object": str(gt_name), "made_by": made_by(obj)}

    return {
        "programs": entry(granule.name, granule.backend),
        "static_fields": {**entry(static.factory_backend, resolve_backend(static.factory_backend)),
                          "cached": bool(static.cached), "factory_s": dict(static.timings)},
    }  # fmt: skip


def independence_problems(data: dict[str, Any]) -> list[str]:
    """Why a recorded file is no reference independent of icoforge (empty: every input it records
    was made by GT4Py): no recorded input backends, or one made by icoforge."""
    backends = data.get("input_backends")
    if not isinstance(backends, dict) or not all(
        isinstance(backends.get(k), dict) and "made_by" in backends[k] for k in ("programs", "static_fields")
    ):
        return ["the recording does not say which backends made its inputs (no input_backends written by "
                "golden.write): which backend computed its static fields is unknown"]  # fmt: skip
    what = {
        "programs": "its programs ran on",
        "static_fields": "its static fields (geometry, interpolation, metrics) were computed by",
    }
    return [
        f"{what[k]} {backends[k]['name']}, icoforge's own: a bug shared by icoforge's programs would be in the reference too"
        for k in ("programs", "static_fields")
        if backends[k]["made_by"] != GT4PY
    ]


def write(
    path: str | pathlib.Path,
    granule: Any,
    static: Any,
    inputs: dict[str, Any],
    results: list[dict[str, np.ndarray]],
    environment: dict[str, Any],
    version: int = GOLDEN_VERSION,
    sequence: tuple[str, ...] = verify.VERIFY_SEQUENCE,
) -> None:
    """Record `granule`'s `results` (a runner.Granule, run on the static fields `static`): its
    backend and the backends of its inputs from these objects (`input_backends`). Whether numpy
    rounded with its AVX-512 paths (and which OpenBLAS core it used) is recorded, not refused: a device run's fingerprint (compared
    within that run) may be made on an AVX-512 host; a stored reference of the test suite may not,
    which tests/granule/test_reference_grid.py checks from this flag."""
    environment = {**environment, "numpy_avx512_paths": avx512_paths_on(), "openblas_core": openblas_core()}
    data = {
        "golden_version": version,
        "backend": granule.name,
        "input_backends": input_backends(granule, static),
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
        if missing := [name for name in r["fields"] if name not in t["fields"]]:
            raise ValueError(f"substep {t['variant']!r}: no {', '.join(missing)} (the reference has them)")
        for name in r["fields"]:
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


# --- whole fields: element by element between two runs -------------------------------------------
#
# A fingerprint's projections sum every point, so two backends that round differently (DaCe
# contracts a*b+c to one fused multiply-add; icoforge does not) move them by rounding summed over
# the whole field: on R2B6/80 (26.5 M points of w) 3.0e-10 of max|w|, which `compare_fingerprints`
# reads, conservatively, as one point off by 1.7e-9 (session 37), while its 50 sampled points differed
# by 4.6e-14. Sixteen projections cannot tell one wrong point from rounding spread over all of
# them; whole fields can. The greenline's `--save-fields` writes them (the device's disk, not the
# call's output: ~1.2 GB per substep on R2B6/80) and `compare-fields` compares them as `--verify`
# compares two backends of one process.


def write_fields(path: str | pathlib.Path, results: list[dict[str, np.ndarray]], sequence: tuple[str, ...]) -> None:
    """`results` of the verification sequence, whole (`np.savez`, uncompressed: float noise does
    not compress), the substep labels beside them."""
    arrays = {f"{i}/{name}": np.asarray(x) for i, r in enumerate(results) for name, x in r.items()}
    np.savez(path, __sequence__=np.array(sequence), **arrays)


def load_fields(path: str | pathlib.Path) -> tuple[list[dict[str, np.ndarray]], tuple[str, ...]]:
    with np.load(path) as z:
        sequence = tuple(str(v) for v in z["__sequence__"])
        results: list[dict[str, np.ndarray]] = [{} for _ in sequence]
        for key in z.files:
            if key != "__sequence__":
                i, name = key.split("/", 1)
                results[int(i)][name] = z[key]
    return results, sequence


def compare_fields(test_path: str | pathlib.Path, ref_path: str | pathlib.Path, rtol: float) -> verify.Comparison:
    """Two `write_fields` files, element by element (largest |a - b| / max|reference| per field)."""
    test, test_seq = load_fields(test_path)
    ref, ref_seq = load_fields(ref_path)
    if test_seq != ref_seq:
        raise ValueError(f"substeps {test_seq} against the reference's {ref_seq}")
    return verify.compare_runs(str(test_path), test, str(ref_path), ref, rtol, ref_seq)


def _main(argv: list[str]) -> int:
    """python -m icoforge.granule.golden compare REF.json TEST.json [RTOL]
    python -m icoforge.granule.golden compare-fields REF.npz TEST.npz [RTOL]   (greenline --save-fields)"""
    if len(argv) not in (3, 4) or argv[0] not in ("compare", "compare-fields"):
        print(_main.__doc__)
        return 2
    rtol = float(argv[3]) if len(argv) == 4 else verify.DEFAULT_RTOL
    if argv[0] == "compare-fields":
        c = compare_fields(argv[2], argv[1], rtol)
        print(json.dumps({k: v for k, v in c.to_json().items() if k != "substeps"}, indent=1))
        return 0 if c.passed else 1
    ref = load(argv[1])
    c = compare_fingerprints(load(argv[2]), ref, rtol)
    print(json.dumps({k: v for k, v in c.to_json().items() if k != "substeps"}, indent=1))
    for problem in independence_problems(ref):
        print(f"warning: {argv[1]} is no reference independent of icoforge: {problem}")
    return 0 if c.passed else 1


__all__ = [
    "check_inputs",
    "compare_fields",
    "compare_fingerprints",
    "compare_golden",
    "fingerprint",
    "independence_problems",
    "input_backends",
    "input_description",
    "load",
    "load_fields",
    "made_by",
    "plant_one_point_fault",
    "single_point_weight",
    "write",
    "write_fields",
]

if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
