"""Time to solution of a model run (issue 48 item 4): the step statistics leave out the warm-up and
busy steps and name the stalls, the component clock times each granule call between two
synchronisations and puts the methods back, a record cut before step 1 ends says so (a lower
bound), the merged table fits 80 columns and its ratios are the right way round, and a peer's
descriptor reaches the granules. No model run (fast)."""

from __future__ import annotations

import json
import time

from icoforge.model import report, run, timing


def _steps(seconds, busy=()):
    return [{"index": i + 1, "seconds": s, "worker_cpu_s": 0.0, "worker_busy": i + 1 in busy, "gc_ms": 0.0}
            for i, s in enumerate(seconds)]  # fmt: skip


def test_step_stats_leave_out_warmup_and_busy_steps_and_name_stalls():
    # step 1 compiles (30 s), step 3 beside a busy compile worker, step 6 a stall (> 2x the median)
    stats = timing.step_stats(_steps([30.0, 0.10, 0.50, 0.12, 0.11, 0.40, 0.10], busy={3}), warmup=1)
    assert stats["n"] == 5
    assert stats["median_s"] == 0.11 and stats["min_s"] == 0.10
    assert stats["worker_busy_steps"] == [3]
    assert [s["index"] for s in stats["stalls"]] == [6]
    assert timing.step_stats(_steps([30.0]), warmup=1) is None  # nothing after the warm-up


class _Granule:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def run(self, *args, **kwargs):
        self.log.append(self.name)
        time.sleep(0.02)
        return kwargs.get("value")

    def time_step(self, **kwargs):
        return self.run(**kwargs)


class _Granules:
    def __init__(self, log):
        self.solve_nonhydro = _Granule(log, "dycore")
        self.diffusion = _Granule(log, "diffusion")
        self.tracer_advection = None  # switched off: not a component of this run
        self.physics = None


def test_component_clock_syncs_around_each_call_and_puts_the_methods_back():
    log = []
    granules = _Granules(log)
    clock = timing.ComponentClock(granules, lambda: log.append("sync"))
    assert clock.present() == ["dycore", "diffusion"]
    with clock.active():
        for _ in range(2):
            assert granules.solve_nonhydro.time_step(value=7) == 7
        granules.diffusion.run(value=None)
    assert log == ["sync", "dycore", "sync"] * 2 + ["sync", "diffusion", "sync"]
    seconds = clock.take()
    assert set(seconds) == {"dycore", "diffusion"}
    assert seconds["dycore"] >= 0.04 and 0.02 <= seconds["diffusion"] < seconds["dycore"]
    assert clock.take() == {"dycore": 0.0, "diffusion": 0.0}  # taken: the next step starts at zero
    assert "time_step" not in vars(granules.solve_nonhydro) and "run" not in vars(granules.diffusion)
    log.clear()
    granules.diffusion.run()
    assert log == ["diffusion"]  # no sync outside the block


def test_a_record_cut_before_step_1_is_a_lower_bound(tmp_path):
    path = tmp_path / "model-dace_gpu.json"
    record = timing.Record("dace_gpu", {"grid": "R2B6", "levels": 80}, process_start=time.time() - 100.0, path=path)
    record.phase("initialize_driver (static fields, granules: compiles) ...")
    d = json.loads(path.read_text())
    assert d["finished"] is False and d["running"].startswith("initialize_driver")
    assert d["time_to_first_step"] is None and d["elapsed_s"] >= 100.0
    text = report.markdown([d])
    assert "| dace_gpu (cut) |" in text and " >100 |" in text


def test_a_finished_record_times_the_first_step_from_process_start(tmp_path):
    t0 = time.time()
    record = timing.Record("icoforge-cpu", {}, process_start=t0 - 5.0, lock_wait_s=1.0, path=tmp_path / "r.json")
    record.setup_s.update({"grid": 1.0, "initialize_driver": 2.0})
    record.add_step(0.5, 0.0, False, 0.0)
    first = json.loads((tmp_path / "r.json").read_text())["time_to_first_step"]
    assert first["from_driver_setup_s"] == 3.5
    assert 4.0 - 0.01 <= first["from_process_start_s"] <= time.time() - t0 + 4.0 + 0.01  # 5 s before, 1 s of lock off


def _record(backend, step_s, first_s, components=None, finished=True):
    d = {"backend": backend, "grid": "R2B6", "levels": 80, "source": "experiment jw", "components_on": ["dycore", "diffusion"],
         "device": "NVIDIA H200", "python_optimized": True, "finished": finished, "elapsed_s": 600.0,
         "time_to_first_step": {"from_process_start_s": first_s, "from_driver_setup_s": first_s - 10} if first_s else None,
         "step_stats": {"n": 19, "median_s": step_s, "min_s": step_s * 0.98, "stalls": [], "worker_busy_steps": []}
         if step_s else None, "components": components or {}}  # fmt: skip
    return d


