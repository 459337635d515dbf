"""`icoforge greenline --granule advection`: icon4py's tracer Advection.run (granule/advection.py)
through the greenline's machinery, on the smallest grid (R2B3, 10 levels: the dycore test's grid,
so the static fields cache is shared), against gtfn_cpu's recorded results of the same three calls.

The reference, `data/r2b3_l10_advection_gtfn_cpu.json`, was recorded by a live two-backend run that
also verified icoforge-cpu against gtfn_cpu in the same process, made by GT4Py end to end --
programs and static fields by gtfn_cpu, as the file's `input_backends` say (issue 51 item 2):

    icoforge greenline --granule advection --grid R2B3 --levels 10 --backend gtfn_cpu \\
        --factory-backend gtfn_cpu --compare icoforge-cpu --verify --rtol 5e-11 --steps 1 --warmup 0 \\
        --save-reference tests/granule/data/r2b3_l10_advection_gtfn_cpu.json

(GT4PY_BUILD_CACHE_LIFETIME=persistent: the CPU table, benchmarks/cpu-greenline-advection-R2B3-10.md,
reused gtfn_cpu's programs.) Recorded 2026-12-06 on the shared 2-core VM (AMD EPYC, nice 10): 273 s
wall, gtfn_cpu's compile of the 23 program variants 210 s (its static fields computed just before
in 336 s, then cached: `"cached": true` in the file); icoforge-cpu equalled gtfn_cpu bit for bit
(0.0 for qv, hfl_tracer and vfl_tracer after each of the three calls).
Cost of the slow tests here: icoforge-cpu's compile of the 23 program variants (44 s cold on this
VM) plus the static fields when not cached (54 s with icoforge's factories); 91 s for the whole
file with its translations cached, hence the slow marks.
"""

from __future__ import annotations

import json
import math
import pathlib
import types

import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.granule import GreenlineOptions, golden, instrument, run_greenline
from icoforge.granule import verify as verify_mod
from icoforge.granule.advection import RESULT_FIELDS, VERIFY_SEQUENCE, AdvectionGranule, _lsq_slice, advection_state
from icoforge.granule.diffusion import DiffusionGranule
from icoforge.granule.fields import Array, StaticFields
from icoforge.granule.greenline import granule_class
from icoforge.granule.report import markdown_report
from tests import granule_checks

GOLDEN = pathlib.Path(__file__).parent / "data" / "r2b3_l10_advection_gtfn_cpu.json"
RTOL = granule_checks.RTOL  # one point off by more than RTOL max|x| fails (granule_checks)
PROGRAMS = {  # icon4py's MIURA + positive definite, PPM + semi-monotonic: the main ones
    "apply_density_increment",
    "compute_edge_tangential",
    "compute_barycentric_backtrajectory_alt",
    "reconstruct_linear_coefficients_svd",
    "compute_horizontal_tracer_flux_from_linear_coefficients_alt",
    "compute_positive_definite_horizontal_multiplicative_flux_factor",
    "apply_positive_definite_horizontal_multiplicative_flux_factor",
    "integrate_tracer_horizontally",
    "compute_ppm4gpu_courant_number",
    "compute_ppm_quartic_face_values",
    "limit_vertical_parabola_semi_monotonically",
    "compute_ppm4gpu_fractional_flux",
    "integrate_tracer_vertically",
}


# --- fast: choosing the granule, its state, its sequence, the check on its fields ----------------


def test_granule_name_and_dycore_only_options():
    assert granule_class("advection") is AdvectionGranule
    with pytest.raises(IcoforgeError, match="the dycore granule only, not advection"):
        run_greenline(GreenlineOptions(granule="advection", graph_replay=True))


