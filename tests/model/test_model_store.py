"""The stored gtfn_cpu JW run and the comparison against it, without running the model (seconds)."""

from __future__ import annotations

import ast
import hashlib
import pathlib

import numpy as np
import pytest

from icoforge.model import store

ICON4PY_TEST_DRIVER = (
    pathlib.Path(__file__).resolve().parents[3]
    / "shared/icon4py-0.4.1-tests/model/driver/tests/driver/integration_tests/test_driver.py"
)


def _fields(seed: int, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    scale = {"vn": 30.0, "w": 0.1, "rho": 1.0, "exner": 0.9, "theta_v": 300.0}
    return {f: scale[f] * (1 + 0.1 * rng.standard_normal(shapes[f])) for f in store.FIELDS}


SHAPES = {"vn": (30, 4), "w": (20, 5), "rho": (20, 4), "exner": (20, 4), "theta_v": (20, 4)}
META = {"experiment": "jw", "grid": "R2B3", "levels": 4, "steps": 2, "dtime_s": 60.0, "substeps": 5, "backend": "synthetic"}


def _synthetic() -> tuple[dict, list[dict]]:
    steps = [_fields(1, SHAPES), _fields(2, SHAPES)]
    return store.make_store(META, steps), steps


def test_identical_fields_are_bitwise():
    data, steps = _synthetic()
    verdict, lines = store.compare(data, [{k: v.copy() for k, v in s.items()} for s in steps])
    assert verdict == "bitwise", lines


def test_a_change_in_the_last_bit_is_not_bitwise_but_within_tolerance():
    data, steps = _synthetic()
    changed = [{k: v.copy() for k, v in s.items()} for s in steps]
    changed[-1]["theta_v"][3, 1] = np.nextafter(changed[-1]["theta_v"][3, 1], np.inf)
    verdict, lines = store.compare(data, changed)
    assert verdict == "tolerance", lines
    assert any("theta_v" in line and line.endswith(": ok") for line in lines)


@pytest.mark.parametrize("field", store.FIELDS)
def test_one_point_beyond_icon4pys_tolerance_fails(field):
    data, steps = _synthetic()
    changed = [{k: v.copy() for k, v in s.items()} for s in steps]
    atol, rtol = store.JW_TOLERANCES[field]
    ref = changed[-1][field][2, 2]
    changed[-1][field][2, 2] = ref + 3 * (atol + rtol * abs(ref))
    verdict, lines = store.compare(data, changed)
    assert verdict == "failed"
    assert any(line.startswith(f"step 2 {field}:") and "1 of" in line for line in lines), lines


def test_a_nan_fails():
    data, steps = _synthetic()
    changed = [{k: v.copy() for k, v in s.items()} for s in steps]
    changed[-1]["w"][0, 0] = np.nan
    assert store.compare(data, changed)[0] == "failed"


def _moist() -> tuple[dict, list[dict]]:
    """A store of a moist run: the prognostic fields and two tracers (one all zero, as qc is in a
    short JW run)."""
    rng = np.random.default_rng(7)
    steps = [s | {"qv": 0.01 * rng.random((20, 4)), "qc": np.zeros((20, 4))} for s in (_fields(1, SHAPES), _fields(2, SHAPES))]
    return store.make_store(META | {"moist": "muphys"}, steps), steps


def test_tracers_are_stored_and_compared_bit_for_bit():
    data, steps = _moist()
    assert list(data["steps"][0]) == [*store.FIELDS, "qc", "qv"]
    assert store.compare(data, [{k: v.copy() for k, v in s.items()} for s in steps])[0] == "bitwise"
    changed = [{k: v.copy() for k, v in s.items()} for s in steps]
    changed[-1]["theta_v"][3, 1] = np.nextafter(changed[-1]["theta_v"][3, 1], np.inf)
    assert store.compare(data, changed)[0] == "tolerance"  # icon4py's tolerance for theta_v
    changed[-1]["qv"][2, 2] = np.nextafter(changed[-1]["qv"][2, 2], np.inf)
    verdict, lines = store.compare(data, changed)  # none for a tracer: one bit fails, and says how much
    assert verdict == "failed"
    assert any(line.startswith("step 2 qv: max |diff|") and "1 of 80 points outside" in line for line in lines), lines


def test_a_run_without_the_stored_tracers_fails():
    data, steps = _moist()
    dry = [{k: v for k, v in s.items() if k != "qc"} for s in steps]
    verdict, lines = store.compare(data, dry)
    assert verdict == "failed" and "fields" in lines[0], lines


def test_pack_round_trips_bit_for_bit():
    a = _fields(3, SHAPES)["theta_v"]
    assert np.array_equal(store.unpack(store.pack(a), list(a.shape)).view(np.uint64), a.view(np.uint64))


# --- the stored file -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored():
    if not store.STORE.is_file():
        pytest.fail(f"{store.STORE} missing: record it (scripts/model/record_jw.py, see icoforge/model/store.py)")
    return store.load_store()


def test_store_is_small_and_says_what_made_it(stored):
    assert store.STORE.stat().st_size < 2_000_000
    meta = stored["meta"]
    assert meta["backend"] == "gtfn_cpu" and meta["experiment"] == "jw"
    assert "gtfn_cpu made everything" in meta["made_by"]
    for key in ("grid", "levels", "steps", "dtime_s", "substeps", "recorded"):
        assert meta[key], key
    assert meta["versions"]["icon4py-driver"] == "0.4.1" and meta["versions"]["gt4py"] != "absent"
    assert len(stored["steps"]) == meta["steps"]


def test_stored_last_step_matches_its_digest(stored):
    """The whole last-step fields unpack to the bytes whose SHA-256 the digest holds."""
    last = stored["steps"][-1]
    for f in store.FIELDS:
        a = store.unpack(stored["final"][f], last[f]["shape"])
        assert hashlib.sha256(a.tobytes()).hexdigest() == last[f]["sha256"], f
        assert np.isfinite(a).all(), f


def test_tolerances_are_icon4pys(stored):
    """JW_TOLERANCES (and the store's copy) are the numbers of icon4py's own test_driver.py."""
    if not ICON4PY_TEST_DRIVER.is_file():
        pytest.skip(f"icon4py's tests not at {ICON4PY_TEST_DRIVER}")
    tree = ast.parse(ICON4PY_TEST_DRIVER.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "_TOLERANCES")
    jw = next(v for k, v in zip(node.value.keys, node.value.values) if ast.unparse(k) == "test_defs.Experiments.JW")
    theirs = ast.literal_eval(jw)
    assert theirs == store.JW_TOLERANCES
    assert {k: tuple(v) for k, v in stored["meta"]["tolerances"].items()} == theirs
