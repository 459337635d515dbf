"""The sped-up GT4Py passes (icoforge.backend.gt4py_speedups) give GT4Py's own result."""

from __future__ import annotations

import pytest
from gt4py.next.iterator.transforms import pass_manager

from icoforge.backend import gt4py_speedups, workflow
from icoforge.backend.precompile import compilable_program
from icoforge.suite.catalogue import get_program


@pytest.mark.skipif(not gt4py_speedups.applicable(), reason="patches checked for another GT4Py version")
def test_patched_passes_give_gt4pys_result(tiny_grid, monkeypatch):
    monkeypatch.delenv("ICOFORGE_FAST_PASSES", raising=False)
    inp = compilable_program(get_program("compute_advection_in_horizontal_momentum").program, tiny_grid.connectivities)
    plain = pass_manager.apply_common_transforms(
        inp.data, extract_temporaries=True, unroll_reduce=True, offset_provider=inp.args.offset_provider
    )
    fast = workflow.gt4py_passes(inp.data, inp.args.offset_provider)
    assert fast == plain and str(fast) == str(plain)
    # everything is restored afterwards: GT4Py's validation runs again
    import attr

    assert attr.get_run_validators()
    again = pass_manager.apply_common_transforms(
        inp.data, extract_temporaries=True, unroll_reduce=True, offset_provider=inp.args.offset_provider
    )
    assert again == plain


def test_patches_stay_off_when_gt4py_compiles_in_threads(monkeypatch):
    from gt4py.next import config

    monkeypatch.setattr(config, "BUILD_JOBS_MODE", config.BuildJobsMode.THREAD)
    assert not gt4py_speedups.applicable()
