"""The greenline report for people: rich tables (terminal) or Markdown (files for benchmarks/).

Everything is rendered from the report's JSON form -- `GreenlineReport.to_json()` of a live run,
or `merge.merge_reports()` of several `greenline --json` files -- so a merged report prints
exactly as one run with all its backends would. Each table is built once as a `TableSpec` (cells
with rich markup: [bold], [dim], colours) and then drawn by `to_rich` or `to_markdown`.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from icoforge.console import Col, fit_table
from icoforge.granule.greenline import GreenlineReport
from icoforge.granule.merge import python_optimized_modes, run_environments
from icoforge.granule.runner import SUBSTEP_MIX, VARIANTS
from icoforge.granule.state import PROGNOSTIC_FIELDS
from icoforge.owners import OWNER_LABELS, OWNER_ORDER
from icoforge.stalls import STALL_NOTE, gc_note, stalls

SETUP_LABELS = {
    "device_grid": "grid on the device",
    "device_fields": "static fields on the device",
    "construct": "construct SolveNonhydro (+ most compiling)",
    "compile": "rest of the compiling",
    "first_calls": "first call of each variant",
}

Data = dict[str, Any]  # a report in its JSON form


@dataclasses.dataclass
class TableSpec:
    title: str
    columns: list[tuple[str, str]]  # (header, justify); headers may hold a line break
    rows: list[list[str]]  # cells with rich markup
    caption: str = ""
    no_wrap: tuple[int, ...] = ()  # column indices
    # header -> priority of columns a narrow terminal may drop (higher first); unnamed ones stay
    droppable: dict[str, int] = dataclasses.field(default_factory=dict)


def as_data(rep: GreenlineReport | Data) -> Data:
    return rep if isinstance(rep, dict) else rep.to_json()


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.3f}"


def _substep_mix(data: Data) -> list[str]:
    return list(data.get("dycore_step") or SUBSTEP_MIX)


def _step(data: Data) -> str:
    """What one step of the report's granule is called: "dycore step" (older reports), "diffusion step"."""
    return f"{data.get('granule') or 'dycore'} step"


def _variants(data: Data) -> list[str]:
    return list(data.get("variants") or VARIANTS)


def _median(b: Data, variant: str) -> float:
    return b["variants"][variant]["median_ms"]


def _dycore_step_ms(data: Data, b: Data) -> float:
    if b.get("dycore_step_ms") is not None:
        return b["dycore_step_ms"]
    return sum(_median(b, v) for v in _substep_mix(data))


# --- tables ---------------------------------------------------------------------------------------


def construct_owner_rows(bs: list[Data]) -> list[list[str]]:
    """The construction's wall time by whose Python ran (sampled; reports before 2026-12-06 have none)."""
    owners = [o for o in OWNER_ORDER if any(o in (b.get("construct_owners") or {}) for b in bs)]
    return [[f"  in {OWNER_LABELS[o]}", *(_s(b["construct_owners"][o]) if o in (b.get("construct_owners") or {}) else "-"
                                     for b in bs)] for o in owners]  # fmt: skip


def setup_table(data: Data) -> TableSpec:
    bs = data["backends"]
    rows = []
    for p in (p for p in SETUP_LABELS if any(p in b["setup_s"] for b in bs)):
        label = SETUP_LABELS[p].replace("SolveNonhydro", data.get("component") or "SolveNonhydro")  # icon4py's class
        rows.append([label, *(_s(b["setup_s"][p]) if p in b["setup_s"] else "-" for b in bs)])
        if p == "construct":
            rows += construct_owner_rows(bs)
    rows.append(["[bold]total[/bold]", *(f"[bold]{_s(sum(b['setup_s'].values()))}[/bold]" for b in bs)])
    rows.append(["compile jobs (program variants)", *(str(b["compile_jobs"]) for b in bs)])
    rows.append(
        [
            "icoforge translation cache hits",
            *(
                f"{b['cache']['translation_cache_hits']}/{b['cache']['programs']}" if b.get("cache") else "-"
                for b in bs
            ),
        ]
    )
    if any(b.get("gpu_lock_wait_s") is not None for b in bs):
        rows.append(
            [
                "waited for the GPU lock (not setup)",
                *("-" if b.get("gpu_lock_wait_s") is None else _s(b["gpu_lock_wait_s"]) for b in bs),
            ]
        )
    return TableSpec(
        title="setup (seconds)",
        columns=[("phase", "left")] + [(b["backend"], "right") for b in bs],
        rows=rows,
        caption="; ".join([_common_caption(data), *construct_sites(bs)]),
    )


