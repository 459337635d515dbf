"""The granule's compulsory-byte floors and roofline on machines we have no access to.

A floor is bytes / bandwidth (`floors.py`: `floors_ms = floors_bytes / bandwidth`), and the bytes
come from the kernel IR and the call sizes alone (the byte model), not from the machine: the
kernel, program and substep floors of a stored run (its `floors_bytes`) divided by another
machine's bandwidth are that machine's floors for the same kernels. The kernel floor depends on
how the programs are split into kernels (the stored runs are icoforge-cuda's default: two
programs fused); the program and substep floors do not.

The roofline: each kernel's arithmetic intensity (flops / compulsory bytes, `rows` of a stored
`roofline greenline` JSON) against each machine's ridge point (FP64 vector peak / bandwidth); a
kernel below the ridge is bound by memory there.

    python -m icoforge.perf.machines R2B6/80=run.json REGIONAL/80=merged.json [--roofline L=J] [--markdown F]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from collections.abc import Mapping, Sequence


@dataclasses.dataclass(frozen=True)
class Machine:
    name: str
    arch: str
    peak_GBps: float  # HBM peak (spec sheet)
    fp64_TFLOPs: float  # vector FP64 peak (no matrix cores)
    source: str


MACHINES = {
    "H200": Machine("H200", "sm_90", 4800.0, 34.0,
                    "NVIDIA H200 datasheet: 4.8 TB/s HBM3e, 34 TFLOPS FP64"),
    "MI300A": Machine("MI300A", "gfx942", 5300.0, 61.3,
                      "AMD Instinct MI300A: 5.3 TB/s HBM3 (AMD spec; also Wahlgren et al. 2025, Sfiligoi 2025 "
                      "as cited at emergentmind.com/topics/mi300a-apus), 61.3 TFLOPS FP64 vector"),
    "MI250X-GCD": Machine("MI250X-GCD", "gfx90a", 1638.4, 23.95,
                          "AMD Instinct MI250X: 3.2768 TB/s HBM2e per OAM, 8192-bit at 1.6 GHz "
                          "(siliconcat.net/gpu/amd-radeon-instinct-mi250x), two GCDs -> 1.6384 TB/s "
                          "and 23.95 TFLOPS FP64 vector per GCD (emergentmind.com/topics/amd-instinct-mi250x)"),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class StoredFloors:
    label: str  # e.g. R2B6/80
    path: str
    bytes: Mapping[str, float]  # kernel | program | substep -> bytes per dycore step
    measured_GBps: float  # the copy bandwidth the run divided by
    kernels: Sequence[tuple[str, float, float]] = ()  # (kernel, bytes, flops) per step, if stored


def load_floors(label: str, path: str) -> StoredFloors:
    """The floors of a `roofline greenline` JSON or of a `greenline` (merged) JSON's first backend
    that recorded them."""
    data = json.loads(pathlib.Path(path).read_text())
    found = data if "floors_bytes" in data else next(
        (b["floors"] for b in data.get("backends", []) if isinstance(b, dict) and b.get("floors")), None)  # fmt: skip
    if not found or "floors_bytes" not in found:
        raise ValueError(f"{path}: no floors_bytes (a `roofline greenline` JSON or a greenline run with --floors-steps)")
    gbps = found.get("floors_bandwidth_GBps") or data.get("bandwidth_GBps")
    rows = [(r["kernel"], r["bytes_per_step"], r["flops_per_step"]) for r in data.get("rows", []) if r.get("bytes_per_step")]
    return StoredFloors(label, path, found["floors_bytes"], float(gbps), rows)


def floor_ms(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e9) * 1e3


SCOPES = ("kernel", "program", "substep")


SHORT = {"H200": "H200", "MI300A": "300A", "MI250X-GCD": "250X"}


def measured_fraction(runs: Sequence[StoredFloors]) -> float:
    """The H200's measured copy bandwidth as a fraction of its peak (the mean over `runs`)."""
    return sum(r.measured_GBps for r in runs) / len(runs) / MACHINES["H200"].peak_GBps


