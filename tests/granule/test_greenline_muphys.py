"""`icoforge greenline --granule muphys`: icon4py's MuphysComponent (saturation adjustment + AES
graupel, granule/muphys.py) through the greenline's machinery, on the smallest grid (R2B3, 10
levels: the dycore test's grid, so the static fields cache is shared), against gtfn_cpu's recorded
results of the same two calls.

The reference, `data/r2b3_l10_muphys_gtfn_cpu.json`, was recorded by a live two-backend run that
also verified icoforge-cpu against gtfn_cpu in the same process, made by GT4Py end to end --
programs and static fields by gtfn_cpu, as the file's `input_backends` say:

    icoforge greenline --granule muphys --grid R2B3 --levels 10 --backend gtfn_cpu \\
        --factory-backend gtfn_cpu --compare icoforge-cpu --verify --rtol 5e-11 --steps 1 --warmup 0 \\
        --save-reference tests/granule/data/r2b3_l10_muphys_gtfn_cpu.json

Recorded 2026-12-07 on the 2-core dev VM (Intel AVX-512, with NPY_DISABLE_CPU_FEATURES and
OPENBLAS_CORETYPE=Haswell, icoforge/portable_numpy.py): gtfn_cpu's compile of muphys' programs 761
s, its static fields 283 s; icoforge-cpu equal to gtfn_cpu bit for bit (0.0 in all thirteen fields
after both calls). The first recording run found icoforge-cpu 27 % off in the tendencies: icon4py
calls graupel_run in place (q_out = q_in, t_out = te), and a later kernel of its one statement read
inputs an earlier kernel had already overwritten (fixed: tests/backend/test_statement_aliasing.py).

Unlike the model's two-step JW run with muphys (tests/model/test_model_jw_moist.py), whose
hydrometeors stay exactly zero, this state is partly supersaturated and holds every hydrometeor,
so the comparison covers muphys' numbers, not only its plumbing.
"""

from __future__ import annotations

import functools
import math
import pathlib
import types

import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.granule import GreenlineOptions, golden, instrument, run_greenline
from icoforge.granule.diffusion import DiffusionGranule
from icoforge.granule.fields import Array, StaticFields
from icoforge.granule.greenline import granule_class
from icoforge.granule.muphys import (
    HYDROMETEORS,
    RESULT_FIELDS,
    TMELT,
    VERIFY_SEQUENCE,
    MuphysGranule,
    SeparateStep,
    _separate,
    muphys_state,
    saturation_mixing_ratio,
)
from icoforge.granule.report import markdown_report
from icoforge.granule.state import initial_state
from tests import granule_checks

GOLDEN = pathlib.Path(__file__).parent / "data" / "r2b3_l10_muphys_gtfn_cpu.json"
RTOL = granule_checks.RTOL
PROGRAMS = {"graupel_run", "saturation_adjustment", "copy_field_on_cell_k", "calculate_cell_kdim_field_tendency"}


# --- fast: choosing the granule, its state, its step --------------------------------------------


def test_granule_name_and_dycore_only_options():
    assert granule_class("muphys") is MuphysGranule
    with pytest.raises(IcoforgeError, match="the dycore granule only, not muphys"):
        run_greenline(GreenlineOptions(granule="muphys", substep_fusion=True))


def _fake_columns(levels: int = 30, cells: int = 400):
    """A reference atmosphere like the greenline's (state.py): rho, exner, theta_v of a standard
    atmosphere from the surface to ~20 km, top first."""
    height = np.linspace(20_000.0, 50.0, levels)
    t = np.maximum(288.15 - 0.0065 * height, 216.65)
    p = 101325.0 * (t / 288.15) ** 5.256
    exner = (p / 1e5) ** (287.04 / 1004.64)
    rng = np.random.default_rng(5)
    shape = (cells, levels)
    state = {
        "exner": np.broadcast_to(exner, shape).copy(),
        "theta_v": np.broadcast_to(t / exner, shape) + rng.uniform(-1, 1, shape),
        "rho": np.broadcast_to(p / (287.04 * t), shape).copy(),
    }
    dz = np.full(shape, 20_000.0 / levels)
    static = StaticFields(
        geometry={}, interpolation={}, metrics={"ddqz_z_full": Array(("CellDim", "KDim"), (0, 0), dz)}, scalars={},
        vct_a=np.linspace(20_000.0, 0.0, levels + 1), vct_b=np.zeros(levels + 1), factory_backend="fake", timings={},
    )  # fmt: skip
    return state, static


