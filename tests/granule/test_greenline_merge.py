"""`greenline --gpu-lock` and `greenline-merge`, without running the granule: fake reports in the
real JSON form (built from the real dataclasses), the lock with a second thread and a second
process, the CLI plumbing with run_greenline replaced. Seconds in total."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from icoforge.cli.main import main
from icoforge.errors import IcoforgeError
from icoforge.granule import greenline, report
from icoforge.granule.gpulock import GpuLock
from icoforge.granule.greenline import GreenlineOptions, GreenlineReport
from icoforge.granule.merge import label_report, merge_reports, split_label
from icoforge.granule.runner import VARIANTS, BackendResult, ProgramRow

# --- fake reports ---------------------------------------------------------------------------------


def _result(name: str, scale: float, lock_wait: float | None = None) -> BackendResult:
    r = BackendResult(name, setup_s={"construct": 10.0 * scale, "compile": 1.0, "first_calls": 0.5}, compile_jobs=38)
    r.step_ms = {v: [scale * 10.0, scale * 11.0, scale * 12.0] for v in VARIANTS}
    r.programs = [
        ProgramRow("vertically_implicit_solver_at_predictor_step", 5, 2.0 * scale, 10.0 * scale, 0.2, None),
        ProgramRow("compute_diagnostics_from_normal_wind", 1, 1.0 * scale, 1.0 * scale, 0.02, None),
    ]
    r.profiled_step_ms = 50.0 * scale
    r.gpu_lock_wait_s = lock_wait
    return r


def _report(*results: BackendResult, grid="R2B6", seed=0, steps=5, key="k1", host="h200") -> GreenlineReport:
    return GreenlineReport(
        options=GreenlineOptions(
            grid=grid,
            levels=80,
            backends=tuple(r.backend for r in results),
            seed=seed,
            steps=steps,
            gpu_lock="/tmp/gpu.lock",
        ),
        grid={"name": grid, "cells": 327680, "edges": 491520, "vertices": 163842, "levels": 80},
        common_setup_s={"grid_load": 2.0, "static_fields": 0.5},
        fields_cached=True,
        results=list(results),
        comparisons=[],
        environment={
            "date": "2026-12-01T10:00:00+00:00",
            "host": host,
            "gpu": "NVIDIA H200",
            "cpus": 16,
            "python": "3.12.8",
            "versions": {"icoforge": "0.1", "gt4py": "1.2.1"},
        },
        static_fields_key=key,
    )


def _write(tmp_path, name: str, rep: GreenlineReport):
    path = tmp_path / name
    path.write_text(json.dumps(rep.to_json()))
    return str(path)


def test_merged_tables_are_those_of_one_run_with_both_backends():
    cuda, gtfn = _result("icoforge-cuda", 1.0, 0.0), _result("gtfn_gpu", 2.0, 12.5)
    live = report.as_data(_report(cuda, gtfn))
    merged = merge_reports([("a.json", _report(cuda).to_json()), ("b.json", _report(gtfn).to_json())])
    assert [b["backend"] for b in merged["backends"]] == ["icoforge-cuda", "gtfn_gpu"]
    assert merged["options"]["backends"] == ["icoforge-cuda", "gtfn_gpu"]
    assert report.steps_table(merged) == report.steps_table(live)
    assert report.program_table(merged, 1) == report.program_table(live, 1)
    setup_m, setup_l = report.setup_table(merged), report.setup_table(live)
    assert setup_m.rows == setup_l.rows and setup_m.columns == setup_l.columns
    assert "separate runs" in setup_m.caption and "shared by all backends" in setup_l.caption


def test_greenline_merge_cli_prints_json_and_markdown(tmp_path, capsys):
    a = _write(tmp_path, "cuda.json", _report(_result("icoforge-cuda", 1.0, 0.0)))
    b = _write(tmp_path, "gtfn.json", _report(_result("gtfn_gpu", 2.0, 12.5), host="h200"))
    out, md = tmp_path / "merged.json", tmp_path / "merged.md"
    assert main(["greenline-merge", a, b, "--json", str(out), "--markdown", str(md)]) == 0
    text = capsys.readouterr().out
    for needle in (
        "icoforge-cuda",
        "gtfn_gpu",
        "speed-up vs",
        "0.50x",
        "step time (ms)",
        "setup (seconds)",
        "waited for the GPU lock",
        "12.5",
        "gtfn_gpu: per program",
    ):
        assert needle in text, needle
    data = json.loads(out.read_text())
    assert [x["backend"] for x in data["backends"]] == ["icoforge-cuda", "gtfn_gpu"]
    assert [src["file"] for src in data["merged_from"]] == [a, b]
    doc = md.read_text()
    assert "| variant | icoforge-cuda median | min | gtfn_gpu median | min | speed-up vs icoforge-cuda |" in doc
    assert "| **dycore step** | **55.000** |  | **110.000** |  | 0.50x |" in doc
    for needle in (
        "# greenline: R2B6, 80 levels: icoforge-cuda, gtfn_gpu",
        "2026-12-01T10:00:00+00:00",
        "NVIDIA H200",
        "| gt4py | 1.2.1 |",
        "### icoforge-cuda: per program",
    ):
        assert needle in doc, needle
    assert "[bold]" not in doc and "[dim]" not in doc

    # a merged report merges again (its sources are kept), and the JSON alone goes to stdout
    c = _write(tmp_path, "dace.json", _report(_result("dace_gpu", 1.5)))
    assert main(["greenline-merge", str(out), c, "--json", "-"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [src["file"] for src in again["merged_from"]] == [a, b, c]


def test_the_report_fits_80_columns(tmp_path, monkeypatch, capsys):
    """Piped without $COLUMNS: every table within 80 columns, the per-program table keeps program,
    ms/step and share and says which columns it left out."""
    monkeypatch.delenv("COLUMNS", raising=False)
    a = _write(tmp_path, "cuda.json", _report(_result("icoforge-cuda", 1.0, 0.0)))
    b = _write(tmp_path, "gtfn.json", _report(_result("gtfn_gpu", 2.0)))
    assert main(["greenline-merge", a, b]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    header = next(line for line in out.splitlines() if "program" in line and "share" in line)
    assert "ms/step" in header and "compile s" not in header
    assert "--wide for all" in out


def test_markdown_gets_a_bar_chart_per_program_and_links_rooflines_beside_it(tmp_path):
    a = _write(tmp_path, "cuda.json", _report(_result("icoforge-cuda", 1.0)))
    b = _write(tmp_path, "gtfn.json", _report(_result("gtfn_gpu", 2.0)))
    roofline = tmp_path / "roofline_greenline_R2B6_80_icoforge-cuda.png"  # `roofline greenline`'s default name
    roofline.write_bytes(b"\x89PNG\r\n\x1a\n")
    md = tmp_path / "side.md"
    assert main(["greenline-merge", a, b, "--markdown", str(md)]) == 0
    chart = tmp_path / "side-programs.png"
    assert chart.read_bytes().startswith(b"\x89PNG")
    doc = md.read_text()
    assert f"]({chart.name})" in doc and f"]({roofline.name})" in doc
    assert "roofline_greenline_R2B6_80_gtfn_gpu.png" not in doc  # not there, not linked


def test_chart_rows_follow_the_reference_and_sum_the_tail():
    from icoforge.granule.charts import program_rows

    merged = merge_reports([("a.json", _report(_result("icoforge-cuda", 1.0)).to_json()),
                            ("b.json", _report(_result("gtfn_gpu", 2.0)).to_json())])  # fmt: skip
    programs, backends, values = program_rows(merged)
    assert programs == ["vertically_implicit_solver_at_predictor_step", "compute_diagnostics_from_normal_wind"]
    assert backends == ["icoforge-cuda", "gtfn_gpu"] and values == [[10.0, 1.0], [20.0, 2.0]]
    programs, _, values = program_rows(merged, limit=1)
    assert programs[-1] == "other programs (1)" and values == [[10.0, 1.0], [20.0, 2.0]]


@pytest.mark.parametrize(
    "other, message",
    [
        (dict(grid="R2B5"), "differ in grid ('R2B5' vs 'R2B6')"),
        (dict(seed=1), "differ in seed"),
        (dict(steps=10), "differ in steps"),
        (dict(key="k2"), "differ in static-field key"),
    ],
)
def test_merge_refuses_reports_of_other_inputs(tmp_path, capsys, other, message):
    a = _write(tmp_path, "a.json", _report(_result("icoforge-cuda", 1.0)))
    b = _write(tmp_path, "b.json", _report(_result("gtfn_gpu", 2.0), **other))
    assert main(["greenline-merge", a, b]) == 2
    err = capsys.readouterr().err
    assert "icoforge: error:" in err and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_merge_refuses_a_backend_twice(tmp_path, capsys):
    a = _write(tmp_path, "a.json", _report(_result("gtfn_gpu", 1.0)))
    b = _write(tmp_path, "b.json", _report(_result("gtfn_gpu", 2.0)))
    assert main(["greenline-merge", a, b]) == 2
    err = capsys.readouterr().err
    assert f"backend gtfn_gpu appears in {a} and {b}" in err and len(err.strip().splitlines()) == 1


def test_labelled_runs_of_one_backend_are_compared_side_by_side(tmp_path, capsys):
    off = _write(tmp_path, "off.json", _report(_result("icoforge-cuda", 1.0)))
    fused = _write(tmp_path, "fused.json", _report(_result("icoforge-cuda", 0.8)))
    out = tmp_path / "ab.json"
    assert main(["greenline-merge", f"off={off}", f"fused={fused}", "--json", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert [b["backend"] for b in merged["backends"]] == ["icoforge-cuda (off)", "icoforge-cuda (fused)"]
    assert [b["label"] for b in merged["backends"]] == ["off", "fused"]
    # the numbers are each run's own: the fused run's steps are 0.8x the other's
    steps = [b["dycore_step_ms"] for b in merged["backends"]]
    assert steps[1] == pytest.approx(0.8 * steps[0])
    assert [s["file"] for s in merged["merged_from"]] == [off, fused]
    text = capsys.readouterr().out
    assert "icoforge-cuda (fused)" in text and "1.25x" in text  # speed-up of the labelled run vs the first


def test_labels_split_only_a_word_before_the_equals_sign(tmp_path):
    odd = tmp_path / "a=b.json"  # an existing file whose name holds "=" stays a path
    odd.write_text("{}")
    assert split_label(str(odd)) == (None, str(odd))
    assert split_label("fused=/x/y.json") == ("fused", "/x/y.json")
    assert split_label("/x/y.json") == (None, "/x/y.json")
    assert split_label("dir/a=b.json")[0] is None  # a path, not a label
    with pytest.raises(IcoforgeError, match="label"):
        label_report(_report(_result("gtfn_gpu", 1.0)).to_json(), "two words")


def test_merge_refuses_files_that_are_not_reports(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"results": []}')
    with pytest.raises(IcoforgeError, match="not a report"):
        main(["--traceback", "greenline-merge", str(bad)])


# --- the GPU lock ---------------------------------------------------------------------------------
# No test here depends on how long anything takes: each waits for the event it needs (a log line of
# the lock, a line from a child process, a threading.Event), with a timeout that only a broken lock
# reaches. Times are compared only in order (perf_counter is CLOCK_MONOTONIC, one clock for every
# process of the machine), so a descheduled thread or process cannot fail them.

_EVENT_S = 120.0  # how long a test waits for an event that a working lock always brings


class _LockLog:
    """The lock's log callback: keeps (time, line) and lets a thread wait for a line."""

    def __init__(self, on_line=None):
        self.entries: list[tuple[float, str]] = []
        self.changed = threading.Condition()
        self.on_line = on_line or (lambda line: None)

    def __call__(self, line: str) -> None:
        with self.changed:
            self.entries.append((time.perf_counter(), line))
            self.changed.notify_all()
        self.on_line(line)

    def when(self, prefix: str) -> float | None:
        return next((t for t, line in self.entries if line.startswith(prefix)), None)

    def wait_for(self, prefix: str) -> float:
        with self.changed:
            assert self.changed.wait_for(lambda: self.when(prefix) is not None, _EVENT_S), f"no line {prefix!r}"
        return self.when(prefix)

    def lines(self) -> list[str]:
        return [line for _, line in self.entries]


