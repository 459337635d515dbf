"""Allocation policies of the GPU runtime's temporaries (ICOFORGE_TEMPORARIES, issue 17 item 5), run
by CPU emulation of the CUDA path: per-call temporaries give the same numbers as persistent ones,
each call takes fresh (poisoned) buffers and gives them back at its end, and a call is not
replayed (its pointers change); `async` needs a GPU and says so."""

from __future__ import annotations

import gc
import weakref

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import neighbor_sum
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E2CO, C2E2CODim

from icoforge import settings
from icoforge.backend.runtime import gpu
from icoforge.backend.runtime.emulate import make_emulated_backend
from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule
from icoforge.errors import IcoforgeError

CK = gtx.Field[gtx.Dims[dims.CellDim, dims.KDim], gtx.float64]


@gtx.field_operator
def _neighbour_sum_of_product(a: CK, b: CK) -> CK:
    t = a * b  # stored in a temporary with inlining off, read through C2E2CO
    return neighbor_sum(t(C2E2CO), axis=C2E2CODim)


@gtx.program
def neighbour_sum_of_product(a: CK, b: CK, out: CK):
    _neighbour_sum_of_product(a, b, out=out)


def _calls(grid, policy: str, monkeypatch, n: int = 2):
    """Outputs of `n` calls under `policy`, and every temporary buffer the runtime allocated (weak refs)."""
    monkeypatch.setenv("ICOFORGE_TEMPORARIES", policy)
    taken: list = []
    real = gpu.Runtime._new_temporary

    def spy(self, size, dtype):
        buf = real(self, size, dtype)
        taken.append(weakref.ref(buf))
        return buf

    monkeypatch.setattr(gpu.Runtime, "_new_temporary", spy)
    backend = make_emulated_backend("cuda", ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], inline="off"))
    run = neighbour_sum_of_product.with_backend(backend)
    rng = np.random.default_rng(5)
    a, b = (gtx.as_field([dims.CellDim, dims.KDim], rng.random((grid.num_cells, 3))) for _ in range(2))
    outs = []
    for _ in range(n):
        out = gtx.as_field([dims.CellDim, dims.KDim], np.full((grid.num_cells, 3), np.nan))
        run(a, b, out, offset_provider={"C2E2CO": grid.connectivities["C2E2CO"]})
        outs.append(out.asnumpy())
    table = grid.connectivities["C2E2CO"].ndarray
    expected = (a.asnumpy() * b.asnumpy())[table].sum(axis=1)
    return outs, expected, taken


def test_per_call_temporaries_give_the_persistent_results_and_are_freed(tiny_grid, monkeypatch):
    persistent, expected, taken = _calls(tiny_grid, "persistent", monkeypatch)
    assert len(taken) == 1  # the pool of the loaded program: one buffer for both calls
    per_call, _, taken = _calls(tiny_grid, "per-call", monkeypatch)
    for p, q in zip(persistent, per_call):
        np.testing.assert_array_equal(q, p)
        np.testing.assert_allclose(q, expected, rtol=1e-14)
    assert len(taken) == 2  # one temporary, a fresh buffer in each call
    gc.collect()
    assert all(ref() is None for ref in taken)  # given back at the end of its call


def test_per_call_runtime_does_not_replay(monkeypatch):
    monkeypatch.setenv("ICOFORGE_TEMPORARIES", "per-call")
    assert gpu.Runtime("p", xp=np).replay is False
    monkeypatch.setenv("ICOFORGE_TEMPORARIES", "persistent")
    assert gpu.Runtime("p", xp=np).replay is settings.current().host_replay


def test_async_temporaries_need_a_gpu(tiny_grid, monkeypatch):
    with pytest.raises(IcoforgeError, match="async needs CuPy and a GPU"):
        _calls(tiny_grid, "async", monkeypatch, n=1)


def test_an_unknown_policy_lists_the_choices(monkeypatch):
    monkeypatch.setenv("ICOFORGE_TEMPORARIES", "pooled")
    with pytest.raises(IcoforgeError, match="choose one of persistent, per-call, async"):
        settings.current()
