"""Fix 5 of gt4py_speedups: the symbol table every `Lambda`/`Program` (any `SymbolTableTrait` node)
collects when it is built, as eve's `SymbolTableTrait.SymbolsCollector.apply` collects it.

The collector is a NodeVisitor: for every value of the node's scope (down to, not into, nested
scopes) it looks up the class's `_NODE_SYMBOLS_`, dispatches, and visits the value's children. On
the predictor solver (R2B4/80) that is 5,051 collections of ~377 k values, two thirds of them
leaves: None (118 k), names (56 k strings), type specifications (45 k), source locations (23 k).

The replacement is the same walk as plain recursion (session 8), and since session 23 it does not
take the collector's steps for a value that provably gives nothing there. Per class (decided once
per class and `patched()` block, `_leaf_kind`), a value that is not an eve node and whose class
has no `_NODE_SYMBOLS_` is
* a leaf if its children iterator (`trees.iter_children_values`' singledispatch) is empty for
  every instance: str/bytes and their subclasses (eve registers `iter(())` for them), and classes
  under the default dispatch (`iter_children_values()` if the value has that attribute, else
  `iter(())`) whose instances cannot have the attribute: none in the class's MRO, the generic
  `__getattribute__`, no `__getattr__`, and no instance `__dict__` (None, int, float, bool and the
  slotted `SourceLocation`);
* a dict leaf if the same holds except that instances have a `__dict__` (CPython's own): the type
  specifications, whose attribute lookup can then find `iter_children_values` only in the
  instance's `__dict__`, which is checked for each value (absent: a leaf; present: the
  collector's steps).
The collector's visit of a leaf only finds that its class has no `_NODE_SYMBOLS_`, dispatches to
`generic_visit` and iterates nothing: no symbol, no annex, no exception, so skipping it changes
nothing. Every other value takes the collector's steps in its order: the class's `_NODE_SYMBOLS_`,
then for a node its `SymbolName` fields (duplicate-symbol error), its annex (read, so created, as
`node.annex` does), the `propagated_symbols` merge or, if the node opens no scope, its fields one
at a time (`Node.iter_children_values`; a class that iterates otherwise goes through its own
iterator); for anything else its children. The per-class memo is keyed by `id(cls)` (eve's
metaclass hashes in Python): an entry holds its class, so no other class can have that id while
the entry exists.

On the predictor's early passes (R2B4/80, 2-core workstation): 0.62 -> 0.43 s wall in the
collection, medians of six interleaved process pairs (benchmarks/early-passes-profile-R2B4-80.md,
session 23); eve's own collector takes ~1.1-1.5 s on the same 5,051 nodes.
"""

from __future__ import annotations

import types

_LEAF, _NODE, _OTHER, _DICT_LEAF = 0, 1, 2, 3
_IMMUTABLE_BUILTINS = (type(None), int, float, bool, complex)  # no instance attributes, classes closed


def _in_mro(cls: type, name: str) -> bool:
    return any(name in vars(base) for base in cls.__mro__)


def _leaf_kind(cls: type, dispatch, str_values, default_values) -> int:
    """How the collector's visit of an instance of `cls` (not an eve node, no `_NODE_SYMBOLS_`)
    can be skipped (see the module docstring): _LEAF, no instance has children; _DICT_LEAF, an
    instance has children only if its own `__dict__` holds `iter_children_values`; _OTHER, not
    known (the collector's steps are taken)."""
    values = dispatch(cls)
    if values is str_values:  # eve's `lambda _: iter(())` for str and bytes
        return _LEAF
    if values is not default_values or _in_mro(cls, "iter_children_values"):
        return _OTHER
    if cls in _IMMUTABLE_BUILTINS:
        return _LEAF
    if cls.__getattribute__ is not object.__getattribute__ or _in_mro(cls, "__getattr__"):
        return _OTHER
    if cls.__dictoffset__ == 0:
        return _LEAF
    owner = next((base for base in cls.__mro__ if "__dict__" in vars(base)), None)
    # `obj.__dict__` is the dict the generic lookup searches only through CPython's own descriptor
    standard = owner is not None and isinstance(vars(owner)["__dict__"], types.GetSetDescriptorType)
    return _DICT_LEAF if standard else _OTHER


