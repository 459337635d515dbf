"""The autotuner (icoforge.tune): the search space, the per-kernel pick, the whole search through
the CPU emulation of the generated CUDA (real builds, runs and output checks; the times are the
emulation's), a candidate that changes the results, the schedule file, the command line. The GPU
twin at the end runs on a GPU only."""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Callable

import numpy as np
import pytest

from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule
from icoforge.cli.main import main
from icoforge.errors import IcoforgeError
from icoforge.perf.timing import Stats
from icoforge.suite.backends import schedule_from_env
from icoforge.tune import Target, candidates, tune_program, tune_suite_program, write_schedule
from icoforge.suite.catalogue import get_program
from icoforge.tune.tuner import CandidateRun, pick_per_kernel

SMALL = "compute_perturbed_quantities_and_interpolation"  # 10 kernels, maps with k offsets


# --- the search space ----------------------------------------------------------------------------


@pytest.mark.parametrize("vendor", ["cuda", "hip"])
@pytest.mark.parametrize("space", ["quick", "full"])
def test_the_space_starts_with_the_vendor_default_and_holds_valid_distinct_schedules(vendor, space):
    c = candidates(vendor, space)
    assert next(iter(c)) == "default" and c["default"] == VENDOR_DEFAULTS[vendor]
    assert len(set(c.values())) == len(c)  # nothing timed twice
    for s in c.values():
        assert s.validate() is s
    assert len(c) >= 10
    if space == "full":
        assert set(candidates(vendor, "quick")) <= set(c)


def test_the_space_holds_shared_memory_staging():
    # the same on a GPU and in the CPU emulation, which runs staging and barriers
    assert {"smem", "smem_idx32", "smem_kpt2"} <= set(candidates("cuda", "full"))


def test_a_candidate_id_names_its_knobs():
    from icoforge.tune.space import knobs

    assert knobs("block128x1_kpt4_idx32") == {"block": (128, 1), "k_per_thread": 4, "index_bits": 32}
    assert knobs("idx_auto") == {"index_bits": "auto"} and knobs("smem_kpt2") == {"smem_tables": ("*",), "k_per_thread": 2}
    assert candidates("hip", "full")["chiplet8"] == VENDOR_DEFAULTS["hip"].replace(chiplet_remap=True)
    with pytest.raises(IcoforgeError, match="no knob is named 'kpt'"):
        knobs("block32x8_kpt")


def test_unknown_space_or_vendor_is_refused():
    with pytest.raises(IcoforgeError, match="search space"):
        candidates("cuda", "huge")
    with pytest.raises(IcoforgeError, match="vendor"):
        candidates("sycl")


# --- the per-kernel pick -------------------------------------------------------------------------


def _run(cid: str, status: str = "OK", **kernel_us: float) -> CandidateRun:
    sched = Schedule(block=(len(cid) + 1, 1))  # any distinct schedule per candidate
    return CandidateRun(cid, sched, status, kernels={k: Stats((v * 1e-6,)) for k, v in kernel_us.items()})


def test_each_kernel_takes_its_fastest_verified_candidate():
    runs = [
        _run("default", a=100, b=100, c=100),
        _run("x", a=50, b=99, c=120),  # wins a; b only 1 % faster: below min_gain
        _run("y", a=60, b=90, c=200),  # wins b
        _run("bad", "DIFFERS", a=1, b=1, c=1),  # fastest, but its outputs differ
        _run("refused", "REFUSED"),
    ]
    picks = {p.kernel: p for p in pick_per_kernel(runs, min_gain=0.03)}
    assert (picks["a"].best_id, picks["b"].best_id, picks["c"].best_id) == ("x", "y", "default")
    assert picks["a"].best_s == pytest.approx(50e-6) and picks["a"].schedule == runs[1].schedule
    assert picks["c"].best_s == pytest.approx(100e-6) and picks["c"].schedule == runs[0].schedule
    # a stricter threshold keeps b on the default (10 % faster is not 20 %)
    assert {p.kernel: p.best_id for p in pick_per_kernel(runs, min_gain=0.2)} == {"a": "x", "b": "default", "c": "default"}


