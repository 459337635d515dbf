"""Program calls of a substep deferred and run as one program fused across programs (issue 17, step 4).

    fusion = SubstepFusion()
    for each substep:
        with fusion:
            solver.time_step(...)      # icon4py, unchanged

Inside the block every call of an icoforge GPU program (CUDA, HIP, or their CPU emulation) is
recorded, not run. When the block ends, the recorded calls run
* as one program that compose.py writes from them, fused by fuse.py across program boundaries,
  once the same sequence has been seen `after` times before (same programs in the same order, the
  same buffers in the same views, the same integer and boolean scalars, the same offset provider:
  the signature). Until then it runs call by call: by default (`after=1`) the first sight, since a
  sequence seen once is not worth a compile; `after=0` composes at once;
* call by call, in their order, otherwise: a new sequence, or one that cannot be composed
  (`refused` keeps the reason, e.g. fusion reordered accesses of two arguments whose memory
  overlaps in different views).

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

import collections
import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from icoforge.backend.ir import ir
from icoforge.backend.runtime import compose, deferral
from icoforge.backend.runtime.emulate import EmulatedRuntime, load_emulated
from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.schedule.schedule import default_program_schedule
from icoforge.errors import IcoforgeError

_KNOWN_BLOCKS = 32  # block identities remembered (a dycore step has 5 substeps of 2-3 kinds)

@dataclasses.dataclass
class _Call:
    program: Any  # the bound program (gpu.bind_program; its fingerprint is part of the signature)
    art: Any  # its GPUArtifact
    runtime: Any
    run: Callable[[], None]  # the call on its own, as it would have run without the block
    args: tuple
    offset_provider: Any


@dataclasses.dataclass(frozen=True)
class Sequence:
    """One composed sequence's last run, as byte models need it: each call's program (its IR as
    scheduled), arguments by parameter name and offset provider; the composed program after the
    fusion pass, with its arguments and offset provider."""

    calls: tuple[tuple[ir.ProgramIR, dict[str, Any], Any], ...]
    composed: ir.ProgramIR
    composed_args: dict[str, Any]
    tables: dict[str, Any]


@dataclasses.dataclass
class _Entry:
    seen: int = 0
    last: Sequence | None = None  # its first composed run's calls and arguments, for byte models
    composed: Any = None  # the composed program's callable
    composition: compose.Composition | None = None
    checked: bool = False
    refused: str | None = None  # why this sequence runs call by call


def _site(call: _Call) -> tuple[compose.CallSite, tuple]:
    """The call as compose.py takes it, and its part of the signature."""
    prog: ir.ProgramIR = call.art.program_ir
    rt = call.runtime
    views: list[compose.View | None] = []
    scalars: dict[str, Any] = {}
    for p, a in zip(prog.params, call.args, strict=True):
        if isinstance(p, ir.FieldParam):
            view, rng = rt.field(a, len(p.dims), np.dtype(p.dtype).type)
            views.append(compose.View(int(view[0]), tuple(int(s) for s in view[1:]), tuple(map(tuple, rng)), p.dtype, rt.span(a)))
        else:
            views.append(None)
            scalars[p.name] = a.item() if hasattr(a, "item") else a
    site = compose.CallSite(prog, tuple(views), scalars)
    folded = tuple((p.name, scalars[p.name]) for p in prog.params if isinstance(p, ir.Param) and p.dtype in compose.FOLDED_DTYPES)
    return site, (_fingerprint(call), tuple(views), folded)


def _fingerprint(call: _Call) -> str:
    """What the program's code is, whichever object holds it (sequences are keyed by it); computed
    once per bound program."""
    found = getattr(call.program, "icoforge_fingerprint", None)
    if found is None:
        art = call.art
        found = hashlib.sha256(f"{art.vendor}\0{art.host_plan}\0{art.module_source}".encode()).hexdigest()
        call.program.icoforge_fingerprint = found
    return found


def _identity(calls: list[_Call]) -> tuple[tuple, tuple]:
    """A cheap key of a block: each call's program code (its fingerprint, kept on the bound
    program), its field arguments and offset provider by identity, its integer and boolean scalars
    by value (float scalars stay parameters of the composed program); and the objects behind those
    identities, to hold while the key is kept (a held object's id cannot be reused). The same
    objects bind the same buffers in the same views, so a known identity has a known signature:
    `_site`, which reads every argument's view again (3.6 ms per 12-call block on the 2-core
    workstation), runs once per identity. (An offset provider changed in place would go unseen:
    icon4py builds them once.)"""
    key, held = [], []
    for c in calls:
        args = []
        for p, a in zip(c.art.program_ir.params, c.args, strict=True):
            if isinstance(p, ir.FieldParam):
                args.append(id(a))
                held.append(a)
            elif p.dtype in compose.FOLDED_DTYPES:
                args.append(a.item() if hasattr(a, "item") else a)
        key.append((_fingerprint(c), id(c.offset_provider), tuple(args)))
        held.append(c.offset_provider)
    return tuple(key), tuple(held)


def _tables(calls: list[_Call]) -> tuple[dict[str, Any], str | None]:
    """The connectivities the calls use, by name (the composed program's offset provider), and why
    they cannot be composed if two calls use different tables under one name. Programs get
    offset providers of their own (icon4py: a dict per program); the tables are what counts."""
    tables: dict[str, Any] = {}
    for c in calls:
        prog = c.art.program_ir
        for name in (*(t.name for t in prog.tables), *(tag for _, tag in prog.dim_size_tables)):
            table = c.offset_provider[name]
            if getattr(tables.setdefault(name, table), "ndarray", None) is not getattr(table, "ndarray", table):
                return tables, f"{prog.name}: connectivity {name} is another table than an earlier call's"
    return tables, None


class SubstepFusion:
    """A `with` block whose icoforge GPU program calls run as one fused program (module doc).

    `schedule`: the composed programs' schedule, fusion always on (None: the first call's vendor
    defaults; kernels are named `c<call>_...` there, so per-kernel entries of the programs'
    schedules do not apply); `check`: compare each composed program's first run with the calls one by one;
    `after`: sightings of a sequence run call by call before it is composed."""

    def __init__(self, schedule: Any = None, check: bool = False, name: str = "substep", after: int = 1):
        if after < 0:
            raise IcoforgeError(f"SubstepFusion: after must be 0 or more, got {after}")
        self.schedule = schedule
        self.check = check
        self.name = name
        self.after = after
        self.runs = {"composed": 0, "one_by_one": 0}
        self._entries: dict[tuple, _Entry] = {}
        # block identity -> (signature, sites, tables, clash, held objects); the last few only:
        # blocks whose fields are new objects every time would otherwise pile up here
        self._known: collections.OrderedDict[tuple, tuple] = collections.OrderedDict()
        self._calls: list[_Call] = []
        self._token: contextvars.Token | None = None

    @property
    def refused(self) -> list[str]:
        """Why sequences due to be composed still run call by call, one entry per sequence."""
        return [e.refused for e in self._entries.values() if e.refused is not None]

    # -- the block -----------------------------------------------------------------------------

    def __enter__(self) -> SubstepFusion:
        if self._token is not None:
            raise IcoforgeError("SubstepFusion: blocks of one fusion object do not nest")
        self._calls = []
        self._token = deferral.start(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        deferral.stop(self._token)
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
        identity, held = _identity(calls)
        known = self._known.get(identity)
        if known is None:
            sites, parts = zip(*(_site(c) for c in calls))
            tables, clash = _tables(calls)
            signature = (tuple((n, id(t.ndarray)) for n, t in sorted(tables.items())), *parts)
            known = self._known[identity] = (signature, sites, tables, clash, held)
            if len(self._known) > _KNOWN_BLOCKS:
                self._known.popitem(last=False)
        signature, sites, tables, clash, _ = known
        entry = self._entries.setdefault(signature, _Entry())
        entry.seen += 1
        if entry.seen > self.after and entry.composed is None and entry.refused is None:
            try:
                if clash:
                    raise compose.CompositionError(clash)
                entry.composition = compose.compose(sites, self.name)
                entry.composed = self._load(entry.composition, calls[0])
            except compose.CompositionError as err:
                entry.refused = str(err)
        if entry.composed is None:  # not yet due, or refused
            self._one_by_one(calls)
            return
        args = tuple(calls[c].args[pos] for c, pos in entry.composition.sources)
        if entry.last is None:  # once: the sequence's buffers and sizes do not change (its key)
            final = entry.composed.icoforge_artifact.program_ir
            entry.last = Sequence(
                tuple((c.art.program_ir, dict(zip((p.name for p in c.art.program_ir.params), c.args)), c.offset_provider) for c in calls),
                final, dict(zip((p.name for p in final.params), args)), tables,
            )  # fmt: skip
        if self.check and not entry.checked:
            self._checked_run(entry, calls, args, tables)
        else:
            entry.composed(*args, offset_provider=tables)
        self.runs["composed"] += 1

    def summary(self) -> dict[str, Any]:
        """What the block did so far: runs, refusals, and per composed sequence its programs and
        kernels before and after (what reports print)."""
        sequences = []
        for seq, e in zip(self.sequences(), (e for e in self._entries.values() if e.last is not None)):
            fused = [k.name for k in seq.composed.kernels()]
            sequences.append({
                "calls": len(seq.calls),
                "kernels_composed": len(e.composition.program.kernels()),
                "kernels_fused": len(fused),
                # c<call>_<kernel>, fused ones after their first member and the last names' kernel numbers
                "kernel_names": fused,
                "checked": e.checked,
            })  # fmt: skip
        return {"runs": dict(self.runs), "refused": list(self.refused), "sequences": sequences}

    def sequences(self) -> list[Sequence]:
        """Every sequence that ran composed (its first composed run), in the order of `summary()`."""
        return [e.last for e in self._entries.values() if e.last is not None]

    def _load(self, composition: compose.Composition, first: _Call) -> Any:
        vendor = first.art.vendor
        base = self.schedule or default_program_schedule(vendor)
        schedule = dataclasses.replace(base, fuse=(*base.fuse, self.name))  # fusion is the point
        art = gpu_artifact(composition.program, vendor, schedule)
        composition.check_order(art.program_ir)  # before compiling anything
        return load_emulated(art) if isinstance(first.runtime, EmulatedRuntime) else art.load()

    def _checked_run(self, entry: _Entry, calls: list[_Call], args: tuple, tables: dict[str, Any]) -> None:
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
        entry.composed(*args, offset_provider=tables)
        for p, a, e in zip((p for p in entry.composition.program.params if isinstance(p, ir.FieldParam)), arrays, expected):
            got, want = (x.view(np.dtype(f"u{x.dtype.itemsize}")) for x in (a, e))
            if not bool((got == want).all()):
                raise IcoforgeError(f"{self.name}: the composed program differs from the calls one by one in {p.name}")
        entry.checked = True