def construct_sites(bs: list[Data], top: int = 3) -> list[str]:
    """Where `construct` went by function, per backend that has it: icoforge's Python (innermost
    icoforge frame), then GT4Py's (inclusive; reports before 2026-12-08 have only ours)."""
    kinds = (("construct_our_sites", "icoforge's Python in construct ({})", top),
             ("construct_gt4py_sites", "GT4Py's Python in construct ({}), inclusive", 2 * top))  # fmt: skip
    return [
        label.format(b["backend"]) + ": " + ", ".join(f"{site} {_s(sec)} s" for site, sec in list(b[key].items())[:n])
        for key, label, n in kinds
        for b in bs
        if b.get(key)
    ]


def _common_parts(common: dict[str, float], cached: bool, factory_backend: str) -> str:
    parts = [f"grid load {_s(common.get('grid_load', 0.0))} s"]
    if cached:
        parts.append(f"static fields {_s(common.get('static_fields', 0.0))} s (cached)")
    else:
        factories = ", ".join(
            f"{k.removeprefix('factory_')} {_s(v)}" for k, v in common.items() if k.startswith("factory_")
        )
        parts.append(f"static fields {_s(common.get('static_fields', 0.0))} s with {factory_backend} ({factories})")
    return "; ".join(parts)


def _common_caption(data: Data) -> str:
    sources = data.get("merged_from")
    if not sources:
        return "shared by all backends: " + _common_parts(
            data["common_setup_s"], data["static_fields_cached"], data["options"]["factory_backend"]
        )
    return "separate runs, each with its own grid and static fields: " + " | ".join(
        f"{', '.join(src['backends'])}: "
        + _common_parts(src["common_setup_s"], src["static_fields_cached"], src["options"]["factory_backend"])
        for src in sources
    )


def steps_table(data: Data) -> TableSpec:
    bs = data["backends"]
    opts = data["options"]
    mix = _substep_mix(data)
    columns = [("variant", "left")]
    for b in bs:
        columns += [(f"{b['backend']}\nmedian", "right"), ("min", "right")]
    if len(bs) > 1:
        columns.append((f"speed-up vs\n{bs[0]['backend']}", "right"))
    rows = []
    for v in _variants(data):
        row = [v]
        for b in bs:
            row += [f"{_median(b, v):.3f}", f"{b['variants'][v]['min_ms']:.3f}"]
        if len(bs) > 1:
            row.append(" ".join(f"{_median(bs[0], v) / _median(b, v):.2f}x" for b in bs[1:]))
        rows.append(row)
    row = [f"[bold]{_step(data)}[/bold]"]
    for b in bs:
        row += [f"[bold]{_dycore_step_ms(data, b):.3f}[/bold]", ""]
    if len(bs) > 1:
        base = _dycore_step_ms(data, bs[0])
        row.append(" ".join(f"{base / _dycore_step_ms(data, b):.2f}x" for b in bs[1:]))
    rows.append(row)
    chained = [b.get("chained_step_ms") for b in bs]
    if any(c is not None for c in chained):
        row = [f"{_step(data)}, one sync"]
        for c in chained:
            row += ["-" if c is None else f"{c:.3f}", ""]
        if len(bs) > 1:
            row.append(" ".join("-" if None in (chained[0], c) else f"{chained[0] / c:.2f}x" for c in chained[1:]))
        rows.append(row)
    caption = (
        f"{_step(data)} = {len(mix)} {'substeps' if len(mix) > 1 else 'call'} ({' + '.join(mix)}), from the medians"
        " (a device sync around each); one sync: the median of whole steps, the calls back to back as a model runs them"
    )
    if any(b.get("graph_replay") for b in bs):
        rows.append(_replay_row(bs))
        caption += (
            "; replayed: each substep captured as one CUDA graph and replayed (medians), shown only where a replay"
            " equals a normal call bit for bit"
        )
    return TableSpec(
        title=f"step time (ms): {opts['steps']} timed steps per variant after {opts['warmup']} warm-up",
        columns=columns,
        rows=rows,
        caption=caption,
    )


