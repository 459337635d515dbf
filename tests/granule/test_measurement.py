"""What the greenline measures (issue: small-grid step times 3x too slow): Python's mode, host vs
device time per program call, the GPU's idle fraction per substep, and the granule-latest record.
No compilation, no GPU: fake programs and a fake event clock."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from icoforge.backend.runtime.gpu import Runtime
from icoforge.cli import pymode
from icoforge.granule import instrument, latest
from icoforge.granule.report import idle_table, markdown_report, program_table, python_mode, sections
from icoforge.granule.runner import VARIANTS, BackendResult, ProgramRow
from icoforge.stalls import stalls


class _Program:
    """A GT4Py-program look-alike: `definition_stage.definition.__name__` names it."""

    def __init__(self, name, on_call=None):
        self.definition_stage = type("D", (), {"definition": type(name, (), {})})()
        self.definition_stage.definition.__name__ = name
        self.on_call = on_call

    def __call__(self, *args, **kwargs):
        if self.on_call:
            self.on_call()


class _Event:
    """A fake device event: records the value of a shared fake device clock."""

    def __init__(self, device):
        self.device, self.t = device, None

    def record(self, stream=None):
        self.t = self.device["now"]


def _solver_and_clock():
    device = {"now": 0.0}

    def run_kernels(seconds):
        device["now"] += seconds

    solver = type("Solver", (), {})()
    solver._a = functools.partial(_Program("prog_a", lambda: run_kernels(0.002)))
    solver._b = functools.partial(_Program("prog_b", lambda: run_kernels(0.003)))
    clock = instrument.EventClock(make=lambda: (_Event(device), _Event(device)), seconds=lambda s, e: e.t - s.t)
    return solver, clock, device


def test_device_busy_sums_the_event_intervals_of_every_program_call():
    solver, clock, device = _solver_and_clock()
    with instrument.DeviceBusy(solver, clock) as busy:
        solver._a()
        device["now"] += 0.010  # the device idles while the host works between programs
        solver._b()
        assert busy.busy_seconds() == pytest.approx(0.005)
        busy.reset()
        solver._b()
        assert busy.busy_seconds() == pytest.approx(0.003)
    assert isinstance(solver._a, functools.partial)  # originals back


def test_profiler_records_host_and_device_time_per_call():
    solver, clock, _ = _solver_and_clock()
    syncs = []
    with instrument.Profiler(solver, sync=lambda: syncs.append(1), clock=clock) as prof:
        solver._a()
        solver._a()
        solver._b()
    a = prof.times["prog_a"]
    assert a.calls == 2 and len(a.host_seconds) == 2 and all(0 <= h <= w for h, w in zip(a.host_seconds, a.seconds))
    assert prof.device_seconds(a) == pytest.approx([0.002, 0.002])
    assert prof.device_seconds(prof.times["prog_b"]) == pytest.approx([0.003])
    cpu = instrument.Profiler(solver, sync=lambda: None)  # no clock: no device times
    assert cpu.device_seconds(a) == []


def _result(wall_ms=(10.0, 11.0, 12.0), busy_ms=(2.0, 2.5, 3.0)) -> BackendResult:
    # static fields to the device: copies before construction, never part of the cold compile
    setup = {"device_grid": 3.0, "device_fields": 4.5, "construct": 30.0, "compile": 10.0, "first_calls": 2.0}
    r = BackendResult("icoforge-cuda", setup_s=setup)
    r.step_ms = {v: list(wall_ms) for v in VARIANTS}
    r.busy_ms = {v: list(busy_ms) for v in VARIANTS}
    r.programs = [ProgramRow("prog_a", 5, 1.0, 5.0, 0.5, 3, None, host_ms=0.8, device_ms=0.15)]
    r.profiled_step_ms = 10.0
    return r


def test_idle_fraction_is_one_minus_busy_over_wall():
    r = _result()
    assert r.idle_fraction("first") == pytest.approx(1 - 2.5 / 11.0)
    v = r.to_json()["variants"]["middle"]
    assert v["busy_ms"] == pytest.approx(2.5) and v["idle_fraction"] == pytest.approx(1 - 2.5 / 11.0)
    assert "kernel_busy_ms" not in v
    r.kernel_busy_ms = {v: [1.0, 1.1] for v in VARIANTS}  # the kernels alone, where measured, decide
    assert r.idle_fraction("last") == pytest.approx(1 - 1.05 / 11.0)
    assert r.to_json()["variants"]["last"]["kernel_busy_ms"] == pytest.approx(1.05)
    assert BackendResult("gtfn_cpu").idle_fraction("first") is None  # CPU backends: not measured


def test_device_busy_times_the_kernels_of_icoforge_runtimes():
    solver, clock, device = _solver_and_clock()

    class KernelRuntime(Runtime):
        def _launch(self, kernel, grid, block, args):
            device["now"] += 0.0005  # the kernel itself

    rt = KernelRuntime("p", xp=np)
    variant = lambda: None  # noqa: E731 (a loaded compiled variant)
    variant.icoforge_runtime = rt
    solver._a.func._compiled_programs = type("Pool", (), {"compiled_programs": {"key": variant}})()

    def call_with_kernels():
        device["now"] += 0.001  # host work inside the call, before the launch: not kernel time
        rt.launch("k", (1,), (1,), ())

    solver._a.func.on_call = call_with_kernels
    with instrument.DeviceBusy(solver, clock) as busy:
        assert busy.runtimes == [rt]
        solver._a()
        solver._b()
        assert busy.kernel_seconds() == pytest.approx(0.0005)
        assert busy.busy_seconds() == pytest.approx(0.0015 + 0.003)
    assert rt.observers == []  # no observer left behind
    with instrument.DeviceBusy(type("S", (), {})(), clock) as none:
        assert none.kernel_seconds() is None  # no icoforge runtime launched


def _data(optimized=True, cold=False):
    r = _result()
    return {
        "options": {"grid": "REGIONAL", "levels": 80, "steps": 3, "warmup": 1, "profile_steps": 1, "seed": 0,
                    "factory_backend": "icoforge-cpu", "cold": cold},
        "grid": {"name": "REGIONAL", "cells": 44528},
        "common_setup_s": {}, "static_fields_cached": True, "verification": [],
        "dycore_step": ["first", "middle", "middle", "middle", "last"],
        "variants": {v: {} for v in VARIANTS},
        "backends": [r.to_json()],
        "environment": {"date": "2026-12-01T12:00:00+00:00", "host": "h", "cpus": 16, "gpu": "NVIDIA H200",
                        "python_optimized": optimized, "versions": {"gt4py": "1.2.1"}},
    }  # fmt: skip


def test_report_shows_the_python_mode_the_idle_fraction_and_host_vs_device():
    data = _data(optimized=False)
    assert python_mode(data).startswith("NOT optimized")
    assert python_mode(_data()).startswith("optimized")
    assert "not recorded" in python_mode({**_data(), "environment": {}})
    idle = idle_table(data)
    assert idle.rows[0][1:] == ["11.000", "2.500", "-", ">= 77 %"]
    prog = program_table(data, 0)
    headers = [h for h, _ in prog.columns]
    assert "host ms/call" in headers and "device ms/call" in headers
    row = prog.rows[0]
    assert row[headers.index("host ms/call")] == "0.800" and row[headers.index("device ms/call")] == "0.150"
    md = markdown_report(data)
    assert "NOT optimized" in md and "GPU idle" in md


def test_stalls_name_samples_far_above_their_median_and_the_report_says_so():
    assert stalls({"first": [18.2, 18.1, 488.5, 18.6, 18.3], "middle": [17.5, 17.3, 34.0]}) == (
        "first 1 of 5 (up to 488.5 ms, median 18.30)"  # 34.0 is below 2 x 17.5
    )
    assert stalls({"first": [10.0, 11.0, 12.0], "last": []}) is None
    data = _data()
    assert not any("samples above" in str(s) for s in sections(data))
    data["backends"][0]["variants"]["middle"]["samples_ms"] = [10.0, 11.0, 40.0]
    notes = [s for s in sections(data) if isinstance(s, str) and "samples above" in s]
    assert len(notes) == 1 and "icoforge-cuda" in notes[0] and "middle 1 of 3 (up to 40.0 ms, median 11.00)" in notes[0]
    assert notes[0].endswith("Python's collector not recorded")


def test_quiet_gc_freezes_the_setup_and_records_the_collections_inside():
    import gc

    setup = [[i] for i in range(20_000)]  # container objects the collector tracks
    with instrument.quiet_gc() as pauses:
        assert pauses.frozen_objects > len(setup) and gc.get_freeze_count() > len(setup)
        gc.collect()  # a full collection now scans only what the block allocated
        gc.collect(0)
    assert gc.get_freeze_count() == 0  # unfrozen: a granule dropped later is collected again
    assert pauses.collections[2] >= 1 and pauses.collections[0] >= 1 and pauses.longest_ms > 0
    recorded = pauses.to_json()
    assert recorded["collections"]["2"] == pauses.collections[2] and recorded["total_ms"] >= recorded["longest_ms"]
    assert gc.callbacks.count(pauses._callback) == 0  # no callback left behind


def test_latest_record_has_the_issue_format(tmp_path):
    roofline = tmp_path / "roofline.json"
    roofline.write_text(json.dumps({"floors_ms": {"kernel": 84.5, "program": 70.0, "substep": 60.0}}))
    path = tmp_path / "granule-latest.json"
    rec = latest.write_latest(path, _data(cold=True), "abc123", str(roofline))
    assert json.loads(path.read_text()) == rec
    for key in ("date", "commit", "machine", "grid", "levels", "step_ms", "cold_compile_s", "floors_ms"):
        assert key in rec, key
    assert rec["step_ms"] == {"icoforge-cuda": pytest.approx(5 * 11.0)}
    assert rec["cold_compile_s"] == {"icoforge-cuda": 42.0}
    assert rec["floors_ms"] == {"kernel": 84.5, "program": 70.0, "substep": 60.0}
    assert rec["python_optimized"] is True and rec["commit"] == "abc123" and "H200" in rec["machine"]
    assert latest.latest(_data(cold=False), None)["cold_compile_s"] == {"icoforge-cuda": None}  # warm run
    roofline.write_text("{}")
    with pytest.raises(Exception, match="floors_ms"):
        latest.write_latest(path, _data(), "abc", str(roofline))


def test_latest_records_the_replayed_step_only_for_a_graph_replay_run():
    data = _data()
    assert "replayed_step_ms" not in latest.latest(data, None)  # no --graph-replay: no key
    data["backends"][0] |= {"graph_replay": {"first": {"bit_identical": True, "replay_ms": 9.5}}, "replayed_step_ms": 47.12345}
    assert latest.latest(data, None)["replayed_step_ms"] == {"icoforge-cuda": 47.123}
    data["backends"][0]["replayed_step_ms"] = None  # a replay differed: recorded as none, not as a time
    assert latest.latest(data, None)["replayed_step_ms"] == {"icoforge-cuda": None}


def test_latest_takes_the_floors_an_icoforge_backend_recorded_in_the_run():
    data = _data()
    assert latest.latest(data, None)["floors_ms"] is None  # none recorded, none given: none invented
    data["backends"][0]["floors"] = {
        "floors_ms": {"kernel": 80.12345, "program": 61.0, "substep": 59.5},
        "floors_bytes": {"kernel": 335_000_000_000, "program": 255_000_000_000, "substep": 249_000_000_000},
        "floors_bandwidth_GBps": 4190.1,
    }
    rec = latest.latest(data, None)
    assert rec["floors_ms"] == {"kernel": 80.123, "program": 61.0, "substep": 59.5}
    assert "icoforge-cuda" in rec["floors_source"] and "4190.1 GB/s" in rec["floors_source"]
    # a roofline report given explicitly wins over the run's own floors
    assert latest.latest(data, None, {"kernel": 1.0, "program": 1.0, "substep": 1.0})["floors_ms"]["kernel"] == 1.0
    note = next(s for s in sections(data) if isinstance(s, str) and "byte floors" in s)
    assert "kernel 80.12 ms (335.0 GB)" in note and "substep 59.50 ms" in note and "measured step 55.00 ms" in note


def test_python_mode_rerun_switches_optimization():
    code = "import sys; print('optimize', sys.flags.optimize)"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONOPTIMIZE", "ICOFORGE_PYTHON_MODE_SET")}

    def rerun(mode, extra_env=None):
        script = f"from icoforge.cli import pymode; pymode.ensure({mode!r}, ['-c', {code!r}], prefix=[]); {code}"
        out = subprocess.run([sys.executable, "-c", script], env={**env, **(extra_env or {})},
                             capture_output=True, text=True, check=True)  # fmt: skip
        return out.stdout.strip(), out.stderr

    out, err = rerun("optimized")
    assert out == "optimize 1" and "re-running in Python's optimized mode" in err
    out, err = rerun("debug")
    assert out == "optimize 0" and err == ""  # already in debug mode: no re-run
    out, err = rerun("debug", {"PYTHONOPTIMIZE": "1"})
    assert out == "optimize 0" and "debug mode" in err
    pymode.ensure("optimized", None)  # from Python (no command line): never replaces the process
    with pytest.raises(ValueError, match="optimized, debug"):
        pymode.ensure("fast", None)


def test_the_program_table_shows_what_bandwidth_each_program_reaches_on_its_compulsory_bytes():
    data = _data()
    headers = [h for h, _ in program_table(data, 0).columns]
    assert "model GB/s" not in headers  # no floors recorded (no --floors-steps): no column
    data["backends"][0]["floors"] = {
        "floors_ms": {"kernel": 1.0, "program": 1.0, "substep": 1.0},
        "floors_bytes": {"kernel": 1, "program": 1, "substep": 1}, "floors_bandwidth_GBps": 4004.1,
        # prog_a: 5 calls per step moving 3 GB in its kernels, 0.15 ms on the device per call
        "programs": {"prog_a": {"calls": 5.0, "kernel_bytes": 3_000_000_000, "program_bytes": 2_000_000_000}},
    }  # fmt: skip
    prog = program_table(data, 0)
    headers = [h for h, _ in prog.columns]
    assert prog.rows[0][headers.index("model GB/s")] == "4000"  # 0.6 GB per call in 0.15 ms
    assert len(prog.rows[-1]) == len(headers) and "4004 GB/s" in prog.caption
    data["backends"][0]["floors"]["programs"] = {}
    assert program_table(data, 0).rows[0][headers.index("model GB/s")] == "-"  # a program without kernel IR