def floors_markdown(runs: Sequence[StoredFloors], efficiency: float) -> list[str]:
    """Per grid and scope: GB per step, the H200's floor at its measured copy bandwidth (`H200*`),
    every machine's floor at its peak, and the AMD ones at `efficiency` x peak (`e`)."""
    amd = [n for n in MACHINES if n != "H200"]
    head = ["grid", "floor", "GB", "H200*", "H200"] + [h for n in amd for h in (SHORT[n], SHORT[n] + " e")]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---", "---"] + ["---:"] * (len(head) - 2)) + " |"]
    for run in runs:
        for scope in SCOPES:
            b = float(run.bytes[scope])
            cells = [run.label, scope, f"{b / 1e9:.1f}", f"{floor_ms(b, run.measured_GBps):.2f}",
                     f"{floor_ms(b, MACHINES['H200'].peak_GBps):.2f}"]  # fmt: skip
            for n in amd:
                cells += [f"{floor_ms(b, MACHINES[n].peak_GBps):.2f}", f"{floor_ms(b, MACHINES[n].peak_GBps * efficiency):.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def roofline_markdown(runs: Sequence[StoredFloors]) -> list[str]:
    """Per machine: the ridge point and how many of each run's kernels lie below it."""
    lines = ["| machine | GB/s | TFLOPS | ridge F/B | run | kernels | below ridge | max F/B |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]  # fmt: skip
    for m in MACHINES.values():
        ridge = m.fp64_TFLOPs * 1e12 / (m.peak_GBps * 1e9)
        for run in runs:
            if not run.kernels:
                continue
            ai = [f / b for _, b, f in run.kernels]
            below = sum(1 for x in ai if x < ridge)
            lines.append(f"| {m.name} | {m.peak_GBps:.0f} | {m.fp64_TFLOPs:g} | {ridge:.1f} | {run.label} | "
                         f"{len(ai)} | {below} | {max(ai):.2f} |")  # fmt: skip
    return lines


def report(runs: Sequence[StoredFloors], roofline: Sequence[StoredFloors]) -> str:
    eff = measured_fraction(runs)
    out = _wrap(f"Floors per dycore step, ms (bytes / bandwidth). H200*: at the run's measured copy bandwidth; "
                f"H200, 300A (MI300A), 250X (MI250X, one GCD): at the spec-sheet peak; e: at {eff:.1%} of the "
                "peak, the fraction of its peak the H200's copy reached in these runs.") + [""]  # fmt: skip
    out += floors_markdown(runs, eff)
    out += ["", "Sources of the bytes:"] + [f"- {r.label}: `{r.path}` (H200 copy {r.measured_GBps:.1f} GB/s)" for r in runs]
    out += ["", "Bandwidths and FP64 peaks:"]
    for m in MACHINES.values():
        out += _wrap(f"- {m.name} ({m.arch}): {m.source}")
    if roofline:
        out += ["", *_wrap("Roofline: each kernel's flops / compulsory bytes per step against each machine's ridge "
                           "point (FP64 vector peak / bandwidth)."), ""]  # fmt: skip
        out += roofline_markdown(roofline)
    return "\n".join(out) + "\n"


def _wrap(text: str) -> list[str]:
    import textwrap

    return textwrap.wrap(text, 80, subsequent_indent="  " if text.startswith("- ") else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m icoforge.perf.machines", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="LABEL=JSON", help="stored floors, e.g. R2B6/80=benchmarks/.../run.json")
    p.add_argument("--roofline", action="append", default=[], metavar="LABEL=JSON",
                   help="a `roofline greenline` JSON whose kernel rows (bytes, flops) give the roofline table")
    p.add_argument("--markdown", help="write the tables here")
    args = p.parse_args(argv)

    def load(spec: str) -> StoredFloors:
        label, sep, path = spec.partition("=")
        if not sep:
            p.error(f"{spec!r}: give LABEL=JSON, e.g. R2B6/80=benchmarks/h200/2026-12-03-s21/gl-R2B6-80-opt.json")
        return load_floors(label, path)

    text = report([load(s) for s in args.runs], [load(s) for s in args.roofline])
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
