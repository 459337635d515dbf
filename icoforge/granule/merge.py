"""Several `greenline --json` reports of the same inputs as one report (`icoforge greenline-merge`).

The use: one greenline process per backend, run in parallel with `--gpu-lock` (GT4Py's backends
compile for minutes each; the lock keeps their measurements apart), then one side-by-side report
as if the backends had been given together (`--backend A --compare B C`): the first file's first
backend is the reference column. The result has the JSON form of a single report (so `report.py`
renders both alike) plus `merged_from`: file, backends, shared-input setup and environment of each
run (each run loaded its own grid and static fields).

Reports are refused unless they share their inputs (grid, levels, seed, steps, warm-up, profile
steps, static-field key) and name every backend once.

A/B of one backend (two schedules, two commits, a first and a second run on one machine): give
each report a label, `fused=b.json`; its backends are then shown as `icoforge-cuda (fused)`, so the
same backend may appear once per label.
"""

from __future__ import annotations

import copy
import json
import pathlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from icoforge.errors import IcoforgeError

Data = dict[str, Any]

# what the reports must share: (name in the error message, value of a report)
SHARED_INPUTS: tuple[tuple[str, Callable[[Data], Any]], ...] = (
    ("grid", lambda d: d["grid"].get("name", d["options"].get("grid"))),
    ("levels", lambda d: d["options"].get("levels")),
    ("seed", lambda d: d["options"].get("seed")),
    ("steps", lambda d: d["options"].get("steps")),
    ("warm-up steps", lambda d: d["options"].get("warmup")),
    ("profile steps", lambda d: d["options"].get("profile_steps")),
    ("timing rounds", lambda d: d["options"].get("timing_rounds", 1)),
    ("static-field key", lambda d: d.get("static_fields_key")),
)


def run_environments(data: Data) -> list[tuple[str, Data]]:
    """(backends, environment) of each run a report holds: one, or each merged run's."""
    if data.get("merged_from"):
        return [(", ".join(src["backends"]), src.get("environment") or {}) for src in data["merged_from"]]
    return [(", ".join(b["backend"] for b in data["backends"]), data.get("environment") or {})]


def python_optimized_modes(data: Data) -> set[bool]:
    """Whether each run had Python optimized (-O); empty for reports that did not record it."""
    return {bool(env["python_optimized"]) for _, env in run_environments(data) if "python_optimized" in env}


def load_report(path: str | pathlib.Path) -> Data:
    """A report written by `greenline --json`; IcoforgeError if it is not one."""
    try:
        data = json.loads(pathlib.Path(path).read_text())
    except OSError as e:
        raise IcoforgeError(f"{path}: {e.strerror or e}") from e
    except ValueError as e:
        raise IcoforgeError(f"{path}: not JSON ({e})") from e
    if not isinstance(data, dict) or not all(k in data for k in ("options", "grid", "backends")):
        raise IcoforgeError(f"{path}: not a report of `icoforge greenline --json`")
    if not data["backends"]:
        raise IcoforgeError(f"{path}: the report has no backend")
    return data


# LABEL=REPORT.json: a label is a short word (letters, digits, _ . + -), never a path
_LABELLED = re.compile(r"^(?P<label>[A-Za-z0-9_.+-]+)=(?P<path>.+)$")


def split_label(arg: str) -> tuple[str | None, str]:
    """`fused=b.json` -> ("fused", "b.json"); a plain path (also one that contains "=" but exists as
    a file) -> (None, path)."""
    m = _LABELLED.match(arg)
    if m is None or pathlib.Path(arg).exists():
        return None, arg
    return m["label"], m["path"]


def label_report(data: Data, label: str) -> Data:
    """A copy of `data` whose backends (and verification rows) are named `backend (label)`."""
    if not _LABELLED.match(f"{label}=x"):
        raise IcoforgeError(f"label {label!r}: use letters, digits and _ . + - only")
    out = copy.deepcopy(data)
    renamed = {}
    for b in out["backends"]:
        renamed[b["backend"]] = b["backend"] = f"{b['backend']} ({label})"
        b["label"] = label
    for c in out.get("verification", []):
        for key in ("backend", "reference"):
            c[key] = renamed.get(c.get(key), c.get(key))
    out["options"]["backends"] = [renamed.get(n, n) for n in out["options"].get("backends", [])]
    return out


def load_labelled(arg: str) -> tuple[str, Data]:
    """(file name, report) of a command-line argument `[LABEL=]REPORT.json`."""
    label, path = split_label(arg)
    data = load_report(path)
    return path, data if label is None else label_report(data, label)


def merge_reports(reports: Sequence[tuple[str, Data]]) -> Data:
    """`reports`: (file name, report) pairs, the reference first. Returns one report (JSON form)."""
    if not reports:
        raise IcoforgeError("no report to merge")
    first_file, first = reports[0]
    seen: dict[str, str] = {}
    for file, data in reports:
        for what, value in SHARED_INPUTS:
            if value(data) != value(first):
                raise IcoforgeError(
                    f"{file} and {first_file} differ in {what} ({value(data)!r} vs {value(first)!r}): "
                    "merged reports must share their inputs"
                )
        for b in data["backends"]:
            name = b["backend"]
            if name in seen:
                where = f"in {file} twice" if seen[name] == file else f"in {seen[name]} and {file}"
                raise IcoforgeError(
                    f"backend {name} appears {where}: merge each backend once, or label the runs (LABEL=REPORT.json)"
                )
            seen[name] = file

    merged = copy.deepcopy(first)
    merged["backends"] = [copy.deepcopy(b) for _, d in reports for b in d["backends"]]
    merged["verification"] = [copy.deepcopy(c) for _, d in reports for c in d.get("verification", [])]
    merged["options"]["backends"] = list(seen)
    merged["options"]["verify"] = any(d["options"].get("verify") for _, d in reports)
    merged["merged_from"] = [
        copy.deepcopy(src)
        for file, d in reports
        for src in d.get("merged_from")
        or [
            {
                "file": str(file),
                "backends": [b["backend"] for b in d["backends"]],
                "options": d["options"],
                "common_setup_s": d.get("common_setup_s", {}),
                "static_fields_cached": d.get("static_fields_cached", False),
                "environment": d.get("environment", {}),
            }
        ]
    ]
    return merged