def test_muphys_state_is_moist_where_muphys_has_work_and_seeded():
    state, static = _fake_columns()
    before = {k: v.copy() for k, v in state.items()}
    m = muphys_state(state, static, seed=3)
    assert all(np.array_equal(state[k], before[k]) for k in state)  # the dycore's inputs untouched
    assert set(m) == {"dz", "te", "p", "rho", "qv", "qc", "qi", "qr", "qs", "qg"}
    assert all(m[k].dtype == np.float64 and m[k].flags.c_contiguous for k in m)
    te, p, qv = m["te"], m["p"], m["qv"]
    np.testing.assert_allclose(p, 1e5 * state["exner"] ** (1004.64 / 287.04))
    # the virtual temperature is theta_v exner: te is a little below it, by the vapour's part
    tv = state["theta_v"] * state["exner"]
    np.testing.assert_allclose(te * (1 + (461.51 / 287.04 - 1) * qv), tv, rtol=1e-14)
    assert (te < tv).all() and (tv - te).max() < 5.0
    relative = qv / saturation_mixing_ratio(te, p)
    assert 0.7 * 0.99 < relative.min() and relative.max() < 1.05 * 1.01  # RH_LOW, RH_HIGH up to the iteration's error
    assert 0.05 < (relative > 1.0).mean() < 0.3  # some points supersaturated: condensation
    for name, (scale, share) in HYDROMETEORS.items():
        q = m[name]
        assert q.min() == 0.0 and q.max() <= scale and (q > 0).any(), name
    assert (m["qc"][relative <= 0.95] == 0).all()
    assert (m["qr"][te <= TMELT] == 0).all() and (m["qs"][te >= TMELT] == 0).all() and (m["qg"][te >= TMELT] == 0).all()
    assert (m["qi"][te >= TMELT - 20] == 0).all()
    again = muphys_state(state, static, seed=3)
    assert all(np.array_equal(m[k], again[k]) for k in m)
    other = muphys_state(state, static, seed=4)
    assert not np.array_equal(m["qv"], other["qv"]) and np.array_equal(m["p"], other["p"])


def test_saturation_mixing_ratio_at_known_points():
    # Tetens over water: 611 Pa at 0 C, ~2339 Pa at 20 C (tables: 2338.8 Pa)
    q0 = saturation_mixing_ratio(np.array(TMELT), np.array(1e5))
    assert math.isclose(q0, 0.622 * 610.78 / (1e5 - 0.378 * 610.78), rel_tol=2e-3)
    q20 = saturation_mixing_ratio(np.array(293.15), np.array(1e5))
    assert math.isclose(q20, 0.622 * 2338.8 / (1e5 - 0.378 * 2338.8), rel_tol=2e-3)


def test_separate_step_calls_icon4pys_function_with_the_same_programs():
    calls = []

    def step_separate(*, graupel_program, saturation_adjustment_program, **fields):
        calls.append((graupel_program, saturation_adjustment_program, fields))

    partial = functools.partial(step_separate, graupel_program="G", saturation_adjustment_program="S")
    s = _separate(partial)
    assert isinstance(s, SeparateStep) and (s.graupel_program, s.saturation_adjustment_program) == ("G", "S")
    s(te=1, dz=2)
    assert calls == [("G", "S", {"te": 1, "dz": 2})]
    s.graupel_program = "wrapped"  # what the instrumentation does
    s(te=3)
    assert calls[-1][0] == "wrapped"


def test_find_programs_sees_the_programs_of_the_separate_step():
    class Program:  # looks like a GT4Py program to find_programs
        def __init__(self, name):
            self.definition_stage = types.SimpleNamespace(definition=types.SimpleNamespace(__name__=name))

        def __call__(self):
            pass

    component = type("MuphysComponent", (), {"__module__": "icon4py.model.atmosphere.subgrid_scale_physics.muphys.component"})()
    vars(component).update(
        _copy_field=functools.partial(Program("copy_field_on_cell_k")),
        _step=SeparateStep(functools.partial(Program("graupel_run")), functools.partial(Program("saturation_adjustment")), print),
    )
    assert [p.name for p in instrument.find_programs(component)] == ["copy_field_on_cell_k", "graupel_run", "saturation_adjustment"]


class _FakeField:
    def __init__(self, value):
        self.value = np.array(value, dtype=float)

    def asnumpy(self):
        return self.value


class _FakeMuphys:
    """Adds 1 to te and every species in its own copies (as muphys updates them in place) and
    returns tendencies (new - old) and fluxes of ones."""

    def __init__(self):
        self.inputs = []

    def __call__(self, state, time_step):
        self.inputs.append({k: f.asnumpy().copy() for k, f in state.items()})
        self._te_in = _FakeField(state["te"].asnumpy() + 1)
        self._q_in = types.SimpleNamespace(**{s: _FakeField(state[f"q{s}"].asnumpy() + 1) for s in "vcirsg"})
        out = {k: _FakeField(np.ones(2)) for k in RESULT_FIELDS}
        return out


