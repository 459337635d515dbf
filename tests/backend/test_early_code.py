"""The early-GTIR path's kernels against GT4Py's full pass list, statement by statement (issue 17,
benchmarks/early-vs-full-code-R2B3-10.md): a skip-value reduction is a chain of named partial
sums, a data condition is loaded once (a per-column mask before the level loop), `if_`s on one
condition are one branch, and straight-line bodies store each target after its own values (the
order pass, order.py), which nvcc's register allocation follows."""

from __future__ import annotations

import pytest

from icoforge import settings
from icoforge.backend.ir import ir
from icoforge.backend.passes import order
from icoforge.backend.runtime.gpu_check import find_nvcc
from icoforge.suite.catalogue import get_program


def lowered(name: str, grid, early: bool = True) -> ir.ProgramIR:
    """The kernel IR `icoforge explain` shows: the suite's scalars, icon4py's static ones bound."""
    from icoforge.backend.runtime import workflow
    from icoforge.perf.explain import compilable
    from icoforge.perf.sizes import suite_sizes

    info = get_program(name)
    with settings.overridden(early_gtir=early):
        return workflow.translate(compilable(info, grid, suite_sizes(info, grid), "icon4py"))[0].program


def level_loads(k: ir.Kernel) -> list[ir.Load]:
    return [e for e in ir.walk_body_exprs(k.body) if isinstance(e, ir.Load)]


def test_a_skip_value_reduction_names_each_partial_sum(tiny_grid):
    """`c ? acc + x : acc` holds `acc` twice: unnamed, a six-neighbour V2E sum printed the first
    product 32 times (126 loads in the level loop instead of 12, 132 ld in the PTX instead of 18)."""
    (k,) = lowered("mo_math_divrot_rot_vertex_ri_dsl", tiny_grid).kernels()
    (full,) = lowered("mo_math_divrot_rot_vertex_ri_dsl", tiny_grid, early=False).kernels()
    assert len(level_loads(k)) == len(level_loads(full)) == 12  # vn and geofac_rot, once per neighbour
    assert sum(isinstance(s, ir.Let) and s.var.name.startswith("acc_") for s in k.body) == 6


def test_a_mask_is_loaded_once_per_column_and_its_branches_are_one(tiny_grid):
    """update_theta_and_exner_in_halo: two `if_`s on `mask_prog_halo_c[i]`. The mask was loaded in
    both conditions, inside the level loop; the full list (GT4Py's CSE) loads it once per column."""
    (k,) = lowered("update_theta_and_exner_in_halo", tiny_grid).kernels()
    (full,) = lowered("update_theta_and_exner_in_halo", tiny_grid, early=False).kernels()
    for kern in (k, full):
        assert [s.value for s in kern.prologue if isinstance(s, ir.Let)] == [ir.Load("mask_prog_halo_c", (ir.HIndex(),), "bool")]
        assert all(any(isinstance(x, ir.KIndex) for x in e.walk()) for e in level_loads(kern))  # no k-invariant load left
    ifs = [s for s in k.body if isinstance(s, ir.If)]
    assert len(ifs) == 1 and isinstance(ifs[0].cond, ir.Var)


def test_if_s_on_one_condition_are_one_branch(tiny_grid):
    """rho_theta's upwind choice: rho and theta each an `if_` on `vn >= 0` (and the x and y
    weights on its copy). As separate `If`s nvcc loaded the gradient weights both gather twice."""
    (k,) = lowered("compute_rho_theta_pgrad_and_update_vn", tiny_grid).kernels()
    conds = [s.cond for s in k.body if isinstance(s, ir.If)]
    assert len(conds) == len(set(conds))
    (upwind,) = [s for s in k.body if isinstance(s, ir.If) and sum(isinstance(t, ir.Let) and t.declared for t in s.then) == 2 and any(
        isinstance(e, ir.Load) and e.field == "perturbed_theta_v_at_cells_on_model_levels" for e in ir.walk_body_exprs(s.then))]  # fmt: skip
    assert any(isinstance(e, ir.Load) and e.field == "perturbed_rho_at_cells_on_model_levels" for e in ir.walk_body_exprs(upwind.then))


def _let(name: str, value: ir.Expr) -> ir.Let:
    return ir.Let(ir.Var(name, "float64"), value)


def _at(field: str) -> ir.Load:
    return ir.Load(field, (ir.HIndex(), ir.KIndex()), "float64")


def _v(name: str) -> ir.Var:
    return ir.Var(name, "float64")


def _add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary("plus", a, b, "float64")


def test_order_computes_shared_values_first_and_stores_each_target_after_its_own():
    body = (
        _let("a", _at("x")),  # rho's own
        _let("s", _at("y")),  # both need it
        _let("b", _add(_v("a"), _v("s"))),
        _let("c", _add(_v("s"), _v("s"))),  # theta's own
        _let("d", _add(_v("c"), _at("z"))),  # reads z after rho's store: a pair for `distinct`
        ir.Store("rho", _v("b")),
        ir.Store("theta", _v("d")),
    )
    k = ir.Kernel("p_k0", ir.Domain("Cell", ir.Const(0, "int32"), ir.Const(4, "int32"), ir.Const(0, "int32"), ir.Const(2, "int32")), body)
    params = tuple(ir.FieldParam(f, ("Cell", "K"), "float64") for f in ("x", "y", "z", "rho", "theta"))
    prog = order.order_program(ir.ProgramIR("p", params, (), (), (k,)))
    (new,) = prog.kernels()
    text = [s.var.name if isinstance(s, ir.Let) else s.field for s in new.body]
    assert text == ["s", "a", "b", "rho", "c", "d", "theta"]
    assert prog.distinct == (("rho", "z"),)
    # a store a later statement would read stays at the end, after everything
    reads_own = k.body[:4] + (_let("d", _add(_v("c"), _at("rho"))),) + k.body[5:]
    (kept,) = order.order_program(ir.ProgramIR("p", params, (), (), (k.__class__(k.name, k.domain, reads_own),))).kernels()
    assert [s.field for s in kept.body[-2:] if isinstance(s, ir.Store)] == ["rho", "theta"]


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_interpolation_and_buoyancy_takes_the_full_lists_registers(tiny_grid):
    """The same loads and instructions on both paths, but on the early path's order ptxas took 44
    registers (62.5 % occupancy at 256 threads a block on sm_90) against 32 on the full list."""
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.backend.runtime.gpu_check import nvcc_check
    from icoforge.backend.schedule.schedule import default_program_schedule

    pir = lowered("compute_interpolation_and_nonhydro_buoy", tiny_grid)
    art = gpu_artifact(pir, "cuda", default_program_schedule("cuda"))
    regs = {r.kernel: r.registers for r in nvcc_check(art.module_source)}
    assert regs["comp_inte_nonh_buoy_k0"] <= 32
    assert order.order_program(pir) == pir  # the order pass has run (and is idempotent)
