"""Faster GT4Py passes with the same results (issue 6: GT4Py's passes are most of a cold compile).

Profile of the 21 program variants of the R2B4/10 granule (2-core workstation, 2026-11-30): 453 s
in `apply_common_transforms`, a quarter of it type inference, most of the rest eve's generic tree
machinery; no pass can be dropped (the lowering needs each one's result). Three fixes of GT4Py 1.2.1's tree machinery, applied only while icoforge runs GT4Py's passes
(`patched()` restores everything afterwards, so a gtfn backend in the same process is untouched):

1. `eve.NodeTranslator.generic_visit` deep-copies every leaf it rebuilds a node from (names,
   literal values, each node's `type` and `location`); immutable leaves are returned as they are.
2. `inference.infer(node, inplace=False)` rebuilds the tree (`SanitizeTypes`) and then deep-copies
   the fresh tree again; the second copy is skipped (inference runs in place on the fresh tree).
3. eve's validation of every node built (attrs field type checks; the symbol-reference check that
   walks the whole `itir.Program` each time one is built) is skipped; it only raises on invalid
   IR. Symbol tables (`annex.symtable`, which passes read) are still collected.

Checked for GT4Py 1.2.1 only (`applicable`): identical GTIR (`==` and `str`) and identical icoforge
kernel IR on all 21 program variants of the R2B4/10 granule, 1.8x faster passes;
tests/backend/test_gt4py_speedups.py repeats the comparison on one program.
"""

from __future__ import annotations

import contextlib
import copy as _copy
import enum
import threading
import types
from collections.abc import Iterator

_lock = threading.Lock()
CHECKED_GT4PY = ("1.2.1",)  # the patches reach into these versions' internals


def applicable() -> bool:
    """The checked GT4Py, compiling in processes or serially: in GT4Py's thread mode another
    backend's passes could run in a thread while the patches are on, so they stay off then."""
    import gt4py
    from gt4py.next import config

    return gt4py.__version__ in CHECKED_GT4PY and config.BUILD_JOBS_MODE.name.lower() != "thread"


def _leaf_copy_factory():
    from gt4py.eve import concepts
    from gt4py.next.type_system import type_specifications as ts

    immutable = (str, int, float, bool, type(None), enum.Enum, bytes, ts.TypeSpec,
                 concepts.SourceLocation, concepts.SourceLocationGroup)  # fmt: skip

    def leaf_copy(x, memo=None):
        return x if isinstance(x, immutable) else _copy.deepcopy(x, memo=memo)

    return leaf_copy


@contextlib.contextmanager
def patched() -> Iterator[None]:
    import attr
    from gt4py.eve import visitors
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.transforms import pass_manager
    from gt4py.next.iterator.type_system import inference

    with _lock:
        saved_copy, saved_apply, saved_infer, saved_pm_infer = visitors.copy, inference.ITIRTypeInference.__dict__["apply"], inference.infer, pass_manager.infer
        saved_validators = attr.get_run_validators()
        orig_apply = saved_apply.__func__

        def apply(cls, node, *, offset_provider_type, inplace=False, allow_undeclared_symbols=False):
            return orig_apply(cls, node, offset_provider_type=offset_provider_type, inplace=True,
                              allow_undeclared_symbols=allow_undeclared_symbols)  # fmt: skip

        post_inits = {}
        for cls in {c for c in vars(itir).values() if isinstance(c, type) and hasattr(c, "__datamodel_root_validators__")}:
            keep = tuple(v for v in cls.__datamodel_root_validators__ if "_collect_symbol_names" in getattr(v, "__qualname__", ""))
            if not keep:
                continue
            has_post_init = hasattr(cls, "__post_init__")

            def post_init(self, _keep=keep, _has=has_post_init):
                for validator in _keep:
                    validator.__get__(self)(self)
                if _has:
                    self.__post_init__()

            post_inits[cls] = cls.__dict__.get("__attrs_post_init__")
            cls.__attrs_post_init__ = post_init
        try:
            visitors.copy = types.SimpleNamespace(deepcopy=_leaf_copy_factory())
            inference.ITIRTypeInference.apply = classmethod(apply)
            inference.infer = pass_manager.infer = inference.ITIRTypeInference.apply
            attr.set_run_validators(False)
            yield
        finally:
            attr.set_run_validators(saved_validators)
            for cls, old in post_inits.items():
                if old is None:
                    del cls.__attrs_post_init__
                else:
                    cls.__attrs_post_init__ = old
            visitors.copy, inference.infer, pass_manager.infer = saved_copy, saved_infer, saved_pm_infer
            inference.ITIRTypeInference.apply = saved_apply