def _replay_row(bs: list[Data]) -> list[str]:
    """'dycore step, replayed': each backend's step from substeps replayed as CUDA graphs, or why not."""

    def cell(b: Data) -> str:
        replay = b.get("graph_replay") or {}
        if not replay:
            return "-"
        if b.get("replayed_step_ms") is not None:
            return f"{b['replayed_step_ms']:.3f}"
        failed = {v: r for v, r in replay.items() if "replay_ms" not in r}
        why = ["capture failed" if "capture_error" in r else "not bit-identical" for r in failed.values()]
        return f"{', '.join(sorted(set(why)))} ({', '.join(failed)})"

    row = ["dycore step, replayed"]
    for b in bs:
        row += [cell(b), ""]
    if len(bs) > 1:
        steps = [b.get("replayed_step_ms") for b in bs]
        row.append(" ".join("-" if None in (steps[0], c) else f"{steps[0] / c:.2f}x" for c in steps[1:]))
    return row


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def program_table(data: Data, index: int) -> TableSpec:
    b = data["backends"][index]
    step_ms = b["profiled_dycore_step_ms"]
    # host and device time per call (reports since 2026-12-01; older ones lack them)
    split = any(p.get("host_ms") is not None for p in b["programs"])
    # the byte model's floors per program (--floors-steps): compulsory bytes per call / device time
    floors = (b.get("floors") or {}).get("programs") if split else None
    rows = []
    covered = 0.0
    for p in b["programs"]:
        covered += p["share"]
        per_call = [f"{p['median_ms']:.3f}"] + ([_ms(p.get("host_ms")), _ms(p.get("device_ms"))] if split else [])
        rows.append(
            [
                p["name"],
                f"{p['calls_per_step']:g}",
                *per_call,
                *([_model_bandwidth(floors.get(p["name"]), p.get("device_ms"))] if floors is not None else []),
                f"{p['ms_per_step']:.3f}",
                f"{100 * p['share']:.1f} %",
                "-" if p.get("kernels") is None else str(p["kernels"]),
                "-" if p.get("compile_s") is None else _s(p["compile_s"]),
            ]
        )
    rows.append(
        [
            "[dim]outside GT4Py programs (Python)[/dim]",
            "",
            *([""] * ((3 if split else 1) + (floors is not None))),
            f"{step_ms * (1 - covered):.3f}",
            f"{100 * (1 - covered):.1f} %",
            "",
            "",
        ]
    )
    per_call_cols = ("median ms/call", "host ms/call", "device ms/call") if split else ("median ms/call",)
    per_call_cols += ("model GB/s",) if floors is not None else ()
    cols = ("program", "calls/step", *per_call_cols, "ms/step", "share", "kernels", "compile s")
    return TableSpec(
        title=f"{b['backend']}: per program, over {data['options']['profile_steps']} {_step(data)}(s) of "
        f"{len(_substep_mix(data))} {'substeps' if len(_substep_mix(data)) > 1 else 'call'}",
        columns=[(c, "left" if c == "program" else "right") for c in cols],
        rows=rows,
        caption=(
            f"instrumented {_step(data)} {step_ms:.3f} ms (device sync around every call); "
            "median = wall time of a call between device syncs; host = until the call returned "
            "(Python, argument checks, launches); device = between events around the call; "
            "share = program's time / that step; kernels = kernels in the compiled program (icoforge); "
            "compile s = its variants' translation + build in this run (icoforge; ~0 when cached)"
            + ("; model GB/s = the kernels' compulsory bytes per call (byte model, the floors' steps) / device "
               f"time (copy bandwidth {b['floors']['floors_bandwidth_GBps']:.0f} GB/s)" if floors is not None else "")
        ),
        no_wrap=(0,),
        droppable={"compile s": 7, "kernels": 6, "median ms/call": 5, "calls/step": 4, "host ms/call": 3,
                   "device ms/call": 2, "model GB/s": 1},  # fmt: skip
    )


