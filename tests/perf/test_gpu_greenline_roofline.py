"""`icoforge roofline greenline` on a GPU: every launch timed with events (skipped without CuPy and a GPU)."""

from __future__ import annotations

import pytest

from icoforge.backend.runtime.gpu import cupy_vendor

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(cupy_vendor() is None, reason="needs CuPy and a CUDA/ROCm GPU")]


def test_greenline_kernels_timed_with_events(tiny_grid, tmp_path):
    from icoforge.perf.greenline import measure_greenline
    from icoforge.perf.greenline_files import write_greenline_roofline
    from icoforge.perf.step_points import parse_markdown_table

    r = measure_greenline("R2B3", 10, f"icoforge-{cupy_vendor()}", steps=2, peak_gflops=1e4, gpu_lock=str(tmp_path / "lock"))
    assert "events" in r.timing and len(r.rows) > 30 and not r.program_level
    assert all(x.seconds and x.seconds > 0 and x.bytes > 0 for x in r.rows)
    # events time the device alone: the kernels of a step take less than the synchronised step
    assert 0 < r.kernel_seconds < r.step_seconds
    assert sum(x.bytes_per_step for x in r.rows) == sum(x.bytes_per_step for x in r.program_rows)
    fig = write_greenline_roofline(r, tmp_path / "gpu.png")
    rows = parse_markdown_table(fig.markdown.read_text().split("## Kernels\n", 1)[1])  # the floors' tables come first
    assert len([x for x in rows if not x["kernel"].startswith("**")]) == len(r.rows)
    assert r.floors is not None and r.floors.kernel >= r.floors.program >= r.floors.substep > 0
    assert r.ceiling.bytes_per_s > 1e11
