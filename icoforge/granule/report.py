"""Rich tables for people (JSON for machines is `GreenlineReport.to_json()`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from icoforge.granule.greenline import GreenlineReport
from icoforge.granule.runner import NDYN_SUBSTEPS, SUBSTEP_MIX, VARIANTS
from icoforge.granule.state import PROGNOSTIC_FIELDS

SETUP_LABELS = {
    "device_grid": "grid on the device",
    "construct": "construct SolveNonhydro (+ most compiling)",
    "compile": "rest of the compiling",
    "first_calls": "first call of each variant",
}


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.3f}"


def setup_table(rep: GreenlineReport) -> Table:
    t = Table(title="setup (seconds)", caption=_common_caption(rep))
    t.add_column("phase")
    for r in rep.results:
        t.add_column(r.backend, justify="right")
    phases = [p for p in SETUP_LABELS if any(p in r.setup_s for r in rep.results)]
    for p in phases:
        t.add_row(SETUP_LABELS[p], *(_s(r.setup_s[p]) if p in r.setup_s else "-" for r in rep.results))
    t.add_row("[bold]total[/bold]", *(f"[bold]{_s(sum(r.setup_s.values()))}[/bold]" for r in rep.results))
    t.add_row("compile jobs (program variants)", *(str(r.compile_jobs) for r in rep.results))
    t.add_row(
        "icoforge translation cache hits",
        *(f"{r.cache['translation_cache_hits']}/{r.cache['programs']}" if r.cache else "-" for r in rep.results),
    )
    return t


def _common_caption(rep: GreenlineReport) -> str:
    c = rep.common_setup_s
    parts = [f"grid load {_s(c.get('grid_load', 0.0))} s"]
    if rep.fields_cached:
        parts.append(f"static fields {_s(c.get('static_fields', 0.0))} s (cached)")
    else:
        factories = ", ".join(f"{k.removeprefix('factory_')} {_s(v)}" for k, v in c.items() if k.startswith("factory_"))
        parts.append(
            f"static fields {_s(c.get('static_fields', 0.0))} s with {rep.options.factory_backend} ({factories})"
        )
    return "shared by all backends: " + "; ".join(parts)


def steps_table(rep: GreenlineReport) -> Table:
    t = Table(
        title=f"step time (ms): {rep.options.steps} timed steps per variant after {rep.options.warmup} warm-up",
        caption=f"dycore step = {NDYN_SUBSTEPS} substeps ({' + '.join(SUBSTEP_MIX)}), from the medians",
    )
    t.add_column("variant")
    for r in rep.results:
        t.add_column(f"{r.backend}\nmedian", justify="right")
        t.add_column("min", justify="right")
    if len(rep.results) > 1:
        t.add_column(f"speed-up vs\n{rep.results[0].backend}", justify="right")
    for v in VARIANTS:
        row = [v]
        for r in rep.results:
            row += [f"{r.median_ms(v):.3f}", f"{r.min_ms(v):.3f}"]
        if len(rep.results) > 1:
            base = rep.results[0].median_ms(v)
            row.append(" ".join(f"{base / r.median_ms(v):.2f}x" for r in rep.results[1:]))
        t.add_row(*row)
    row = ["[bold]dycore step[/bold]"]
    for r in rep.results:
        row += [f"[bold]{r.dycore_step_ms():.3f}[/bold]", ""]
    if len(rep.results) > 1:
        base = rep.results[0].dycore_step_ms()
        row.append(" ".join(f"{base / r.dycore_step_ms():.2f}x" for r in rep.results[1:]))
    t.add_row(*row)
    return t


def program_table(rep: GreenlineReport, index: int) -> Table:
    r = rep.results[index]
    t = Table(
        title=f"{r.backend}: per program, over {rep.options.profile_steps} dycore step(s) of {len(SUBSTEP_MIX)} substeps",
        caption=(
            f"instrumented dycore step {r.profiled_step_ms:.3f} ms (device sync around every call); "
            "share = program's time / that step; kernels = kernels in the compiled program (icoforge); "
            "compile s = its variants' translation + build in this run (icoforge; ~0 when cached)"
        ),
    )
    for col in ("program", "calls/step", "median ms/call", "ms/step", "share", "kernels", "compile s"):
        t.add_column(col, justify="left" if col == "program" else "right", no_wrap=col == "program")
    covered = 0.0
    for p in r.programs:
        covered += p.share
        t.add_row(
            p.name,
            f"{p.calls_per_step:g}",
            f"{p.median_ms:.3f}",
            f"{p.ms_per_step:.3f}",
            f"{100 * p.share:.1f} %",
            "-" if p.kernels is None else str(p.kernels),
            "-" if p.compile_s is None else _s(p.compile_s),
        )
    t.add_row(
        "[dim]outside GT4Py programs (Python)[/dim]",
        "",
        "",
        f"{r.profiled_step_ms * (1 - covered):.3f}",
        f"{100 * (1 - covered):.1f} %",
        "",
        "",
    )
    return t


def verification_table(rep: GreenlineReport) -> Table:
    t = Table(
        title="verification: largest max|a-b| / max|reference| per field over substeps "
        + ", ".join(v for v, _ in rep.comparisons[0].substeps),
    )
    t.add_column("field")
    for c in rep.comparisons:
        t.add_column(f"{c.backend}\nvs {c.reference}", justify="right")
    worst = [c.worst() for c in rep.comparisons]
    for f in PROGNOSTIC_FIELDS:
        t.add_row(f, *(f"{w[f]:.2e}" for w in worst))
    t.add_row(
        "[bold]result[/bold]",
        *(
            f"[green]PASS[/green] (rtol {c.rtol:g})" if c.passed else f"[red]FAIL[/red] (rtol {c.rtol:g})"
            for c in rep.comparisons
        ),
    )
    return t


def print_report(rep: GreenlineReport, console: Console) -> None:
    console.print(setup_table(rep))
    if rep.comparisons:
        console.print(verification_table(rep))
    console.print(steps_table(rep))
    for i, r in enumerate(rep.results):
        if r.programs:
            console.print(program_table(rep, i))
        if r.fallbacks:
            console.print(f"[yellow]{r.backend}: compiled by the fallback backend:[/yellow] " + "; ".join(r.fallbacks))