def _class_facts(facts: dict[int, tuple]):
    """The per-class memo's filler: for `cls`, (cls, kind, its SymbolName fields, its fields where
    it iterates them as eve.Node does (else None), opens a scope, `_NODE_SYMBOLS_` (else None),
    its children iterator (`trees.iter_children_values`' dispatch))."""
    from gt4py.eve import concepts, traits, trees

    symbol_name, node_base, scope = concepts.SymbolName, concepts.Node, traits.SymbolTableTrait
    dispatch = trees.iter_children_values.dispatch
    str_values, default_values = dispatch(str), dispatch(object)
    node_values = concepts.Node.iter_children_values

    def class_facts(cls: type) -> tuple:
        node_symbols = cls._NODE_SYMBOLS_ if hasattr(cls, "_NODE_SYMBOLS_") else None
        fields, names = None, ()
        if issubclass(cls, node_base):
            items = cls.__datamodel_fields__
            names = tuple(name for name, a in items.items() if isinstance(a.type, type) and issubclass(a.type, symbol_name))
            if dispatch(cls) is default_values and cls.iter_children_values is node_values:
                fields = tuple(items.keys())
            kind = _NODE
        else:
            kind = _leaf_kind(cls, dispatch, str_values, default_values) if node_symbols is None else _OTHER
        entry = facts[id(cls)] = (cls, kind, names, fields, issubclass(cls, scope), node_symbols, dispatch(cls))
        return entry

    return class_facts


def symbol_table_patch() -> list[tuple[object, str, object]]:
    """(SymbolsCollector, "apply", replacement): the collection without a visitor object."""
    from gt4py.eve import exceptions, traits

    collector = traits.SymbolTableTrait.SymbolsCollector
    facts: dict[int, tuple] = {}
    facts_get, class_facts = facts.get, _class_facts(facts)

    def visit_children(children, state) -> None:  # visit() of each child, leaves skipped
        for child in children:
            entry = facts_get(id(child.__class__)) or class_facts(child.__class__)
            if kind := entry[1]:
                if kind == _NODE:
                    visit_node(child, entry, state)
                elif kind == _OTHER or "iter_children_values" in child.__dict__:
                    visit_other(child, entry, state)

    def visit_node(n, entry, state) -> None:  # SymbolsCollector.visit of a node: visit_Node
        if entry[5] is not None:
            visit_children((entry[5],), state)
        collected = state[0]
        for name in entry[2]:
            symbol = getattr(n, name)
            if symbol in collected:
                raise exceptions.EveValueError(f"Multiple definitions of symbol '{symbol}'")
            collected[symbol] = n
        annex = n.annex
        if hasattr(annex, "propagated_symbols"):
            assert not set(collected.keys()) & set(annex.propagated_symbols.keys())
            state[0] = {**collected, **annex.propagated_symbols}
        elif not entry[4]:
            if (fields := entry[3]) is None:
                visit_children(entry[6](n), state)  # its generic_visit
                return
            # the same, Node.iter_children_values read one field at a time
            visit_children([getattr(n, name) for name in fields], state)

    def visit_other(n, entry, state) -> None:  # ... of anything else: generic_visit
        if entry[5] is not None:
            visit_children((entry[5],), state)
        visit_children(entry[6](n), state)

    def collect(node) -> dict:
        # collector.apply(node): _NODE_SYMBOLS_ of the root's class, then generic_visit of the root
        state = [{}]
        root = facts_get(id(node.__class__)) or class_facts(node.__class__)
        if root[5] is not None:
            visit_children((root[5],), state)
        visit_children(root[6](node), state)
        return state[0]

    orig_apply = collector.__dict__["apply"]

    def apply(cls, node):
        if cls is not collector:
            return orig_apply.__func__(cls, node)
        return collect(node)

    return [(collector, "apply", classmethod(apply))]

