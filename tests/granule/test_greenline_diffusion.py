"""`icoforge greenline --granule diffusion`: icon4py's Diffusion.run (granule/diffusion.py) through
the greenline's machinery, on the smallest grid (R2B3, 10 levels: the dycore test's grid, so the
static fields cache is shared), against gtfn_cpu's recorded results of the same three calls.

The reference, `data/r2b3_l10_diffusion_gtfn_cpu.json`, was recorded by a live two-backend run that
also verified icoforge-cpu against gtfn_cpu in the same process, made by GT4Py end to end --
programs and static fields by gtfn_cpu, as the file's `input_backends` say (issue 51 item 2):

    icoforge greenline --granule diffusion --grid R2B3 --levels 10 --backend gtfn_cpu \\
        --factory-backend gtfn_cpu --compare icoforge-cpu --verify --rtol 5e-11 --steps 1 --warmup 0 \\
        --save-reference tests/granule/data/r2b3_l10_diffusion_gtfn_cpu.json

(gtfn_cpu compiles the diffusion's programs in minutes on 2 cores: stored, as the dycore's is).
Recorded 2026-12-06 right after the dycore's reference, whose run had computed gtfn_cpu's static
fields (cached, `"cached": true` in the file): 341 s wall, gtfn_cpu's construction and compile
310 s; icoforge-cpu equalled gtfn_cpu bit for bit, and every sample, maximum and projection equals
the 2026-12-05 recording's (static fields by icoforge's factories), which did not say its inputs'
backends. Recorded again 2026-12-06 (session 33) on the AMD EPYC (AVX2) VM, CI's kind since then,
whose R2B3 grid differs from the Intel VM's in its last bits (test_reference_grid.py): 364 s wall
with gtfn_cpu's static fields cached; icoforge-cpu equalled gtfn_cpu bit for bit (0.0 for every
field and substep). Against the Intel VM's recording the live run differed by up to 6.2e-11.
Cost of the slow tests here: icoforge-cpu's compile of diffusion's 11 programs plus the static
fields when not cached. Measured on the shared 2-core dev machine (load ~7): the whole file in 56 s and in 156 s
with the static fields cached and the translations partly cached; a cold compile took 44 s and the
static fields 30 s more, hence the slow marks.
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.granule import GreenlineOptions, golden, run_greenline
from icoforge.granule import verify as verify_mod
from icoforge.granule.diffusion import VERIFY_SEQUENCE, DiffusionGranule
from icoforge.granule.greenline import GRANULES, granule_class
from icoforge.granule.report import markdown_report
from icoforge.granule.runner import Granule
from icoforge.granule.state import PROGNOSTIC_FIELDS
from tests import granule_checks

GOLDEN = pathlib.Path(__file__).parent / "data" / "r2b3_l10_diffusion_gtfn_cpu.json"
# the dycore granule's per-point check and tolerance (one copy: tests/granule_checks.py): any one
# point off by more than RTOL max|x| fails, shown on the live state below
RTOL = granule_checks.RTOL
PROGRAMS = {
    "mo_intp_rbf_rbf_vec_interpol_vertex",
    "calculate_nabla2_and_smag_coefficients_for_vn",
    "calculate_diagnostic_quantities_for_turbulence",
    "apply_diffusion_to_vn",
    "apply_diffusion_to_w_and_compute_horizontal_gradients_for_turbulence",
    "calculate_enhanced_diffusion_coefficients_for_grid_point_cold_pools",
    "apply_diffusion_to_theta_and_exner",
}


# --- fast: choosing the granule, refusing what does not fit, NaN never passes --------------------


def test_granule_names_and_a_clear_error():
    assert granule_class("dycore") is Granule
    assert granule_class("diffusion") is DiffusionGranule
    with pytest.raises(IcoforgeError, match="unknown granule 'graupel'; valid: dycore, diffusion, advection, muphys"):
        granule_class("graupel")
    assert list(GRANULES) == ["dycore", "diffusion", "advection", "muphys"]


@pytest.mark.parametrize("option", [{"substep_fusion": True}, {"graph_replay": True}, {"floors_steps": 1}])
def test_dycore_only_options_are_refused_before_any_work(option):
    opts = GreenlineOptions(granule="diffusion", **option)
    with pytest.raises(IcoforgeError, match="the dycore granule only, not diffusion"):
        run_greenline(opts)


def _shapes() -> dict[str, list[int]]:
    data = golden.load(GOLDEN)
    return {name: f["shape"] for name, f in data["substeps"][0]["fields"].items()}


needs_golden = pytest.mark.skipif(not GOLDEN.exists(), reason=f"no recorded reference {GOLDEN.name} (module doc)")


@needs_golden
def test_reference_is_gtfn_cpu_of_the_diffusion_calls():
    data = golden.load(GOLDEN)
    assert data["backend"] == "gtfn_cpu"
    assert data["inputs"]["granule"] == "diffusion" and data["inputs"]["levels"] == 10
    assert [s["variant"] for s in data["substeps"]] == list(VERIFY_SEQUENCE)
    assert set(_shapes()) == set(PROGNOSTIC_FIELDS)


@needs_golden
def test_nan_or_a_wrong_field_never_passes():
    """A result with one NaN, or one value moved, fails against the recorded reference; the
    reference's own values (its samples at their positions, elsewhere the max) are what a pass needs."""
    data = golden.load(GOLDEN)
    shapes = _shapes()
    rng = np.random.default_rng(1)
    results = [{name: rng.uniform(1.0, 2.0, shapes[name]) for name in PROGNOSTIC_FIELDS} for _ in VERIFY_SEQUENCE]
    assert not golden.compare_golden(results, data, "fake", RTOL, VERIFY_SEQUENCE).passed  # random: far off
    results[1]["theta_v"][3, 4] = math.nan
    cmp = golden.compare_golden(results, data, "fake", RTOL, VERIFY_SEQUENCE)
    assert not cmp.passed and math.isinf(cmp.worst()["theta_v"])
    # live comparison: identical arrays pass, one NaN in both still fails
    a = [{n: np.ones(shapes[n]) for n in PROGNOSTIC_FIELDS} for _ in VERIFY_SEQUENCE]
    assert verify_mod.compare_runs("x", a, "y", a, RTOL, VERIFY_SEQUENCE).passed
    a[2]["w"][0, 0] = math.nan
    assert not verify_mod.compare_runs("x", a, "y", a, RTOL, VERIFY_SEQUENCE).passed


