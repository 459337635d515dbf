"""icoforge's factory programs against GT4Py's (issue 51 item 2): the granule's static fields
(geometry, interpolation, metrics from icon4py's factories) computed with the greenline's default
factory backend must equal gtfn_cpu's on R2B3/10.

gtfn_cpu's fields are stored as a digest (`data/r2b3_l10_static_gtfn_cpu.json`: per field its
dims, origin, shape, dtype, largest magnitude and SHA-256 of its bytes; 19.4 MB as .npz, too big
to keep). First recorded on the 2-core dev VM (2026-12-05, an Intel AVX-512 machine): gtfn_cpu's
factories took 723 s -- too slow for CI, so CI compares with the stored digest. On that day all 74
fields of icoforge-cpu+roundtrip-passes equalled gtfn_cpu's bit for bit, hence the check is
bitwise. Recorded again 2026-12-06 on an AMD EPYC (AVX2) VM, CI's kind since then, whose R2B3 grid
differs in its last bits (test_reference_grid.py says why): 78 fields with the advection granule's
two, gtfn_cpu's factories 333 s; all 78 of icoforge-cpu+roundtrip-passes equal bit for bit there too.
Record again with

    python tests/granule/test_static_fields_gt4py.py record PATH.npz

where PATH.npz is the cache file `fields.build_static_fields(grid, "gtfn_cpu")` wrote
($ICOFORGE_CACHE/granule-fields/R2B3-L10-*.npz).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import numpy as np
import pytest

DIGEST = pathlib.Path(__file__).parent / "data" / "r2b3_l10_static_gtfn_cpu.json"


def digest_array(values: np.ndarray) -> dict:
    v = np.ascontiguousarray(values)
    finite = v[np.isfinite(v)] if v.dtype.kind == "f" else v
    return {
        "shape": list(v.shape),
        "dtype": str(v.dtype),
        "max_abs": float(np.max(np.abs(finite))) if finite.size else 0.0,
        "sha256": hashlib.sha256(v.tobytes()).hexdigest(),
    }


def digest_fields(static) -> dict:
    out = {}
    for group in ("geometry", "interpolation", "metrics"):
        for name, arr in getattr(static, group).items():
            out[f"{group}/{name}"] = {"dims": list(arr.dims), "origin": list(arr.origin), **digest_array(arr.values)}
    out["__vct_a"] = digest_array(static.vct_a)
    out["__vct_b"] = digest_array(static.vct_b)
    return out


def differences(test: dict, ref: dict) -> list[str]:
    """Fields of `ref` that `test` lacks or holds with other bytes (fields only `test` has, e.g.
    ones added to fields.py after the recording, are not compared)."""
    return [k for k in ref if test.get(k) != ref[k]]


def _stored() -> dict:
    return json.loads(DIGEST.read_text())


def test_digest_catches_one_wrong_value():
    # planted fault on a stored-sized array: one value off by one ulp changes the digest
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7680, 10))
    y = x.copy()
    y[4321, 7] = np.nextafter(y[4321, 7], np.inf)
    assert digest_array(x) == digest_array(x.copy()) and digest_array(x) != digest_array(y)


def test_stored_digest_names_its_backend():
    data = _stored()
    assert data["factory_backend"] == "gtfn_cpu" and data["grid_file"] == "R2B3-1be5d930c6.nc"
    assert len(data["fields"]) >= 70


@pytest.mark.slow  # the factories with icoforge, cold: a few minutes on 2 cores
def test_icoforge_factory_fields_equal_gtfn_cpus(tiny_grid, tmp_path, monkeypatch):
    from icoforge.granule import fields
    from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND

    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))
    data = _stored()
    assert pathlib.Path(tiny_grid.path).name == data["grid_file"] and tiny_grid.num_levels == data["levels"]
    static = fields.build_static_fields(tiny_grid, DEFAULT_FACTORY_BACKEND, use_cache=False)
    ours = digest_fields(static)
    assert differences(ours, data["fields"]) == []
    # planted fault on a real field: one point of one metric off by 1e-12 relative
    name = "metrics/ddxn_z_full"
    arr = static.metrics["ddxn_z_full"].values.copy()
    i = np.unravel_index(np.argmax(np.abs(arr)), arr.shape)
    arr[i] *= 1 + 1e-12
    ours[name] = {**ours[name], **digest_array(arr)}
    assert differences(ours, data["fields"]) == [name]


def _record(npz: str) -> None:
    from icoforge.granule import fields
    from icoforge.portable_numpy import require_portable_rounding

    require_portable_rounding(f"recording {DIGEST}")
    static = fields._read(pathlib.Path(npz))
    assert static is not None, npz
    data = {
        "factory_backend": static.factory_backend,
        "grid_file": "R2B3-1be5d930c6.nc",
        "levels": 10,
        "fields_version": fields.FIELDS_VERSION,
        "timings_s": static.timings,
        "fields": digest_fields(static),
    }
    DIGEST.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        _record(sys.argv[2])
    else:
        print(__doc__)