def _start(target, *args) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_gpu_lock_serializes_two_threads(tmp_path):
    """A holds the lock until B is seen waiting for it; B enters only after A has left (a lock that
    does nothing fails: B never waits, so no waiting line comes and B enters while A holds)."""
    path = tmp_path / "sub" / "gpu.lock"
    path.parent.mkdir()
    log = _LockLog()
    order: list[str] = []
    waited: dict[str, float] = {}
    a_holds, release_a = threading.Event(), threading.Event()

    def work(name: str, release: threading.Event | None) -> None:
        with GpuLock(path, log).hold(name, "timed steps") as w:
            waited[name] = w
            order.append(f"{name} enters")
            if release is not None:
                a_holds.set()
                release.wait(_EVENT_S)
            order.append(f"{name} leaves")

    try:
        a = _start(work, "A", release_a)
        assert a_holds.wait(_EVENT_S)
        b = _start(work, "B", None)
        b_waits = log.wait_for("B: waiting for the GPU lock")
        assert order == ["A enters"]  # B is blocked, not inside
        released = time.perf_counter()
    finally:
        release_a.set()
    a.join(_EVENT_S)
    b.join(_EVENT_S)
    assert order == ["A enters", "A leaves", "B enters", "B leaves"]
    assert waited["B"] >= released - b_waits > 0  # B's wait covers its time blocked
    assert log.when("A: waiting") is None
    assert any(line.startswith("B: waiting for the GPU lock") and "held by pid" in line for line in log.lines())
    assert log.when("B: GPU lock acquired after") is not None


