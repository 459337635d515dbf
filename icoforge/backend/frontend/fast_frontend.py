"""GT4Py's front end as icoforge's backends run it: `gt4py.next.backend.Transforms` (DSL -> PAST ->
GTIR, in the main process while icon4py constructs its granules) with the same steps and results,
and less repeated work (issue 47 item 5: GT4Py's Python was 15.5 of the 20.3 s of construction in
the R2B6/80 cold compile of session 37).

Where the time went (the R2B3/10 dycore granule, 21 variants of 16 programs, icoforge-cpu with its
translations cached, this 2-core VM): construction 10.3-10.9 s, of which GT4Py's in-memory caches
of the front-end steps spent about half computing their keys. Each lookup fingerprints its whole
input again (a DSL or PAST definition with the source code of every function it reaches, read with
`inspect`), and icon4py looks the same definitions up many times: `with_backend`,
`with_compilation_options`, the lint and each variant (118 lookups of 16 PAST definitions).

1. **Keys**: the CachedSteps' fingerprinter here computes the fingerprint of a definition stage or a
   function once per object and reuses it while the object lives (the memo holds the object, so its
   `id` is not reused). GT4Py treats these objects as immutable itself (a program computes its PAST
   stage once and keeps it). The keys are other strings than GT4Py's (a stage is hashed as its memoized
   digest), equal where GT4Py's are equal; they only name entries of these in-memory caches.
   Neighbour tables likewise (`connectivity_types`): every key holds the offset provider.
2. **GTIR built with the fast tree machinery**: `past_to_itir` runs inside `gt4py_speedups.patched()`
   (the fixes checked on GT4Py's passes; identical GTIR: tests/backend/test_fast_frontend.py). The
   other steps stay plain: fix 5 fails on FOAST (icon4py's `_scale_k`, "Undeclared symbol").

Both together: construction 7.8-8.8 s in the measurement above. Off with ICOFORGE_FAST_PASSES=0 or
a GT4Py other than the checked one (`gt4py_speedups.applicable`): then GT4Py's DEFAULT_TRANSFORMS.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import types
from typing import Any

from icoforge import settings
from icoforge.backend.frontend import gt4py_speedups

_MEMO_MARK = b"icoforge-memo\0"


def memoizing_fingerprinter(base: Any, memo_types: tuple[type, ...], exact_types: frozenset[type] = frozenset()) -> Any:
    """`base` (a GT4Py fingerprinter: `catabolize` with a deconstructor and an aggregator) with the
    fingerprint of every object of `memo_types` (or of exactly a type in `exact_types`: classes
    whose isinstance check is slow, such as GT4Py's protocol-derived fields) computed once per
    object and reused."""
    from gt4py.next import fingerprinting as fp

    deconstruct_plain, aggregate = base.keywords["deconstructor"], base.keywords["aggregator"]
    cycles = base.keywords.get("allow_cycles", False)  # as `base` walks (catabolize's default: no)
    memo: dict[int, tuple[Any, str]] = {}  # id -> (the object, kept alive; its digest)
    expanding: list[Any] = []  # the objects being fingerprinted in full, innermost last
    lock = threading.Lock()

    def deconstruct(obj: Any) -> Any:
        # an object being expanded (the walk's own start, or a cycle back to one): plainly, so that
        # catabolize's cycle handling sees it; a key so computed may differ from a later one of the
        # same content (a cache miss, never a wrong hit: different content, different digest)
        if not (isinstance(obj, memo_types) or type(obj) in exact_types) or any(obj is e for e in expanding):
            return deconstruct_plain(obj)
        hit = memo.get(id(obj))
        if hit is None or hit[0] is not obj:
            expanding.append(obj)
            try:
                digest = fp.catabolize(obj, deconstructor=deconstruct, aggregator=aggregate, allow_cycles=cycles)
            finally:
                expanding.pop()
            hit = memo[id(obj)] = (obj, digest)
        return fp.EmptyDeconstruction(_MEMO_MARK + hit[1].encode())

    def fingerprint(obj: Any) -> str:
        with lock:  # `expanding` is the walk's state
            return fp.catabolize(obj, deconstructor=deconstruct, aggregator=aggregate, allow_cycles=cycles)

    return fingerprint


@dataclasses.dataclass(frozen=True)
class InPatchedMachinery:
    """A workflow step run inside `gt4py_speedups.patched()` (which is re-entrant)."""

    step: Any

    def __call__(self, inp: Any) -> Any:
        # GT4Py compiling in threads now: another backend's passes could run beside, so plain
        if not gt4py_speedups.applicable():
            return self.step(inp)
        with gt4py_speedups.patched():
            return self.step(inp)


def _with_fingerprinter(step: Any, old: Any, new: Any) -> Any:
    """`step` rebuilt with every CachedStep that fingerprints with `old` fingerprinting with `new`."""
    from gt4py.next.otf import workflow

    if isinstance(step, workflow.CachedStep):
        printer = new if step.input_fingerprinter is old else step.input_fingerprinter
        return dataclasses.replace(step, step=_with_fingerprinter(step.step, old, new), input_fingerprinter=printer)
    if not dataclasses.is_dataclass(step) or isinstance(step, type):
        return step
    changed = {}
    for f in dataclasses.fields(step):
        if f.init and (v := getattr(step, f.name)) is not (w := _with_fingerprinter(v, old, new)):
            changed[f.name] = w
    return dataclasses.replace(step, **changed) if changed else step


def connectivity_types() -> frozenset[type]:
    """GT4Py's neighbour-table classes. Every front-end step's key holds the program's compile-time
    arguments, the offset provider with it: with these memoized, each table is hashed once per
    object instead of once per key (R2B3/10 dycore granule: 42 keys over 48 MB of tables; a CuPy
    table is first copied to the host). Tables are not changed after the grid is built, and
    nothing the front end makes depends on their contents."""
    from gt4py.next.embedded import nd_array_field as nd

    return frozenset(c for c in vars(nd).values() if isinstance(c, type) and issubclass(c, nd.NdArrayConnectivityField))


@functools.cache
def _fast_transforms() -> Any:
    from gt4py.next import backend as gt_backend
    from gt4py.next.ffront import stages

    memo_types = (stages.DSLProgramDef, stages.PASTProgramDef, stages.DSLFieldOperatorDef,
                  stages.FOASTOperatorDef, types.FunctionType)  # fmt: skip
    old = stages.semantic_fingerprinter
    new = memoizing_fingerprinter(old, memo_types, connectivity_types())
    fresh = gt_backend.Transforms()  # its own caches, apart from DEFAULT_TRANSFORMS'
    steps = {f.name: _with_fingerprinter(getattr(fresh, f.name), old, new) for f in dataclasses.fields(fresh)}
    steps["past_to_itir"] = InPatchedMachinery(steps["past_to_itir"])
    return gt_backend.Transforms(**steps)


def transforms() -> Any:
    """The `transforms` of icoforge's GT4Py backends (module doc); one per process, shared."""
    from gt4py.next import backend as gt_backend

    if not settings.current().fast_passes or not gt4py_speedups.applicable():
        return gt_backend.DEFAULT_TRANSFORMS
    return _fast_transforms()


def same_results(a: Any, b: Any) -> bool:
    """Whether two backends' front ends give their executors the same input: equal ones, or GT4Py's
    DEFAULT_TRANSFORMS and this module's (identical results, only faster)."""
    from gt4py.next import backend as gt_backend

    def default_or_ours(t: Any) -> bool:
        return t is gt_backend.DEFAULT_TRANSFORMS or isinstance(getattr(t, "past_to_itir", None), InPatchedMachinery)

    return a == b or (default_or_ours(a) and default_or_ours(b))
