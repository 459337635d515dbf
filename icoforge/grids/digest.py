"""The bits of a grid file: one SHA-256 over its floating-point variables (name, then bytes, sorted
by name), and the digest of the R2B3 preset that every stored R2B3/10 reference was recorded on.

The references (tests/granule/data, icoforge/model/jw_*references.json) are bitwise, so a grid
generated with other last bits (numpy's AVX-512 trigonometry, icoforge/portable_numpy.py) makes
them all fail; tests/granule/test_reference_grid.py and scripts/device/grid_bits.py compare with it."""

from __future__ import annotations

import hashlib

import numpy as np

# the R2B3 preset made on the AMD EPYC (AVX2) VM on 2026-12-06, where the references were recorded
R2B3_REFERENCES_SHA256 = "f3e90ebc5fab25ce8ff5c029107db4e99ec129ee242041106b463be64e343dff"


def float_variables_sha256(path) -> str:
    import netCDF4

    h = hashlib.sha256()
    with netCDF4.Dataset(path) as ds:
        names = sorted(n for n, v in ds.variables.items() if v.dtype.kind == "f")
        if not names:
            raise ValueError(f"{path}: no floating-point variables")
        for name in names:
            h.update(name.encode())
            h.update(np.ascontiguousarray(ds[name][:].data).tobytes())
    return h.hexdigest()