@pytest.mark.parametrize("tuned_us, kept_default", [(210.0, True), (200.0, True), (150.0, False)])
def test_picks_are_handed_out_only_when_faster_together(monkeypatch, tuned_us, kept_default):
    """Kernel a wins alone with candidate x; the picks together take `tuned_us` against the
    default's 200 µs. Not faster together: the vendor default is handed out, and said so."""
    from icoforge.tune import tuner

    times = {"default": (dict(a=100, b=100), 200.0), "x": (dict(a=50, b=100), 150.0), "tuned": (dict(a=50, b=100), tuned_us)}

    def run(bench, cid, artifact, sched):
        kernels, whole = times[cid]
        return CandidateRun(cid, sched, "OK", whole=Stats((whole * 1e-6,)), kernels={k: Stats((v * 1e-6,)) for k, v in kernels.items()})

    monkeypatch.setattr(tuner, "run_candidate", run)
    monkeypatch.setattr(tuner, "build_candidate", lambda pir, vendor, sched: object())
    monkeypatch.setattr(tuner, "_Bench", lambda *args: None)  # no inputs: the runs above are made up
    base = VENDOR_DEFAULTS["cuda"]
    result = tune_program(types.SimpleNamespace(name="p"), {}, {}, (), (), Target("cuda", True),
                          {"default": base, "x": base.replace(k_per_thread=2)}, min_gain=0.03)  # fmt: skip
    assert [p.best_id for p in result.picks] == ["x", "default"]
    assert result.kept_default is kept_default and result.tuned_whole_s == pytest.approx(tuned_us * 1e-6)
    assert bool(dict(result.schedule.per_kernel)) is not kept_default
    assert result.to_json()["kept_default"] is kept_default


def test_every_run_is_inside_measuring_and_no_code_generation_is(monkeypatch):
    """`measuring` (`icoforge tune --gpu-lock`: parallel processes time one at a time) is held
    while candidates run, never while their code is generated or compiled."""
    import contextlib

    from icoforge.tune import tuner

    inside, events = [False], []

    @contextlib.contextmanager
    def measuring():
        inside[0] = True
        yield
        inside[0] = False

    def run(bench, cid, artifact, sched):
        events.append(("run", cid, inside[0]))
        return CandidateRun(cid, sched, "OK", whole=Stats((1e-4,)), kernels={"a": Stats((1e-4,))})

    def build(pir, vendor, sched):
        events.append(("build", inside[0]))
        return object()

    monkeypatch.setattr(tuner, "run_candidate", run)
    monkeypatch.setattr(tuner, "build_candidate", build)
    monkeypatch.setattr(tuner, "_Bench", lambda *args: None)
    base = VENDOR_DEFAULTS["cuda"]
    tune_program(types.SimpleNamespace(name="p"), {}, {}, (), (), Target("cuda", True),
                 {"default": base, "x": base.replace(k_per_thread=2)}, measuring=measuring)  # fmt: skip
    assert events == [("build", False), ("build", False), ("run", "default", True), ("run", "x", True),
                      ("build", False), ("run", "tuned", True)]  # fmt: skip


# --- the whole search, through the CPU emulation of the CUDA code -------------------------------


def _inputs(name, grid):
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_program, make_inputs

    info = get_program(name)
    args = make_inputs(info, grid, seed=3)
    return info, args, suite_program_ir(info, grid, args)


def _few(vendor="cuda"):
    base = VENDOR_DEFAULTS[vendor]
    return {"default": base, "kpt2": base.replace(k_per_thread=2), "block128x1_idx32": base.replace(block=(128, 1), index_bits=32),
            "hpt2": base.replace(h_per_thread=2)}  # fmt: skip


