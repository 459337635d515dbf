"""`icoforge roofline greenline`: the granule's dycore step on R2B3 with 10 levels, every kernel of
every icoforge-compiled program with its compulsory bytes, flops and time, summed per step.

Cost: the granule's setup (see tests/granule/test_greenline.py: a cold compile of the used program
variants when the session's cache is empty; ~30 s when warm) plus the C++ builds of each executed
kernel alone (~60 modules, about a minute on 2 cores); the steps take milliseconds.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from icoforge.perf.step_points import parse_markdown_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MARGIN_S = 0.02  # kernels alone vs the instrumented step on a loaded 2-core machine


@pytest.fixture(scope="module")
def run(tiny_grid, tmp_path_factory):
    from icoforge.perf.greenline import measure_greenline
    from icoforge.perf.greenline_files import write_greenline_roofline

    r = measure_greenline("R2B3", 10, "icoforge-cpu", steps=1, repeat=3)
    out = tmp_path_factory.mktemp("greenline-roofline") / "greenline R2B3.png"
    return r, write_greenline_roofline(r, out)


def _kernels_in_generated_code(artifact) -> list[str]:
    """Kernel names from the generated C++ module's header (independent of the cost model)."""
    src = pathlib.Path(artifact.module_path).parent / f"{artifact.module_name}.cpp"
    for line in src.read_text().splitlines():
        if line.startswith("// Kernels:"):
            return [k.strip() for k in line.split(":", 1)[1].split(",") if k.strip()]
    raise AssertionError(f"no kernel list in {src}")


def _ms(cell: str) -> float:
    return float(cell)


def kernel_table(md: str) -> list[dict[str, str]]:
    """The kernel table (the floors' tables come first)."""
    return parse_markdown_table(md.split("## Kernels\n", 1)[1])


@pytest.mark.slow
def test_files_rows_and_every_kernel(run):
    r, fig = run
    assert fig.png.name == "greenline_R2B3.png" and fig.png.read_bytes()[:8] == PNG_MAGIC
    md = fig.markdown.read_text()
    assert fig.png.name in md
    rows = kernel_table(md)
    kernel_rows = [row for row in rows if not row["kernel"].startswith("**")]
    assert len(kernel_rows) == len(r.rows) > 30
    for row in kernel_rows:
        assert float(row["MB"]) > 0 and _ms(row["ms/step"]) > 0, row
        assert float(row["GB/s"]) > 0 and float(row["calls/step"]) >= 1
    # labelled points: the 15 longest, numbered 1..15 in the table
    assert [row["#"] for row in kernel_rows[:15]] == [str(i) for i in range(1, 16)] and len(fig.labels) == 15
    times = [_ms(row["ms/step"]) for row in kernel_rows]
    assert times == sorted(times, reverse=True)

    # every kernel of every compiled variant the step called: a row, or listed as never executed
    listed = {row["kernel"].strip("`") for row in kernel_rows}
    never = set(re.findall(r"^- `([^`]+)` \(", md, flags=re.M))
    programs = {p for p, _ in r.variants}
    assert {"vertically_implicit_solver_at_predictor_step", "compute_rho_theta_pgrad_and_update_vn"} <= programs
    for program, artifact in r.variants:
        for k in _kernels_in_generated_code(artifact):
            assert k in listed | never, (program, k)
    assert listed == r.kernel_names() and not listed & never


@pytest.mark.slow
def test_per_step_totals_are_consistent(run):
    r, fig = run
    rows = kernel_table(fig.markdown.read_text())
    total = next(row for row in rows if row["kernel"] == "**all kernels**")
    kernel_ms = sum(_ms(row["ms/step"]) for row in rows if not row["kernel"].startswith("**"))
    assert float(total["ms/step"]) == pytest.approx(kernel_ms, rel=1e-3)
    assert float(total["MB"]) > 0
    assert r.kernel_seconds == pytest.approx(kernel_ms * 1e-3, rel=1e-3)
    assert 0 < r.kernel_seconds <= r.step_seconds * 1.25 + MARGIN_S
    assert 0 < r.program_seconds <= r.step_seconds * 1.001
    # kernel bytes and flops per step add up to the programs' model totals
    assert sum(x.bytes_per_step for x in r.rows) == sum(x.bytes_per_step for x in r.program_rows)
    assert sum(x.flops_per_step for x in r.rows) == sum(x.flops_per_step for x in r.program_rows)
    # the step calls the predictor's vertical solver once per substep
    row = next(x for x in r.program_rows if x.program == "vertically_implicit_solver_at_predictor_step")
    assert row.calls_per_step == 5
    assert r.ceiling.bytes_per_s > 1e8 and r.peak_flops > 0 and not r.unmodelled


@pytest.mark.slow
def test_program_level_files(run, tmp_path):
    from icoforge.perf.greenline_files import write_greenline_roofline

    r, _ = run
    prog = dataclasses.replace(r, rows=r.program_rows, untimed=r.rows)  # what --cpu-timing program reports
    fig = write_greenline_roofline(prog, tmp_path / "p.png")
    md = fig.markdown.read_text()
    assert "program-level" in md and "## Kernels behind the program-level points" in md
    rows = kernel_table(md)
    assert {row["program"] for row in rows if row["kernel"] == "*(program-level)*"} == {x.program for x in r.program_rows}
    assert all(f"`{x.kernel}`" in md for x in r.rows)


@pytest.mark.slow
def test_floors_from_the_recorded_calls(run):
    """kernel >= program >= substep floor; the kernel floor is the kernel table's total; Markdown
    (above the kernel table) and JSON carry them."""
    import json

    r, fig = run
    f = r.floors
    assert f is not None and f.interface_known and f.steps == r.steps and f.substeps == 5 * r.steps
    assert f.kernel >= f.program >= f.substep > 0
    assert f.kernel == pytest.approx(sum(x.bytes_per_step for x in r.rows))  # the same calls, the same model
    per_program = {x.program: pytest.approx(x.bytes_per_step) for x in r.program_rows}
    assert {p.program: p.kernel_bytes for p in f.programs} == per_program
    # a program moves something at its program floor iff its kernels do (update_theta_and_exner_in_halo
    # runs no kernel on a global grid)
    assert all(p.kernel_bytes >= p.program_bytes and (p.program_bytes > 0) == (p.kernel_bytes > 0) for p in f.programs)
    gaps = [p.gap for p in f.programs]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] > 0  # some program has kernels to fuse
    md = fig.markdown.read_text()
    assert md.index("## Floors") < md.index("## Kernels")
    floors = parse_markdown_table(md.split("## Floors", 1)[1])
    assert [row["floor"] for row in floors] == ["per kernel", "per program call", "per substep"]
    assert float(floors[1]["MB per dycore step"]) == pytest.approx(f.program / 1e6, rel=1e-3)
    data = json.loads(fig.markdown.with_suffix(".json").read_text())
    ms = data["floors_ms"]
    assert set(ms) == {"kernel", "program", "substep"} and ms["kernel"] >= ms["program"] >= ms["substep"] > 0
    assert data["floors_bytes"]["program"] == round(f.program)
    assert ms["substep"] == pytest.approx(1e3 * f.substep / r.ceiling.bytes_per_s, rel=1e-3)
