"""The byte/flop model against numbers worked out by hand, on R2B3 (5,120 cells, 7,680 edges) with
10 levels; fields have nlev + 1 = 11 levels, as the suite allocates them."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import neighbor_sum
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E

from icoforge.backend.ir import ir
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.codegen.host import HostEvalError, domain_ranges, evaluate
from icoforge.perf.model import CallSizes, cost_of_call, expr_flops, program_cost
from icoforge.suite import get_program

CellDim, EdgeDim, KDim, C2EDim = dims.CellDim, dims.EdgeDim, dims.KDim, dims.C2EDim
f64 = gtx.float64
NC, NE, NLEV = 5120, 7680, 10


@gtx.field_operator
def _shift_diff(a: gtx.Field[[CellDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return a(KDim + 1) - a


@gtx.program
def shift_diff(
    a: gtx.Field[[CellDim, KDim], f64], out: gtx.Field[[CellDim, KDim], f64],
    h0: gtx.int32, h1: gtx.int32, k0: gtx.int32, k1: gtx.int32,
):  # fmt: skip
    _shift_diff(a, out=out, domain={CellDim: (h0, h1), KDim: (k0, k1)})


@gtx.field_operator
def _c2e_weighted(e: gtx.Field[[EdgeDim, KDim], f64], w: gtx.Field[[CellDim, C2EDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return neighbor_sum(w * e(C2E), axis=C2EDim)


@gtx.program
def c2e_weighted(
    e: gtx.Field[[EdgeDim, KDim], f64], w: gtx.Field[[CellDim, C2EDim], f64], out: gtx.Field[[CellDim, KDim], f64],
    h0: gtx.int32, h1: gtx.int32, k0: gtx.int32, k1: gtx.int32,
):  # fmt: skip
    _c2e_weighted(e, w, out=out, domain={CellDim: (h0, h1), KDim: (k0, k1)})


def field(dims_, *shape):
    return gtx.as_field(dims_, np.zeros(shape))


def bounds(h0, h1, k0, k1):
    return {"h0": gtx.int32(h0), "h1": gtx.int32(h1), "k0": gtx.int32(k0), "k1": gtx.int32(k1)}


def by_mode(kc):
    return {(t.name, t.mode): t.bytes for t in kc.traffic}


# --- hand-checked programs ------------------------------------------------------------------------


def test_pointwise_vertical_with_k_offset(tiny_grid):
    """out[c, k] = a[c, k+1] - a[c, k] on cells [100, 4000) x levels [2, 9)."""
    pir = program_ir(shift_diff, tiny_grid.connectivities)
    args = {"a": field([CellDim, KDim], NC, NLEV + 1), "out": field([CellDim, KDim], NC, NLEV + 1), **bounds(100, 4000, 2, 9)}
    cost = cost_of_call(pir, args, tiny_grid.connectivities)
    (k,) = cost.kernels
    rows, levels = 4000 - 100, 9 - 2
    assert (k.h_points, k.k_levels) == (rows, levels)
    # a is read at k and k + 1: levels [2, 10) -> 8 levels
    assert by_mode(k) == {("a", "read"): rows * (levels + 1) * 8, ("out", "write"): rows * levels * 8}
    assert k.flops == rows * levels * 1  # one subtraction per point
    assert k.bytes == rows * 8 * 8 + rows * 7 * 8
    assert cost.bytes == k.bytes and cost.flops == k.flops


def test_k_offset_clipped_to_the_field(tiny_grid):
    """Reading k + 1 at the last level of a field cut at nlev levels cannot count a level beyond it."""
    pir = program_ir(shift_diff, tiny_grid.connectivities)
    args = {"a": field([CellDim, KDim], NC, NLEV), "out": field([CellDim, KDim], NC, NLEV + 1), **bounds(0, NC, 0, NLEV)}
    (k,) = cost_of_call(pir, args, tiny_grid.connectivities).kernels
    assert by_mode(k)[("a", "read")] == NC * NLEV * 8


def test_icon4py_copy(tiny_grid):
    """copy_cell_kdim_field_to_vp: one read and one write per point, no flops."""
    info = get_program("copy_cell_kdim_field_to_vp")
    pir = program_ir(info.program, tiny_grid.connectivities)
    args = {
        "field": field([CellDim, KDim], NC, NLEV + 1), "field_copy": field([CellDim, KDim], NC, NLEV + 1),
        "horizontal_start": gtx.int32(0), "horizontal_end": gtx.int32(NC),
        "vertical_start": gtx.int32(0), "vertical_end": gtx.int32(NLEV),
    }  # fmt: skip
    cost = cost_of_call(pir, args, tiny_grid.connectivities)
    (k,) = cost.kernels
    assert k.bytes_read == NC * NLEV * 8 == 409_600
    assert k.bytes_written == NC * NLEV * 8
    assert k.table_bytes == 0 and k.flops == 0 and k.arithmetic_intensity == 0.0


def test_c2e_reduction(tiny_grid):
    """out[c, k] = sum_j w[c, j] * e[C2E[c, j], k] on all cells x 10 levels."""
    pir = program_ir(c2e_weighted, tiny_grid.connectivities)
    args = {
        "e": field([EdgeDim, KDim], NE, NLEV + 1), "w": field([CellDim, C2EDim], NC, 3),
        "out": field([CellDim, KDim], NC, NLEV + 1), **bounds(0, NC, 0, NLEV),
    }  # fmt: skip
    (k,) = cost_of_call(pir, args, tiny_grid.connectivities).kernels
    assert by_mode(k) == {
        ("e", "read"): NE * NLEV * 8,  # a neighbour access reads all edges, once, at the kernel's levels
        ("w", "read"): NC * 3 * 8,  # local dimension: all three neighbours
        ("C2E", "table"): NC * 3 * 4,  # rows of the domain x max_neighbors x int32
        ("out", "write"): NC * NLEV * 8,
    }
    assert k.table_bytes == NC * 3 * 4
    assert k.flops == NC * NLEV * 6  # 3 multiplications + 3 additions (0.0 + ... starts the sum)
    assert k.arithmetic_intensity == pytest.approx(k.flops / (614_400 + 122_880 + 61_440 + 409_600))


def test_c2e_reduction_on_a_row_range(tiny_grid):
    """Only the table rows of the domain count; the neighbour field is still read whole."""
    pir = program_ir(c2e_weighted, tiny_grid.connectivities)
    args = {
        "e": field([EdgeDim, KDim], NE, NLEV + 1), "w": field([CellDim, C2EDim], NC, 3),
        "out": field([CellDim, KDim], NC, NLEV + 1), **bounds(1000, 2000, 0, 5),
    }  # fmt: skip
    (k,) = cost_of_call(pir, args, tiny_grid.connectivities).kernels
    assert by_mode(k) == {("e", "read"): NE * 5 * 8, ("w", "read"): 1000 * 3 * 8, ("C2E", "table"): 1000 * 3 * 4,
                          ("out", "write"): 1000 * 5 * 8}  # fmt: skip


def test_scan_back_substitution(tiny_grid):
    """w[k] = w[k+1] * z_q[k] + w[k], backwards over levels [1, 10): w and z_q read once, w written once."""
    info = get_program("solve_tridiagonal_matrix_for_w_back_substitution")
    pir = program_ir(info.program, tiny_grid.connectivities)
    args = {
        "z_q": field([CellDim, KDim], NC, NLEV + 1), "w": field([CellDim, KDim], NC, NLEV + 1),
        "horizontal_start": gtx.int32(0), "horizontal_end": gtx.int32(NC),
        "vertical_start": gtx.int32(1), "vertical_end": gtx.int32(NLEV),
    }  # fmt: skip
    (k,) = cost_of_call(pir, args, tiny_grid.connectivities).kernels
    assert k.kind == "scan(backward)"
    n = NC * (NLEV - 1)
    assert by_mode(k) == {("z_q", "read"): n * 8, ("w", "read"): n * 8, ("w", "write"): n * 8}
    assert k.flops == n * 2  # one multiplication, one addition per point


# --- host expressions, branches and flop rules (no GT4Py) -----------------------------------------

I32 = "int32"


def c(v, dtype=I32):
    return ir.Const(v, dtype)


def p(name, dtype=I32):
    return ir.Param(name, dtype)


def test_host_expressions():
    n = p("n")
    assert evaluate(ir.Binary("minus", n, c(1), I32), {"n": np.int32(10)}) == 9
    assert evaluate(ir.Binary("divides", c(7), c(2), I32), {}) == 3  # integer division floors
    assert evaluate(ir.Binary("divides", c(7.0, "float64"), c(2.0, "float64"), "float64"), {}) == 3.5
    assert evaluate(ir.Call("minimum", (n, c(4)), I32), {"n": 10}) == 4
    assert evaluate(ir.Call("maximum", (n, c(4)), I32), {"n": 10}) == 10
    assert evaluate(ir.Cast(c(2.7, "float64"), I32), {}) == 2
    assert evaluate(ir.Select(ir.Binary("less", n, c(5), "bool"), c(1), c(2), I32), {"n": 3}) == 1
    assert evaluate(ir.FieldBound("f", "K", 1, True), {}, {"f": ((0, 5120), (0, 11))}) == 11
    assert evaluate(ir.Unary("neg", n, I32), {"n": 3}) == -3
    with pytest.raises(HostEvalError, match="no value for scalar 'm'"):
        evaluate(p("m"), {})
    d = ir.Domain("Cell", c(0), n, None, None)
    assert domain_ranges(d, {"n": 7}) == ((0, 7), (0, 1))


def _kernel(name, value, domain=None):
    domain = domain or ir.Domain("Cell", c(0), p("n"), c(0), c(4))
    load = ir.Load("a", (ir.HIndex(), ir.KIndex()), "float64")
    return ir.Kernel(name, domain, (ir.Store("out", value(load)),))


def _program(steps):
    fp = (ir.FieldParam("a", ("Cell", "K"), "float64"), ir.FieldParam("out", ("Cell", "K"), "float64"))
    return ir.ProgramIR("synthetic", (*fp, p("n"), p("flag", "bool")), (), (), steps,
                        dim_kinds=(("Cell", "horizontal"), ("K", "vertical")))  # fmt: skip


def test_host_branches_and_empty_domains():
    double = _kernel("k_then", lambda x: ir.Binary("multiplies", x, c(2.0, "float64"), "float64"))
    neg = _kernel("k_else", lambda x: ir.Unary("neg", x, "float64"))
    empty = _kernel("k_empty", lambda x: x, ir.Domain("Cell", c(0), p("n"), c(3), c(3)))
    prog = _program((ir.HostIf(p("flag", "bool"), (double,), (neg,)), empty))
    sizes = CallSizes({"n": 100, "flag": True}, {"a": ((0, 100), (0, 5)), "out": ((0, 100), (0, 5))}, {})
    cost = program_cost(prog, sizes)
    ran = {k.name: k.executed for k in cost.kernels}
    assert ran == {"k_then": True, "k_else": False, "k_empty": False}
    assert cost.flops == 100 * 4 and cost.bytes == 2 * 100 * 4 * 8  # only k_then counts
    assert cost.kernel("k_else").flops == 400  # listed with what it would cost


def test_flop_rules():
    x, y = ir.Var("x", "float64"), ir.Var("y", "float64")
    add = ir.Binary("plus", x, y, "float64")
    assert expr_flops(add) == 1
    assert expr_flops(ir.Binary("plus", c(1), c(2), I32)) == 0  # index arithmetic
    assert expr_flops(ir.Binary("less", x, y, "bool")) == 0  # comparison
    assert expr_flops(ir.Call("sqrt", (add,), "float64")) == 2
    assert expr_flops(ir.Call("maximum", (x, y), "float64")) == 1
    assert expr_flops(ir.Cast(add, "float32")) == 1  # the cast itself is free
    # a select costs its condition plus the longer arm
    longer = ir.Binary("multiplies", add, add, "float64")
    assert expr_flops(ir.Select(ir.Binary("less", x, y, "bool"), longer, x, "float64")) == 3
