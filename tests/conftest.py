"""Fixtures shared by all test directories.

Every test session gets its own empty icoforge cache, so tests never read or pollute the
user's cache (and always exercise generation); grids are generated once per session.
"""

import os

# The recorded references (tests/granule/data, icoforge/model/jw_*references.json) are bitwise, so
# numpy must round as where they were recorded (an AVX2 machine): without its AVX-512 paths and with
# OpenBLAS's Haswell kernels (icoforge/portable_numpy.py says why), set before numpy is imported,
# also for the processes the tests start. The Makefile exports the same; a no-op on AVX2 machines.
from icoforge.portable_numpy import require_portable_rounding, set_portable_environment  # noqa: E402  (imports no numpy)

set_portable_environment()

import pytest  # noqa: E402


def _check_numpy_rounds_portably() -> None:
    from icoforge.errors import IcoforgeError

    try:  # fails where numpy was imported before this file could switch its AVX-512 paths off
        require_portable_rounding("the test suite's bitwise references")
    except IcoforgeError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.fixture(scope="session", autouse=True)
def icoforge_cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("icoforge-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ICOFORGE_CACHE", str(path))
        yield path


@pytest.fixture(scope="session")
def tiny_grid(icoforge_cache):
    """The R2B3 preset (5,120 cells) with 10 levels: the smallest global grid."""
    from icoforge.grids import load_grid

    return load_grid("R2B3", levels=10, show_progress=False)


# --- progress you can see when piped (CI logs, tee) ------------------------------------------------
# pytest prints a line per file, but a file's line only grows when a test ends: a test of several
# minutes looks like a hang. This adds each file's time at the end of its line and, while a test
# runs longer than HEARTBEAT_S, a line every HEARTBEAT_S saying which one.

HEARTBEAT_S = 60.0


class _SuiteProgress:
    def __init__(self, config: pytest.Config):
        import os
        import threading

        self.config = config
        self.out = os.dup(1)  # the real stdout: pytest redirects fd 1 into its capture while a test runs
        self.lock = threading.Lock()
        self.started = self.file_started = self.test_started = 0.0
        self.running: str | None = None
        self.last_of_file: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._heartbeat, name="test-heartbeat", daemon=True)

    def _now(self) -> float:
        import time

        return time.perf_counter()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        files = [item.nodeid.split("::")[0] for item in items]
        self.last_of_file = {items[i].nodeid for i in range(len(items)) if i + 1 == len(items) or files[i + 1] != files[i]}

    def pytest_sessionstart(self) -> None:
        self.started = self.file_started = self._now()
        self.thread.start()

    def pytest_sessionfinish(self) -> None:
        self.stop.set()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self.lock:
            self.running, self.test_started = nodeid, self._now()

    @pytest.hookimpl(tryfirst=True)  # before pytest writes the [ NN%] of the last file
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self.lock:
            self.running = None
            if nodeid in self.last_of_file:
                now = self._now()
                tr = self.config.pluginmanager.get_plugin("terminalreporter")
                if tr is not None and self.config.get_verbosity() <= 0:
                    tr.write(f" {now - self.file_started:.0f} s (suite {_minutes(now - self.started)})", flush=True)
                self.file_started = now

    def _heartbeat(self) -> None:
        import os

        last = 0.0
        while not self.stop.wait(min(5.0, HEARTBEAT_S / 2)):
            with self.lock:
                now = self._now()
                if self.running is None or now - self.test_started < HEARTBEAT_S or now - last < HEARTBEAT_S:
                    continue
                last = now
                line = f"\n    still running {self.running}: {_minutes(now - self.test_started)} (suite {_minutes(now - self.started)})\n"
                os.write(self.out, line.encode())


def _minutes(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def pytest_configure(config: pytest.Config) -> None:
    from icoforge.console import KNOWN_HARMLESS_WARNINGS

    _check_numpy_rounds_portably()
    # the CLI's list of harmless third-party warnings keeps them out of the test summary too
    for message, category, module in KNOWN_HARMLESS_WARNINGS:
        config.addinivalue_line("filterwarnings", f"ignore:{message}:{category.__name__}:{module}")
    if not hasattr(config, "workerinput"):  # not in pytest-xdist's workers
        config.pluginmanager.register(_SuiteProgress(config), "icoforge-suite-progress")

