"""Program calls of a substep deferred and run as one program fused across programs (issue 17, step 4).

    fusion = SubstepFusion()
    for each substep:
        with fusion:
            solver.time_step(...)      # icon4py, unchanged

Inside the block every call of an icoforge GPU program (CUDA, HIP, or their CPU emulation) is
recorded, not run. When the block ends, the recorded calls run
* as one program that compose.py writes from them, fused by fuse.py across program boundaries,
  when the same sequence was seen before (same programs in the same order, the same buffers in
  the same views, the same integer and boolean scalars, the same offset provider): the signature.
  The first sight of a sequence runs it call by call (a sequence seen once is not worth a compile);
* call by call, in their order, otherwise: a new sequence, or one that cannot be composed
  (`refused` keeps the reason, e.g. two arguments over overlapping memory in different views).

Why deferring is safe, and where it is not. Deferring changes *when* a call runs, never what it
computes, as long as nothing outside icoforge reads or writes the calls' fields between them
inside the block. icon4py's `SolveNonhydro.time_step` (0.4.1) swaps state references between its
program calls and does no array work of its own, so a substep qualifies. What the block detects
and handles: a call of an icoforge program that cannot be deferred (the C++ target) runs the
recorded calls first, then itself; an exception inside the block runs the recorded calls before
it propagates (as if they had run at once). What it cannot see: host code or another backend's
program touching those fields inside the block. Such code must stay outside the block.

`check=True` proves each composed program once: its first run is compared, bit by bit, with the
calls run one by one from the same inputs (every buffer saved and restored); a difference raises.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from icoforge.backend import compose, ir
from icoforge.errors import IcoforgeError

_ACTIVE: contextvars.ContextVar[SubstepFusion | None] = contextvars.ContextVar("icoforge_substep", default=None)


def active() -> SubstepFusion | None:
    """The fusion block the current code runs in, if any (read by every program call)."""
    return _ACTIVE.get()


@dataclasses.dataclass
class _Call:
    program: Any  # the bound program (gpu.bind_program; its fingerprint is part of the signature)
    art: Any  # its GPUArtifact
    runtime: Any
    run: Callable[[], None]  # the call on its own, as it would have run without the block
    args: tuple
    offset_provider: Any


@dataclasses.dataclass
class _Entry:
    seen: int = 0
    composed: Any = None  # the composed program's callable
    composition: compose.Composition | None = None
    checked: bool = False
    refused: str | None = None  # why this sequence runs call by call


def _site(call: _Call) -> tuple[compose.CallSite, tuple]:
    """The call as compose.py takes it, and its part of the signature."""
    prog: ir.ProgramIR = call.art.program_ir
    rt = call.runtime
    buffers: list[Hashable | None] = []
    spans: list[tuple[int, int] | None] = []
    scalars: dict[str, Any] = {}
    ranges: dict[str, Any] = {}
    for p, a in zip(prog.params, call.args, strict=True):
        if isinstance(p, ir.FieldParam):
            view, rng = rt.field(a, len(p.dims), np.dtype(p.dtype).type)
            key = (tuple(int(x) for x in view), tuple(map(tuple, rng)), p.dtype)
            buffers.append(key)
            spans.append(rt.span(a))
            ranges[p.name] = tuple(map(tuple, rng))
        else:
            value = a.item() if hasattr(a, "item") else a
            buffers.append(None)
            spans.append(None)
            scalars[p.name] = value
    site = compose.CallSite(prog, tuple(buffers), tuple(spans), scalars, ranges)
    folded = tuple((p.name, scalars[p.name]) for p in prog.params if isinstance(p, ir.Param) and p.dtype in compose.FOLDED_DTYPES)
    return site, (call.program.icoforge_fingerprint, tuple(buffers), folded)


class SubstepFusion:
    """A `with` block whose icoforge GPU program calls run as one fused program (module doc).

    `schedule`: the composed programs' schedule (None: the first call's vendor defaults, with
    fusion on); `check`: compare each composed program's first run with the calls one by one."""

    def __init__(self, schedule: Any = None, check: bool = False, name: str = "substep"):
        self.schedule = schedule
        self.check = check
        self.name = name
        self.refused: list[str] = []  # why sequences seen twice still run call by call
        self.runs = {"composed": 0, "one_by_one": 0}
        self._entries: dict[tuple, _Entry] = {}
        self._calls: list[_Call] = []
        self._token: contextvars.Token | None = None

    # -- the block -----------------------------------------------------------------------------

    def __enter__(self) -> SubstepFusion:
        if self._token is not None:
            raise IcoforgeError("SubstepFusion: blocks of one fusion object do not nest")
        self._calls = []
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _ACTIVE.reset(self._token)
        self._token = None
        calls, self._calls = self._calls, []
        if exc_type is not None:
            self._one_by_one(calls)
            return
        self._finish(calls)

    def defer(self, program: Any, art: Any, runtime: Any, run: Callable[[], None], args: tuple, offset_provider: Any) -> None:
        """Record one call (gpu.bind_program's callables call this inside a block)."""
        self._calls.append(_Call(program, art, runtime, run, args, offset_provider))

    def flush(self) -> None:
        """Run what is recorded so far, call by call (before a call that cannot be deferred)."""
        calls, self._calls = self._calls, []
        self._one_by_one(calls)

    # -- running -------------------------------------------------------------------------------

    def _one_by_one(self, calls: list[_Call]) -> None:
        for c in calls:
            c.run()
        if calls:
            self.runs["one_by_one"] += 1

    def _finish(self, calls: list[_Call]) -> None:
        if not calls:
            return
        sites, parts = zip(*(_site(c) for c in calls))
        entry = self._entries.setdefault((id(calls[0].offset_provider), *parts), _Entry())
        entry.seen += 1
        if entry.seen == 1 and entry.refused is None and any(c.offset_provider is not calls[0].offset_provider for c in calls):
            entry.refused = "the calls have different offset providers"
        if entry.seen == 1 or entry.refused is not None:
            self._one_by_one(calls)
            return
        if entry.composed is None:
            try:
                entry.composition = compose.compose(sites, self.name)
            except compose.CompositionError as err:
                entry.refused = str(err)
                self.refused.append(entry.refused)
                self._one_by_one(calls)
                return
            entry.composed = self._load(entry.composition.program, calls[0])
        args = tuple(calls[c].args[pos] for c, pos in entry.composition.sources)
        if self.check and not entry.checked:
            self._checked_run(entry, calls, args)
        else:
            entry.composed(*args, offset_provider=calls[0].offset_provider)
        self.runs["composed"] += 1

    def _load(self, program: ir.ProgramIR, first: _Call) -> Any:
        from icoforge.backend.emulate import EmulatedRuntime, load_emulated
        from icoforge.backend.gpu import gpu_artifact
        from icoforge.backend.schedule import VENDOR_DEFAULTS, ProgramSchedule

        vendor = first.art.vendor
        schedule = self.schedule or ProgramSchedule(default=VENDOR_DEFAULTS[vendor], fuse=(self.name,))
        art = gpu_artifact(program, vendor, schedule)
        return load_emulated(art) if isinstance(first.runtime, EmulatedRuntime) else art.load()

    def _checked_run(self, entry: _Entry, calls: list[_Call], args: tuple) -> None:
        """The composed run, proven against the calls one by one on the same inputs."""
        xp = calls[0].runtime.cp
        fields = [a for a, p in zip(args, entry.composition.program.params) if isinstance(p, ir.FieldParam)]
        arrays = [getattr(f, "ndarray", f) for f in fields]
        before = [xp.array(a, copy=True) for a in arrays]
        for c in calls:
            c.run()
        expected = [xp.array(a, copy=True) for a in arrays]
        for a, b in zip(arrays, before):
            a[...] = b
        entry.composed(*args, offset_provider=calls[0].offset_provider)
        for p, a, e in zip((p for p in entry.composition.program.params if isinstance(p, ir.FieldParam)), arrays, expected):
            got, want = (x.view(np.dtype(f"u{x.dtype.itemsize}")) for x in (a, e))
            if not bool((got == want).all()):
                raise IcoforgeError(f"{self.name}: the composed program differs from the calls one by one in {p.name}")
        entry.checked = True