def test_gpu_lock_measurement_waits_for_every_setup(tmp_path):
    """Two setups hold the lock at once (shared); a measurement starts only after both ended, and
    a setup asked for during the measurement waits for its end. Each holder lets go on an event."""
    log = _LockLog()
    lock = GpuLock(tmp_path / "gpu.lock", log)
    order: list[str] = []
    both_setting_up = threading.Barrier(3)
    release = {name: threading.Event() for name in ("dace_gpu", "gtfn_gpu", "measure")}
    measuring, waited = threading.Event(), []

    def setup(name: str) -> None:
        with lock.setting_up(name):
            both_setting_up.wait(_EVENT_S)  # both inside at once: shared, not exclusive
            release[name].wait(_EVENT_S)
            order.append(f"{name} setup done")

    def measure() -> None:
        with lock.hold("icoforge-cuda", "timed steps") as w:
            waited.append(w)
            order.append("measure starts")
            measuring.set()
            release["measure"].wait(_EVENT_S)
            order.append("measure ends")

    def late_setup() -> None:
        with lock.setting_up("late"):
            order.append("late setup starts")

    try:
        setups = [_start(setup, name) for name in ("dace_gpu", "gtfn_gpu")]
        both_setting_up.wait(_EVENT_S)
        measurer = _start(measure)
        measure_waits = log.wait_for("icoforge-cuda: waiting for the GPU lock")
        release["gtfn_gpu"].set()
        setups[1].join(_EVENT_S)
        time.sleep(0.05)  # lets a lock that ignores the other setup show it; passing never depends on it
        assert order == ["gtfn_gpu setup done"]  # dace_gpu still sets up: no measurement yet
        last_setup_released = time.perf_counter()
        release["dace_gpu"].set()
        assert measuring.wait(_EVENT_S)
        late = _start(late_setup)
        log.wait_for("late: setup waits for a measurement to end")
        assert order[-1] == "measure starts"  # the late setup is blocked, not inside
    finally:
        for event in release.values():
            event.set()
    for t in (*setups, measurer, late):
        t.join(_EVENT_S)
    assert order == ["gtfn_gpu setup done", "dace_gpu setup done", "measure starts", "measure ends", "late setup starts"]
    assert waited[0] >= last_setup_released - measure_waits > 0
    assert any("held by other processes still setting up" in line for line in log.lines())


