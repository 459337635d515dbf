"""Schedules as data: validation messages, JSON, CLI settings, lookup order, and the chiplet
remap permutation (the prelude's C function, compiled for the host)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icoforge.backend.codegen.cuda import PRELUDE
from icoforge.backend.schedule.schedule import (
    VENDOR_DEFAULTS,
    ProgramSchedule,
    Schedule,
    ScheduleError,
    default_program_schedule,
    schedule_from_text,
)
from icoforge.errors import UnknownNameError


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(block=(2048, 1)), r"block 2048x1 = 2048 threads exceeds 1024"),
        (dict(block=(256, 8)), r"block 256x8 = 2048 threads exceeds 1024"),
        (dict(block=(0, 1)), r"must be positive"),
        (dict(block=(128,)), r"two integers"),
        (dict(k_per_thread=0), r"k_per_thread must be an integer >= 1, got 0"),
        (dict(k_unroll=0), r"k_unroll must be an integer >= 1, got 0"),
        (dict(h_per_thread=-2), r"h_per_thread must be an integer >= 1, got -2"),
        (dict(chiplets=0), r"chiplets must be an integer >= 1"),
        (dict(index_bits=16), r"index_bits must be 32, 64 or 'auto', got 16"),
        (dict(index_bits="32"), r"index_bits must be 32, 64 or 'auto', got '32'"),
        (dict(max_registers=8), r"max_registers must be in \[16, 255\], got 8"),
        (dict(max_registers=300), r"max_registers must be in \[16, 255\]"),
        (dict(min_blocks_per_sm=0), r"min_blocks_per_sm must be >= 1"),
        (dict(smem_tables=("C2E", "C2E")), r"names a table twice"),
        (dict(smem_tables=("*", "C2E")), r"'\*' already names every table"),
        (dict(smem_tables=("C2E; evil",)), r"table names or '\*'"),
        (dict(chiplet_remap=1), r"chiplet_remap must be true or false"),
    ],
)
def test_illegal_schedules_are_refused_with_a_clear_message(changes, message):
    with pytest.raises(ScheduleError, match=message):
        Schedule(**changes).validate()


def legal_schedules():
    def build(bx, by, kpt, unroll, hpt, smem, regs, blocks, bits, remap, chiplets):
        while bx * by > 1024:
            by //= 2
        return Schedule(
            block=(bx, by), k_per_thread=kpt, k_unroll=unroll, h_per_thread=hpt, smem_tables=smem,
            max_registers=regs, min_blocks_per_sm=blocks, index_bits=bits, chiplet_remap=remap, chiplets=chiplets,
        )  # fmt: skip

    return st.builds(
        build,
        st.integers(1, 1024), st.sampled_from([1, 2, 4, 8]), st.integers(1, 16), st.integers(1, 8), st.integers(1, 8),
        st.sampled_from([(), ("*",), ("C2E",), ("E2C", "C2E")]), st.none() | st.integers(16, 255),
        st.none() | st.integers(1, 8), st.sampled_from([32, 64, "auto"]), st.booleans(), st.integers(1, 12),
    )  # fmt: skip


@settings(max_examples=50, deadline=None)
@given(legal_schedules())
def test_schedule_json_round_trip(s):
    s.validate()
    assert Schedule.from_json(s.to_json()) == s
    ps = ProgramSchedule(default=s, per_kernel={"x_k1": s.replace(k_unroll=2)}, per_program={"p": s}, smem_limit_bytes=1024)
    assert ProgramSchedule.loads(ps.dumps()) == ps
    assert ProgramSchedule.loads(ps.dumps()).key() == ps.key()


def test_fp_contract_reaches_the_gpu_compilers_options_only_when_asked():
    """`fp_contract` (timing A/Bs against builds that contract, as nvcc's and DaCe's do): off by
    default, so NVRTC gets --fmad=false and HIP -ffp-contract=off; on, the opposite; HIP on CUDA
    carries it over. It round-trips through JSON and refuses a non-boolean."""
    from icoforge.backend.ir import ir
    from icoforge.backend.runtime import gpu, hip_on_cuda

    on = ProgramSchedule.loads('{"fp_contract": true}')
    assert on.fp_contract and on.to_json()["fp_contract"] is True and ProgramSchedule.loads(on.dumps()) == on
    assert "fp_contract" not in ProgramSchedule().to_json()
    with pytest.raises(ScheduleError, match="fp_contract: true or false"):
        ProgramSchedule.loads('{"fp_contract": "yes"}')
    dom = ir.Domain("Cell", ir.Const(0, "int32"), ir.Const(8, "int32"), ir.Const(0, "int32"), ir.Const(4, "int32"))
    kernel = ir.Kernel("p_k0", dom, (ir.Store("out", ir.Const(1.0, "float64")),))
    program = ir.ProgramIR("p", (ir.FieldParam("out", ("Cell", "K"), "float64"),), (), (), (kernel,),
                           dim_kinds=(("Cell", "horizontal"), ("K", "vertical")))  # fmt: skip
    for vendor, off_flag, on_flag in (("cuda", "--fmad=false", "--fmad=true"), ("hip", "-ffp-contract=off", "-ffp-contract=fast")):
        default = gpu.gpu_artifact(program, vendor, ProgramSchedule())
        contracted = gpu.gpu_artifact(program, vendor, on)
        assert off_flag in default.options and on_flag not in default.options
        assert on_flag in contracted.options and off_flag not in contracted.options
    assert "--fmad=true" in hip_on_cuda.on_cuda(gpu.gpu_artifact(program, "hip", on)).options
    assert "--fmad=false" in hip_on_cuda.on_cuda(gpu.gpu_artifact(program, "hip", ProgramSchedule())).options


def test_unknown_json_keys_are_refused():
    with pytest.raises(ScheduleError, match=r"unknown schedule parameters \['k_unrol'\]"):
        Schedule.from_json({"k_unrol": 2})
    with pytest.raises(ScheduleError, match="unknown program-schedule keys"):
        ProgramSchedule.from_json({"defaults": {}})
    with pytest.raises(ScheduleError, match="exceeds 1024"):
        ProgramSchedule.from_json({"per_kernel": {"a_k0": {"block": [64, 32]}}})


def test_settings_from_the_command_line():
    s = Schedule().with_settings(
        ["block=32x8", "k_per_thread=4", "k_unroll=2", "h_per_thread=3", "smem_tables=C2E,E2C",
         "max_registers=64", "index_bits=32", "chiplet_remap=true", "chiplets=4"]
    )  # fmt: skip
    assert s == Schedule(block=(32, 8), k_per_thread=4, k_unroll=2, h_per_thread=3, smem_tables=("C2E", "E2C"),
                         max_registers=64, index_bits=32, chiplet_remap=True, chiplets=4)  # fmt: skip
    assert Schedule().with_settings(["block=256"]).block == (256, 1)
    auto = Schedule().with_settings(["index_bits=AUTO"])
    assert auto.index_bits == "auto" and Schedule.from_json(auto.to_json()) == auto
    assert s.with_settings(["max_registers=none", "smem_tables=-"]).max_registers is None
    with pytest.raises(UnknownNameError, match="Did you mean 'k_unroll'"):
        Schedule().with_settings(["k_unrol=2"])
    with pytest.raises(ScheduleError, match="cannot read 'four'"):
        Schedule().with_settings(["k_per_thread=four"])
    with pytest.raises(ScheduleError, match="exceeds 1024"):
        Schedule().with_settings(["block=64,32"])
    with pytest.raises(ScheduleError, match="expected NAME=VALUE"):
        Schedule().with_settings(["block"])


def test_lookup_order_kernel_then_program_then_default():
    d, p, k = Schedule(), Schedule(block=(256, 1)), Schedule(block=(32, 8))
    ps = ProgramSchedule(default=d, per_kernel={"prog_k1": k}, per_program={"prog": p})
    assert ps.for_kernel("prog_k1", "prog") == k
    assert ps.for_kernel("prog_k0", "prog") == p
    assert ps.for_kernel("other_k0", "other") == d
    assert ps.with_kernel("prog_k0", k).for_kernel("prog_k0", "prog") == k
    assert ps.smem_limit("cuda") == 48 * 1024 and ps.smem_limit("hip") == 64 * 1024


def test_the_default_schedule_fuses_what_the_h200_measured_and_a_given_one_only_what_it_names():
    pq = "compute_perturbed_quantities_and_interpolation"
    cuda = schedule_from_text("", "cuda")
    assert cuda == default_program_schedule("cuda") and cuda.default == VENDOR_DEFAULTS["cuda"]
    assert cuda.fuses(pq) and cuda.fuses("vertically_implicit_solver_at_predictor_step")
    assert not cuda.fuses("compute_rho_theta_pgrad_and_update_vn")
    assert not cuda.fuses("vertically_implicit_solver_at_corrector_step")  # 5 % slower fused (H200, -s13)
    assert not default_program_schedule("hip").fuses(pq)  # nothing measured on an AMD GPU
    given = schedule_from_text('{"default": {"block": [64, 2]}}', "cuda")
    assert given.fuse == () and not given.fuses(pq)
    with pytest.raises(ScheduleError, match="unknown GPU vendor 'sycl': cuda or hip"):
        default_program_schedule("sycl")


CHIPLET_MAIN = r"""
#include <cstdio>
int main() {
  for (unsigned int n = 1; n <= 9; ++n)
    for (unsigned int nb = 1; nb <= 100; ++nb) {
      printf("%u %u", n, nb);
      for (unsigned int b = 0; b < nb; ++b) printf(" %u", icf_chiplet_block(b, nb, n));
      printf("\n");
    }
}
"""


@pytest.mark.skipif(shutil.which("c++") is None, reason="no host C++ compiler")
def test_chiplet_remap_is_a_bijection_that_keeps_each_chiplets_blocks_consecutive(tmp_path):
    """The prelude's own function, compiled for the host: for every grid size (also when the
    chiplet count does not divide it) block numbers are a permutation, and the blocks the
    hardware deals to chiplet x (b % n == x) get one contiguous range, in order."""
    fn = PRELUDE[PRELUDE.index("__device__ __forceinline__ unsigned int icf_chiplet_block") :]
    fn = fn[: fn.index("\n}\n") + 3].replace("__device__ __forceinline__", "static inline")
    src = tmp_path / "remap.cpp"
    src.write_text(fn + CHIPLET_MAIN)
    exe = tmp_path / "remap"
    subprocess.run(["c++", "-O1", "-o", str(exe), str(src)], check=True)
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        n, nb, *perm = map(int, line.split())
        assert sorted(perm) == list(range(nb)), (n, nb, perm)
        for x in range(n):
            mine = [perm[b] for b in range(nb) if b % n == x]
            if mine:
                assert mine == list(range(mine[0], mine[0] + len(mine))), (n, nb, x, mine)
        if n == 1:
            assert perm == list(range(nb))


def test_schedule_description_names_every_knob():
    text = Schedule(max_registers=64, chiplet_remap=True).describe()
    for knob in ("block", "k_per_thread", "k_unroll", "h_per_thread", "smem_tables", "index_bits", "max_registers",
                 "chiplet_remap 8"):  # fmt: skip
        assert re.search(knob, text), knob
