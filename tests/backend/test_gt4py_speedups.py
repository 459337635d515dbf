"""The sped-up GT4Py passes (icoforge.backend.frontend.gt4py_speedups) give GT4Py's own result."""

from __future__ import annotations

import pytest
from gt4py.next.iterator.transforms import pass_manager

from icoforge.backend.frontend import gt4py_speedups
from icoforge.backend.runtime import workflow
from icoforge.backend.runtime.precompile import compilable_program
from icoforge.suite.catalogue import get_program


def gt4pys_passes(inp):
    """GT4Py's own pass list, unpatched, as its gtfn backend runs it."""
    return pass_manager.apply_common_transforms(
        inp.data, extract_temporaries=True, unroll_reduce=True, offset_provider=inp.args.offset_provider
    )


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_patched_passes_give_gt4pys_result(tiny_grid, monkeypatch):
    monkeypatch.delenv("ICOFORGE_FAST_PASSES", raising=False)
    monkeypatch.setenv("ICOFORGE_EARLY_GTIR", "0")  # GT4Py's full list, as `plain` runs it
    # a small program with a fusion loop: GT4Py's unpatched passes on the horizontal advection,
    # used before, took 129 s of this test's ~190 on 2 cores (hydrostatic correction: 34 s)
    inp = compilable_program(get_program("compute_hydrostatic_correction_term").program, tiny_grid.connectivities)
    plain = gt4pys_passes(inp)
    fast = workflow.gt4py_passes(inp.data, inp.args.offset_provider)
    assert fast == plain and str(fast) == str(plain)
    # everything is restored afterwards: GT4Py's validation runs again, its passes give the same
    import attr

    assert attr.get_run_validators()
    assert gt4pys_passes(inp) == plain


def test_patches_stay_off_when_gt4py_compiles_in_threads(monkeypatch):
    from gt4py.next import config

    monkeypatch.setattr(config, "BUILD_JOBS_MODE", config.BuildJobsMode.THREAD)
    assert not gt4py_speedups.applicable()


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_patched_symbol_tables_and_restore(tiny_grid):
    """Fix 5 (symbol tables without a visitor) gives eve's symbol table for every scope of a
    program: the same names in the same order, bound to the same nodes; fix 7 gives
    CountSymbolRefs' counts (same keys, same order, same SymRef nodes); and `patched()` puts back
    every function it replaced."""
    from gt4py.eve import concepts, visitors
    from gt4py.eve.traits import SymbolTableTrait
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.transforms.symbol_ref_utils import CountSymbolRefs

    inp = compilable_program(get_program("compute_advection_in_horizontal_momentum").program, tiny_grid.connectivities)
    scopes = inp.data.pre_walk_values().if_isinstance(SymbolTableTrait).to_list()
    assert len(scopes) > 10
    collector = SymbolTableTrait.SymbolsCollector
    plain = [collector.apply(node) for node in scopes]
    exprs = inp.data.pre_walk_values().if_isinstance(itir.Lambda, itir.FunCall).to_list()
    options = ({}, {"as_ref": True}, {"ignore_builtins": False})

    def ref_counts():
        return [list(CountSymbolRefs.apply(e, **kw).items()) for e in exprs for kw in options]

    plain_counts = ref_counts()
    replaced = [
        (type(concepts.Node), "__instancecheck__"), (collector, "apply"), (visitors.NodeTranslator, "generic_visit"),
        (visitors.NodeTranslator, "visit"), (visitors.NodeVisitor, "generic_visit"), (CountSymbolRefs, "visit"),
    ]  # fmt: skip
    before = [owner.__dict__.get(name) for owner, name in replaced]
    with gt4py_speedups.patched():
        assert collector.__dict__["apply"] is not before[1]
        fast = [collector.apply(node) for node in scopes]
        fast_counts = ref_counts()
    assert [owner.__dict__.get(name) for owner, name in replaced] == before
    for p, f in zip(plain, fast):
        assert list(p) == list(f)
        assert all(p[k] is f[k] for k in p)
    assert plain_counts == fast_counts
    for p, f in zip(plain_counts, fast_counts):
        assert all(kp is kf or isinstance(kp, str) for (kp, _), (kf, _) in zip(p, f))


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_patched_constant_folding_of_leaves_and_gc_pause():
    """Fix 8: ConstantFolding.apply on a leaf gives what GT4Py's pass gives (an equal new node,
    its location and the annex's type and domain kept, nothing else of the annex); calls still
    fold. Fix 9: the garbage collector is off inside the block and back in the caller's state."""
    import gc

    from gt4py.eve import concepts
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.ir_utils import ir_makers as im
    from gt4py.next.iterator.transforms.constant_folding import ConstantFolding

    where = concepts.SourceLocation(filename="f.py", line=3, column=1)
    leaves = [im.literal_from_value(5120), im.ref("horizontal_start", "int32"), itir.InfinityLiteral.POSITIVE,
              itir.OffsetLiteral(value="E2C"), itir.SymRef(id="nlev", location=where)]  # fmt: skip
    annotated = im.literal_from_value(7)
    annotated.annex.domain, annotated.annex.type, annotated.annex.other = "dom", "typ", "not kept"
    empty = im.literal_from_value(8)
    assert not vars(empty.annex)  # reading `annex` makes an empty one: the new node gets one too
    leaves += [annotated, empty]
    calls = [im.plus(im.plus("a", 1), 2), im.minimum(im.literal_from_value(3), im.literal_from_value(4))]

    def folded():
        out = []
        for node in [*leaves, *calls]:
            new = ConstantFolding.apply(node)
            out.append((new, str(new), new is node, getattr(new, "location", None), dict(vars(new.annex)) if hasattr(new, "__node_annex__") else None))
        return out

    plain = folded()
    before = ConstantFolding.__dict__["apply"]
    assert gc.isenabled()
    with gt4py_speedups.patched():
        assert not gc.isenabled()
        assert ConstantFolding.__dict__["apply"] is not before
        fast = folded()
    assert gc.isenabled() and ConstantFolding.__dict__["apply"] is before
    assert fast == plain
    assert plain[5][4] == {"domain": "dom", "type": "typ"} and plain[6][4] == {} and plain[4][3] == where  # exercised
    gc.disable()
    try:
        with gt4py_speedups.patched():
            pass
        assert not gc.isenabled()  # the caller's state, not "on"
    finally:
        gc.enable()


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_patched_is_reentrant():
    """A patched() block inside another (same thread) neither deadlocks on the module's lock nor
    restores GT4Py's machinery before the outer block ends."""
    import gc

    from gt4py.next.iterator.transforms.constant_folding import ConstantFolding

    before = ConstantFolding.__dict__["apply"]
    with gt4py_speedups.patched():
        inside = ConstantFolding.__dict__["apply"]
        with gt4py_speedups.patched():
            assert ConstantFolding.__dict__["apply"] is inside
        assert ConstantFolding.__dict__["apply"] is inside and not gc.isenabled()
    assert ConstantFolding.__dict__["apply"] is before and gc.isenabled()


