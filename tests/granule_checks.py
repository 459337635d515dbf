"""The granule checks against a recorded GT4Py reference, one copy for every granule (the dycore's
tests/granule/test_greenline.py, diffusion's tests/granule/test_greenline_diffusion.py and the
fused granule of tests/backend/test_fuse.py): the tolerance, the independence of the reference,
and the planted one-point fault that shows the check fails (issue 51 items 2 and 5).

The check itself is `golden.compare_golden`: per field, the samples as max|a-b|/max|b| and the
projections as the smallest one-point error that could explain them, so any one point off by
more than RTOL max|x|, sampled or not, fails.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from icoforge.granule import golden
from icoforge.granule import verify as verify_mod

# The recordings found icoforge-cpu bitwise equal to gtfn_cpu on R2B3/10 (dycore 2026-11-29 and
# 2026-12-05, diffusion 2026-12-05; see the reference files' docstrings): 0.0 for every field,
# call, sample and projection. One point off by 1e-10 max|x| gives 1.0e-10 > RTOL (planted below).
RTOL = 5e-11
FAULT = 1e-10  # the planted one-point error, relative to the field's max|x| (issue 51 item 5)


def assert_independent(recorded: dict[str, Any]) -> None:
    """The recorded reference shares nothing with icoforge: every input made by GT4Py."""
    problems = golden.independence_problems(recorded)
    assert problems == [], "the recorded reference is not independent of icoforge: " + "; ".join(problems)


@contextlib.contextmanager
def captured_sequences() -> Iterator[dict[str, list[dict[str, np.ndarray]]]]:
    """The verification results of every backend a greenline run in this block computes, by
    granule backend name (verify.run_sequence wrapped: the run computes them anyway)."""
    import pytest

    seen: dict[str, list[dict[str, np.ndarray]]] = {}
    original = verify_mod.run_sequence

    def run_sequence(granule: Any) -> list[dict[str, np.ndarray]]:
        seen[granule.name] = original(granule)
        return seen[granule.name]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verify_mod, "run_sequence", run_sequence)
        yield seen


def assert_one_point_faults_fail(
    results: list[dict[str, np.ndarray]], recorded: dict[str, Any], sequence: tuple[str, ...], substep: int = 1
) -> dict[str, float]:
    """Planted faults on live results that pass: in `results[substep]`, one field at a time, the
    point the recorded projections weigh least (never sampled) moved by FAULT max|x|; each must
    fail the check at RTOL. Returns the measured difference per field."""
    assert golden.compare_golden(results, recorded, "live", RTOL, sequence).passed
    version = int(recorded["golden_version"])
    measured = {}
    for name in results[substep]:
        wrong, point = golden.plant_one_point_fault(results, substep, name, FAULT, version)
        assert point not in recorded["substeps"][substep]["fields"][name]["sample_positions"]
        cmp = golden.compare_golden(wrong, recorded, "live+fault", RTOL, sequence)
        measured[name] = cmp.worst()[name]
        assert not cmp.passed and math.isfinite(measured[name]) and measured[name] > RTOL, (name, cmp.worst())
    return measured


def run_live_granule(granule: str, reference: Any, live_file: Any, live_results: dict) -> Any:
    """The slow tests' live run of `granule` with icoforge-cpu on R2B3/10 (two steps, one profiled)
    against the recorded `reference` file (if present), writing icoforge-cpu's own fingerprint to
    `live_file` and its verification results (full arrays) into `live_results`."""
    from icoforge.granule import GreenlineOptions, run_greenline

    opts = GreenlineOptions(
        granule=granule,
        grid="R2B3",
        levels=10,
        backends=("icoforge-cpu",),
        steps=2,
        warmup=0,
        profile_steps=1,
        reference_file=str(reference) if reference.exists() else None,
        save_reference=str(live_file),
        rtol=RTOL,
    )
    with captured_sequences() as seen:
        out = run_greenline(opts)
    live_results.update(seen)
    return out


def live_granule_fixtures(granule: str, reference: Any) -> tuple[Any, Any, Any]:
    """The module-scoped fixtures `live_file`, `live_results` and `report` of a granule's slow
    tests (`run_live_granule` of `granule` against `reference`); a test module binds them to
    those names: `live_file, live_results, report = live_granule_fixtures(...)`."""
    import pytest

    @pytest.fixture(scope="module")
    def live_file(tmp_path_factory):
        return tmp_path_factory.mktemp(granule) / "live_icoforge_cpu.json"

    @pytest.fixture(scope="module")
    def live_results():
        """icoforge-cpu's verification results (full arrays) after each call: filled by `report`."""
        return {}

    @pytest.fixture(scope="module")
    def report(tiny_grid, live_file, live_results):
        return run_live_granule(granule, reference, live_file, live_results)

    return live_file, live_results, report
