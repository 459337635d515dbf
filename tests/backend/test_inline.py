"""Compute-inline of temporaries (icoforge.backend.passes.inline, the schedule knob `inline`): which
temporaries are inlined and which must stay, what the readers then compute, the byte decision,
the aliasing pairs it records; and inlined programs bit-identical to the same programs with
inlining off (icoforge-cpu, and the CUDA code by CPU emulation).

Which programs: the unit tests inline small programs built here and assert the kernels and
temporaries left; the real-program tests name their programs (INLINED_PROGRAMS) and assert, before
comparing results, that inlining happened there (kernel and temporary counts with inlining off and
on, tests/transform_counts.py; tests/backend/test_transform_counts.py shows that check fails with
inlining off)."""

from __future__ import annotations

import dataclasses

import pytest

from icoforge.backend.passes import inline
from icoforge.backend.ir import ir, recompute
from icoforge.backend.schedule import pipeline
from icoforge.backend.schedule.schedule import ProgramSchedule, ScheduleError
from icoforge.errors import UnknownNameError
from tests import transform_counts

KINDS = (("Cell", "horizontal"), ("K", "vertical"))


def c(v, dtype="int32"):
    return ir.Const(v, dtype)


DOM = ir.Domain("Cell", c(0), c(8), c(0), c(4))
K = ir.KIndex()


def at(name, dk=0, neighbour=False, dims=2):
    k = K if dk == 0 else ir.Binary("plus", K, c(dk), "int32")
    h = ir.Table("C2E2CO", ir.HIndex(), 1) if neighbour else ir.HIndex()
    return ir.Load(name, (h, k) if dims == 2 else (h,), "float64")


def add(x, y):
    return ir.Binary("plus", x, y, "float64")


def mul(x, y):
    return ir.Binary("multiplies", x, y, "float64")


def kernel(name, *stmts, domain=DOM, state=(), args=()):
    return ir.Kernel(name, domain, tuple(stmts), args=tuple(args), state=tuple(state))


def program(steps, temps=("t",), fields=("a", "b", "c", "out", "out2"), flat=()):
    params = tuple(ir.FieldParam(n, ("Cell", "K"), "float64") for n in fields)
    params += tuple(ir.FieldParam(n, ("Cell",), "float64") for n in flat)
    temporaries = tuple(ir.Temporary(t, ("Cell", "K"), "float64", DOM) for t in temps)
    return ir.ProgramIR("p", params, temporaries, (), tuple(steps), dim_kinds=KINDS)


def names(p):
    return [k.name for k in p.kernels()]


def decision(decisions, temp):
    (d,) = [d for d in decisions if d.temporary == temp]
    return d


def test_a_temporary_read_at_two_levels_is_recomputed_there():
    # t = a * b; out = t[k] + t[k+1]: the reader computes a*b at k and at k+1, t and its kernel go
    p = program([kernel("p_k0", ir.Store("t", mul(at("a"), at("b")))), kernel("p_k1", ir.Store("out", add(at("t"), at("t", 1))))])
    q, ds = inline.inline_with_decisions(p, "auto")
    assert names(q) == ["p_k1"] and q.temporaries == ()
    t0, t1 = ir.Var("t_at0", "float64"), ir.Var("t_at1", "float64")  # one copy per point, as statements
    assert q.kernels()[0].body == (
        ir.Let(t0, mul(at("a"), at("b"))), ir.Let(t1, mul(at("a", 1), at("b", 1))), ir.Store("out", add(t0, t1))
    )
    d = decision(ds, "t")
    assert d.inlined and d.readers == ("p_k1",) and d.copies == 2
    assert (d.saved, d.added) == (4.0, 2.0)  # producer reads a, b and writes t; reader read t -> reads a, b


