"""backend/schedule/pipeline.py: the passes in one order, the schedule consumed once, the printers fed the
final IR (kernels and host plan alike), and `icoforge explain --stage pipeline` showing each pass."""

from __future__ import annotations

import pytest

from icoforge.backend.passes import hoist
from icoforge.backend.ir import ir
from icoforge.backend.schedule import pipeline
from icoforge.backend.codegen.cuda import WIDE_SUFFIX
from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule

PROGRAM = "compute_contravariant_correction_of_w"  # C2E with level shifts: loads to hoist


@pytest.fixture(scope="module")
def lowered(tiny_grid):
    from icoforge.backend.runtime import workflow
    from icoforge.backend.runtime.precompile import compilable_program
    from icoforge.suite.catalogue import get_program

    inp = compilable_program(get_program(PROGRAM).program, tiny_grid.connectivities)
    return workflow.lower_gtir(inp, workflow.cached_passes(inp)[0])


def kloop(k_per_thread: int) -> ProgramSchedule:
    return ProgramSchedule(default=VENDOR_DEFAULTS["cuda"].replace(k_per_thread=k_per_thread))


def test_the_stages_run_in_order_and_each_is_the_previous_one_rewritten(lowered):
    names = [n for n, _, _ in pipeline.stages(lowered)]
    assert names == ["lower", "forward", "inline", "share", "hoist", "order"]
    stages = pipeline.stages(lowered, kloop(4), "cuda")
    assert [n for n, _, _ in stages] == ["lower", "forward", "inline", "share", "hoist", "order", "fuse", "hoist per launch"]
    irs = {n: p for n, _, p in stages}
    assert irs["order"] == pipeline.translate_passes(lowered)  # what `translate` hands on
    assert not any(k.prologue for k in irs["forward"].kernels()) and any(k.prologue for k in irs["hoist"].kernels())
    assert irs["fuse"] == irs["order"]  # the schedule does not fuse this program


def test_per_launch_hoisting_only_where_threads_walk_several_levels(lowered):
    prog = pipeline.translate_passes(lowered)
    _, one, _ = pipeline.gpu_passes(prog, kloop(1), "cuda")
    scheduled, four, launches = pipeline.gpu_passes(prog, kloop(4), "cuda")
    assert one == prog and scheduled == prog
    before = {k.name: k for k in prog.kernels()}
    hoisted = [k for k in four.kernels() if k != before[k.name]]
    assert hoisted and all(launches[k.name].k_per_thread == 4 for k in hoisted)
    for k in hoisted:  # the loads moved are named <field>_h<n> and now live in the prologue
        moved = {s.var.name for s in k.prologue} - {s.var.name for s in before[k.name].prologue}
        assert moved and all("_h" in n for n in moved)
        assert hoist.hoist_invariant_loads(k) == k  # nothing left to hoist


def test_kernels_and_host_plan_are_printed_from_the_final_ir(lowered):
    prog = pipeline.translate_passes(lowered)
    art = gpu_artifact(prog, "cuda", kloop(4))
    _, final, _ = pipeline.gpu_passes(prog, kloop(4), "cuda")
    for k in final.kernels():
        for s in k.prologue:
            if isinstance(s, ir.Let) and s.var.name.endswith("_h0"):
                assert f"{s.var.name} =" in art.module_source
    names = tuple(k.name for k in final.kernels())
    # the CUDA default chooses index arithmetic at call time: each kernel also has a 64-bit twin
    assert VENDOR_DEFAULTS["cuda"].index_bits == "auto"
    assert art.program_ir == prog and art.kernel_names == tuple(n for k in names for n in (k, k + WIDE_SUFFIX))
    assert "def launch(" in art.host_plan


def test_explain_prints_each_stage(tiny_grid):
    from icoforge.perf.explain import explain

    pages = explain(PROGRAM, tiny_grid, "cuda", ["pipeline"], settings=["k_per_thread=4"])
    assert [p.stage for p in pages] == ["pipeline"] * 8
    assert [p.title.split("`")[1] for p in pages] == ["lower", "forward", "inline", "share", "hoist", "order", "fuse", "hoist per launch"]
    assert all(p.text.startswith(f"program {PROGRAM}(") for p in pages)
    assert "_h0" in pages[-1].text and "_h0" not in pages[5].text
    cpp = explain(PROGRAM, tiny_grid, "cpp", ["pipeline"])
    assert len(cpp) == 6  # the C++ target has no launch layout: no GPU passes