def _model_bandwidth(floor: Data | None, device_ms: float | None) -> str:
    """GB/s a program's kernels reach on their compulsory bytes ('-': no floor or no device time)."""
    if not floor or not device_ms or not floor["calls"]:
        return "-"
    return f"{floor['kernel_bytes'] / floor['calls'] / (device_ms * 1e-3) / 1e9:.0f}"


def idle_table(data: Data) -> TableSpec:
    """Per substep variant: wall time, device busy time and the GPU's idle fraction -- what replaying
    a substep as a CUDA graph would have to remove."""
    bs = [b for b in data["backends"] if any("busy_ms" in vv for vv in b["variants"].values())]
    columns = [("variant", "left")]
    for b in bs:
        columns += [(f"{b['backend']}\nwall ms", "right"), ("busy ms\ncalls", "right"),
                    ("busy ms\nkernels", "right"), ("GPU idle", "right")]  # fmt: skip
    rows = []
    for v in _variants(data):
        row = [v]
        for b in bs:
            vv = b["variants"][v]
            idle = vv.get("idle_fraction")
            if idle is None:
                shown = "-"
            else:  # from the calls alone it is a lower bound (see the caption)
                shown = f"{100 * idle:.0f} %" if "kernel_busy_ms" in vv else f">= {100 * idle:.0f} %"
            row += [f"{vv['median_ms']:.3f}", _ms(vv.get("busy_ms")), _ms(vv.get("kernel_busy_ms")), shown]
        rows.append(row)
    return TableSpec(
        title="device busy time per substep (GPU backends)",
        columns=columns,
        rows=rows,
        caption="wall = median substep between device syncs (the step table); busy = median sums of event "
        "intervals in a substep, timed apart, without syncs: around every program call (an upper bound: "
        "host work inside a call before its first launch counts as busy) and around every kernel launch "
        "(icoforge only: the kernels alone); GPU idle = 1 - busy / wall, from the kernels where measured "
        "(else a lower bound): host time the device waits for",
    )


def python_mode(data: Data) -> str:
    """How Python ran: GT4Py checks every call's arguments unless it runs optimized."""
    modes = python_optimized_modes(data)
    if not modes:
        return "not recorded (reports before 2026-12-01 ran without -O: GT4Py checked every call's arguments)"
    if modes == {True}:
        return "optimized (-O / PYTHONOPTIMIZE=1), as icon4py's benchmarks and production runs"
    if modes == {False}:
        return "NOT optimized: GT4Py checks every program call's arguments (host time per call is inflated)"
    return "mixed: some runs optimized, some not -- do not compare their step times"