def test_producer_statements_are_renamed_and_moved_and_a_point_is_computed_once_per_branch():
    x = ir.Var("x", "float64")
    prod = kernel("p_k0", ir.Let(x, add(at("a"), at("b"))), ir.Store("t", mul(x, x)))
    y = ir.Var("x_t_at0", "float64")  # the reader's own x must not meet the producer's
    reader = kernel("p_k1", ir.Let(x, at("t", neighbour=True)), ir.Store("out", add(x, at("t", neighbour=True))))
    (k,) = inline.inline_temporaries(program([prod, reader]), "all").kernels()
    n = ir.Table("C2E2CO", ir.HIndex(), 1)
    t0 = ir.Var("t_at0", "float64")
    assert k.body == (
        ir.Let(y, add(ir.Load("a", (n, K), "float64"), ir.Load("b", (n, K), "float64"))),
        ir.Let(t0, mul(y, y)), ir.Let(x, t0), ir.Store("out", add(x, t0)),
    )


def test_lets_are_substituted_and_a_neighbour_read_under_a_guard_stays_lazy():
    x = ir.Var("x", "float64")
    prod = kernel("p_k0", ir.Let(x, add(at("a"), at("b"))), ir.Store("t", mul(x, x)))
    guarded = ir.Select(ir.Binary("greater", at("c"), c(0.0, "float64"), "bool"), at("t", neighbour=True), c(0.0, "float64"), "float64")
    q = inline.inline_temporaries(program([prod, kernel("p_k1", ir.Store("out", guarded))]), "all")
    (st,) = q.kernels()[0].body
    n = ir.Table("C2E2CO", ir.HIndex(), 1)
    a_n, b_n = ir.Load("a", (n, K), "float64"), ir.Load("b", (n, K), "float64")
    assert st.value == ir.Select(guarded.cond, mul(add(a_n, b_n), add(a_n, b_n)), guarded.b, "float64")


def test_auto_keeps_a_temporary_whose_readers_would_read_more():
    # t = a + b + c read once by a kernel that reads none of them, the producer still needs a, b, c
    # for out2: 1 store + 1 read saved, 3 reads added
    abc = add(add(at("a"), at("b")), at("c"))
    prod = kernel("p_k0", ir.Store("t", abc), ir.Store("out2", mul(abc, abc)))
    p = program([prod, kernel("p_k1", ir.Store("out", at("t")))])
    q, ds = inline.inline_with_decisions(p, "auto")
    assert q == p
    d = decision(ds, "t")
    assert not d.inlined and "read more" in d.reason and (d.saved, d.added) == (2.0, 3.0)
    assert names(inline.inline_temporaries(p, "all")) == ["p_k0", "p_k1"]  # producer stays for out2
    assert inline.inline_temporaries(p, "all").kernels()[0].body == (ir.Store("out2", mul(abc, abc)),)


def test_auto_keeps_what_lost_time_on_the_gpu_scan_readers_and_gathers_of_gathers():
    s = ir.Var("s", "float64")
    cheap = kernel("p_k0", ir.Store("t", mul(at("a"), at("b"))))
    scan = kernel("p_k1", ir.Store("out", add(s, at("t", -1))), ir.Let(s, add(s, at("t")), declared=True), state=[ir.ScanState(s, c(0.0, "float64"))])
    p = program([cheap, scan])
    assert "is a scan" in decision(inline.inline_with_decisions(p, "auto")[1], "t").reason
    assert names(inline.inline_temporaries(p, "all")) == ["p_k1"]
    # a neighbour sum read at two neighbours that the reader always loads: kept; read at one
    # neighbour chosen by a condition (an upwind choice): recomputed
    gather = kernel("p_k0", ir.Store("t", add(at("a", neighbour=True), at("b", neighbour=True))))
    other = ir.Load("t", (ir.Table("C2E2CO", ir.HIndex(), 2), K), "float64")
    both = kernel("p_k1", ir.Store("out", add(at("t", neighbour=True), other)))
    d = decision(inline.inline_with_decisions(program([gather, both]), "auto")[1], "t")
    assert "gather its neighbour reduction again" in d.reason
    upwind = kernel("p_k1", ir.Store("out", ir.Select(ir.Binary("greater", at("c"), c(0.0, "float64"), "bool"), at("t", neighbour=True), other, "float64")))
    assert names(inline.inline_temporaries(program([gather, upwind]), "auto")) == ["p_k1"]
    # the same choice as branches (how the early-GTIR lowering writes it): one neighbour per
    # point on either path, so recomputed too; two neighbours in one branch: kept
    v = ir.Var("v", "float64")
    up = ir.Binary("greater", at("c"), c(0.0, "float64"), "bool")
    branches = kernel("p_k1", ir.Declare(v), ir.If(up, (ir.Let(v, at("t", neighbour=True), declared=True),), (ir.Let(v, other, declared=True),)), ir.Store("out", v))
    assert names(inline.inline_temporaries(program([gather, branches]), "auto")) == ["p_k1"]
    one_side = kernel("p_k1", ir.Declare(v), ir.If(up, (ir.Let(v, add(at("t", neighbour=True), other), declared=True),), (ir.Let(v, at("c"), declared=True),)), ir.Store("out", v))
    d = decision(inline.inline_with_decisions(program([gather, one_side]), "auto")[1], "t")
    assert "gather its neighbour reduction again" in d.reason


