"""Issue 20: GT4Py's passes with and without their fusion loop, per program (R2B3/10, seed 0,
the static scalars of the stored references): CPU seconds of the passes, kernels and compulsory
bytes per call of icoforge's kernel IR after its passes (pipeline.translate_passes: forward,
inline with the default policy, hoist), and whether the two kernel IRs are identical. One JSON line per program (appended to --out), then a Markdown
table from all lines with --markdown.

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/early_gtir_table.py [PROGRAM ...] --out rows.jsonl
    PYTHONPATH=$PWD .venv/bin/python scripts/dev/early_gtir_table.py --markdown rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import time


def one(name: str, grid, reuse: dict | None = None) -> dict:
    from gt4py.next import common
    from gt4py.next.iterator.transforms import pass_manager

    from icoforge.backend.frontend import gt4py_early, gt4py_speedups
    from icoforge.backend.lowering import lower
    from icoforge.backend.schedule import pipeline
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.perf.static import compilable_program_static
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    info = get_program(name)
    scalars = make_scalars(info, grid, seed=0)
    static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}
    inp = compilable_program_static(info.program, grid.connectivities, static)
    op = inp.args.offset_provider
    op_type = common.offset_provider_to_type(op)
    sizes = suite_sizes(info, grid, seed=0)
    row: dict = {"program": name}
    irs = {}
    for mode in ("old", "new"):
        t0 = time.process_time()
        with gt4py_speedups.patched():
            if mode == "old" and reuse:  # pass time of an earlier run (GT4Py unchanged), the GTIR from the cache
                from icoforge.backend.runtime import workflow

                gtir = workflow.cached_passes(inp)[0]
            elif mode == "old":
                gtir = pass_manager.apply_common_transforms(inp.data, extract_temporaries=True, unroll_reduce=True, offset_provider=op)
            else:
                gtir = gt4py_early.early_transforms(inp.data, op)
        row[f"{mode}_passes_cpu_s"] = round(time.process_time() - t0, 3) if not (mode == "old" and reuse) else reuse["old_passes_cpu_s"]
        prog = pipeline.translate_passes(lower.lower_program(gtir, inp.args.args, op_type, early=mode == "new"))
        cost = program_cost(prog, sizes)
        executed = [k for k in cost.kernels if k.executed]
        row[f"{mode}_kernels"] = len(executed)
        row[f"{mode}_bytes"] = cost.bytes
        row[f"{mode}_temporaries"] = len(prog.temporaries)
        irs[mode] = str(prog)
    row["same_ir"] = irs["old"] == irs["new"]
    return row


def markdown(path: str) -> str:
    from icoforge.suite.ranges import GRANULE_PROGRAMS

    rows = {}
    for line in open(path):
        r = json.loads(line)
        rows[r["program"]] = r
    out = [
        "| program | granule | passes old CPU s | passes new CPU s | kernels old | kernels new | MB/call old | MB/call new | new/old bytes | same kernel IR |",
        "| :--- | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    tot = {"o": 0.0, "n": 0.0}
    for name in sorted(rows):
        r = rows[name]
        if "error" in r:
            out.append(f"| {name} | {'yes' if name in GRANULE_PROGRAMS else ''} | | | | | | | | error: {r['error'][:80]} |")
            continue
        tot["o"] += r["old_passes_cpu_s"]
        tot["n"] += r["new_passes_cpu_s"]
        ratio = r["new_bytes"] / r["old_bytes"] if r["old_bytes"] else 1.0
        out.append(
            f"| {name} | {'yes' if name in GRANULE_PROGRAMS else ''} | {r['old_passes_cpu_s']:.2f} | {r['new_passes_cpu_s']:.2f} "
            f"| {r['old_kernels']} | {r['new_kernels']} | {r['old_bytes'] / 1e6:.3f} | {r['new_bytes'] / 1e6:.3f} | {ratio:.3f} "
            f"| {'yes' if r['same_ir'] else 'no'} |"
        )
    out.append(f"| **all {len(rows)}** | | **{tot['o']:.1f}** | **{tot['n']:.1f}** | | | | | | |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--out", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--reuse", default="", help="rows of an earlier run: their old_* values are kept, only the new path runs")
    opts = ap.parse_args()
    if opts.markdown:
        print(markdown(opts.markdown))
        return
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import program_names

    grid = load_grid("R2B3", levels=10, show_progress=False)
    reuse = {}
    if opts.reuse:
        reuse = {r["program"]: r for r in map(json.loads, open(opts.reuse)) if "error" not in r}
    for name in opts.programs or program_names():
        try:
            row = one(name, grid, reuse.get(name))
        except Exception as e:  # reported in the table, the others go on
            row = {"program": name, "error": f"{type(e).__name__}: {e}"[:400]}
        print(json.dumps(row), flush=True)
        if opts.out:
            with open(opts.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
