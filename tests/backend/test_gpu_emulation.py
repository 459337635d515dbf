"""The generated CUDA/HIP code, run on the CPU by emulation (icoforge.backend.runtime.emulate), against
GT4Py's results: every dycore program with the vendor defaults and with shared-memory staging, and
a grid of schedules covering every knob (staging and its barrier included) on representative
programs. The programs are compiled with no static scalars (program_ir's variant), and each check
compares with gtfn_cpu's stored outputs of that variant (icoforge/suite/gt4py_references_static_none.json,
seed 0, digests: icoforge/suite/references.py) and then, as a second opinion on other inputs, with
the CPU target (outputs poisoned, whole arrays, rtol 1e-12). That store holds all 78 programs
(`icoforge references make --static none`, 2026-12-07, 3,036 s on the 2-core VM): the
every-program tests (slow) compare their unbound variant with it and with the CPU target, and
hold all 78 programs to GT4Py through the variant icon4py runs as well (int/bool scalars static,
the GT4Py backend path of the emulator) against the store of that variant
(icoforge/suite/gt4py_references.json). On a
GPU, tests/schedule/test_gpu_schedules.py runs the same comparisons for real. The emulator's
barrier itself: tests/backend/test_emulate_barriers.py."""

from __future__ import annotations

import numpy as np
import pytest

from icoforge.backend.runtime import gpu
from icoforge.backend.runtime.emulate import EmulatedRuntime, emulated_allocator, load_emulated, make_emulated_backend
from icoforge.backend.runtime.gpu import gpu_artifact
from icoforge.backend.runtime.precompile import program_ir
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule
from icoforge.grids import load_grid
from icoforge.suite import references as refs
from icoforge.suite.catalogue import get_program, program_names
from icoforge.suite.runner import CustomBackend
from icoforge.suite.verify import verify

REPRESENTATIVE = (
    "compute_contravariant_correction_of_w",  # pure vertical
    "compute_divergence_of_fluxes_of_rho_and_theta",  # C2E / E2C
    "mo_math_divrot_rot_vertex_ri_dsl",  # V2E with skip values
    "solve_tridiagonal_matrix_for_w_forward_sweep",  # forward scan, tuple state
    "apply_divergence_damping_and_update_vn",  # temporaries, host conditionals
)

SCHEDULES = {
    "2d-block": Schedule(block=(32, 4)),
    "kloop": Schedule(block=(64, 2), k_per_thread=3),
    "kloop-unroll": Schedule(k_per_thread=4, k_unroll=2),
    "unroll-only": Schedule(k_unroll=3),
    "hblock": Schedule(block=(64, 1), h_per_thread=3),
    "int32-chiplets": Schedule(index_bits=32, chiplet_remap=True, chiplets=8),
    "regcap": Schedule(block=(128, 1), max_registers=64),
    "auto-index-32x8": Schedule(block=(32, 8), index_bits="auto"),  # the best schedule of the H200 sweeps
    "everything": Schedule(block=(32, 4), k_per_thread=3, k_unroll=2, h_per_thread=2, index_bits=32, chiplet_remap=True),
    # shared-memory staging: every thread of a block stages, one barrier, then the points
    "smem": Schedule(smem_tables=("*",)),
    "smem-everything": Schedule(block=(32, 4), k_per_thread=3, k_unroll=2, h_per_thread=3, smem_tables=("*",),
                                index_bits="auto", chiplet_remap=True, chiplets=5),
    # kernel arguments: one stride set per dims and dtype (the HIP default; CUDA's off)
    "stride-sets": Schedule(block=(32, 8), index_bits="auto", stride_sets=True),
    "stride-sets-everything": Schedule(block=(32, 4), k_per_thread=3, k_unroll=2, h_per_thread=2, smem_tables=("*",),
                                       index_bits=32, stride_sets=True),
}
SMEM = Schedule(block=(64, 2), h_per_thread=2, smem_tables=("*",))


