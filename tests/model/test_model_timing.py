"""Step timings name the steps a busy compile worker may have spoiled: the measure of the CPU
that child processes use (GT4Py's compile workers are multiprocessing children) sees a busy one."""

from __future__ import annotations

import multiprocessing
import time

from icoforge.model import report, run


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_children_cpu_seconds_sees_a_busy_child():
    ctx = multiprocessing.get_context("fork")
    before = run.children_cpu_seconds()
    child = ctx.Process(target=_spin, args=(0.6,))
    child.start()
    used = 0.0
    while child.is_alive():
        used = max(used, run.children_cpu_seconds() - before)
        time.sleep(0.05)
    child.join()
    assert used > 0.2


def test_busy_steps_are_reported_apart():
    session = run.Session(driver=None, states=None, setup_s={"initialize_driver": 10.0})
    session.steps = [run.StepTime(1, 2.0, 0.0), run.StepTime(2, 0.5, 0.4), run.StepTime(3, 0.2, 0.0), run.StepTime(4, 0.3, 0.0)]
    rows = dict(report.summary_rows(session))
    assert rows["time to first step (setup + step 1)"] == "12.0 s"
    assert rows["steps 2..4, compile workers idle (2)"] == "median 0.250 s, min 0.200 s"
    assert rows["steps while a compile worker was busy (1, not steady state)"] == "median 0.500 s"
    assert "steps 2:" in report.timing_caveats(session, load=None)[0]
