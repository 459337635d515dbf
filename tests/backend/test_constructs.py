"""Each construct the lowering handles, in a small GT4Py program of our own, checked against
GT4Py's embedded backend on a real ICON grid (R2B3 with pentagons, so V2E has skip values).

Outputs are poisoned with NaN before each run; whole arrays are compared; NaN never passes.
"""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import abs, astype, broadcast, cos, exp, max_over, neighbor_sum, sin, sqrt, where  # noqa: A004
from gt4py.next.experimental import concat_where
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E, V2E

from icoforge import settings
from icoforge.backend import make_backend
from icoforge.errors import IcoforgeError

CellDim, EdgeDim, VertexDim, KDim = dims.CellDim, dims.EdgeDim, dims.VertexDim, dims.KDim
C2EDim, V2EDim = dims.C2EDim, dims.V2EDim
f64 = gtx.float64


# --- the programs -----------------------------------------------------------------------------


@gtx.field_operator
def _c2e_sum(e: gtx.Field[[EdgeDim, KDim], f64], w: gtx.Field[[CellDim, C2EDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return neighbor_sum(w * e(C2E), axis=C2EDim)


@gtx.program
def c2e_sum(e: gtx.Field[[EdgeDim, KDim], f64], w: gtx.Field[[CellDim, C2EDim], f64], out: gtx.Field[[CellDim, KDim], f64]):
    _c2e_sum(e, w, out=out)


@gtx.program
def c2e_sum_part(
    e: gtx.Field[[EdgeDim, KDim], f64], w: gtx.Field[[CellDim, C2EDim], f64], out: gtx.Field[[CellDim, KDim], f64],
    n: gtx.int32,
):  # fmt: skip
    _c2e_sum(e, w, out=out, domain={CellDim: (0, n), KDim: (0, 10)})


@gtx.field_operator
def _v2e_max(e: gtx.Field[[EdgeDim, KDim], f64]) -> gtx.Field[[VertexDim, KDim], f64]:
    # V2E has skip values at the 12 pentagon vertices
    return max_over(e(V2E), axis=V2EDim) + neighbor_sum(e(V2E), axis=V2EDim)


@gtx.program
def v2e_max(e: gtx.Field[[EdgeDim, KDim], f64], out: gtx.Field[[VertexDim, KDim], f64]):
    _v2e_max(e, out=out)


@gtx.field_operator
def _vertical_and_temporary(
    a: gtx.Field[[CellDim, KDim], f64], c: gtx.Field[[CellDim], f64], e: gtx.Field[[EdgeDim, KDim], f64]
) -> gtx.Field[[CellDim, KDim], f64]:
    # a temporary (the C2E reduction is used twice), a level shift, a horizontal-only field, math
    t = neighbor_sum(e(C2E), axis=C2EDim)
    return t * a(KDim + 1) + sqrt(abs(c)) * t - a ** 2 + exp(-a)


@gtx.program
def vertical_and_temporary(
    a: gtx.Field[[CellDim, KDim], f64], c: gtx.Field[[CellDim], f64], e: gtx.Field[[EdgeDim, KDim], f64],
    out: gtx.Field[[CellDim, KDim], f64], nlev_minus_1: gtx.int32,
):  # fmt: skip
    _vertical_and_temporary(a, c, e, out=out, domain={CellDim: (0, 5120), KDim: (0, nlev_minus_1)})


@gtx.field_operator
def _branches(
    a: gtx.Field[[CellDim, KDim], f64], mask: gtx.Field[[CellDim, KDim], bool], n: gtx.Field[[CellDim, KDim], gtx.int32],
    k_split: gtx.int32,
) -> tuple[gtx.Field[[CellDim, KDim], f64], gtx.Field[[CellDim, KDim], gtx.int32]]:
    x = where(mask, a * 2.0, a - 1.0)
    y = concat_where(KDim < k_split, x, x + a(KDim - 1))
    return y, n * 3 + astype(mask, gtx.int32)


@gtx.program
def branches(
    a: gtx.Field[[CellDim, KDim], f64], mask: gtx.Field[[CellDim, KDim], bool], n: gtx.Field[[CellDim, KDim], gtx.int32],
    out_f: gtx.Field[[CellDim, KDim], f64], out_i: gtx.Field[[CellDim, KDim], gtx.int32], k_split: gtx.int32,
):  # fmt: skip
    _branches(a, mask, n, k_split, out=(out_f, out_i))


@gtx.scan_operator(axis=KDim, forward=True, init=(0.0, 1.0))
def _fwd(state: tuple[f64, f64], a: f64, b: f64) -> tuple[f64, f64]:
    return state[0] * 0.5 + a, state[1] * b


@gtx.scan_operator(axis=KDim, forward=False, init=0.0)
def _bwd(state: f64, a: f64) -> f64:
    return state + a


@gtx.program
def scans(
    a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64],
    o1: gtx.Field[[CellDim, KDim], f64], o2: gtx.Field[[CellDim, KDim], f64], o3: gtx.Field[[CellDim, KDim], f64],
):  # fmt: skip
    _fwd(a, b, out=(o1, o2))
    _bwd(a, out=o3)


@gtx.field_operator
def _scaled(a: gtx.Field[[EdgeDim, KDim], f64], flag: bool, s: f64) -> gtx.Field[[EdgeDim, KDim], f64]:
    # a scalar `if` in a field operator becomes a host-side IfStmt after GT4Py's passes
    if flag:
        r = a * s + broadcast(s, (EdgeDim, KDim))
    else:
        r = a * (s * 0.5 + 1.0)
    return r


@gtx.program
def host_if(a: gtx.Field[[EdgeDim, KDim], f64], out: gtx.Field[[EdgeDim, KDim], f64], flag: bool, s: f64):
    _scaled(a, flag, s, out=out)


@gtx.field_operator
def _to_cartesian(
    lat: gtx.Field[[EdgeDim], f64], lon: gtx.Field[[EdgeDim], f64], h: gtx.Field[[EdgeDim, KDim], f64]
) -> tuple[gtx.Field[[EdgeDim], f64], gtx.Field[[EdgeDim], f64], gtx.Field[[EdgeDim, KDim], f64]]:
    # called directly with out=(x, y, z), as icon4py's geometry calls geographical_to_cartesian_*:
    # GT4Py then hands the backend one tuple-of-fields parameter
    return cos(lat) * cos(lon), cos(lat) * sin(lon), h * sin(lat)


@gtx.program
def to_cartesian(
    lat: gtx.Field[[EdgeDim], f64], lon: gtx.Field[[EdgeDim], f64], h: gtx.Field[[EdgeDim, KDim], f64],
    out: tuple[gtx.Field[[EdgeDim], f64], gtx.Field[[EdgeDim], f64], gtx.Field[[EdgeDim, KDim], f64]],
):  # fmt: skip
    _to_cartesian(lat, lon, h, out=out)


@gtx.field_operator
def _clash(
    a: gtx.Field[[CellDim, KDim], f64], b: gtx.Field[[CellDim, KDim], f64], e: gtx.Field[[EdgeDim, KDim], f64], s: f64
) -> gtx.Field[[CellDim, KDim], f64]:
    return a + b * s + neighbor_sum(e(C2E), axis=C2EDim)


@gtx.program
def names_of_the_host_plan(
    rt: gtx.Field[[CellDim, KDim], f64], np: gtx.Field[[CellDim, KDim], f64], math: gtx.Field[[EdgeDim, KDim], f64],
    kernels: gtx.Field[[CellDim, KDim], f64], h0: gtx.int32, args: f64,
):  # fmt: skip
    # parameters named as the host plan's own names (the runtime, modules, launch arguments, bounds)
    _clash(rt, np, math, args, out=kernels, domain={CellDim: (0, h0), KDim: (0, 10)})


# --- harness ------------------------------------------------------------------------------------

ICOFORGE = make_backend("cpu")
# Both layouts the CPU target meets: NumPy C order (levels contiguous) and GT4Py's allocator
# (horizontal contiguous); the generated code picks its loop order per call.
LAYOUT = {"allocator": None}


@pytest.fixture(autouse=True, params=["numpy-order", "gt4py-allocator"])
def layout(request):
    LAYOUT["allocator"] = np if request.param == "numpy-order" else ICOFORGE
    yield request.param
    LAYOUT["allocator"] = None


def _as_field(dims_, data):
    return gtx.as_field(dims_, data, allocator=LAYOUT["allocator"])


def _field(dims_, shape, rng, dtype=np.float64):
    if dtype == bool:
        return _as_field(dims_, rng.random(shape) < 0.5)
    if np.issubdtype(dtype, np.integer):
        return _as_field(dims_, rng.integers(-50, 50, shape).astype(dtype))
    return _as_field(dims_, rng.random(shape) + 0.1)


def _poisoned(dims_, shape, dtype=np.float64):
    fill = np.nan if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
    return _as_field(dims_, np.full(shape, fill, dtype=dtype))


def test_layouts_differ(tiny_grid, layout):
    f = _field([CellDim, KDim], (tiny_grid.num_cells, 10), np.random.default_rng(0))
    assert (f.ndarray.strides[1] == 8) == (layout == "numpy-order")


def run_both(program, grid, make_args, outputs):
    """Run with icoforge and embedded on the same fresh inputs; return [(ours, ref)] per output."""
    results = []
    for backend in (ICOFORGE, None):
        rng = np.random.default_rng(1234)  # same inputs for both backends
        args = make_args(rng)
        program.with_backend(backend)(**args, offset_provider=grid.connectivities)
        results.append([args[o].asnumpy().copy() for o in outputs])
    return list(zip(*results))


def assert_same(ours, ref, rtol=1e-12):
    ref_written = ~np.isnan(ref) if ref.dtype.kind == "f" else ref != np.iinfo(ref.dtype).min
    ours_written = ~np.isnan(ours) if ours.dtype.kind == "f" else ours != np.iinfo(ours.dtype).min
    np.testing.assert_array_equal(ours_written, ref_written, err_msg="written points differ")
    assert ref_written.any(), "reference wrote nothing: the test checks nothing"
    np.testing.assert_allclose(ours[ref_written], ref[ref_written], rtol=rtol, atol=0)


# --- tests ----------------------------------------------------------------------------------------


def test_c2e_reduction_with_sparse_field(tiny_grid):
    g, nk = tiny_grid, 10
    pairs = run_both(
        c2e_sum, g,
        lambda r: dict(e=_field([EdgeDim, KDim], (g.num_edges, nk), r), w=_field([CellDim, C2EDim], (g.num_cells, 3), r),
                       out=_poisoned([CellDim, KDim], (g.num_cells, nk))),
        ["out"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)


def test_reduction_over_skip_values(tiny_grid):
    g, nk = tiny_grid, 10
    assert g.connectivities["V2E"].skip_value is not None
    assert (g.connectivities["V2E"].asnumpy() == -1).any(), "grid has no pentagons: skip path untested"
    pairs = run_both(
        v2e_max, g,
        lambda r: dict(e=_field([EdgeDim, KDim], (g.num_edges, nk), r), out=_poisoned([VertexDim, KDim], (g.num_vertices, nk))),
        ["out"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)


def test_temporary_level_shift_and_math(tiny_grid):
    g, nk = tiny_grid, 10
    pairs = run_both(
        vertical_and_temporary, g,
        lambda r: dict(a=_field([CellDim, KDim], (g.num_cells, nk), r), c=_field([CellDim], (g.num_cells,), r),
                       e=_field([EdgeDim, KDim], (g.num_edges, nk), r), out=_poisoned([CellDim, KDim], (g.num_cells, nk)),
                       nlev_minus_1=gtx.int32(nk - 1)),
        ["out"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)
        assert np.isnan(ours[:, nk - 1]).all(), "the last level is outside the domain and must stay untouched"


def test_where_concat_where_bool_and_int_fields(tiny_grid):
    g, nk = tiny_grid, 10
    pairs = run_both(
        branches, g,
        lambda r: dict(a=_field([CellDim, KDim], (g.num_cells, nk), r), mask=_field([CellDim, KDim], (g.num_cells, nk), r, bool),
                       n=_field([CellDim, KDim], (g.num_cells, nk), r, np.int32),
                       out_f=_poisoned([CellDim, KDim], (g.num_cells, nk)),
                       out_i=_poisoned([CellDim, KDim], (g.num_cells, nk), np.int32), k_split=gtx.int32(3)),
        ["out_f", "out_i"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)


def test_forward_tuple_scan_and_backward_scan(tiny_grid):
    g, nk = tiny_grid, 10
    pairs = run_both(
        scans, g,
        lambda r: dict(a=_field([CellDim, KDim], (g.num_cells, nk), r), b=_field([CellDim, KDim], (g.num_cells, nk), r),
                       o1=_poisoned([CellDim, KDim], (g.num_cells, nk)), o2=_poisoned([CellDim, KDim], (g.num_cells, nk)),
                       o3=_poisoned([CellDim, KDim], (g.num_cells, nk))),
        ["o1", "o2", "o3"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)


@pytest.mark.parametrize("flag", [True, False])
def test_host_side_scalar_expression(tiny_grid, flag):
    g, nk = tiny_grid, 10
    pairs = run_both(
        host_if, g,
        lambda r: dict(a=_field([EdgeDim, KDim], (g.num_edges, nk), r), out=_poisoned([EdgeDim, KDim], (g.num_edges, nk)),
                       flag=flag, s=2.5),
        ["out"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)


def test_field_operator_writing_a_tuple_of_fields(tiny_grid):
    g, nk = tiny_grid, 10
    results = []
    for backend in (ICOFORGE, None):
        r = np.random.default_rng(99)
        lat, lon = (_field([EdgeDim], (g.num_edges,), r) for _ in range(2))
        h = _field([EdgeDim, KDim], (g.num_edges, nk), r)
        out = (_poisoned([EdgeDim], (g.num_edges,)), _poisoned([EdgeDim], (g.num_edges,)), _poisoned([EdgeDim, KDim], (g.num_edges, nk)))
        _to_cartesian.with_backend(backend)(lat, lon, h, out=out, offset_provider=g.connectivities)
        results.append([o.asnumpy().copy() for o in out])
    for ours, ref in zip(*results):
        assert_same(ours, ref)
        assert not np.isnan(ours).any()


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_tuple_of_fields_through_the_gpu_host_plan(tiny_grid, vendor):
    """A program with a tuple-of-fields parameter; the CUDA/HIP host plan unpacks the tuple too
    (kernels run by CPU emulation)."""
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    g, nk = tiny_grid, 10
    r = np.random.default_rng(5)
    lat, lon = (_field([EdgeDim], (g.num_edges,), r) for _ in range(2))
    h = _field([EdgeDim, KDim], (g.num_edges, nk), r)

    def poisoned():
        return (_poisoned([EdgeDim], (g.num_edges,)), _poisoned([EdgeDim], (g.num_edges,)), _poisoned([EdgeDim, KDim], (g.num_edges, nk)))

    ref, ours_cpu, ours_gpu = poisoned(), poisoned(), poisoned()
    to_cartesian.with_backend(None)(lat, lon, h, ref, offset_provider=g.connectivities)
    to_cartesian.with_backend(ICOFORGE)(lat, lon, h, ours_cpu, offset_provider=g.connectivities)
    program = program_ir(to_cartesian, g.connectivities)
    assert program.tuple_params == ((3, 3),)
    art = gpu_artifact(program, vendor, ProgramSchedule(VENDOR_DEFAULTS[vendor]))
    load_emulated(art)(lat, lon, h, ours_gpu, offset_provider=g.connectivities)
    for cpu, gpu, expected in zip(ours_cpu, ours_gpu, ref):
        for ours in (cpu, gpu):
            assert_same(ours.asnumpy(), expected.asnumpy())
            assert not np.isnan(ours.asnumpy()).any()


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_parameters_named_like_the_host_plans_own_names(tiny_grid, vendor):
    """Fields called `rt`, `np`, `math`, `kernels`, scalars `h0`, `args`: the host plan names every
    program symbol `<role>_<name>`, so they clash with nothing (kernels run by CPU emulation; the C++
    target too)."""
    from icoforge.backend.codegen.host import names
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    g, nk, n = tiny_grid, 10, 300
    r = np.random.default_rng(17)
    a, b = (_field([CellDim, KDim], (g.num_cells, nk), r) for _ in range(2))
    e = _field([EdgeDim, KDim], (g.num_edges, nk), r)
    c2e = g.connectivities["C2E"].asnumpy()
    expected = a.asnumpy() + b.asnumpy() * 0.5 + e.asnumpy()[c2e].sum(axis=1)
    art = gpu_artifact(program_ir(names_of_the_host_plan, g.connectivities), vendor, ProgramSchedule(VENDOR_DEFAULTS[vendor]))
    assert f"{names.arg('rt')}, {names.arg('np')}," in art.host_plan
    runs = {"gpu": load_emulated(art), "cpp": names_of_the_host_plan.with_backend(ICOFORGE)}
    for label, run in runs.items():
        out = _poisoned([CellDim, KDim], (g.num_cells, nk))
        run(a, b, e, out, gtx.int32(n), 0.5, offset_provider=g.connectivities)
        np.testing.assert_allclose(out.asnumpy()[:n], expected[:n], rtol=1e-13, atol=0, err_msg=label)
        assert np.isnan(out.asnumpy()[n:]).all(), label


def test_tuple_argument_of_the_wrong_length_is_refused():
    from icoforge.backend.runtime.workflow import flat_call_args
    from icoforge.errors import CallArgumentError

    assert flat_call_args((1, (2, 3), 4), ((1, 2),), "p") == (1, 2, 3, 4)
    with pytest.raises(CallArgumentError, match="argument 2 must be a tuple of 3 fields, got a tuple of 2"):
        flat_call_args((1, (2, 3)), ((1, 3),), "p")


def test_field_covering_only_what_the_neighbour_rows_reference(tiny_grid):
    """On a limited-area grid GT4Py sizes a temporary to the indices the kernel's own table rows
    hold (no lateral-boundary vertices, say): such a field is accepted, one index less is refused."""
    g, nk, n = tiny_grid, 10, 300
    rows = g.connectivities["C2E"].asnumpy()[:n]
    lo, hi = int(rows.min()), int(rows.max()) + 1
    assert lo > 0 or hi < g.num_edges, "the rows reference every edge: the test checks nothing"
    rng = np.random.default_rng(8)
    e_data, w_data = rng.random((hi - lo, nk)), rng.random((g.num_cells, 3))
    e = gtx.as_field(gtx.domain({EdgeDim: (lo, hi), KDim: (0, nk)}), e_data.copy())
    out = _poisoned([CellDim, KDim], (g.num_cells, nk))
    c2e_sum_part.with_backend(ICOFORGE)(e, _as_field([CellDim, C2EDim], w_data), out, gtx.int32(n), offset_provider=g.connectivities)
    # NumPy reference (GT4Py's embedded backend evaluates C2E over all cells and cannot take it)
    expected = np.einsum("cj,cjk->ck", w_data[:n], e_data[rows - lo])
    got = out.asnumpy()
    np.testing.assert_allclose(got[:n], expected, rtol=1e-13, atol=0)
    assert np.isnan(got[n:]).all(), "cells outside the domain must stay untouched"
    short = gtx.as_field(gtx.domain({EdgeDim: (lo + 1, hi), KDim: (0, nk)}), e_data[1:].copy())
    with pytest.raises(IcoforgeError, match=rf"field 'e' covers Edge \[{lo + 1}, {hi}\) but the kernel accesses \[{lo}, {hi}\)"):
        c2e_sum_part.with_backend(ICOFORGE)(
            short, _as_field([CellDim, C2EDim], w_data), _poisoned([CellDim, KDim], (g.num_cells, nk)), gtx.int32(n),
            offset_provider=g.connectivities,
        )


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
def test_gpu_host_plan_checks_field_extents(tiny_grid, vendor):
    """The CUDA/HIP host plan checks what the C++ target checks (kernels run by CPU emulation)."""
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

    g, nk, n = tiny_grid, 10, 300
    rows = g.connectivities["C2E"].asnumpy()[:n]
    lo, hi = int(rows.min()), int(rows.max()) + 1
    rng = np.random.default_rng(9)
    e_data, w_data = rng.random((hi - lo, nk)), rng.random((g.num_cells, 3))
    run = load_emulated(gpu_artifact(program_ir(c2e_sum_part, g.connectivities), vendor, ProgramSchedule(VENDOR_DEFAULTS[vendor])))
    out = _poisoned([CellDim, KDim], (g.num_cells, nk))
    e = gtx.as_field(gtx.domain({EdgeDim: (lo, hi), KDim: (0, nk)}), e_data.copy())
    run(e, _as_field([CellDim, C2EDim], w_data), out, gtx.int32(n), offset_provider=g.connectivities)
    np.testing.assert_allclose(out.asnumpy()[:n], np.einsum("cj,cjk->ck", w_data[:n], e_data[rows - lo]), rtol=1e-13, atol=0)
    short = gtx.as_field(gtx.domain({EdgeDim: (lo, hi - 1), KDim: (0, nk)}), e_data[:-1].copy())
    with pytest.raises(IcoforgeError, match=rf"field 'e' covers Edge \[{lo}, {hi - 1}\) but the kernel accesses \[{lo}, {hi}\)"):
        run(short, _as_field([CellDim, C2EDim], w_data), out, gtx.int32(n), offset_provider=g.connectivities)
    few_cells = _as_field([CellDim, C2EDim], w_data[: n - 1])
    with pytest.raises(IcoforgeError, match=r"field 'w' covers Cell"):
        run(e, few_cells, out, gtx.int32(n), offset_provider=g.connectivities)
    c2e = g.connectivities["C2E"]
    short_table = dict(g.connectivities)  # a C2E table without the domain's last cell
    short_table["C2E"] = gtx.as_connectivity(domain=c2e.domain.dims, codomain=c2e.codomain, data=rows[:-1].copy(), skip_value=c2e.skip_value)
    with pytest.raises(IcoforgeError, match=rf"field 'C2E' covers Cell \[0, {n - 1}\) but the kernel accesses \[0, {n}\)"):
        run(e, _as_field([CellDim, C2EDim], w_data), out, gtx.int32(n), offset_provider=short_table)


def test_table_without_the_domain_rows_is_refused(tiny_grid):
    g, nk, n = tiny_grid, 10, 300
    c2e = g.connectivities["C2E"]
    short_table = dict(g.connectivities)  # a C2E table without the domain's last cell
    short_table["C2E"] = gtx.as_connectivity(
        domain=c2e.domain.dims, codomain=c2e.codomain, data=c2e.asnumpy()[: n - 1].copy(), skip_value=c2e.skip_value
    )
    rng = np.random.default_rng(10)
    args = (_field([EdgeDim, KDim], (g.num_edges, nk), rng), _field([CellDim, C2EDim], (g.num_cells, 3), rng),
            _poisoned([CellDim, KDim], (g.num_cells, nk)), gtx.int32(n))  # fmt: skip
    with pytest.raises(IcoforgeError, match=rf"field 'C2E' covers Cell \[0, {n - 1}\) but the kernel accesses \[0, {n}\)"):
        c2e_sum_part.with_backend(ICOFORGE)(*args, offset_provider=short_table)


def test_field_of_the_wrong_shape_is_refused(tiny_grid):
    g, nk = tiny_grid, 10
    rng = np.random.default_rng(0)
    short = _field([EdgeDim, KDim], (g.num_edges // 2, nk), rng)  # too few edges for C2E
    w = _field([CellDim, C2EDim], (g.num_cells, 3), rng)
    out = _poisoned([CellDim, KDim], (g.num_cells, nk))
    with pytest.raises(IcoforgeError, match="field 'e' covers Edge"):
        c2e_sum.with_backend(ICOFORGE)(short, w, out, offset_provider=g.connectivities)


# GT4Py's compile workers keep the settings they started with (`settings.overridden` does not reach
# them), so each of the next two tests runs on the path the whole session runs (ICOFORGE_EARLY_GTIR)


@pytest.mark.skipif(settings.current().early_gtir, reason="GT4Py's full list only (ICOFORGE_EARLY_GTIR=0)")
def test_aliased_output_on_the_full_path_follows_the_statements(tiny_grid):
    """The scan kernel writes o2 (= `a`) while it reads `a`: it reads a snapshot of `a` (issue 48;
    refused before), so each statement reads what the one before wrote, as on the early path."""
    g, nk = tiny_grid, 10
    rng = np.random.default_rng(0)
    a = _field([CellDim, KDim], (g.num_cells, nk), rng)
    b = _field([CellDim, KDim], (g.num_cells, nk), rng)
    o1 = _poisoned([CellDim, KDim], (g.num_cells, nk))
    new_a = np.cumprod(b.asnumpy(), axis=1)
    scans.with_backend(ICOFORGE)(a, b, o1, a, o1, offset_provider=g.connectivities)
    np.testing.assert_allclose(a.asnumpy(), new_a, rtol=1e-14, atol=0)
    np.testing.assert_allclose(o1.asnumpy(), np.cumsum(new_a[:, ::-1], axis=1)[:, ::-1], rtol=1e-12, atol=0)


def test_output_sharing_memory_with_an_input_reads_the_input_as_it_was(tiny_grid):
    """icon4py's tracer advection passes one field as input and output (`tracer_now` and
    `tracer_new`, issue 48): the kernel reads a snapshot of the input, so the result is the
    statement's, as GT4Py's embedded backend computes it (it writes the output after computing
    all of it), also where the input is read at another level (`a(KDim - 1)`: read in place, the
    level below would already be overwritten). Refused before issue 48. On GT4Py's full list the
    program's copy forwarding moved the write of out_f, and the call is refused as it was."""
    g, nk = tiny_grid, 10
    if not settings.current().early_gtir:
        rng = np.random.default_rng(0)
        a = _field([CellDim, KDim], (g.num_cells, nk), rng)
        args = (a, _field([CellDim, KDim], (g.num_cells, nk), rng, bool), _field([CellDim, KDim], (g.num_cells, nk), rng, np.int32),
                a, _poisoned([CellDim, KDim], (g.num_cells, nk), np.int32), gtx.int32(3))  # fmt: skip
        with pytest.raises(IcoforgeError, match="branches: field 'out_f' is written while its memory is also passed as 'a'"):
            branches.with_backend(ICOFORGE)(*args, offset_provider=g.connectivities)
        return
    pairs = run_both(
        branches, g,
        lambda r: (lambda a: dict(a=a, mask=_field([CellDim, KDim], (g.num_cells, nk), r, bool),
                                  n=_field([CellDim, KDim], (g.num_cells, nk), r, np.int32), out_f=a,
                                  out_i=_poisoned([CellDim, KDim], (g.num_cells, nk), np.int32), k_split=gtx.int32(3)))(
            _field([CellDim, KDim], (g.num_cells, nk), r)),
        ["a", "out_i"],
    )  # fmt: skip
    for ours, ref in pairs:
        assert_same(ours, ref)


@pytest.mark.skipif(not settings.current().early_gtir, reason="the early-GTIR path only (the default; ICOFORGE_EARLY_GTIR unset or 1)")
def test_aliased_output_on_the_early_path_follows_the_statements(tiny_grid):
    """The early GTIR's lowering moves no write earlier here, so the call is accepted, and each
    statement reads what the one before wrote: `a` (= o2) becomes the product scan of `b`, then
    o1 (= o3) the backward sum of that new `a`."""
    g, nk = tiny_grid, 10
    rng = np.random.default_rng(0)
    a = _field([CellDim, KDim], (g.num_cells, nk), rng)
    b = _field([CellDim, KDim], (g.num_cells, nk), rng)
    o1 = _poisoned([CellDim, KDim], (g.num_cells, nk))
    new_a = np.cumprod(b.asnumpy(), axis=1)
    scans.with_backend(ICOFORGE)(a, b, o1, a, o1, offset_provider=g.connectivities)
    np.testing.assert_allclose(a.asnumpy(), new_a, rtol=1e-14, atol=0)
    np.testing.assert_allclose(o1.asnumpy(), np.cumsum(new_a[:, ::-1], axis=1)[:, ::-1], rtol=1e-12, atol=0)
