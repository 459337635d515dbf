"""Sweep fusion (icoforge.backend.passes.sweeps, the schedule knob `fuse_sweeps`): which scan pairs
become one walk per column with their hand-over temporaries on chip, which stay apart and why; the
code it prints; and the solvers' results through the CUDA code run by CPU emulation, against
GT4Py's stored outputs and bit for bit against the unfused CPU target."""

from __future__ import annotations

import dataclasses

import pytest

from icoforge.backend.ir import ir
from icoforge.backend.passes import sweeps
from icoforge.backend.schedule import pipeline, tuned
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, ScheduleError, resolve
from tests import transform_counts

KINDS = (("Cell", "horizontal"), ("K", "vertical"))


def c(v):
    return ir.Const(v, "int32")


def dom(k0=0, k1=4):
    return ir.Domain("Cell", c(0), c(8), c(k0), c(k1))


def load(name, dk=0, neighbour=False):
    k = ir.KIndex() if dk == 0 else ir.Binary("plus", ir.KIndex(), c(dk), "int32")
    h = ir.Table("C2E2CO", ir.HIndex(), 1) if neighbour else ir.HIndex()
    return ir.Load(name, (h, k), "float64")


def add(x, y):
    return ir.Binary("plus", x, y, "float64")


def scan(name, body, forward=True, domain=None):
    """A scan carrying `s` (the body's last value) over `domain` (levels 0..3 by default)."""
    s = ir.Var("s", "float64")
    value = ir.Var("v", "float64")
    stmts = (ir.Let(value, add(s, body[0])), *body[1](value), ir.Let(s, value, declared=True))
    return ir.Kernel(name, domain or dom(), stmts, state=(ir.ScanState(s, ir.Const(0.0, "float64")),), forward=forward)


def forward_sweep(name="p_k0", out="t"):
    """Writes the temporary `out` at every level it walks."""
    return scan(name, (load("a"), lambda v: (ir.Store(out, v),)))


def backward_sweep(name="p_k1", reads=None, writes="out"):
    """Reads `t` (at its own level by default) and writes `writes`."""
    return scan(name, (reads if reads is not None else load("t"), lambda v: (ir.Store(writes, v),)), forward=False)


def program(steps, temps=("t", "u"), fields=("a", "b", "out")):
    params = tuple(ir.FieldParam(n, ("Cell", "K"), "float64") for n in fields)
    temporaries = tuple(ir.Temporary(t, ("Cell", "K"), "float64", dom()) for t in temps)
    return ir.ProgramIR("p", params, temporaries, (), tuple(steps), dim_kinds=KINDS)


def names(p):
    return [k.name for k in p.kernels()]


def test_forward_then_backward_sweep_become_one_walk_with_the_coefficient_on_chip():
    p = program([forward_sweep(), backward_sweep()])
    fused = sweeps.fuse_sweeps(p, 48 * 1024)
    (k,) = fused.kernels()
    assert k.name == "p_k0to1" and k.then is not None and not k.then.forward
    assert [t.name for t in k.on_chip] == ["t"] and k.on_chip[0].domain.constant_levels() == (0, 3)
    assert [t.name for t in fused.temporaries] == ["u"]  # t left the program's memory
    assert "t" not in k.fields_read() and "t" not in k.fields_written()
    assert set(k.fields_read()) == {"a"} and set(k.fields_written()) == {"out"}
    assert k.column_bytes() == 4 * 8
    assert "on chip float64 t" in str(k) and "then (p_k1)" in str(k)


def test_pairs_that_would_read_memory_or_another_column_stay_apart():
    # t also read by a third kernel: it must reach memory
    third = ir.Kernel("p_k2", dom(), (ir.Store("b", load("t")),))
    assert names(sweeps.fuse_sweeps(program([forward_sweep(), backward_sweep(), third]), 48 * 1024)) == ["p_k0", "p_k1", "p_k2"]
    # the second walk reads t in a neighbour's column: another thread's walk
    assert names(sweeps.fuse_sweeps(program([forward_sweep(), backward_sweep(reads=load("t", neighbour=True))]), 48 * 1024)) == ["p_k0", "p_k1"]
    # the second walk reads t at a level the first never wrote (level 4: memory would hold it)
    assert names(sweeps.fuse_sweeps(program([forward_sweep(), backward_sweep(reads=load("t", 1))]), 48 * 1024)) == ["p_k0", "p_k1"]
    # a map between them, or a map after a scan: not a sweep pair
    mid = ir.Kernel("p_k5", dom(), (ir.Store("b", load("a")),))
    assert names(sweeps.fuse_sweeps(program([forward_sweep(), mid, backward_sweep()]), 48 * 1024)) == ["p_k0", "p_k5", "p_k1"]
    # the first walk reads what the second writes in another column
    reader = scan("p_k0", (load("out", neighbour=True), lambda v: (ir.Store("t", v),)))
    assert names(sweeps.fuse_sweeps(program([reader, backward_sweep()]), 48 * 1024)) == ["p_k0", "p_k1"]


