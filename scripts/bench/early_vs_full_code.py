"""Static code counts of the early-GTIR path against GT4Py's full pass list, per program and kernel:
what the generated CUDA of the two paths asks of the GPU, without a GPU.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench/early_vs_full_code.py [PROGRAM ...] [--ptx] [--kernels] [--out FILE.md]

Per kernel of the final GPU IR (CUDA default schedule, as `icoforge explain --stage code` prints it):
loads per level (each `Load` occurrence in the level loop's statements, so a value repeated in a
`?:` tree counts every time), k-invariant loads left in the level loop, `if` statements and
selects, expression nodes. `--ptx` adds what nvcc (sm_90) makes of it: `ld.global` instructions
and all instructions of the 32-bit-index kernel in the PTX, and the registers ptxas reports.
Programs whose two paths differ in any count are listed. GT4Py's passes come from the translation
cache (minutes per big program when cold); nothing is run.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

FIELDS = ("kernels", "temps", "MB", "loads", "kinv", "ifs", "selects", "nodes")
PTX_FIELDS = ("ld", "insts", "regs")


def kernel_counts(k) -> dict[str, int]:
    """Counts of one kernel of the final IR (module doc)."""
    from icoforge.backend.ir import ir

    level_vars = {s.var.name for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Let, ir.Declare))}
    level_vars |= {st.var.name for st in k.state}

    def k_invariant(e: ir.Load) -> bool:
        return not any(isinstance(x, ir.KIndex) or (isinstance(x, ir.Var) and x.name in level_vars) for x in e.walk())

    exprs = list(ir.walk_body_exprs(k.body))
    loads = [e for e in exprs if isinstance(e, ir.Load)]
    stmts = list(ir.walk_stmts(k.body))
    return {
        "loads": len(loads),
        "kinv": sum(k_invariant(e) for e in loads) if k.domain.k_start is not None and not k.is_scan else 0,
        "ifs": sum(isinstance(s, ir.If) for s in stmts),
        "selects": sum(isinstance(e, ir.Select) for e in exprs),
        "nodes": len(exprs) + sum(1 for _ in ir.walk_body_exprs(k.prologue)),
    }


def ptx_counts(source: str) -> dict[str, dict[str, int]]:
    """Kernel -> ld.global / instruction counts in nvcc's PTX and ptxas's registers (sm_90)."""
    from icoforge.backend.runtime.gpu_check import find_nvcc, parse_ptxas

    with tempfile.TemporaryDirectory() as d:
        src, ptx = os.path.join(d, "k.cu"), os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(source)
        common = [find_nvcc(), "-arch=sm_90", "-std=c++17"]
        subprocess.run([*common, "-ptx", src, "-o", ptx], check=True, capture_output=True)
        text = pathlib.Path(ptx).read_text()
        rep = subprocess.run([*common, "-Xptxas", "-v", "-c", src, "-o", os.path.join(d, "k.o")], check=True, capture_output=True, text=True)
    regs = {r.kernel: r.registers for r in parse_ptxas(rep.stderr)}
    out: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"\.entry (\w+)\((.*?)\n}\n", text, re.S):
        body = [ln.strip() for ln in m.group(2).splitlines()]
        insts = [ln for ln in body if ln and not ln.startswith(("//", ".", "$", "{", "}", ")")) and ln.endswith(";")]
        out[m.group(1)] = {
            "ld": sum(ln.startswith("ld.global") for ln in insts),
            "insts": len(insts),
            "regs": regs.get(m.group(1), 0),
        }
    return out


def program_counts(name: str, grid, early: bool, ptx: bool, scalars: dict | None = None) -> dict:
    """Program totals and per-kernel counts on one path; `scalars` override the suite's values
    (static ones too: the granule calls some programs with other switches)."""
    import dataclasses

    from icoforge import settings
    from icoforge.backend.runtime import workflow
    from icoforge.backend.codegen.cuda import render_module_gpu
    from icoforge.backend.schedule.pipeline import gpu_passes
    from icoforge.perf.explain import compilable, gpu_schedule
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.suite.catalogue import get_program

    with settings.overridden(early_gtir=early):
        info = get_program(name)
        sizes = suite_sizes(info, grid, 0)
        if scalars:
            sizes = dataclasses.replace(sizes, scalars={**sizes.scalars, **{k: v for k, v in scalars.items() if k in sizes.scalars}})
        pir = workflow.translate(compilable(info, grid, sizes, "icon4py"))[0].program
    _, final, launches = gpu_passes(pir, gpu_schedule("cuda"), "cuda")
    cost = program_cost(final, sizes)
    kernels = {k.name: kernel_counts(k) for k in final.kernels()}
    if ptx:
        for kname, c in ptx_counts(render_module_gpu(final, launches, "cuda")).items():
            if kname in kernels:
                kernels[kname].update(c)
    total = {"kernels": len(kernels), "temps": len(final.temporaries), "MB": round((cost.bytes_read + cost.bytes_written) / 1e6, 3)}
    for f in (*FIELDS[3:], *(PTX_FIELDS if ptx else ())):
        total[f] = sum(c.get(f, 0) for c in kernels.values())
    return {"total": total, "kernels": kernels}


def markdown(rows: list[tuple[str, dict, dict]], ptx: bool, grid_name: str, levels: int) -> str:
    fields = (*FIELDS, *(PTX_FIELDS if ptx else ()))
    head = " | ".join(f"{f} early / full" for f in fields)
    lines = [
        f"Static counts, {grid_name}/{levels} levels, CUDA default schedule (early GTIR / full pass list); "
        f"{len(rows)} programs, those with any difference listed.",
        "",
        f"| program | {head} |",
        "|---|" + "---|" * len(fields),
    ]
    for name, e, f in rows:
        if e["total"] != f["total"]:
            cells = " | ".join(f"{e['total'][x]} / {f['total'][x]}" for x in fields)
            lines.append(f"| {name} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*", help="program names (default: every catalogue program)")
    ap.add_argument("--grid", default="R2B3:10", help="grid preset and levels (default R2B3:10)")
    ap.add_argument("--ptx", action="store_true", help="compile with nvcc (sm_90) and count PTX instructions")
    ap.add_argument("--kernels", action="store_true", help="print the per-kernel counts of programs that differ")
    ap.add_argument("--scalar", action="append", default=[], help="NAME=VALUE (Python literal) instead of the suite's value")
    ap.add_argument("--out", help="write the Markdown table here too")
    a = ap.parse_args()
    import ast

    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import program_names

    scalars = {k: ast.literal_eval(v) for k, v in (x.split("=", 1) for x in a.scalar)}
    preset, levels = a.grid.split(":")
    grid = load_grid(preset, levels=int(levels), show_progress=False)
    rows = []
    for n, name in enumerate(a.programs or program_names(), 1):
        e, f = (program_counts(name, grid, early, a.ptx, scalars) for early in (True, False))
        rows.append((name, e, f))
        print(f"[{n}] {name}: early {e['total']} full {f['total']}", file=sys.stderr, flush=True)
        if a.kernels and e["total"] != f["total"]:
            for kname in sorted(set(e["kernels"]) | set(f["kernels"])):
                print(f"    {kname}: early {e['kernels'].get(kname)} full {f['kernels'].get(kname)}", file=sys.stderr)
    text = markdown(rows, a.ptx, grid.name, grid.num_levels)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
