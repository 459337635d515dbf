"""Backends for the granule: GT4Py's and ours by name, plus a fallback pair for icon4py's factories.

icon4py's geometry/interpolation/metric factories may use a GT4Py construct the icoforge backend
does not lower (until 2026-11-29: field operators writing tuples of fields; none in icon4py 0.4.1
since). `with_fallback("icoforge-cpu", "gtfn_cpu")` compiles every program with the first backend
and only those it rejects at translation time (`UnsupportedConstructError`, never wrong numbers)
with the second. Name such a pair "icoforge-cpu+gtfn_cpu" wherever a backend name is taken.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from icoforge.errors import IcoforgeError, UnknownNameError
from icoforge.suite import peers
from icoforge.suite.backends import EXTRA_BACKENDS, backend_names, get_backend, is_gpu_backend

# (program, reason) of every program loaded from the fallback backend in this process
FALLEN_BACK: list[tuple[str, str]] = []


@dataclasses.dataclass(frozen=True)
class FallbackArtifact:
    """The second backend's artifact, marked as such (the program name says which one fell back)."""

    artifact: Any
    program_name: str
    reason: str

    def load(self) -> Any:
        FALLEN_BACK.append((self.program_name, self.reason))  # load() runs in the main process
        return self.artifact.load()


@dataclasses.dataclass(frozen=True)
class FallbackExecutor:
    """Runs `primary`; on UnsupportedConstructError runs `fallback` (both GT4Py executors taking
    the same input, i.e. backends with the same transforms). Picklable, as GT4Py's worker
    processes need."""

    primary: Any
    fallback: Any

    def __call__(self, inp: Any) -> Any:
        from icoforge.errors import UnsupportedConstructError

        try:
            return self.primary(inp)
        except UnsupportedConstructError as e:
            name = getattr(getattr(inp, "data", None), "id", "?")
            return FallbackArtifact(self.fallback(inp), str(name), str(e).splitlines()[0])


@functools.cache
def with_fallback(primary_name: str, fallback_name: str) -> Any:
    from gt4py.next import backend as gt_backend

    from icoforge.backend.frontend import fast_frontend

    # icon4py's descriptors (the peer names) become a backend per program, which a pair of
    # executors cannot hold: the pair takes GT4Py's plain object for a peer name
    primary, fallback = (peers.plain(n) if peers.is_peer(n) else resolve_backend(n) for n in (primary_name, fallback_name))
    if primary is None or fallback is None:
        raise IcoforgeError("a fallback pair needs two compiled backends (not 'embedded')")
    if not fast_frontend.same_results(primary.transforms, fallback.transforms):
        raise IcoforgeError(f"{primary_name} and {fallback_name} prepare programs differently; no fallback pair")
    if is_gpu_backend(primary_name) != is_gpu_backend(fallback_name):
        raise IcoforgeError(f"{primary_name} and {fallback_name} run on different devices; no fallback pair")
    return gt_backend.Backend(
        name=f"{primary.name}+{fallback.name}",
        executor=FallbackExecutor(primary.executor, fallback.executor),
        allocator=primary.allocator,
        transforms=primary.transforms,
    )


def resolve_backend(name: str) -> Any:
    """`get_backend(name)`, also for "A+B" fallback pairs."""
    if "+" in name:
        a, b = name.split("+", 1)
        return with_fallback(a, b)
    return get_backend(name)


def is_gpu(name: str) -> bool:
    return any(is_gpu_backend(part) for part in name.split("+"))


def check_name(name: str) -> None:
    """Raise UnknownNameError for a misspelt backend (or part of a pair) before any work starts."""
    for part in name.split("+"):
        if part not in EXTRA_BACKENDS and part not in backend_names():
            raise UnknownNameError("backend", part, [*backend_names(), *EXTRA_BACKENDS])


__all__ = [
    "FallbackArtifact",
    "FallbackExecutor",
    "backend_names",
    "check_name",
    "is_gpu",
    "resolve_backend",
    "with_fallback",
]
