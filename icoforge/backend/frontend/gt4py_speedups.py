"""Faster GT4Py passes with the same results (issue 6: GT4Py's passes are most of a cold compile).

Profile of the 21 program variants of the R2B4/10 granule (2-core workstation, 2026-11-30): 453 s
in `apply_common_transforms`, a quarter of it type inference, most of the rest eve's generic tree
machinery; no pass can be dropped (the lowering needs each one's result). Fixes of GT4Py 1.2.1's
tree machinery, applied only while icoforge runs GT4Py's passes (`patched()` restores everything
afterwards, so a gtfn backend in the same process is untouched). The passes themselves are not
touched; each fix makes a piece of eve compute what it computed before, with less work:

1. `eve.NodeTranslator.generic_visit` deep-copies every leaf it rebuilds a node from (names,
   literal values, each node's `type` and `location`); immutable leaves are returned as they are.
2. `inference.infer(node, inplace=False)` rebuilds the tree (`SanitizeTypes`) and then deep-copies
   the fresh tree again; the second copy is skipped (inference runs in place on the fresh tree).
3. eve's validation of every node built (attrs field type checks; the symbol-reference check that
   walks the whole `itir.Program` each time one is built) is skipped; it only raises on invalid
   IR. Symbol tables (`annex.symtable`, which passes read) are still collected.

Fixes 4-7 (session 8; benchmarks/gt4py-passes-profile.md section 5) remove interpretive overhead
from what remained hot after 1-3: every one replaces a generic eve function by one that takes the
same branches in the same order and calls the same things (so results, side effects such as the
annexes a walk creates, and exceptions are the same), but looks up once per class, in a memo
keyed by the class's identity and built afresh for each `patched()` block, what the original
re-derives for every node (isinstance tests, singledispatch, the fields that hold symbol names):

4. `isinstance(x, C)` for an eve node class `C` goes through typing_extensions' Python
   `_ProtocolMeta.__instancecheck__`, which for a concrete (non-protocol) class only calls the
   Python `abc.ABCMeta.__instancecheck__`, which only calls the C `_abc_instancecheck`; the
   replacement calls `_abc_instancecheck` directly for such classes and the original otherwise
   (about 8 M checks per big program). Only for the checked typing_extensions (`_CHECKED_TE`).
5. Every `Lambda`/`Program` built collects its symbol table (`SymbolTableTrait.SymbolsCollector`,
   a NodeVisitor: dispatch + generic_visit + singledispatch for every value of the subtree). The
   replacement is the same walk as plain recursion: same values in the same order, the same
   `_NODE_SYMBOLS_`, duplicate-symbol error, `propagated_symbols` merge and stop at nested scopes,
   and it touches `node.annex` exactly where the collector does (it creates the annex). Since
   session 23 (gt4py_symbols.py) it skips values of classes that provably give nothing (None,
   strings, source locations, type specifications: two thirds of the values; on the predictor
   0.62 -> 0.43 s wall inside the early passes, medians of six interleaved process pairs).
6. `NodeTranslator.generic_visit`/`visit` and `NodeVisitor.generic_visit`: the branch a value takes
   (node, sequence/set, mapping, leaf: the same isinstance tests, which depend on the class only)
   and `trees.iter_children_values/items`' singledispatch are memoised per class; a node's fields
   are still read one at a time, each just before its child is visited, as the original's
   generator reads them; leaves still go through `copy.deepcopy` (fix 1's shim).
7. `symbol_ref_utils.CountSymbolRefs` (which `inline_lambda` and `MergeLet` call on every
   candidate; a third of all visits of the corrector's passes) walks its subtree as a NodeVisitor.
   Its `visit` becomes the same walk as recursion: the method each value dispatches to is resolved
   by NodeVisitor.visit's own steps (and cache), `visit_SymRef` counts into the same Counter in
   the same order, `visit_Lambda` deactivates the params, anything else visits the children; the
   PreserveLocationVisitor layer it skips does nothing for this visitor (every visit returns
   None). Subclasses and other keyword arguments take the original path.

Session 19 (benchmarks/gt4py-passes-profile.md section 6), on the early path's passes:

8. `ConstantFolding.apply` on a leaf node. Domain inference folds every range bound it unites
   (`domain_utils`), 5,852 calls on the predictor solver, 84 % of them on a bare literal, at about
   160 us each (a pass object, its fixed-point machinery, and `UndoCanonicalizeMinus` after it):
   the replacement rebuilds the leaf as both passes do (see `_constant_folding_patch`).
9. The cyclic garbage collector is paused inside the block: the passes allocate hundreds of
   thousands of tree nodes, and every full collection they trigger walks the whole process's heap
   (GT4Py, icon4py, NumPy) to free nothing the passes still need; about 0.7 of 5 CPU-s on the
   predictor solver. Collection resumes after the block, in the caller's state.

Checked for GT4Py 1.2.1 only (`applicable`): identical GTIR (`==` and `str`) and identical icoforge
kernel IR on all 21 program variants of the R2B4/10 granule; 1-3 made the passes 1.8x faster,
4-7 another ~1.3x on the solver variants (the critical path);
tests/backend/test_gt4py_speedups.py repeats the comparison on one program and compares the
symbol tables (fix 5) and symbol-reference counts (fix 7) node by node.
"""

