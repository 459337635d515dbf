"""`icoforge references make|check`: the stored GT4Py references of every dycore program."""

from __future__ import annotations

import argparse
import os
import time

from rich.console import Console

from icoforge.cli import common_args


STATIC_ARG = dict(
    choices=("icon4py", "none"),
    default="icon4py",
    help="the variant: icon4py's int/bool scalars compiled static (default, gt4py_references.json) "
    "or none (gt4py_references_static_none.json, what the emulated GPU tests compile)",
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("references", help="stored gtfn_cpu references of the dycore programs: make or check")
    actions = p.add_subparsers(dest="action", required=True)
    m = actions.add_parser("make", help="run gtfn_cpu on every program and store its outputs' digests")
    m.add_argument("programs", nargs="*", help="default: all; others already stored are kept")
    m.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (each builds with gtfn_cpu)")
    m.add_argument("--out", help="the store (default: the variant's, icoforge/suite/gt4py_references*.json)")
    m.add_argument("--static", **STATIC_ARG)
    m.set_defaults(func=cmd_make)
    c = actions.add_parser("check", help="run a backend on every program and compare with the store")
    c.add_argument("programs", nargs="*", help="default: all stored")
    c.add_argument("--backend", default="icoforge-cpu")
    c.add_argument("--store", help="the store (default: the variant's, icoforge/suite/gt4py_references*.json)")
    c.add_argument("--static", **STATIC_ARG)
    c.set_defaults(func=cmd_check)


def _names(programs: list[str]) -> list[str]:
    from icoforge.suite.catalogue import get_program, program_names

    return [get_program(n).name for n in programs] if programs else list(program_names())


def cmd_make(args: argparse.Namespace) -> int:
    from icoforge.suite import references

    names = _names(args.programs)
    common_args.require_counts(args, "jobs")
    console = Console(stderr=True)
    start, done = time.perf_counter(), [0]

    def on_done(name: str, error: str | None) -> None:
        done[0] += 1
        state = f"[red]FAILED {error}[/red]" if error else "stored"
        console.print(f"{done[0]}/{len(names)} {time.perf_counter() - start:6.0f} s  {name}: {state}")

    console.print(
        f"{references.REFERENCE_BACKEND} on {references.GRID}, {references.LEVELS} levels, seed {references.SEED}, "
        f"static scalars {args.static}: "
        f"{len(names)} programs in {args.jobs} processes"
    )
    failed = references.generate(names, args.jobs, args.out, on_done, static=args.static)
    console.print(f"{len(names) - len(failed)} of {len(names)} stored in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


def cmd_check(args: argparse.Namespace) -> int:
    from icoforge.grids import load_grid
    from icoforge.suite import references
    from icoforge.suite.catalogue import get_program

    store = references.load_store(args.store, static=args.static)
    meta = store["meta"]
    names = _names(args.programs) if args.programs else sorted(store["programs"])
    grid = load_grid(meta["grid"]["name"], levels=meta["levels"], show_progress=False)
    failed = 0
    for name in names:
        start = time.perf_counter()
        try:
            result = references.check_program(get_program(name), args.backend, grid, store)
            text = result.summary()
            failed += not result.passed
        except Exception as e:  # one program's error is its row; the others go on
            text, failed = f"ERROR: {name}: {type(e).__name__}: {e}", failed + 1
        print(f"{text}  ({time.perf_counter() - start:.1f} s)", flush=True)
    print(f"{len(names) - failed} of {len(names)} match the stored {meta['reference_backend']} references")
    return 1 if failed else 0
