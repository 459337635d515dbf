"""The sped-up GT4Py passes (icoforge.backend.gt4py_speedups) give GT4Py's own result."""

from __future__ import annotations

import pytest
from gt4py.next.iterator.transforms import pass_manager

from icoforge.backend import gt4py_speedups, workflow
from icoforge.backend.precompile import compilable_program
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
