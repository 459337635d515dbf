"""docs/mi300a.md, the MI300A day-one runbook (issue 50): its steps in order, each rehearsal (the
blocks marked `cpu`) run here as written, with the good result it names found in the output; the
MI300A blocks (`gpu`) run only where CuPy sees an AMD GPU; a block marked `by:FILE::TEST` is run
by that test (the same command, not twice in CI: the whole gfx90a/gfx942 build takes minutes), and
this file checks that the test exists and runs the block's command. And the ReFrame site example's
MI300A partitions: SPX and CPX jobs with their Slurm access, CPUs, the HIP backend and SPX's schedule."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNBOOK = ROOT / "docs" / "mi300a.md"
BIN = pathlib.Path(sys.executable).parent
_BLOCK = re.compile(r'<!-- runbook: (\S+) (cpu|cpu-slow|gpu|by:\S+) expect="([^"]*)" -->\n```bash\n(.*?)```', re.S)
STEPS = ["install", "gpu-check", "verify-all", "greenline", "tune", "profile", "reframe"]


def blocks() -> list[tuple[str, str, str, str]]:
    return _BLOCK.findall(RUNBOOK.read_text())


def _amd_gpu() -> bool:
    from icoforge.backend.runtime.gpu import cupy_vendor

    return cupy_vendor() == "hip"


def run_block(body: str, cwd: pathlib.Path, timeout: int) -> subprocess.CompletedProcess:
    """The block in bash, in a folder with the repository's hpc/ linked in, with the virtual
    environment's `icoforge`, `reframe` and `python` first on PATH; stops at the first failure."""
    (cwd / "hpc").symlink_to(ROOT / "hpc")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-e", "-c", body], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def test_the_runbook_has_its_steps_in_order_and_the_readme_links_it():
    ids = [b[0] for b in blocks()]
    assert [i for i in ids if i in STEPS] == STEPS, ids
    assert all(b[2] for b in blocks()), "every step names its good result"
    for committed in ("benchmarks/amd-resources-gfx90a-gfx942.md", "benchmarks/mi300a-floors.md", "benchmarks/amd-k-unroll.md"):
        assert committed in RUNBOOK.read_text() and (ROOT / committed).exists(), committed
    assert "docs/mi300a.md" in (ROOT / "README.md").read_text()


def _params(kinds: tuple[str, ...]):
    out = []
    for ident, kind, expect, body in blocks():
        if kind not in kinds:
            continue
        marks = [pytest.mark.slow] if kind == "cpu-slow" else []
        if kind == "gpu":
            marks = [pytest.mark.gpu, pytest.mark.slow,
                     pytest.mark.skipif(not _amd_gpu(), reason="needs an AMD GPU (CuPy built for ROCm)")]  # fmt: skip
        out.append(pytest.param(ident, expect, body, id=ident, marks=marks))
    return out


