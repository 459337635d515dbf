"""Granule pieces that need no compilation: backends by name, state, field cache, profiler,
verification arithmetic, report rendering, CLI argument checks. Seconds in total."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from icoforge.cli.main import main
from icoforge.errors import IcoforgeError, UnknownNameError
from icoforge.granule import backends, fields, instrument, verify
from icoforge.granule.greenline import GreenlineOptions, GreenlineReport
from icoforge.granule.report import print_report
from icoforge.granule.runner import VARIANTS, BackendResult, ProgramRow
from icoforge.granule.state import PROGNOSTIC_FIELDS, initial_state

# --- backends -----------------------------------------------------------------------------------


def test_backend_names_are_checked_before_any_work():
    backends.check_name("icoforge-cpu+gtfn_cpu")
    backends.check_name("roundtrip_gtir")
    with pytest.raises(UnknownNameError, match="gtfn_cpu"):
        backends.check_name("icoforge-cpu+gtfn_cp")


def test_fallback_pair_is_one_gt4py_backend():
    b = backends.resolve_backend("icoforge-cpu+gtfn_cpu")
    assert "+" in b.name
    assert isinstance(b.executor, backends.FallbackExecutor)
    assert not backends.is_gpu("icoforge-cpu+gtfn_cpu") and backends.is_gpu("icoforge-cuda")


def test_fallback_pair_refuses_embedded_and_mixed_devices():
    with pytest.raises(IcoforgeError):
        backends.with_fallback("icoforge-cpu", "embedded")


def test_fallback_executor_falls_back_only_on_unsupported_constructs():
    from icoforge.errors import UnsupportedConstructError

    def unsupported(inp):
        raise UnsupportedConstructError("nested tuples are not supported yet")

    def broken(inp):
        raise ZeroDivisionError

    art = backends.FallbackExecutor(unsupported, lambda inp: "fallback artifact")(object())
    assert isinstance(art, backends.FallbackArtifact) and art.artifact == "fallback artifact"
    assert "tuples" in art.reason
    with pytest.raises(ZeroDivisionError):  # a real bug is never hidden by the fallback
        backends.FallbackExecutor(broken, lambda inp: "x")(object())


# --- static fields and state --------------------------------------------------------------------


def _fake_static(num_cells=6, num_edges=9, nlev=4) -> fields.StaticFields:
    rng = np.random.default_rng(1)
    z = np.linspace(1.0, 0.5, nlev)[None, :]
    metrics = {
        "reference_rho_at_cells_on_model_levels": fields.Array(
            ("CellDim", "KDim"), (0, 0), np.ones((num_cells, 1)) * z
        ),
        "reference_theta_at_cells_on_model_levels": fields.Array(
            ("CellDim", "KDim"), (0, 0), 300.0 + 10 * (1 - z) * np.ones((num_cells, 1))
        ),
        "reference_exner_at_cells_on_model_levels": fields.Array(
            ("CellDim", "KDim"), (0, 0), 0.9 * np.ones((num_cells, nlev))
        ),
        "reference_theta_at_cells_on_half_levels": fields.Array(
            ("CellDim", "KDim"), (0, 0), 300.0 * np.ones((num_cells, nlev + 1))
        ),
        "wgtfacq_c": fields.Array(("CellDim", "KDim"), (0, nlev - 3), rng.random((num_cells, 3))),
        "vertoffset_gradp": fields.Array(
            ("EdgeDim", "E2CDim", "KDim"), (0, 0, 0), np.zeros((num_edges, 2, nlev), np.int32)
        ),
        "mask_prog_halo_c": fields.Array(("CellDim",), (0,), np.zeros(num_cells, bool)),
    }
    geometry = {
        "edge_center_lat": fields.Array(("EdgeDim",), (0,), rng.uniform(-1.5, 1.5, num_edges)),
        "primal_normal_x": fields.Array(("EdgeDim",), (0,), rng.uniform(-1, 1, num_edges)),
    }
    return fields.StaticFields(
        geometry=geometry,
        interpolation={"c_lin_e": fields.Array(("EdgeDim", "E2CDim"), (0, 0), rng.random((num_edges, 2)))},
        metrics=metrics,
        scalars={"mean_cell_area": 1.5e10, "nflat_gradp": 2},
        vct_a=np.linspace(23500.0, 0.0, nlev + 1),
        vct_b=np.zeros(nlev + 1),
        factory_backend="test",
        timings={"geometry": 1.0, "interpolation": 2.0, "metrics": 3.0},
    )


def test_static_fields_cache_round_trip(tmp_path):
    f = _fake_static()
    path = tmp_path / "x.npz"
    fields._write(path, f)
    g = fields._read(path)
    assert g is not None and g.cached and not f.cached
    assert g.scalars == f.scalars and isinstance(g.scalars["nflat_gradp"], int)
    assert g.timings == f.timings and g.factory_backend == "test"
    for name, a in f.arrays().items():
        b = g.arrays()[name]
        assert (b.dims, b.origin) == (a.dims, a.origin), name
        assert b.values.dtype == a.values.dtype and np.array_equal(b.values, a.values), name
    np.testing.assert_array_equal(g.vct_a, f.vct_a)


def test_static_fields_cache_ignores_corrupt_files(tmp_path):
    path = tmp_path / "x.npz"
    path.write_bytes(b"not a zip file")
    assert fields._read(path) is None
    assert fields._read(tmp_path / "missing.npz") is None


def test_initial_state_is_plausible_and_reproducible():
    from icon4py.model.common import constants

    static = _fake_static()
    a = initial_state(static, 4, seed=3)
    b = initial_state(static, 4, seed=3)
    c = initial_state(static, 4, seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["vn"], c["vn"])
    assert a["w"].shape == (6, 5) and a["vn"].shape == (9, 4)
    assert (a["rho"] > 0).all() and (a["theta_v"] > 250).all()
    np.testing.assert_allclose(a["exner"], (constants.RD_O_P0REF * a["rho"] * a["theta_v"]) ** constants.RD_O_CVD)
    assert (a["w"][:, 0] == 0).all() and (a["w"][:, -1] == 0).all()
    assert np.abs(a["vn"]).max() < 25.0
    for name in (
        "perturbed_exner_at_cells_on_model_levels",
        "rho_at_cells_on_half_levels",
        "theta_v_at_cells_on_half_levels",
    ):
        assert np.isfinite(a[name]).all()


def test_initial_state_checks_levels():
    with pytest.raises(ValueError, match="levels"):
        initial_state(_fake_static(nlev=4), 5)


# --- profiler ---------------------------------------------------------------------------------


class _FakeProgram:
    """Looks like a GT4Py Program to `find_programs` (definition_stage.definition.__name__)."""

    def __init__(self, name, kernels=None):
        def definition():
            pass

        definition.__name__ = name
        self.definition_stage = type("S", (), {"definition": definition})()
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1


def test_profiler_times_every_bound_program_and_restores_them():
    a, b = _FakeProgram("prog_a"), _FakeProgram("prog_b")

    class Adv:
        pass

    class Solver:
        pass

    solver, adv = Solver(), Adv()
    solver._a = functools.partial(a, x=1)
    solver._a_again = functools.partial(a, x=2)
    solver.not_a_program = functools.partial(print)
    adv._b = functools.partial(b)
    solver.velocity_advection = adv
    found = instrument.find_programs(solver)
    assert [p.name for p in found] == ["prog_a", "prog_a", "prog_b"]
    originals = (solver._a, adv._b)
    syncs = []
    with instrument.Profiler(solver, sync=lambda: syncs.append(1)) as prof:
        solver._a()
        solver._a()
        solver._a_again()
        adv._b()
    assert (solver._a, adv._b) == originals
    assert a.calls == 3 and b.calls == 1
    assert {n: t.calls for n, t in prof.times.items()} == {"prog_a (a)": 2, "prog_a (a_again)": 1, "prog_b": 1}
    assert len(syncs) == 8  # before and after every call
    assert prof.kernels() == {"prog_a (a)": None, "prog_a (a_again)": None, "prog_b": None}


def test_kernel_count_reads_icoforge_artifacts(tmp_path):
    src = tmp_path / "icf_x.cpp"
    src.write_text("// Generated by icoforge\n// Kernels: x_k0, x_k1, x_k2\n")

    def cpu_program():
        pass

    cpu_program.icoforge_artifact = type("A", (), {"module_path": str(tmp_path / "icf_x.so"), "module_name": "icf_x"})()

    def gpu_program():
        pass

    gpu_program.icoforge_artifact = type("G", (), {"kernel_names": ("a", "b")})()
    assert instrument.kernel_count(cpu_program) == 3
    assert instrument.kernel_count(gpu_program) == 2
    assert instrument.kernel_count(lambda: None) is None


# --- verification arithmetic --------------------------------------------------------------------


def _prognostic(value=1.0):
    return {name: np.full((4, 3), value) for name in PROGNOSTIC_FIELDS}


def test_compare_fields_relative_to_reference_scale():
    a, b = _prognostic(2.0), _prognostic(2.0)
    a["vn"][0, 0] = 2.0 + 2e-9
    diffs = {d.field: d for d in verify.compare_fields(a, b)}
    assert diffs["vn"].max_rel == pytest.approx(1e-9) and diffs["rho"].max_rel == 0.0
    cmp = verify.Comparison("x", "ref", 1e-9 * 0.9, [("first", list(diffs.values()))])
    assert not cmp.passed and cmp.worst()["vn"] == pytest.approx(1e-9)
    assert verify.Comparison("x", "ref", 1e-8, [("first", list(diffs.values()))]).passed


def test_nan_never_passes():
    a, b = _prognostic(), _prognostic()
    a["w"][1, 1] = np.nan
    b["w"][1, 1] = np.nan  # NaN in both: still a failure
    cmp = verify.Comparison("x", "ref", 1.0, [("first", verify.compare_fields(a, b))])
    assert not cmp.passed and cmp.worst()["w"] == float("inf")
    assert json.dumps(cmp.to_json(), allow_nan=True)


# --- report ---------------------------------------------------------------------------------------


def _fake_report() -> GreenlineReport:
    results = []
    for name, scale in (("icoforge-cpu", 1.0), ("gtfn_cpu", 2.0)):
        r = BackendResult(
            name, setup_s={"device_fields": 0.7, "construct": 10.0 * scale, "compile": 1.0, "first_calls": 0.5},
            compile_jobs=38,
        )
        r.step_ms = {v: [scale * 10.0, scale * 11.0, scale * 12.0] for v in VARIANTS}
        if scale == 1.0:  # whole steps with one sync measured for one backend only (an older report)
            r.chained_step_ms = [52.0, 50.0, 51.0]
        r.programs = [
            ProgramRow(
                "vertically_implicit_solver_at_predictor_step",
                5,
                2.0 * scale,
                10.0 * scale,
                0.2,
                10 if scale == 1 else None,
            ),
            ProgramRow(
                "compute_diagnostics_from_normal_wind", 1, 1.0 * scale, 1.0 * scale, 0.02, 2 if scale == 1 else None
            ),
        ]
        r.profiled_step_ms = 50.0 * scale
        if scale == 1.0:
            r.cache = {
                "programs": 20,
                "translation_cache_hits": 20,
                "cpp_builds": 0,
                "translate_s": 1.0,
                "build_s": 0.0,
            }
        results.append(r)
    diffs = verify.compare_fields(_prognostic(1.0), _prognostic(1.0))
    return GreenlineReport(
        options=GreenlineOptions(backends=("icoforge-cpu", "gtfn_cpu"), verify=True),
        grid={"name": "R2B3", "cells": 5120, "edges": 7680, "vertices": 2562, "levels": 10},
        common_setup_s={"grid_load": 0.2, "static_fields": 0.03, "initial_state": 0.01},
        fields_cached=True,
        results=results,
        comparisons=[verify.Comparison("gtfn_cpu", "icoforge-cpu", 1e-9, [("first", diffs)])],
        environment={"date": "today"},
    )


def test_report_tables_and_json():
    from rich.console import Console

    rep = _fake_report()
    console = Console(width=200, record=True)
    print_report(rep, console)
    text = console.export_text()
    for needle in ("setup (seconds)", "static fields on the device", "step time (ms)", "dycore step", "0.50x", "PASS", "20/20",
                   "vertically_implicit_solver_at_predictor_step", "outside GT4Py programs"):  # fmt: skip
        assert needle in text, needle
    data = json.loads(json.dumps(rep.to_json()))
    assert data["backends"][0]["dycore_step_ms"] == pytest.approx(5 * 11.0)
    assert data["backends"][0]["chained_step_ms"] == 51.0 and data["backends"][1]["chained_step_ms"] is None
    (row,) = [line for line in text.splitlines() if "dycore step, one sync" in line]
    assert "51.000" in row and row.count("-") >= 2, row  # the backend without it shows "-", so does the ratio
    assert data["verification"][0]["passed"] is True
    assert set(data["backends"][1]["variants"]) == set(VARIANTS)


def test_report_shows_the_replayed_step_only_where_every_replay_is_bit_identical():
    from rich.console import Console

    rep = _fake_report()
    first, second = rep.results
    first.graph_replay = {v: {"bit_identical": True, "replay_ms": 9.0} for v in VARIANTS}
    second.graph_replay = {v: {"bit_identical": True, "replay_ms": 1.0} for v in VARIANTS}
    second.graph_replay["middle"] = {"bit_identical": False}
    second.graph_replay["last"] = {"capture_error": "CUDARuntimeError: operation not permitted when stream is capturing"}
    console = Console(width=250, record=True)
    print_report(rep, console)
    (row,) = [line for line in console.export_text().splitlines() if "dycore step, replayed" in line]
    assert "45.000" in row, row  # 5 substeps x 9.0 ms (first + 3 x middle + last)
    assert "capture failed, not bit-identical (middle, last)" in row, row
    data = json.loads(json.dumps(rep.to_json()))
    assert data["backends"][0]["replayed_step_ms"] == pytest.approx(45.0)
    assert data["backends"][1]["replayed_step_ms"] is None  # a replay that differs is never timed as one
    assert data["backends"][1]["graph_replay"]["last"]["capture_error"].startswith("CUDARuntimeError")


def test_a_replay_with_nan_or_one_different_bit_is_not_identical():
    from icoforge.granule.graph_replay import identical

    a = {"vn": np.array([1.0, 2.0]), "w": np.array([0.5])}
    assert identical(a, {k: v.copy() for k, v in a.items()})
    assert not identical(a, {"vn": np.array([1.0, np.nextafter(2.0, 3.0)]), "w": np.array([0.5])})
    nan = {"vn": np.array([1.0, np.nan]), "w": np.array([0.5])}
    assert not identical(nan, {k: v.copy() for k, v in nan.items()})
    assert not identical(a, {"vn": a["vn"]})  # a field missing


def test_refill_states_copies_every_field_into_the_same_buffers():
    import dataclasses
    import types

    from icoforge.granule.state import refill_states, state_fields

    @dataclasses.dataclass
    class Holder:
        a: object
        b: object
        label: str = "not a field"

    def states(value):
        def field():
            return types.SimpleNamespace(ndarray=np.full(3, value))

        pair = types.SimpleNamespace(current=Holder(field(), field()), next=Holder(field(), field()))
        return pair, Holder(field(), field()), Holder(field(), field())

    dst, src = states(7.0), states(1.0)
    buffers = [f.ndarray for f in state_fields(dst)]
    assert len(buffers) == 8  # two fields in each of the four holders, the label skipped
    refill_states(dst, src)
    assert all(f.ndarray is b and (b == 1.0).all() for f, b in zip(state_fields(dst), buffers, strict=True))


class _FakeField:
    def __init__(self, value):
        self.value = value

    def asnumpy(self):
        return np.array([self.value])


class _FakeGranule:
    """A substep adds 1 to each prognostic field, enqueued on the fake CUDA's stream. `elsewhere`:
    the backend launches on a stream of its own, so a capture records nothing of it; "lost": that
    work is gone, "eager": it runs at once, during the capture (as dace_gpu's kernels did)."""

    def __init__(self, cuda, elsewhere=None):
        from icoforge.granule.state import PROGNOSTIC_FIELDS

        self.fields, self.cuda, self.elsewhere = PROGNOSTIC_FIELDS, cuda, elsewhere

    def fresh_states(self):
        import types

        return (types.SimpleNamespace(next=types.SimpleNamespace(**{f: _FakeField(0.0) for f in self.fields})),)

    def refill_states(self, states):
        for f in self.fields:
            getattr(states[0].next, f).value = 0.0

    def step(self, variant, states):
        def work():
            for f in self.fields:
                getattr(states[0].next, f).value += 1.0

        if self.elsewhere and self.cuda.capturing is not None:
            if self.elsewhere == "eager":
                work()
            return
        self.cuda.enqueue(work)

    def sync(self):
        pass


@pytest.mark.parametrize(
    "elsewhere, fail, expected",
    [
        (None, False, {"bit_identical": True}),  # the capture holds the whole substep
        ("lost", False, {"bit_identical": False}),  # the work went to another stream
        ("eager", False, {"bit_identical": False}),  # ... and ran there during the capture
        (None, True, {"capture_error": "RuntimeError: operation not permitted"}),
    ],
)
def test_replay_variant_times_only_a_replay_that_equals_a_normal_call(monkeypatch, elsewhere, fail, expected):
    import sys
    import types

    from tests.fake_cuda import FakeCuda

    from icoforge.granule.graph_replay import replay_variant

    cuda = FakeCuda(fail=fail)
    g = _FakeGranule(cuda, elsewhere)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    result = replay_variant(g, "first", repeat=3)
    for key, value in expected.items():
        assert result[key] == value if key != "capture_error" else result[key].startswith(value), result
    assert ("replay_ms" in result) == (expected.get("bit_identical") is True), result


def test_markdown_names_the_schedule_of_the_run():
    from icoforge.granule.report import markdown_report

    rep = _fake_report()
    assert "ICOFORGE_SCHEDULE" not in markdown_report(rep)
    rep.environment["icoforge_schedule"] = '{"fuse": ["*"]}'
    assert '| icoforge schedule ($ICOFORGE_SCHEDULE) | {"fuse": ["*"]} |' in markdown_report(rep)


def test_the_run_records_the_timed_settings_off_their_defaults(monkeypatch):
    from icoforge.granule.greenline import environment

    for var in ("ICOFORGE_HOST_GRAPHS", "ICOFORGE_STREAMS", "ICOFORGE_TEMPORARIES", "ICOFORGE_HOST_REPLAY", "ICOFORGE_EARLY_GTIR", "ICOFORGE_FAST_PASSES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ICOFORGE_TRACE", "/tmp/t")  # not a timed setting: not recorded
    assert "icoforge_settings" not in environment()
    monkeypatch.setenv("ICOFORGE_HOST_GRAPHS", "1")
    monkeypatch.setenv("ICOFORGE_TEMPORARIES", "per-call")
    assert environment()["icoforge_settings"] == "ICOFORGE_HOST_GRAPHS=1 ICOFORGE_TEMPORARIES=per-call"


# --- CLI ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["greenline", "--backend", "gtfn_cp"], "Did you mean 'gtfn_cpu'"),
        (["greenline", "--compare", "dace"], "unknown backend 'dace'"),
        (["greenline", "--factory-backend", "icoforge-cpu+gtfn"], "unknown backend 'gtfn'"),
        (["greenline", "--levels", "0"], "levels must be positive"),
        (["greenline", "--steps", "0"], "steps must be"),
        (["greenline", "--graph-replay"], "icoforge-cpu is not a GPU backend (GPU backends: dace_gpu, "),
    ],
)
def test_greenline_refuses_bad_arguments_in_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "icoforge: error:" in err and message in err and "Traceback" not in err


