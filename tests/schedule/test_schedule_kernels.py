"""What a schedule means for real kernels, without compiling: effective launches per kernel
kind, refusals that need the kernel IR (shared memory, tables, register budget), the
generated source of each knob, and the host plan's grid and 32-bit index checks."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.schedule.schedule import ProgramSchedule, Schedule, ScheduleError, check_kernel, resolve


def kernel(program, n=0):
    return program.kernels()[n]


def kernel_sources(source: str) -> dict[str, str]:
    """kernel name -> its text (from its comment line to the next kernel)."""
    parts = re.split(r"\n(?=// \w+: (?:map|scan))", source)
    return {m.group(1): p for p in parts if (m := re.match(r"// (\w+): ", p))}


# --- effective launches -------------------------------------------------------------------------


def test_knobs_that_do_not_apply_to_a_kernel_kind_are_ignored_for_it(kind_irs, representative_irs):
    s = Schedule(block=(32, 8), k_per_thread=4, k_unroll=3, h_per_thread=2, smem_tables=("*",))
    scan = check_kernel(kernel(representative_irs["solve_tridiagonal_matrix_for_w_forward_sweep"]),
                        representative_irs["solve_tridiagonal_matrix_for_w_forward_sweep"], s, "cuda")  # fmt: skip
    assert (scan.kind, scan.block, scan.k_per_thread, scan.k_unroll, scan.h_per_thread) == ("scan", (256, 1), 1, 3, 2)
    vmap = check_kernel(kernel(kind_irs["levels_only"]), kind_irs["levels_only"], s, "cuda")
    assert (vmap.kind, vmap.block, vmap.k_per_thread, vmap.k_unroll, vmap.h_per_thread) == ("vmap", (256, 1), 4, 3, 1)
    hmap = check_kernel(kernel(kind_irs["points_only"]), kind_irs["points_only"], s, "cuda")
    # no levels on y: the block's 256 threads all go along x
    assert (hmap.kind, hmap.block, hmap.k_per_thread, hmap.k_unroll, hmap.smem) == ("hmap", (256, 1), 1, 1, (("C2E", 3, 4),))
    single = check_kernel(kernel(kind_irs["column_scan"]), kind_irs["column_scan"], s, "cuda")
    assert (single.kind, single.block, single.k_unroll) == ("single", (1, 1), 3)
    m = check_kernel(kernel(kind_irs["chained"]), kind_irs["chained"], s.replace(k_per_thread=1), "cuda")
    assert (m.kind, m.block, m.k_unroll, m.smem) == ("map2d", (32, 8), 1, (("C2E", 3, 4),))  # E2C is chained: not staged
    assert m.smem_bytes == 2 * 32 * 3 * 4


# --- refusals that need the kernel IR --------------------------------------------------------------


@pytest.mark.parametrize(
    "program, vendor, schedule, message",
    [
        ("points_only", "cuda", ProgramSchedule(Schedule(block=(1024, 1), h_per_thread=8, smem_tables=("*",))),
         r"staged tables need 98304 B of shared memory \(C2E: 8x1024 rows x 3 x 4 B\), beyond the limit of 49152 B"),
        ("points_only", "cuda", ProgramSchedule(Schedule(smem_tables=("C2E",)), smem_limit_bytes=1024),
         r"need 1536 B of shared memory .* beyond the limit of 1024 B"),
        ("points_only", "cuda", ProgramSchedule(Schedule(), smem_limit_bytes=64 * 1024),
         r"CUDA static shared memory is at most 49152 B"),
        ("points_only", "cuda", ProgramSchedule(Schedule(), per_kernel={"points_only_k0": Schedule(smem_tables=("E2C",))}),
         r"smem_tables names 'E2C', but the kernel does not use it \(tables read by own row: C2E\)"),
        ("chained", "cuda", ProgramSchedule(Schedule(), per_kernel={"chained_k0": Schedule(smem_tables=("E2C",))}),
         r"smem_tables names 'E2C', but the kernel reads it only through another table's entries"),
        ("chained", "cuda", ProgramSchedule(per_program={"chained": Schedule(smem_tables=("E2C",))}),
         r"schedule of chained: smem_tables names 'E2C', which none of its kernels chained_k0 reads by its own row"),
        ("points_only", "cuda", ProgramSchedule(per_program={"points_only": Schedule(smem_tables=("C2F",))}),
         r"smem_tables names 'C2F', which none of its kernels points_only_k0 reads by its own row \(tables of the program: C2E\)"),
        ("chained", "cuda", ProgramSchedule(Schedule(max_registers=64, min_blocks_per_sm=2)),
         r"max_registers \(__maxnreg__\) and min_blocks_per_sm \(__launch_bounds__\) cannot be combined"),
        ("chained", "cuda", ProgramSchedule(Schedule(block=(512, 1), max_registers=255)),
         r"max_registers 255 x 512 threads needs 131072 registers per block, more than the 65536 of an SM"),
        ("chained", "cuda", ProgramSchedule(Schedule(block=(1024, 1), min_blocks_per_sm=4)),
         r"min_blocks_per_sm 4 x 1024 threads exceeds the 2048 resident threads"),
        ("chained", "cuda", ProgramSchedule(Schedule(), per_kernel={"chained_k3": Schedule()}),
         r"schedule names kernel 'chained_k3', which chained lacks; its kernels: chained_k0"),
        ("chained", "hip", ProgramSchedule(Schedule(k_per_thread=0)), r"k_per_thread must be an integer >= 1, got 0"),
        ("chained", "hip", ProgramSchedule(Schedule(block=(64, 32))), r"block 64x32 = 2048 threads exceeds 1024"),
    ],
)  # fmt: skip
def test_illegal_schedules_are_refused_before_generating_code(kind_irs, program, vendor, schedule, message):
    with pytest.raises(ScheduleError, match=message):
        gpu_artifact(kind_irs[program], vendor, schedule)


def test_shared_limits_differ_by_vendor_and_defaults_apply_where_tables_exist(kind_irs, representative_irs):
    s = ProgramSchedule(Schedule(block=(1024, 1), h_per_thread=5, smem_tables=("C2E",)))  # 61440 B
    with pytest.raises(ScheduleError, match="beyond the limit of 49152 B"):
        gpu_artifact(kind_irs["points_only"], "cuda", s)
    assert resolve(kind_irs["points_only"], s, "hip")["points_only_k0"].smem_bytes == 61440
    # a program's schedule naming E2C stages it in the one kernel that reads E2C by its own row
    prog = representative_irs["apply_divergence_damping_and_update_vn"]
    for ps in (ProgramSchedule(Schedule(smem_tables=("E2C",))), ProgramSchedule(per_program={prog.name: Schedule(smem_tables=("E2C",))})):
        launches = resolve(prog, ps, "cuda")
        assert {n for n, la in launches.items() if la.smem} == {"appl_dive_damp_upda_vn_k0"}
    # none reads C2E (10 kernels under host conditionals on GT4Py's full list, 2 on the early path)
    assert not any("C2E" in k.tables_used() for k in prog.kernels())
    with pytest.raises(ScheduleError, match=r"smem_tables names 'C2E', which none of its (\d+ kernels|kernels [\w, ]+) reads by its own row"):
        resolve(prog, ProgramSchedule(per_program={prog.name: Schedule(smem_tables=("C2E",))}), "cuda")
    # the default may serve many programs: tables a program cannot stage are skipped there
    assert not any(la.smem for la in resolve(prog, ProgramSchedule(Schedule(smem_tables=("C2E", "V2E"))), "cuda").values())
    # HIP has no __maxnreg__/__launch_bounds__ conflict: both become a waves-per-EU hint
    resolve(kind_irs["chained"], ProgramSchedule(Schedule(max_registers=64, min_blocks_per_sm=2)), "hip")
    # per-kernel entries of other programs are ignored (one ProgramSchedule can serve many programs)
    resolve(kind_irs["chained"], ProgramSchedule(per_kernel={"points_only_k0": Schedule(smem_tables=("E2C",))}), "cuda")


# --- generated source -------------------------------------------------------------------------------


def test_every_kernel_states_its_schedule(representative_irs):
    prog = representative_irs["apply_divergence_damping_and_update_vn"]
    # by what they do (their number differs between GT4Py's full list and the early path): the
    # fourth-order damping's E2C2EO sum, and the kernel storing the E2C difference it reads
    damping = next(k.name for k in prog.kernels() if "E2C2EO" in k.tables_used())
    gradient = next(k.name for k in prog.kernels() if "E2C" in k.tables_used())
    assert damping != gradient
    ps = ProgramSchedule(Schedule(), per_kernel={damping: Schedule(block=(32, 8), k_per_thread=2)})
    src = kernel_sources(gpu_artifact(prog, "cuda", ps).module_source)
    assert set(src) == {k.name for k in prog.kernels()}
    for name, text in src.items():
        assert text.splitlines()[1].startswith("// schedule: block "), text[:300]
    assert "// schedule: block 32x8, k_per_thread 2," in src[damping]
    assert "// schedule: block 128x1, k_per_thread 1," in src[gradient]


def test_launch_attributes_per_vendor(kind_irs):
    prog = kind_irs["chained"]
    cuda = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule(block=(64, 4), min_blocks_per_sm=2))).module_source
    assert "__launch_bounds__(256, 2)" in cuda
    cuda = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule(max_registers=64))).module_source
    assert "__maxnreg__(64)" in cuda and "__launch_bounds__" not in cuda
    for s in (Schedule(block=(64, 4)), Schedule(max_registers=64), Schedule(min_blocks_per_sm=2), Schedule(max_registers=100, min_blocks_per_sm=8)):
        hip = gpu_artifact(prog, "hip", ProgramSchedule(s)).module_source
        assert "__launch_bounds__" not in hip and "__maxnreg__" not in hip
        assert f"amdgpu_flat_work_group_size(1, {s.threads})" in hip
        assert ("amdgpu_waves_per_eu" in hip) == (s.max_registers is not None or s.min_blocks_per_sm is not None)
    assert "amdgpu_waves_per_eu(8)" in gpu_artifact(prog, "hip", ProgramSchedule(Schedule(max_registers=64))).module_source
    assert "amdgpu_waves_per_eu(5)" in gpu_artifact(prog, "hip", ProgramSchedule(Schedule(max_registers=100))).module_source


def test_k_invariant_loads_leave_the_level_loop_when_a_thread_walks_levels(representative_irs):
    prog = representative_irs["compute_divergence_of_fluxes_of_rho_and_theta"]
    one = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule())).module_source
    assert "geofac_div_h0" not in one  # k_per_thread 1: nothing to save, code as before
    src = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule(k_per_thread=4))).module_source
    head, loop = src.split("for (long long k = k_first; k < k_last; ++k) {")
    assert "const double geofac_div_h0 = geofac_div[i * geofac_div_s0];" in head
    assert "const int C2E_2 = C2E[" in head
    assert "geofac_div[" not in loop, "a k-invariant load stayed in the level loop"


def test_k_unroll_and_h_per_thread_code(kind_irs):
    src = gpu_artifact(kind_irs["backward_scan"], "cuda", ProgramSchedule(Schedule(k_unroll=3, h_per_thread=2))).module_source
    assert "auto icf_level = [&](const long long k) __attribute__((always_inline))" in src
    assert "for (; icf_k - 2 >= k0; icf_k -= 3) { icf_level(icf_k); icf_level(icf_k - 1); icf_level(icf_k - 2); }" in src
    assert "for (; icf_k >= k0; --icf_k) icf_level(icf_k);  // remainder" in src
    assert "const long long i = icf_i0 + threadIdx.x + icf_h * icf_hs;" in src
    assert "const long long icf_hs = (long long)gridDim.x * 128;" in src


def test_staged_tables_are_read_after_one_barrier_and_no_thread_returns_before_it(kind_irs, representative_irs):
    for prog in (kind_irs["chained"], kind_irs["points_only"], representative_irs["mo_math_divrot_rot_vertex_ri_dsl"]):
        for s in (Schedule(smem_tables=("*",)), Schedule(block=(32, 4), h_per_thread=3, k_per_thread=2, smem_tables=("*",))):
            for name, text in kernel_sources(gpu_artifact(prog, "cuda", ProgramSchedule(s)).module_source).items():
                assert text.count("__syncthreads()") == 1, name
                barrier = text.index("__syncthreads()")
                assert "return" not in text[:barrier] and "break" not in text[:barrier], name
                table = next(t for t in ("C2E", "V2E") if f"{t}_sh[" in text)
                body = text[barrier:]
                assert f"{table}_sh[icf_i_sh * " in body
                assert not re.search(rf"\b{table}\[i \*", body), "a staged table is still read from global memory"
    chained = gpu_artifact(kind_irs["chained"], "cuda", ProgramSchedule(Schedule(smem_tables=("*",)))).module_source
    assert "E2C[C2E_0 * E2C_s0" in chained  # chained lookups stay global


def test_index_bits_32_uses_int_everywhere(kind_irs):
    src = gpu_artifact(kind_irs["chained"], "cuda", ProgramSchedule(Schedule(index_bits=32, k_per_thread=2))).module_source
    text = kernel_sources(src)["chained_k0"]
    assert "long long" not in text
    assert "const int c_s0" in text and "const int i = " in text


# --- host plan ------------------------------------------------------------------------------------


class FakeRuntime:
    """What a host plan calls, without a GPU: views report the strides we choose."""

    def __init__(self):
        self.launches = []
        self.bases = {}

    def view(self, field, ndim, dtype):
        return (np.uint64(4096), *(np.int64(s) for s in field.strides))

    def span(self, field):
        """Each field its own memory (the aliasing checks' spans): no two fields overlap."""
        lo = self.bases.setdefault(id(field), (len(self.bases) + 1) << 32)
        return lo, lo + 1

    def field(self, field, ndim, dtype):
        return self.view(field, ndim, dtype), self.ranges(field, ndim)

    @staticmethod
    def ranges(field, ndim):
        from icoforge.backend.runtime.gpu import Runtime

        return Runtime.ranges(field, ndim)

    def table(self, offset_provider, tag):
        return self.view(offset_provider[tag], 2, np.int32)

    @staticmethod
    def bound(field, axis, stop):
        r = field.domain.ranges[axis]
        return r.stop if stop else r.start

    def launch(self, kernel, grid, block, args):
        self.launches.append((kernel, grid, block, args))


def fake_field(shape, strides):
    ranges = [SimpleNamespace(start=0, stop=n) for n in shape]
    return SimpleNamespace(ndarray=SimpleNamespace(shape=shape), domain=SimpleNamespace(ranges=ranges), strides=strides)


def run_plan(program, schedule, c_strides, cells=5120, edges=7680, nk=10, kernels=None, out_strides=None):
    """The plan of `chained`; `out` laid out (1, cells) unless `out_strides` says otherwise.
    Stride sets off, the kernel arguments are per array its pointer and strides: c, c_s0, c_s1,
    out, .., C2E, .., E2C, .., then h0..k1; on (`stride_sets_plan`), see there."""
    art = gpu_artifact(program, "cuda", ProgramSchedule(schedule))
    ns: dict = {}
    exec(compile(art.host_plan, "<plan>", "exec"), ns)
    c = fake_field((cells, nk), c_strides)
    out = fake_field((cells, nk), out_strides or (1, cells))
    op = {"C2E": fake_field((cells, 3), (3, 1)), "E2C": fake_field((edges, 2), (2, 1))}
    rt = FakeRuntime()
    ns["launch"]((c, out), op, kernels or {"chained_k0": "K"}, rt)
    return rt.launches


def test_host_plan_grid_and_32_bit_index_checks(kind_irs):
    prog = kind_irs["chained"]
    ((_, grid, block, args),) = run_plan(prog, Schedule(block=(64, 2), k_per_thread=4, h_per_thread=3), (1, 5120))
    assert grid == (-(-5120 // 192), 2, 1) and block == (64, 2, 1)
    assert all(type(a) is np.int64 for a in args[1:3])
    ((_, _, _, args),) = run_plan(prog, Schedule(index_bits=32), (1, 5120))
    assert type(args[0]) is np.uint64 and all(type(a) is np.int32 for a in args[1:3])
    huge = (1, 2**28)  # levels 2**28 elements apart: level 9 lies beyond 2**31
    with pytest.raises(ScheduleError, match=r"chained_k0: index_bits=32, but indices into c reach 2,684,359,680 .*index_bits=64"):
        run_plan(prog, Schedule(index_bits=32), huge)
    ((_, _, _, args),) = run_plan(prog, Schedule(index_bits=64), huge)
    assert args[2] == 2**28
    with pytest.raises(ScheduleError, match=r"index_bits=32, but thread indices reach 2,147,483,648"):
        run_plan(prog, Schedule(index_bits=32), (1, 1), cells=2**31 - 16)


def test_auto_index_bits_launch_the_64_bit_twin_only_when_a_call_needs_it(kind_irs):
    prog = kind_irs["chained"]
    art = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule(index_bits="auto")))
    assert art.kernel_names == ("chained_k0", "chained_k0_w")
    sources = kernel_sources(art.module_source)
    assert "long long" not in sources["chained_k0"] and "const long long c_s0" in sources["chained_k0_w"]
    kernels = {"chained_k0": "K32", "chained_k0_w": "K64"}
    ((kernel, _, _, args),) = run_plan(prog, Schedule(index_bits="auto"), (1, 5120), kernels=kernels)
    assert kernel == "K32" and all(type(a) is np.int32 for a in args[1:3])
    for strides, cells in (((1, 2**28), 5120), ((1, 1), 2**31 - 16)):  # field indices, thread indices
        ((kernel, _, _, args),) = run_plan(prog, Schedule(index_bits="auto"), strides, cells=cells, kernels=kernels)
        assert kernel == "K64" and all(type(a) is np.int64 for a in args[1:3])


def test_a_64_bit_twin_counts_and_is_timed_as_its_kernel():
    from types import SimpleNamespace

    from icoforge.granule.instrument import kernel_count
    from icoforge.perf.timing import _kernel_name

    art = SimpleNamespace(kernel_names=("p_k0", "p_k0_w", "p_k1"))
    assert kernel_count(SimpleNamespace(icoforge_artifact=art)) == 2
    assert (_kernel_name(SimpleNamespace(name="p_k0_w")), _kernel_name(SimpleNamespace(name="p_k1"))) == ("p_k0", "p_k1")


# --- stride sets (the schedule's stride_sets: the HIP default, issue 50) --------------------------


def test_fields_of_one_dims_and_dtype_pass_one_stride_set(kind_irs, representative_irs):
    """Kernel arguments with stride_sets on: a pointer per array, then one stride set per dims and
    dtype of the call's fields (temporaries per dims and horizontal range, each table its own),
    named after it and printed with its members, the horizontal stride 1 written into the code;
    the kernel addresses every member with it. Off (CUDA's default): each array's own strides, the
    code as before the knob."""
    from icoforge.backend.codegen.cuda import kernel_param_order, stride_sets

    prog = kind_irs["chained"]
    k = kernel(prog)
    assert [(st.name, st.members) for st in stride_sets(k, prog)] == [("C2E", ("C2E",)), ("Cell_K", ("c", "out")), ("E2C", ("E2C",))]
    assert [st.unit for st in stride_sets(k, prog)] == [None, 0, None]  # a field's horizontal stride is 1; a table's passed
    assert [kind for kind, _ in kernel_param_order(k, prog, True)] == ["field", "field", "table", "table", "strides", "strides", "strides"]
    assert [kind for kind, _ in kernel_param_order(k, prog)] == ["field", "field", "table", "table"]
    art = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule(stride_sets=True)))
    text = kernel_sources(art.module_source)["chained_k0"]
    assert "// Cell_K_s*: strides of c, out" in text and "// stride 1, not passed: the horizontal dimension" in text
    assert "out[i + k * Cell_K_s1] = " in text and "Cell_K_s0" not in text and "c_s1" not in text and "out_s1" not in text
    assert "stride_sets on" in text and "convention 2" in art.module_source
    off = gpu_artifact(prog, "cuda", ProgramSchedule(Schedule()))
    text = kernel_sources(off.module_source)["chained_k0"]
    assert "out[i * out_s0 + k * out_s1] = " in text and "Cell_K" not in off.module_source and "stride_sets" not in off.module_source
    assert "Kernel arguments" not in off.module_source and "_shared" not in off.host_plan
    assert off == art.per_field_variant()  # what a call whose fields do not fit the sets runs
    # the call's fields share by dims and dtype, temporaries (laid out by the runtime) by dims and
    # horizontal range, never with a field; every array of the kernel in exactly one set
    prog = representative_irs["apply_divergence_damping_and_update_vn"]
    temporaries = {t.name: t for t in prog.temporaries}
    for k in prog.kernels():
        sets = stride_sets(k, prog)
        for st in sets:
            if st.members[0] in {t.name for t in prog.tables}:
                assert st.members == (st.name,)
                continue
            fields = [prog.field(m) for m in st.members]
            if st.name.startswith("tmp_"):
                assert {m in temporaries for m in st.members} == {True}
                assert len({(f.dims, f.domain.h_start, f.domain.h_end) for f in fields}) == 1
            else:
                assert not temporaries.keys() & set(st.members) and len({(f.dims, f.dtype) for f in fields}) == 1
        members = [m for st in sets for m in st.members]
        assert sorted(members) == sorted({*k.fields_read(), *k.fields_written(), *k.tables_used()})
        assert len(sets) == len({st.name for st in sets})


