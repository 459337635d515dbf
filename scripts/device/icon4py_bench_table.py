"""The table of icon4py's own dycore benchmark (test_benchmark_solve_nonhydro, pytest-benchmark JSON).

    python3 scripts/device/icon4py_bench_table.py bench-LABEL-GRID-LEVELS.json ...

One row per file: each substep variant's median (ms) and the dycore step as icon4py's granule
calls it with 5 substeps (first + 3 middle + last), the same mix as the greenline's dycore step;
the last row gives each backend over the first. Files without the three variants say what is missing.
"""

from __future__ import annotations

import json
import pathlib
import sys

VARIANTS = {(True, False): "first", (False, False): "middle", (False, True): "last"}
MIX = {"first": 1, "middle": 3, "last": 1}


def medians_ms(path: pathlib.Path) -> dict[str, float]:
    data = json.loads(path.read_text())
    out = {}
    for b in data.get("benchmarks", []):
        p = b.get("params") or {}
        key = (bool(p.get("at_first_substep")), bool(p.get("at_last_substep")))
        if key in VARIANTS:
            out[VARIANTS[key]] = b["stats"]["median"] * 1e3
    return out


def main(paths: list[str]) -> None:
    print("| backend (--backend) | first ms | middle ms | last ms | dycore step ms | rounds |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    steps = []
    for path in map(pathlib.Path, paths):
        label = path.stem.removeprefix("bench-")
        try:
            m = medians_ms(path)
            rounds = {b["stats"]["rounds"] for b in json.loads(path.read_text())["benchmarks"]}
        except (OSError, ValueError, KeyError) as e:
            print(f"| {label} | no result ({e}) | | | | |")
            continue
        if set(m) != set(MIX):
            print(f"| {label} | missing: {', '.join(sorted(set(MIX) - set(m)))} | | | | |")
            continue
        step = sum(MIX[v] * m[v] for v in MIX)
        steps.append((label, step))
        print(f"| {label} | {m['first']:.3f} | {m['middle']:.3f} | {m['last']:.3f} | {step:.2f} | "
              f"{', '.join(map(str, sorted(rounds)))} |")  # fmt: skip
    if len(steps) > 1:
        print("\n" + "; ".join(f"{lbl} / {steps[0][0]} = {s / steps[0][1]:.3f}" for lbl, s in steps[1:]))


if __name__ == "__main__":
    main(sys.argv[1:])