def test_greenline_is_registered(capsys):
    with pytest.raises(SystemExit):
        main(["greenline", "--help"])
    out = capsys.readouterr().out
    assert "--compare" in out and "--verify" in out and "--json" in out and "--cold" in out


# --- recorded references --------------------------------------------------------------------------


def _sequence(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"vn": (90, 4), "w": (60, 5), "rho": (60, 4), "exner": (60, 4), "theta_v": (60, 4)}
    return [{k: 1.0 + rng.random(s) for k, s in shapes.items()} for _ in verify.VERIFY_SEQUENCE]


def _made_with(programs: str, factory: str):
    """A granule run on `programs` and its static fields computed with `factory`, as golden.write
    reads them (runner.Granule's name and backend object, fields.StaticFields' factory backend)."""
    from types import SimpleNamespace

    from icoforge.granule.backends import resolve_backend

    return (SimpleNamespace(name=programs, backend=resolve_backend(programs)),
            SimpleNamespace(factory_backend=factory, cached=False, timings={"geometry": 1.0}))  # fmt: skip


def test_recording_names_the_backends_of_its_inputs(tmp_path):
    """Issue 51 item 2: golden.write records who made the programs and the static fields from the
    objects used; a reference made (in part) by icoforge, or that does not say, is flagged."""
    from icoforge.granule import golden

    results, path = _sequence(), tmp_path / "ref.json"
    golden.write(path, *_made_with("gtfn_cpu", "gtfn_cpu"), {"grid": "X"}, results, {})
    data = golden.load(path)
    assert data["backend"] == "gtfn_cpu" and golden.independence_problems(data) == []
    assert data["input_backends"]["programs"] == {"name": "gtfn_cpu", "object": "make_custom_gtfn_backend", "made_by": "GT4Py"}
    assert data["input_backends"]["static_fields"]["made_by"] == "GT4Py" and data["input_backends"]["static_fields"]["factory_s"]
    # the greenline's default factory backend is icoforge's (a fallback pair by its primary)
    golden.write(path, *_made_with("gtfn_cpu", "icoforge-cpu+roundtrip-passes"), {"grid": "X"}, results, {})
    (problem,) = golden.independence_problems(golden.load(path))
    assert problem.startswith("its static fields (geometry, interpolation, metrics) were computed by icoforge-cpu+roundtrip-passes, icoforge's own")
    golden.write(path, *_made_with("icoforge-cpu", "gtfn_cpu_plain"), {"grid": "X"}, results, {})
    (problem,) = golden.independence_problems(golden.load(path))
    assert problem.startswith("its programs ran on icoforge-cpu, icoforge's own")
    for name in ("roundtrip-passes", "icoforge-emulated-cuda"):  # icoforge's pass cache; icoforge's code
        assert golden.made_by(_made_with(name, name)[0].backend) == "icoforge"
    assert golden.made_by(None) == golden.made_by(_made_with("dace_cpu", "x")[0].backend) == "GT4Py"  # embedded; a peer
    # a recording without the field, or with a hand-written one (before 2026-12-06), says so
    data.pop("input_backends")
    assert "does not say which backends made its inputs" in golden.independence_problems(data)[0]
    data["input_backends"] = {"granule": "gtfn_cpu", "static_fields": "gtfn_cpu"}
    assert "does not say which backends made its inputs" in golden.independence_problems(data)[0]


