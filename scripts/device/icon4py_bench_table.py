"""The table of icon4py's own dycore benchmark (test_benchmark_solve_nonhydro, pytest-benchmark JSON).

    python3 scripts/device/icon4py_bench_table.py bench-BACKEND-GRID-LEVELS.json ...

One row per file: each substep variant's median (ms) and the dycore step as icon4py's granule
calls it with 5 substeps (first + 3 middle + last), the same mix as the greenline's dycore step.
"waits" says whether the timed calls waited for the device (icoforge.bench.device_sync in the run;
without it, a GPU backend's figure is its host's time to enqueue); "host step ms" is the same mix
of the calls' host time to return, which the plugin records beside the timing. Ratios compare
backends of the same grid and the same kind of timing. Files without the three variants say what
is missing.
"""

from __future__ import annotations

import json
import pathlib
import sys

VARIANTS = {(True, False): "first", (False, False): "middle", (False, True): "last"}
MIX = {"first": 1, "middle": 3, "last": 1}


def read(path: pathlib.Path) -> dict:
    """Per variant: timed median (s), host-return median (s, or None), the sync's name, rounds."""
    out = {}
    for b in json.loads(path.read_text()).get("benchmarks", []):
        p = b.get("params") or {}
        key = (bool(p.get("at_first_substep")), bool(p.get("at_last_substep")))
        if key in VARIANTS:
            info = b.get("extra_info") or {}
            host = (info.get("host_return_s") or {}).get("median")
            out[VARIANTS[key]] = (b["stats"]["median"], host, info.get("device_sync"), b["stats"]["rounds"])
    return out


def waits(sync_name: str | None) -> str:
    if sync_name is None:
        return "no (icon4py)"
    return "no" if sync_name.startswith("none") else "yes"


def main(paths: list[str]) -> None:
    print("| run | waits | first ms | middle ms | last ms | step ms | host step ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    steps: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for path in map(pathlib.Path, paths):
        label = path.stem.removeprefix("bench-")
        try:
            v = read(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"| {label} | no result ({e}) | | | | | |")
            continue
        if set(v) != set(MIX):
            print(f"| {label} | missing: {', '.join(sorted(set(MIX) - set(v)))} | | | | | |")
            continue
        kind = waits(v["first"][2])
        step = sum(MIX[k] * v[k][0] for k in MIX) * 1e3
        hosts = [v[k][1] for k in MIX]
        host = f"{sum(MIX[k] * v[k][1] for k in MIX) * 1e3:.2f}" if None not in hosts else "-"
        grid = "-".join(label.rsplit("-", 2)[1:])
        steps.setdefault((grid, kind), []).append((label, step))
        print(f"| {label} | {kind} | {v['first'][0] * 1e3:.3f} | {v['middle'][0] * 1e3:.3f} | "
              f"{v['last'][0] * 1e3:.3f} | {step:.2f} | {host} |")  # fmt: skip
    rounds = sorted({r for path in paths for r in _rounds(pathlib.Path(path))})
    if rounds:
        print(f"\nrounds per variant: {', '.join(map(str, rounds))}")
    for runs in steps.values():
        if len(runs) > 1:
            print("; ".join(f"{lbl} / {runs[0][0]} = {s / runs[0][1]:.3f}" for lbl, s in runs[1:]))


def _rounds(path: pathlib.Path) -> set[int]:
    try:
        return {r for *_, r in read(path).values()}
    except (OSError, ValueError, KeyError):
        return set()


if __name__ == "__main__":
    main(sys.argv[1:])