def _annex_free_copy(tree):
    """A deep copy of `tree` whose nodes have no annex (as freshly built nodes, before any read)."""
    import copy

    from gt4py.eve import concepts

    new = copy.deepcopy(tree)
    for node in new.pre_walk_values().if_isinstance(concepts.Node):
        vars(node).pop("__node_annex__", None)
    return new


def _scope_tables(tree, table_of) -> tuple[list, list]:
    """For every scope of `tree` (pre-order) `table_of(scope)` as (name, bound node) pairs, a bound
    node of the tree given by its pre-order position (anything else as itself); and which nodes
    of the tree have an annex."""
    from gt4py.eve import concepts
    from gt4py.eve.traits import SymbolTableTrait

    nodes = tree.pre_walk_values().if_isinstance(concepts.Node).to_list()
    position = {id(node): i for i, node in enumerate(nodes)}
    tables = [
        [(name, position.get(id(bound), bound)) for name, bound in table_of(node).items()]
        for node in nodes
        if isinstance(node, SymbolTableTrait)
    ]
    return tables, ["__node_annex__" in vars(node) for node in nodes]


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_symbol_tables_of_every_scope_after_the_early_passes(tiny_grid):
    """Fix 5 (gt4py_symbols.py, leaves skipped) on every scope of the predictor solver before and
    after the early passes (temporaries, SetAt, domains, nested lets): eve's table on each, the
    same names in the same order bound to the same nodes, and the same nodes given an annex (the
    collection reads `node.annex`, which creates it) when collected on annex-free copies."""
    from icoforge.backend.frontend import gt4py_early
    from gt4py.eve.traits import SymbolTableTrait

    collector = SymbolTableTrait.SymbolsCollector
    inp = compilable_program(get_program("vertically_implicit_solver_at_predictor_step").program, tiny_grid.connectivities)
    with gt4py_speedups.patched():
        after = gt4py_early.early_transforms(inp.data, inp.args.offset_provider)
    for tree in (inp.data, after):
        plain = _scope_tables(_annex_free_copy(tree), collector.apply)
        with gt4py_speedups.patched():
            fast = _scope_tables(_annex_free_copy(tree), collector.apply)
        assert len(plain[0]) > 100 and any(plain[1]) and not all(plain[1])  # exercised
        assert fast == plain


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_symbol_table_edge_cases():
    """What the predictor's trees never hold, collected as eve does: a duplicate symbol (same error),
    symbols an annex propagates, a type specification whose own `__dict__` gives it children (a
    "dict leaf" then takes the collector's steps), a Program's builtin symbols; and which classes
    are skipped as leaves."""
    from gt4py.eve import concepts, exceptions, trees
    from gt4py.eve.traits import SymbolTableTrait
    from gt4py.next.iterator import ir as itir
    from gt4py.next.iterator.ir_utils import ir_makers as im
    from gt4py.next.type_system import type_specifications as ts

    from icoforge.backend.frontend import gt4py_symbols as sym

    collector = SymbolTableTrait.SymbolsCollector
    dup = itir.Lambda(params=[im.sym("x")], expr=im.call(im.lambda_("y")("y"))(im.ref("x")))
    dup.expr.args[0].annex.propagated_symbols = {"z": im.sym("z")}  # a SymRef propagating a symbol
    hidden, own_type = im.sym("hidden"), ts.ScalarType(kind=ts.ScalarKind.FLOAT64)
    object.__setattr__(own_type, "iter_children_values", lambda: iter([hidden]))
    with_type = itir.Lambda(params=[im.sym("x")], expr=im.plus(itir.SymRef(id="x", type=own_type), 1))
    bad = itir.Lambda(params=[im.sym("x")], expr=im.ref("x"))
    bad.params.append(im.sym("x"))  # after construction (which collects, and would raise)
    program = itir.Program(id="p", function_definitions=[], params=[im.sym("a")], declarations=[], body=[])

    def outcomes():
        out = []
        for node in (dup, with_type, bad, program):
            try:
                out.append([(k, v) for k, v in collector.apply(node).items()])
            except exceptions.EveValueError as e:
                out.append(("error", str(e)))
        return out

    plain = outcomes()
    with gt4py_speedups.patched():
        fast = outcomes()
    assert fast == plain
    assert [k for k, _ in plain[0]] == ["x", "z"] and plain[1] == [("x", with_type.params[0]), ("hidden", hidden)]
    assert plain[2] == ("error", "Multiple definitions of symbol 'x'") and len(plain[3]) > 50
    dispatch = trees.iter_children_values.dispatch
    kind = [sym._leaf_kind(c, dispatch, dispatch(str), dispatch(object)) for c in
            (type(None), int, str, concepts.SymbolName, concepts.SourceLocation, ts.ScalarType, list, dict)]  # fmt: skip
    assert kind == [sym._LEAF] * 5 + [sym._DICT_LEAF, sym._OTHER, sym._OTHER]


