"""Roofline of a whole step: aggregation per kernel over calls (exact numbers on fake data), the
Markdown table, the plot with many points, the call recorder, and `--gpu-lock` (fast, no granule)."""

from __future__ import annotations

import fcntl
import functools
import os
import types

import pytest

from icoforge.perf import step_points
from icoforge.perf.model import KernelCost, ProgramCost
from icoforge.perf.step_points import Launch, Row, aggregate, markdown_table, parse_markdown_table, totals

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

LAUNCHES = [
    # two steps; kernel k0 of program A runs twice per step with different sizes
    Launch("A", "a_k0", 100, 10, 1e-3),
    Launch("A", "a_k0", 300, 30, 3e-3),
    Launch("A", "a_k0", 100, 10, 1e-3),
    Launch("A", "a_k0", 300, 30, 3e-3),
    Launch("A", "a_k1", 1000, 0, 2e-3),
    Launch("A", "a_k1", 1000, 0, 2e-3),
    # the same kernel name under another bound program stays apart
    Launch("A (other)", "a_k0", 50, 5, 5e-4),
    Launch("A (other)", "a_k0", 50, 5, 5e-4),
    # one run untimed: the row is untimed, sorted last
    Launch("B", "b_k0", 80, 8, None),
    Launch("B", "b_k0", 80, 8, 1e-3),
]


def test_aggregate_sums_per_program_and_kernel_per_step():
    rows = aggregate(LAUNCHES, steps=2)
    assert [(r.program, r.kernel) for r in rows] == [("A", "a_k0"), ("A", "a_k1"), ("A (other)", "a_k0"), ("B", "b_k0")]
    a0, a1, other, b = rows
    assert (a0.calls, a0.bytes, a0.flops, a0.seconds) == (4, 800, 80, pytest.approx(8e-3))
    assert (a0.calls_per_step, a0.bytes_per_step, a0.flops_per_step) == (2, 400, 40)
    assert a0.seconds_per_step == pytest.approx(4e-3)
    assert a0.bytes_per_s == pytest.approx(800 / 8e-3)  # = bytes per step / time per step
    assert a0.ai == pytest.approx(0.1)
    assert (a1.bytes_per_step, a1.flops_per_step, a1.ai) == (1000, 0, 0.0)
    assert (other.calls, other.bytes) == (2, 100)
    assert b.seconds is None and b.seconds_per_step is None and b.bytes_per_s is None
    t = totals(rows)
    assert t.seconds is None  # not every row timed
    t = totals(rows[:3])
    assert (t.calls, t.bytes, t.flops, t.level) == (8, 2900, 90, "total")
    assert t.seconds == pytest.approx(8e-3 + 4e-3 + 1e-3)
    with pytest.raises(ValueError):
        aggregate(LAUNCHES, steps=0)


def test_markdown_rows_exact():
    rows = aggregate(LAUNCHES, steps=2)
    text = markdown_table(rows, bandwidth=1e6, top=2)
    lines = text.splitlines()
    assert lines[0] == "| # | kernel | program | calls/step | MB | MFLOP | flop/B | ms/step | GB/s | % of copy |"
    # 400 B, 40 flop, 4 ms per step: 0.0004 MB, 0.1 MB/s = 1e-4 GB/s, 10 % of 1 MB/s
    assert lines[2] == "| 1 | `a_k0` | A | 2 | 0.0004 | 4e-05 | 0.1 | 4 | 0.0001 | 10.0 |"
    assert lines[3] == "| 2 | `a_k1` | A | 1 | 0.001 | 0 | 0 | 2 | 0.0005 | 50.0 |"
    assert lines[4].startswith("|  | `a_k0` | A (other) | 1 | 5e-05 |")
    assert lines[5] == "|  | `b_k0` | B | 1 | 8e-05 | 8e-06 | 0.1 | – | – | – |"
    assert lines[6] == "|  | **all kernels** |  | 5 | 0.00153 | 5.3e-05 | 0.0346 | – | – | – |"  # B untimed
    parsed = parse_markdown_table(text)
    assert len(parsed) == 5 and parsed[0]["kernel"] == "`a_k0`" and parsed[0]["ms/step"] == "4"
    program = aggregate([Launch("A", "A", 400, 40, 4e-3)], steps=1, level="program")
    assert "| *(program-level)* | A | 1 |" in markdown_table(program, bandwidth=1e6)
    assert "**all programs**" in markdown_table(program, bandwidth=1e6)


def test_plot_many_points_labels_only_the_longest(tmp_path):
    launches = [
        Launch(f"program_{p:02d}_with_a_rather_long_name", f"prog_{p:02d}_long_kernel_name_k{k}",
               10**6 * (1 + k), (10**5 * k) if k else 0, 1e-4 * (1 + p + k))  # fmt: skip
        for p in range(12)
        for k in range(5)
    ]
    rows = aggregate(launches, steps=1)
    fig = step_points.plot_step_roofline(rows, 1e10, 1e11, tmp_path / "many points:<>.png", "title", top=15)
    assert fig.png.name == "many_points.png" and fig.png.read_bytes()[:8] == PNG_MAGIC
    assert len(fig.xs) == 60 and len(fig.labels) == 15
    assert fig.labels[0].startswith("1 ") and fig.labels[-1].startswith("15 ")
    assert rows[0].kernel.endswith("k4") and fig.labels[0].endswith("_k4")  # the longest first
    for x, y in zip(fig.xs, fig.ys):
        assert fig.xlim[0] <= x <= fig.xlim[1] and fig.ylim[0] <= y <= fig.ylim[1]


