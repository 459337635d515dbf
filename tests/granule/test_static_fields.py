"""The static fields computed in a child process (what the greenline does) against the same fields
computed in-process, on R2B3/10: the factories run three times here, about a minute each on 2 cores."""

from __future__ import annotations

import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.granule import backends, fields
from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND


@pytest.mark.slow  # the factories run three times: 2-4 minutes on 2 cores (make test-slow)
def test_static_fields_from_a_child_process_equal_in_process_ones(tiny_grid, tmp_path, monkeypatch):
    # the greenline computes them in a spawned child (its timing process stays free of the factories)
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))
    child = fields.build_static_fields(tiny_grid, DEFAULT_FACTORY_BACKEND, in_child=True)
    assert not child.cached and set(child.timings) == {"geometry", "interpolation", "metrics"}
    again = fields.build_static_fields(tiny_grid, DEFAULT_FACTORY_BACKEND, in_child=True)
    assert again.cached  # the child's result was stored in the cache
    fallen_before = len(backends.FALLEN_BACK)
    own = fields.build_static_fields(tiny_grid, DEFAULT_FACTORY_BACKEND, use_cache=False)
    # issue 19: icon4py's factories compile with icoforge, none through the pair's second backend
    assert backends.FALLEN_BACK[fallen_before:] == []
    assert set(own.arrays()) == set(child.arrays()) and own.scalars == child.scalars
    for name, a in own.arrays().items():
        b = child.arrays()[name]
        assert (b.dims, b.origin) == (a.dims, a.origin), name
        np.testing.assert_array_equal(b.values, a.values, err_msg=name)
    np.testing.assert_array_equal(child.vct_a, own.vct_a)


def test_static_fields_child_failure_is_reported(tiny_grid, tmp_path, monkeypatch):
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))
    with pytest.raises(IcoforgeError, match="child process failed"):
        fields.build_static_fields(tiny_grid, "no-such-backend", in_child=True)