@pytest.mark.parametrize("version", [1, 2])  # 1: dense random weights; 2: rank-one weights u[i] v[k]
def test_golden_fingerprint_detects_a_single_wrong_value(tmp_path, version):
    from icoforge.granule import golden

    results = _sequence()
    path = tmp_path / "ref.json"
    golden.write(path, *_made_with("gtfn_cpu", "gtfn_cpu"), {"grid": "X", "levels": 4}, results, {"date": "today"}, version=version)
    data = golden.load(path)
    assert data["golden_version"] == version and golden.independence_problems(data) == []
    same = golden.compare_golden(results, data, "icoforge-cpu", 1e-12)
    assert same.passed and max(same.worst().values()) == 0.0 and same.reference == "gtfn_cpu (recorded)"
    noisy = [{k: v * (1 + 1e-14) for k, v in r.items()} for r in results]
    # rounding passes: every value off by 1e-14 at once adds up in the projections to ~1e-12 of
    # the one-point scale (golden.single_point_weight), below 1e-11
    assert golden.compare_golden(noisy, data, "x", 1e-11).passed
    for field, index in (("rho", (7, 2)), ("w", (0, 0)), ("vn", (89, 3))):
        wrong = [{k: v.copy() for k, v in r.items()} for r in results]
        wrong[1][field][index] += 1e-5  # one value, in the second substep
        cmp = golden.compare_golden(wrong, data, "x", 1e-9)
        assert not cmp.passed and cmp.worst()[field] > 1e-9, (field, cmp.worst())
    peak = [{k: v.copy() for k, v in r.items()} for r in results]
    peak[0]["rho"][5, 0] = 10.0  # a new maximum elsewhere: the argmax sample point moves
    assert golden.compare_golden(peak, data, "x", 1e-9).worst()["rho"] > 1.0
    nan = [{k: v.copy() for k, v in r.items()} for r in results]
    nan[2]["exner"][30, 1] = np.nan  # a point no sample hits still reaches the projections
    assert golden.compare_golden(nan, data, "x", 1.0).worst()["exner"] == float("inf")
    assert golden.check_inputs(data, {"grid": "X", "levels": 4}) == []
    assert golden.check_inputs(data, {"grid": "X", "levels": 5}) == ["levels: recorded 4, now 5"]


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_planted_one_point_fault_moves_one_point_whatever_the_layout(tmp_path, layout):
    """golden.plant_one_point_fault on results laid out as the live granules' fields may be (not
    C-contiguous: GT4Py's fields; before the fix, `.reshape(-1)` wrote the fault into a copy and
    the slow test's planted fault on the live R2B3 state measured 0.0): exactly the point it
    returns moves (C order, as the samples and projections count), and the check fails."""
    from icoforge.granule import golden

    def laid_out(a):
        if layout == "F":
            return np.asfortranarray(a)
        if layout == "strided":
            wide = np.zeros((a.shape[0], 2 * a.shape[1]))
            wide[:, ::2] = a
            return wide[:, ::2]
        return a

    results = [{k: laid_out(v) for k, v in r.items()} for r in _sequence()]
    path = tmp_path / "ref.json"
    golden.write(path, *_made_with("gtfn_cpu", "gtfn_cpu"), {"grid": "X"}, results, {})
    data = golden.load(path)
    assert golden.compare_golden(results, data, "x", 5e-11).passed
    for field in ("vn", "theta_v"):
        wrong, point = golden.plant_one_point_fault(results, 1, field, 1e-10)
        moved = np.flatnonzero((wrong[1][field] != results[1][field]).reshape(-1))
        assert moved.tolist() == [point] and all(
            np.array_equal(w[k], r[k]) for i, (w, r) in enumerate(zip(wrong, results)) for k in r if (i, k) != (1, field)
        )
        cmp = golden.compare_golden(wrong, data, "x", 5e-11)
        assert not cmp.passed and cmp.worst()[field] > 5e-11, cmp.worst()


