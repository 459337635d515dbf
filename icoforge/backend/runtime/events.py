"""Device time from CUDA/HIP events, taken one way by every timer of the lab: the per-kernel
timers (`perf.timing.KernelTimer`, through the runtime's launch observers) and the per-program
ones (`granule.instrument.Profiler`, `DeviceBusy`).

An `EventClock` makes pairs of events and reads the interval between them once the device was
synchronised; `record_around` records a pair on a stream just before and just after a call, so
the events bracket the work the call queues there (and only that: nothing is done between the
records but the call). CuPy is imported only by `cupy_event_clock`; any module with CuPy's
`cuda.Event` and `cuda.get_elapsed_time` (a test's fake) serves `event_clock`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class EventClock:
    """Device time from pairs of events: `make()` gives a (start, end) pair to record around work,
    `seconds(start, end)` reads the interval once the device was synchronised."""

    make: Callable[[], tuple[Any, Any]]
    seconds: Callable[[Any, Any], float]


def event_clock(cp: Any) -> EventClock:
    """Events of the array module `cp` (CuPy; `Runtime.cp` on a GPU): milliseconds read as seconds."""
    cuda = cp.cuda
    return EventClock(make=lambda: (cuda.Event(), cuda.Event()), seconds=lambda s, e: cuda.get_elapsed_time(s, e) * 1e-3)


def cupy_event_clock() -> EventClock:
    import cupy as cp

    return event_clock(cp)


def record_around(pair: tuple[Any, Any], stream: Any, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)` between the events of `pair`, recorded on `stream` (None: the current
    stream); returns what the call returns."""
    start, end = pair
    start.record(stream)
    result = call(*args, **kwargs)
    end.record(stream)
    return result


__all__ = ["EventClock", "cupy_event_clock", "event_clock", "record_around"]