def verification_table(data: Data) -> TableSpec:
    cs = data["verification"]
    # the granule's compared fields in the order compared (the dycore's and diffusion's: the prognostic ones)
    names = list(dict.fromkeys(d["field"] for s in cs[0]["substeps"] for d in s["fields"])) or list(PROGNOSTIC_FIELDS)
    rows = [[f, *(_e(c["worst_rel"].get(f)) for c in cs)] for f in names]
    rows.append(
        [
            "[bold]result[/bold]",
            *(
                f"[green]PASS[/green] (rtol {c['rtol']:g})" if c["passed"] else f"[red]FAIL[/red] (rtol {c['rtol']:g})"
                for c in cs
            ),
        ]
    )
    return TableSpec(
        title="verification: largest max|a-b| / max|reference| per field over substeps "
        + ", ".join(s["variant"] for s in cs[0]["substeps"]),
        columns=[("field", "left")] + [(f"{c['backend']}\nvs {c['reference']}", "right") for c in cs],
        rows=rows,
    )


def _e(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def sections(data: Data) -> Iterator[TableSpec | str]:
    """The report in print order: tables, and notes (str, rich markup)."""
    yield f"Python: {python_mode(data)}"
    yield setup_table(data)
    if data.get("verification"):
        yield verification_table(data)
    yield steps_table(data)
    for b in data["backends"]:
        if note := peer_note(b):
            yield note
    if note := machine_state_note(data):
        yield note
    for b in data["backends"]:
        if note := stalls({v: r["samples_ms"] for v, r in b["variants"].items() if r.get("samples_ms")}):
            yield f"[yellow]{b['backend']}: {STALL_NOTE}[/yellow]: {note}; {gc_note(b.get('gc_pauses'))}"
    for b in data["backends"]:
        if floors := b.get("floors"):
            yield floors_note(b["backend"], floors, _dycore_step_ms(data, b))
    if any("busy_ms" in vv for b in data["backends"] for vv in b["variants"].values()):
        yield idle_table(data)
    for i, b in enumerate(data["backends"]):
        if b.get("programs"):
            yield program_table(data, i)
        if b.get("fallbacks"):
            yield f"[yellow]{b['backend']}: compiled by the fallback backend:[/yellow] " + "; ".join(b["fallbacks"])
        if b.get("substep_fusion"):
            yield substep_fusion_table(b)


def peer_note(b: Data) -> str | None:
    """How a GT4Py peer was configured: icon4py's descriptor and the options icon4py gave each
    program beyond the descriptor's own (suite/peers.py), or GT4Py's plain object; None for
    icoforge and for reports that did not record it."""
    config = b.get("peer_config")
    if not config or config.get("source", "").startswith("icoforge"):
        return None
    note = f"[bold]{b['backend']}[/bold]: {config['source']}"
    if config.get("unit_horizontal_stride"):
        note += "; every program: unit horizontal stride"
    if programs := config.get("programs"):
        note += "; " + "; ".join(f"{p}: {o}" for p, o in programs.items())
    return note


# Runs of one backend side by side (labelled A/B runs, "icoforge-cuda (walk)") differ in their
# schedules, not in the machine. Programs with one kernel in every run are mostly the same code in
# each, so their device time per call in the profile should agree; a run above the others on most of
# them was profiled in a slower machine state (small programs' device time holds the host's latency
# too), and its program rows, perhaps its step, mean little beside the others'. H200 session 26: the
# default's run 1.47x its two A/Bs (median over ten programs), its host time per call twice theirs;
# session 22: the per-call temporaries' run 1.50x (expected: it allocates in every call).
MACHINE_STATE_SPREAD = 1.10  # run-to-run spread of one machine state is about +-5 % per program


def machine_state_note(data: Data) -> str | None:
    """A warning naming each run whose per-program profile ran in a slower machine state than the
    other runs of its backend (see MACHINE_STATE_SPREAD), or None."""
    groups: dict[str, list[Data]] = {}
    for b in data["backends"]:
        base = b["backend"].removesuffix(f" ({b['label']})") if b.get("label") else b["backend"]
        groups.setdefault(base, []).append(b)
    slow, counts = [], set()
    for runs in groups.values():
        single = [{p["name"]: p["device_ms"] for p in r.get("programs") or [] if p.get("kernels") == 1 and p.get("device_ms")}
                  for r in runs]  # fmt: skip
        common = set.intersection(*(set(d) for d in single)) if len(runs) > 1 else set()
        if len(common) < 3:
            continue
        for i, (run, mine) in enumerate(zip(runs, single)):
            others = [d for j, d in enumerate(single) if j != i]
            ratio = statistics.median(mine[n] / statistics.median(d[n] for d in others) for n in sorted(common))
            if ratio > MACHINE_STATE_SPREAD:
                slow.append(f"{run['backend']} {ratio:.2f}x")
                counts.add(len(common))
    if not slow:
        return None
    return (f"[yellow]slower machine state?[/yellow] device time per call of the {'/'.join(map(str, sorted(counts)))} "
            "single-kernel programs in the profile, against the other runs of the same backend "
            f"(median ratio): {', '.join(slow)}. Unless that run's schedule or runtime settings change those "
            "programs (per-call temporaries, host graphs), it was profiled on a slower machine: its program rows, "
            "and perhaps its step, mean little beside the others'")  # fmt: skip


def floors_note(backend: str, floors: Data, step_ms: float) -> str:
    """One line: the compulsory-byte floors per dycore step (--floors-steps) beside the measured step."""
    ms, gb = floors["floors_ms"], floors["floors_bytes"]
    parts = ", ".join(f"{k} {ms[k]:.2f} ms ({gb[k] / 1e9:.1f} GB)" for k in ("kernel", "program", "substep"))
    return (f"{backend}: byte floors per dycore step at {floors['floors_bandwidth_GBps']:.0f} GB/s: {parts}; "
            f"measured step {step_ms:.2f} ms")  # fmt: skip


def substep_fusion_table(b: dict[str, Any]) -> TableSpec:
    """Each composed substep sequence: calls, kernels before and after fusion, bytes (byte model)."""
    sf = b["substep_fusion"]
    rows = []
    for i, s in enumerate(sf["sequences"]):
        before, after = s.get("bytes_one_by_one"), s.get("bytes_composed")
        change = f"{100 * (after / before - 1):+.1f} %" if before and after is not None else "-"
        rows.append([str(i + 1), str(s["calls"]), f"{s['kernels_composed']} -> {s['kernels_fused']}",
                     "-" if before is None else f"{before / 1e6:,.2f}", "-" if after is None else f"{after / 1e6:,.2f}", change,
                     "yes" if s["checked"] else "no"])  # fmt: skip
    runs = sf["runs"]
    caption = (f"{runs['composed']} blocks ran composed, {runs['one_by_one']} call by call; bytes per run by the byte model "
               f"(each kernel its own reads and writes); checked: the first composed run equal to the calls one by one, bit by bit")  # fmt: skip
    if sf["refused"]:
        caption += "; refused: " + "; ".join(sorted(set(sf["refused"])))
    return TableSpec(
        title=f"{b['backend']}: substep fusion (each substep's calls as one program, fused across programs)",
        columns=[("sequence", "right"), ("calls", "right"), ("kernels", "right"), ("MB one by one", "right"),
                 ("MB composed", "right"), ("change", "right"), ("checked", "center")],  # fmt: skip
        rows=rows,
        caption=caption,
    )


# --- rendering ------------------------------------------------------------------------------------


def to_rich(spec: TableSpec, console: Console) -> Table:
    """The table as it fits `console` (columns in `spec.droppable` go first when it does not)."""
    columns = [
        Col(header, priority=spec.droppable.get(header, 0), justify=justify, no_wrap=i in spec.no_wrap)
        for i, (header, justify) in enumerate(spec.columns)
    ]
    return fit_table(console, spec.title, columns, spec.rows, caption=spec.caption or None)


def print_report(rep: GreenlineReport | Data, console: Console) -> None:
    for section in sections(as_data(rep)):
        console.print(to_rich(section, console) if isinstance(section, TableSpec) else section)


_BOLD = re.compile(r"\[bold\](.*?)\[/bold\]")


def _md(cell: str) -> str:
    cell = _BOLD.sub(lambda m: f"**{m.group(1)}**" if m.group(1) else "", cell)
    return Text.from_markup(cell).plain.replace("|", "\\|").replace("\n", " ")


def to_markdown(spec: TableSpec) -> str:
    align = {"left": ":---", "right": "---:", "center": ":---:"}
    lines = [f"### {_md(spec.title)}", ""]
    lines.append("| " + " | ".join(_md(h) for h, _ in spec.columns) + " |")
    lines.append("| " + " | ".join(align.get(j, "---") for _, j in spec.columns) + " |")
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in spec.rows]
    if spec.caption:
        lines += ["", f"*{_md(spec.caption)}*"]
    return "\n".join(lines) + "\n"