def test_an_input_written_between_producer_and_reader_keeps_the_temporary():
    steps = [
        kernel("p_k0", ir.Store("t", at("a"))),
        kernel("p_k1", ir.Store("a", at("b"))),  # a changes after t was computed from it
        kernel("p_k2", ir.Store("out", at("t"))),
    ]
    q, ds = inline.inline_with_decisions(program(steps), "all")
    assert names(q) == ["p_k0", "p_k1", "p_k2"]
    assert "a written before its last reader" in decision(ds, "t").reason
    # ... also when the reader itself writes it (its other threads would)
    same = [kernel("p_k0", ir.Store("t", at("a"))), kernel("p_k1", ir.Store("a", at("t", neighbour=True)))]
    assert names(inline.inline_temporaries(program(same), "all")) == ["p_k0", "p_k1"]


def test_an_input_the_reader_writes_at_other_levels_than_the_copies_read_is_no_clash():
    # t = k < 3 ? a : out (out only at the top level), read at k+1 by a kernel writing out at k < 3
    top = ir.Select(ir.Binary("less", K, c(3), "bool"), at("a"), at("out"), "float64")
    prod = kernel("p_k0", ir.Store("t", top))
    below = ir.Domain("Cell", c(0), c(8), c(0), c(3))
    reader = kernel("p_k1", ir.Store("out", at("t", 1)), domain=below)
    q, ds = inline.inline_with_decisions(program([prod, reader]), "all")
    assert names(q) == ["p_k1"] and decision(ds, "t").inlined
    # reading t at its own level over all four levels, the copy at k = 3 reads what the reader writes
    same = kernel("p_k1", ir.Store("out", at("t")))
    q, ds = inline.inline_with_decisions(program([prod, same]), "all")
    assert names(q) == ["p_k0", "p_k1"] and "out written before" in decision(ds, "t").reason
    assert recompute.levels_read(top, "out", 0, 3) == [(3, 3)] and recompute.levels_read(top, "out", 0, 2) == []


def test_scans_conditionals_other_domains_and_late_readers_are_not_inlined():
    s = ir.Var("s", "float64")
    scan = kernel("p_k0", ir.Store("t", add(s, at("a"))), ir.Let(s, add(s, at("a")), declared=True), state=[ir.ScanState(s, c(0.0, "float64"))])
    cond = kernel("p_k0", ir.If(at("a"), (ir.Store("t", at("b")),), (ir.Store("t", at("c")),)))
    small = kernel("p_k0", ir.Store("t", at("a")), domain=ir.Domain("Cell", c(0), c(4), c(0), c(4)))
    reader = kernel("p_k1", ir.Store("out", at("t")))
    for prod, why in ((scan, "scan"), (cond, "under a condition"), (small, "another domain")):
        q, ds = inline.inline_with_decisions(program([prod, reader]), "all")
        assert names(q) == ["p_k0", "p_k1"] and why in decision(ds, "t").reason
    before = program([reader, kernel("p_k0", ir.Store("t", at("a"))), kernel("p_k2", ir.Store("out2", at("t")))])
    assert "read before" in decision(inline.inline_with_decisions(before, "all")[1], "t").reason


