"""The files of `icoforge roofline greenline`: the PNG roofline, its Markdown report (floors, kernels,
fusion pairs, buffers, programs) and the same as JSON, from a measured `GreenlineRoofline`
(greenline.py measures, this module writes)."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from icoforge.perf import roofline
from icoforge.perf.floors import buffers_markdown, pairs_markdown
from icoforge.perf.floors import markdown as floors_markdown
from icoforge.perf.greenline import GreenlineRoofline
from icoforge.perf.step_points import Row, markdown_table, plot_step_roofline

TOP_LABELS = 15


FLOORS_NOTE = (
    "Compulsory bytes per dycore step at three scopes (icoforge/perf/floors.py), fields identified by buffer "
    "(allocation, dtype, strides), not by name: **kernel** = each kernel moves its own reads and writes (the "
    "table below sums to it); **program** = each element a program call touches moves once (read if its first "
    "access in the call is a read, written if the call writes it; temporaries of the call move nothing); "
    "**substep** = the same across all program calls of one `time_step`, and solver-owned buffers that every "
    "substep overwrites before reading are not written either (buffers of `time_step`'s arguments always are). "
    "The gaps between the lines are what fusion inside programs, then across programs, could still save."
)


def floors_section(r: GreenlineRoofline) -> list[str]:
    """Markdown lines: the three floors and the per-program gap table (empty without floors)."""
    if r.floors is None:
        return []
    out = ["## Floors", "", FLOORS_NOTE, ""]
    if not r.floors.interface_known:
        out += ["(`time_step`'s arguments were not recorded: every buffer's writes count at the substep floor.)", ""]
    if r.unmodelled:
        out += [f"({len(r.unmodelled)} program(s) not compiled by icoforge are in no floor.)", ""]
    return out + [floors_markdown(r.floors, r.ceiling.bytes_per_s), ""]


def buffers_section(r: GreenlineRoofline, top: int = 30) -> list[str]:
    if r.floors is None or not r.floors.buffers:
        return []
    return [
        "## Buffers behind the floors", "",
        f"The {min(top, len(r.floors.buffers))} buffers with the most kernel-floor bytes per dycore step and what the "
        "program and substep floors keep of them (interface: a buffer of `time_step`'s arguments; a temporary is one "
        "row for all calls of its program).", "",
        buffers_markdown(r.floors, top), "",
    ]  # fmt: skip


def greenline_roofline_json(r: GreenlineRoofline) -> dict[str, Any]:
    """The report as plain data: setting, floors (`floors_ms`, `floors_bytes`), per-program floors, rows."""
    bw = r.ceiling.bytes_per_s

    def row(x: Row) -> dict[str, Any]:
        return {"kernel": x.kernel, "program": x.program, "calls_per_step": x.calls_per_step,
                "bytes_per_step": x.bytes_per_step, "flops_per_step": x.flops_per_step,
                "ms_per_step": None if x.seconds_per_step is None else x.seconds_per_step * 1e3}  # fmt: skip

    out: dict[str, Any] = {
        "grid": r.grid, "levels": r.levels, "backend": r.backend, "device": r.device, "steps": r.steps,
        "bandwidth_GBps": round(bw / 1e9, 2), "ceiling": r.ceiling.how, "timing": r.timing,
        "step_ms": r.step_seconds * 1e3, "kernel_ms": None if r.kernel_seconds is None else r.kernel_seconds * 1e3,
    }  # fmt: skip
    if r.floors is not None:
        out.update(r.floors.to_json(bw))
        out["floors_programs"] = [
            {"program": p.program, "calls_per_step": p.calls, "kernel_bytes": p.kernel_bytes, "program_bytes": p.program_bytes}
            for p in r.floors.programs
        ]
        out["floors_buffers"] = [dataclasses.asdict(b) for b in r.floors.buffers]
    out["fusion_pairs"] = [dataclasses.asdict(p) for p in r.pairs]
    out["rows"] = [row(x) for x in r.rows]
    return out


def write_greenline_roofline(r: GreenlineRoofline, out: str | os.PathLike | None = None, top: int = TOP_LABELS) -> roofline.Figure:
    """PNG, Markdown and JSON (same stem); `out` defaults to roofline_greenline_<grid>_<levels>_<backend>.png."""
    out = out or f"roofline_greenline_{r.grid}_{r.levels}_{r.backend}.png"
    level = "program-level" if r.program_level else "per kernel"
    title = f"greenline (SolveNonhydro dycore step) on {r.grid}/{r.levels} levels, {r.backend}, {level}"
    fig = plot_step_roofline(r.rows, r.ceiling.bytes_per_s, r.peak_flops, out, title, top)
    md = fig.png.with_suffix(".md")
    bw = r.ceiling.bytes_per_s
    ks = r.kernel_seconds
    lines = [
        f"# {title}",
        "",
        f"![roofline]({fig.png.name})",
        "",
        f"- device: {r.device}",
        f"- ceiling: {r.ceiling.how}: {bw / 1e9:.1f} GB/s (measured, same run); FP64 peak: "
        f"{r.peak_flops / 1e9:.0f} GFLOP/s ({r.peak_how})",
        f"- {r.steps} instrumented dycore step(s) of 5 substeps (first, 3 x middle, last) after one warm-up step; "
        "every row is per dycore step",
        f"- instrumented dycore step: {r.step_seconds * 1e3:.3f} ms (wall clock, device synchronised around every "
        f"program call); compiled program calls in it: {r.program_seconds * 1e3:.3f} ms (the rest: icon4py's Python "
        "and GT4Py's argument handling); "
        + (f"{level} times summed: {ks * 1e3:.3f} ms" if ks is not None else "kernels not timed"),
        f"- time: {r.timing}",
        "- bytes: compulsory traffic from the kernel IR for each call's own arguments (each element read once, "
        "written once, neighbour tables counted); GB/s = bytes / time",
        "",
        *floors_section(r),
        "## Kernels",
        "",
        markdown_table(r.rows, bw, top),
        "",
    ]
    if r.pairs:
        lines += [
            "## Producer -> consumer pairs inside programs (fusion candidates)", "",
            "A kernel reads a field another kernel of the same call wrote last, at the same point, in the same column "
            "(other levels) or through a neighbour table (fusing needs recomputation there). Saved: what the consumer "
            "no longer reads, plus the write of a temporary with a single consumer; each pair alone (pairs overlap).",
            "", pairs_markdown(r.pairs, bw, top), "",
        ]  # fmt: skip
    lines += buffers_section(r)
    if r.program_rows and not r.program_level:
        lines += ["## Programs (model totals, measured call times)", "", markdown_table(r.program_rows, bw, 0), ""]
    if r.untimed:
        lines += ["## Kernels behind the program-level points (model only)", "", markdown_table(r.untimed, bw, 0), ""]
    if r.not_executed:
        lines += ["## Kernels never executed in these steps (host condition false or empty domain)", ""]
        lines += [f"- `{k}` ({p})" for p, k in r.not_executed] + [""]
    if r.unmodelled:
        lines += ["## Programs not compiled by icoforge (no kernel IR: time only)", ""]
        lines += [f"- {x.program}: {x.calls_per_step:g} calls, {(x.seconds_per_step or 0) * 1e3:.3f} ms per step"
                  for x in r.unmodelled] + [""]  # fmt: skip
    md.write_text("\n".join(lines))
    md.with_suffix(".json").write_text(json.dumps(greenline_roofline_json(r), indent=1) + "\n")
    return dataclasses.replace(fig, markdown=md)