def _fake_column_grid(levels: int = 3):
    """Four cells and six edges (a tetrahedron): each edge between two cells, each cell with three
    edges, geofac_div of a closed surface (+-1 / area, every edge once out of each of its cells)."""
    e2c = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    c2e = np.array([[e for e in range(6) if c in e2c[e]] for c in range(4)])
    sign = np.array([[1.0 if e2c[e, 0] == c else -1.0 for e in c2e[c]] for c in range(4)])
    tables = {"E2C": e2c, "C2E": c2e}
    grid = types.SimpleNamespace(get_connectivity=lambda name: types.SimpleNamespace(ndarray=tables[name]))

    def arr(dims, values):
        return Array(dims, (0,) * len(dims), np.asarray(values, dtype=np.float64))

    static = StaticFields(
        geometry={"cell_center_lat": arr(("CellDim",), [0.0, 0.5, -0.5, 1.2])},
        interpolation={"geofac_div": arr(("CellDim", "C2EDim"), sign / 2.0)},
        metrics={
            "ddqz_z_full": arr(("CellDim", "KDim"), np.full((4, levels), 100.0)),
            "ddqz_z_full_e": arr(("EdgeDim", "KDim"), np.full((6, levels), 100.0)),
        },
        scalars={},
        vct_a=np.linspace(300.0, 0.0, levels + 1),
        vct_b=np.zeros(levels + 1),
        factory_backend="fake",
        timings={},
    )
    return grid, static


def _fake_dycore_state(rng, levels=3, vn_scale=1.0, w_scale=0.01):
    w = w_scale * rng.uniform(-1, 1, (4, levels + 1))
    w[:, 0] = w[:, -1] = 0.0
    return {
        "rho": 1.0 + 0.1 * rng.uniform(size=(4, levels)),
        "vn": vn_scale * rng.uniform(-1, 1, (6, levels)),
        "w": w,
        "rho_at_cells_on_half_levels": 1.0 + 0.1 * rng.uniform(size=(4, levels + 1)),
    }


def test_advection_state_conserves_mass_and_is_seeded():
    grid, static = _fake_column_grid()
    state = _fake_dycore_state(np.random.default_rng(0))
    before = {k: v.copy() for k, v in state.items()}
    a = advection_state(state, static, grid, 90.0, seed=7)
    assert all(np.array_equal(state[k], before[k]) for k in state)  # the dycore's inputs untouched
    assert set(a) == {"vn_traj", "mass_flx_me", "mass_flx_ic", "airmass_now", "airmass_new", "qv"}
    assert np.array_equal(a["vn_traj"], state["vn"])
    np.testing.assert_allclose(a["airmass_now"], state["rho"] * 100.0)
    # a closed surface and no flux through top and surface: the total air mass stays, levels move
    assert not np.allclose(a["airmass_new"], a["airmass_now"])
    assert math.isclose(a["airmass_new"].sum(), a["airmass_now"].sum(), rel_tol=1e-13)
    assert (a["qv"] > 0).all() and a["qv"].max() < 0.02
    again = advection_state(state, static, grid, 90.0, seed=7)
    assert all(np.array_equal(a[k], again[k]) for k in a)
    assert not np.array_equal(a["qv"], advection_state(state, static, grid, 90.0, seed=8)["qv"])


def test_advection_state_without_wind_keeps_the_air_mass():
    grid, static = _fake_column_grid()
    a = advection_state(_fake_dycore_state(np.random.default_rng(1), vn_scale=0.0, w_scale=0.0), static, grid, 90.0, 0)
    assert not a["mass_flx_me"].any() and not a["mass_flx_ic"].any()
    assert np.array_equal(a["airmass_new"], a["airmass_now"])


def test_lsq_slice_is_the_drivers_slice():
    values = np.arange(4 * 2 * 3, dtype=float).reshape(4, 2, 3)
    a = Array(("CellDim", "LsqUnkDim", "C2E2CDim"), (0, 0, 0), values)
    for unknown in (0, 1):
        s = _lsq_slice(a, unknown)
        assert s.dims == ("CellDim", "C2E2CDim") and s.origin == (0, 0)
        assert np.array_equal(s.values, values[:, unknown, :])


class _Field:
    def __init__(self, value):
        self.value = np.full((2, 2), float(value))

    def asnumpy(self):
        return self.value


class _FakeAdvection:
    """Flips its Godunov order after every call, as icon4py's GodunovSplittingAdvection."""

    def __init__(self):
        self.even = False
        self.orders: list[str] = []

    def run(self, *, diagnostic_state, prep_adv, p_tracer_now, p_tracer_new, dtime):
        self.orders.append("vertical_first" if self.even else "horizontal_first")
        p_tracer_new.value = p_tracer_now.value + 1.0
        self.even = not self.even