from __future__ import annotations

import contextlib
import copy as _copy
import enum
import functools
import gc
import threading
import types
from collections.abc import Iterator

from icoforge.backend.frontend import gt4py_compat, gt4py_symbols

_lock = threading.Lock()
_active = threading.local()  # whether this thread is inside a patched() block (a nested one is a no-op)
_ABSENT = object()  # a patched attribute the owner did not define itself (inherited): deleted afterwards
CHECKED_GT4PY = gt4py_compat.CHECKED_GT4PY  # the patches reach into these versions' internals
_CHECKED_TE = ("4.16.0",)  # typing_extensions whose _ProtocolMeta.__instancecheck__ fix 4 was read against


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


@functools.cache
def _typing_extensions_version() -> str:
    from importlib import metadata

    return metadata.version("typing_extensions")


def _machinery_patches() -> list[tuple[object, str, object]]:
    """(owner, attribute, replacement) for fixes 4-7 (see the module docstring). Each replacement
    computes what the original computes; per-class facts the original looks up on every call are
    memoised (keyed by class identity) in memos built afresh for every `patched()` block."""
    kinds, kind_of = _node_kinds()
    return [
        *_count_refs_patch(kinds, kind_of),
        *_instancecheck_patch(),
        *gt4py_symbols.symbol_table_patch(),
        *_translator_patches(kinds, kind_of),
        *_constant_folding_patch(),
    ]


def _constant_folding_patch() -> list[tuple[object, str, object]]:
    """Fix 8: `ConstantFolding.apply` of a leaf (a literal, a symbol reference, an infinity or
    offset literal). Every rule of the pass and of its `UndoCanonicalizeMinus` matches calls only,
    so on a leaf both passes only rebuild it: a new node from the same field values, the location
    kept (PreserveLocationVisitor) and the annex's `type` and `domain` (their
    PRESERVED_ANNEX_ATTRS). The replacement builds that node directly; anything else, and
    subclasses, take the original path."""
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.transforms.constant_folding import ConstantFolding

    original = ConstantFolding.__dict__["apply"].__func__
    leaves = (itir.Literal, itir.SymRef, itir.InfinityLiteral, itir.OffsetLiteral)
    preserved = ("type", "domain")

    def apply(cls, node, enabled_transformations=None):
        if cls is not ConstantFolding or node.__class__ not in leaves:
            return original(cls, node, enabled_transformations)
        new = node.__class__(**dict(node.iter_children_items()))  # leaf values are immutable here
        if old_annex := getattr(node, "__node_annex__", None):  # as eve's _preserve_annex: the new
            new_annex = new.annex.__dict__  # node gets an annex (reading `annex` makes one), maybe empty
            for key in preserved:
                if key in old_annex.__dict__:
                    new_annex[key] = old_annex.__dict__[key]
        return new

    return [(ConstantFolding, "apply", classmethod(apply))]


def _node_kinds() -> tuple[dict[int, tuple], object]:
    """The memo of fixes 6 and 7: class -> the branch of NodeTranslator.generic_visit its nodes
    take, their fields and the children dispatchers."""
    import collections.abc

    from gt4py.eve import concepts, trees

    node_base = concepts.Node
    dispatch = trees.iter_children_values.dispatch
    node_items = concepts.Node.iter_children_items
    iter_items_dispatch = trees.iter_children_items.dispatch
    kinds: dict[int, tuple] = {}

    def kind_of(node) -> tuple:
        # (class, kind, fields): the branch of NodeTranslator.generic_visit the node takes, from the
        # same isinstance tests (which depend on the class only); kind 0 only when the class
        # iterates its children as eve.Node does
        cls = node.__class__
        if isinstance(node, node_base):
            kind = 0 if cls.iter_children_items is node_items else 4
        elif isinstance(node, (list, set, collections.abc.Set)) or (
            isinstance(node, collections.abc.Sequence) and not isinstance(node, (str, bytes, enum.Enum))
        ):
            kind = 1
        elif isinstance(node, (dict, collections.abc.Mapping)):
            kind = 2
        else:
            kind = 3
        entry = kinds[id(cls)] = (cls, kind, tuple(cls.__datamodel_fields__.keys()) if kind == 0 else (),
                                  dispatch(cls), iter_items_dispatch(cls))  # fmt: skip
        return entry

    return kinds, kind_of


