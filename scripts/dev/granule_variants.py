"""The granule's program variants and their kernel fingerprints, on the CPU (no GPU, no CuPy).

    PYTHONPATH=$PWD .venv/bin/python scripts/dev/granule_variants.py --grid R2B6 --levels 80 [--json v.json]

A tuned entry (icoforge/backend/schedule/tuned.py) applies to a kernel only where the kernel's fingerprint is
the one tuned. The entries were tuned on the suite's inputs; the granule compiles the same programs
with icon4py's static arguments. This tool shows, per program variant the granule compiles, what
each entry of the H200 database would do there, and for a stale entry which static argument makes
the difference and the `icoforge tune` command for that variant.

How:
* icon4py's SolveNonhydro is constructed as the granule constructs it (`load_grid`,
  `build_static_fields`, `solver.grid_for_backend`, `solver.build_solver`), with a GT4Py backend
  whose executor compiles nothing: it records the program, its static arguments (formatted by
  `gpu.static_arguments`, as the GPU executor logs them) and the fingerprints of its kernels as
  the CUDA pipeline schedules them (`workflow.translate`, then `pipeline.gpu_passes` with the
  default CUDA schedule carrying the H200 entries, as `GPUExecutor` runs them), together with the
  decisions of `tuned.applied`. Fields are allocated on the CPU (StandardCPUFieldBufferAllocator).
* Construction compiles every variant (icon4py's `setup_program`: `Program.compile`, JIT off) and
  calls one program itself, `en_smag_fac_for_zero_nshift` (icon4py 0.4.1: the interpolated
  4th-order divergence damping factor, a field, no static argument of another program). The
  recorded artifacts load as callables that do nothing and count their calls (the log names the
  programs called), so that call computes nothing; the tool never steps the solver. After
  construction every pending compile job is finished and loaded
  (`gt4py_compat.finish_compilations`) to read its record.
* The executor runs in GT4Py's compile workers (spawned processes): it and its records are
  frozen, picklable dataclasses of this module, and the record comes back inside the artifact.
* For each program with a tuned entry the suite's variant (`make_inputs` +
  `static_param_names(info, "icon4py")`, what `icoforge tune` compiles) is fingerprinted on the
  same grid, and for a stale entry each static argument in which the granule differs from the
  suite is put alone into the suite's variant, to see which one changes the kernel's code.

The tune commands name only the static values in which the granule differs from the suite. Some
scale with the grid (horizontal bounds; nflat_gradp, from the topography): a command printed on a
grid other than R2B6 says to take those from an R2B6 run. R2B6/80 needs its static fields (11 min
on 2 cores, 6.2 GB cached) and then about 8 min; R2B4/80 about 2 to 5 min.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from collections.abc import Mapping
from typing import Any

from icoforge.backend.schedule import tuned

TUNED_DEVICE = ("cuda", "NVIDIA H200")
TUNE_GRID = ("R2B6", 80)  # the grid the database was tuned on


# --- recording executor (runs in GT4Py's compile workers) ----------------------------------------


@dataclasses.dataclass(frozen=True)
class VariantRecord:
    """One compiled variant: program, static arguments, kernels (as scheduled) and their prints."""

    program: str
    static_arguments: tuple[tuple[str, str], ...]  # (name, value as text), sorted
    kernels: tuple[tuple[str, str], ...]  # (kernel name, fingerprint)
    dim_sizes: tuple[tuple[str, int], ...]
    decisions: tuple[tuned.Decision, ...]  # tuned.applied's, for this program's entries

    def static_text(self) -> str:
        from icoforge.backend.runtime.gpu import static_arguments_text

        return static_arguments_text(self.static_arguments)


class _DoesNothing:
    """What a recorded variant loads as: calling it does nothing; it carries the record. Calls are
    counted (`called`), to show whether constructing the solver calls any program."""

    called: list[str] = []  # program of each call, in this (the main) process

    def __init__(self, record: VariantRecord):
        self.record = record

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        _DoesNothing.called.append(self.record.program)


@dataclasses.dataclass(frozen=True)
class RecordedArtifact:
    record: VariantRecord

    def load(self) -> _DoesNothing:
        return _DoesNothing(self.record)


def scheduled_kernels(
    program: Any, schedule: Any, dim_sizes: Mapping[str, int]
) -> tuple[tuple[tuple[str, str], ...], tuple[tuned.Decision, ...]]:
    """((kernel, fingerprint), ...) of `program` (kernel IR after translation) as the CUDA passes
    schedule it, and tuned.applied's decisions for it."""
    from icoforge.backend.schedule import pipeline

    decisions: list[tuned.Decision] = []
    scheduled, _, _ = pipeline.gpu_passes(program, schedule, "cuda", dim_sizes, decisions)
    return tuple((k.name, tuned.kernel_fingerprint(k)) for k in scheduled.kernels()), tuple(decisions)