def test_a_guarded_read_of_levels_the_first_walk_wrote_is_fused():
    """The solvers' back substitution reads the coefficients under `1 <= k`, the first walk's levels."""
    first = scan("p_k0", (load("a"), lambda v: (ir.Store("t", v),)), domain=dom(1, 4))
    guarded = ir.Select(ir.Binary("less_equal", c(1), ir.KIndex(), "bool"), load("t"), ir.Const(0.0, "float64"), "float64")
    assert names(sweeps.fuse_sweeps(program([first, backward_sweep(reads=guarded)]), 48 * 1024)) == ["p_k0to1"]
    unguarded = sweeps.fuse_sweeps(program([first, backward_sweep()]), 48 * 1024)
    assert names(unguarded) == ["p_k0", "p_k1"]  # level 0 was never written by the first walk


def test_values_that_do_not_fit_shared_memory_are_a_decision_not_an_error():
    p = program([forward_sweep(), backward_sweep()])
    said = []
    kept = sweeps.fuse_sweeps(p, 32 * 4 * 8 - 1, 32, lambda a, b, why: said.append((a.name, b.name, why)))
    assert names(kept) == ["p_k0", "p_k1"]
    assert said == [("p_k0", "p_k1", "not fused as one sweep: 32 B of on-chip values per column x 32 columns > 1,023 B of shared memory per block")]
    schedule = ProgramSchedule(fuse_sweeps=("p",), smem_limit_bytes=1023)
    decisions: list = []
    assert names(pipeline.fuse_sweeps(p, schedule, "cuda", decisions)) == ["p_k0", "p_k1"]
    assert decisions[0].status == tuned.NOT_FUSED and str(decisions[0]).startswith("p_k0 + p_k1: not fused as one sweep: 32 B")


def test_the_launch_fits_its_columns_to_shared_memory():
    """A block of a fused sweep walks as many columns as their on-chip values fit (a multiple of
    32): the default scan block of 256 threads keeps 256 at 4 levels, fewer at 80."""
    fused = sweeps.fuse_sweeps(program([forward_sweep(), backward_sweep()]), 48 * 1024)
    (la,) = resolve(fused, ProgramSchedule(default=VENDOR_DEFAULTS["cuda"]), "cuda").values()
    assert la.block == (256, 1) and la.smem_bytes == 256 * 32
    deep = ir.Temporary("t", ("Cell", "K"), "float64", dom(0, 80))
    k = dataclasses.replace(fused.kernels()[0], on_chip=(deep,))
    (la,) = resolve(dataclasses.replace(fused, steps=(k,)), ProgramSchedule(default=VENDOR_DEFAULTS["cuda"]), "cuda").values()
    assert la.block == (64, 1) and la.smem_bytes == 64 * 80 * 8 <= 48 * 1024


def test_the_cuda_code_keeps_each_threads_column_in_shared_memory():
    from icoforge.backend.codegen.cuda import render_module_gpu

    fused = sweeps.fuse_sweeps(program([forward_sweep(), backward_sweep()]), 48 * 1024)
    src = render_module_gpu(fused, resolve(fused, ProgramSchedule(default=VENDOR_DEFAULTS["cuda"]), "cuda"), "cuda")
    assert "__shared__ double t_oc[1024];" in src
    assert "t_oc[(k - 0) * blockDim.x + threadIdx.x] = v;" in src  # the first walk stores its slot
    assert "then p_k1: backward over levels [0, 3]" in src and "for (int k = 4 - 1; k >= 0; --k)" in src
    assert "t_oc[(k - 0) * blockDim.x + threadIdx.x]" in src.split("then p_k1")[1]  # the second reads it
    assert "const double* __restrict__ t," not in src  # no memory behind it


