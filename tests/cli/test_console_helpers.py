"""The shared console module: tables that fit, progress as plain lines when piped, known
warnings filtered. Pure Python, no icon4py: a second."""

from __future__ import annotations

import io
import re
import threading
import warnings

import pytest
from rich.console import Console

from icoforge.console import Col, StepProgress, filter_known_warnings, fit_table, make_console


def _piped(width: int = 80) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, force_terminal=False), out


COLUMNS = [Col("name", no_wrap=True), Col("essential"), Col("nice", priority=1), Col("extra", priority=2)]
ROWS = [["a_rather_long_program_name_of_forty_chars", "x" * 10, "y" * 12, "z" * 30]]


def test_a_table_drops_its_least_important_columns_first_and_says_so():
    console, out = _piped(80)
    table = fit_table(console, "t", COLUMNS, ROWS)
    assert [c.header for c in table.columns] == ["name", "essential", "nice"]
    console.print(table)
    text = out.getvalue()
    assert "not shown (narrow terminal; --wide for all): extra" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_wide_keeps_every_column():
    console, _ = _piped(80)
    assert len(fit_table(console, "t", COLUMNS, ROWS, wide=True).columns) == 4
    assert len(fit_table(make_console(wide=True), "t", COLUMNS, ROWS).columns) == 4


def test_essential_columns_wrap_when_nothing_is_left_to_drop():
    console, out = _piped(30)
    console.print(fit_table(console, None, [Col("h", no_wrap=True)], [["n" * 60]]))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 30
    assert "".join(re.sub(r"[^n]", "", line) for line in lines) == "n" * 60  # folded, not cut


def test_piped_console_is_80_columns_unless_columns_says_otherwise(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console().width == 80  # pytest's capture is not a terminal
    assert make_console(wide=True).width == 200
    monkeypatch.setenv("COLUMNS", "132")
    assert make_console().width == make_console(wide=True).width == 132


def test_progress_is_plain_timed_lines_when_piped():
    console, out = _piped()
    with StepProgress(console, every_s=0.0) as step:
        step("loading the grid")
        step("compiling", 1, 3)
        step("compiling", 2, 3)
        step.log("gtfn_cpu: compiled")
    lines = out.getvalue().splitlines()
    assert lines == [
        "[     0 s] loading the grid",
        "[     0 s] compiling (1/3)",
        "[     0 s] compiling (2/3)",
        "gtfn_cpu: compiled",
    ]


def test_a_quiet_step_gets_still_running_lines():
    console, out = _piped()
    printed = threading.Event()
    with StepProgress(console, heartbeat_s=0.05) as step:
        step("constructing SolveNonhydro", 0, 0)
        original = step._line

        def line(now: float, suffix: str = "") -> None:
            original(now, suffix)
            if suffix:
                printed.set()

        step._line = line  # type: ignore[method-assign]
        assert printed.wait(10.0)
    assert "constructing SolveNonhydro, still running" in out.getvalue()


def test_known_harmless_warnings_are_filtered_and_others_said_once():
    with warnings.catch_warnings(record=True) as seen:
        filter_known_warnings()
        warnings.warn("Python is not running in optimized mode, which may impact performance.", UserWarning)
        for _ in range(2):
            warnings.warn("something new", UserWarning)
        warnings.warn("something new", UserWarning)  # another line: "once" still holds
    assert [str(w.message) for w in seen] == ["something new"]


@pytest.mark.parametrize("columns", [80, 120])
def test_no_line_is_wider_than_the_console(columns):
    console, out = _piped(columns)
    console.print(fit_table(console, "t", COLUMNS, ROWS * 3, caption="a caption"))
    assert max(len(line) for line in out.getvalue().splitlines()) <= columns


def test_profile_table_keeps_kernel_name_and_verdict_on_80_columns():
    """`icoforge profile --run` piped (80 columns): session 21's ncu table was cut to "com…" and
    "1.9…" in every cell; now the counters go first and what is left is whole."""
    import argparse
    import types

    from icoforge.cli.perf_cmd import _print_profile
    from icoforge.perf.profile import KernelMetrics

    name = "comp_rho_thet_pgra_upda_vn_k4"
    cost = types.SimpleNamespace(kernels=[types.SimpleNamespace(name=name, bytes=5868.093e6)])
    metrics = {name: KernelMetrics(name, 5, 1.9095e-3, 6545.794e6, 64.9, 34.6, 58.5, 48)}
    args = argparse.Namespace(program="compute_rho_theta_pgrad_and_update_vn", grid="R2B6", levels=80, tool="ncu")
    out = io.StringIO()
    _print_profile(Console(file=out, width=80), args, cost, metrics)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    for whole in (name, "1.9095", "1.12", "3428.0"):  # time, DRAM over model, bandwidth
        assert whole in text, text
    assert "not shown" in text and "…" not in text
    wide = io.StringIO()
    _print_profile(Console(file=wide, width=250), args, cost, metrics)
    assert "34.6" in wide.getvalue() and "not shown" not in wide.getvalue()  # room for all: L2 hit too
