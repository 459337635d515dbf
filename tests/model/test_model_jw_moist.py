"""icon4py's driver, moist JW baroclinic wave with muphys (AES graupel, tracer advection of its six
species) on R2B3/10, with icoforge-cpu, against the stored results of the same run by gtfn_cpu
(icoforge/model/jw_muphys_references.json, recorded by scripts/model/record_jw.py --moist muphys).
Tracers have no icon4py tolerance: they must match bit for bit (store.py). A planted fault in one
tracer shows that the comparison fails.

The muphys run covers tracer advection too (its six species are advected), so the qv-only store
(`--tracers`) is checked from the CLI (`icoforge model --check --tracers`), not here: CI's
60-minute budget. Slow: icoforge-cpu compiles muphys and the advection programs (~1-2 min on 2
cores, more when the dycore is not in the cache yet), then two steps."""

from __future__ import annotations

import numpy as np
import pytest

from icoforge.model import check, store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def muphys_run():
    stored = store.load_store(store.store_path("muphys"))
    _, fields = check.run_and_collect(check.stored_run_meta(stored["meta"]), "icoforge-cpu", lambda _: None)
    return stored, fields


def test_icoforge_cpu_matches_stored_gtfn_cpu_with_muphys(muphys_run):
    stored, fields = muphys_run
    assert stored["meta"]["moist"] == "muphys" and stored["meta"]["backend"] == "gtfn_cpu"
    tracers = set(fields[0]) - set(store.FIELDS)
    assert {"qv", "qc", "qi", "qr", "qs", "qg"} <= tracers, sorted(fields[0])
    verdict, lines = store.compare(stored, fields)
    print(f"\nicoforge-cpu vs stored gtfn_cpu, JW + muphys: {verdict}\n" + "\n".join(lines))
    assert verdict in ("bitwise", "tolerance"), "\n".join(lines)


def test_planted_tracer_fault_fails(muphys_run):
    """qv at its largest point after the last step, one ulp off: tracers are compared bit for bit."""
    stored, fields = muphys_run
    faulty = [{k: v.copy() for k, v in step.items()} for step in fields]
    qv = faulty[-1]["qv"]
    i = np.unravel_index(np.argmax(qv), qv.shape)
    qv[i] = np.nextafter(qv[i], np.inf)
    verdict, lines = store.compare(stored, faulty)
    assert verdict == "failed", lines
    assert any("qv" in line for line in lines), lines
