"""The pytest plugin that makes icon4py's benchmarks wait for the device (icoforge.bench.device_sync),
run in a pytest of its own with pytest-benchmark and a stand-in device that takes 20 ms to drain."""

import json
import subprocess
import sys

import pytest

from icoforge.bench.device_sync import resolve

_SLOW_DEVICE = '''
import time
import pytest
from icoforge.bench.device_sync import DeviceSync

EVENTS = []

def _drain():
    EVENTS.append("wait")
    time.sleep(0.02)

@pytest.fixture(scope="session")
def device_sync():
    return DeviceSync("a device that needs 20 ms to drain", _drain)
'''

_BENCH = '''
def test_enqueue(benchmark):
    events = __import__("conftest").EVENTS if {synced} else []
    benchmark(lambda x, *, y: events.append(("call", x, y)), 1, y=2)
    if {synced}:
        # drained before timing starts, then a wait after every call (calibration's calls too)
        calls = len(events) // 2
        assert calls >= 3 and events == ["wait"] + [("call", 1, 2), "wait"] * calls, events
'''


def _run_pytest(tmp_path, synced):
    (tmp_path / "conftest.py").write_text(_SLOW_DEVICE if synced else "")
    (tmp_path / "test_bench.py").write_text(_BENCH.format(synced=synced))
    out = tmp_path / "bench.json"
    plugin = ["-p", "icoforge.bench.device_sync"] if synced else []
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "test_bench.py",
         "--benchmark-min-rounds=3", "--benchmark-max-time=0.1", f"--benchmark-json={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (bench,) = json.loads(out.read_text())["benchmarks"]
    return bench, proc.stdout


def test_pytest_benchmark_times_the_wait_with_the_plugin_and_only_the_call_without(tmp_path):
    bench, _ = _run_pytest(tmp_path, synced=True)
    assert bench["stats"]["median"] >= 0.02
    assert bench["extra_info"]["device_sync"] == "a device that needs 20 ms to drain"
    assert bench["extra_info"]["host_return_s"]["median"] < 0.01
    assert bench["extra_info"]["host_return_s"]["calls"] >= bench["stats"]["rounds"] >= 3

    plain, _ = _run_pytest(tmp_path, synced=False)
    assert plain["stats"]["median"] < 0.01
    assert "device_sync" not in plain["extra_info"]


def test_a_choice_that_does_not_exist_lists_the_valid_ones(tmp_path):
    with pytest.raises(pytest.UsageError, match="auto, cupy, none"):
        resolve("cuda")
    assert resolve("none").name.startswith("none")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "icoforge.bench.device_sync",
         "--device-sync", "cuda", "test_nothing.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "auto, cupy, none" in proc.stdout + proc.stderr


def test_without_a_gpu_auto_says_it_does_not_wait():
    # this machine has no GPU; on one with CuPy and a GPU, auto picks CuPy's deviceSynchronize
    try:
        import cupy

        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        has_gpu = False
    name = resolve("auto").name
    assert name.startswith("cupy.cuda.runtime.deviceSynchronize") if has_gpu else name == "none (auto: CuPy sees no GPU)"