def _child(code: str) -> subprocess.Popen:
    """A Python child that takes lines on stdin and answers on stdout (it ends its waits on EOF)."""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _tell(child: subprocess.Popen, line: str) -> None:
    child.stdin.write(line + "\n")
    child.stdin.flush()


def test_gpu_lock_waits_for_another_process(tmp_path):
    """Another process holds the lock until this one is seen waiting; it lets go when told, and
    says when (a lock that does not wait fails: no waiting line, and it enters while held)."""
    path = tmp_path / "gpu.lock"  # created by the lock
    holder = _child(
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.readline()\n"
        "print('unlocking', time.perf_counter(), flush=True)\nfcntl.flock(fd, fcntl.LOCK_UN)\n"
    )
    log = _LockLog(on_line=lambda line: _tell(holder, "let go") if line.startswith("gtfn_gpu: waiting") else None)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with GpuLock(path, log).hold("gtfn_gpu", "timed steps") as waited:
            assert log.when("gtfn_gpu: waiting for the GPU lock") is not None
            said, unlocked = holder.stdout.readline().split()  # written before it let go
        assert said == "unlocking"
        assert waited >= float(unlocked) - log.when("gtfn_gpu: waiting") > 0
    finally:
        holder.stdin.close()
        holder.wait(_EVENT_S)