def test_a_value_assigned_in_both_branches_of_a_conditional_becomes_a_lazy_select():
    # as GT4Py's if_ lowers: declare v; if (k < 3) { x = a; v = x * b } else { v = c[k-1] }; t = v
    v, x = ir.Var("v", "float64"), ir.Var("x", "float64")
    below = ir.Binary("less", K, c(3), "bool")
    branches = ir.If(below, (ir.Let(x, at("a")), ir.Let(v, mul(x, at("b")), declared=True)), (ir.Let(v, at("c", -1), declared=True),))
    prod = kernel("p_k0", ir.Declare(v), branches, ir.Store("t", v))
    assert recompute.producer_expression(prod, "t") == ir.Select(below, mul(at("a"), at("b")), at("c", -1), "float64")
    # read lazily at k+1 by the reader: one expression, the condition moves along with the point
    positive = ir.Binary("greater", at("c"), c(0.0, "float64"), "bool")
    lazy = ir.Store("out", ir.Select(positive, at("t", 1), c(0.0, "float64"), "float64"))
    q = inline.inline_temporaries(program([prod, kernel("p_k1", lazy)]), "all")
    k1 = ir.Binary("plus", K, c(1), "int32")
    shifted = ir.Select(ir.Binary("less", k1, c(3), "bool"), mul(at("a", 1), at("b", 1)), ir.Load("c", (ir.HIndex(), ir.Binary("plus", k1, c(-1), "int32")), "float64"), "float64")
    assert q.kernels()[0].body == (ir.Store("out", ir.Select(positive, shifted, c(0.0, "float64"), "float64")),)
    # read eagerly: the statements, conditional and all, before the reader's
    (k,) = inline.inline_temporaries(program([prod, kernel("p_k1", ir.Store("out", at("t", 1)))]), "all").kernels()
    assert [type(st).__name__ for st in k.body] == ["Declare", "If", "Let", "Store"]
    assert k.body[1].cond == ir.Binary("less", k1, c(3), "bool") and k.body[0].var.name == "v_t_at0"
    # assigned in one branch only: no value in the other, so no expression
    half = kernel("p_k0", ir.Declare(v), ir.If(below, (ir.Let(v, at("a"), declared=True),), ()), ir.Store("t", v))
    assert recompute.producer_expression(half, "t") is None


def test_host_computed_arguments_follow_the_expression_and_clashing_names_are_renamed():
    a0 = ir.Param("a0", "float64")
    prod = kernel("p_k0", ir.Store("t", mul(a0, at("a"))), args=[(a0, ir.Param("dtime", "float64"))])
    reader = kernel("p_k1", ir.Store("out", add(at("t"), a0)), args=[(a0, c(2.0, "float64"))])
    (k,) = inline.inline_temporaries(program([prod, reader]), "all").kernels()
    assert dict((p.name, v) for p, v in k.args) == {"a0": c(2.0, "float64"), "a1": ir.Param("dtime", "float64")}
    t0 = ir.Var("t_at0", "float64")
    assert k.body == (ir.Let(t0, mul(ir.Param("a1", "float64"), at("a"))), ir.Store("out", add(t0, a0)))


def test_dead_lets_of_the_producer_go_with_the_store():
    x, y = ir.Var("x", "float64"), ir.Var("y", "float64")
    prod = kernel("p_k0", ir.Let(x, at("a")), ir.Let(y, at("b")), ir.Store("t", x), ir.Store("out2", y))
    q = inline.inline_temporaries(program([prod, kernel("p_k1", ir.Store("out", at("t")))]), "all")
    assert q.kernels()[0].body == (ir.Let(y, at("b")), ir.Store("out2", y))
    assert q.kernels()[0].fields_read() == ("b",)


def test_moved_reads_record_the_field_arguments_that_must_not_share_memory():
    steps = [kernel("p_k0", ir.Store("t", at("a"))), kernel("p_k1", ir.Store("out2", at("b"))), kernel("p_k2", ir.Store("out", at("t")))]
    q = inline.inline_temporaries(program(steps), "all")
    # a is now read after out2 and out are written: a caller passing out2 (or out) as a is refused
    assert set(q.distinct) == {("out2", "a"), ("out", "a")}