def test_fuse_sweeps_is_schedule_data():
    s = ProgramSchedule(fuse_sweeps=["vertically_implicit_solver_at_corrector_step"])
    assert ProgramSchedule.loads(s.dumps()) == s and s.to_json()["fuse_sweeps"] == ["vertically_implicit_solver_at_corrector_step"]
    assert s.fuses_sweeps("vertically_implicit_solver_at_corrector_step") and not s.fuses_sweeps("other")
    assert ProgramSchedule(fuse_sweeps="*").fuses_sweeps("anything")
    assert "fuse_sweeps" not in ProgramSchedule().to_json()
    with pytest.raises(ScheduleError, match="fuse_sweeps: a list of program names"):
        ProgramSchedule(fuse_sweeps=[3])


# --- the solvers through the CUDA code by CPU emulation -----------------------------------------

# (program, fuse) -> (before, after the fuse and sweep passes) on R2B3/10 (tests/transform_counts.py)
SOLVERS = [
    pytest.param(name, fuse, id=f"{name}-{'fuse_all' if fuse else 'sweeps_only'}")
    for name in ("vertically_implicit_solver_at_predictor_step", "vertically_implicit_solver_at_corrector_step")
    for fuse in ((), ("*",))
]


@pytest.mark.parametrize("name, fuse", SOLVERS)
def test_sweep_fused_solvers_agree_with_gt4py_and_bit_for_bit_with_the_cpu_target(name, fuse, tiny_grid):
    """Forward and backward sweeps of both solvers as one walk (alone, and after `fuse: *` with
    column walks at any size): two temporaries on chip (the counts show it), the results GT4Py's
    (stored gtfn_cpu outputs) and equal to the unfused CPU target's to the last bit."""
    from icoforge.backend.runtime.emulate import make_emulated_backend
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify
    from tests.backend.test_fuse import assert_matches_gt4py

    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=fuse, fuse_sweeps=("*",))
    counts = transform_counts.sweep_counts(name, tiny_grid, schedule, seed=43)
    transform_counts.assert_transformed(name, *counts, transform_counts.expected(transform_counts.SWEEP_FUSED, (name, fuse)))
    backend = make_emulated_backend("cuda", schedule)
    assert_matches_gt4py(name, backend, tiny_grid)
    res = verify(get_program(name), backend, "icoforge-cpu", tiny_grid, seed=43, rtol=0.0, atol=0.0)
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs)


def test_the_byte_model_moves_no_bytes_for_values_on_chip(tiny_grid):
    """The predictor's sweeps fused: the byte model's total drops by exactly the coefficients'
    traffic unfused (each written once by the forward sweep and read once by the back
    substitution), every other field's bytes as before."""
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.suite.catalogue import get_program

    name = "vertically_implicit_solver_at_predictor_step"
    program = transform_counts.translated(name, tiny_grid)
    fused = pipeline.fuse_sweeps(program, ProgramSchedule(fuse_sweeps=("*",)), "cuda")
    sizes = suite_sizes(get_program(name), tiny_grid)
    before, after = program_cost(program, sizes), program_cost(fused, sizes)
    (pair,) = [k for k in fused.kernels() if k.on_chip]
    chip = {t.name for t in pair.on_chip}
    coefficients = sum(t.bytes for k in before.kernels for t in k.traffic if t.name in chip)
    assert coefficients > 0 and not any(t.name in chip for k in after.kernels for t in k.traffic)
    assert before.bytes - after.bytes == coefficients


def test_hip_with_stride_sets_sweep_fused_agrees_bit_for_bit_with_the_cpu_target(tiny_grid):
    """The HIP default (256x1 blocks, stride sets, 64 KiB of LDS) with the corrector's sweeps fused:
    the on-chip coefficients beside stride-set arguments, by emulation, equal to the CPU target."""
    from icoforge.backend.runtime.emulate import make_emulated_backend
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.verify import verify

    name = "vertically_implicit_solver_at_corrector_step"
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["hip"], fuse_sweeps=("*",))
    (pair,) = [k for k in pipeline.fuse_sweeps(transform_counts.translated(name, tiny_grid), schedule, "hip").kernels() if k.on_chip]
    assert pair.name == "vert_impl_solv_corr_step_k5to6"
    res = verify(get_program(name), make_emulated_backend("hip", schedule), "icoforge-cpu", tiny_grid, seed=47, rtol=0.0, atol=0.0)
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs)