@pytest.fixture(scope="module")
def grid(icoforge_cache):
    return load_grid(refs.GRID, levels=refs.LEVELS, show_progress=False)


@pytest.fixture(scope="module")
def gt4py_store():
    """gtfn_cpu's stored outputs with no static scalars: the variant these tests compile."""
    store = refs.load_store(static="none")
    assert store["meta"]["static"] == "none" and store["meta"]["reference_backend"] == "gtfn_cpu"
    return store


def emulated(vendor: str, schedule: Schedule, thread_order: str = "forward") -> CustomBackend:
    def prepare(info, grid, args):
        art = gpu_artifact(program_ir(info.program, grid.connectivities), vendor, ProgramSchedule(schedule))
        program = load_emulated(art, thread_order)
        names = [p.name for p in info.params]

        def call(a):
            program(*[a[n] for n in names], offset_provider=grid.connectivities)
            # fields laid out by GT4Py's allocator fit the stride sets: the schedule's code ran, not
            # the per-field-strides variant that stands in for fields laid out otherwise
            assert program.icoforge_per_field_calls == 0

        return call

    return CustomBackend(f"emulated-{vendor}", prepare, allocator=emulated_allocator())


def check(name: str, vendor: str, schedule: Schedule, grid, store: dict, thread_order: str = "forward") -> None:
    """Against GT4Py's stored results of this variant (no static scalars, seed 0), then against the
    CPU target."""
    backend = emulated(vendor, schedule, thread_order)
    info = get_program(name)
    stored = refs.check_program(info, backend, grid, store)
    assert stored.passed, stored.summary()
    assert all(store["programs"][name]["outputs"][o]["written"] > 0 for o in info.outputs)
    # second opinion, other inputs: the CPU target, whole arrays (static_params="none": the same
    # GTIR as program_ir, so GT4Py's passes are shared)
    res = verify(info, backend, "icoforge-cpu", grid, seed=23, rtol=1e-12, static_params="none")
    assert res.passed, res.summary()
    assert all(o.written > 0 for o in res.outputs), "nothing written: nothing compared"


def check_bound(name: str, schedule: Schedule, grid, store: dict) -> None:
    """icon4py's int/bool scalars compiled static (the emulator as a GT4Py backend, the variant
    icon4py runs): against gtfn_cpu's stored outputs of that variant."""
    backend = make_emulated_backend("cuda", ProgramSchedule(schedule))
    stored = refs.check_program(get_program(name), backend, grid, store)
    assert stored.passed and stored.static == "icon4py", stored.summary()


@pytest.fixture(scope="module")
def gt4py_bound_store():
    store = refs.load_store(static="icon4py")
    assert store["meta"]["static"] == "icon4py" and set(store["programs"]) == set(program_names())
    return store


@pytest.mark.parametrize("schedule", list(SCHEDULES), ids=list(SCHEDULES))
@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_schedules_preserve_results(name, schedule, grid, gt4py_store):
    check(name, "cuda", SCHEDULES[schedule], grid, gt4py_store)


@pytest.mark.parametrize("name", REPRESENTATIVE[:3])
def test_hip_default(name, grid, gt4py_store):
    check(name, "hip", VENDOR_DEFAULTS["hip"], grid, gt4py_store)


@pytest.mark.parametrize("name", ["compute_divergence_of_fluxes_of_rho_and_theta", "apply_divergence_damping_and_update_vn"])
def test_smem_staging_is_emulated_with_its_barrier(name, grid, gt4py_store):
    """The staged kernels wait at a barrier (the block's threads run as fibers); with the threads
    of each phase run backwards, a read of shared memory not ordered by the barrier would differ."""
    info = get_program(name)
    art = gpu_artifact(program_ir(info.program, grid.connectivities), "cuda", ProgramSchedule(SMEM))
    assert any(k.barriers for k in art.device.kernels) and all(
        (k.smem_bytes > 0) == k.barriers == ("__syncthreads()" in k.source) for k in art.device.kernels
    )
    check(name, "cuda", SMEM, grid, gt4py_store, thread_order="reversed")
    check(name, "hip", SMEM.replace(block=(256, 1), chiplet_remap=True), grid, gt4py_store)


