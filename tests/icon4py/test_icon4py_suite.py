"""scripts/icon4py_suite: icon4py 0.4.1's own tests with `--backend icoforge.backend:cpu`.

The end-to-end test runs one of icon4py's stencil tests from ../shared/icon4py-0.4.1-tests (icon4py's
files, used from there) through icon4py's own `--backend module:symbol` resolution; the others check
the plugin's precision guard, its whose-error rule, the known-failure list and the tables."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUITE = ROOT / "scripts" / "icon4py_suite"
sys.path.insert(0, str(SUITE))

import known_failures  # noqa: E402
import run as suite_run  # noqa: E402
import table  # noqa: E402

TESTS = pathlib.Path(os.environ.get("ICON4PY_TESTS", suite_run.DEFAULT_TESTS))
MATH_TEST = "model/common/tests/common/math/stencil_tests/test_compute_first_vertical_derivative.py"
needs_icon4py_tests = pytest.mark.skipif(
    not (TESTS / "pyproject.toml").is_file(), reason=f"icon4py 0.4.1's tests not at {TESTS} (ICON4PY_TESTS)"
)


def _icon4py_pytest(tmp_path, env_extra: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, pathlib.Path]:
    results = tmp_path / "results.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(SUITE),
        "ICOFORGE_CACHE": str(tmp_path / "cache"),
        "ICOFORGE_I4P_RESULTS": str(results),
        "ICOFORGE_I4P_TESTS": str(TESTS),
        **env_extra,
    }
    cmd = [sys.executable, "-m", "pytest", "-p", "suite_plugin", "-p", "no:cacheprovider", "--benchmark-disable",
           "-q", "--backend", "icoforge.backend:cpu", *args]
    return subprocess.run(cmd, cwd=TESTS, env=env, capture_output=True, text=True, timeout=900), results


@needs_icon4py_tests
def test_an_icon4py_stencil_test_passes_with_the_backend_object(tmp_path):
    out, results = _icon4py_pytest(tmp_path, {"FLOAT_PRECISION": "double"}, MATH_TEST)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    data = json.loads(results.read_text())
    assert data["backend"] == "icoforge.backend:cpu" and data["precision"] == "double"
    assert [t["outcome"] for t in data["tests"]] == ["passed"]
    assert any((tmp_path / "cache").rglob("*.so")), "no icoforge C++ module was built: was icoforge used?"


@needs_icon4py_tests
def test_mixed_precision_flag_alone_is_refused(tmp_path):
    """icon4py's --enable-mixed-precision sets FLOAT_PRECISION after its hooks imported type_alias:
    alone it would run double precision. The plugin refuses instead of reporting a double run as mixed."""
    env = {"ICOFORGE_I4P_PRECISION": "mixed", "FLOAT_PRECISION": "double"}
    out, _ = _icon4py_pytest(tmp_path, env, "--enable-mixed-precision", "--collect-only", MATH_TEST)
    assert out.returncode == 4  # pytest's usage error
    assert "asked for mixed precision, icon4py's type_alias has 'double'" in out.stdout + out.stderr


def _raise_from(tmp_path: pathlib.Path, folder: str, exc: str) -> pytest.ExceptionInfo:
    """An ExceptionInfo whose innermost frame is in a file under `folder` (e.g. site-packages/gt4py)."""
    path = tmp_path / folder / "mod.py"
    path.parent.mkdir(parents=True)
    path.write_text(f"def boom():\n    raise {exc}\n")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(Exception) as info:
        namespace["boom"]()
    return info


def test_whose_error_is_the_innermost_owned_frame(tmp_path):
    import suite_plugin

    roots = [(tmp_path / "icoforge", "ours"), (tmp_path / "gt4py", "GT4Py's"), (tmp_path / "icon4py", "icon4py's")]

    def whose(folder: str, exc: str) -> str:
        return suite_plugin.whose(_raise_from(tmp_path, folder, exc), roots)

    assert whose("gt4py/next", "RecursionError('deep')") == "GT4Py's"
    assert whose("icoforge/backend", "ValueError('x')") == "ours"
    assert whose("icon4py/model", "KeyError('k')") == "icon4py's"
    # icon4py's verification asserting: our numbers differ from its NumPy reference
    assert whose("icon4py/testing", "AssertionError('x')").startswith("ours")
    assert whose("elsewhere", "OSError('x')") == "unknown"
    # the real roots: icoforge's, GT4Py's and icon4py's installed packages
    owners = {owner for _, owner in suite_plugin.package_roots()}
    assert owners == {"ours", "GT4Py's", "icon4py's"}


def test_known_failure_matches_its_test_only(monkeypatch):
    ffsl = ("model/atmosphere/tracer_advection/tests/tracer_advection/stencil_tests/"
            "test_prepare_ffsl_flux_area_patches_list.py::TestPrepareFfslFluxAreaPatchesList::test_TestPrepareFfslFluxAreaPatchesList")
    assert known_failures.known_failure(ffsl, "double", "simple") is None  # passes since fast_frontend
    entry = known_failures.KnownFailure(test=ffsl.split("::")[0] + "::TestPrepareFfslFluxAreaPatchesList::test_*",
                                        owner="GT4Py's", reason="r", raises="RecursionError", grids=("simple",))
    monkeypatch.setattr(known_failures, "KNOWN", (entry,))
    assert known_failures.known_failure(ffsl, "double", "simple") is entry
    assert known_failures.known_failure(ffsl, "double", "icon") is None  # not on that grid
    assert known_failures.known_failure(MATH_TEST + "::TestX::test_TestX", "double", "simple") is None
    assert all(k.owner in known_failures.OWNERS for k in known_failures.KNOWN)


def test_table_counts_per_package_and_names_whose(tmp_path):
    dy = "model/atmosphere/dycore/tests/dycore/stencil_tests/test_a.py::TestA::test_TestA"
    tests = [
        {"test": dy, "outcome": "passed", "seconds": 1.0},
        {"test": dy.replace("test_a", "test_b"), "outcome": "failed", "seconds": 1.0, "whose": "ours",
         "exception": "AssertionError", "message": "mismatch"},
        {"test": MATH_TEST + "::T::t", "outcome": "xfailed", "seconds": 1.0, "reason": "GT4Py's error: frontend"},
    ]
    res = tmp_path / "r.json"
    res.write_text(json.dumps({"run": "double-simple", "precision": "double", "vpfloat": "float64", "wpfloat": "float64",
                               "grid": "simple", "backend": "icoforge.backend:cpu", "exitstatus": 1, "wall_s": 61.0,
                               "tests": tests}))
    out = tmp_path / "t.md"
    table.write_markdown([res], out)
    text = out.read_text()
    assert "| dycore | 2 | 1 | 1 | 0 | 0 | 0 | ours: 1 |" in text
    assert "| common/math | 1 | 0 | 0 | 0 | 1 | 0 | GT4Py's (known, xfail): 1 |" in text
    assert "| **all** | **3** | **1** | **1** | **0** | **1** | **0** | |" in text
    assert "| `test_b.py::TestA::test_TestA` | failed | ours | AssertionError: mismatch |" in text
    assert "| `test_compute_first_vertical_derivative.py::T::t` | xfailed | GT4Py's | GT4Py's error: frontend |" in text


def test_runs_name_existing_test_paths_and_unknown_run_lists_choices(capsys):
    if (TESTS / "pyproject.toml").is_file():
        assert [p for r in suite_run.RUNS.values() for p in r.paths if not (TESTS / p).exists()] == []
    with pytest.raises(SystemExit):
        suite_run.main(["double-simpel"])
    assert "valid: double-simple, mixed-simple, double-r2b4" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="PRESET:LEVELS"):
        suite_run.grid_option("R2B4")


def test_collection_failure_is_clean_only_when_known():
    mixed = suite_run.RUNS["mixed-simple"]
    out = "E   gt4py.next.errors.exceptions.DSLError: Invalid argument types in call to '_compute_perturbation_of_rho_and_theta'.\n"
    known = suite_run.collection_failure(mixed, 4, out)
    assert known["collection_error"]["known"] and known["collection_error"]["whose"] == "icon4py's"
    assert suite_run.is_clean({**known, "pytest_rc": 4})
    other = suite_run.collection_failure(mixed, 4, "E   ImportError: no module named x\n")
    assert not other["collection_error"]["known"] and not suite_run.is_clean({**other, "pytest_rc": 4})
    assert other["collection_error"]["first_error"] == "E   ImportError: no module named x"
    # the same output in a double-precision run is not the known (mixed-only) failure
    assert not suite_run.collection_failure(suite_run.RUNS["double-simple"], 4, out)["collection_error"]["known"]
