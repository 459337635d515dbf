"""Ahead-of-time work without running anything: GT4Py's passes for many programs in parallel
(they dominate compile time), generated sources for inspection and compile checks."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import multiprocessing
import time
from typing import Any, Iterable

from gt4py.next import backend as gt_backend
from gt4py.next.otf import arguments, definitions

from icoforge.backend import ir, workflow


def compilable_program(program: Any, offset_provider: dict) -> definitions.CompilableProgramDef:
    """The executor's input for a GT4Py program with its declared argument types."""
    types = program.past_stage.past_node.type.definition.pos_or_kw_args
    cta = arguments.CompileTimeArgs(
        args=tuple(types.values()),
        kwargs={},
        offset_provider=offset_provider,
        column_axis=None,
        argument_descriptor_contexts={},
    )
    return gt_backend.DEFAULT_TRANSFORMS(definitions.ConcreteProgramDef(data=program.definition_stage, args=cta))


def program_ir(program: Any, offset_provider: dict) -> ir.ProgramIR:
    tr, _ = workflow.translate(compilable_program(program, offset_provider))
    return tr.program


def _warm_one(name: str, grid: str, levels: int) -> tuple[str, float, str | None]:
    from icoforge.grids import load_grid
    from icoforge.suite.catalogue import get_program

    t0 = time.perf_counter()
    try:
        g = load_grid(grid, levels=levels, show_progress=False)
        workflow.cached_passes(compilable_program(get_program(name).program, g.connectivities))
        return name, time.perf_counter() - t0, None
    except Exception as e:  # reported per program, the others go on
        return name, time.perf_counter() - t0, f"{type(e).__name__}: {e}"


def warm_passes(names: Iterable[str], grid: str, levels: int, jobs: int, progress=None) -> list[tuple[str, float, str | None]]:
    """Run GT4Py's passes for `names` in `jobs` processes, filling the on-disk cache."""
    names = list(names)
    results = []
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_warm_one, n, grid, levels) for n in names]
        for fut in cf.as_completed(futures):
            results.append(fut.result())
            if progress is not None:
                progress(results[-1])
    return sorted(results)


# --- passes only: warm the cache of any GT4Py application -------------------------------------


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class PassesOnlyArtifact:
    """What `PassesOnlyExecutor` returns: loads as a program that does nothing."""

    program_name: str

    def load(self) -> Any:
        return _noop


@dataclasses.dataclass(frozen=True)
class PassesOnlyExecutor:
    """Runs GT4Py's passes into icoforge's cache and compiles nothing: an application built with
    `passes_only_backend()` "compiles" every program it would compile, and its calls do nothing.
    For filling a cache on one machine that another machine (the GPU host) then reads."""

    def __call__(self, inp: definitions.CompilableProgramDef) -> PassesOnlyArtifact:
        workflow.cached_passes(inp)
        return PassesOnlyArtifact(str(getattr(inp.data, "id", "?")))


def passes_only_backend() -> gt_backend.Backend:
    from gt4py.next import custom_layout_allocators as allocators

    return gt_backend.Backend(
        name="icoforge_passes_only",
        executor=PassesOnlyExecutor(),
        allocator=allocators.StandardCPUFieldBufferAllocator(),
        transforms=gt_backend.DEFAULT_TRANSFORMS,
    )
