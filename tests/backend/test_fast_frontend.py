"""icoforge's GT4Py front end (icoforge.backend.frontend.fast_frontend) gives GT4Py's own GTIR, and
its cache keys are equal exactly where GT4Py's are."""

from __future__ import annotations

import functools

import pytest
from gt4py.next.ffront import stages

from icoforge.backend.frontend import fast_frontend, gt4py_compat, gt4py_speedups
from icoforge.suite.catalogue import get_program

needs_checked_gt4py = pytest.mark.skipif(not gt4py_speedups.applicable(), reason="checked for another GT4Py version")


@needs_checked_gt4py
@pytest.mark.parametrize("name", ["compute_hydrostatic_correction_term", "vertically_implicit_solver_at_predictor_step"])
def test_front_end_gives_gt4pys_gtir(tiny_grid, monkeypatch, name):
    monkeypatch.delenv("ICOFORGE_FAST_PASSES", raising=False)
    program = get_program(name).program
    plain = gt4py_compat.compilable_program(program, tiny_grid.connectivities)
    fast = gt4py_compat.compilable_program(program, tiny_grid.connectivities, transforms=fast_frontend.transforms())
    assert fast.data == plain.data and str(fast.data) == str(plain.data)
    assert fast.args == plain.args
    import attr

    assert attr.get_run_validators()  # the fast machinery is off again afterwards


def _definitions():
    """Two DSL definitions of one function (equal, distinct objects) and one of another."""
    a, b = get_program("compute_hydrostatic_correction_term"), get_program("apply_divergence_damping_and_update_vn")
    return (stages.DSLProgramDef(definition=a.program.definition),
            stages.DSLProgramDef(definition=a.program.definition),
            stages.DSLProgramDef(definition=b.program.definition))  # fmt: skip


def test_memoized_keys_equal_where_gt4pys_are():
    same, again, other = _definitions()
    calls = []
    base = stages.semantic_fingerprinter
    counted = functools.partial(base.func, **{**base.keywords, "deconstructor": lambda o: calls.append(o) or base.keywords["deconstructor"](o)})  # fmt: skip
    memo = fast_frontend.memoizing_fingerprinter(counted, (stages.DSLProgramDef,))
    assert base(same) == base(again) != base(other)  # GT4Py's own keys
    first = memo(same)
    n = len(calls)
    assert memo(same) == first and len(calls) == n  # the same object: its digest reused, nothing walked
    assert memo(again) == first  # an equal object walked anew: the same key
    assert memo(other) != first
    assert memo((same, 1)) == memo((again, 1)) != memo((other, 1))  # inside other values too


@needs_checked_gt4py
def test_off_switch_gives_gt4pys_transforms(monkeypatch):
    from gt4py.next import backend as gt_backend

    monkeypatch.setenv("ICOFORGE_FAST_PASSES", "0")
    assert fast_frontend.transforms() is gt_backend.DEFAULT_TRANSFORMS
    monkeypatch.delenv("ICOFORGE_FAST_PASSES")
    fast = fast_frontend.transforms()
    assert fast is not gt_backend.DEFAULT_TRANSFORMS and isinstance(fast.past_to_itir, fast_frontend.InPatchedMachinery)


@needs_checked_gt4py
def test_gtir_step_patched_once_and_never_in_thread_mode(monkeypatch):
    import attr
    from gt4py.next import config

    seen = []

    def step(inp):  # eve's validation is what the fast machinery turns off
        seen.append(attr.get_run_validators())
        return inner("x") if inp == "outer" else inp

    inner = fast_frontend.InPatchedMachinery(step)
    assert inner("x") == "x"
    assert seen == [False] and attr.get_run_validators()
    seen.clear()
    inner("outer")  # the nested call runs inside the outer block, not a second one
    assert seen == [False, False] and attr.get_run_validators()
    seen.clear()
    monkeypatch.setattr(config, "BUILD_JOBS_MODE", config.BuildJobsMode.THREAD)
    inner("x")
    assert seen == [True]


def test_memoized_keys_through_a_cycle_of_memoized_objects():
    """Two memoized objects referring to each other: the walk ends, and equal structures built
    twice get equal keys."""

    class Box:  # a mutable container GT4Py's lenient deconstructor walks (its attributes)
        def __init__(self, tag):
            self.tag, self.other = tag, None

    def pair(tag):
        a, b = Box(tag), Box(tag + "'")
        a.other, b.other = b, a
        return a

    memo = fast_frontend.memoizing_fingerprinter(stages.semantic_fingerprinter, (Box,))
    assert memo(pair("x")) == memo(pair("x")) != memo(pair("y"))


def test_a_neighbour_table_is_hashed_once_per_object_and_by_content():
    import numpy as np
    import gt4py.next as gtx

    C, E = gtx.Dimension("C"), gtx.Dimension("E")
    C2E = gtx.Dimension("C2E", kind=gtx.DimensionKind.LOCAL)

    def table(values):
        return gtx.as_connectivity([C, C2E], E, np.asarray(values, dtype=np.int32))

    types = fast_frontend.connectivity_types()
    same, again, other = table([[0, 1], [1, 2]]), table([[0, 1], [1, 2]]), table([[0, 1], [2, 1]])
    assert type(same) in types
    walked = []
    base = stages.semantic_fingerprinter
    counted = functools.partial(base.func, **{**base.keywords, "deconstructor": lambda o: walked.append(o) or base.keywords["deconstructor"](o)})  # fmt: skip
    memo = fast_frontend.memoizing_fingerprinter(counted, (), types)
    first = memo({"C2E": same})
    n = len(walked)
    assert any(isinstance(o, np.ndarray) for o in walked)  # the first key hashed the table
    assert memo({"C2E": same}) == first and not any(isinstance(o, np.ndarray) for o in walked[n:])  # not hashed again
    assert memo({"C2E": again}) == first  # equal contents, another object: the same key
    assert memo({"C2E": other}) != first  # other contents: another key
