"""Copy forwarding (icoforge.backend.passes.forward): which copies go, which must stay, and that the
results stay GT4Py's (CPU target and the CUDA code by emulation), including a refused call where
the caller's fields share memory."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next.experimental import concat_where
from icon4py.model.common import dimension as dims

from icoforge.backend import make_backend
from icoforge.backend.passes import forward
from icoforge.backend.ir import ir
from icoforge.errors import CallArgumentError

CellDim, KDim = dims.CellDim, dims.KDim
f64 = gtx.float64
F = gtx.Field[[CellDim, KDim], f64]
KINDS = (("Cell", "horizontal"), ("K", "vertical"))


# --- rewrites on hand-made programs ---------------------------------------------------------------


def c(v):
    return ir.Const(v, "int32")


DOM = ir.Domain("Cell", c(0), c(8), c(0), c(4))


def load(name, dk=0):
    k = ir.KIndex() if dk == 0 else ir.Binary("plus", ir.KIndex(), c(dk), "int32")
    return ir.Load(name, (ir.HIndex(), k), "float64")


def kernel(name, *stores, domain=DOM):
    return ir.Kernel(name, domain, tuple(ir.Store(f, v) for f, v in stores))


def program(steps, temps=("t",), outputs=("out",), inputs=("a", "b")):
    fields = tuple(ir.FieldParam(n, ("Cell", "K"), "float64") for n in (*inputs, *outputs))
    temporaries = tuple(ir.Temporary(t, ("Cell", "K"), "float64", DOM) for t in temps)
    return ir.ProgramIR("p", fields, temporaries, (), tuple(steps), dim_kinds=KINDS)


def add(x, y):
    return ir.Binary("plus", x, y, "float64")


def test_temporary_copied_to_an_output_is_stored_in_place():
    p = program([
        kernel("p_k0", ("t", add(load("a"), load("b")))),
        kernel("p_k1", ("x", add(load("t", -1), load("t")))),
        kernel("p_k2", ("out", load("t"))),
    ], outputs=("out", "x"))  # fmt: skip
    q = forward.forward_copies(p)
    assert [k.name for k in q.kernels()] == ["p_k0", "p_k1"]  # the copy went, names kept
    assert q.temporaries == ()
    k0, k1 = q.kernels()
    assert k0.fields_written() == ("out",)
    assert k1.fields_read() == ("out",)  # the reader at k - 1 reads the output now
    # `out` is written before p_k1 touches `x`: the two must not share memory
    assert set(q.distinct) == {("out", "a"), ("out", "b"), ("out", "x")}


def test_output_read_between_producer_and_copy_keeps_the_copy():
    p = program([
        kernel("p_k0", ("t", load("a"))),
        kernel("p_k1", ("b2", add(load("out"), load("t")))),  # reads the output's old values
        kernel("p_k2", ("out", load("t"))),
    ], temps=("t",), outputs=("out", "b2"))  # fmt: skip
    q = forward.forward_copies(p)
    # the input copy into t goes (readers read `a`), but `out` is still written last, by a copy
    assert [k.name for k in q.kernels()] == ["p_k1", "p_k2"]
    assert q.kernels()[1].body == (ir.Store("out", load("a")),)
    assert q.distinct == ()


def test_copies_that_must_stay():
    other = ir.Domain("Cell", c(0), c(8), c(1), c(4))
    cases = [
        # producer and copy over different levels: the output would get values outside its domain
        [kernel("p_k0", ("t", add(load("a"), load("b")))), kernel("p_k1", ("out", load("t")), domain=other)],
        # a shifted copy is not a copy
        [kernel("p_k0", ("t", add(load("a"), load("b")))), kernel("p_k1", ("out", load("t", 1)))],
        # two writers of the output
        [kernel("p_k0", ("t", add(load("a"), load("b")))), kernel("p_k1", ("out", load("t"))), kernel("p_k2", ("out", load("a")))],
    ]
    for steps in cases:
        p = program(steps)
        assert forward.forward_copies(p) == p


def test_chains_of_temporary_copies_collapse():
    p = program([
        kernel("p_k0", ("t1", add(load("a"), load("b")))),
        kernel("p_k1", ("t2", load("t1")), ("t3", load("b"))),
        kernel("p_k2", ("out", add(load("t2"), load("t3", -1)))),
    ], temps=("t1", "t2", "t3"))  # fmt: skip
    q = forward.forward_copies(p)
    assert [k.name for k in q.kernels()] == ["p_k0", "p_k2"]
    assert q.kernels()[1].body == (ir.Store("out", add(load("t1"), load("b", -1))),)
    assert [t.name for t in q.temporaries] == ["t1"]


def test_fields_under_a_host_conditional_are_left_alone():
    cond = ir.Param("flag", "bool")
    steps = [kernel("p_k0", ("t", add(load("a"), load("b")))), ir.HostIf(cond, (kernel("p_k1", ("out", load("t"))),), ())]
    p = program(steps)
    assert forward.forward_copies(p) == p


# --- a GT4Py program with GT4Py's copies ------------------------------------------------------------


@gtx.field_operator
def _pair(a: F, w: F) -> tuple[F, F]:
    t = a * w  # a temporary: read at k - 1 and copied into t_out
    return t, concat_where(KDim > 0, t(KDim - 1) + t, t)


@gtx.program
def pair(a: F, w: F, t_out: F, s_out: F):
    _pair(a, w, out=(t_out, s_out), domain={CellDim: (0, 5120), KDim: (0, 10)})


def _args(g, seed):
    rng = np.random.default_rng(seed)
    shape = (g.num_cells, 10)
    a, w = (gtx.as_field([CellDim, KDim], rng.random(shape) + 0.1) for _ in range(2))
    t_out, s_out = (gtx.as_field([CellDim, KDim], np.full(shape, np.nan)) for _ in range(2))
    return a, w, t_out, s_out


def test_gt4py_copies_go_and_results_stay(tiny_grid):
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    g = tiny_grid
    prog = program_ir(pair, g.connectivities)
    # GT4Py: t into a temporary, then one kernel copies it to t_out (through a named load) and computes s
    assert len(prog.kernels()) == 2 and prog.temporaries == () and prog.kernels()[0].fields_written() == ("t_out",)
    ref = _args(g, 3)
    pair.with_backend(None)(*ref, offset_provider=g.connectivities)
    ours_cpu, ours_gpu = _args(g, 3), _args(g, 3)
    pair.with_backend(make_backend("cpu"))(*ours_cpu, offset_provider=g.connectivities)
    art = gpu_artifact(prog, "cuda", ProgramSchedule(VENDOR_DEFAULTS["cuda"]))
    load_emulated(art)(*ours_gpu, offset_provider=g.connectivities)
    for ours in (ours_cpu, ours_gpu):
        for o, r in zip(ours[2:], ref[2:]):
            assert not np.isnan(o.asnumpy()).any()
            np.testing.assert_array_equal(o.asnumpy(), r.asnumpy())


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_outputs_sharing_memory_are_refused(tiny_grid, target):
    """With t_out and s_out one array, GT4Py's order leaves s in it; forwarding would leave t."""
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    g = tiny_grid
    a, w, t_out, _ = _args(g, 4)
    if target == "cpu":
        run = pair.with_backend(make_backend("cpu"))
    else:
        run = load_emulated(gpu_artifact(program_ir(pair, g.connectivities), "cuda", ProgramSchedule(VENDOR_DEFAULTS["cuda"])))
    with pytest.raises(CallArgumentError if target == "cuda" else Exception, match="t_out|s_out"):
        run(a, w, t_out, t_out, offset_provider=g.connectivities)