def test_compare_runs_substep_by_substep():
    a, b = _sequence(0), _sequence(0)
    b[2]["theta_v"][3, 1] *= 1 + 1e-6
    cmp = verify.compare_runs("icoforge-cpu", a, "gtfn_cpu", b, 1e-9)
    assert [v for v, _ in cmp.substeps] == list(verify.VERIFY_SEQUENCE)
    assert not cmp.passed and cmp.worst()["theta_v"] > 1e-7 and cmp.worst()["rho"] == 0.0


def test_two_recorded_fingerprints_compare(tmp_path):
    import copy
    import json
    import pathlib

    from icoforge.granule import golden

    ref = golden.load(pathlib.Path(__file__).parent / "data" / "r2b3_l10_gtfn_cpu.json")
    same = golden.compare_fingerprints(copy.deepcopy(ref), ref, rtol=1e-12)
    assert same.passed and max(same.worst().values()) == 0.0
    bad = copy.deepcopy(ref)
    field = bad["substeps"][1]["fields"]["vn"]
    field["samples"][0] += 1e-6 * (field["max_abs"] or 1.0)
    worse = golden.compare_fingerprints(bad, ref, rtol=1e-12)
    assert not worse.passed and 0 < worse.worst()["vn"] < 1e-5
    bad["substeps"][0]["fields"]["w"]["samples"][0] = float("nan")
    assert golden.compare_fingerprints(bad, ref, rtol=1.0).worst()["w"] == float("inf")
    other = copy.deepcopy(ref)
    other["inputs"]["seed"] = 99
    with pytest.raises(ValueError, match="different inputs"):
        golden.compare_fingerprints(other, ref, rtol=1e-12)
    (tmp_path / "a.json").write_text(json.dumps(ref))
    assert golden._main(["compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0
    newer = copy.deepcopy(ref)
    newer["golden_version"] = golden.GOLDEN_VERSION + 1
    (tmp_path / "b.json").write_text(json.dumps(newer))
    with pytest.raises(ValueError, match="golden version"):
        golden.load(tmp_path / "b.json")
    newer["golden_version"] = 2 if ref["golden_version"] == 1 else 1  # other projections: not comparable
    with pytest.raises(ValueError, match="versions differ"):
        golden.compare_fingerprints(newer, ref, rtol=1e-12)


def test_whole_fields_tell_rounding_from_one_wrong_point(tmp_path):
    """greenline --save-fields and `golden compare-fields` (session 37): rounding spread over every
    point (DaCe's fused multiply-adds against icoforge's separate ones) moves a fingerprint's
    projections as one point off by far more would; whole fields compare element by element, so
    the rounding passes and one wrong point still fails."""
    from icoforge.granule import golden

    results = _sequence()
    rng = np.random.default_rng(3)
    rounded = [{k: v * (1 + 1e-13 * rng.choice([-1.0, 1.0], v.shape)) for k, v in r.items()} for r in results]
    ref_json = tmp_path / "ref.json"
    golden.write(ref_json, *_made_with("gtfn_cpu", "gtfn_cpu"), {"grid": "X"}, results, {})
    one_point_bound = max(golden.compare_golden(rounded, golden.load(ref_json), "x", 1e-12).worst().values())
    assert one_point_bound > 1e-12  # the fingerprint reads the spread rounding as one point off by more
    seq = tuple(verify.VERIFY_SEQUENCE)
    golden.write_fields(tmp_path / "ref.npz", results, seq)
    golden.write_fields(tmp_path / "rounded.npz", rounded, seq)
    back, labels = golden.load_fields(tmp_path / "ref.npz")
    assert labels == seq and all(np.array_equal(b[k], r[k]) for b, r in zip(back, results) for k in r)
    cmp = golden.compare_fields(tmp_path / "rounded.npz", tmp_path / "ref.npz", 1e-12)
    assert cmp.passed and 0 < max(cmp.worst().values()) < 2e-13
    wrong = [{k: v.copy() for k, v in r.items()} for r in results]
    wrong[1]["w"][11, 2] += 1e-10 * np.abs(results[1]["w"]).max()  # one point, in the second substep
    golden.write_fields(tmp_path / "wrong.npz", wrong, seq)
    bad = golden.compare_fields(tmp_path / "wrong.npz", tmp_path / "ref.npz", 1e-11)
    assert not bad.passed and bad.worst()["w"] > 1e-11 and bad.worst()["rho"] == 0.0
    assert golden._main(["compare-fields", str(tmp_path / "ref.npz"), str(tmp_path / "rounded.npz"), "1e-12"]) == 0
    assert golden._main(["compare-fields", str(tmp_path / "ref.npz"), str(tmp_path / "wrong.npz"), "1e-11"]) == 1


def test_cold_compile_starts_from_empty_caches(monkeypatch):
    """`greenline --cold`: icoforge's translation/build cache points into a fresh empty directory
    while it runs, and back where it was afterwards."""
    import os
    import pathlib

    from icoforge.granule.greenline import cold_icoforge_cache

    monkeypatch.setenv("ICOFORGE_CACHE", "/somewhere/else")
    with cold_icoforge_cache(True):
        tmp = pathlib.Path(os.environ["ICOFORGE_CACHE"])
        assert tmp.is_dir() and not any(tmp.iterdir())
    assert os.environ["ICOFORGE_CACHE"] == "/somewhere/else"
    assert not tmp.exists()