def test_the_stored_dtype_is_kept():
    prod = kernel("p_k0", ir.Store("t", at("a")))
    p = program([prod, kernel("p_k1", ir.Store("out", at("t")))])
    p = dataclasses.replace(p, temporaries=(ir.Temporary("t", ("Cell", "K"), "float32", DOM),))
    (k,) = inline.inline_temporaries(p, "all").kernels()
    assert k.body[0].value == ir.Cast(at("a"), "float32")


def test_policies_are_schedule_data_and_checked():
    s = ProgramSchedule(inline="off")
    assert ProgramSchedule.loads(s.dumps()) == s and ProgramSchedule().inline == "auto"
    assert "inline" not in ProgramSchedule().to_json()
    with pytest.raises(ScheduleError, match="auto, all, off"):
        ProgramSchedule(inline="always")
    with pytest.raises(UnknownNameError, match="Valid: auto, all, off"):
        inline.inline_temporaries(program([]), "sometimes")


def test_the_pipeline_runs_it_between_forwarding_and_hoisting():
    assert [p.name for p in pipeline.TRANSLATE_PASSES] == ["forward", "inline", "share", "hoist", "order"]
    p = program([kernel("p_k0", ir.Store("t", mul(at("a"), at("b")))), kernel("p_k1", ir.Store("out", add(at("t"), at("t", 1))))])
    assert names(pipeline.translate_passes(p)) == ["p_k1"]
    assert names(pipeline.translate_passes(p, "off")) == ["p_k0", "p_k1"]


# --- real programs: inlined == not inlined, to the bit --------------------------------------------

# the granule programs whose temporaries the pass removes (R2B3/10, icon4py's static arguments)
INLINED_PROGRAMS = (
    "vertically_implicit_solver_at_predictor_step",  # into a scan, at k-1, k, k+1
    "compute_rho_theta_pgrad_and_update_vn",  # four C2E2CO gradients read through E2C
    "compute_advection_in_corrector_vertical_momentum",  # chains: inlined into inlined
    "compute_perturbed_quantities_and_interpolation",  # conditional producers
    "compute_advection_in_horizontal_momentum",  # V2E reductions over skip values, as statements
)


@pytest.mark.parametrize("name", INLINED_PROGRAMS)
def test_inlined_programs_are_bit_identical_to_inlining_off(name, tiny_grid):
    """Each of INLINED_PROGRAMS with `inline: all` has fewer kernels and temporaries than with
    inlining off (the counts of transform_counts.INLINED), and the same bits (icoforge-cpu)."""
    assert set(INLINED_PROGRAMS) == set(transform_counts.INLINED)
    counts = transform_counts.inline_counts(name, tiny_grid, "all", seed=43)
    transform_counts.assert_transformed(name, *counts, transform_counts.expected(transform_counts.INLINED, name))
    from icoforge.backend import make_backend
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    on = make_backend("cpu", ProgramSchedule(inline="all"))
    off = make_backend("cpu", ProgramSchedule(inline="off"))
    res = verify(get_program(name), on, off, tiny_grid, seed=43, rtol=0.0, atol=0.0)
    assert res.passed and res.max_abs_err == 0.0, res.summary()
    assert all(o.written > 0 for o in res.outputs)


def test_inlined_cuda_code_is_bit_identical_to_the_cpu_target_without_inlining(tiny_grid):
    """vertically_implicit_solver_at_predictor_step, `inline: all`: 10 kernels and 8 temporaries
    with inlining off, 5 and 3 with it (transform_counts.INLINED); its CUDA code by emulation gives
    the bits of the CPU target with inlining off."""
    name = "vertically_implicit_solver_at_predictor_step"
    counts = transform_counts.inline_counts(name, tiny_grid, "all", seed=47)
    transform_counts.assert_transformed(name, *counts, transform_counts.expected(transform_counts.INLINED, name))
    from icoforge.backend import make_backend
    from icoforge.backend.runtime.emulate import make_emulated_backend
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    emulated = make_emulated_backend("cuda", ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], inline="all"))
    off = make_backend("cpu", ProgramSchedule(inline="off"))
    res = verify(get_program(name), emulated, off, tiny_grid, seed=47, rtol=0.0, atol=0.0)
    assert res.passed and res.max_abs_err == 0.0, res.summary()