def test_emulated_search_verifies_times_and_combines(tiny_grid):
    info, args, pir = _inputs(SMALL, tiny_grid)
    outputs = tuple(o for o in info.outputs if o in args)
    result = tune_program(pir, args, tiny_grid.connectivities, outputs, tuple(info.inouts), Target("cuda", True),
                          _few(), repeat=2, min_gain=0.0)  # fmt: skip
    assert [r.status for r in result.runs] == ["OK"] * 4, [(r.id, r.detail) for r in result.runs]
    kernels = {k.name for k in pir.kernels()}
    assert {p.kernel for p in result.picks} == kernels  # every kernel was timed by the default
    for r in result.runs:
        assert set(r.kernels) == kernels and all(s.median > 0 for s in r.kernels.values())
    # the schedule handed out: the vendor default plus an override for each kernel that moved
    moved = {p.kernel: p.schedule for p in result.picks if p.best_id != "default"}
    assert result.schedule.default == VENDOR_DEFAULTS["cuda"]
    # emulated times are noise: the picks together may come out slower as a whole call, and then
    # the tuner hands out the plain default (and says so) -- either way, never a mix
    if result.kept_default:
        assert moved and result.tuned_whole_s >= result.default_whole_s and not result.schedule.per_kernel
    else:
        assert dict(result.schedule.per_kernel) == moved
    assert result.tuned_whole_s > 0 and result.default_whole_s > 0

    # independent check: the tuned schedule, built and run again, gives the CPU target's outputs
    from icoforge.backend.runtime.emulate import load_emulated
    from icoforge.backend.runtime.gpu import gpu_artifact
    from icoforge.perf.timing import positional
    from icoforge.suite import get_backend, prepare

    def poisoned_inputs():  # the same inputs, pure outputs NaN: points a program skips stay NaN
        fresh = _inputs(SMALL, tiny_grid)[1]
        for o in outputs:
            if o not in info.inouts:
                fresh[o].ndarray[...] = np.nan
        return fresh

    ref_args = poisoned_inputs()
    call, _ = prepare(info, get_backend("icoforge-cpu"), tiny_grid, ref_args)
    call(ref_args)
    args = poisoned_inputs()
    # the picks themselves, also when they were not handed out
    picked = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], per_kernel=moved)
    fn = load_emulated(gpu_artifact(pir, "cuda", picked))
    fn(*positional(pir, args), offset_provider=tiny_grid.connectivities)
    for o in outputs:
        assert np.isfinite(ref_args[o].ndarray).any()
        np.testing.assert_array_equal(args[o].ndarray, ref_args[o].ndarray)


@dataclasses.dataclass(frozen=True)
class _TamperingTarget(Target):
    """Emulation, but builds whose source contains `marker` ("" = every build) change their
    outputs after each call (fields marked `_icf_out`): `tamper(array)` stands in for a code
    generator bug that only those schedules have."""

    marker: str = ""
    tamper: Callable[[np.ndarray], None] = lambda a: None

    def load(self, art):
        fn = super().load(art)
        if self.marker not in art.module_source:
            return fn

        def tampered(*a, offset_provider):
            fn(*a, offset_provider=offset_provider)
            for v in a:
                if getattr(v, "_icf_out", False):
                    self.tamper(v.ndarray)

        tampered.icoforge_runtime = fn.icoforge_runtime
        return tampered


def _marked_inputs(tiny_grid):
    info, args, pir = _inputs(SMALL, tiny_grid)
    outputs = tuple(o for o in info.outputs if o in args)
    for o in outputs:
        object.__setattr__(args[o], "_icf_out", True)  # what the tampering target changes
    return info, args, pir, outputs


def _add_one(a):
    a[0, 0] += 1.0


def _computed_nan(a):
    a[1, 1] = np.float64("nan")  # a plain NaN, not the poison


def test_a_candidate_whose_outputs_differ_is_reported_and_never_chosen(tiny_grid):
    info, args, pir, outputs = _marked_inputs(tiny_grid)
    target = _TamperingTarget("cuda", True, marker="k_per_thread 2", tamper=_add_one)
    result = tune_program(pir, args, tiny_grid.connectivities, outputs, tuple(info.inouts), target, _few(),
                          repeat=1, min_gain=0.0)  # fmt: skip
    status = {r.id: r.status for r in result.runs}
    assert status["kpt2"] == "DIFFERS" and "max abs diff 1" in next(r.detail for r in result.runs if r.id == "kpt2")
    assert all(status[c] == "OK" for c in ("default", "block128x1_idx32", "hpt2"))
    assert all(p.best_id != "kpt2" for p in result.picks)
    assert result.differing and result.differing[0].id == "kpt2"


def test_a_default_that_computes_nan_stops_the_search(tiny_grid):
    info, args, pir, outputs = _marked_inputs(tiny_grid)
    target = _TamperingTarget("cuda", True, marker="", tamper=_computed_nan)
    with pytest.raises(IcoforgeError, match="computes NaN"):  # every candidate would repeat it
        tune_program(pir, args, tiny_grid.connectivities, outputs, tuple(info.inouts), target, _few(), repeat=1)