def static_pairs(inp: Any) -> tuple[tuple[str, str], ...]:
    """The call's static arguments as (name, value text) pairs, the values as the GPU executor logs them."""
    from icoforge.backend.runtime.gpu import static_arguments

    return tuple((name, str(value)) for name, value in static_arguments(inp))


@dataclasses.dataclass(frozen=True)
class RecordingExecutor:
    """A GT4Py executor that records each compile (`VariantRecord`) and builds nothing."""

    schedule: Any  # ProgramSchedule

    def __call__(self, inp: Any) -> RecordedArtifact:
        from icoforge.backend.runtime import workflow

        tr, _ = workflow.translate(inp, inline_policy=self.schedule.inline)
        sizes = tuned.dim_sizes_of(inp.args.offset_provider)
        kernels, decisions = scheduled_kernels(tr.program, self.schedule, sizes)
        record = VariantRecord(tr.program.name, static_pairs(inp), kernels, tuple(sorted(sizes.items())), decisions)
        return RecordedArtifact(record)


def h200_schedule() -> Any:
    """The default CUDA schedule with the H200 entries, as `make_gpu_backend` gives it on the H200."""
    from icoforge.backend.schedule.schedule import default_program_schedule

    return dataclasses.replace(default_program_schedule("cuda"), tuned=tuned.for_device(*TUNED_DEVICE))


def recording_backend(schedule: Any) -> Any:
    from gt4py.next import backend as gt_backend
    from gt4py.next import custom_layout_allocators as allocators

    return gt_backend.Backend(
        name="icoforge_variant_recorder",
        executor=RecordingExecutor(schedule),
        allocator=allocators.StandardCPUFieldBufferAllocator(),
        transforms=gt_backend.DEFAULT_TRANSFORMS,
    )


# --- the granule's variants ---------------------------------------------------------------------