def test_gpu_lock_a_finished_process_holds_it_shared_until_it_exits(tmp_path):
    """After its measurement a process keeps the lock shared until it exits: the next measurement
    starts after that exit, not beside the first process's reports and teardown. The finishing
    process exits when told to, once the next measurement is seen waiting."""
    path = tmp_path / "gpu.lock"
    finisher = _child(
        "import sys, time\nfrom icoforge.granule.gpulock import GpuLock\n"
        f"lock = GpuLock({str(path)!r})\n"
        "with lock.hold('dace_gpu', 'timed steps'):\n    pass\n"
        "lock.shared_until_exit('dace_gpu')\nprint('measured', flush=True)\nsys.stdin.readline()\n"
        "print('exiting', time.perf_counter(), flush=True)\n"
    )
    log = _LockLog(on_line=lambda line: _tell(finisher, "exit") if line.startswith("icoforge-cuda: waiting") else None)
    try:
        assert finisher.stdout.readline().strip() == "measured"
        with GpuLock(path, log).hold("icoforge-cuda", "timed steps") as waited:
            assert log.when("icoforge-cuda: waiting for the GPU lock") is not None
            said, exiting = finisher.stdout.readline().split()  # the finisher said goodbye before
        assert said == "exiting"
        assert waited >= float(exiting) - log.when("icoforge-cuda: waiting") > 0
    finally:
        finisher.stdin.close()
        finisher.wait(_EVENT_S)


def test_gpu_lock_refuses_a_bad_path_early(tmp_path):
    with pytest.raises(IcoforgeError, match="--gpu-lock"):
        GpuLock(tmp_path / "missing-dir" / "gpu.lock").check()


