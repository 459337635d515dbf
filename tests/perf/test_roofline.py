"""Roofline files: a real CPU run of a small program, and drawing rules checked on synthetic points."""

from __future__ import annotations

import math
import pathlib

import gt4py.next as gtx
import numpy as np
import pytest
from icon4py.model.common import dimension as dims

from icoforge.perf import roofline, timing
from icoforge.perf.roofline import Point, labels_for, plot_roofline, safe_path, safe_stem, short_label

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path: pathlib.Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_cpu_run_roofline(tiny_grid, tmp_path):
    from icoforge.perf.measure import measure, write_roofline

    m = measure("compute_divergence_of_fluxes_of_rho_and_theta", tiny_grid, "icoforge-cpu", repeat=3)
    assert m.ceiling.bytes_per_s > 1e8  # any machine copies faster than 100 MB/s
    assert set(m.kernels) == {k.name for k in m.cost.kernels if k.executed}
    fig = write_roofline(m, tmp_path / "out" / "my roofline.png")
    assert fig.png == tmp_path / "out" / "my_roofline.png"
    assert_png(fig.png)
    assert (fig.xscale, fig.yscale) == ("log", "log")
    assert len(fig.xs) == len(m.cost.kernels) + 1  # every kernel and the program (sum of its kernels)
    for x, y in zip(fig.xs, fig.ys):
        assert fig.xlim[0] <= x <= fig.xlim[1] and fig.ylim[0] <= y <= fig.ylim[1]
    assert fig.labels[-1].endswith("all kernels")
    md = fig.markdown.read_text()
    assert "my_roofline.png" in md and "comp_dive_flux_rho_thet_k0" in md and "% of copy BW" in md
    assert "*compute_divergence_of_fluxes_of_rho_and_theta (whole call)*" in md  # wall clock: in the table
    # kernel vs program floor of the call (floors.py): the kernel floor is the model's total
    kernel_b, program_b = m.floors
    assert kernel_b == m.cost.bytes and 0 < program_b <= kernel_b
    assert f"per program call {program_b / 1e6:.4g} MB" in md


def test_points_placed_and_labelled(tmp_path):
    long = "a_very_long_program_name_that_goes_on_and_on_and_would_never_fit_anywhere"
    pts = [
        Point(f"{long}_k0", bytes=10**6, flops=2 * 10**5, seconds=1e-4),
        Point(f"{long}_k1", bytes=10**6, flops=0, seconds=2e-4),  # a copy: no flops
        Point(f"{long}_k12", bytes=10**6, flops=10**7, seconds=1e-3),
        Point(long, bytes=3 * 10**6, flops=10**7 + 2 * 10**5, seconds=1.3e-3, kind="program"),
        Point(long + " (whole call)", bytes=3 * 10**6, flops=10**7 + 2 * 10**5, seconds=2e-3, kind="call"),
    ]
    fig = plot_roofline(pts, bandwidth=1e10, peak_flops=1e11, out=tmp_path / f"{long}<>:.png", title=long)
    assert_png(fig.png)
    assert len(fig.png.name) <= roofline.FILENAME_MAX + 4
    assert fig.xs[0] == pytest.approx(0.2) and fig.ys[0] == pytest.approx(2e9)
    # the zero-flop kernel sits at the left edge at the fraction of the roof it reached (50 %)
    assert fig.xs[1] == pytest.approx(fig.xlim[0] * 1.5)
    assert fig.ys[1] / (1e10 * fig.xs[1]) == pytest.approx(0.5)
    assert fig.labels == ("1 k0", "2 k1", "3 k12", "4 all kernels")  # the wall-clock call is not drawn


def test_safe_names_and_labels():
    assert safe_stem("roofline vert/impl: solver") == "roofline_vert_impl_solver"
    long = "x" * 200
    stem = safe_stem(long)
    assert len(stem) <= roofline.FILENAME_MAX and stem != safe_stem("x" * 199)  # hash keeps them apart
    assert safe_path("dir/a b.png") == pathlib.Path("dir/a_b.png")
    assert safe_path("noext") == pathlib.Path("noext.png")
    assert short_label("short") == "short"
    s = short_label("compute_horizontal_advection_of_rho_and_theta_k17", 16)
    assert len(s) == 16 and s.endswith("_k17")
    prefix, labels = labels_for([Point("p_x_k0", 1, 1, 1.0), Point("p_x_k1", 1, 1, 1.0)])
    assert prefix == "p_x_" and labels == ["1 k0", "2 k1"]


def test_markdown_table_lists_untimed_kernels():
    pts = [Point("k_a", 2_000_000, 1_000_000, 1e-3), Point("k_b", 1_000_000, 0, None)]
    table = roofline.markdown_table(pts, bandwidth=4e9)
    rows = table.splitlines()
    assert rows[2].startswith("| 1 | `k_a` | 2 | 1 | 0.5 | 1 | 2 | 50.0 |")
    assert rows[3] == "|  | `k_b` | 1 | 0 | 0 | – | – | – |"