@pytest.mark.slow
@pytest.mark.parametrize("name", program_names())
def test_every_program_cuda_default(name, grid, gt4py_store, gt4py_bound_store):
    check_bound(name, VENDOR_DEFAULTS["cuda"], grid, gt4py_bound_store)
    check(name, "cuda", VENDOR_DEFAULTS["cuda"], grid, gt4py_store)


@pytest.mark.slow
@pytest.mark.parametrize("name", program_names())
def test_every_program_cuda_smem(name, grid, gt4py_store, gt4py_bound_store):
    """Every program with every table it reads by its own row staged in shared memory (kernels
    without such a table are plain; the comparison holds either way)."""
    schedule = SMEM.replace(k_per_thread=2, index_bits="auto")
    check_bound(name, schedule, grid, gt4py_bound_store)
    check(name, "cuda", schedule, grid, gt4py_store)


def test_verify_all_checks_another_backend_with_its_schedule(tmp_path, grid, monkeypatch, capsys):
    """`icoforge verify-all --backend B --reference R --schedule S --seed N` (what
    scripts/device/hip_on_cuda.sh runs with icoforge-hip-on-cuda on the H200), here with the HIP
    code emulated on the CPU: the table names the pair and the schedule and ends in "1 of 1"."""
    from icoforge.cli.main import main

    monkeypatch.setenv("ICOFORGE_SCHEDULE", "")  # --schedule exports it: undone after the test
    out = tmp_path / "verify.md"
    sched = '{"default": {"block": [256, 1], "smem_tables": ["*"], "chiplet_remap": true}}'
    argv = ["verify-all", "--programs", "mo_math_divrot_rot_vertex_ri_dsl", "--grid", "R2B3", "--levels", "10",
            "--backend", "icoforge-emulated-hip", "--reference", "icoforge-cpu", "--seed", "5", "--jobs", "1",
            "--schedule", sched, "--out", str(out)]  # fmt: skip
    assert main(argv) == 0, out.read_text()
    text = out.read_text()
    assert "# verify-all: icoforge-emulated-hip vs icoforge-cpu" in text and sched in text and "inputs of seed 5" in text
    assert text.rstrip().endswith("1 of 1 passed (0 not run yet).")
    capsys.readouterr()
    assert main([*argv[:8], "icoforge-hip-on-cud", *argv[9:]]) != 0  # a misspelt backend: refused before any work
    assert "icoforge-hip-on-cud" in capsys.readouterr().err


