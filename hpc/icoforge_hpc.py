"""What icoforge's ReFrame checks run and measure, and where their references come from.

Shared by the checks (`hpc/icoforge_checks.py`, inside ReFrame) and by `icoforge hpc-references`,
which runs the same commands without ReFrame (the GPU machine has no ReFrame) and writes their
medians as references. Plain Python: imports neither ReFrame nor icoforge.

References live in TOML files: `hpc/references.toml` (this project's systems), then any site
files (`-S references_file=a.toml,b.toml`, or a partition's `extras: {"icoforge_references": ...}`),
later files overriding earlier ones per system:partition, check key and variable. A check key
names what was measured (`run PROGRAM GRID/LEVELS BACKEND`, `greenline GRID/LEVELS BACKEND`), so
a reference never silently applies to another grid, level count or backend.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re
import tomllib
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
REFERENCES = HERE / "references.toml"

# programs with several kernels of each kind: maps with k offsets, neighbour reductions, scans
PROGRAMS = (
    "compute_hydrostatic_correction_term",
    "compute_perturbed_quantities_and_interpolation",
    "vertically_implicit_solver_at_predictor_step",
)

# What each kind of partition runs (the partition's features select it: "cpu", "gpu").
DEFAULTS = {
    "cpu": {
        "program": {"grid": "R2B3", "levels": 10, "backend": "icoforge-cpu", "reference_backend": "icoforge-emulated-cuda"},
        "greenline": {"grid": "R2B3", "levels": 10, "backend": "icoforge-cpu"},
    },
    "gpu": {
        "program": {"grid": "R2B4", "levels": 80, "backend": "icoforge-cuda", "reference_backend": "icoforge-cpu"},
        # the configuration of the H200 sessions (benchmarks/h200-*): recorded fingerprint and times
        "greenline": {"grid": "R2B6", "levels": 80, "backend": "icoforge-cuda"},
    },
}

# Recorded fingerprints of the greenline's verification substeps (golden.py) per grid and levels,
# each from a GT4Py backend on the same inputs (seed 0): the greenline check compares with them.
FINGERPRINTS = {
    ("R2B3", 10): "tests/granule/data/r2b3_l10_gtfn_cpu.json",
    ("R2B6", 80): "benchmarks/h200/2026-11-30-s5/ref-gtfn_gpu-R2B6-80.json",
}
# the granule tests' per-point tolerance (tests/granule_checks.py RTOL): one point off by 1e-10 of
# max|x| fails; CPU vs GPU rounding after the three substeps is ~1e-14 (worst 4e-14 vs dace_gpu, R2B6/80)
FINGERPRINT_RTOL = 5e-11


@dataclasses.dataclass(frozen=True)
class PerfVar:
    name: str
    unit: str
    upper: float  # default tolerance of a new reference: this fraction slower fails


# Per-call medians are steady; compile and setup times swing with the host's load and file
# system, so only a large slowdown of them fails.
PROGRAM_VARS = (PerfVar("median_per_call", "ms", 0.10), PerfVar("compile_time", "s", 0.50))
GREENLINE_VARS = (
    PerfVar("dycore_step", "ms", 0.10),
    PerfVar("first_substep", "ms", 0.10),
    PerfVar("setup_time", "s", 0.50),
)


# --- the commands and what is read from them -----------------------------------------------------


def program_key(program: str, grid: str, levels: int, backend: str) -> str:
    return f"run {program} {grid}/{levels} {backend}"


def greenline_key(grid: str, levels: int, backend: str) -> str:
    return f"greenline {grid}/{levels} {backend}"


def program_argv(program: str, grid: str, levels: int, backend: str, reference_backend: str) -> list[str]:
    return [
        "run", program, "--grid", grid, "--levels", str(levels), "--backend", backend,
        "--compare", reference_backend, "--repeat", "5",
    ]  # fmt: skip


def greenline_argv(grid: str, levels: int, backend: str, fingerprint: str, json_path: str) -> list[str]:
    return [
        "greenline", "--grid", grid, "--levels", str(levels), "--backend", backend, "--steps", "5",
        "--warmup", "1", "--profile-steps", "0", "--only-used-variants", "--reference", fingerprint,
        "--rtol", repr(FINGERPRINT_RTOL), "--json", json_path,
    ]  # fmt: skip


def fingerprint_for(grid: str, levels: int) -> str:
    """The recorded fingerprint for these inputs (absolute path), or '' when there is none."""
    rel = FINGERPRINTS.get((grid, int(levels)))
    return str(REPO / rel) if rel else ""


def program_row_pattern(backend: str) -> str:
    """`icoforge run`'s plain line per backend, `BACKEND: compiled in 19.6 s, median 0.309 ms` (the
    table may drop or wrap columns to fit the terminal; this line never changes shape)."""
    return rf"^\s*{re.escape(backend)}: compiled in ([\d.]+) s, median ([\d.]+) ms"


PROGRAM_VERIFIED = r"PASS max rel"
PROGRAM_FAILED = r"\bFAIL\b|Traceback|error:"


def program_values(stdout: str, backend: str) -> dict[str, float]:
    m = re.search(program_row_pattern(backend), stdout, re.MULTILINE)
    if not m:
        raise ValueError(f"no row of {backend} in the output")
    return {"compile_time": float(m.group(1)), "median_per_call": float(m.group(2))}


def program_verified(stdout: str) -> bool:
    return bool(re.search(PROGRAM_VERIFIED, stdout)) and not re.search(PROGRAM_FAILED, stdout)


def greenline_backend(report: dict[str, Any]) -> dict[str, Any]:
    return report["backends"][0]


def greenline_values(report: dict[str, Any]) -> dict[str, float]:
    b = greenline_backend(report)
    setup = b["setup_s"]
    return {
        "dycore_step": float(b["dycore_step_ms"]),
        "first_substep": float(b["variants"]["first"]["median_ms"]),
        "setup_time": float(setup["construct"] + setup["compile"] + setup["first_calls"]),
    }


def greenline_verified(report: dict[str, Any], backend: str) -> bool:
    """Every comparison passed, and one of them is `backend` against a recorded fingerprint."""
    comparisons = report.get("verification", [])
    recorded = [c for c in comparisons if c["backend"] == backend and c["reference"].endswith("(recorded)")]
    return bool(recorded) and all(c["passed"] for c in comparisons)


@dataclasses.dataclass(frozen=True)
class Command:
    """One check's command as `icoforge hpc-references` runs it (the checks build theirs the same way)."""

    key: str
    argv: list[str]
    perf_vars: tuple[PerfVar, ...]
    json_name: str = ""  # greenline: the report it writes

    def values(self, stdout: str, workdir: pathlib.Path) -> dict[str, float]:
        """The performance values, after the same sanity as the check (raises if it fails)."""
        if self.json_name:
            report = json.loads((workdir / self.json_name).read_text())
            backend = self.argv[self.argv.index("--backend") + 1]
            if not greenline_verified(report, backend):
                raise ValueError(f"{self.key}: the fingerprint comparison did not pass")
            return greenline_values(report)
        if not program_verified(stdout):
            raise ValueError(f"{self.key}: the verification did not pass")
        return program_values(stdout, self.argv[self.argv.index("--backend") + 1])


