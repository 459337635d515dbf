"""scripts/device/sanitize_granule.py's report: the verdict per compute-sanitizer run from its logs.
racecheck prints no "ERROR SUMMARY", only "RACECHECK SUMMARY: ... (E errors, W warnings)" (session 20's
H200 log): the report must count those, so a clean racecheck is "ok" and a hazard is not."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "device" / "sanitize_granule.py"


@pytest.fixture(scope="module")
def sanitize():
    spec = importlib.util.spec_from_file_location("sanitize_granule", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _workdir(tmp_path: pathlib.Path, race_line: str) -> pathlib.Path:
    kernels = "# 2 kernels launched (2 loaded)\nprog prog_k0 3\nprog prog_k1 3\n"
    (tmp_path / "kernels-plain-default.txt").write_text(kernels)
    (tmp_path / "kernels-racecheck-smem.txt").write_text(kernels)
    (tmp_path / "racecheck-smem.rc").write_text("0")
    (tmp_path / "racecheck-smem.seconds").write_text("46")
    (tmp_path / "racecheck-smem.123.log").write_text(f"========= COMPUTE-SANITIZER\n========= {race_line}\n")
    return tmp_path


def test_clean_racecheck_is_ok(sanitize, tmp_path, capsys):
    w = _workdir(tmp_path, "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
    assert sanitize.report(str(w), ["racecheck:smem"]) == 0
    out = capsys.readouterr().out
    assert "| racecheck | smem | 0 |" in out and "1 of 1 runs clean." in out


@pytest.mark.parametrize("line", ["RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)",
                                  "RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)"])  # fmt: skip
def test_racecheck_hazard_fails(sanitize, tmp_path, capsys, line):
    w = _workdir(tmp_path, line)
    assert sanitize.report(str(w), ["racecheck:smem"]) == 1
    assert "NOT CLEAN: racecheck-smem: ERRORS" in capsys.readouterr().out


def test_run_not_in_this_call_is_not_clean(sanitize, tmp_path, capsys):
    w = _workdir(tmp_path, "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
    assert sanitize.report(str(w), ["racecheck:smem", "memcheck:default"]) == 1
    assert "memcheck-default: not run in this call" in capsys.readouterr().out