def _cost(name: str, kernels: list[tuple[str, int, int, bool]]) -> ProgramCost:
    return ProgramCost(name, tuple(KernelCost(n, "map", ex, 10, 1, b, 0, 0, f) for n, b, f, ex in kernels))


def test_launches_from_costs_and_events():
    from icoforge.perf.greenline import Call, gpu_launches, kernel_launches

    cost = _cost("p", [("p_k0", 100, 7, True), ("p_k1", 50, 0, False), ("p_k2", 30, 3, True)])
    call = Call("p (attr)", None, (), {}, 1e-3)
    got = kernel_launches(call, cost, {"p_k0": 2e-4, "p_k2": 1e-4})
    assert got == [Launch("p (attr)", "p_k0", 100, 7, 2e-4), Launch("p (attr)", "p_k2", 30, 3, 1e-4)]
    assert [x.seconds for x in kernel_launches(call, cost, None)] == [None, None]
    # events: by name, or by order among the executed kernels when the name is unknown
    assert gpu_launches(call, cost, [("p_k2", 5e-5), ("p_k0", 6e-5)]) == [
        Launch("p (attr)", "p_k2", 30, 3, 5e-5),
        Launch("p (attr)", "p_k0", 100, 7, 6e-5),
    ]
    assert [x.kernel for x in gpu_launches(call, cost, [("<fn 1>", 1e-5), ("<fn 2>", 1e-5)])] == ["p_k0", "p_k2"]


class _Pool:
    def __init__(self, variants):
        self.compiled_programs = dict(variants)


def _bound(name: str, variants: dict) -> functools.partial:
    def definition():
        pass

    definition.__name__ = name
    class Program:  # what icon4py binds: a GT4Py Program with its pool of compiled variants
        definition_stage = types.SimpleNamespace(definition=definition)

        def __call__(self, *args, **kwargs):
            pass

    program = Program()
    program._compiled_programs = _Pool(variants)
    return functools.partial(program, constant=1)


def test_capture_records_every_variant_call_and_restores():
    from icoforge.perf.greenline import Capture

    seen = []

    def variant(tag):
        def fn(*args, offset_provider):
            seen.append((tag, args))

        return fn

    v0, v1, v2 = variant("a0"), variant("a1"), variant("b")
    solver = types.SimpleNamespace(
        _prog_a=_bound("prog_a", {("static", 0): v0, ("static", 1): v1}),
        _prog_a_again=_bound("prog_a", {}),
        _prog_b=_bound("prog_b", {"k": v2}),
        velocity_advection=None,
    )
    pool_a = solver._prog_a.func._compiled_programs
    syncs = []
    cap = Capture(solver, lambda: syncs.append(1))
    assert [n for n, _ in cap.variants()] == ["prog_a (prog_a)", "prog_a (prog_a)", "prog_b"]
    with cap:
        pool_a.compiled_programs[("static", 1)](1, 2.0, offset_provider={"E2C": None})
        solver._prog_b.func._compiled_programs.compiled_programs["k"](3, offset_provider={})
    assert pool_a.compiled_programs[("static", 1)] is v1  # restored
    assert seen == [("a1", (1, 2.0)), ("b", (3,))] and len(syncs) == 4
    assert [(c.program, c.fn, c.args) for c in cap.calls] == [("prog_a (prog_a)", v1, (1, 2.0)), ("prog_b", v2, (3,))]
    assert all(c.seconds >= 0 and c.program_ir is None for c in cap.calls)


def test_gpu_lock_held_while_one_program_is_measured(tmp_path, monkeypatch):
    from icoforge.cli.main import main
    from icoforge.perf import measure as measure_mod

    lock = tmp_path / "gpu.lock"
    held = []

    def fake_measure(*args, **kwargs):
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        raise RuntimeError("stop here")

    monkeypatch.setattr(measure_mod, "measure", fake_measure)
    monkeypatch.setattr("icoforge.cli.perf_cmd._load_grid", lambda args: None)
    with pytest.raises(RuntimeError, match="stop here"):
        main(["roofline", "some_program", "--gpu-lock", str(lock)])
    assert held == [True]
    fd = os.open(lock, os.O_RDONLY)  # released afterwards
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


def test_greenline_roofline_rejects_bad_arguments_before_any_work():
    from icoforge.cli.main import main
    from icoforge.errors import IcoforgeError

    for argv in (["--steps", "0"], ["--levels", "0"], ["--repeat", "0"]):
        assert main(["roofline", "greenline", *argv]) == 2  # IcoforgeError: message, no traceback
    with pytest.raises(IcoforgeError, match="backend"):
        from icoforge.perf.greenline import measure_greenline

        measure_greenline("R2B3", 10, "gtfn_cpu")


def test_row_point():
    r = Row("k", "p", "kernel", calls=4, steps=2, bytes=800, flops=80, seconds=8e-3)
    p = r.point()
    assert (p.name, p.bytes, p.flops, p.seconds) == ("k", 400, 40, 4e-3)