def test_planted_faults_in_the_emulated_output_or_the_reference_fail_the_gt4py_check(grid, gt4py_store):
    """The comparison with GT4Py's stored outputs can fail: the emulated CUDA output of one program
    with one written point (not a sampled one) moved by 10x what the sums allow, or set to NaN,
    fails; so does the true output against a reference with one sampled value or one sum changed."""
    import copy

    from icoforge.suite.verify import run_once

    name = REPRESENTATIVE[0]
    info = get_program(name)
    backend = emulated("cuda", VENDOR_DEFAULTS["cuda"])
    entry = gt4py_store["programs"][name]
    output = info.outputs[0]
    digest = entry["outputs"][output]
    real = {}

    def run(info, backend, grid, host_args):
        real.update(run_once(info, backend, grid, host_args, "none"))
        return real

    assert refs.check_program(info, backend, grid, gt4py_store, run=run).passed  # unperturbed: passes
    sampled = set(digest["samples"]["at"])
    flat = [i for i in np.flatnonzero(refs.written_mask(real[output])) if int(i) not in sampled]
    point = np.unravel_index(int(flat[len(flat) // 2]), real[output].shape)
    for value in (real[output][point] + 10 * refs.SUM_RTOL * digest["sums"]["abs"], np.nan):
        bad = copy.deepcopy(real)
        bad[output][point] = value
        found = refs.check_program(info, backend, grid, gt4py_store, run=lambda *a: bad)
        assert not found.passed and any(p.startswith(f"{output}:") for p in found.problems), found.summary()
    for where in ("samples", "sums"):
        wrong = copy.deepcopy(gt4py_store)
        d = wrong["programs"][name]["outputs"][output]
        if where == "samples":
            d["samples"]["values"][0] += 1e-6 * (abs(d["samples"]["values"][0]) + d["max_abs"])
        else:
            d["sums"]["sum"] += 1e-9 * d["sums"]["abs"]
        assert not refs.check_program(info, backend, grid, wrong, run=lambda *a: real).passed, where


@pytest.mark.parametrize(
    "vendor,schedule", [("hip", VENDOR_DEFAULTS["hip"]), ("cuda", VENDOR_DEFAULTS["cuda"].replace(stride_sets=True))],
    ids=["hip-default", "cuda-stride-sets"],
)  # fmt: skip
def test_a_field_laid_out_unlike_its_stride_set_runs_the_per_field_variant(vendor, schedule, grid, monkeypatch, capsys):
    """With stride sets (issue 50, codegen/cuda.py `stride_sets`; the HIP default) the kernels
    address the fields of one dims and dtype with one set of strides. A call whose fields are laid
    out otherwise is never refused and never misaddressed: it runs the program's per-field-strides
    variant, built at the first such call with one log line (gpu.bind_program). Planted here:
    `z_theta_v_fl_e` with the values of a GT4Py field but its levels further apart than
    `mass_fl_e`'s (GT4Py pads them to 64 bytes), then `mass_fl_e` and the output `z_flxdiv_mass`
    as NumPy C-order arrays (horizontal stride = levels, not 1): the CPU target's results, bit for
    bit. Without the fallback these calls raise StrideSetMismatch; without the check (`_shared`
    made to pass the first member's strides unchecked) they compute wrong results."""
    import gt4py.next as gtx
    from gt4py.next.embedded.nd_array_field import NumPyArrayField

    from icoforge.backend.runtime import host_checks
    from icoforge.suite.inputs import make_inputs
    from icoforge.suite.verify import run_once

    name = "compute_divergence_of_fluxes_of_rho_and_theta"
    info = get_program(name)
    args = make_inputs(info, grid, seed=3, allocator=emulated_allocator())
    expected = run_once(info, "icoforge-cpu", grid, args, "none")
    good = args["z_theta_v_fl_e"]
    n_h, n_k = good.ndarray.shape
    shared = args["mass_fl_e"].ndarray.strides[1] // 8  # the Edge_K set's level stride: the first member's
    padded = np.zeros((n_k, n_h + 32))  # the same values, levels n_h + 32 > `shared` elements apart
    assert n_h <= shared < n_h + 32
    padded[:, :n_h] = good.ndarray.T
    planted = {**args, "z_theta_v_fl_e": NumPyArrayField.from_array(padded[:, :n_h].T, domain=good.domain)}
    assert np.array_equal(planted["z_theta_v_fl_e"].asnumpy(), good.asnumpy())
    c_order = {**args, "mass_fl_e": np.ascontiguousarray(args["mass_fl_e"].asnumpy())}

    art = gpu_artifact(program_ir(info.program, grid.connectivities), vendor, ProgramSchedule(schedule))
    assert art.stride_sets and "Edge_K_s1" in art.module_source
    program = load_emulated(art)
    names = [p.name for p in info.params]

    def call(a, c_order_output=False):
        a = {**a, **{o: gtx.as_field(a[o].domain, a[o].asnumpy(), allocator=emulated_allocator()) for o in info.outputs}}
        if c_order_output:
            a["z_flxdiv_mass"] = np.ascontiguousarray(a["z_flxdiv_mass"].asnumpy())
        program(*[a[n] for n in names], offset_provider=grid.connectivities)
        return {o: np.asarray(a[o] if isinstance(a[o], np.ndarray) else a[o].asnumpy()) for o in info.outputs}

    def same(got):
        return all(np.array_equal(got[o], expected[o], equal_nan=True) for o in info.outputs)

    assert same(call(args)) and program.icoforge_per_field_calls == 0  # laid out alike: the stride sets ran
    assert program.icoforge_per_field_variant is None and capsys.readouterr().err == ""
    assert same(call(planted)) and program.icoforge_per_field_calls == 1
    log = capsys.readouterr().err.strip().splitlines()
    assert len(log) == 1 and f"field 'z_theta_v_fl_e' has strides (1, {n_h + 32}), 'mass_fl_e' of the same dims" in log[0], log
    assert "running the per-field-strides variant" in log[0]
    variant = program.icoforge_per_field_variant
    assert not variant.stride_sets and "Edge_K_s1" not in variant.module_source and "mass_fl_e_s1" in variant.module_source
    assert same(call(c_order, c_order_output=True)) and program.icoforge_per_field_calls == 2
    assert capsys.readouterr().err == ""  # one line per program, at the first such call
    assert same(call(args)) and program.icoforge_per_field_calls == 2  # the stride sets again for fields that fit

    with pytest.raises(host_checks.StrideSetMismatch, match=r"field 'mass_fl_e' has stride \d+ along Edge, not 1"):
        gpu.bind_program(art, program.icoforge_kernels, EmulatedRuntime(art.program_name))(
            *[c_order[n] for n in names], offset_provider=grid.connectivities
        )  # without a way to load the variant: the mismatch, a CallArgumentError, never a wrong address

    def unchecked(program_name, arrays, unit=None):
        strides = arrays[0][1][1:]
        return strides if unit is None else strides[: unit[0]] + strides[unit[0] + 1 :]

    monkeypatch.setattr(host_checks, "_shared", unchecked)  # the host plan imports it when it is loaded
    unchecked_program = load_emulated(art)
    a = {**planted, **{o: gtx.as_field(args[o].domain, args[o].asnumpy(), allocator=emulated_allocator()) for o in info.outputs}}
    unchecked_program(*[a[n] for n in names], offset_provider=grid.connectivities)
    wrong = {o: a[o].asnumpy() for o in info.outputs}
    assert unchecked_program.icoforge_per_field_calls == 0 and not same(wrong)


def test_stride_sets_are_schedule_data():
    """The knob: off in the Schedule and CUDA's default, on in HIP's; a schedule's JSON, CLI
    setting, description and the tuner's space carry it, and it is part of the key (caches)."""
    from icoforge.tune.space import candidates, knobs

    assert not Schedule().stride_sets and not VENDOR_DEFAULTS["cuda"].stride_sets and VENDOR_DEFAULTS["hip"].stride_sets
    on = Schedule(stride_sets=True)
    assert Schedule.from_json(on.to_json()) == on and Schedule().with_settings(["stride_sets=on"]) == on
    assert "stride_sets on" in on.describe() and "stride_sets" not in Schedule().describe()
    assert ProgramSchedule(on).key() != ProgramSchedule(Schedule()).key()
    with pytest.raises(Exception, match="stride_sets must be true or false"):
        Schedule(stride_sets="yes").validate()
    assert knobs("stridesets") == {"stride_sets": True} and knobs("fieldstrides") == {"stride_sets": False}
    assert candidates("cuda")["stridesets"] == VENDOR_DEFAULTS["cuda"].replace(stride_sets=True) and "fieldstrides" not in candidates("cuda")
    assert candidates("hip")["fieldstrides"] == VENDOR_DEFAULTS["hip"].replace(stride_sets=False) and "stridesets" not in candidates("hip")
