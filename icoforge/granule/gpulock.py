"""Exclusive GPU for measurements across processes: an `fcntl.flock` on a file (`--gpu-lock`).

Several greenline processes can share one machine, one per backend: their construction and
compilation (minutes for GT4Py's backends) overlap, but each measurement phase (verification
substeps, warm-up + timed steps, per-program profile) runs while holding an exclusive lock on
one file, so no two processes time the GPU at once. Setup (static fields, compiling) holds the
same file's lock shared: a measurement waits until no other process is compiling, and a setup
that starts later waits until the measurement is done: a measurement beside another process's
setup (its grid going to the GPU, its compiling on every core) ran 25 % slow (H200, session 14).
flock locks belong to an open file description: two threads of one process that each `hold()`
also exclude each other, and the kernel releases the lock when a process dies.

A process that has measured holds the lock shared until it exits (`shared_until_exit`): its
reports, its JSON and its interpreter's teardown (CuPy's pools, DaCe's modules) stay out of the next
process's measurement. H200 session 26: of four runs measured within two seconds of each other, one
was profiled with twice the others' host time per program call and 1.47x their device time on the
same single-kernel programs, most likely beside another process's teardown.

The lock file holds, while locked, who holds it (pid, backend, phase): a waiting process names
its blocker in its log line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import time
from collections.abc import Callable, Iterator

from icoforge.errors import IcoforgeError


class GpuLock:
    def __init__(self, path: str | os.PathLike[str], log: Callable[[str], None] | None = None):
        self.path = pathlib.Path(path)
        self.log = log or (lambda text: None)

    def check(self) -> None:
        """Create the lock file if missing; a bad path fails now, not after minutes of compiling."""
        os.close(self._open())

    def _open(self) -> int:
        try:
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except PermissionError:  # someone else's lock file: flock works on a read-only descriptor too
                return os.open(self.path, os.O_RDONLY)
        except OSError as e:
            raise IcoforgeError(f"--gpu-lock {self.path}: {e.strerror or e}") from e

    def _acquire(self, mode: int, waiting: Callable[[str], str]) -> int:
        """A descriptor of its own holding the lock in `mode` (LOCK_EX or LOCK_SH). When it must
        wait, logs `waiting(holder)` first (holder: the lock file's note, or "")."""
        fd = self._open()
        try:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                self.log(waiting(_read_holder(fd)))
                fcntl.flock(fd, mode)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _flock(self, mode: int, waiting: Callable[[str], str]) -> Iterator[int]:
        """`_acquire`, released on exit."""
        fd = self._acquire(mode, waiting)
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def hold(self, who: str, what: str) -> Iterator[float]:
        """Hold the lock for `who` (a backend) doing `what`; yields the seconds waited for it."""
        t0 = time.perf_counter()

        def waiting(holder: str) -> str:
            holder = holder or "other processes still setting up"
            return f"{who}: waiting for the GPU lock {self.path} ({what}), held by {holder}"

        with self._flock(fcntl.LOCK_EX, waiting) as fd:
            waited = time.perf_counter() - t0
            self.log(f"{who}: GPU lock acquired after {waited:.1f} s ({what})")
            _write_holder(fd, f"pid {os.getpid()}, {who}: {what}")
            try:
                yield waited
            finally:
                _write_holder(fd, "")

    @contextlib.contextmanager
    def setting_up(self, who: str) -> Iterator[None]:
        """Hold the lock shared while `who` sets up (compiles): no process measures meanwhile.
        Never call `hold` inside: this process's own exclusive request would wait for itself."""

        def waiting(holder: str) -> str:
            return f"{who}: setup waits for a measurement to end" + (f" ({holder})" if holder else "")

        with self._flock(fcntl.LOCK_SH, waiting):
            yield

    def shared_until_exit(self, who: str) -> None:
        """Hold the lock shared from now until this process exits (the kernel releases it then):
        after `who` has measured, so nothing it still does overlaps another process's measurement.
        Call it after this process's last `hold`: a later `hold` would wait for itself."""

        def waiting(holder: str) -> str:
            return f"{who}: finishing waits for a measurement to end" + (f" ({holder})" if holder else "")

        self._acquire(fcntl.LOCK_SH, waiting)  # the descriptor stays open, and locked, until exit


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        return ""


def _write_holder(fd: int, text: str) -> None:
    try:
        os.ftruncate(fd, 0)
        if text:
            os.pwrite(fd, (text + "\n").encode(), 0)
    except OSError:  # informative only (e.g. a read-only lock file)
        pass