@pytest.mark.parametrize("calls_before", [0, 1, 2, 5])
def test_verification_starts_horizontal_first_whatever_ran_before(calls_before):
    from icon4py.model.common import utils as common_utils

    g = AdvectionGranule.__new__(AdvectionGranule)
    g.solver, g.calls, g.sync = _FakeAdvection(), 0, lambda: None
    g.grid = types.SimpleNamespace(limited_area=False)

    def fresh():
        return types.SimpleNamespace(hfl_tracer=_Field(0), vfl_tracer=_Field(0)), None, common_utils.TimeStepPair(_Field(0), _Field(0))

    g.fresh_states = fresh
    for _ in range(calls_before):
        g.step("step", fresh())
    results = g.verification_sequence()
    assert g.solver.orders[-3:] == list(VERIFY_SEQUENCE)
    assert [r["qv"][0, 0] for r in results] == [1.0, 2.0, 3.0]  # the time levels swapped between calls
    assert all(set(r) == set(RESULT_FIELDS) for r in results)


def _tracer_results(seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shapes = {"qv": (5120, 10), "hfl_tracer": (7680, 10), "vfl_tracer": (5120, 11)}
    return [{k: rng.uniform(0.0, 1.0, s) for k, s in shapes.items()} for _ in VERIFY_SEQUENCE]


def test_the_check_covers_the_tracer_fields():
    """The fingerprint and the live comparison take the granule's own fields (not the dycore's
    prognostic five); one point off, a NaN, or a missing field fails."""
    results = _tracer_results(0)
    ref = {"golden_version": golden.GOLDEN_VERSION, "backend": "ref", "inputs": {}, "substeps": golden.fingerprint(results, sequence=VERIFY_SEQUENCE)}
    assert set(ref["substeps"][0]["fields"]) == set(RESULT_FIELDS)
    assert golden.compare_golden(results, ref, "same", RTOL, VERIFY_SEQUENCE).worst() == dict.fromkeys(RESULT_FIELDS, 0.0)
    for name in RESULT_FIELDS:
        wrong, _ = golden.plant_one_point_fault(results, 1, name, granule_checks.FAULT)
        assert not golden.compare_golden(wrong, ref, "fault", RTOL, VERIFY_SEQUENCE).passed
        live = verify_mod.compare_runs("fault", wrong, "ref", results, RTOL, VERIFY_SEQUENCE)
        assert not live.passed and set(live.worst()) == set(RESULT_FIELDS)
    nan = [{k: v.copy() for k, v in r.items()} for r in results]
    nan[2]["vfl_tracer"][3, 4] = math.nan
    assert math.isinf(golden.compare_golden(nan, ref, "nan", RTOL, VERIFY_SEQUENCE).worst()["vfl_tracer"])
    with pytest.raises(ValueError, match="no hfl_tracer"):
        golden.compare_golden([{k: v for k, v in r.items() if k != "hfl_tracer"} for r in results], ref, "x", RTOL, VERIFY_SEQUENCE)


def test_find_programs_walks_into_icon4py_components():
    """The advection's programs sit on its horizontal and vertical schemes and their limiters;
    the dycore's order (its own, then velocity advection's) comes first."""

    import functools

    class Program:  # looks like a GT4Py program to find_programs
        def __init__(self, name):
            self.definition_stage = types.SimpleNamespace(definition=types.SimpleNamespace(__name__=name))

        def __call__(self):
            pass

    program = Program

    def component(**attrs):
        cls = type("Part", (), {"__module__": "icon4py.model.atmosphere.fake"})
        obj = cls()
        vars(obj).update(attrs)
        return obj

    limiter = component(_limit=functools.partial(program("limit")))
    horizontal = component(_flux=functools.partial(program("flux")), _limiter=limiter)
    outsider = types.SimpleNamespace(_hidden=functools.partial(program("hidden")))  # not icon4py's
    top = component(_a=functools.partial(program("a")), _horizontal=horizontal, _other=outsider, _limiter=limiter)
    top.velocity_advection = component(_v=functools.partial(program("v")))
    limiter._back = top  # a cycle
    assert [p.name for p in instrument.find_programs(top)] == ["a", "v", "flux", "limit"]


@pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")
def test_reference_is_gtfn_cpu_of_the_advection_calls(tiny_grid):
    data = golden.load(GOLDEN)
    assert data["backend"] == "gtfn_cpu" and data["inputs"]["granule"] == "advection"
    assert [s["variant"] for s in data["substeps"]] == list(VERIFY_SEQUENCE)
    assert set(data["substeps"][0]["fields"]) == set(RESULT_FIELDS)
    inputs = AdvectionGranule.input_description(tiny_grid, 10, 0)
    assert golden.check_inputs(data, inputs) == []
    problems = golden.check_inputs(data, DiffusionGranule.input_description(tiny_grid, 10, 0))
    assert any(p.startswith("granule:") for p in problems), problems
    granule_checks.assert_independent(data)
    results = _tracer_results(1)  # random values: far from gtfn_cpu's
    assert not golden.compare_golden(results, data, "fake", RTOL, VERIFY_SEQUENCE).passed


# --- slow: the advection step with icoforge-cpu, end to end ----------------------------------------


live_file, live_results, report = granule_checks.live_granule_fixtures("advection", GOLDEN)


@pytest.mark.slow
def test_advection_runs_end_to_end_with_icoforge_cpu(report):
    r = report.results[0]
    assert r.backend == "icoforge-cpu" and r.fallbacks == []
    assert set(r.step_ms) == {"step"} and len(r.step_ms["step"]) == 2
    assert all(0 < t < 60_000 for t in r.step_ms["step"])
    assert r.dycore_step_ms() == r.median_ms("step")  # one granule step is one call
    assert PROGRAMS <= {p.name.split(" (")[0] for p in r.programs}
    assert all(p.kernels is not None and p.kernels >= 1 for p in r.programs)
    assert 0.5 < sum(p.share for p in r.programs) <= 1.0 + 1e-9
    data = report.to_json()
    assert data["granule"] == "advection" and data["component"] == "Advection" and data["dycore_step"] == ["step"]
    md = markdown_report(data)
    assert md.startswith("# greenline (advection): R2B3, 10 levels: icoforge-cpu")
    assert "construct Advection" in md and "**advection step**" in md and "SolveNonhydro" not in md


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")
def test_advection_agrees_with_gtfn_cpu(report):
    cmp = report.comparisons[0]
    assert cmp.reference == "gtfn_cpu (recorded)"
    assert [v for v, _ in cmp.substeps] == list(VERIFY_SEQUENCE)
    worst = cmp.worst()
    assert set(worst) == set(RESULT_FIELDS)
    assert all(math.isfinite(v) for v in worst.values()), worst
    assert cmp.passed, f"largest relative differences vs gtfn_cpu: {worst}"
    assert "qv" in markdown_report(report.to_json()).split("verification")[-1]


@pytest.mark.slow
@pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")
def test_one_point_fault_on_the_live_advection_fails(report, live_results):
    """Planted fault on the real results after the live icoforge-cpu calls (granule_checks): one
    point of one field after the second call, the point the projections weigh least (unsampled),
    off by 1e-10 max|x|, fails against the recorded gtfn_cpu reference -- for qv and both fluxes."""
    measured = granule_checks.assert_one_point_faults_fail(live_results["icoforge-cpu"], golden.load(GOLDEN), VERIFY_SEQUENCE)
    assert set(measured) == set(RESULT_FIELDS)


@pytest.mark.slow
def test_advection_moved_the_tracer_and_kept_it_positive(report, live_file, live_results):
    """Agreeing with gtfn_cpu is not enough if both did nothing: every call changed qv, the fluxes
    are not zero, and qv stays positive (the positive-definite limiter) and bounded."""
    calls = live_results["icoforge-cpu"]
    assert [c["variant"] for c in json.loads(live_file.read_text())["substeps"]] == list(VERIFY_SEQUENCE)
    previous = None
    for call in calls:
        qv = call["qv"]
        assert np.isfinite(qv).all() and qv.min() >= 0.0 and qv.max() < 0.03
        assert np.abs(call["hfl_tracer"]).max() > 0 and np.abs(call["vfl_tracer"]).max() > 0
        if previous is not None:
            assert not np.array_equal(qv, previous)
        previous = qv
