"""Vendor profilers restricted to our kernels: the command lines, and parsers for what they write.

ncu: `--csv --page raw --print-units base` writes one row per profiled launch with a column per
metric; a units row follows the header (empty for the identification columns). Quoted values may
carry thousands separators ("1,234,567") or be "n/a". Anything before the header (the program's
own output, `==PROF==` lines) is skipped. The "details" page layout (one row per metric, columns
"Metric Name", "Metric Unit", "Metric Value") is read too.
nsys: `nsys stats --report cuda_gpu_kern_sum --format csv` (a row per kernel name, times in ns).
rocprofv3: `--kernel-trace` CSV (a row per dispatch with start/end timestamps in ns, VGPR/SGPR).
Each parser returns {kernel: KernelMetrics}, medians over launches.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import shlex
import statistics
import sys
from collections.abc import Iterable, Mapping

TOOLS = ("ncu", "nsys", "rocprof")

# ncu metric -> KernelMetrics field
NCU_METRICS = {
    "dram__bytes.sum": "dram_bytes",
    "gpu__time_duration.sum": "seconds",
    "l1tex__t_sector_hit_rate.pct": "l1_hit_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
}

_UNIT_SCALE = {
    "byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1024, "mibyte": 1024**2, "gibyte": 1024**3,
    "second": 1, "msecond": 1e-3, "usecond": 1e-6, "nsecond": 1e-9, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class KernelMetrics:
    kernel: str
    launches: int
    seconds: float | None = None  # duration per launch (median)
    dram_bytes: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    occupancy_pct: float | None = None  # achieved
    registers: float | None = None  # per thread (VGPRs on AMD)

    @property
    def dram_bytes_per_s(self) -> float | None:
        return self.dram_bytes / self.seconds if self.dram_bytes is not None and self.seconds else None


def kernel_regex(names: Iterable[str]) -> str:
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def target_command(
    program: str, grid: str, levels: int, backend: str, repeat: int, static_values: Mapping[str, str] | None = None
) -> list[str]:
    """The process the profiler watches: `icoforge run` (compile, one call, warm-up, timed calls),
    with the static scalars replaced as `static_values` say (a granule variant's)."""
    values = [a for n, v in (static_values or {}).items() for a in ("--static-value", f"{n}={v}")]
    return [sys.executable, "-m", "icoforge", "run", program, "--grid", grid, "--levels", str(levels),
            "--backend", backend, "--repeat", str(repeat), *values]  # fmt: skip


def profile_commands(tool: str, kernels: Iterable[str], target: list[str], out: str) -> list[list[str]]:
    """Command lines (one or two: capture, then export) for `tool`, writing under prefix `out`."""
    names = list(kernels)
    regex = kernel_regex(names)
    if tool == "ncu":
        return [["ncu", "--kernel-name", f"regex:{regex}", "--clock-control", "none",
                 "--metrics", ",".join(NCU_METRICS), "--csv", "--page", "raw", "--print-units", "base",
                 "--log-file", f"{out}.csv", *target]]  # fmt: skip
    if tool == "nsys":
        return [
            ["nsys", "profile", "--trace", "cuda,nvtx", "--force-overwrite", "true", "--output", out, *target],
            ["nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export", "true",
             "--output", out, f"{out}.nsys-rep"],
        ]  # fmt: skip
    if tool == "rocprof":
        return [["rocprofv3", "--kernel-trace", "--kernel-include-regex", regex, "--output-format", "csv",
                 "--output-directory", out, "--output-file", "icoforge", "--", *target]]  # fmt: skip
    raise ValueError(f"unknown profiler {tool!r}; choose from {', '.join(TOOLS)}")


def shell_line(cmd: list[str]) -> str:
    return shlex.join(cmd)


# --- parsing --------------------------------------------------------------------------------------


def _number(text: str, unit: str = "") -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v * _UNIT_SCALE.get(unit.strip().lower(), 1)


def _rows_from(text: str, first_column: str) -> list[list[str]]:
    """CSV rows from the header line whose first cell is `first_column` on (noise before skipped)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(f'"{first_column}"') or line.lstrip().startswith(f"{first_column},"):
            return list(csv.reader(io.StringIO("\n".join(lines[i:]))))
    return []


def _summarise(samples: dict[str, dict[str, list[float]]]) -> dict[str, KernelMetrics]:
    out = {}
    for kernel, metrics in samples.items():
        launches = max((len(v) for v in metrics.values()), default=0)
        fields = {f: statistics.median(v) for f, v in metrics.items() if v}
        out[kernel] = KernelMetrics(kernel, launches, **fields)
    return out


def _short_kernel(name: str) -> str:
    """`foo_k3(double const*, ...)` or `void foo_k3<...>(...)` -> `foo_k3`."""
    name = name.strip()
    name = name.split("(", 1)[0].split("<", 1)[0]
    return name.split()[-1] if name.split() else name


def parse_ncu_csv(text: str) -> dict[str, KernelMetrics]:
    rows = _rows_from(text, "ID")
    if not rows:
        return {}
    header = rows[0]
    col = {h: i for i, h in enumerate(header)}
    kcol = col.get("Kernel Name")
    if kcol is None:
        return {}
    samples: dict[str, dict[str, list[float]]] = {}
    if "Metric Name" in col:  # details layout: one row per (launch, metric)
        for r in rows[1:]:
            if len(r) < len(header):
                continue
            field = NCU_METRICS.get(r[col["Metric Name"]])
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            v = _number(r[col["Metric Value"]], unit)
            if field and v is not None:
                samples.setdefault(_short_kernel(r[kcol]), {}).setdefault(field, []).append(v)
        return _summarise(samples)
    units = [""] * len(header)
    body = rows[1:]
    if body and not body[0][kcol].strip():  # the units row
        units, body = body[0], body[1:]
    for r in body:
        if len(r) < len(header):
            continue
        per = samples.setdefault(_short_kernel(r[kcol]), {})
        for metric, field in NCU_METRICS.items():
            if metric in col:
                v = _number(r[col[metric]], units[col[metric]])
                if v is not None:
                    per.setdefault(field, []).append(v)
    return _summarise(samples)


def parse_nsys_kernsum(text: str) -> dict[str, KernelMetrics]:
    rows = _rows_from(text, "Time (%)")
    if not rows:
        return {}
    col = {h: i for i, h in enumerate(rows[0])}
    out = {}
    for r in rows[1:]:
        if len(r) < len(col):
            continue
        name = _short_kernel(r[col["Name"]])
        med = _number(r[col.get("Med (ns)", col.get("Avg (ns)"))])
        out[name] = KernelMetrics(name, int(_number(r[col["Instances"]]) or 0), seconds=None if med is None else med * 1e-9)
    return out


def parse_rocprof_kernel_trace(text: str) -> dict[str, KernelMetrics]:
    rows = _rows_from(text, "Kind")
    if not rows:
        return {}
    col = {h: i for i, h in enumerate(rows[0])}
    samples: dict[str, dict[str, list[float]]] = {}
    for r in rows[1:]:
        if len(r) < len(col):
            continue
        per = samples.setdefault(_short_kernel(r[col["Kernel_Name"]]), {})
        start, end = _number(r[col["Start_Timestamp"]]), _number(r[col["End_Timestamp"]])
        if start is not None and end is not None:
            per.setdefault("seconds", []).append((end - start) * 1e-9)
        if "VGPR_Count" in col and (v := _number(r[col["VGPR_Count"]])) is not None:
            per.setdefault("registers", []).append(v)
    return _summarise(samples)


def only(metrics: dict[str, KernelMetrics], kernels: Iterable[str]) -> dict[str, KernelMetrics]:
    """Keep our kernels (nsys cannot filter at capture time)."""
    keep = set(kernels)
    return {k: v for k, v in metrics.items() if k in keep}