def test_copy_inside_the_producing_kernel():
    """Producer and copy in one kernel (the producer's store under an `If`): stored in place."""
    flag = ir.Binary("less", ir.KIndex(), c(2), "bool")
    produce = ir.If(flag, (ir.Store("t", load("a")),), (ir.Store("t", load("b")),))
    k = ir.Kernel("p_k0", DOM, (produce, ir.Store("out", load("t"))))
    q = forward.forward_copies(program([k]))
    assert q.kernels()[0].body == (ir.If(flag, (ir.Store("out", load("a")),), (ir.Store("out", load("b")),)),)
    # the copy before the store reads the temporary's previous contents: it stays
    k = ir.Kernel("p_k0", DOM, (ir.Store("out", load("t")), produce))
    p = program([k])
    assert forward.forward_copies(p) == p


def test_host_conditional_between_producer_and_copy():
    """A host conditional between producer and copy that touches other fields: the copy goes, and
    the fields of the conditional's kernels join the ones `out` must not share memory with."""
    cond = ir.Param("flag", "bool")
    steps = [
        kernel("p_k0", ("t", add(load("a"), load("b")))),
        ir.HostIf(cond, (kernel("p_k1", ("x", load("b"))),), ()),
        kernel("p_k2", ("out", load("t"))),
    ]
    q = forward.forward_copies(program(steps, outputs=("out", "x")))
    assert [k.name for k in q.kernels()] == ["p_k0", "p_k1"]
    assert ("out", "x") in q.distinct and ("out", "b") in q.distinct


def test_distinct_pairs_are_the_fields_of_the_final_kernels():
    """The kernel between out1's producer and its copy reads temporary d, a copy of input s: in the
    final program it reads s, so out1 must not share memory with s either."""
    p = program([
        kernel("p_k0", ("t1", add(load("a"), load("b")))),
        kernel("p_k1", ("d", load("s"))),
        kernel("p_k2", ("x", add(load("t1"), load("d", -1)))),
        kernel("p_k3", ("out1", load("t1"))),
    ], temps=("t1", "d"), outputs=("out1", "x"), inputs=("a", "b", "s"))  # fmt: skip
    q = forward.forward_copies(p)
    assert [k.name for k in q.kernels()] == ["p_k0", "p_k2"]
    assert q.kernels()[1].fields_read() == ("out1", "s")
    assert set(q.distinct) == {("out1", "a"), ("out1", "b"), ("out1", "s"), ("out1", "x")}
