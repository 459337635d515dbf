"""A process pool in which a worker that dies (out of memory, segfault, os._exit) costs only its own task.

A plain `ProcessPoolExecutor` marks itself broken when one worker dies and fails every pending future with
`BrokenProcessPool`, without saying which task killed it. `map_isolated` instead reruns the tasks that were
in flight, each alone, so that the task that kills its worker is found and every other one gets its result.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import multiprocessing
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any


class WorkerDied(Exception):
    """The task's worker process died while running it, even with the task alone in its pool."""

    def __init__(self, exitcode: int | None):
        self.exitcode = exitcode  # as multiprocessing gives it: negative = killed by that signal
        super().__init__(f"worker died: {describe_exit(exitcode)}")


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit code unknown"
    if exitcode >= 0:
        return f"exit code {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = "unknown signal"
    hint = ", out of memory?" if -exitcode == signal.SIGKILL else ""  # the kernel's OOM killer sends SIGKILL
    return f"killed by signal {-exitcode} ({name}{hint})"


def map_isolated(
    fn: Callable[[Any], Any], tasks: Iterable[Any], jobs: int, *, mp_context=None
) -> Iterator[tuple[Any, Any]]:
    """Run `fn(task)` for every task in `jobs` worker processes; yield `(task, outcome)` as each finishes.

    `outcome` is fn's return value, or the exception it raised (not retried), or `WorkerDied` when the task
    killed its worker. `fn` and the tasks must be picklable (spawn by default: `fn` defined at module level).
    When a worker dies, the tasks not yet started go on in a fresh pool; the ones that were in flight are
    suspects, rerun at the end one at a time, each in a fresh pool of one worker.
    """
    ctx = mp_context or multiprocessing.get_context("spawn")
    queue = collections.deque(tasks)
    suspects: list = []
    while queue:  # one pool per pass; a pass ends early only when a worker dies
        in_flight, _ = yield from _pool_pass(fn, queue, jobs, ctx)
        suspects += in_flight
    for task in suspects:
        died, exitcodes = yield from _pool_pass(fn, collections.deque([task]), 1, ctx)
        if died:  # alone in its pool, so the death is this task's own
            yield task, WorkerDied(exitcodes[0] if exitcodes else None)


def _pool_pass(fn, queue: collections.deque, jobs: int, ctx):
    """Run tasks from `queue` (taken off as they are submitted) until it is empty or a worker dies.

    Yields `(task, outcome)` for every task that finished; returns the tasks in flight when a worker died
    (empty if none did) and the exit codes of the workers that were dead by then.
    """
    with cf.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        in_flight: dict[cf.Future, Any] = {}
        workers: dict = {}  # every process this pool started, kept for their exit codes
        broken = False
        while True:
            # No more than `jobs` in flight: then each was running (or just about to) when the pool broke,
            # and whatever is still queued certainly had not started.
            while queue and len(in_flight) < jobs and not broken:
                task = queue.popleft()
                try:
                    in_flight[pool.submit(fn, task)] = task
                except BrokenProcessPool:  # broke since the last wait: this one never ran
                    queue.appendleft(task)
                    broken = True
                # Private, but the only way to the exit codes: the pool forgets its processes once broken.
                workers.update(pool._processes or {})
            if not in_flight:
                return [], []
            done, _ = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
            if broken or any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                done, _ = cf.wait(in_flight)  # the pool fails all its futures at once: collect them all
                broken = True
            lost = []
            for fut in done:
                task = in_flight.pop(fut)
                exc = fut.exception()
                if isinstance(exc, BrokenProcessPool):
                    lost.append(task)
                else:
                    yield task, fut.result() if exc is None else exc
            if broken:
                codes = [_exit_code(p) for p in workers.values()]  # the pool terminates the survivors
                return lost, [c for c in codes if c is not None]


def _exit_code(process, seconds: float = 10.0) -> int | None:
    """The exit code of a pool's worker once it has one (None if it has not ended by then). The pool's
    manager thread joins its workers at the same time as we do: when its waitpid reaps the process, ours
    finds nothing and reads None until that thread has stored the code (seen on a loaded 2-core machine:
    "exit code unknown" for a worker that had called os._exit(3))."""
    deadline = time.monotonic() + seconds
    process.join(timeout=seconds)
    while process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return process.exitcode