def test_merged_table_fits_80_columns_and_ratios_are_theirs_over_ours():
    comp = {"dycore": {"median_s": 0.4012}, "diffusion": {"median_s": 0.0213}, timing.REST: {"median_s": 0.0051},
            "step": {"median_s": 0.4276}}  # fmt: skip
    warm = {"icoforge gt4py-passes": 0, "gt4py": 1234, "cupy": 0, "icoforge cpu-build": 11}
    records = [_record("icoforge-cuda", 0.400, 60.0, comp), _record("dace_gpu", 0.520, 450.0, comp) | {"cache_entries_at_start": warm},
               _record("gtfn_gpu", None, None, finished=False)]  # fmt: skip
    text = report.markdown(records)
    assert max(map(len, text.splitlines())) <= report.WIDTH, text
    assert "icoforge-cuda vs dace_gpu: 1.30x faster per step, 7.5x to the first step" in text
    assert "icoforge-cuda vs gtfn_gpu: >10.0x to the first step (gtfn_gpu cut)" in text
    assert "| dycore" in text and "401.2" in text and "| driver (rest)" in text and "427.6" in text
    assert "advection" not in text.split("Per step")[1]  # off in this run: no row
    assert "dace_gpu: warm caches at the start (gt4py 1234, icoforge cpu-build 11)" in text
    assert "icoforge-cuda: warm" not in text


def test_summary_rows_leave_the_component_steps_out():
    session = run.Session(driver=None, states=None, setup_s={"initialize_driver": 10.0})
    session.steps = [run.StepTime(1, 2.0, 0.0), run.StepTime(2, 0.2, 0.0), run.StepTime(3, 0.2, 0.0),
                     run.StepTime(4, 0.9, 0.0, components={"dycore": 0.5})]  # fmt: skip
    rows = dict(report.summary_rows(session))
    assert rows["steps 2..3, compile workers idle (2)"] == "median 0.200 s, min 0.200 s"
    assert rows["steps"] == "3"


def test_the_granules_get_the_descriptor_and_the_driver_its_backend_back(monkeypatch):
    from icon4py.model.driver import driver_utils

    seen = []
    monkeypatch.setattr(driver_utils, "initialize_granules", lambda **kw: seen.append(kw["backend"]))
    descriptor = {"device": "GPU", "backend_factory": None}
    with run._granules_with(descriptor):
        driver_utils.initialize_granules(config=None, backend="one backend")
    with run._granules_with(None):
        driver_utils.initialize_granules(config=None, backend="one backend")
    assert seen == [descriptor, "one backend"]
    driver_utils.initialize_granules(backend="after")
    assert seen[-1] == "after"  # put back


def test_process_start_is_before_now():
    start = timing.process_start_epoch()
    assert start is not None and 0.0 < time.time() - start < 24 * 3600


def test_setup_is_split_by_whose_code_ran_in_the_summary_and_the_merged_table():
    from icoforge import owners

    session = run.Session(driver=None, states=None, setup_s={"initialize_driver": 10.0},
                          setup_owners={"initialize_driver": {owners.GT4PY: 6.0, owners.WAITING: 3.5, owners.OURS: 0.01}})
    rows = report.summary_rows(session)
    assert rows[:3] == [("initialize_driver", "10.0 s"), ("  in GT4Py's Python", "6.0 s"),
                        ("  in a wait for a compile job", "3.5 s")]  # ours below OWNER_SHOWN_S: left out
    ours = _record("icoforge-cuda", 0.4, 60.0) | {
        "setup_s": {"grid": 1.0, "initialize_driver": 20.0},
        "setup_owners_s": {"grid": {owners.ICON4PY: 0.9}, "initialize_driver": {owners.GT4PY: 12.0, owners.ICON4PY: 2.0,
                                                                                 owners.WAITING: 6.0}}}  # fmt: skip
    text = report.markdown([ours, _record("dace_gpu", 0.5, 400.0)])  # a record without the split: no column
    assert max(map(len, text.splitlines())) <= report.WIDTH, text
    table = text.split("whose code ran")[1]
    assert "| icon4py's Python" in table and " 2.9 |" in table  # both phases summed
    assert "| a wait for a compile job" in table and " 6.0 |" in table and "| setup (all phases)" in table
    assert "dace_gpu" not in table.split("\n\n")[1] and "icoforge's Python" not in table  # nothing sampled: no row


def test_a_setup_phase_is_timed_and_sampled():
    import hashlib

    times, whose = {}, {}
    with run._phase("busy", times, whose, lambda message: None):
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            hashlib.sha256(b"x" * 4096).digest()  # the test's own code: "other"
    assert 0.3 <= times["busy"] < 1.0
    assert abs(sum(whose["busy"].values()) - times["busy"]) < 0.02 and whose["busy"].get("other", 0.0) > 0.2, whose


def test_compile_workers_start_first_thing_for_icoforge_only(monkeypatch):
    from icoforge import settings
    from icoforge.backend.runtime import compile_pool
    from icoforge.suite.backends import warm_compile_workers

    started = []
    monkeypatch.setattr(compile_pool, "warm_up_for", lambda backend, workers=None: started.append(backend))
    with settings.overridden(warm_pool=True):
        warm_compile_workers("icoforge-cpu", "ours")
        warm_compile_workers("dace_gpu", "a peer's descriptor")  # GT4Py starts a peer's pool as it does
    with settings.overridden(warm_pool=False):
        warm_compile_workers("icoforge-cuda", "ours, switched off")
    assert started == ["ours"]
