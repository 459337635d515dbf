"""The grid every stored reference was recorded on: the R2B3 preset generated here must hold the
same bits, or the bitwise references cannot match and their tests fail for a reason that is not
ours. This test says so first and names the cause.

The references on R2B3/10: tests/granule/data/*.json (the dycore's, the diffusion's, the
advection's golden results and the static fields' digest) and icoforge/model/jw_*references.json.
They were recorded again on 2026-12-06 on an AMD EPYC (AVX2) VM, CI's kind since then: the
Intel AVX-512 VM's grid (recorded until 2026-12-05) differed in its last bits, numpy's SVML
trigonometry in icon-grid-generator (tests/conftest.py switches those paths off everywhere)."""

from __future__ import annotations

from icoforge.grids.digest import R2B3_REFERENCES_SHA256, float_variables_sha256


def test_r2b3_preset_has_the_recorded_bits(tiny_grid):
    got = float_variables_sha256(tiny_grid.path)
    assert got == R2B3_REFERENCES_SHA256, (
        f"the R2B3 preset generated here ({tiny_grid.path}) differs from the grid the stored references "
        "were recorded on: every bitwise reference check on R2B3/10 will fail. Likely cause: numpy rounds "
        "trigonometry differently on this CPU (see tests/conftest.py); else icon-grid-generator changed. "
        "Record the references again (each test module's doc says how) and icoforge/grids/digest.py's digest with them."
    )


def test_digest_sees_one_ulp(tmp_path):
    import netCDF4
    import numpy as np

    path = tmp_path / "g.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("n", 3)
        ds.createVariable("x", "f8", ("n",))[:] = [1.0, 2.0, 3.0]
    before = float_variables_sha256(path)
    with netCDF4.Dataset(path, "a") as ds:
        ds["x"][1] = np.nextafter(2.0, 3.0)
    assert float_variables_sha256(path) != before


def test_stored_granule_references_were_recorded_without_numpys_avx512_paths():
    # golden.write records the flag instead of refusing (a device run's own fingerprint may be made
    # on an AVX-512 host); a stored reference made so would not match AVX2 machines bit for bit
    import json
    import pathlib

    stored = sorted(pathlib.Path(__file__).with_name("data").glob("r2b3_l10_*gtfn_cpu.json"))
    goldens = [p for p in stored if "golden_version" in json.loads(p.read_text())]
    assert len(goldens) >= 3, goldens  # dycore, diffusion, advection
    for p in goldens:
        env = json.loads(p.read_text())["environment"]
        assert env.get("numpy_avx512_paths") is False, f"{p.name}: recorded with numpy's AVX-512 paths on (or not said): record it again on an AVX2 machine or with NPY_DISABLE_CPU_FEATURES"
