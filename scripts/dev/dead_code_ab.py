"""Issue 20, session 15: GT4Py's dead_code_elimination against icoforge's (backend/frontend/dead_code.py) on
the early path, A/B in one process and one working tree (R2B3/10, seed 0, the static scalars of
the stored references, GT4Py's tree machinery sped up as in production).

Per program: the GTIR after `gt4py_early.early_transforms` with each (`==` and `str`), the kernel
IR after the translate passes, and the generated code of the C++ target and of CUDA and HIP with
their default schedules (the pages `icoforge explain --stage code` prints): equal or not. Then
`--repeat N` rounds of both `early_transforms` runs, interleaved (the order flips every round),
with the CPU seconds of each pass. One JSON line per program (appended to --out); `--markdown`
prints the tables from them.

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/dead_code_ab.py [PROGRAM ...] --repeat 3 --out rows.jsonl
    PYTHONPATH=$PWD .venv/bin/python scripts/dev/dead_code_ab.py --markdown rows.jsonl
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics

MODES = ("gt4py", "icoforge")


def _inputs(name: str, grid):
    from icoforge.perf.static import compilable_program_static
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    info = get_program(name)
    scalars = make_scalars(info, grid, seed=0)
    static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}
    return compilable_program_static(info.program, grid.connectivities, static)


def _early(inp, mode: str) -> tuple:
    """(GTIR, {pass: CPU s}) of the early path with `mode`'s dead-code elimination."""
    from icoforge.backend.frontend import gt4py_early, gt4py_speedups

    times: dict[str, float] = {}
    with gt4py_speedups.patched():
        gtir = gt4py_early.early_transforms(
            inp.data, inp.args.offset_provider, timer=times.__setitem__, gt4py_dce=mode == "gt4py"
        )
    return gtir, times


def _code(inp, gtir) -> dict[str, str]:
    """Kernel IR and generated code of every target, as text."""
    from gt4py.next import common

    from icoforge.backend.lowering import lower
    from icoforge.backend.schedule import pipeline
    from icoforge.backend.schedule.schedule import ProgramSchedule
    from icoforge.perf.explain import code_pages, gpu_schedule

    op_type = common.offset_provider_to_type(inp.args.offset_provider)
    pir = pipeline.translate_passes(lower.lower_program(gtir, inp.args.args, op_type, early=True))
    out = {"ir": str(pir), "kernels": str(len(pir.kernels()))}
    for target in ("cpp", "cuda", "hip"):
        schedule = ProgramSchedule(inline="auto") if target == "cpp" else gpu_schedule(target)
        out[target] = "\n".join(f"// {p.title}\n{p.text}" for p in code_pages(pir, target, schedule))
    return out


def one(name: str, grid, repeat: int) -> dict:
    inp = _inputs(name, grid)
    runs = {m: _early(inp, m) for m in MODES}
    (a, _), (b, _) = runs["gt4py"], runs["icoforge"]
    row: dict = {"program": name, "gtir_equal": a == b, "gtir_str_equal": str(a) == str(b)}
    code = {m: _code(inp, runs[m][0]) for m in MODES}
    row["kernels"] = int(code["gt4py"].pop("kernels")), int(code["icoforge"].pop("kernels"))
    for what in code["gt4py"]:
        row[f"{what}_equal"] = code["gt4py"][what] == code["icoforge"][what]
    times: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    for r in range(repeat):
        for m in MODES if r % 2 else reversed(MODES):
            times[m].append(_early(inp, m)[1])
    row["times"] = times
    return row


def markdown(path: str) -> str:
    rows = [json.loads(line) for line in open(path)]
    checks = ("gtir_equal", "gtir_str_equal", "ir_equal", "cpp_equal", "cuda_equal", "hip_equal")
    same = {c: sum(bool(r.get(c)) for r in rows) for c in checks}
    out = [f"{len(rows)} programs; equal: " + ", ".join(f"{c.removesuffix('_equal')} {same[c]}" for c in checks), ""]

    def per_pass(r: dict, m: str) -> dict[str, float]:  # median over the rounds
        names = r["times"][m][0].keys()
        return {n: statistics.median(t[n] for t in r["times"][m]) for n in names}

    def total(r: dict, m: str) -> float:  # median over the rounds of the whole early path
        return statistics.median(sum(t.values()) for t in r["times"][m])

    def table(title: str, selected: list[dict]) -> None:
        tot = {m: collections.Counter() for m in MODES}
        for r in selected:
            for m in MODES:
                tot[m].update(per_pass(r, m))
        whole = {m: sum(total(r, m) for r in selected) for m in MODES}
        rounds = len(selected[0]["times"]["gt4py"])
        out.extend([f"{title} (CPU s, median of {rounds} interleaved rounds per program)", "",
                    "| pass | GT4Py's DCE | icoforge's DCE |", "| :--- | ---: | ---: |"])  # fmt: skip
        for n in tot["gt4py"]:
            out.append(f"| {n} | {tot['gt4py'][n]:.3f} | {tot['icoforge'][n]:.3f} |")
        out.append(f"| **early_transforms (median of the rounds' totals)** | **{whole['gt4py']:.2f}** | **{whole['icoforge']:.2f}** |")
        out.append("")

    for r in rows:
        if r["program"].startswith("vertically_implicit_solver_at_predictor"):
            table(r["program"], [r])
            for what, pick in (("dead_code_elimination", lambda t: t["dead_code_elimination"]), ("early_transforms", lambda t: sum(t.values()))):
                rounds = [(pick(t), pick(u)) for t, u in zip(r["times"]["gt4py"], r["times"]["icoforge"])]
                out.append(f"{what} per round (GT4Py's, icoforge's): " + ", ".join(f"({g:.2f}, {i:.2f})" for g, i in rounds))
            out.append("")
    table(f"all {len(rows)} programs, summed", rows)
    differing = [r["program"] for r in rows if not all(r.get(c) for c in checks)]
    out.append("programs with a difference: " + (", ".join(differing) or "none"))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--markdown", default="")
    opts = ap.parse_args()
    if opts.markdown:
        print(markdown(opts.markdown))
        return
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import program_names

    grid = load_grid("R2B3", levels=10, show_progress=False)
    for name in opts.programs or program_names():
        row = one(name, grid, opts.repeat)
        summary = {k: v for k, v in row.items() if k != "times"}
        dce = {m: [round(t["dead_code_elimination"], 3) for t in row["times"][m]] for m in MODES}
        print(json.dumps({**summary, "dce": dce}), flush=True)
        if opts.out:
            with open(opts.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
