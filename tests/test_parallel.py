"""icoforge.parallel.map_isolated: a worker that dies costs only its own task (CPU only, real processes)."""

import os
import signal
import time

import pytest

from icoforge.parallel import WorkerDied, describe_exit, map_isolated

KILLED, EXITS, RAISES = 3, 7, 5  # the task that SIGKILLs its worker, the one that os._exit(3)s, the one that raises


def _square_or_die(t: int) -> int:
    """Module level so that spawned workers can import it (pytest puts tests/ on sys.path, which spawn inherits)."""
    if t == KILLED:
        time.sleep(0.1)  # others are in flight when it dies
        os.kill(os.getpid(), signal.SIGKILL)
    if t == EXITS:
        os._exit(3)
    if t == RAISES:
        raise ValueError(f"task {t} is bad")
    time.sleep(0.2)
    return t * t


def test_a_dying_worker_costs_only_its_own_task():
    t0 = time.perf_counter()
    got = list(map_isolated(_square_or_die, range(10), jobs=2))
    assert sorted(t for t, _ in got) == list(range(10)), "every task reported exactly once"
    out = dict(got)
    for t in set(range(10)) - {KILLED, EXITS, RAISES}:
        assert out[t] == t * t, f"task {t}: {out[t]!r}"
    assert isinstance(out[RAISES], ValueError) and str(out[RAISES]) == "task 5 is bad"
    assert isinstance(out[KILLED], WorkerDied) and out[KILLED].exitcode == -signal.SIGKILL
    assert str(out[KILLED]) == "worker died: killed by signal 9 (SIGKILL, out of memory?)"
    assert isinstance(out[EXITS], WorkerDied) and out[EXITS].exitcode == 3
    assert str(out[EXITS]) == "worker died: exit code 3"
    assert time.perf_counter() - t0 < 15


def test_without_deaths_results_come_in_one_pool():
    got = list(map_isolated(_square_or_die, [0, 1, 2, RAISES], jobs=3))
    out = dict(got)
    assert len(got) == 4 and [out[t] for t in (0, 1, 2)] == [0, 1, 4]
    assert isinstance(out[RAISES], ValueError)


def test_empty_task_list():
    assert list(map_isolated(_square_or_die, [], jobs=2)) == []


@pytest.mark.parametrize(
    "code, text",
    [
        (-9, "killed by signal 9 (SIGKILL, out of memory?)"),
        (-11, "killed by signal 11 (SIGSEGV)"),
        (1, "exit code 1"),
        (None, "exit code unknown"),
    ],
)
def test_describe_exit(code, text):
    assert describe_exit(code) == text
