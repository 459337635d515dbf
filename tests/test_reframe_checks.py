"""The ReFrame regression checks (hpc/): they load, the GPU ones are offered only on GPU partitions,
and a CPU check really runs icoforge on this host, passes, reports its time, and fails when the
icoforge command fails."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
REFRAME = pathlib.Path(sys.executable).with_name("reframe")

pytestmark = pytest.mark.skipif(not REFRAME.exists(), reason="reframe-hpc is not installed (pip install -e '.[test]')")


def _reframe(tmp_path, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(REFRAME), "-C", str(ROOT / "hpc/settings.py"), "-c", str(ROOT / "hpc/icoforge_checks.py"),
           "--prefix", str(tmp_path / "rfm"),
           "-S", f"icoforge_python={sys.executable}", *args]  # fmt: skip
    env = {**os.environ, "HOME": os.environ.get("HOME", str(tmp_path))}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def test_checks_load_and_gpu_checks_only_on_gpu_partitions(tmp_path):
    local = _reframe(tmp_path, "-l")
    assert local.returncode == 0, local.stdout + local.stderr
    assert "Found 3 check(s)" in local.stdout and "IcoforgeGreenlineCheck" not in local.stdout
    gpu = _reframe(tmp_path, "--system", "h200:gpu", "-l")
    assert gpu.returncode == 0, gpu.stdout + gpu.stderr
    assert "IcoforgeGreenlineCheck" in gpu.stdout and gpu.stdout.count("IcoforgeGpuProgramCheck") == 3


def test_a_program_check_runs_icoforge_and_reports_its_time(tmp_path, tiny_grid):
    run = _reframe(tmp_path, "-n", "IcoforgeProgramCheck.*hydrostatic", "-r")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "PASSED" in run.stdout and "Ran 1/1 test case(s)" in run.stdout
    assert "P: median_per_call:" in run.stdout


def test_a_failing_icoforge_command_fails_the_check(tmp_path, tiny_grid):
    run = _reframe(tmp_path, "-n", "IcoforgeProgramCheck.*hydrostatic", "-S", "reference_backend=no_such_backend", "-r")
    assert run.returncode != 0
    assert "FAILED" in run.stdout and "sanity" in run.stdout.lower()