def _one_or_each(values: list[tuple[str, Any]]) -> str:
    """One value when all runs agree, else 'backend: value' for each run."""
    shown = [(label, "-" if v is None else str(v)) for label, v in values]
    if len({v for _, v in shown}) <= 1:
        return shown[0][1] if shown else "-"
    return "; ".join(f"{label}: {v}" for label, v in shown)


def run_table(data: Data) -> TableSpec:
    """Inputs and environment (date, machine, versions) of the run(s)."""
    envs = run_environments(data)
    opts, grid = data["options"], data["grid"]
    size = ", ".join(f"{grid[k]:,} {k}" for k in ("cells", "edges", "vertices") if k in grid)
    rows = [
        ["backends", ", ".join(b["backend"] for b in data["backends"])],
        ["grid", f"{grid.get('name', opts['grid'])} ({size}), {opts['levels']} levels"],
        [
            "steps",
            f"{opts['steps']} timed + {opts['warmup']} warm-up per variant; "
            f"{opts['profile_steps']} profiled {_step(data)}(s)",
        ],
        ["seed, factory backend", f"{opts['seed']}, {opts['factory_backend']}"],
        ["Python mode", python_mode(data)],
        ["static fields key", str(data.get("static_fields_key") or "-")],
    ]
    keys = (("date", "date"), ("host", "host"), ("gpu", "GPU"), ("cpus", "CPUs"), ("python", "Python"),
            ("python_optimized", "Python optimized (-O)"), ("icoforge_schedule", "icoforge schedule ($ICOFORGE_SCHEDULE)"),
            ("icoforge_settings", "icoforge settings off their defaults"))  # fmt: skip
    for key, label in keys:
        if any(key in env for _, env in envs):
            rows.append([label, _one_or_each([(lbl, env.get(key)) for lbl, env in envs])])
    dists = dict.fromkeys(d for _, env in envs for d in env.get("versions", {}))
    for dist in dists:
        rows.append([dist, _one_or_each([(lbl, env.get("versions", {}).get(dist)) for lbl, env in envs])])
    if data.get("merged_from"):
        rows.append(["merged from", ", ".join(src["file"] for src in data["merged_from"])])
    return TableSpec(title="run", columns=[("", "left"), ("", "left")], rows=rows)


def markdown_report(rep: GreenlineReport | Data) -> str:
    data = as_data(rep)
    opts = data["options"]
    backends = ", ".join(b["backend"] for b in data["backends"])
    granule = "" if (data.get("granule") or "dycore") == "dycore" else f" ({data['granule']})"
    head = f"# greenline{granule}: {data['grid'].get('name', opts['grid'])}, {opts['levels']} levels: {backends}\n"
    parts = [head, to_markdown(run_table(data))]
    for section in sections(data):
        parts.append(to_markdown(section) if isinstance(section, TableSpec) else _md(section) + "\n")
    return "\n".join(parts)
