"""scripts/dev/granule_variants.py: the granule's program variants recorded on the CPU, and what
each tuned entry does in them. Slow: the session's cache is empty, so the R2B3 grid, icon4py's
factories (static fields) and GT4Py's passes for the ~20 variants the granule calls all run."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from icoforge.backend.schedule import tuned

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "dev" / "granule_variants.py"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    # a process of its own: GT4Py's compile workers must import the script's executor, and a
    # pool started earlier in this session would not have the script's directory on its path
    out = tmp_path_factory.mktemp("variants") / "variants.json"
    options = ["--grid", "R2B3", "--levels", "10", "--only-used-variants", "--no-explain", "--json", str(out)]
    cmd = [sys.executable, str(SCRIPT), *options]
    done = subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_every_tuned_program_is_among_the_granule_variants_with_kernels(report):
    kernels = {}
    for v in report["variants"]:
        kernels.setdefault(v["program"], []).append(len(v["kernels"]))
    missing = sorted({e.program for e in tuned.load()} - set(kernels))
    assert missing == []
    assert all(n > 0 for counts in kernels.values() for n in counts)


@pytest.mark.slow
def test_the_tools_statuses_agree_with_tuned_applied(report):
    rows = [r for r in report["entries"] if "applied_status" in r]
    entries = tuned.for_device("cuda", "NVIDIA H200")
    # every tuned kernel seen in a variant (a kernel may have entries of several size classes or levels)
    assert {(r["program"], r["kernel"]) for r in rows} == {(e.program, e.kernel) for e in entries}
    assert [(r["kernel"], r["kernel_status"]) for r in rows if r["kernel_status"] != r["applied_status"]] == []


@pytest.mark.slow
def test_a_variant_lists_its_static_arguments_as_the_gpu_executor_logs_them(report):
    rho_theta = [v for v in report["variants"] if v["program"] == "compute_rho_theta_pgrad_and_update_vn"]
    names = {n for v in rho_theta for n, _ in v["static_arguments"]}
    assert {"nflatlev", "nflat_gradp", "limited_area"} <= names