@pytest.mark.slow  # ~4 min on 2 cores: GT4Py's unpatched early passes on every program
@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_early_gtir_and_symbol_tables_as_gt4pys_on_every_program(tiny_grid):
    """All programs of the catalogue, with the stored references' static scalars (seed 0, as a
    compile job binds them): the early passes inside `patched()` give GT4Py's own GTIR (`==` and
    `str`) and, on every scope node of it, the symbol table (`annex.symtable`) GT4Py's own run
    gives (names in order, bound to the nodes at the same pre-order positions)."""
    from icoforge.backend.frontend import gt4py_early
    from icoforge.perf.static import compilable_program_static
    from icoforge.suite.catalogue import all_programs
    from icoforge.suite.inputs import make_scalars
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    def symtable(node):
        return node.annex.symtable

    differ, programs = [], all_programs()
    for info in programs:
        scalars = make_scalars(info, tiny_grid, seed=0)
        static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}
        inp = compilable_program_static(info.program, tiny_grid.connectivities, static)
        plain = gt4py_early.early_transforms(inp.data, inp.args.offset_provider)
        with gt4py_speedups.patched():
            fast = gt4py_early.early_transforms(inp.data, inp.args.offset_provider)
        same_tables = _scope_tables(fast, symtable)[0] == _scope_tables(plain, symtable)[0]
        if not (fast == plain and str(fast) == str(plain) and same_tables):
            differ.append(info.name)
    assert len(programs) == 78 and not differ
