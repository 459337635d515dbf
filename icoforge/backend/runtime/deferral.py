"""The runtime's one question before it runs a program call: is a block recording calls?

Every icoforge program call (`gpu.bind_program`'s programs, the C++ target's in `workflow`) reads
`active()`. Inside a block that records calls (`substep.SubstepFusion`) it gets that recorder,
else None. A recorder has `defer(...)` (a GPU call, recorded instead of run) and `flush()` (a call
that cannot be deferred runs what was recorded first). The runtime knows only this module; the
fuser imports the runtime to compile what it composed. So each needs the other one way only.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Protocol


class Recorder(Protocol):
    def defer(self, program: Any, art: Any, runtime: Any, run: Callable[[], None], args: tuple, offset_provider: Any) -> None: ...

    def flush(self) -> None: ...


_ACTIVE: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("icoforge_substep", default=None)


def active() -> Recorder | None:
    """The recorder the current code runs under, if any (read by every program call)."""
    return _ACTIVE.get()


def start(recorder: Recorder) -> contextvars.Token:
    """Program calls of this context go to `recorder` until `stop(token)`."""
    return _ACTIVE.set(recorder)


def stop(token: contextvars.Token) -> None:
    _ACTIVE.reset(token)
