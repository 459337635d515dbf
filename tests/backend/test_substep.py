"""Work across programs (icoforge.backend.runtime.compose, icoforge.backend.runtime.substep): program calls in a
`SubstepFusion` block recorded, composed into one program, fused across program boundaries, and
run; on R2B3 through the CUDA code run by CPU emulation, against the calls run one by one."""

from __future__ import annotations

import dataclasses

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import sqrt
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E

from icoforge.backend.runtime import compose
from icoforge.backend.ir import ir
from icoforge.backend.runtime.substep import SubstepFusion
from icoforge.errors import IcoforgeError

CellDim, EdgeDim, KDim, C2EDim = dims.CellDim, dims.EdgeDim, dims.KDim, dims.C2EDim
f64 = gtx.float64
NK = 10


@gtx.field_operator
def _produce(a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return a * 2.0 + b


@gtx.program
def produce(a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64], mid: gtx.Field[[CellDim, KDim], f64], n: gtx.int32):
    _produce(a, b, out=mid, domain={CellDim: (0, n), KDim: (0, 10)})


@gtx.field_operator
def _consume(mid: gtx.Field[[CellDim, KDim], f64], a: gtx.Field[[CellDim, KDim], f64], s: f64) -> gtx.Field[[CellDim, KDim], f64]:
    return mid * s + sqrt(a)


@gtx.program
def consume(mid: gtx.Field[[CellDim, KDim], f64], a: gtx.Field[[CellDim, KDim], f64], out: gtx.Field[[CellDim, KDim], f64], s: f64, n: gtx.int32):
    _consume(mid, a, s, out=out, domain={CellDim: (0, n), KDim: (0, 10)})


