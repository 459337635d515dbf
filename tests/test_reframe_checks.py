"""The ReFrame regression checks (hpc/): they load on the partitions whose features ask for them,
every check has references, a site's configuration layers on ours, and a CPU check really runs
icoforge here: it passes, and it fails on a planted wrong value, a crash after the output, and a
planted slowdown beyond its reference (the test-only faults of icoforge/suite/faults.py)."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
REFRAME = pathlib.Path(sys.executable).with_name("reframe")
HYDRO = "IcoforgeProgramCheck.*hydrostatic"

pytestmark = pytest.mark.skipif(not REFRAME.exists(), reason="reframe-hpc is not installed (pip install -e '.[test]')")


def _hpc():
    from icoforge.cli.hpc_cmd import load_hpc

    return load_hpc(ROOT / "hpc")


def _reframe(tmp_path, *args: str, config: str = "hpc/settings.py", fault: str = "", cache=None):
    configs = [arg for c in config.split(":") for arg in ("-C", str(ROOT / c))]  # chained: one -C each
    cmd = [str(REFRAME), *configs, "-c", str(ROOT / "hpc/icoforge_checks.py"), "--prefix", str(tmp_path / "rfm"), "--nocolor",
           "-S", f"icoforge_python={sys.executable}", *(["-S", f"icoforge_cache={cache}"] if cache else []), *args]  # fmt: skip
    env = {**os.environ, "HOME": os.environ.get("HOME", str(tmp_path))}
    env.pop("ICOFORGE_TEST_FAULT", None)
    if fault:
        env["ICOFORGE_TEST_FAULT"] = fault
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    run.log = run.stdout[-4000:] + run.stderr[-2000:]
    return run


def test_checks_load_on_the_partitions_their_features_ask_for(tmp_path):
    local = _reframe(tmp_path, "-l")
    assert local.returncode == 0, local.log
    assert "Found 4 check(s)" in local.stdout and "Gpu" not in local.stdout and "IcoforgeGreenlineCheck" in local.stdout
    assert "redefinition" not in local.stdout + local.stderr
    gpu = _reframe(tmp_path, "--system", "h200:gpu", "-l")
    assert gpu.returncode == 0, gpu.log
    assert "IcoforgeGpuGreenlineCheck" in gpu.stdout and gpu.stdout.count("IcoforgeGpuProgramCheck") == 3
    assert "Found 4 check(s)" in gpu.stdout


@pytest.mark.parametrize(
    "partition, features",
    [
        ("local:cpu", {"cpu"}),
        ("h200:gpu", {"gpu"}),
    ],
)  # fmt: skip
def test_every_check_has_a_reference_on(partition, features):
    hpc = _hpc()
    refs = hpc.load_references()
    for command in hpc.commands_for(features):
        have = hpc.reframe_reference(refs, partition, command.key)
        for var in command.perf_vars:
            assert var.name in have, f"{partition}: no {var.name} of {command.key!r}"
            value, lower, upper, unit = have[var.name]
            assert value > 0 and upper > 0 and unit == var.unit, (command.key, var.name, have[var.name])
        assert refs[partition][command.key]["source"], "each check's references say where they come from"


def test_the_greenline_sanity_wants_a_passing_comparison_with_a_recorded_fingerprint():
    # the granule takes minutes even warm, so its sanity rule is checked on report excerpts; the
    # exit code (greenline exits 1 on a failed comparison) is checked by the ReFrame check as well
    verified = _hpc().greenline_verified
    recorded = {"backend": "icoforge-cpu", "reference": "gtfn_cpu (recorded)", "passed": True}
    assert verified({"verification": [recorded]}, "icoforge-cpu")
    assert not verified({"verification": [{**recorded, "passed": False}]}, "icoforge-cpu")
    assert not verified({"verification": []}, "icoforge-cpu")  # nothing compared: no pass
    assert not verified({"verification": [{**recorded, "reference": "gtfn_cpu"}]}, "icoforge-cpu")  # live, not recorded
    assert not verified({"verification": [recorded]}, "icoforge-cuda")  # another backend's


def test_a_site_file_chained_after_ours_wins_and_gets_slurm_jobs(tmp_path):
    """hpc/site_example.py with this host's name: its system is selected over the catch-all `local`,
    and a dry run writes Slurm scripts with the partition's access, time limit, CPUs and GPU."""
    site = (ROOT / "hpc/site_example.py").read_text()
    site = site.replace('[r"^mycluster-login\\d+", r"^nid\\d+"]', repr([re.escape(socket.gethostname())]))
    site = site.replace('"lmod"', '"nomod"').replace('["gcc/13", "cuda/12.6", "python/3.12"]', "[]")
    (tmp_path / "site-references.toml").write_text("")
    site = site.replace("/project/ci/icoforge-references.toml", str(tmp_path / "site-references.toml"))
    assert socket.gethostname() in site and "nomod" in site and "/project/ci/icoforge-ref" not in site
    (tmp_path / "site.py").write_text(site)
    listed = _reframe(tmp_path, "-l", config=f"hpc/settings.py:{tmp_path / 'site.py'}")
    assert listed.returncode == 0, listed.log
    assert "selected system:   'mycluster'" in listed.stdout
    assert "Found 8 check(s)" in listed.stdout  # both partitions: the CPU and the GPU checks
    dry = _reframe(tmp_path, "-n", "IcoforgeGpuProgramCheck.*hydrostatic", "--dry-run", config=f"hpc/settings.py:{tmp_path / 'site.py'}")
    assert dry.returncode == 0, dry.log
    (script,) = (tmp_path / "rfm/stage/mycluster/gpu").rglob("rfm_job.sh")
    text = script.read_text()
    for line in ("--partition=gpu", "--account=myproject", "--time=0:30:0", "--cpus-per-task=16", "--gres=gpu:1",
                 "export ICOFORGE_CACHE=$TMPDIR/icoforge-cache", f"export PYTHONPATH={ROOT}"):  # fmt: skip
        assert line in text, text