# A GPU partition with one of these features runs the GPU checks with that backend (AMD: HIP).
GPU_BACKEND_BY_FEATURE = {"hip": "icoforge-hip"}


def gpu_backend(features: set[str] | list[str], default: str) -> str:
    """The backend of the GPU checks on a partition with these features."""
    found = [GPU_BACKEND_BY_FEATURE[f] for f in features if f in GPU_BACKEND_BY_FEATURE]
    return found[0] if found else default


def commands_for(features: set[str] | list[str]) -> list[Command]:
    """The checks' commands on a partition with these features, with their default settings."""
    out = []
    for kind in ("cpu", "gpu"):
        if kind not in features:
            continue
        p, g = dict(DEFAULTS[kind]["program"]), dict(DEFAULTS[kind]["greenline"])
        if kind == "gpu":
            p["backend"] = gpu_backend(features, p["backend"])
            g["backend"] = gpu_backend(features, g["backend"])
        for program in PROGRAMS:
            out.append(Command(
                program_key(program, p["grid"], p["levels"], p["backend"]),
                program_argv(program, p["grid"], p["levels"], p["backend"], p["reference_backend"]),
                PROGRAM_VARS,
            ))  # fmt: skip
        out.append(Command(
            greenline_key(g["grid"], g["levels"], g["backend"]),
            greenline_argv(g["grid"], g["levels"], g["backend"], fingerprint_for(g["grid"], g["levels"]), "greenline.json"),
            GREENLINE_VARS,
            json_name="greenline.json",
        ))  # fmt: skip
    return out