def test_stride_sets_host_plan_args_and_32_bit_checks(kind_irs):
    """Arguments with stride sets: the pointers of c, out, C2E, E2C, then the strides C2E_s0,
    C2E_s1, Cell_K_s1 (of c and out; Cell_K_s0 is 1) and E2C_s0, E2C_s1, then h0..k1; 32-bit
    strides and the 32-bit index checks as without."""
    prog = kind_irs["chained"]
    on = dict(stride_sets=True)
    ((_, grid, block, args),) = run_plan(prog, Schedule(block=(64, 2), k_per_thread=4, h_per_thread=3, **on), (1, 5120), out_strides=(1, 5120))
    assert grid == (-(-5120 // 192), 2, 1) and block == (64, 2, 1)
    assert len(args) == 4 + 5 + 4 and all(type(a) is np.int64 for a in args[4:9])
    ((_, _, _, args),) = run_plan(prog, Schedule(index_bits=32, **on), (1, 5120), out_strides=(1, 5120))
    assert all(type(a) is np.uint64 for a in args[:4]) and all(type(a) is np.int32 for a in args[4:9])
    huge = (1, 2**28)  # levels 2**28 elements apart: level 9 lies beyond 2**31
    with pytest.raises(ScheduleError, match=r"chained_k0: index_bits=32, but indices into c reach 2,684,359,680 .*index_bits=64"):
        run_plan(prog, Schedule(index_bits=32, **on), huge, out_strides=huge)
    ((_, _, _, args),) = run_plan(prog, Schedule(index_bits=64, **on), huge, out_strides=huge)
    assert args[6] == 2**28  # Cell_K_s1
    kernels = {"chained_k0": "K32", "chained_k0_w": "K64"}
    ((kernel, _, _, args),) = run_plan(prog, Schedule(index_bits="auto", **on), (1, 5120), out_strides=(1, 5120), kernels=kernels)
    assert kernel == "K32" and all(type(a) is np.int32 for a in args[4:9])
    ((kernel, _, _, args),) = run_plan(prog, Schedule(index_bits="auto", **on), huge, out_strides=huge, kernels=kernels)
    assert kernel == "K64" and all(type(a) is np.int64 for a in args[4:9])


def test_fields_that_do_not_fit_their_stride_set_stop_the_plan_before_any_launch(kind_irs):
    """The plan checks, before it launches anything, that a stride set's fields have its strides
    and a contiguous horizontal dimension: a field laid out otherwise raises StrideSetMismatch (a
    CallArgumentError naming it), on which the program's callable runs its per-field-strides
    variant (tests/backend/test_gpu_emulation.py runs it); never addressed with another field's
    strides or with stride 1. Off, any layout is passed as it is."""
    from icoforge.backend.runtime.host_checks import StrideSetMismatch
    from icoforge.errors import CallArgumentError

    prog = kind_irs["chained"]
    kernels = {"chained_k0": "K", "chained_k0_w": "W"}
    assert issubclass(StrideSetMismatch, CallArgumentError)
    for bits in (64, 32, "auto"):
        with pytest.raises(StrideSetMismatch, match=r"^chained: field 'out' has strides \(1, 6000\), 'c' of the same dims "
                           r"and dtype \(1, 5120\)") as e:  # fmt: skip
            run_plan(prog, Schedule(index_bits=bits, stride_sets=True), (1, 5120), out_strides=(1, 6000), kernels=kernels)
        assert e.value.field == "out" and e.value.program == "chained"
        with pytest.raises(StrideSetMismatch, match=r"chained: field 'out' has stride 10 along Cell, not 1"):
            run_plan(prog, Schedule(index_bits=bits, stride_sets=True), (1, 5120), out_strides=(10, 1), kernels=kernels)
        with pytest.raises(StrideSetMismatch, match=r"chained: field 'c' has stride 10 along Cell, not 1"):  # the first member too
            run_plan(prog, Schedule(index_bits=bits, stride_sets=True), (10, 1), out_strides=(10, 1), kernels=kernels)
        ((_, _, _, args),) = run_plan(prog, Schedule(index_bits=bits), (10, 1), out_strides=(1, 6000), kernels=kernels)
        assert [int(a) for a in args[1:3]] == [10, 1] and [int(a) for a in args[4:6]] == [1, 6000]


def test_stride_sets_per_kernel(representative_irs):
    """A knob like any other: a per-kernel schedule turns stride sets on for its kernel only; the
    other kernels, the variant and the schedule's key say what each got."""
    prog = representative_irs["apply_divergence_damping_and_update_vn"]
    names = [k.name for k in prog.kernels()]
    assert len(names) >= 2
    schedule = ProgramSchedule(Schedule()).with_kernel(names[0], Schedule(stride_sets=True))
    assert schedule.key() != ProgramSchedule(Schedule()).key()
    art = gpu_artifact(prog, "cuda", schedule)
    sources = kernel_sources(art.module_source)
    assert "stride_sets on" in sources[names[0]] and "_s*: strides of" in sources[names[0]]
    assert all("stride_sets" not in sources[n] and "_s*: strides of" not in sources[n] for n in names[1:])
    assert art.stride_sets and "_shared(" in art.host_plan
    variant = art.per_field_variant()
    assert not variant.stride_sets and variant == gpu_artifact(prog, "cuda", ProgramSchedule(Schedule()))