def test_stats_and_cpu_ceiling():
    s = timing.Stats((3.0, 1.0, 2.0))
    assert (s.median, s.min, s.max, s.spread) == (2.0, 1.0, 3.0, 1.0)
    assert math.isnan(timing.Stats(()).median)
    c = timing.cpu_copy_bandwidth(nbytes=16 << 20, repeat=2, threads=2)
    assert c.bytes_per_s > 1e8 and "2 threads" in c.how


class _FakeEvent:
    def record(self, stream=None):
        import time

        self.t = time.perf_counter()
        self.stream = stream

    def synchronize(self):
        pass


class _FakeCuda:
    Event = _FakeEvent
    current_stream = "current"  # what CuPy launches on when the runtime has no stream of its own

    @staticmethod
    def get_current_stream():
        return _FakeCuda.current_stream

    @staticmethod
    def get_elapsed_time(start, end):
        return (end.t - start.t) * 1e3  # milliseconds, as CuPy


def _fake_runtime():
    """icoforge.backend.runtime.gpu.Runtime over a fake CuPy (events only); launches call the kernel."""
    from icoforge.backend.runtime.gpu import Runtime

    class FakeRuntime(Runtime):
        def _launch(self, kernel, grid, block, args):
            kernel(grid, block, args)
            self.launched.append(kernel.name)

    rt = FakeRuntime("p", xp=type("cp", (), {"cuda": _FakeCuda}))
    rt.launched = []
    return rt


class _Kernel:
    def __init__(self, name):
        self.name = name

    def __call__(self, grid, block, args):
        pass


def test_kernel_timer_wraps_one_runtime():
    rt, other = _fake_runtime(), _fake_runtime()
    timer = timing.KernelTimer(nvtx=False).attach(rt)
    for _ in range(3):
        rt.launch(_Kernel("p_k0"), (1, 1, 1), (128, 1, 1), ())
        rt.launch(_Kernel("p_k1"), (1, 1, 1), (128, 1, 1), ())
    other.launch(_Kernel("q_k0"), (1, 1, 1), (128, 1, 1), ())  # another program: not timed
    stats = timer.per_kernel()
    assert set(stats) == {"p_k0", "p_k1"} and all(len(s.samples) == 3 for s in stats.values())
    # events on the stream the kernels went to, so they wait for work queued there before them
    assert {ev.stream for _, start, end in timer.records for ev in (start, end)} == {"current"}
    assert rt.launched == ["p_k0", "p_k1"] * 3  # the real launch still ran
    timer.detach()
    assert rt.observers == []
    rt.launch(_Kernel("p_k0"), (1, 1, 1), (128, 1, 1), ())
    assert len(timer.records) == 6


CK = gtx.Field[[dims.CellDim, dims.KDim], gtx.float64]


@gtx.field_operator
def _scaled(a: CK, s: gtx.float64) -> CK:
    return a * s


@gtx.program
def two_kernels(a: CK, b: CK, out_a: CK, out_b: CK):
    _scaled(a, 2.0, out=out_a)
    _scaled(b, 3.0, out=out_b)

def test_single_kernel_callables_run_each_kernel_alone(tiny_grid):
    """The one single-kernel C++ path of the CPU timers (`timing.cpu_kernel_callables`, the
    greenline's per-kernel timing): one module per kernel, built in threads; each callable runs
    its kernel alone, with the whole program's arguments."""
    from icoforge.backend.runtime.precompile import program_ir

    g, nk = tiny_grid, 10
    pir = program_ir(two_kernels, g.connectivities)
    kernels = [k.name for k in pir.kernels()]
    assert len(kernels) == 2
    fns = timing.single_kernel_callables([(pir, k) for k in pir.kernels()], workers=2)
    assert set(fns) == {(id(pir), k) for k in kernels}
    assert timing.cpu_kernel_callables(pir, kernels[-1:]).keys() == {kernels[-1]}
    r = np.random.default_rng(3)
    a, b = (gtx.as_field([dims.CellDim, dims.KDim], r.random((g.num_cells, nk))) for _ in range(2))
    outs = [gtx.as_field([dims.CellDim, dims.KDim], np.full((g.num_cells, nk), np.nan)) for _ in range(2)]
    fns[(id(pir), kernels[-1])](a, b, *outs, offset_provider=g.connectivities)
    assert np.isnan(outs[0].asnumpy()).all()  # the first kernel did not run
    np.testing.assert_array_equal(outs[1].asnumpy(), b.asnumpy() * 3.0)
