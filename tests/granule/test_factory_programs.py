"""icon4py's geometry calls `geographical_to_cartesian_on_edges/_vertices` (field operators that
return a tuple of three fields) directly with `out=(x, y, z)`. icoforge once refused the
tuple-typed parameter and the static fields fell back to GT4Py's Python roundtrip for them (about
4 min on R2B6); both now compile with icoforge and agree with NumPy."""

from __future__ import annotations

import gt4py.next as gtx
import numpy as np
import pytest
from icon4py.model.common import dimension as dims
from icon4py.model.common.math import coordinate_transformations as ct

from icoforge.backend import make_backend


@pytest.mark.parametrize(
    "operator, dim, size",
    [(ct.geographical_to_cartesian_on_edges, dims.EdgeDim, "num_edges"),
     (ct.geographical_to_cartesian_on_vertices, dims.VertexDim, "num_vertices")],
)  # fmt: skip
def test_geographical_to_cartesian_compiles_with_icoforge(tiny_grid, operator, dim, size):
    # the plain icoforge backend has no fallback: a refused construct fails this call
    n = getattr(tiny_grid, size)
    rng = np.random.default_rng(17)
    lat, lon = rng.uniform(-1.5, 1.5, n), rng.uniform(-3.1, 3.1, n)
    out = tuple(gtx.as_field([dim], np.full(n, np.nan)) for _ in range(3))
    operator.with_backend(make_backend("cpu"))(gtx.as_field([dim], lat), gtx.as_field([dim], lon), out=out, offset_provider={})
    expected = (np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat))
    for got, want in zip(out, expected):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-14, atol=1e-15)