class _FakeGranule:
    """What `greenline.measure` uses of a Granule; checks the lock is held while measuring."""

    def __init__(self, name: str, lock_path):
        self.name = name
        self.result = BackendResult(name)
        self.lock_path = lock_path
        self.phases: list[str] = []
        self.rounds: list[tuple] = []

    def _lock_is_held(self) -> bool:
        fd = os.open(self.lock_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def time_variants(self, steps, warmup, progress, append=False):
        self.phases.append(f"time held={self._lock_is_held()}")
        self.rounds.append(("time", steps, append))

    def time_chained_steps(self, steps, progress):
        self.phases.append(f"chained held={self._lock_is_held()}")
        self.rounds.append(("chained", steps))

    def measure_busy(self, steps, progress):
        self.phases.append(f"busy held={self._lock_is_held()}")

    def profile(self, rounds, progress):
        self.phases.append(f"profile held={self._lock_is_held()}")


@pytest.mark.parametrize("with_lock", [True, False])
def test_measurement_phases_hold_the_lock(tmp_path, with_lock):
    path = tmp_path / "gpu.lock"
    path.touch()
    lines: list[str] = []
    lock = GpuLock(path, lines.append) if with_lock else None
    gs = [_FakeGranule("icoforge-cuda", path), _FakeGranule("gtfn_gpu", path)]
    opts = GreenlineOptions(backends=("icoforge-cuda", "gtfn_gpu"), profile_steps=1)
    assert greenline.measure(gs, opts, {}, None, lock, lambda *a: None, lines.append) == []
    for g in gs:
        assert g.phases == [f"{p} held={with_lock}" for p in ("time", "chained", "busy", "profile")]
        assert (g.result.gpu_lock_wait_s is not None) == with_lock
        assert ("gpu_lock_wait_s" in g.result.to_json()) and (
            g.result.to_json()["gpu_lock_wait_s"] is None
        ) != with_lock
    assert sum("GPU lock acquired" in line for line in lines) == (2 if with_lock else 0)


def test_timing_rounds_split_the_steps_into_turns_on_the_lock(tmp_path, monkeypatch):
    """--timing-rounds 3 with 7 steps: each backend times 3 + 2 + 2 steps in three turns, every turn
    under the lock and its samples joined to the earlier turns'; the busy time and profile once,
    in the last turn. Rounds outside 1..steps are refused."""
    monkeypatch.setattr(greenline, "ROUND_PAUSE_S", 0.0)
    path = tmp_path / "gpu.lock"
    path.touch()
    lines: list[str] = []
    gs = [_FakeGranule("icoforge-cuda", path), _FakeGranule("dace_gpu", path)]
    opts = GreenlineOptions(backends=("icoforge-cuda", "dace_gpu"), steps=7, profile_steps=1, timing_rounds=3)
    greenline.measure(gs, opts, {}, None, GpuLock(path, lambda s: None), lambda *a: None, lines.append)
    for g in gs:
        assert g.rounds == [("time", 3, True), ("chained", 3), ("time", 2, True), ("chained", 2),
                            ("time", 2, True), ("chained", 2)]  # fmt: skip
        assert set(g.phases) == {f"{p} held=True" for p in ("time", "chained", "busy", "profile")}
        assert g.phases[-2:] == ["busy held=True", "profile held=True"]
    pauses = {"frozen_objects": 5, "collections": {"0": 1, "1": 0, "2": 0}, "total_ms": 2.0, "longest_ms": 1.5}
    summed = greenline._summed_pauses([pauses, {**pauses, "collections": {"0": 2, "1": 1, "2": 0}, "longest_ms": 0.5}])
    assert summed == {"frozen_objects": 5, "collections": {"0": 3, "1": 1, "2": 0}, "total_ms": 4.0, "longest_ms": 1.5}
    assert gs[0].result.gc_pauses is not None
    for bad in (0, 8):
        with pytest.raises(IcoforgeError, match="timing rounds must be between 1 and --steps"):
            greenline.run_greenline(GreenlineOptions(backends=("icoforge-cpu",), steps=7, timing_rounds=bad))


def test_time_variants_appends_a_later_rounds_samples():
    from icoforge.granule.runner import Granule

    g = Granule.__new__(Granule)  # only what time_variants touches
    g.variants, g.name, g.result = ("first",), "fake", BackendResult("fake")
    g.sync, g.step = (lambda: None), (lambda variant: None)
    g.time_variants(3, 1)
    assert len(g.result.step_ms["first"]) == 3
    g.time_variants(2, 1, append=True)
    assert len(g.result.step_ms["first"]) == 5
    g.time_variants(2, 0)
    assert len(g.result.step_ms["first"]) == 2


def test_floors_are_recorded_last_and_only_for_icoforge_backends(tmp_path):
    path = tmp_path / "gpu.lock"
    path.touch()
    gs = [_FakeGranule("icoforge-cuda", path), _FakeGranule("dace_gpu", path)]
    calls = []

    def floor_model(g, steps):  # after the timed phases: the recorded steps advance the state
        calls.append((g.name, steps, list(g.phases)))
        return {"floors_ms": {"kernel": 3.0, "program": 2.0, "substep": 1.0}}

    opts = GreenlineOptions(backends=("icoforge-cuda", "dace_gpu"), profile_steps=0, floors_steps=2)
    lines: list[str] = []
    greenline.measure(gs, opts, {}, None, GpuLock(path, lambda s: None), lambda *a: None, lines.append, floor_model)
    assert any("dace_gpu: no byte floors" in line for line in lines)  # said, not silently skipped
    assert calls == [("icoforge-cuda", 2, ["time held=True", "chained held=True", "busy held=True"])]
    assert gs[0].result.to_json()["floors"]["floors_ms"]["kernel"] == 3.0 and gs[1].result.floors is None
    with pytest.raises(IcoforgeError, match="floor model"):
        greenline.run_greenline(opts)


def test_gpu_lock_option_reaches_greenline_options(tmp_path, monkeypatch, capsys):
    seen: list[GreenlineOptions] = []

    def fake_run(opts, progress=None, log=None, byte_model=None, floor_model=None):
        seen.append(opts)
        assert floor_model is not None  # the CLI hands perf's floors down
        return dataclasses.replace(_report(_result(opts.backends[0], 1.0, 0.0)), options=opts)

    monkeypatch.setattr(greenline, "run_greenline", fake_run)
    lock, out = tmp_path / "gpu.lock", tmp_path / "r.json"
    argv = ["greenline", "--backend", "gtfn_gpu", "--gpu-lock", str(lock), "--json", str(out)]
    assert main(argv) == 0
    assert seen[-1].gpu_lock == str(lock) and seen[-1].backends == ("gtfn_gpu",)
    data = json.loads(out.read_text())
    assert data["options"]["gpu_lock"] == str(lock) and data["backends"][0]["gpu_lock_wait_s"] == 0.0
    assert data["static_fields_key"] == "k1"
    assert main(["greenline", "--backend", "gtfn_gpu", "--json", "-", "--floors-steps", "1"]) == 0
    assert seen[-1].gpu_lock is None and seen[-1].floors_steps == 1
    with contextlib.suppress(SystemExit):
        main(["greenline", "--help"])
    assert "--gpu-lock" in capsys.readouterr().out


def _profiled(backend: str, label: str | None, device_ms: dict[str, float]) -> dict:
    b = {"backend": f"{backend} ({label})" if label else backend,
         "programs": [{"name": n, "kernels": 1, "device_ms": ms} for n, ms in device_ms.items()]}  # fmt: skip
    b["programs"].append({"name": "fused_program", "kernels": 4, "device_ms": 1.0})  # not a single kernel: ignored
    return b | ({"label": label} if label else {})


def test_machine_state_note_names_a_run_profiled_on_a_slower_machine():
    """Labelled runs of one backend: a run whose single-kernel programs took 1.3x the others' is
    named; the same programs of another backend (dace_gpu, slower by its own code) are never compared."""
    base = {"a": 0.20, "b": 0.05, "c": 0.10, "d": 0.04}
    close = {n: ms * 1.03 for n, ms in base.items()}
    slow = {n: ms * 1.3 for n, ms in base.items()} | {"d": 0.04}  # most programs slow, one not
    data = {"backends": [_profiled("icoforge-cuda", "opt", slow), _profiled("dace_gpu", None, {n: 2 * ms for n, ms in base.items()}),
                         _profiled("icoforge-cuda", "walk", base), _profiled("icoforge-cuda", "nopred", close)]}  # fmt: skip
    note = report.machine_state_note(data)
    assert note is not None and "icoforge-cuda (opt) 1.2" in note and "the 4 single-kernel programs" in note
    assert "walk" not in note and "nopred" not in note and "dace_gpu" not in note
    # runs within the spread of one machine state, or a backend run once: no note
    data["backends"][0] = _profiled("icoforge-cuda", "opt", {n: ms * 0.97 for n, ms in base.items()})
    assert report.machine_state_note(data) is None
    assert report.machine_state_note({"backends": [_profiled("icoforge-cuda", None, base), _profiled("dace_gpu", None, slow)]}) is None
    # the note is printed right under the step table of a merged report
    runs = [label_report(report.as_data(_report(_result("icoforge-cuda", 1.0))), label) for label in ("opt", "walk")]
    for run, scale in zip(runs, (1.5, 1.0)):
        run["backends"][0]["programs"] = [{**p, "kernels": 1, "device_ms": scale * 0.1 * (i + 1)} for i, p in
                                          enumerate(3 * run["backends"][0]["programs"])]  # fmt: skip
        for i, p in enumerate(run["backends"][0]["programs"]):
            p["name"] += f"_{i}"
    order = [s if isinstance(s, str) else s.title for s in report.sections(merge_reports([("a.json", runs[0]), ("b.json", runs[1])]))]
    at = next(i for i, s in enumerate(order) if "slower machine state" in s)
    assert "icoforge-cuda (opt) 1.50x" in order[at] and order[at - 1] == report.steps_table(runs[0]).title
    assert not any("slower machine state" in s for s in order[:at] + order[at + 1:])


def test_the_setup_table_splits_the_construction_by_whose_python_ran():
    cuda, gtfn = _result("icoforge-cuda", 1.0, 0.0), _result("gtfn_gpu", 2.0)
    cuda.construct_owners = {"icon4py's": 6.0, "GT4Py's": 3.5, "ours": 0.5}
    data = report.as_data(_report(cuda, gtfn))
    rows = {r[0]: r[1:] for r in report.setup_table(data).rows}
    labels = [r[0] for r in report.setup_table(data).rows]
    construct = next(i for i, label in enumerate(labels) if label.startswith("construct"))
    # right under the construction, in a fixed order, only the owners some backend has
    assert labels[construct + 1 : construct + 4] == ["  in icoforge's Python", "  in GT4Py's Python", "  in icon4py's Python"]
    assert rows["  in GT4Py's Python"] == ["3.5", "-"]
    assert "  in other code" not in rows
    assert rows["[bold]total[/bold]"] == ["[bold]11.5[/bold]", "[bold]21.5[/bold]"]  # the split is not added again
    older = report.as_data(_report(gtfn))  # reports before the split have no construct_owners
    assert not any(label.startswith("  in ") for label, *_ in report.setup_table(older).rows)


def test_the_pictures_name_the_granules_step(tmp_path):
    # the chart of a muphys report says "muphys step", a dycore report (or one from before the
    # granule was recorded) "dycore step"
    from icoforge.granule.charts import granule_step, pictures_markdown

    data = _report(_result("icoforge-cpu", 1.0)).to_json()
    assert granule_step({k: v for k, v in data.items() if k != "granule"}) == "dycore step"
    md = tmp_path / "m.md"
    assert "![ms per muphys step per program and backend](m-programs.png)" in pictures_markdown({**data, "granule": "muphys"}, md)
    assert "![ms per dycore step per program and backend](m-programs.png)" in pictures_markdown({**data, "granule": "dycore"}, md)
