"""Kernel fusion (icoforge.backend.passes.fuse, the schedule knob `fuse`): which neighbouring kernels are
fused and which must stay apart, variable clashes, the aliasing pairs it records; and the results
of fused code, first against GT4Py's (stored gtfn_cpu outputs for single programs with icon4py's
static arguments; the granule's recorded gtfn_cpu reference for the whole granule), then against
the CPU target as a second opinion, both through the CUDA code run by CPU emulation.

Which programs: the unit tests fuse small programs built here (two or three kernels) and assert
the kernels left by name; the real-program tests name their programs and assert, before comparing
results, that fusion happened there (kernel and temporary counts before and after the fuse pass,
tests/transform_counts.py; tests/backend/test_transform_counts.py shows that check fails with
fusion off); the granule test asserts fewer kernels for the perturbed quantities and for every
fused substep."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from icoforge.backend.passes import fuse
from icoforge.backend.ir import ir
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule, ScheduleError
from icoforge.suite.backends import schedule_from_env
from tests import transform_counts

KINDS = (("Cell", "horizontal"), ("K", "vertical"))


def c(v):
    return ir.Const(v, "int32")


DOM = ir.Domain("Cell", c(0), c(8), c(0), c(4))


def load(name, dk=0, neighbour=False):
    k = ir.KIndex() if dk == 0 else ir.Binary("plus", ir.KIndex(), c(dk), "int32")
    h = ir.Table("C2E2CO", ir.HIndex(), 1) if neighbour else ir.HIndex()
    return ir.Load(name, (h, k), "float64")


def kernel(name, *stmts, domain=DOM, prologue=()):
    return ir.Kernel(name, domain, tuple(stmts), prologue=tuple(prologue))


def store(field, value):
    return ir.Store(field, value)


def program(steps, temps=("t", "u"), fields=("a", "b", "out", "out2")):
    params = tuple(ir.FieldParam(n, ("Cell", "K"), "float64") for n in fields)
    temporaries = tuple(ir.Temporary(t, ("Cell", "K"), "float64", DOM) for t in temps)
    return ir.ProgramIR("p", params, temporaries, (), tuple(steps), dim_kinds=KINDS)


def add(x, y):
    return ir.Binary("plus", x, y, "float64")


def mul(x, y):
    return ir.Binary("multiplies", x, y, "float64")


def names(p):
    return [k.name for k in p.kernels()]


def test_own_point_chain_is_fused_in_order():
    p = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", add(load("t"), load("b", neighbour=True))))])
    f = fuse.fuse_kernels(p)
    assert names(f) == ["p_k0to1"]
    (k,) = f.kernels()
    assert [s.field for s in k.body] == ["t", "out"]  # a's store before b's


def test_neighbour_read_of_a_fused_write_keeps_kernels_apart():
    p = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", load("t", neighbour=True)))])
    assert names(fuse.fuse_kernels(p)) == ["p_k0", "p_k1"]


def test_k_offset_read_and_write_after_read_keep_kernels_apart():
    raw = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", load("t", dk=1)))])
    war = program([kernel("p_k0", store("out", load("a", dk=1))), kernel("p_k1", store("a", load("b")))])
    assert names(fuse.fuse_kernels(raw)) == ["p_k0", "p_k1"]
    assert names(fuse.fuse_kernels(war)) == ["p_k0", "p_k1"]


def test_column_fusion_walks_the_producer_by_levels_and_reads_the_level_above_from_a_register():
    # out(k) reads t at k and k - 1 (guarded at the bottom): with columns, one forward column walk
    below = ir.Select(ir.Binary("greater", ir.KIndex(), c(0), "bool"), load("t", dk=-1), load("b"), "float64")
    p = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", add(load("t"), below)))])
    assert names(fuse.fuse_kernels(p)) == ["p_k0", "p_k1"]  # not without columns: maps run levels in parallel
    f = fuse.fuse_kernels(p, columns=True)
    (k,) = f.kernels()
    assert k.name == "p_k0to1" and k.is_scan and k.column and k.forward
    assert [t.name for t in f.temporaries] == ["u"] and not loads_of(k, "t")  # t lives in registers
    assert [st.var.name for st in k.state] == ["t_prev"]


def test_column_fusion_needs_one_direction_and_a_producer_free_of_its_own_outputs():
    both = ir.Binary("plus", load("t", dk=-1), load("t", dk=1), "float64")
    two_sided = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", both))])
    self_reading = program([kernel("p_k0", store("t", load("t"))), kernel("p_k1", store("out", load("t", dk=-1)))])
    neighbour = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", load("t", neighbour=True)))])
    for p in (two_sided, neighbour):
        assert names(fuse.fuse_kernels(p, columns=True)) == ["p_k0", "p_k1"]
    assert fuse.column_direction(*self_reading.kernels(), self_reading) is True  # own point only: any order
    k_above = program([kernel("p_k0", store("t", load("t", dk=1))), kernel("p_k1", store("out", load("t", dk=-1)))])
    assert fuse.column_direction(*k_above.kernels(), k_above) is None  # its levels' order would matter


def test_a_scan_after_a_map_walks_the_column_with_it_when_it_reads_walked_levels_only():
    s = ir.Var("s", "float64")
    below = ir.Select(ir.Binary("greater", ir.KIndex(), c(0), "bool"), load("t", dk=-1), load("b"), "float64")
    body = (ir.Let(s, add(s, add(load("t"), below)), declared=True), store("out", s))
    sweep = ir.Kernel("p_k1", DOM, body, state=(ir.ScanState(s, ir.Const(0.0, "float64")),), forward=True)
    p = program([kernel("p_k0", store("t", load("a"))), sweep])
    assert names(fuse.fuse_kernels(p)) == ["p_k0", "p_k1"]
    f = fuse.fuse_kernels(p, columns=True)
    (k,) = f.kernels()
    assert k.is_scan and k.forward and [st.var.name for st in k.state] == ["s", "t_prev"]
    assert [t.name for t in f.temporaries] == ["u"] and not loads_of(k, "t")
    backward = dataclasses.replace(sweep, forward=False)  # level k - 1 not yet walked
    assert names(fuse.fuse_kernels(program([kernel("p_k0", store("t", load("a"))), backward]), columns=True)) == ["p_k0", "p_k1"]
    reads_out = kernel("p_k0", store("t", load("out", dk=-1)))  # the sweep's output, already written when fused
    assert names(fuse.fuse_kernels(program([reads_out, sweep]), columns=True)) == ["p_k0", "p_k1"]


def test_host_computed_arguments_of_one_name_are_renamed_apart():
    a0 = ir.Param("a0", "float64")
    a = dataclasses.replace(kernel("p_k0", store("t", mul(load("a"), a0))), args=((a0, ir.Const(2.0, "float64")),))
    b = dataclasses.replace(kernel("p_k1", store("out", mul(load("t"), a0))), args=((a0, ir.Const(3.0, "float64")),))
    (k,) = fuse.fuse_kernels(program([a, b])).kernels()
    b_arg = ir.Param("a0_b", "float64")
    assert k.args == ((a0, ir.Const(2.0, "float64")), (b_arg, ir.Const(3.0, "float64")))
    assert k.body[-1] == store("out", mul(load("t"), b_arg))


def test_prologue_reading_a_fused_write_keeps_kernels_apart():
    pro = (ir.Let(ir.Var("x", "float64"), load("t")),)
    p = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", ir.Var("x", "float64")), prologue=pro)])
    assert names(fuse.fuse_kernels(p)) == ["p_k0", "p_k1"]


def test_scans_other_domains_and_host_conditionals_are_not_fused():
    scan = ir.Kernel("p_k1", DOM, (ir.Let(ir.Var("s", "float64"), load("t"), declared=True), store("out", ir.Var("s", "float64"))),
                     state=(ir.ScanState(ir.Var("s", "float64"), ir.Const(0.0, "float64")),))  # fmt: skip
    other = ir.Domain("Cell", c(1), c(8), c(0), c(4))
    host_if = ir.HostIf(ir.Const(True, "bool"), (kernel("p_k2", store("out2", load("b"))),), ())
    p = program([kernel("p_k0", store("t", load("a"))), scan, kernel("p_k3", store("u", load("a")), domain=other), host_if])
    assert names(fuse.fuse_kernels(p)) == ["p_k0", "p_k1", "p_k3", "p_k2"]


# --- a map into the scan before it -----------------------------------------------------------------

S = ir.Var("s", "float64")


def scan(name, *stmts, forward=False, domain=DOM):
    """A scan carrying `s`: s = s + a at each level, stored to `t`, then `stmts`."""
    body = (ir.Let(S, add(S, load("a")), declared=True), store("t", S), *stmts)
    return ir.Kernel(name, domain, body, state=(ir.ScanState(S, ir.Const(0.0, "float64")),), forward=forward)


def loads_of(k, field):
    return [e for e in k.exprs() if isinstance(e, ir.Load) and e.field == field]


def test_map_reading_finished_levels_runs_in_the_scan_and_the_temporary_goes():
    # backward scan: levels above k are done; the map reads t at k and k + 1 (guarded at the top)
    above = ir.Select(ir.Binary("less", ir.Binary("plus", ir.KIndex(), c(1), "int32"), c(4), "bool"), load("t", dk=1), load("b"), "float64")
    p = program([scan("p_k0"), kernel("p_k1", store("out", add(load("t"), above)))])
    f = fuse.fuse_kernels(p)
    assert names(f) == ["p_k0to1"]
    (k,) = f.kernels()
    assert k.is_scan and not k.forward
    assert [t.name for t in f.temporaries] == ["u"] and not loads_of(k, "t")  # t lives in registers
    assert [st.var.name for st in k.state] == ["s", "t_prev"]
    assert k.body[-1] == ir.Let(ir.Var("t_prev", "float64"), S, declared=True)  # the window moves last


def test_a_column_walk_is_fused_only_on_grids_with_enough_columns():
    from icoforge.backend.schedule import pipeline, tuned

    above = ir.Select(ir.Binary("less", ir.Binary("plus", ir.KIndex(), c(1), "int32"), c(4), "bool"), load("t", dk=1), load("b"), "float64")
    p = dataclasses.replace(program([scan("p_k0"), kernel("p_k1", store("out", add(load("t"), above)))]), name="prog")
    schedule = ProgramSchedule(fuse=("prog",), fuse_scan_min_columns=1000)
    said = []
    assert names(pipeline.fuse(p, schedule, {"Cell": 999, "Edge": 5000}, said)) == ["p_k0", "p_k1"]
    (d,) = said
    assert d.status == tuned.NOT_FUSED and str(d) == "p_k0 + p_k1: not fused into one column walk: 999 Cell columns < fuse_scan_min_columns 1,000"
    assert names(pipeline.fuse(p, schedule, {"Cell": 1000}, said)) == ["p_k0to1"] and len(said) == 1
    assert names(pipeline.fuse(p, schedule)) == ["p_k0to1"]  # no sizes (explain of a bare program): fused
    assert names(pipeline.fuse(p, dataclasses.replace(schedule, fuse_scan_min_columns=0), {"Cell": 8})) == ["p_k0to1"]
    # maps over one domain are fused at any size: they keep a thread per point
    maps = dataclasses.replace(program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", load("t")))]), name="prog")
    assert names(pipeline.fuse(maps, schedule, {"Cell": 8})) == ["p_k0to1"]


def test_a_value_stored_before_the_state_moves_on_is_copied():
    # the scan stores its state, then updates it: the map must see the stored value, not the new state
    body = (store("t", S), ir.Let(S, add(S, load("a")), declared=True))
    a = ir.Kernel("p_k0", DOM, body, state=(ir.ScanState(S, ir.Const(0.0, "float64")),), forward=False)
    p = program([a, kernel("p_k1", store("out", load("t")))])
    (k,) = fuse.fuse_kernels(p).kernels()
    now = ir.Var("t_now", "float64")
    assert k.body[0] == ir.Let(now, S) and k.body[-1] == store("out", now)


def test_a_level_the_scan_never_computes_is_still_loaded():
    # t[k + 1] at the top level (k + 1 = 4) is outside the scan: memory, as unfused; t stays
    p = program([scan("p_k0"), kernel("p_k1", store("out", load("t", dk=1)))])
    f = fuse.fuse_kernels(p)
    assert names(f) == ["p_k0to1"]
    assert "t" in [t.name for t in f.temporaries] and loads_of(f.kernels()[0], "t")


def test_unfinished_levels_and_what_the_scan_would_see_keep_kernels_apart():
    forward_reads_above = program([scan("p_k0", forward=True), kernel("p_k1", store("out", load("t", dk=1)))])
    backward_reads_below = program([scan("p_k0"), kernel("p_k1", store("out", load("t", dk=-1)))])
    neighbour = program([scan("p_k0"), kernel("p_k1", store("out", load("t", neighbour=True)))])
    # the scan reads `b` one level above, which the map has written by then in a backward walk
    scan_sees_write = program([scan("p_k0", store("u", load("b", dk=1))), kernel("p_k1", store("b", load("t")))])
    for p in (forward_reads_above, backward_reads_below, neighbour, scan_sees_write):
        assert names(fuse.fuse_kernels(p)) == ["p_k0", "p_k1"], p.steps[1]
    # one level below is still ahead of a backward walk: fused
    scan_reads_ahead = program([scan("p_k0", store("u", load("b", dk=-1))), kernel("p_k1", store("b", load("t")))])
    assert names(fuse.fuse_kernels(scan_reads_ahead)) == ["p_k0to1"]


def test_a_map_over_fewer_levels_is_guarded():
    fewer = ir.Domain("Cell", c(0), c(8), c(1), c(3))
    more = ir.Domain("Cell", c(0), c(8), c(0), c(5))
    p = program([scan("p_k0"), kernel("p_k1", store("out", load("t")), domain=fewer)])
    (k,) = fuse.fuse_kernels(p).kernels()
    guard = [s for s in k.body if isinstance(s, ir.If)]
    assert len(guard) == 1 and "k >= 1" in str(guard[0].cond) and "k <= 2" in str(guard[0].cond)
    beyond = program([scan("p_k0"), kernel("p_k1", store("out", load("t")), domain=more)])
    assert names(fuse.fuse_kernels(beyond)) == ["p_k0", "p_k1"]


def test_maps_over_nested_levels_are_fused_with_a_guard_and_the_stores_levels_known():
    from icoforge.backend.schedule.access import bounds_requirements, store_levels

    fewer = ir.Domain("Cell", c(0), c(8), c(1), c(3))
    p = program([kernel("p_k0", store("t", load("a"))), kernel("p_k1", store("out", add(load("t"), load("b"))), domain=fewer)])
    (k,) = fuse.fuse_kernels(p).kernels()
    assert k.domain == DOM and store_levels(k) == {"t": (0, 3), "out": (1, 2)}
    # the host checks that `out` holds levels 1..2, not the fused kernel's 0..3
    (req,) = [r for r in bounds_requirements(k, p, set()) if r.field == "out" and r.dim == "K"]
    assert (req.lo, req.hi) == (1, 3)


def test_a_kernel_moves_up_past_independent_kernels_to_its_partner():
    other = ir.Domain("Cell", c(1), c(8), c(0), c(4))
    p = program([kernel("p_k0", store("t", load("a"))),
                 kernel("p_k1", store("u", load("b")), domain=other),  # another domain, independent
                 kernel("p_k2", store("out", add(load("t"), load("a"))))], fields=("a", "b", "out", "out2"))  # fmt: skip
    f = fuse.fuse_kernels(p)
    assert names(f) == ["p_k0to2", "p_k1"]
    # a kernel in between that writes what the mover reads keeps it in place
    blocked = program([kernel("p_k0", store("t", load("a"))),
                       kernel("p_k1", store("b", load("a")), domain=other),
                       kernel("p_k2", store("out", add(load("t"), load("b"))))])  # fmt: skip
    assert names(fuse.fuse_kernels(blocked)) == ["p_k0", "p_k1", "p_k2"]


def test_moving_past_a_kernel_records_the_fields_that_must_not_share_memory():
    other = ir.Domain("Cell", c(1), c(8), c(0), c(4))
    p = program([kernel("p_k0", store("t", load("a"))),
                 kernel("p_k1", store("out2", load("b")), domain=other),
                 kernel("p_k2", store("out", load("t")))])  # fmt: skip
    f = fuse.fuse_kernels(p)
    assert names(f) == ["p_k0to2", "p_k1"]
    assert ("out", "out2") in f.distinct and ("out2", "out") in f.distinct and ("out", "b") in f.distinct


def test_the_host_refuses_shared_memory_only_for_recorded_pairs():
    from icoforge.backend.runtime.host_checks import _distinct
    from icoforge.errors import CallArgumentError

    class Spans:
        def span(self, f):
            return f

    pairs = frozenset({("out", "a")})
    _distinct(Spans(), "p", {"out": (0, 80), "a": (80, 160), "b": (40, 120)}, pairs)  # b overlaps, not a pair
    _distinct(Spans(), "p", {"out": (0, 80), "a": (40, 40), "b": (100, 120)}, pairs)  # an empty field
    with pytest.raises(CallArgumentError, match="'a' shares memory with 'out'|'out' shares memory with 'a'"):
        _distinct(Spans(), "p", {"out": (0, 80), "b": (10, 20), "a": (60, 90)}, pairs)  # not neighbours when sorted


def test_variables_are_renamed_and_common_neighbour_indices_shared():
    idx = ir.Let(ir.Var("C2E2CO_1", "int32"), ir.Table("C2E2CO", ir.HIndex(), 1))
    x = ir.Var("x", "float64")
    a = kernel("p_k0", ir.Let(x, load("a")), store("t", x), prologue=[idx])
    b = kernel("p_k1", ir.Let(x, load("b")), store("out", add(x, load("t"))), prologue=[idx])
    (k,) = fuse.fuse_kernels(program([a, b])).kernels()
    assert k.prologue == (idx,)  # computed once
    lets = [s.var.name for s in k.body if isinstance(s, ir.Let)]
    assert lets == ["x", "x_b"]
    assert k.body[-1] == store("out", add(ir.Var("x_b", "float64"), load("t")))


def test_renamed_variables_do_not_meet_the_second_kernels_own_names():
    x, x_b = ir.Var("x", "float64"), ir.Var("x_b", "float64")
    a = kernel("p_k0", ir.Let(x, load("a")), store("t", x))
    cond = ir.Binary("less", x, x_b, "bool")
    b = kernel("p_k1", ir.Let(x, load("b")), ir.Let(x_b, load("t")),
               ir.If(cond, (ir.Let(ir.Var("y", "float64"), x, ), store("out", x)), (store("out", x_b),)))  # fmt: skip
    (k,) = fuse.fuse_kernels(program([a, b])).kernels()
    lets = [s.var.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Let)]
    assert lets == ["x", "x_b2", "x_b", "y"] and len(set(lets)) == len(lets)
    branch = k.body[-1]
    assert branch.cond == ir.Binary("less", ir.Var("x_b2", "float64"), x_b, "bool")
    assert branch.then[-1] == store("out", ir.Var("x_b2", "float64")) and branch.orelse == (store("out", x_b),)


def test_field_arguments_touched_by_other_members_must_not_share_memory():
    p = program([kernel("p_k0", store("out", load("a", neighbour=True))), kernel("p_k1", store("out2", load("b", neighbour=True)))])
    f = fuse.fuse_kernels(p)
    assert names(f) == ["p_k0to1"]
    assert set(f.distinct) == {("out", "b"), ("out", "out2"), ("out2", "a"), ("out2", "out")}


def test_fuse_is_schedule_data():
    s = ProgramSchedule(fuse=["compute_x", "compute_x"])
    assert s.fuse == ("compute_x",) and s.fuses("compute_x") and not s.fuses("compute_y")
    assert ProgramSchedule.loads(s.dumps()) == s and ProgramSchedule(fuse="*").fuses("anything")
    with pytest.raises(ScheduleError, match="fuse"):
        ProgramSchedule(fuse=[""])
    columns = ProgramSchedule(fuse="*", fuse_columns=True)
    assert ProgramSchedule.loads(columns.dumps()) == columns and columns.to_json()["fuse_columns"] is True
    with pytest.raises(ScheduleError, match="fuse_columns: true or false"):
        ProgramSchedule(fuse_columns="yes")
    with pytest.raises(ScheduleError, match="valid: default, per_kernel"):
        ProgramSchedule.from_json({"fuse_colums": True})
    narrow = ProgramSchedule(fuse="*", fuse_scan_min_columns=262144)
    assert ProgramSchedule.loads(narrow.dumps()) == narrow and narrow.to_json()["fuse_scan_min_columns"] == 262144
    assert "fuse_scan_min_columns" not in ProgramSchedule(fuse="*").to_json()  # 0: any size
    for bad in (-1, True, 2.5):
        with pytest.raises(ScheduleError, match="fuse_scan_min_columns: a column count >= 0"):
            ProgramSchedule(fuse_scan_min_columns=bad)


def test_the_cuda_default_fuses_column_walks_only_on_large_grids(monkeypatch):
    from icoforge.backend.schedule.schedule import VENDOR_SCAN_MIN_COLUMNS, default_program_schedule

    cuda = default_program_schedule("cuda")
    # REGIONAL's 44,640 columns: the predictor unfused was faster; R2B6's 327,680: fused was
    assert 44_640 < cuda.fuse_scan_min_columns == VENDOR_SCAN_MIN_COLUMNS["cuda"] <= 327_680
    assert default_program_schedule("hip").fuse_scan_min_columns == 0
    # a schedule given as JSON fuses what it names at any size, unless it says otherwise
    monkeypatch.setenv("ICOFORGE_SCHEDULE", '{"fuse": ["*"]}')
    assert schedule_from_env("cuda").fuse_scan_min_columns == 0
    monkeypatch.setenv("ICOFORGE_SCHEDULE", '{"fuse": ["*"], "fuse_scan_min_columns": 5}')
    assert schedule_from_env("cuda").fuse_scan_min_columns == 5


def test_schedule_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ICOFORGE_SCHEDULE", '{"fuse": ["*"]}')
    s = schedule_from_env("cuda")
    assert s.fuses("p") and s.default == VENDOR_DEFAULTS["cuda"]  # the vendor default stays
    path = tmp_path / "s.json"
    path.write_text('{"default": {"block": [64, 2]}}')
    monkeypatch.setenv("ICOFORGE_SCHEDULE", str(path))
    assert schedule_from_env("cuda").default.block == (64, 2) and not schedule_from_env("cuda").fuse
    monkeypatch.setenv("ICOFORGE_SCHEDULE", "{not json")
    with pytest.raises(ScheduleError, match="not valid JSON"):
        schedule_from_env("cuda")


# --- fused code against the CPU target (CUDA by CPU emulation, icon4py's static arguments) -----

# (program, the schedule's inline policy): the programs whose kernels `fuse: *` joins, with the
# kernel and temporary counts before and after in tests/transform_counts.py. rho_theta's four C2E2CO
# gradients are fused with inlining off; with the default policy the inline pass has already
# recomputed them in the last kernel (one kernel before and after: no fusion to check).
FUSED_PROGRAMS = [
    pytest.param(name, inline, id=name if inline == "auto" else f"{name}-inline_{inline}")
    for name, inline in transform_counts.FUSED
]


def assert_matches_gt4py(name, backend, grid):
    """GT4Py's results: gtfn_cpu's stored outputs of the same variant (icon4py's int/bool scalars
    static, seed 0; icoforge/suite/gt4py_references.json). The CPU target is the second opinion."""
    from icoforge.suite import references as refs
    from icoforge.suite.catalogue import get_program

    stored = refs.check_program(get_program(name), backend, grid, refs.load_store(static="icon4py"))
    assert stored.passed, stored.summary()


@pytest.mark.parametrize("name, inline", FUSED_PROGRAMS)
def test_fused_programs_agree_with_the_cpu_target(name, inline, tiny_grid):
    """rho_theta (inline off), perturbed quantities, predictor and corrector solvers with `fuse: *`:
    fewer kernels (and for the solvers one temporary fewer) than before the fuse pass, at the counts
    of transform_counts.FUSED; the CUDA code by emulation agrees with GT4Py's stored outputs and with
    the CPU target."""
    from icoforge.backend.runtime.emulate import make_emulated_backend
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=("*",), inline=inline)
    counts = transform_counts.fuse_counts(name, tiny_grid, schedule, seed=31)
    transform_counts.assert_transformed(name, *counts, transform_counts.expected(transform_counts.FUSED, (name, inline)))
    backend = make_emulated_backend("cuda", schedule)
    assert_matches_gt4py(name, backend, tiny_grid)
    res = verify(get_program(name), backend, "icoforge-cpu", tiny_grid, seed=31, rtol=1e-12)
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs)


def test_column_fused_program_agrees_with_the_cpu_target(tiny_grid):
    """The tangential wind and the edge quantities that read it one level down, one column walk
    (fuse_columns) in compute_horizontal_velocity_quantities_and_fluxes: 3 kernels before the fuse
    pass, 2 after (transform_counts.COLUMN_FUSED); CUDA code by emulation against GT4Py's stored
    outputs and the CPU target."""
    from icoforge.backend.runtime.emulate import make_emulated_backend
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    name = "compute_horizontal_velocity_quantities_and_fluxes"
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=("*",), fuse_columns=True)
    counts = transform_counts.fuse_counts(name, tiny_grid, schedule, seed=41)
    transform_counts.assert_transformed(name, *counts, transform_counts.expected(transform_counts.COLUMN_FUSED, name))
    backend = make_emulated_backend("cuda", schedule)
    assert_matches_gt4py(name, backend, tiny_grid)
    res = verify(get_program(name), backend, "icoforge-cpu", tiny_grid, seed=41, rtol=1e-12)
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs)


@pytest.mark.gpu
@pytest.mark.parametrize("name, inline", FUSED_PROGRAMS)
def test_fused_programs_on_the_gpu_agree_with_the_cpu_target(name, inline, tiny_grid):
    """The programs of test_fused_programs_agree_with_the_cpu_target on a GPU, the fusion shown by
    the same counts."""
    from icoforge.backend.runtime.gpu import cupy_vendor, make_gpu_backend
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    vendor = cupy_vendor()
    if vendor is None:
        pytest.skip("needs CuPy and a CUDA/ROCm GPU")
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS[vendor], fuse=("*",), inline=inline)
    counts = transform_counts.fuse_counts(name, tiny_grid, schedule, seed=37)
    transform_counts.assert_transformed(name, *counts, transform_counts.expected(transform_counts.FUSED, (name, inline)))
    backend = make_gpu_backend(vendor, schedule)
    assert_matches_gt4py(name, backend, tiny_grid)
    res = verify(get_program(name), backend, "icoforge-cpu", tiny_grid, seed=37, rtol=1e-12)
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs)


@pytest.mark.slow
def test_fused_granule_agrees_with_gtfn_cpu_and_the_cpu_target(monkeypatch, icoforge_cache):
    """Every program of the granule's variants with `fuse: *`, CUDA code by emulation, three
    substeps from the same state: first against GT4Py -- the granule's recorded gtfn_cpu reference
    (tests/granule/data/r2b3_l10_gtfn_cpu.json, programs and static fields by gtfn_cpu: the
    unfused granule test's, with its per-point check, tests/granule_checks.py) -- then, as a
    second opinion, bit-identical to icoforge-cpu (R2B3/10). The variants bind
    icon4py's static arguments, which makes kernels neighbours. And every substep run as one
    program fused across programs (backend/runtime/substep.py), each first run proven against the fused
    programs one by one (one granule for both: it takes minutes to build). Fusion shown: fewer
    kernels than the CPU target for compute_perturbed_quantities_and_interpolation, and fewer
    kernels and bytes for every substep sequence fused across programs. Planted (2026-12-06, by a
    pytest plugin wrapping verify.run_sequence, not kept): golden.plant_one_point_fault, 1e-10
    max|x| on vn in the middle substep of icoforge-emulated-cuda's results, fails it at the gtfn_cpu
    assertion (1.0e-10 > 5e-11)."""
    import pathlib

    from icoforge.granule import golden
    from icoforge.granule.greenline import GreenlineOptions, run_greenline
    from tests import granule_checks

    reference = pathlib.Path(__file__).parents[1] / "granule" / "data" / "r2b3_l10_gtfn_cpu.json"
    granule_checks.assert_independent(golden.load(reference))
    monkeypatch.setenv("ICOFORGE_SCHEDULE", '{"fuse": ["*"]}')
    opts = GreenlineOptions(grid="R2B3", levels=10, backends=("icoforge-cpu", "icoforge-emulated-cuda"), steps=1,
                            warmup=0, profile_steps=1, verify=True, only_used_variants=True, substep_fusion=True,
                            reference_file=str(reference), rtol=granule_checks.RTOL)  # fmt: skip
    from icoforge.perf.model import sequence_bytes

    report = run_greenline(opts, byte_model=sequence_bytes)
    cpu_vs_gt4py, fused_vs_gt4py, cmp = report.comparisons  # recorded first (every backend), then live
    for c, backend in ((fused_vs_gt4py, "icoforge-emulated-cuda"), (cpu_vs_gt4py, "icoforge-cpu")):
        assert (c.backend, c.reference) == (backend, "gtfn_cpu (recorded)")
        assert c.passed, f"{backend} vs gtfn_cpu (recorded): {c.worst()}"
    assert (cmp.backend, cmp.reference) == ("icoforge-emulated-cuda", "icoforge-cpu")  # the second opinion
    worst = cmp.worst()
    assert set(worst) == {"vn", "w", "rho", "exner", "theta_v"}
    assert cmp.passed and all(v == 0.0 for v in worst.values()), worst
    cpu, emulated = ({p.name: p.kernels for p in r.programs} for r in report.results)
    # rho_theta's four gradients are recomputed in its last kernel by the inline pass (one kernel
    # left on both targets); perturbed quantities keeps kernels over the same cells to fuse
    name = "compute_perturbed_quantities_and_interpolation"
    assert emulated[name] < cpu[name], (name, emulated[name], cpu[name])
    substeps = report.results[1].substep_fusion
    assert substeps["refused"] == [] and substeps["runs"]["one_by_one"] == 0 and substeps["runs"]["composed"] >= 6, substeps
    for s in substeps["sequences"]:  # fused across programs: fewer kernels, fewer bytes
        assert s["checked"] and s["kernels_fused"] < s["kernels_composed"] and s["bytes_composed"] < s["bytes_one_by_one"], s
    assert report.results[0].substep_fusion is None  # the C++ target does not defer
    # whole dycore steps with one sync each were timed too, their substeps composed
    assert len(report.results[1].chained_step_ms) == opts.steps
