"""Helpers of scripts/device/sanitize.sh (compute-sanitizer over the dycore granule's kernels).

    python3 scripts/device/sanitize_granule.py run KERNELS.txt -- greenline --grid R2B4 ...
        `icoforge ARGS...` in this process, with CuPy's memory pools off (every array is its own
        cudaMalloc, so memcheck sees the bounds of each field and temporary, not of a pool
        block), and the icoforge kernels it launched written to KERNELS.txt (program, kernel,
        launches), so the report can say which kernels ran under the tool.
    python3 scripts/device/sanitize_granule.py report WORKDIR RUN...
        The Markdown report from the tools' logs (RUN: TOOL:SCHEDULE as sanitize.sh named them);
        exit status 1 if a run found errors, did not finish, or launched no kernel.
"""

from __future__ import annotations

import atexit
import collections
import pathlib
import re
import sys


def run(kernels_file: str, argv: list[str]) -> int:
    import cupy

    cupy.cuda.set_allocator(None)  # no pool: memcheck's bounds are the arrays' own
    cupy.cuda.set_pinned_memory_allocator(None)
    from icoforge.backend.runtime import gpu

    names: dict[int, tuple[str, str]] = {}
    launches: collections.Counter = collections.Counter()
    load, launch = gpu.GPUArtifact.load, gpu.Runtime.launch

    def load_and_name(self):
        program = load(self)
        for name, fn in program.icoforge_kernels.items():
            names[id(fn)] = (self.program_name, name)
        return program

    def launch_and_count(self, kernel, grid, block, args):
        launches[id(kernel)] += 1
        return launch(self, kernel, grid, block, args)

    gpu.GPUArtifact.load = load_and_name
    gpu.Runtime.launch = launch_and_count

    def write() -> None:
        rows = sorted((*names.get(k, ("?", "?")), n) for k, n in launches.items())
        loaded = len(names)
        text = [f"# {len(rows)} kernels launched ({loaded} loaded; 64-bit twins of index_bits=auto load but do not run here)"]
        text += [f"{p} {k} {n}" for p, k, n in rows]
        pathlib.Path(kernels_file).write_text("\n".join(text) + "\n")

    atexit.register(write)
    from icoforge.cli.main import main

    return main(argv)


SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
RACE = re.compile(r"RACECHECK SUMMARY: .*")
# racecheck prints no "ERROR SUMMARY", only its own line (H200, compute-sanitizer 2025.3.1, session 20)
RACE_COUNTS = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


# Where a reported hazard is: memcheck/initcheck name the kernel on the line after the error
# ("=========     at KERNEL+0x..."), racecheck on the same line ("... access at KERNEL+0x...").
# Host API errors (a cudaMemcpy of uninitialized memory) have no kernel.
AT_KERNEL = re.compile(r"^=========\s+at (?:void )?([\w:]+)")
RACE_AT = re.compile(r"Race reported between \w+ access at ([\w:]+)\+")
HOST_API = "Host API memory access error"


def _kernel_names(path: pathlib.Path) -> set[str]:
    """icoforge's kernel names from a `kernels-*.txt` list (program, kernel, launches per line)."""
    if not path.exists():
        return set()
    return {ln.split()[1] for ln in path.read_text().splitlines() if ln and not ln.startswith("#") and len(ln.split()) > 1}


def where_reported(text: str, ours: set[str]) -> tuple[int, int, int]:
    """(hazards printed in icoforge kernels, in other kernels, host API errors) of a log."""
    mine = other = host = 0
    for ln in text.splitlines():
        m = AT_KERNEL.match(ln) or RACE_AT.search(ln)
        if m:
            name = m.group(1)
            mine, other = (mine + 1, other) if name in ours else (mine, other + 1)
        elif HOST_API in ln:
            host += 1
    return mine, other, host


def _kernels(path: pathlib.Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for ln in path.read_text().splitlines() if ln and not ln.startswith("#"))


def report(workdir: str, runs: list[str]) -> int:
    """One section per run; the logs are WORKDIR/TOOL-SCHEDULE.*.log (one per process). A run of
    the default schedule must launch as many kernels as the run without a tool (step 1)."""
    w = pathlib.Path(workdir)
    plain = _kernels(w / "kernels-plain-default.txt")
    lines = ["# compute-sanitizer over the dycore granule's kernels", ""]
    lines += [(w / "header.txt").read_text().strip(), ""] if (w / "header.txt").exists() else []
    lines += [f"Without a tool (step 1, default schedule): {plain} icoforge kernels launched.", ""]
    ours = _kernel_names(w / "kernels-plain-default.txt")
    lines += ["Errors: compute-sanitizer's count (all kernels of the process: CuPy's and CUB's kernels that",
              "icon4py's grid set-up launches too). Printed: the hazards the log prints (at most",
              "`--print-limit` per run) by where they are: in icoforge's kernels, in other kernels, host",
              "API calls (a copy of uninitialized memory). \"ok\" needs zero errors.", ""]
    lines += ["| tool | schedule | errors | printed: icoforge / other / host API | kernels launched | seconds | status |",
              "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    bad = []
    details = []
    for spec in runs:
        tool, sched = spec.split(":")
        tag = f"{tool}-{sched}"
        logs = sorted(w.glob(f"{tag}.*.log"))
        rc_file, secs_file, kern_file = w / f"{tag}.rc", w / f"{tag}.seconds", w / f"kernels-{tag}.txt"
        rc = int(rc_file.read_text()) if rc_file.exists() else None
        secs = secs_file.read_text().strip() if secs_file.exists() else "-"
        text = "\n".join(p.read_text(errors="replace") for p in logs)
        counts = [int(m) for m in SUMMARY.findall(text)]
        counts += [int(e) + int(w) for e, w in RACE_COUNTS.findall(text)]  # a warning is a hazard too
        errors = sum(counts)
        kernels = _kernels(kern_file)
        if rc is None:
            status = "not run in this call (not in RUNS, or no time left)"
        elif rc == 124:
            status = "TIMED OUT"
        elif errors or rc == 99:
            status = "ERRORS"
        elif rc != 0:
            status = f"FAILED (exit {rc})"
        elif not counts:
            status = "no summary in the log"
        elif kernels == 0:
            status = "no kernel launched"
        elif sched == "default" and kernels < plain:
            status = f"{kernels} kernels, {plain} without the tool"
        else:
            status = "ok"
        if status != "ok":
            bad.append(f"{tag}: {status}")
        mine, other, host = where_reported(text, ours)
        lines.append(f"| {tool} | {sched} | {errors if counts else '-'} | {mine} / {other} / {host} | {kernels} | {secs} | {status} |")
        if status != "ok" and text:
            first = [ln for ln in text.splitlines() if ln.startswith("=========")][:40]
            details += ["", f"## {tag}: {status}", "```", *first, "```"]
        races = RACE.findall(text)
        if races:
            details += ["", f"{tag}: " + "; ".join(sorted(set(races)))]
    lines += details
    lines += ["", f"{len(runs) - len(bad)} of {len(runs)} runs clean." if not bad else "NOT CLEAN: " + "; ".join(bad)]
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "run" and sys.argv[3] == "--":
        sys.exit(run(sys.argv[2], sys.argv[4:]))
    if len(sys.argv) >= 3 and sys.argv[1] == "report":
        sys.exit(report(sys.argv[2], sys.argv[3:]))
    sys.exit(__doc__)