def granule_variants(grid: Any, schedule: Any, log=print, only_used: bool = False) -> list[VariantRecord]:
    """Every variant SolveNonhydro compiles on `grid` (an icoforge grid), recorded; `only_used`: only
    those the granule's steps call (`build_solver(only_used_variants=True)`, about half, faster)."""
    from icoforge.granule.fields import build_static_fields
    from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND
    from icoforge.granule.solver import build_solver, grid_for_backend

    t0 = time.perf_counter()
    static = build_static_fields(grid, DEFAULT_FACTORY_BACKEND, in_child=True)
    log(f"static fields {'from the cache' if static.cached else 'computed'} in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    granule_grid = grid_for_backend(grid, on_gpu=False)
    solver = build_solver(granule_grid, static, recording_backend(schedule), only_used_variants=only_used)
    log(f"SolveNonhydro constructed in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    records = collect_records(solver)
    log(f"{len(records)} variants recorded in {time.perf_counter() - t0:.1f} s more; "
        f"programs called during construction: {sorted(set(_DoesNothing.called)) or 'none'}")  # fmt: skip
    return records


def collect_records(solver: Any) -> list[VariantRecord]:
    """The records of every variant bound on `solver` (pending jobs finished and loaded first);
    a program bound under several attributes is listed once per variant."""
    from icoforge.backend.frontend import gt4py_compat
    from icoforge.granule import instrument

    seen: dict[tuple, VariantRecord] = {}
    for bound in instrument.find_programs(solver):
        gt4py_compat.finish_compilations(bound.partial.func)
        for loaded in instrument.loaded_variants(bound):
            record = loaded.record
            seen.setdefault((record.program, record.static_arguments), record)
    return sorted(seen.values(), key=lambda r: (r.program, r.static_arguments))


# --- statuses of the tuned entries --------------------------------------------------------------


def entry_status(entry: Any, record: VariantRecord) -> str:
    """What the entry does in this variant, decided here from the fingerprints and sizes (a check
    of tuned.applied, whose decision per kernel is `applied_status`)."""
    prints = dict(record.kernels)
    if entry.kernel not in prints:
        return tuned.NO_SUCH_KERNEL
    if not entry.fits(dict(record.dim_sizes)):
        return tuned.OTHER_SIZES
    if prints[entry.kernel] != entry.fingerprint:
        return tuned.CODE_CHANGED
    return tuned.APPLIED


def kernel_status(entries: list[Any], record: VariantRecord) -> str:
    """What the kernel's entries (one per tuned variant) do together: the entry of the call's size
    class with the kernel's code applies; else the nearest miss is what tuned.applied reports."""
    statuses = {entry_status(e, record) for e in entries}
    order = (tuned.APPLIED, tuned.CODE_CHANGED, tuned.OTHER_SIZES, tuned.NO_SUCH_KERNEL)
    return next(s for s in order if s in statuses)


def applied_status(entry: Any, record: VariantRecord) -> str | None:
    """The status tuned.applied gave `entry`'s kernel in this variant (None: it decided nothing on it)."""
    return next((d.status for d in record.decisions if d.kernel == entry.kernel), None)


def entries_by_program(schedule: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for e in schedule.tuned:
        out.setdefault(e.program, []).append(e)
    return out


# --- the suite's variant, for comparison --------------------------------------------------------


def suite_statics(info: Any, grid: Any) -> dict[str, Any]:
    """The static scalars `icoforge tune` / `icoforge run` compile the program with (seed 0)."""
    from icoforge.suite import make_inputs
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    args = make_inputs(info, grid, 0)
    return {n: cast_scalar(args[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}


def suite_prints(info: Any, grid: Any, static: Mapping[str, Any], schedule: Any) -> dict[str, str]:
    """Kernel fingerprints of the suite's program with these static values, as scheduled for CUDA."""
    from icoforge.backend.runtime import workflow
    from icoforge.perf.static import compilable_program_static

    tr, _ = workflow.translate(
        compilable_program_static(info.program, grid.connectivities, static), inline_policy=schedule.inline
    )
    kernels, _ = scheduled_kernels(tr.program, schedule, tuned.dim_sizes_of(grid.connectivities))
    return dict(kernels)


def differing_statics(suite: Mapping[str, Any], record: VariantRecord) -> dict[str, tuple[str, str]]:
    """name -> (suite's value, granule's value) where they differ; a scalar the suite passes at
    run time (a float: icon4py binds every scalar constant, the suite its ints and bools) says so."""
    out = {}
    for name, value in record.static_arguments:
        mine = str(suite[name]) if name in suite else "not static"
        if mine != value:
            out[name] = (mine, value)
    return out


def culprits(
    info: Any, grid: Any, suite: Mapping[str, Any], record: VariantRecord, kernel: str, schedule: Any
) -> dict[str, Any]:
    """For one stale kernel: each differing static argument alone in the suite's variant (does the
    kernel's fingerprint change?), and all of the granule's values together (the granule's print?)."""
    from icoforge.suite.runner import static_overrides

    granule = {n: v for n, v in record.static_arguments if n in suite}  # the scalars the suite binds too
    base = suite_prints(info, grid, suite, schedule).get(kernel)
    alone = {}
    for name in differing_statics(suite, record):
        if name in granule:
            print_now = suite_prints(
                info, grid, {**suite, **static_overrides(info, {name: granule[name]})}, schedule
            ).get(kernel)
            alone[name] = print_now != base
    granule_values = static_overrides(info, granule)
    together = suite_prints(info, grid, {**suite, **granule_values}, schedule).get(kernel)
    return {"suite_fingerprint": base, "changes_alone": alone,
            "all_granule_values_give_granule_print": together == dict(record.kernels).get(kernel)}  # fmt: skip


# --- report ---------------------------------------------------------------------------------------


GRID_DEPENDENT = ("horizontal", "cell", "edge", "vertex", "nflat_gradp")  # bounds, and a level from the topography


def tune_command(record: VariantRecord, info: Any, suite: Mapping[str, Any], grid_name: str) -> str:
    """`icoforge tune` for this variant: the static values in which the granule differs from the
    suite (the others are the suite's already on this grid). `--static-value` takes int and bool
    scalars only (the suite passes floats at run time): a float the granule binds is named after
    the command, it cannot be reproduced by the suite."""
    from icoforge.suite.runner import static_param_names

    tunable = set(static_param_names(info, "icon4py"))
    differing = differing_statics(suite, record)
    diff = {n: g for n, (_, g) in differing.items() if n in tunable}
    values = " ".join(f"--static-value {n}={v}" for n, v in sorted(diff.items()))
    cmd = f"icoforge tune {record.program} --grid {TUNE_GRID[0]} --levels {TUNE_GRID[1]} --backend icoforge-cuda --space full {values}"
    if grid_name != TUNE_GRID[0] and any(h in n for n in diff for h in GRID_DEPENDENT):
        cmd += f"   # values of {grid_name}: take the grid-dependent ones from an {TUNE_GRID[0]} run"
    if untunable := sorted(set(differing) - tunable):
        cmd += f"   # not reproduced (the suite passes them at run time): {', '.join(untunable)}"
    return cmd


def analyse(records: list[VariantRecord], schedule: Any, grid: Any, explain: bool, log=print) -> list[dict[str, Any]]:
    """One row per (tuned entry, granule variant of its program)."""
    from icoforge.suite import get_program

    rows = []
    for program, entries in sorted(entries_by_program(schedule).items()):
        info = get_program(program)
        suite = suite_statics(info, grid)
        suite_now = suite_prints(info, grid, suite, schedule)
        variants = [r for r in records if r.program == program]
        if not variants:
            rows.append(
                {"program": program, "kernel": [e.kernel for e in entries], "status": "not compiled by the granule"}
            )
            continue
        for record in variants:
            for e in entries:
                row = entry_row(e, record, info, grid, suite, suite_now, schedule, explain, log)
                row["kernel_status"] = kernel_status([o for o in entries if o.kernel == e.kernel], record)
                rows.append(row)
    return rows


def entry_row(
    e: Any, record: VariantRecord, info: Any, grid: Any, suite: dict, suite_now: dict, schedule: Any, explain: bool, log
) -> dict[str, Any]:
    status = entry_status(e, record)
    row = {
        "program": record.program, "kernel": e.kernel, "status": status, "applied_status": applied_status(e, record),
        "granule_fingerprint": dict(record.kernels).get(e.kernel), "tuned_fingerprint": e.fingerprint,
        "suite_fingerprint_here": suite_now.get(e.kernel), "static_arguments": record.static_text(),
        "differs_from_suite": {n: {"suite": s, "granule": g} for n, (s, g) in differing_statics(suite, record).items()},
    }  # fmt: skip
    if status == tuned.CODE_CHANGED:
        row["tune_command"] = tune_command(record, info, suite, grid.name)
        if explain:
            log(f"{e.kernel}: trying the granule's static arguments one by one in the suite's variant")
            row["culprits"] = culprits(info, grid, suite, record, e.kernel, schedule)
    return row


def print_table(rows: list[dict[str, Any]], records: list[VariantRecord], grid: Any) -> None:
    print(
        f"\n{len(records)} variants compiled by the granule on {grid.name}/{grid.num_levels} (program: static arguments):"
    )
    for r in records:
        print(f"  {r.program} ({len(r.kernels)} kernels): {r.static_text() or 'none'}")
    print("\ntuned entry                               status          suite print here = tuned?  variant")
    for row in rows:
        kernel = row["kernel"] if isinstance(row["kernel"], str) else ", ".join(row["kernel"])
        same = (
            ""
            if "suite_fingerprint_here" not in row
            else ("yes" if row["suite_fingerprint_here"] == row["tuned_fingerprint"] else "no")
        )
        print(f"{kernel:<42}{row['status']:<16}{same:<27}{row.get('static_arguments', '')}")
        for name, d in row.get("differs_from_suite", {}).items():
            alone = row.get("culprits", {}).get("changes_alone", {}).get(name)
            verdict = "" if alone is None else ("  <- changes the kernel alone" if alone else "  (no change alone)")
            print(f"    {name}: suite {d['suite']}, granule {d['granule']}{verdict}")
        if "culprits" in row:
            print(
                f"    all granule values in the suite's variant give the granule's print: {row['culprits']['all_granule_values_give_granule_print']}"
            )
        if "tune_command" in row:
            print(f"    {row['tune_command']}")


def main(argv: list[str] | None = None) -> int:
    from icoforge.grids import load_grid

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grid", default="R2B4")
    p.add_argument("--levels", type=int, default=80)
    p.add_argument("--json", metavar="FILE", help="write the variants and the rows as JSON")
    p.add_argument("--only-used-variants", dest="only_used", action="store_true",
                   help="only the variants the granule's steps call, as `icoforge greenline --only-used-variants`")  # fmt: skip
    p.add_argument("--no-explain", dest="explain", action="store_false",
                   help="skip trying the differing static arguments one by one (one translation each)")  # fmt: skip
    args = p.parse_args(argv)
    log = lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)  # noqa: E731
    grid = load_grid(args.grid, levels=args.levels, show_progress=False)
    schedule = h200_schedule()
    records = granule_variants(grid, schedule, log, args.only_used)
    rows = analyse(records, schedule, grid, args.explain, log)
    print_table(rows, records, grid)
    if args.json:
        data = {"grid": grid.name, "levels": args.levels, "device": " ".join(TUNED_DEVICE),
                "variants": [dataclasses.asdict(r) for r in records], "entries": rows}  # fmt: skip
        pathlib.Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
