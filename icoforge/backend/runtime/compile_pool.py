"""GT4Py's compile pool seen from the main process: when each program was submitted to it, and a
warm-up of its workers.

GT4Py compiles in a `spawn` process pool whose workers start on demand, at the first submissions.
A worker then imports Python, GT4Py and the executor's modules before its first job. On the H200
host (REGIONAL/80 cold, session 8) the first job of the granule started about 13 s after
construction began, and all 25 started within 8 s of each other. `warm_up` starts the workers and
their imports at once, in the background, while icon4py's construction runs in the main process.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from icoforge.backend.frontend import gt4py_compat


def import_modules(modules: tuple[str, ...]) -> float:
    """Worker: import `modules`; seconds it took (0 when a worker already had them)."""
    from icoforge.backend.runtime.workflow import yield_to_main_process

    yield_to_main_process()  # from the start: the main process is constructing meanwhile
    t0 = time.perf_counter()
    for name in modules:
        importlib.import_module(name)
    return time.perf_counter() - t0


def warm_up(modules: Iterable[str], workers: int | None = None) -> list[cf.Future]:
    """Start `workers` (default: every) worker of GT4Py's process pool and have each import
    `modules` (an executor's module, GT4Py's passes). Returns the futures, [] when GT4Py compiles
    in threads or serially. A pool's workers start one per submission that finds none idle, so
    one task per worker starts them."""
    from gt4py.next import config

    pool = gt4py_compat.default_process_pool()
    if not isinstance(pool, cf.ProcessPoolExecutor):
        return []
    modules = tuple(modules)
    count = config.BUILD_JOBS if workers is None else min(workers, config.BUILD_JOBS)
    return [pool.submit(import_modules, modules) for _ in range(count)]


def warm_up_for(backend: Any, workers: int | None = None) -> list[cf.Future]:
    """`warm_up` with what a compile job of `backend` (a GT4Py backend object) imports first: its
    executor's module, GT4Py's passes, and the NumPy namespace of array_api_compat, which GT4Py
    imports when the job's connectivity tables are unpickled (numpy.fft, .linalg, .f2py, ...:
    0.3-0.5 s of the first job's start, workstation); [] for the embedded backend (None)."""
    if backend is None:
        return []
    executor = getattr(backend, "executor", None)
    first = (type(executor).__module__,) if executor is not None else ()
    return warm_up((*first, "gt4py.next.iterator.transforms.pass_manager", "array_api_compat.numpy"), workers)


@contextlib.contextmanager
def compiling_here() -> Iterator[None]:
    """GT4Py compiles in this process meanwhile, not in its worker pool: for a command that
    compiles one program and waits for it (`icoforge run`). A fresh worker imports GT4Py before
    its first job, for about as long as this process took to import it, so a warm-up started once
    GT4Py is imported is seldom done by the first job (workstation, predictor solver R2B4/80 cold,
    worker not warmed: 9.4 s of the job's wait were the worker's start and imports). This process
    has GT4Py and the executor imported already, and the job's GTIR is not pickled across."""
    previous = gt4py_compat.set_build_jobs_mode(gt4py_compat.serial_build_jobs_mode())
    try:
        yield
    finally:
        gt4py_compat.set_build_jobs_mode(previous)


# on_change(submitted, finished, name of the last submitted program)
SubmissionCallback = Callable[[int, int, str], None]


@contextlib.contextmanager
def recorded_submissions(on_change: SubmissionCallback | None = None) -> Iterator[list[tuple[float, str]]]:
    """(wall-clock time, task name) of each program submitted to GT4Py's process pool meanwhile.
    `on_change` hears of each submission and each finished job (the latter from the pool's
    thread). The number of jobs is not known before icon4py's construction ends: it lowers each
    program in this process (GT4Py's frontend, seconds each) and only then submits it."""
    from gt4py.next.otf import runners

    record: list[tuple[float, str]] = []
    finished, last, active = [0], [""], [True]  # jobs finished, program of the last submission
    original = runners.ProcessRunner.submit

    def job_done(_: Any) -> None:
        finished[0] += 1
        if on_change is not None and active[0]:  # jobs that end after the block are the caller's to report
            on_change(len(record), finished[0], last[0])

    def submit(self: Any, task: Any) -> Any:
        record.append((time.time(), str(getattr(task, "name", "?"))))
        future = original(self, task)
        if on_change is not None:
            last[0] = _program_name(task)
            on_change(len(record), finished[0], last[0])
            future.add_done_callback(job_done)
        return future

    runners.ProcessRunner.submit = submit  # type: ignore[method-assign]
    try:
        yield record
    finally:
        active[0] = False
        runners.ProcessRunner.submit = original  # type: ignore[method-assign]


def _program_name(task: Any) -> str:
    """The GT4Py program a compile task is for (the task's own name is the backend's)."""
    try:
        program = task.construct_compilable(False).data  # already lowered; this only returns it
        return str(getattr(program, "id", task.name))
    except Exception:  # a customized backend's task carries no program: its name will do
        return str(getattr(task, "name", "?"))


__all__ = ["compiling_here", "import_modules", "recorded_submissions", "warm_up", "warm_up_for"]
