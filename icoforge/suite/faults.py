"""Test-only faults: they make a correct build give wrong results, run slow or crash, so that a test
can see a whole check fail end to end (tests/test_reframe_checks.py runs the ReFrame checks with
them). Never set them outside tests.

`ICOFORGE_TEST_FAULT` holds comma-separated faults; they act on the programs `icoforge run` and
`icoforge verify-all` run (icoforge.suite.runner.prepare), not on the granule:

- `wrong:BACKEND`        after every call on BACKEND one output value is changed (relative 1e-3);
- `slow:BACKEND:SECONDS` every call on BACKEND sleeps SECONDS first (inside the timed region);
- `crash`                the process kills itself with SIGSEGV when it exits (after its output).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np

ENV = "ICOFORGE_TEST_FAULT"
_crash_registered: list[bool] = []


def _faults() -> list[list[str]]:
    return [f.strip().split(":") for f in os.environ.get(ENV, "").split(",") if f.strip()]


def _change_one_value(array: Any) -> None:
    """Moves one finite value of an output (NumPy or CuPy) by 1e-3 relative: a wrong number where
    the program wrote one, which a comparison with another backend must catch."""
    if array.dtype.kind != "f" or array.size == 0:
        return
    host = np.asarray(array.get() if hasattr(array, "get") else array)
    finite = np.flatnonzero(np.isfinite(host))  # written points (the poison is a NaN)
    if finite.size == 0:
        return
    index = np.unravel_index(finite[finite.size // 2], host.shape)
    value = float(host[index])
    array[index] = value + 1e-3 * (abs(value) + 1.0)


def wrap(call: Callable[[dict[str, Any]], None], backend: str, outputs: tuple[str, ...]) -> Callable:
    """`call` with the faults ICOFORGE_TEST_FAULT names for `backend` (itself when none)."""
    faults = _faults()
    if ["crash"] in faults and not _crash_registered:
        _crash_registered.append(True)
        atexit.register(os.kill, os.getpid(), signal.SIGSEGV)
    wrong = ["wrong", backend] in faults
    delays = [float(f[2]) for f in faults if len(f) == 3 and f[0] == "slow" and f[1] == backend]
    if not wrong and not delays:
        return call

    def faulty(args: dict[str, Any]) -> None:
        for seconds in delays:
            time.sleep(seconds)
        call(args)
        if wrong:
            for name in outputs:
                _change_one_value(args[name].ndarray)

    return faulty