def _instancecheck_patch() -> list[tuple[object, str, object]]:
    import abc

    import typing_extensions
    from gt4py.eve import concepts

    # --- 4. isinstance against eve's node classes (metaclass typing_extensions._ProtocolMeta) ---
    meta = type(concepts.Node)
    orig_instancecheck = meta.__dict__["__instancecheck__"]
    protocol = typing_extensions.Protocol
    # what abc.ABCMeta.__instancecheck__ returns (absent where abc falls back to _py_abc)
    abc_instancecheck = getattr(abc, "_abc_instancecheck", None)
    patch_instancecheck = (
        meta is getattr(typing_extensions, "_ProtocolMeta", None)
        and abc_instancecheck is not None
        and _typing_extensions_version() in _CHECKED_TE
    )

    def __instancecheck__(cls, instance):
        if cls is protocol or getattr(cls, "_is_protocol", False):
            return orig_instancecheck(cls, instance)
        return abc_instancecheck(cls, instance)  # the original's branch for a concrete class

    return [(meta, "__instancecheck__", __instancecheck__)] if patch_instancecheck else []


def _translator_patches(kinds: dict[int, tuple], kind_of) -> list[tuple[object, str, object]]:
    from gt4py.eve import concepts, visitors

    node_base = concepts.Node
    # --- 6. NodeTranslator.visit / generic_visit: the node-or-collection tests memoised per class ---
    translator = visitors.NodeTranslator
    orig_generic_visit = translator.__dict__["generic_visit"]
    nothing = visitors.NOTHING

    def generic_visit(self, node, **kwargs):
        memo = kwargs.get("__memo__", None)
        cls = node.__class__
        entry = kinds.get(id(cls))
        if entry is None or entry[0] is not cls:
            entry = kind_of(node)
        kind = entry[1]
        if kind == 0:
            children = {}
            for name in entry[2]:  # node.iter_children_items(), child by child as it does
                if (new_child := self.visit(getattr(node, name), **kwargs)) is not nothing:
                    children[name] = new_child
            new_node = cls(**children)
            if self.PRESERVED_ANNEX_ATTRS and getattr(node, "__node_annex__", None):
                self._preserve_annex(node, new_node)
            return new_node
        if kind == 1:
            return cls(
                new_child
                for child in entry[3](node)
                if (new_child := self.visit(child, **kwargs)) is not nothing
            )
        if kind == 2:
            return cls(
                {
                    name: new_child
                    for name, child in entry[4](node)
                    if (new_child := self.visit(child, **kwargs)) is not nothing
                }
            )
        if kind == 3:
            return visitors.copy.deepcopy(node, memo=memo)
        return orig_generic_visit(self, node, **kwargs)

    def visit(self, node, **kwargs):
        new_node = super(translator, self).visit(node, **kwargs)
        if self.PRESERVED_ANNEX_ATTRS and getattr(node, "__node_annex__", None):
            cls = node.__class__
            entry = kinds.get(id(cls))
            if entry is None or entry[0] is not cls:
                entry = kind_of(node)
            if entry[1] in (0, 4) and isinstance(new_node, node_base):
                self._preserve_annex(node, new_node)
        return new_node

    def visitor_generic_visit(self, node, **kwargs):
        cls = node.__class__
        entry = kinds.get(id(cls))
        if entry is None or entry[0] is not cls:
            entry = kind_of(node)
        for child in entry[3](node):  # trees.iter_children_values(node), dispatched as it does
            self.visit(child, **kwargs)
        return None

    return [
        (translator, "generic_visit", generic_visit),
        (translator, "visit", visit),
        (visitors.NodeVisitor, "generic_visit", visitor_generic_visit),
    ]


