"""icon4py's driver, JW baroclinic wave on R2B3, with icoforge-cpu, against the stored results of
the same run by gtfn_cpu (icoforge/model/jw_references.json): bitwise, or within icon4py's JW
tolerances (`_TOLERANCES` of its test_driver.py); the verdict is printed. A fault planted in the
run's own fields shows that the comparison fails when it should.

Slow: icoforge-cpu compiles the model cold in this test session's empty cache (~2.5 min on 2
idle cores), then five steps."""

from __future__ import annotations

import numpy as np
import pytest

from icoforge.model import check, store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def icoforge_run():
    stored = store.load_store()
    lines: list[str] = []
    session, fields = check.run_and_collect(check.stored_run_meta(stored["meta"]), "icoforge-cpu", lines.append)
    return stored, session, fields


def test_icoforge_cpu_matches_stored_gtfn_cpu(icoforge_run):
    stored, session, fields = icoforge_run
    verdict, lines = store.compare(stored, fields)
    meta = stored["meta"]
    print(f"\nicoforge-cpu vs stored {meta['backend']} ({meta['grid']}/{meta['levels']} levels, {meta['steps']} steps "
          f"of {meta['dtime_s']:g} s): {verdict}")
    print("\n".join(lines))
    assert verdict in ("bitwise", "tolerance"), "\n".join(lines)
    assert len(session.steps) == meta["steps"]


def test_planted_fault_fails(icoforge_run):
    """vn of one edge, three tolerances off after the last step: the same comparison must fail."""
    stored, _, fields = icoforge_run
    faulty = [{k: v.copy() for k, v in step.items()} for step in fields]
    vn = faulty[-1]["vn"]
    atol, rtol = store.JW_TOLERANCES["vn"]
    i = np.unravel_index(np.argmax(np.abs(vn)), vn.shape)
    vn[i] += 3 * (atol + rtol * abs(vn[i]))
    verdict, lines = store.compare(stored, faulty)
    assert verdict == "failed"
    assert any(line.startswith(f"step {len(faulty)} vn:") and "1 of" in line for line in lines), lines


def test_dry_mass_and_state_are_sane(icoforge_run):
    """Not a reference comparison: the run's own state is finite and the JW flow is not at rest."""
    _, _, fields = icoforge_run
    last = fields[-1]
    assert all(np.isfinite(a).all() for a in last.values())
    assert 20.0 < np.abs(last["vn"]).max() < 100.0  # JW's jet: u0 = 35 m/s