def test_verification_calls_again_on_what_the_first_call_left():
    g = MuphysGranule.__new__(MuphysGranule)
    g.solver, g.sync = _FakeMuphys(), lambda: None
    arrays = {k: np.zeros(2) for k in ("dz", "te", "p", "rho", "qv", "qc", "qi", "qr", "qs", "qg")}
    g.fresh_states = lambda: {k: _FakeField(v) for k, v in arrays.items()}
    g._fields = lambda a: {k: _FakeField(v) for k, v in a.items()}
    results = g.verification_sequence()
    assert len(results) == len(VERIFY_SEQUENCE) and all(set(r) == set(RESULT_FIELDS) for r in results)
    first, second = g.solver.inputs
    assert all((first[k] == 0).all() for k in first)
    assert all((second[k] == 1).all() for k in ("te", "qv", "qc", "qi", "qr", "qs", "qg"))
    assert all((second[k] == 0).all() for k in ("dz", "p", "rho"))  # not muphys' outputs


def test_input_description_names_the_granule_and_its_moisture(tiny_grid):
    d = MuphysGranule.input_description(tiny_grid, 10, 0)
    assert d["granule"] == "muphys" and d["config"] == {"scheme": "AES_GRAUPEL", "qnc": 50.0e6}
    assert d["sequence"] == list(VERIFY_SEQUENCE) and d["icon4py"] == "0.4.1"
    assert d != DiffusionGranule.input_description(tiny_grid, 10, 0)


@pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")
def test_reference_is_gtfn_cpu_of_the_muphys_calls(tiny_grid):
    data = golden.load(GOLDEN)
    assert data["backend"] == "gtfn_cpu" and data["inputs"]["granule"] == "muphys"
    assert [s["variant"] for s in data["substeps"]] == list(VERIFY_SEQUENCE)
    assert set(data["substeps"][0]["fields"]) == set(RESULT_FIELDS)
    assert golden.check_inputs(data, MuphysGranule.input_description(tiny_grid, 10, 0)) == []
    granule_checks.assert_independent(data)


# --- slow: muphys with icoforge-cpu, end to end ---------------------------------------------------


live_file, live_results, report = granule_checks.live_granule_fixtures("muphys", GOLDEN)


@pytest.mark.slow
def test_muphys_runs_end_to_end_with_icoforge_cpu(report):
    r = report.results[0]
    assert r.backend == "icoforge-cpu" and r.fallbacks == []
    assert set(r.step_ms) == {"step"} and len(r.step_ms["step"]) == 2
    assert r.dycore_step_ms() == r.median_ms("step")  # one granule step is one call
    assert PROGRAMS <= {p.name.split(" (")[0] for p in r.programs}
    assert all(p.kernels is not None and p.kernels >= 1 for p in r.programs)
    data = report.to_json()
    assert data["granule"] == "muphys" and data["component"] == "MuphysComponent"
    md = markdown_report(data)
    assert md.startswith("# greenline (muphys): R2B3, 10 levels: icoforge-cpu")
    assert "construct MuphysComponent" in md and "SolveNonhydro" not in md


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")
def test_muphys_agrees_with_gtfn_cpu(report):
    cmp = report.comparisons[0]
    assert cmp.reference == "gtfn_cpu (recorded)"
    assert [v for v, _ in cmp.substeps] == list(VERIFY_SEQUENCE)
    worst = cmp.worst()
    assert set(worst) == set(RESULT_FIELDS)
    assert all(math.isfinite(v) for v in worst.values()), worst
    assert cmp.passed, f"largest relative differences vs gtfn_cpu: {worst}"


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")
def test_one_point_fault_on_the_live_muphys_fails(report, live_results):
    measured = granule_checks.assert_one_point_faults_fail(live_results["icoforge-cpu"], golden.load(GOLDEN), VERIFY_SEQUENCE)
    assert set(measured) == set(RESULT_FIELDS)


@pytest.mark.slow
def test_muphys_had_work_to_do(report, live_results):
    """Agreeing with gtfn_cpu is not enough if both did nothing: condensation warms (a positive
    temperature tendency somewhere), vapour and cloud water change, and it rains, snows and hails
    at the surface."""
    for call in live_results["icoforge-cpu"]:
        assert all(np.isfinite(v).all() for v in call.values())
        assert call["tend_temperature"].max() > 0 and call["tend_qv"].min() < 0
        assert np.abs(call["tend_qc"]).max() > 0 and np.abs(call["tend_qi"]).max() > 0
        for flux in ("pr", "ps", "pg", "pflx"):
            assert call[flux][:, -1].max() > 0, flux