def _count_refs_patch(kinds: dict[int, tuple], kind_of) -> list[tuple[object, str, object]]:
    from gt4py.eve import concepts
    from gt4py.next.iterator.transforms import symbol_ref_utils

    # --- 7. CountSymbolRefs (symbol_ref_utils; a third of all visits): the same walk as recursion ---
    count_refs = symbol_ref_utils.CountSymbolRefs
    orig_count_visit = count_refs.visit  # inherited (PreserveLocationVisitor.visit): the fallback
    method_names: dict[int, tuple[type, str]] = {}

    def method_name(self, node) -> str:
        # the visitor method NodeVisitor.visit dispatches `node` to (the same steps, the same cache)
        node_class = node.__class__
        if (cache := self.__class__._node_visitor_cache_) is None or (
            visitor_name := cache.get(node_class, None)
        ) is None:
            node_class_name = getattr(node_class, "__datamodel_generic_name__", node_class.__name__)
            visitor_name = "visit_" + node_class_name
            if not hasattr(self, visitor_name):
                visitor_name = "generic_visit"
                if isinstance(node, concepts.Node):
                    for base_class in node_class.__mro__[1:-1]:
                        if "__datamodel_generic_name__" in base_class.__dict__:
                            node_class_name = base_class.__datamodel_generic_name__
                        else:
                            node_class_name = base_class.__name__
                        base_visitor_name = "visit_" + node_class_name
                        if hasattr(self, base_visitor_name):
                            visitor_name = base_visitor_name
                            break
                        if base_class is concepts.Node:
                            break
            if cache is not None:
                cache[node_class] = visitor_name
        return visitor_name

    def count_visit(self, node, **kwargs):
        # CountSymbolRefs.apply's `obj.visit(node, inactive_refs=...)`: PreserveLocationVisitor.visit
        # (a no-op here: every visit of this visitor returns None), then visit_SymRef (count),
        # visit_Lambda (params become inactive, then generic_visit) or generic_visit (children)
        if type(self) is not count_refs or kwargs.keys() != {"inactive_refs"}:
            return orig_count_visit(self, node, **kwargs)
        counts = self.ref_counts

        def walk(n, inactive_refs) -> None:
            cls = n.__class__
            entry = method_names.get(id(cls))
            if entry is None or entry[0] is not cls:
                entry = method_names[id(cls)] = (cls, method_name(self, n))
            name = entry[1]
            if name == "visit_SymRef":
                if n.id not in inactive_refs:
                    counts[n] += 1
                return
            if name == "visit_Lambda":
                inactive_refs = inactive_refs | {param.id for param in n.params}
            elif name != "generic_visit":
                getattr(self, name)(n, inactive_refs=inactive_refs)
                return
            entry = kinds.get(id(cls))
            if entry is None or entry[0] is not cls:
                entry = kind_of(n)
            for child in entry[3](n):  # generic_visit: trees.iter_children_values(n)
                walk(child, inactive_refs)

        walk(node, kwargs["inactive_refs"])
        return None

    return [(count_refs, "visit", count_visit)]


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """GT4Py's tree machinery patched for the block (module doc). Re-entrant: a block nested in
    another of the same thread runs under the outer one's patches (no second save and restore, no
    deadlock on `_lock`)."""
    if getattr(_active, "on", False):
        yield
        return
    _active.on = True
    try:
        with _patches_on():
            yield
    finally:
        _active.on = False


@contextlib.contextmanager
def _patches_on() -> Iterator[None]:
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
        machinery = _machinery_patches()
        saved_machinery = [(owner, name, owner.__dict__.get(name, _ABSENT)) for owner, name, _ in machinery]
        gc_was_enabled = gc.isenabled()
        try:
            for owner, name, new in machinery:
                setattr(owner, name, new)
            visitors.copy = types.SimpleNamespace(deepcopy=_leaf_copy_factory())
            inference.ITIRTypeInference.apply = classmethod(apply)
            inference.infer = pass_manager.infer = inference.ITIRTypeInference.apply
            attr.set_run_validators(False)
            gc.disable()  # fix 9 (the blocks are serialised by _lock, so the state restored is the caller's)
            yield
        finally:
            if gc_was_enabled:
                gc.enable()
            for owner, name, old in saved_machinery:
                if old is _ABSENT:
                    delattr(owner, name)
                else:
                    setattr(owner, name, old)
            attr.set_run_validators(saved_validators)
            for cls, old in post_inits.items():
                if old is None:
                    del cls.__attrs_post_init__
                else:
                    cls.__attrs_post_init__ = old
            visitors.copy, inference.infer, pass_manager.infer = saved_copy, saved_infer, saved_pm_infer
            inference.ITIRTypeInference.apply = saved_apply