@needs_golden
def test_dycore_reference_refused_for_the_diffusion(tiny_grid):
    """The recorded inputs say which granule: the dycore's fingerprint is refused for diffusion."""
    dycore = golden.load(pathlib.Path(__file__).parent / "data" / "r2b3_l10_gtfn_cpu.json")
    problems = golden.check_inputs(dycore, DiffusionGranule.input_description(tiny_grid, 10, 0))
    assert any(p.startswith("granule:") for p in problems), problems
    assert golden.check_inputs(golden.load(GOLDEN), DiffusionGranule.input_description(tiny_grid, 10, 0)) == []


# --- slow: the diffusion step with icoforge-cpu, end to end ----------------------------------------


live_file, live_results, report = granule_checks.live_granule_fixtures("diffusion", GOLDEN)


@pytest.mark.slow
def test_diffusion_runs_end_to_end_with_icoforge_cpu(report):
    r = report.results[0]
    assert r.backend == "icoforge-cpu" and r.fallbacks == []
    assert set(r.step_ms) == {"initial", "step"}
    assert all(len(s) == 2 and all(0 < t < 60_000 for t in s) for s in r.step_ms.values())
    assert r.dycore_step_ms() == r.median_ms("step")  # one granule step is one call
    assert PROGRAMS <= {p.name for p in r.programs}
    assert all(p.kernels is not None and p.kernels >= 1 for p in r.programs)
    assert 0.5 < sum(p.share for p in r.programs) <= 1.0 + 1e-9
    data = report.to_json()
    assert data["granule"] == "diffusion" and data["component"] == "Diffusion" and data["dycore_step"] == ["step"]
    md = markdown_report(data)
    assert md.startswith("# greenline (diffusion): R2B3, 10 levels: icoforge-cpu")
    assert "construct Diffusion" in md and "**diffusion step**" in md and "SolveNonhydro" not in md


@pytest.mark.slow
@needs_golden
def test_diffusion_agrees_with_gtfn_cpu(report):
    cmp = report.comparisons[0]
    assert cmp.reference == "gtfn_cpu (recorded)"
    assert [v for v, _ in cmp.substeps] == list(VERIFY_SEQUENCE)
    worst = cmp.worst()
    assert set(worst) == set(PROGNOSTIC_FIELDS)
    assert all(math.isfinite(v) for v in worst.values()), worst
    assert cmp.passed, f"largest relative differences vs gtfn_cpu: {worst}"
    granule_checks.assert_independent(golden.load(GOLDEN))


@pytest.mark.slow
@needs_golden
def test_one_point_fault_on_the_live_diffusion_fails(report, live_results):
    """Planted fault on the real state after the live icoforge-cpu calls (the dycore's check,
    granule_checks): one point of one field after the first "step" call, the point the
    projections weigh least (unsampled), off by 1e-10 max|x|, fails against the recorded
    gtfn_cpu reference -- for each of the five fields, rho (untouched by diffusion) included."""
    measured = granule_checks.assert_one_point_faults_fail(live_results["icoforge-cpu"], golden.load(GOLDEN), VERIFY_SEQUENCE)
    assert set(measured) == set(PROGNOSTIC_FIELDS)


@pytest.mark.slow
def test_diffusion_changed_the_winds_and_left_rho(report, live_file, tiny_grid):
    """Agreeing with gtfn_cpu is not enough if both did nothing: every call moved vn, w and theta_v,
    never rho (diffusion does not touch it); the state stays physical."""
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND
    from icoforge.granule.state import initial_state

    data = json.loads(live_file.read_text())
    calls = data["substeps"]
    assert [c["variant"] for c in calls] == list(VERIFY_SEQUENCE)
    state = initial_state(build_static_fields(tiny_grid, DEFAULT_FACTORY_BACKEND), 10, 0)
    first = calls[0]["fields"]  # against the initial state, at the recorded positions
    for n in PROGNOSTIC_FIELDS:
        before = state[n].reshape(-1)[np.asarray(first[n]["sample_positions"])]
        same = np.array_equal(np.asarray(first[n]["samples"]), before)
        assert same if n in ("rho",) else not same, f"initial call: {n} {'changed' if n == 'rho' else 'unchanged'}"
    for before, after in zip(calls, calls[1:]):  # theta_v: the initial call moved it (above); later
        # calls leave the 48 sampled values of theta_v as they were (measured), so only vn and w here
        for n in ("vn", "w"):
            assert before["fields"][n]["samples"] != after["fields"][n]["samples"], f"{after['variant']} left {n}"
        assert before["fields"]["rho"]["samples"] == after["fields"]["rho"]["samples"]
    for call in calls:
        f = call["fields"]
        assert np.isfinite([f[n]["max_abs"] for n in f]).all()
        assert min(f["exner"]["samples"]) > 0 and min(f["theta_v"]["samples"]) > 150
        assert f["vn"]["max_abs"] < 100 and f["w"]["max_abs"] < 50
