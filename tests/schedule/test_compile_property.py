"""Property tests: for random legal schedules, the generated CUDA compiles with nvcc (sm_90) and
the HIP with hipcc (gfx90a), and the compilers' resource reports agree with the schedule
(shared memory of the staged tables, register caps). Each example draws one schedule per
program (icon4py representatives and the small kind programs, with per-kernel overrides) and
compiles all programs as one translation unit: one compiler start per example, ~3 s for nvcc.
Also: nvcc really inlines the hand-unrolled level loop (no calls, k_unroll copies)."""

from __future__ import annotations

import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from icoforge.backend.codegen.cuda import PRELUDE, WIDE_SUFFIX
from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.runtime.gpu_check import find_hipcc, find_nvcc, hipcc_check, nvcc_check
from icoforge.backend.schedule.schedule import (
    VGPRS_PER_LANE_AMD, ProgramSchedule, Schedule, ScheduleError, amd_waves_per_eu, own_row_tables, resolve,
)  # fmt: skip

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def schedules(draw, tables: tuple[str, ...], vendor: str) -> Schedule:
    bx = draw(st.sampled_from([32, 64, 96, 128, 192, 256, 512, 1024]))
    by = draw(st.sampled_from([1, 2, 4, 8]))
    while bx * by > 1024:
        by //= 2
    regs = draw(st.none() | st.sampled_from([32, 64, 96, 128, 255]))
    blocks = None if (vendor == "cuda" and regs is not None) else draw(st.none() | st.integers(1, 2))
    return Schedule(
        block=(bx, by),
        k_per_thread=draw(st.integers(1, 8)),
        k_unroll=draw(st.integers(1, 4)),
        h_per_thread=draw(st.integers(1, 4)),
        smem_tables=draw(st.sampled_from([(), ("*",), *((t,) for t in tables)])),
        max_registers=regs,
        min_blocks_per_sm=blocks,
        index_bits=draw(st.sampled_from([32, 64, "auto"])),
        chiplet_remap=draw(st.booleans()),
        chiplets=draw(st.integers(1, 8)),
    )


def program_schedule(draw, program, vendor: str) -> ProgramSchedule:
    """A default for the program's kernels plus, sometimes, an override for one kernel."""
    kernels = program.kernels()
    all_tables = tuple(sorted({t for k in kernels for t in own_row_tables(k)}))
    ps = ProgramSchedule(default=draw(schedules(all_tables, vendor)))
    if draw(st.booleans()):
        k = draw(st.sampled_from(kernels))
        ps = ps.with_kernel(k.name, draw(schedules(own_row_tables(k), vendor)))
    try:
        resolve(program, ps, vendor)
    except ScheduleError as e:  # shared memory or registers beyond a limit here: drop those knobs
        note(f"refused, then simplified: {e}")
        plain = dict(smem_tables=(), max_registers=None, min_blocks_per_sm=None)
        ps = ProgramSchedule(ps.default.replace(**plain), tuple((k, s.replace(**plain)) for k, s in ps.per_kernel))
        resolve(program, ps, vendor)
    return ps


def one_unit(programs: dict, vendor: str, draw) -> tuple[str, dict]:
    """Sources of all programs, each with its drawn schedule, as one translation unit."""
    parts, launches = [], {}
    for name, program in programs.items():
        ps = program_schedule(draw, program, vendor)
        note(f"{name}: {ps.dumps()}")
        src = gpu_artifact(program, vendor, ps).module_source
        parts.append(src if not parts else src.split(PRELUDE, 1)[1])
        launches.update(resolve(program, ps, vendor))
    # index_bits="auto" kernels come with a 64-bit twin of the same launch
    twins = {n + WIDE_SUFFIX: la for n, la in launches.items() if la.schedule.index_bits == "auto"}
    return "\n".join(parts), {**launches, **twins}


@pytest.fixture(scope="module")
def all_irs(representative_irs, kind_irs):
    return {**representative_irs, **kind_irs}


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_cuda_compiles_for_random_legal_schedules(all_irs):
    @settings(max_examples=10, **SETTINGS)
    @given(st.data())
    def check(data):
        source, launches = one_unit(all_irs, "cuda", data.draw)
        resources = {r.kernel: r for r in nvcc_check(source)}
        assert set(resources) == set(launches)
        for name, la in launches.items():
            r = resources[name]
            assert r.shared_bytes == la.smem_bytes, (name, la.describe())
            if la.schedule.max_registers is not None:
                assert r.registers <= la.schedule.max_registers, (name, r)

    check()


@pytest.mark.skipif(find_hipcc() is None, reason="hipcc not installed (apt-get install hipcc)")
def test_hip_compiles_for_random_legal_schedules(all_irs):
    @settings(max_examples=6, **SETTINGS)
    @given(st.data())
    def check(data):
        source, launches = one_unit(all_irs, "hip", data.draw)
        assert "__launch_bounds__" not in source and "__maxnreg__" not in source
        resources = {r.kernel: r for r in hipcc_check(source)}
        assert set(resources) == set(launches)
        for name, la in launches.items():
            r = resources[name]
            assert r.shared_bytes == la.smem_bytes, (name, la.describe())
            waves = amd_waves_per_eu(la)
            if waves is not None:
                assert r.registers <= VGPRS_PER_LANE_AMD // waves, (name, r, waves)

    check()


def _ptx(source: str, tmp_path) -> str:
    src, out = tmp_path / "k.cu", tmp_path / "k.ptx"
    src.write_text(source)
    subprocess.run([find_nvcc(), "-arch=sm_90", "-std=c++17", "-ptx", str(src), "-o", str(out)], check=True)
    return out.read_text()


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize(
    "program, base", [("backward_scan", Schedule()), ("chained", Schedule(k_per_thread=8)),
                      ("solve_tridiagonal_matrix_for_w_forward_sweep", Schedule())]
)  # fmt: skip
def test_nvcc_inlines_every_copy_of_the_unrolled_level_loop(all_irs, tmp_path, program, base):
    """k_unroll is manual unrolling (the level body as a lambda forced inline, called k_unroll
    times per step, then a remainder loop), not a hint nvcc may ignore: the PTX has no calls
    left and at least k_unroll + 1 copies of the level's stores. (nvcc unrolls small plain
    loops by itself too, so the plain loop is no baseline to compare with.)"""
    from icoforge.backend.ir import ir

    k = all_irs[program].kernels()[0]
    per_level = sum(isinstance(s, ir.Store) for s in ir.walk_stmts(k.body))
    for unroll in (2, 4):
        src = gpu_artifact(all_irs[program], "cuda", ProgramSchedule(base.replace(k_unroll=unroll))).module_source
        assert src.count("icf_level(icf_k") == unroll + 1
        ptx = _ptx(src, tmp_path)
        assert not re.search(r"^\s*call", ptx, re.M), "a copy of the level body was not inlined"
        assert len(re.findall(r"st\.global\.f64", ptx)) >= (unroll + 1) * per_level
