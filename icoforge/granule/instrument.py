"""Per-program timing inside one SolveNonhydro step, and what each program compiled to.

icon4py binds every GT4Py program of `SolveNonhydro` and its `VelocityAdvection` once, at
construction, as a `functools.partial` around a compiled `Program` (icon4py's `setup_program`).
`find_programs` lists those attributes; `Profiler` swaps each for a wrapper that synchronises the
device, times the call and synchronises again, and swaps the originals back afterwards -- the
step-time measurement runs without wrappers, the per-program table with them (on a GPU the extra
synchronisation per call costs a little; the table reports the instrumented step total it is a
share of).

GT4Py's own metrics collection (`gt4py.next.instrumentation.metrics`, GT4PY_COLLECT_METRICS_LEVEL)
records a "compute" time only for backends that measure it themselves; the wrapper gives one
definition for every backend, ours included.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from icoforge.backend.codegen.cuda import WIDE_SUFFIX


@dataclasses.dataclass(frozen=True)
class BoundProgram:
    owner: Any  # SolveNonhydro or VelocityAdvection
    attr: str
    name: str  # the GT4Py program's name
    partial: functools.partial


def _program_name(program: Any) -> str | None:
    try:
        return program.definition_stage.definition.__name__
    except AttributeError:
        return None


def find_programs(solver: Any) -> list[BoundProgram]:
    """The GT4Py programs bound on `solver` and its velocity advection, in attribute order."""
    out: list[BoundProgram] = []
    for owner in (solver, getattr(solver, "velocity_advection", None)):
        if owner is None:
            continue
        for attr, value in vars(owner).items():
            if isinstance(value, functools.partial):
                name = _program_name(value.func)
                if name is not None:
                    out.append(BoundProgram(owner, attr, name, value))
    return out


def loaded_variants(bound: BoundProgram) -> list[Any]:
    """The loaded callables of the program's compiled variants (those called so far)."""
    pool = getattr(bound.partial.func, "__dict__", {}).get("_compiled_programs")
    if pool is None:
        return []
    return list(getattr(pool, "compiled_programs", {}).values())


def kernel_count(callable_: Any) -> int | None:
    """Kernels in an icoforge-compiled program (None for other backends)."""
    artifact = getattr(callable_, "icoforge_artifact", None)
    if artifact is None:
        return None
    names = getattr(artifact, "kernel_names", None)  # GPU artifact
    if names is not None:
        return len([n for n in names if not n.endswith(WIDE_SUFFIX)])  # not the 64-bit twins
    module_path = getattr(artifact, "module_path", None)  # CPU artifact: the source's header
    if module_path is None:
        return None
    src = pathlib.Path(module_path).parent / f"{artifact.module_name}.cpp"
    try:
        with open(src) as f:
            for line in f:
                if line.startswith("// Kernels:"):
                    listed = line.split(":", 1)[1].strip()
                    return len([k for k in listed.split(",") if k.strip()])
    except OSError:
        return None
    return None


def compile_seconds(callable_: Any) -> float | None:
    """icoforge backends: seconds the program's translation and build took in this run (GT4Py's
    passes are nearly all of a cold compile; a warm one reads them from the cache)."""
    artifact = getattr(callable_, "icoforge_artifact", None)
    if artifact is None:
        return None
    timings = dict(getattr(artifact, "timings", ()))
    return timings.get("translate", 0.0) + timings.get("build", 0.0)


def program_compile_seconds(bound: BoundProgram) -> float | None:
    values = [c for c in (compile_seconds(v) for v in loaded_variants(bound)) if c is not None]
    return sum(values) if values else None


def program_kernels(bound: BoundProgram) -> int | None:
    counts = [c for c in (kernel_count(v) for v in loaded_variants(bound)) if c is not None]
    return max(counts) if counts else None


@dataclasses.dataclass
class ProgramTimes:
    name: str
    attr: str
    seconds: list[float] = dataclasses.field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.seconds)

    @property
    def total(self) -> float:
        return sum(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else 0.0


class Profiler:
    """Context manager: while active, every bound program call is timed (with device syncs)."""

    def __init__(self, solver: Any, sync: Callable[[], None]):
        self.programs = find_programs(solver)
        self.sync = sync
        self.times: dict[str, ProgramTimes] = {}
        self._names = self._display_names()

    def _display_names(self) -> dict[tuple[int, str], str]:
        # A program bound twice (e.g. with other ranges) is told apart by its attribute.
        counts: dict[str, int] = {}
        for b in self.programs:
            counts[b.name] = counts.get(b.name, 0) + 1
        return {
            (id(b.owner), b.attr): b.name if counts[b.name] == 1 else f"{b.name} ({b.attr.lstrip('_')})"
            for b in self.programs
        }

    def _wrap(self, b: BoundProgram) -> Callable[..., Any]:
        name = self._names[(id(b.owner), b.attr)]
        record = self.times.setdefault(name, ProgramTimes(name, b.attr))
        inner, sync, clock = b.partial, self.sync, time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            sync()
            t0 = clock()
            result = inner(*args, **kwargs)
            sync()
            record.seconds.append(clock() - t0)
            return result

        return timed

    def __enter__(self) -> Profiler:
        for b in self.programs:
            setattr(b.owner, b.attr, self._wrap(b))
        return self

    def __exit__(self, *exc: Any) -> None:
        for b in self.programs:
            setattr(b.owner, b.attr, b.partial)

    def kernels(self) -> dict[str, int | None]:
        return {self._names[(id(b.owner), b.attr)]: program_kernels(b) for b in self.programs}

    def compile_seconds(self) -> dict[str, float | None]:
        return {self._names[(id(b.owner), b.attr)]: program_compile_seconds(b) for b in self.programs}
