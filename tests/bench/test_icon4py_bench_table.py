"""scripts/device/icon4py_bench_table.py: the table of icon4py's benchmark JSON files."""

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts/device/icon4py_bench_table.py"


def _write(path, medians_s, sync=None, host_s=None):
    benchmarks = []
    for (first, last), median in medians_s.items():
        info = {} if sync is None else {"device_sync": sync, "host_return_s": {"median": host_s, "min": host_s, "calls": 9}}
        benchmarks.append({"params": {"at_first_substep": first, "at_last_substep": last},
                           "stats": {"median": median, "rounds": 5}, "extra_info": info})  # fmt: skip
    path.write_text(json.dumps({"benchmarks": benchmarks}))
    return str(path)


def test_rows_say_whether_the_device_was_waited_for_and_ratios_stay_within_one_kind(tmp_path):
    variants = {(True, False): 0.020, (False, False): 0.010, (False, True): 0.030}
    ours = _write(tmp_path / "bench-ours-R2B6-80.json", variants, sync="cupy.cuda.runtime.deviceSynchronize", host_s=0.002)
    peer = _write(tmp_path / "bench-peer-R2B6-80.json", {k: 2 * v for k, v in variants.items()}, sync="cupy.cuda...", host_s=0.001)
    plain = _write(tmp_path / "bench-plain-R2B6-80.json", variants)
    cut = _write(tmp_path / "bench-cut-R2B6-80.json", {(True, False): 0.02})
    out = subprocess.run([sys.executable, SCRIPT, ours, peer, plain, cut], capture_output=True, text=True, check=True).stdout
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    # step = first + 3 middle + last = 20 + 30 + 30 ms; host step = 5 calls x 2 ms
    assert rows["ours-R2B6-80"] == "| ours-R2B6-80 | yes | 20.000 | 10.000 | 30.000 | 80.00 | 10.00 |"
    assert "| no (icon4py) |" in rows["plain-R2B6-80"] and rows["plain-R2B6-80"].endswith("| 80.00 | - |")
    assert "missing: last, middle" in rows["cut-R2B6-80"]
    assert "peer-R2B6-80 / ours-R2B6-80 = 2.000" in out
    assert "plain-R2B6-80 /" not in out  # an unsynchronised run is no peer of a synchronised one
    assert max(map(len, out.splitlines())) <= 100