@pytest.mark.parametrize("ident, expect, body", _params(("cpu", "cpu-slow")))
def test_a_rehearsal_runs_and_shows_its_good_result(ident, expect, body, tmp_path, icoforge_cache):
    if "reframe " in body and not (BIN / "reframe").exists():
        pytest.skip("reframe-hpc is not installed (pip install -e '.[test]')")
    if "--target hip" in body:
        from icoforge.backend.runtime.amd_check import INSTALL_HINT, find_amd_clang

        if find_amd_clang() is None:
            pytest.skip(f"no clang with HIP support ({INSTALL_HINT})")
    run = run_block(body, tmp_path, timeout=3600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"{ident}: exit {run.returncode}\n{out[-3000:]}"
    assert expect in out, f"{ident}: the good result {expect!r} is not in the output\n{out[-3000:]}"


def test_a_block_run_by_another_test_is_run_there():
    """`by:FILE::TEST`: TEST exists in FILE and its source names the block's command, word for word
    (the subcommand and each option with its value, but --out's file), and the good result."""
    by = [(ident, kind[3:], expect, body) for ident, kind, expect, body in blocks() if kind.startswith("by:")]
    assert by, "the runbook names no block run by another test (then drop this test)"
    for ident, where, expect, body in by:
        path, _, name = where.partition("::")
        source = (ROOT / path).read_text()
        match = re.search(rf"^def {re.escape(name)}\(.*?(?=^def |\Z)", source, re.S | re.M)
        assert match, f"{ident}: no test {name} in {path}"
        words = body.split()
        assert words[0] == "icoforge", body
        words = [w for i, w in enumerate(words[1:]) if w != "--out" and (i == 0 or words[i] != "--out")]
        missing = [w for w in words if f'"{w}"' not in match.group(0)]
        assert not missing, f"{ident}: {name} does not run {' '.join(words)} (missing {missing})"
        assert expect in match.group(0), f"{ident}: {name} does not check for {expect!r}"


@pytest.mark.parametrize("ident, expect, body", _params(("gpu",)))
def test_on_an_mi300a_each_step_shows_its_good_result(ident, expect, body, tmp_path, icoforge_cache):
    if ident in ("install", "reframe"):
        body = "\n".join(line for line in body.splitlines() if line.startswith("python -c"))  # installed already; no Slurm
    if not body.strip():
        pytest.skip(f"{ident}: nothing to run inside a test")
    run = run_block(body, tmp_path, timeout=7200)
    assert run.returncode == 0 and expect in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]


@pytest.mark.skipif(not (BIN / "reframe").exists(), reason="reframe-hpc is not installed (pip install -e '.[test]')")
def test_the_site_example_gives_mi300a_jobs_in_spx_and_cpx(tmp_path):
    site = (ROOT / "hpc/site_example.py").read_text().replace('"lmod"', '"nomod"')
    (tmp_path / "refs.toml").write_text("")
    (tmp_path / "site.py").write_text(site.replace("/project/ci/icoforge-references.toml", str(tmp_path / "refs.toml")))
    want = {
        "spx": ["--constraint=spx", "--cpus-per-task=24", "--gpus-per-task=1", "--time=0:30:0",
                """export ICOFORGE_SCHEDULE='{"default": {"block": [256, 1], "stride_sets": true, "chiplet_remap": true, "chiplets": 6}}'"""],
        "cpx": ["--constraint=cpx", "--cpus-per-task=4", "--gpus-per-task=1", "--time=1:0:0"],
    }  # fmt: skip
    for partition, lines in want.items():
        cmd = [str(BIN / "reframe"), "-C", str(ROOT / "hpc/settings.py"), "-C", str(tmp_path / "site.py"),
               "-c", str(ROOT / "hpc/icoforge_checks.py"), "--system", f"mi300a:{partition}", "--prefix",
               str(tmp_path / partition), "--nocolor", "-S", f"icoforge_python={sys.executable}",
               "-n", "IcoforgeGpuProgramCheck.*hydrostatic", "--dry-run"]  # fmt: skip
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
        (script,) = (tmp_path / partition / "stage").rglob("rfm_job.sh")
        text = script.read_text()
        for line in [*lines, "--backend icoforge-hip --compare icoforge-cpu"]:
            assert line in text, f"{partition}: {line!r} not in\n{text}"
        assert partition == "spx" or "ICOFORGE_SCHEDULE" not in text


def test_the_hip_feature_picks_the_hip_backend_for_the_references():
    sys.path.insert(0, str(ROOT / "hpc"))
    try:
        import icoforge_hpc as hpc
    finally:
        sys.path.remove(str(ROOT / "hpc"))
    hip = hpc.commands_for({"gpu", "hip"})
    cuda = hpc.commands_for({"gpu"})
    assert hip and all("icoforge-hip" in c.key and "icoforge-cuda" not in c.key for c in hip)
    assert all("icoforge-cuda" in c.key for c in cuda)
    assert [c.key.replace("icoforge-hip", "icoforge-cuda") for c in hip] == [c.key for c in cuda]
