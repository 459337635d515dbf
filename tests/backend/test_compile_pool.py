"""GT4Py's compile pool as the granule's setup drives it: its workers started ahead of the first
job, and the submissions recorded (a real spawn pool of two workers)."""

from __future__ import annotations

import time

import pytest
from gt4py.next import config
from gt4py.next.otf import runners

from icoforge.backend.runtime import compile_pool


@pytest.fixture
def process_pool(monkeypatch, tmp_path):
    runner = runners.ProcessRunner(max_workers=2, shared_session_cache_dir=str(tmp_path))
    monkeypatch.setattr(runners, "_default_runner", runner)
    monkeypatch.setattr(config, "BUILD_JOBS", 2)
    yield runner
    runner.shutdown()


def test_warm_up_starts_every_worker_and_imports_the_executor(process_pool):
    futures = compile_pool.warm_up(["icoforge.backend.runtime.gpu"])
    assert len(futures) == 2
    seconds = [f.result(timeout=300) for f in futures]
    assert all(s >= 0 for s in seconds) and max(seconds) > 0  # a fresh worker had to import it
    assert len(process_pool._pool._processes) == 2


def test_warm_up_for_a_backend_starts_as_many_workers_as_asked(process_pool):
    """`icoforge run` warms one worker per backend while it loads the grid (the granule: all)."""
    from icoforge.suite.backends import get_backend

    futures = compile_pool.warm_up_for(get_backend("icoforge-cpu"), workers=1)
    assert len(futures) == 1 and futures[0].result(timeout=300) > 0  # it imported the executor
    assert len(process_pool._pool._processes) == 1
    assert compile_pool.warm_up_for(None) == []  # the embedded backend compiles nothing


def test_warm_up_does_nothing_without_a_process_pool(monkeypatch):
    monkeypatch.setattr(runners, "_default_runner", runners.SerialRunner())
    assert compile_pool.warm_up(["icoforge.backend.runtime.gpu"]) == []


def test_submissions_are_recorded_with_their_time(process_pool):
    task = runners.CompilationTask(name="doubled", construct_compilable=lambda with_refs: -3, executor=abs)
    original, t0 = runners.ProcessRunner.submit, time.time()
    with compile_pool.recorded_submissions() as submitted:
        result = process_pool.submit(task).result(timeout=300)
    assert result == 3
    assert [name for _, name in submitted] == ["doubled"] and t0 <= submitted[0][0] <= time.time()
    assert runners.ProcessRunner.submit is original  # GT4Py's own again


def test_compiling_here_runs_jobs_in_this_process_meanwhile(monkeypatch):
    """`icoforge run` compiles in its own process: no worker to start, no GTIR pickled across."""
    monkeypatch.setattr(config, "BUILD_JOBS_MODE", config.BuildJobsMode.PROCESS)
    monkeypatch.setattr(runners, "_default_runner", None)
    with compile_pool.compiling_here():
        assert isinstance(runners.get_default_runner(), runners.SerialRunner)
        assert compile_pool.warm_up(["icoforge.backend.runtime.gpu"]) == []  # no pool to warm
    assert config.BUILD_JOBS_MODE is config.BuildJobsMode.PROCESS and runners._default_runner is None