def test_an_impossible_candidate_is_refused_before_compiling(tiny_grid):
    info, args, pir = _inputs(SMALL, tiny_grid)
    base = VENDOR_DEFAULTS["cuda"]
    # 255 registers x 1024 threads is four times an SM's register file: resolve() refuses it
    few = {"default": base, "greedy": base.replace(block=(1024, 1), max_registers=255)}
    result = tune_program(pir, args, tiny_grid.connectivities, tuple(o for o in info.outputs if o in args),
                          tuple(info.inouts), Target("cuda", True), few, repeat=1)  # fmt: skip
    greedy = result.runs[1]
    assert greedy.status == "REFUSED" and "regist" in greedy.detail
    assert all(p.best_id == "default" for p in result.picks) and not result.schedule.per_kernel


def test_the_default_must_come_first(tiny_grid):
    info, args, pir = _inputs(SMALL, tiny_grid)
    with pytest.raises(IcoforgeError, match="start with 'default'"):
        tune_program(pir, args, tiny_grid.connectivities, (), (), Target("cuda", True), {"x": VENDOR_DEFAULTS["cuda"]})


# --- the schedule file and the command line ------------------------------------------------------


def test_the_schedule_file_is_merged_kernel_by_kernel(tiny_grid, tmp_path):
    info, args, pir = _inputs(SMALL, tiny_grid)
    result = tune_program(pir, args, tiny_grid.connectivities, tuple(o for o in info.outputs if o in args),
                          tuple(info.inouts), Target("cuda", True), _few(), repeat=1, min_gain=0.0)  # fmt: skip
    kernels = [p.kernel for p in result.picks]
    other = Schedule(block=(64, 2))
    old = ProgramSchedule(default=Schedule(block=(256, 1)), per_kernel={"other_prog_k1": other, kernels[0]: other})
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps(old.to_json()))
    merged = write_schedule(result, path)
    loaded = ProgramSchedule.from_json(json.loads(path.read_text()))
    assert loaded == merged
    assert loaded.default == Schedule(block=(256, 1))  # the file's default is kept
    assert dict(loaded.per_kernel)["other_prog_k1"] == other  # another program's kernel is kept
    # this program's kernels: exactly the tuner's overrides (an old entry for a kernel that now
    # stays on the default is dropped)
    ours = {k: s for k, s in loaded.per_kernel if k in kernels}
    assert ours == dict(result.schedule.per_kernel)

    bad = tmp_path / "bad.json"
    bad.write_text('{"blocks": 3}')
    with pytest.raises(IcoforgeError, match="not a schedule file"):
        write_schedule(result, bad)


def test_tune_command_tunes_several_programs_into_one_schedule_file(tiny_grid, tmp_path, capsys, monkeypatch):
    out, js, md = tmp_path / "s.json", tmp_path / "t.json", tmp_path / "t.md"
    programs = ["compute_hydrostatic_correction_term", "compute_exner_from_rhotheta"]
    argv = ["tune", *programs, "--grid", "R2B3", "--levels", "10", "--backend", "icoforge-emulated-cuda",
            "--repeat", "1", "--out", str(out), "--json", str(js), "--markdown", str(md),
            "--gpu-lock", str(tmp_path / "gpu.lock")]  # fmt: skip
    assert main(argv) == 0
    text, err = capsys.readouterr()
    # the lock taken around each program's candidate runs, then around the picks together
    for p in programs:
        assert err.count(f"icoforge-emulated-cuda: GPU lock acquired after 0.0 s (tune {p})") == 2, err
    results = json.loads(js.read_text())["results"]
    assert [r["program"] for r in results] == programs and all(r["emulated"] for r in results)
    kernels = [p["kernel"] for r in results for p in r["picks"]]
    assert len(kernels) >= 2 and all(k in text for k in kernels)  # the tables name every kernel
    assert "CPU emulation" in text and "candidates:" in text and "DIFFERS" not in text
    for r in results:
        assert {c["status"] for c in r["candidates"]} <= {"OK", "REFUSED"}
    # one file with both programs' overrides (whatever moved), usable as --schedule FILE
    schedule = ProgramSchedule.from_json(json.loads(out.read_text()))
    # emulated times are noise: a program whose picks together came out slower hands out the
    # vendor default (kept_default), and then none of its kernels is in the file
    moved = {p["kernel"] for r in results if not r["kept_default"] for p in r["picks"] if p["best"] != "default"}
    assert {k for k, _ in schedule.per_kernel} == moved
    monkeypatch.setenv("ICOFORGE_SCHEDULE", str(out))
    assert schedule_from_env("cuda") == schedule
    report = md.read_text()
    assert all(f"## {p}" in report for p in programs) and all(k in report for k in kernels)


