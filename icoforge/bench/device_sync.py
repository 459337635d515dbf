"""pytest plugin: icon4py's benchmarks timed to the end of the device's work.

    pytest -p icoforge.bench.device_sync --backend icoforge.backend:cuda --grid FILE:LEVELS \\
        model/atmosphere/dycore/tests/dycore/integration_tests/test_benchmark_solve_nonhydro.py

Why: GPU backends return before their kernels have run. icoforge-cuda launches on a CUDA stream,
and GT4Py 1.2.1's dace_gpu makes each SDFG call asynchronous (`make_dace_backend(...,
async_sdfg_call=True)`, kept by icon4py's `model_backends` descriptors). icon4py 0.4.1's
`test_benchmark_solve_nonhydro` hands `SolveNonhydro.time_step` to pytest-benchmark without a
synchronisation, so what it reports for a GPU backend is the host's time to enqueue a substep (once
the queue is full, whatever backpressure makes of it), not the substep.

With this plugin, the `benchmark` fixture that icon4py's tests receive synchronises the device
before timing starts and after every benchmarked call, inside the timed region. Each call's host
time to return (the synchronisation not included, the device idle when it starts) is kept in the
benchmark's `extra_info["host_return_s"]`, and `extra_info["device_sync"]` names what was waited
for, so the JSON of `--benchmark-json` says how it was measured. icon4py's files are not changed.

`--device-sync` picks the synchronisation: `auto` (the default: CuPy's `deviceSynchronize` when
CuPy sees a GPU, else none), `cupy`, or `none` (icon4py's own timing; the host figures are still
recorded). The choice is printed in pytest's header.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

CHOICES = ("auto", "cupy", "none")


@dataclasses.dataclass(frozen=True)
class DeviceSync:
    """What a benchmarked call waits for: `wait()` returns when the device has no work left."""

    name: str
    wait: Callable[[], None]


NO_SYNC = DeviceSync("none (icon4py's own timing: host time to return)", lambda: None)


def _cupy_sync() -> DeviceSync | None:
    try:
        import cupy
    except ImportError:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except cupy.cuda.runtime.CUDARuntimeError:
        return None
    return DeviceSync("cupy.cuda.runtime.deviceSynchronize (every stream of the device)", cupy.cuda.runtime.deviceSynchronize)


def resolve(choice: str) -> DeviceSync:
    """The synchronisation `--device-sync CHOICE` asks for; an unusable explicit choice is an error."""
    if choice not in CHOICES:
        raise pytest.UsageError(f"--device-sync {choice!r}: choose one of {', '.join(CHOICES)}")
    if choice == "none":
        return NO_SYNC
    found = _cupy_sync()
    if found is not None:
        return found
    if choice == "cupy":
        raise pytest.UsageError("--device-sync cupy: CuPy is not importable or sees no GPU")
    return dataclasses.replace(NO_SYNC, name="none (auto: CuPy sees no GPU)")


class SynchronizedBenchmark(BenchmarkFixture):
    """pytest-benchmark's fixture with every timed call followed by `device_sync.wait()`.

    pytest-benchmark accepts no other type for `benchmark` (its report hook checks), so the
    fixture it made becomes this subclass (`adopt`), which changes only the two public entry points.
    """

    device_sync: DeviceSync
    host_return_s: list[float]
    clock: Callable[[], float]

    @classmethod
    def adopt(cls, fixture: BenchmarkFixture, sync: DeviceSync, clock: Callable[[], float] = time.perf_counter) -> SynchronizedBenchmark:
        if type(fixture) is not BenchmarkFixture:
            raise TypeError(f"expected pytest-benchmark's BenchmarkFixture, got {type(fixture).__name__}: another plugin redefines `benchmark`")
        fixture.__class__ = cls
        fixture.device_sync, fixture.host_return_s, fixture.clock = sync, [], clock
        return fixture

    def _timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def call_then_wait(*args: Any, **kwargs: Any) -> Any:
            start = self.clock()
            result = function(*args, **kwargs)
            self.host_return_s.append(self.clock() - start)
            self.device_sync.wait()
            return result

        return call_then_wait

    def _record(self) -> None:
        self.extra_info["device_sync"] = self.device_sync.name
        if self.host_return_s:
            self.extra_info["host_return_s"] = {
                "median": statistics.median(self.host_return_s),
                "min": min(self.host_return_s),
                "calls": len(self.host_return_s),
            }

    def __call__(self, function_to_benchmark: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.device_sync.wait()  # work enqueued while the test set up (random fields) is not timed
        try:
            return super().__call__(self._timed(function_to_benchmark), *args, **kwargs)
        finally:
            self._record()

    def pedantic(self, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.device_sync.wait()
        try:
            return super().pedantic(self._timed(target), *args, **kwargs)
        finally:
            self._record()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("icoforge").addoption(
        "--device-sync",
        default="auto",
        help=f"what each benchmarked call waits for inside the timed region: {', '.join(CHOICES)} (default auto)",
    )


class _Fixtures:
    """Registered in pytest_configure, after pytest-benchmark's entry point, so that this
    `benchmark` fixture overrides its and receives it as the fixture of the same name."""

    @pytest.fixture(scope="session")
    def device_sync(self, pytestconfig: pytest.Config) -> DeviceSync:
        return pytestconfig.stash[_SYNC]

    @pytest.fixture
    def benchmark(self, benchmark: BenchmarkFixture, device_sync: DeviceSync) -> SynchronizedBenchmark:
        return SynchronizedBenchmark.adopt(benchmark, device_sync)


_SYNC = pytest.StashKey[DeviceSync]()


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("benchmark"):
        raise pytest.UsageError("icoforge.bench.device_sync wraps pytest-benchmark's fixture, and pytest-benchmark is disabled (-p no:benchmark?)")
    config.stash[_SYNC] = resolve(config.getoption("--device-sync"))
    config.pluginmanager.register(_Fixtures(), "icoforge-device-sync-fixtures")


def pytest_report_header(config: pytest.Config) -> str:
    return f"icoforge device sync: {config.stash[_SYNC].name}"