@gtx.field_operator
def _edge_sum(e: gtx.Field[[EdgeDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return e(C2E[0]) + e(C2E[1]) + e(C2E[2])


@gtx.program
def edge_sum(e: gtx.Field[[EdgeDim, KDim], f64], out: gtx.Field[[CellDim, KDim], f64], n: gtx.int32):
    _edge_sum(e, out=out, domain={CellDim: (0, n), KDim: (0, 10)})


@pytest.fixture(scope="module")
def emulated():
    from icoforge.backend.runtime.emulate import make_emulated_backend

    return make_emulated_backend("cuda")


def _fields(grid, seed):
    r = np.random.default_rng(seed)
    nc = grid.num_cells
    cell = lambda: gtx.as_field([CellDim, KDim], r.random((nc, NK)) + 0.1)  # noqa: E731
    poison = lambda: gtx.as_field([CellDim, KDim], np.full((nc, NK), np.nan))  # noqa: E731
    e = gtx.as_field([EdgeDim, KDim], r.random((grid.num_edges, NK)))
    return dict(a=cell(), b=cell(), mid=poison(), out=poison(), out2=poison(), e=e)


def _substep(backend, grid, f, s=0.5):
    n = grid.num_cells
    op = grid.connectivities
    produce.with_backend(backend)(f["a"], f["b"], f["mid"], n, offset_provider=op)
    consume.with_backend(backend)(f["mid"], f["a"], f["out"], s, n, offset_provider=op)
    edge_sum.with_backend(backend)(f["e"], f["out2"], n, offset_provider=op)


def _same_bits(x, y):
    return np.array_equal(np.asarray(x).view(np.uint64), np.asarray(y).view(np.uint64))


def test_a_sequence_seen_twice_runs_as_one_fused_program_with_the_same_bits(tiny_grid, emulated):
    """produce, consume and edge_sum (defined here) in one block: composed into one program of 3
    kernels and no temporaries, fused into 1 kernel, the same bits as the calls one by one."""
    ref = _fields(tiny_grid, 3)
    _substep(emulated, tiny_grid, ref)  # no block: one call after the other
    assert not np.isnan(ref["out"].asnumpy()).any() and not np.isnan(ref["out2"].asnumpy()).any()
    fusion = SubstepFusion(check=True)
    f = _fields(tiny_grid, 3)
    for attempt in range(3):  # the first sight of the sequence runs call by call, then composed
        for name in ("mid", "out", "out2"):
            f[name].ndarray[...] = np.nan
        with fusion:
            _substep(emulated, tiny_grid, f)
            assert np.isnan(f["out"].asnumpy()).all(), "a call in the block ran before the block ended"
        for name in ("mid", "out", "out2"):
            assert _same_bits(f[name].asnumpy(), ref[name].asnumpy()), (attempt, name)
    assert fusion.runs == {"composed": 2, "one_by_one": 1}
    assert fusion.refused == []
    (entry,) = (e for e in fusion._entries.values() if e.composition is not None)
    program = entry.composition.program
    assert [p.name for p in program.params] == ["a", "b", "mid", "out", "s_c1", "e", "out_2"]  # one param per buffer; edge_sum's `out` is another buffer
    assert all(isinstance(k.domain.h_end, ir.Const) for k in program.kernels())  # n folded into the domains
    art = entry.composed.icoforge_artifact
    # produce -> consume fused across the two programs (mid still stored: the caller sees it),
    # the neighbour kernel over the same cells joins them
    assert len(program.kernels()) == 3 and not program.temporaries  # composed: produce, consume, edge_sum
    # fused: the three kernels are one (kernel_names also lists its 64-bit-index twin, `_w`)
    from icoforge.backend.codegen.cuda import WIDE_SUFFIX

    assert [n for n in art.kernel_names if not n.endswith(WIDE_SUFFIX)] == ["c0_produce_k0_k0_k0"], art.kernel_names
    assert any(name.startswith("c0_") and "k0_k0" in name for name in art.kernel_names)


def test_a_known_block_skips_reading_its_views_and_new_buffers_do_not(tiny_grid, emulated, monkeypatch):
    """The views of a block's arguments are read once per block identity (the same field objects,
    offset providers and integer scalars); a float scalar is a parameter, so a new value keeps the
    identity and its result follows the value; new field objects are another identity."""
    from icoforge.backend.runtime import substep

    reads = []
    site = substep._site
    monkeypatch.setattr(substep, "_site", lambda call: reads.append(call) or site(call))
    fusion = SubstepFusion(after=0)
    f = _fields(tiny_grid, 4)
    for s in (0.5, 0.25):
        with fusion:
            _substep(emulated, tiny_grid, f, s=s)
        ref = _fields(tiny_grid, 4)
        _substep(emulated, tiny_grid, ref, s=s)
        assert _same_bits(f["out"].asnumpy(), ref["out"].asnumpy()), s
    assert len(reads) == 3 and fusion.runs == {"composed": 2, "one_by_one": 0}
    with fusion:
        _substep(emulated, tiny_grid, _fields(tiny_grid, 5))
    assert len(reads) == 6 and len(fusion._entries) == 2


@pytest.mark.parametrize("viewed", ["a", "mid"])
def test_overlapping_views_compose_unless_fusion_reorders_their_accesses(tiny_grid, emulated, viewed):
    """consume gets a view of `viewed` one cell further. A view of `a` (read by both programs,
    written by none): fusing produce and consume reorders nothing between the two, composed. A
    view of `mid` (produce writes it, consume reads it one cell ahead): fused, a thread would read
    a value not yet written; refused, the calls run one by one."""
    from gt4py.next import common
    from gt4py.next.embedded.nd_array_field import NumPyArrayField

    n, op = tiny_grid.num_cells, tiny_grid.connectivities
    f = _fields(tiny_grid, 4)
    f["mid"].ndarray[...] = 0.0  # the last cell of the view is read, never written
    # a view of the field's memory one cell further, over cells [0, n - 1)
    shifted = NumPyArrayField.from_array(f[viewed].ndarray[1:], domain=common.domain({CellDim: (0, n - 1), KDim: (0, NK)}))
    assert np.shares_memory(shifted.ndarray, f[viewed].ndarray)
    fusion = SubstepFusion(after=0)
    with fusion:
        produce.with_backend(emulated)(f["a"], f["b"], f["mid"], n - 1, offset_provider=op)  # same cells: fusable
        consume.with_backend(emulated)(f["mid"] if viewed == "a" else shifted, shifted if viewed == "a" else f["a"], f["out"], 0.5, n - 1,
                                       offset_provider=op)  # fmt: skip
    a, b = f["a"].asnumpy(), f["b"].asnumpy()
    mid = np.concatenate([(a * 2.0 + b)[: n - 1], np.zeros((1, NK))])
    expected = mid[: n - 1] * 0.5 + np.sqrt(a[1:]) if viewed == "a" else mid[1:] * 0.5 + np.sqrt(a[: n - 1])
    np.testing.assert_allclose(f["out"].asnumpy()[: n - 1], expected, rtol=1e-14)
    if viewed == "a":
        assert fusion.refused == [] and fusion.runs == {"composed": 1, "one_by_one": 0}, fusion.refused
    else:
        assert fusion.runs == {"composed": 0, "one_by_one": 1}
        assert len(fusion.refused) == 1 and "fusion reordered their accesses" in fusion.refused[0], fusion.refused


def test_an_exception_in_the_block_runs_the_recorded_calls_first(tiny_grid, emulated):
    f = _fields(tiny_grid, 5)
    with pytest.raises(ZeroDivisionError), SubstepFusion():
        produce.with_backend(emulated)(f["a"], f["b"], f["mid"], tiny_grid.num_cells, offset_provider=tiny_grid.connectivities)
        1 / 0  # noqa: B018
    assert not np.isnan(f["mid"].asnumpy()).any()


def test_a_cpu_target_call_in_the_block_runs_after_what_was_recorded(tiny_grid, emulated):
    from icoforge.backend import make_backend

    f = _fields(tiny_grid, 6)
    n, op = tiny_grid.num_cells, tiny_grid.connectivities
    with SubstepFusion():
        produce.with_backend(emulated)(f["a"], f["b"], f["mid"], n, offset_provider=op)
        consume.with_backend(make_backend("cpu"))(f["mid"], f["a"], f["out"], 0.5, n, offset_provider=op)  # reads mid
    a, b = f["a"].asnumpy(), f["b"].asnumpy()
    np.testing.assert_allclose(f["out"].asnumpy(), (a * 2.0 + b) * 0.5 + np.sqrt(a), rtol=1e-14)


def test_blocks_do_not_nest():
    fusion = SubstepFusion()
    with pytest.raises(IcoforgeError, match="do not nest"), fusion, fusion:
        pass


# --- compose on IR -----------------------------------------------------------------------------


def _site(program, buffers, scalars, spans=None):
    """A call of `program` over named buffers: equal names are equal views; `spans` by position
    (default: one 80-byte block per buffer name, apart from the others)."""
    spans = spans or tuple(None if b is None else (100 * ord(b), 100 * ord(b) + 80) for b in buffers)
    views = tuple(None if b is None else compose.View(ord(b) * 1000, (1, 8), ((0, 8), (0, 4)), "float64", span) for b, span in zip(buffers, spans))
    return compose.CallSite(program, views, scalars)


def _flagged(name):
    """`out = in` over [0, n) cells, under a host conditional on `flag`."""
    c = lambda v: ir.Const(v, "int32")  # noqa: E731
    dom = ir.Domain("Cell", c(0), ir.Param("n", "int32"), c(0), ir.FieldBound("out", "K", 1, True))
    k = ir.Kernel(f"{name}_k0", dom, (ir.Store("out", ir.Load("in", (ir.HIndex(), ir.KIndex()), "float64")),))
    params = (ir.FieldParam("in", ("Cell", "K"), "float64"), ir.FieldParam("out", ("Cell", "K"), "float64"),
              ir.Param("n", "int32"), ir.Param("flag", "bool"))  # fmt: skip
    return ir.ProgramIR(name, params, (), (), (ir.HostIf(ir.Param("flag", "bool"), (k,), ()),), dim_kinds=(("Cell", "horizontal"), ("K", "vertical")))


def test_compose_folds_integer_scalars_field_bounds_and_host_conditions():
    p = _flagged("copy")
    calls = [_site(p, ["x", "y", None, None], {"n": 5, "flag": True}), _site(p, ["y", "z", None, None], {"n": 7, "flag": False})]
    c = compose.compose(calls)
    (k,) = c.program.kernels()  # the second call's kernel is under a false flag: gone
    assert k.name == "c0_copy_k0"
    assert (k.domain.h_end, k.domain.k_end) == (ir.Const(5, "int32"), ir.Const(4, "int32"))
    assert [p.name for p in c.program.params] == ["in", "out", "out_2"]  # buffers x, y, z
    assert c.sources == ((0, 0), (0, 1), (1, 1))


def test_compose_lists_overlapping_views_and_refuses_a_buffer_with_two_shapes():
    p = _flagged("copy")
    overlap = [_site(p, ["x", "y", None, None], {"n": 5, "flag": True}, spans=((0, 80), (100, 180), None, None)),
               _site(p, ["w", "v", None, None], {"n": 5, "flag": True}, spans=((40, 120), (200, 280), None, None))]  # fmt: skip
    c = compose.compose(overlap)
    assert c.overlaps == (("in", "in_2"), ("out", "in_2"))  # w overlaps x and y
    c.check_order(c.program)  # nothing reordered
    with pytest.raises(compose.CompositionError, match="in and in_2 overlap"):
        c.check_order(dataclasses.replace(c.program, distinct=(("in_2", "in"),)))
    q = dataclasses.replace(p, params=(ir.FieldParam("in", ("Edge", "K"), "float64"), *p.params[1:]))
    with pytest.raises(compose.CompositionError, match="other dimensions"):
        compose.compose([_site(p, ["x", "y", None, None], {"n": 5, "flag": True}), _site(q, ["x", "z", None, None], {"n": 5, "flag": True})])



def test_a_read_only_slice_of_an_earlier_field_is_read_from_it_at_the_fixed_level():
    """icon4py passes the lowest level of a (Cell, K) field as a Cell field to a later program:
    the composed program reads the whole field at that level, so fusion sees the dependency."""
    c = lambda v: ir.Const(v, "int32")  # noqa: E731
    dom = ir.Domain("Cell", c(0), c(8), c(0), c(4))
    kinds = (("Cell", "horizontal"), ("K", "vertical"))
    write = ir.ProgramIR("w", (ir.FieldParam("z", ("Cell", "K"), "float64"),), (), (),
                         (ir.Kernel("w_k0", dom, (ir.Store("z", ir.Const(1.0, "float64")),)),), dim_kinds=kinds)  # fmt: skip
    read = ir.ProgramIR("r", (ir.FieldParam("low", ("Cell",), "float64"), ir.FieldParam("out", ("Cell", "K"), "float64")), (), (),
                        (ir.Kernel("r_k0", dom, (ir.Store("out", ir.Load("low", (ir.HIndex(),), "float64")),)),), dim_kinds=kinds)  # fmt: skip
    # z: 8 cells x 4 levels, cell-major (strides 1, 8); low = z[:, 3] starts 3 * 8 elements further
    z = compose.View(10_000, (1, 8), ((0, 8), (0, 4)), "float64", (10_000, 10_256))
    low = compose.View(10_000 + 3 * 8 * 8, (1,), ((0, 8),), "float64", (10_192, 10_256))
    out = compose.View(20_000, (1, 8), ((0, 8), (0, 4)), "float64", (20_000, 20_256))
    result = compose.compose([compose.CallSite(write, (z,), {}), compose.CallSite(read, (low, out), {})])
    assert [p.name for p in result.program.params] == ["z", "out"] and result.overlaps == ()
    load = next(e for e in result.program.kernels()[1].exprs() if isinstance(e, ir.Load))
    assert load == ir.Load("z", (ir.HIndex(), c(3)), "float64")