# --- reference files ---------------------------------------------------------------------------------


def split_paths(spec: str) -> list[pathlib.Path]:
    return [pathlib.Path(p).expanduser() for p in re.split(r"[,:]", spec) if p.strip()]


def load_references(paths: list[pathlib.Path] | None = None) -> dict[str, Any]:
    """hpc/references.toml, then `paths` on top: {"system:partition": {key: {var: {...}, "source": ...}}}."""
    merged: dict[str, Any] = {}
    for path in [REFERENCES, *(paths or [])]:
        with open(path, "rb") as f:
            data = tomllib.load(f)
        for partition, checks in data.items():
            target = merged.setdefault(partition, {})
            for key, value in checks.items():
                if isinstance(value, dict):
                    target.setdefault(key, {}).update(value)
                else:  # notes of the partition
                    target[key] = value
    return merged


def reframe_reference(refs: dict[str, Any], partition: str, key: str) -> dict[str, tuple]:
    """ReFrame's reference tuples (value, lower, upper, unit) of one check on one partition."""
    entries = refs.get(partition, {}).get(key, {})
    return {
        var: (e["value"], e.get("lower"), e["upper"], e["unit"])
        for var, e in entries.items()
        if isinstance(e, dict)
    }


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def dump_references(refs: dict[str, Any]) -> str:
    lines = [
        "# References of the ReFrame checks in hpc/icoforge_checks.py, per system:partition and check.",
        "# Written by `icoforge hpc-references` (see README, \"Regression checks for HPC centres\").",
        "# A check fails when a variable is more than `upper` (a fraction) above `value`; `lower`, if",
        "# given, is a fraction below (negative). Sites keep their own file and pass it with",
        "# -S references_file=FILE or the partition's extras {\"icoforge_references\": FILE}.",
    ]
    for partition in sorted(refs):
        checks = refs[partition]
        lines += ["", f"[{_toml_str(partition)}]"]
        for note in sorted(k for k, v in checks.items() if not isinstance(v, dict)):
            lines.append(f"{note} = {_toml_str(str(checks[note]))}")
        for key in sorted(k for k, v in checks.items() if isinstance(v, dict)):
            lines.append(f"[{_toml_str(partition)}.{_toml_str(key)}]")
            entries = checks[key]
            for note in sorted(k for k, v in entries.items() if not isinstance(v, dict)):  # "source"
                lines.append(f"{note} = {_toml_str(str(entries[note]))}")
            for var, e in sorted((k, v) for k, v in entries.items() if isinstance(v, dict)):
                fields = [f"value = {_num(e['value'])}", f"unit = {_toml_str(e['unit'])}", f"upper = {_num(e['upper'])}"]
                if e.get("lower") is not None:
                    fields.append(f"lower = {_num(e['lower'])}")
                if e.get("source"):
                    fields.append(f"source = {_toml_str(e['source'])}")
                lines.append(f"{var} = {{ {', '.join(fields)} }}")
    return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    if not math.isfinite(x):
        raise ValueError(f"not a finite reference: {x}")
    return repr(float(f"{x:.4g}"))


def update_references(path: pathlib.Path, partition: str, measured: dict[str, dict[str, float]], source: str) -> None:
    """Write `measured` ({key: {var: value}}) into the file at `path` (created if missing) for
    `partition`, keeping everything else in it; each variable gets its default tolerance, or the
    one already in the file."""
    current: dict[str, Any] = {}
    if path.exists():
        with open(path, "rb") as f:
            current = tomllib.load(f)
    part = current.setdefault(partition, {})
    units = {v.name: v for v in PROGRAM_VARS + GREENLINE_VARS}
    for key, values in measured.items():
        entry = part.setdefault(key, {})
        entry["source"] = source
        for var, value in values.items():
            old = entry.get(var, {})
            entry[var] = {
                "value": value,
                "unit": units[var].unit,
                "upper": old.get("upper", units[var].upper),
                **({"lower": old["lower"]} if old.get("lower") is not None else {}),
            }
    path.write_text(dump_references(current))
