"""Bytes and kernels per program call with the inline pass off, auto and all (icoforge.backend.passes.inline),
and with auto followed by kernel fusion (the schedule's `fuse: ["*"]`, icoforge.backend.passes.fuse: maps over
one domain, and a map into the scan before it).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench/inline_bytes.py [--grid R2B3 --levels 10] [--out FILE.md]

Compulsory bytes from the byte model (icoforge.perf.model: each element a kernel reads or writes
counted once per kernel, neighbour tables included) for one call with the suite's sizes and
icon4py's static scalars, as `icoforge explain --stage ir` prints them. No program is run: GT4Py's
passes come from the translation cache (minutes per big program when cold).
"""

from __future__ import annotations

import argparse
import sys
import time

POLICIES = ("off", "auto", "all")


def program_rows(grid, names):
    from icoforge.backend.schedule import pipeline
    from icoforge.backend.runtime import workflow
    from icoforge.backend.schedule.schedule import ProgramSchedule
    from icoforge.perf.explain import compilable
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.suite.catalogue import get_program

    for n, name in enumerate(names, 1):
        t0 = time.perf_counter()
        info = get_program(name)
        sizes = suite_sizes(info, grid, 0)
        inp = compilable(info, grid, sizes, "icon4py")
        row = {"program": name}
        for policy in POLICIES:
            pir = workflow.translate(inp, inline_policy=policy)[0].program
            cost = program_cost(pir, sizes)
            row[policy] = (len(pir.kernels()), cost.bytes_read + cost.bytes_written, cost.flops)
            if policy == "auto":
                fused = pipeline.fuse(pir, ProgramSchedule(fuse=("*",)))
                cost = program_cost(fused, sizes)
                row["fused"] = (len(fused.kernels()), cost.bytes_read + cost.bytes_written, cost.flops)
        print(f"[{n}/{len(names)}] {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        yield row


def markdown(rows, grid_name: str, levels: int) -> str:
    import gt4py

    changed = [r for r in rows if r["off"] != r["auto"] or r["off"] != r["all"] or r["auto"] != r["fused"]]
    changed.sort(key=lambda r: r["auto"][1] - r["off"][1])
    tot = {p: sum(r[p][1] for r in rows) for p in (*POLICIES, "fused")}
    lines = [
        f"# Inlining temporaries: bytes and kernels per program call ({grid_name}/{levels} levels)",
        "",
        f"- byte model: icoforge.perf.model (compulsory bytes per kernel, summed per call); gt4py {gt4py.__version__};",
        "  sizes and static scalars of the suite (`icoforge explain --stage ir` shows the same totals)",
        f"- {len(rows)} programs; {len(changed)} change with `all` or `auto`; the rest are identical in every policy",
        f"- all programs together: off {tot['off'] / 1e6:.2f} MB, auto {tot['auto'] / 1e6:.2f} MB "
        f"({100 * (tot['auto'] / tot['off'] - 1):+.1f} %), all {tot['all'] / 1e6:.2f} MB ({100 * (tot['all'] / tot['off'] - 1):+.1f} %), "
        f"auto + fuse {tot['fused'] / 1e6:.2f} MB ({100 * (tot['fused'] / tot['off'] - 1):+.1f} %)",
        "",
        "| program | kernels off / auto / all / auto+fuse | MB off | MB auto | auto vs off | MB all | MB auto+fuse | fuse vs auto | MFLOP off / auto |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in changed:
        (k0, b0, f0), (k1, b1, f1), (k2, b2, _), (k3, b3, _) = r["off"], r["auto"], r["all"], r["fused"]
        lines.append(
            f"| {r['program']} | {k0} / {k1} / {k2} / {k3} | {b0 / 1e6:.3f} | {b1 / 1e6:.3f} | {100 * (b1 / b0 - 1):+.1f} % "
            f"| {b2 / 1e6:.3f} | {b3 / 1e6:.3f} | {100 * (b3 / b1 - 1):+.1f} % | {f0 / 1e6:.2f} / {f1 / 1e6:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="R2B3")
    ap.add_argument("--levels", type=int, default=10)
    ap.add_argument("--programs", default="", help="comma-separated (default: every catalogue program)")
    ap.add_argument("--out", help="write the Markdown table here too")
    a = ap.parse_args()
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import program_names

    grid = load_grid(a.grid, levels=a.levels, show_progress=False)
    names = a.programs.split(",") if a.programs else list(program_names())
    text = markdown(list(program_rows(grid, names)), grid.name, a.levels)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