def test_tune_command_refuses_an_unknown_program_before_any_work(capsys):
    assert main(["tune", "compute_hydrostatic_correction_term", "no_such_program", "--backend", "icoforge-emulated-cuda"]) == 2
    err = capsys.readouterr().err
    assert "no_such_program" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "extra, message",
    [(["--min-gain", "1.5"], "--min-gain"), (["--repeat", "0"], "--repeat"),
     (["--static-value", "no_such=1"], "its scalars: "), (["--static-value", "vertical_end"], "NAME=VALUE"),
     (["--static-value", "vertical_end=ten"], "'ten' is not a int32")],
)
def test_tune_command_refuses_bad_options_in_one_line(extra, message, capsys):
    argv = ["tune", "compute_hydrostatic_correction_term", "--backend", "icoforge-emulated-cuda", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_tune_refuses_a_backend_without_schedules():
    from icoforge.tune import target_for_backend

    with pytest.raises(IcoforgeError, match="no schedules"):
        target_for_backend("gtfn_cpu")


# --- on a GPU -------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_tune_on_the_gpu_verifies_every_candidate(tiny_grid):
    from icoforge.backend.runtime.gpu import cupy_vendor

    vendor = cupy_vendor()
    if vendor is None:
        pytest.skip("needs CuPy and a CUDA/ROCm GPU")
    result = tune_suite_program(SMALL, tiny_grid, f"icoforge-{vendor}", "quick", repeat=5, jobs=2)  # NVRTC in 2 processes
    assert not result.differing, [(r.id, r.detail) for r in result.differing]
    assert {r.status for r in result.runs} <= {"OK", "REFUSED"}
    assert 0 < result.tuned_whole_s < 1 and 0 < result.default_whole_s < 1
    assert all(p.best_s <= p.default_s for p in result.picks)


@pytest.mark.slow  # two emulated tunes: about a minute
def test_a_static_value_replaces_the_suites_and_reaches_the_compiled_code(tiny_grid):
    # --static-value: how a granule variant (the values its log prints) is tuned, not the suite's
    from icoforge.suite.runner import static_overrides

    info = get_program("compute_hydrostatic_correction_term")
    with pytest.raises(IcoforgeError, match="not a scalar of .* its scalars: .*vertical_end"):
        static_overrides(info, {"nflatlev": "3"})
    start = tiny_grid.num_levels - 2  # the suite's: the last level alone
    assert static_overrides(info, {"vertical_start": str(start)}) == {"vertical_start": start}
    runs = [tune_suite_program(info.name, tiny_grid, "icoforge-emulated-cuda", "quick", repeat=1, static_values=values)
            for values in ({}, {"vertical_start": str(start)})]  # fmt: skip
    assert runs[0].fingerprints != runs[1].fingerprints  # a constant bound in the kernel: other code


def test_a_float_static_value_is_compiled_in_as_the_granule_does(tiny_grid):
    # icon4py's SolveNonhydro binds some float scalars at compile time too (interpolation/buoyancy's
    # rho-theta weights): --static-value makes a named scalar static, so its variant can be tuned
    from icoforge.backend.schedule import tuned
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import make_inputs
    from icoforge.suite.runner import static_overrides, static_param_names

    info = get_program("compute_interpolation_and_nonhydro_buoy")
    values = {"rhotheta_explicit_weight_parameter": "0.6", "rhotheta_implicit_weight_parameter": "0.4"}
    overrides = static_overrides(info, values)
    assert overrides == {"rhotheta_explicit_weight_parameter": 0.6, "rhotheta_implicit_weight_parameter": 0.4}
    names = static_param_names(info, "icon4py", overrides)
    assert names[: -len(values)] == static_param_names(info, "icon4py") and set(values) <= set(names)
    args = {**make_inputs(info, tiny_grid, 0), **overrides}
    prints = [{k.name: tuned.kernel_fingerprint(k) for k in suite_program_ir(info, tiny_grid, args, s).kernels()}
              for s in ("icon4py", names)]  # fmt: skip
    assert prints[0].keys() == prints[1].keys() and prints[0] != prints[1]  # the weights are constants in the code
