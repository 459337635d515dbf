"""Ahead-of-time work without running anything: the kernel IR of a GT4Py program (for inspection,
code generation and compile checks) and a backend that only fills the GT4Py-passes cache."""

from __future__ import annotations

import dataclasses
from typing import Any

from gt4py.next import backend as gt_backend
from gt4py.next.otf import definitions

from icoforge.backend.frontend import fast_frontend, gt4py_compat
from icoforge.backend.ir import ir
from icoforge.backend.runtime import workflow


def compilable_program(program: Any, offset_provider: dict) -> definitions.CompilableProgramDef:
    """The executor's input for a GT4Py program with its declared argument types."""
    return gt4py_compat.compilable_program(program, offset_provider)


def program_ir(program: Any, offset_provider: dict, inline_policy: str = "auto") -> ir.ProgramIR:
    tr, _ = workflow.translate(compilable_program(program, offset_provider), inline_policy=inline_policy)
    return tr.program


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
        transforms=fast_frontend.transforms(),  # GT4Py's front end, less repeated work
    )