def test_a_program_check_runs_icoforge_and_reports_against_its_reference(tmp_path, icoforge_cache, tiny_grid):
    run = _reframe(tmp_path, "-n", HYDRO, "-r", cache=icoforge_cache)
    assert "Ran 1/1 test case(s)" in run.stdout, run.log
    # the committed local:cpu references were measured on the dev machine; on a slower host only
    # the performance stage may fail, and the values are still compared with the file's
    assert run.returncode == 0 or "Failing phase: performance" in run.stdout, run.log
    hpc = _hpc()
    key = hpc.program_key("compute_hydrostatic_correction_term", "R2B3", 10, "icoforge-cpu")
    ref = hpc.reframe_reference(hpc.load_references(), "local:cpu", key)
    for var, unit in (("median_per_call", "ms"), ("compile_time", "s")):
        assert re.search(rf"P: {var}: [\d.]+ {unit} \(r:{re.escape(str(ref[var][0]))},", run.stdout), run.stdout


def test_a_planted_wrong_value_fails_the_check(tmp_path, icoforge_cache, tiny_grid):
    run = _reframe(tmp_path, "-n", HYDRO, "-r", fault="wrong:icoforge-cpu", cache=icoforge_cache)
    assert run.returncode != 0
    assert "FAILED" in run.stdout and "Failing phase: sanity" in run.stdout, run.log
    out = next((tmp_path / "rfm").rglob("rfm_job.out")).read_text()  # the failed stage is kept
    assert "beyond tolerance" in out or "not written" in out, out


def test_a_crash_after_the_output_fails_the_check(tmp_path, icoforge_cache, tiny_grid):
    run = _reframe(tmp_path, "-n", HYDRO, "-r", fault="crash", cache=icoforge_cache)
    assert run.returncode != 0
    assert "Failing phase: sanity" in run.stdout and "icoforge exited with" in run.stdout, run.log
    out = next((tmp_path / "rfm").rglob("rfm_job.out")).read_text()
    assert "PASS max rel" in out  # the verification passed: only the exit code tells


def test_a_planted_slowdown_fails_the_performance_check(tmp_path, icoforge_cache, tiny_grid):
    """References measured here by `icoforge hpc-references` into a site file, then the check with
    every call slowed by three times the measured median: it must fail on performance only. The
    perflog of both runs then plots."""
    site = tmp_path / "site-references.toml"
    measure = subprocess.run(
        [sys.executable, "-m", "icoforge", "hpc-references", "local:cpu", "--only", "hydrostatic", "--out", str(site),
         "--cache", str(icoforge_cache)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert measure.returncode == 0, measure.stdout + measure.stderr
    hpc = _hpc()
    key = hpc.program_key("compute_hydrostatic_correction_term", "R2B3", 10, "icoforge-cpu")
    median_ms = hpc.load_references([site])["local:cpu"][key]["median_per_call"]["value"]
    slow = f"slow:icoforge-cpu:{max(3 * median_ms / 1e3, 0.02):.4f}"
    run = _reframe(tmp_path, "-n", HYDRO, "-S", f"references_file={site}", "-r", fault=slow, cache=icoforge_cache)
    assert run.returncode != 0
    assert "Failing phase: performance" in run.stdout, run.log
    assert re.search(r"median_per_call=[\d.]+ ms, expected " + re.escape(str(median_ms)), run.stdout), run.log

    png = tmp_path / "trend.png"
    plot = subprocess.run([sys.executable, "-m", "icoforge", "hpc-trend", str(tmp_path / "rfm/perflogs"), "--out", str(png)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert plot.returncode == 0, plot.stdout + plot.stderr
    assert "2 series (2 values)" in plot.stdout and png.read_bytes()[:4] == b"\x89PNG"
