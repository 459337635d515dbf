"""Every use of GT4Py internals (names outside its public API) in one place, each read against the
GT4Py versions in `CHECKED_GT4PY`. Elsewhere icoforge calls GT4Py's public API; a new GT4Py is
checked here (and in gt4py_speedups.py, whose patches are on only for these versions).

| what icoforge needs | GT4Py internal | used by |
| --- | --- | --- |
| a program's declared signature | `Program.past_stage.past_node.type.definition` | `compilable_program`, suite catalogue |
| GT4Py's check of call arguments | `ffront.past_process_args._validate_args` | `validate_call_args` (suite/argcheck.py) |
| the executor's input with static arguments bound | `otf.compiled_program._convert_to_argument_descriptor_context` | `compilable_program` |
| the worker pool GT4Py compiles in | `otf.runners.get_default_runner()._pool` | compile_pool.warm_up |
| compiling in the calling process for a while | `config.BUILD_JOBS_MODE`, `otf.runners.reset_default_runner` | `set_build_jobs_mode` (compile_pool.compiling_here) |
| when each program is submitted to it | `otf.runners.ProcessRunner.submit` (wrapped while recording) | compile_pool.recorded_submissions |
| a program's compiled variants | `Program._compiled_programs` (`.compiled_programs`, `._compilation_jobs`, `._finish_compilation_job`) | `compiled_programs`, `finish_compilations` |
| compilations in flight | `otf.compiled_program._ongoing_compilations` | `ongoing_compilations` |
| the frame of a first call waiting for its compile job | `otf.compiled_program.CompiledProgramsPool._finish_compilation_job` (the method's name) | `WAITS_FOR_COMPILE_JOB` (owners.py) |
| eve's tree machinery (faster passes) | see gt4py_speedups.py | workflow.gt4py_passes |
| GT4Py's front end with memoized cache keys, GTIR built with the fast machinery | `backend.Transforms` (its fields), `otf.workflow.CachedStep` (`input_fingerprinter`), `ffront.stages.semantic_fingerprinter` and the stage classes, `fingerprinting.catabolize`/`EmptyDeconstruction` | fast_frontend.transforms |
| GT4Py's passes one by one, stopped before the fusion loop | `iterator.transforms.*` (pass_manager's list), `pass_manager._process_symbolic_domains_option`, `fuse_as_fieldop._arg_inline_predicate` | gt4py_early.early_transforms |
| dead-code elimination with GT4Py's rules and result | `collapse_tuple._is_trivial_make_tuple_call`, `collapse_tuple._is_trivial_or_tuple_thereof_expr`, `ConstantFolding.fp_transform`, `itir.Program._NODE_SYMBOLS_`, the rules of `CollapseTuple` and `inline_lambda` (transcribed) | dead_code.dead_code_elimination |
| the names a pass draws, drawn again after a fallback | `eve.utils.SequentialIDGenerator.counter` (an `itertools.count`) | `save_uids`, `restore_uids` (dead_code) |
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

CHECKED_GT4PY = ("1.2.1",)

# GT4Py's method in whose frame a program's first call blocks on the program's compile job
WAITS_FOR_COMPILE_JOB = "_finish_compilation_job"


def program_signature(program: Any) -> Any:
    """The `ts.FunctionType` a GT4Py program declares (parameter names and types)."""
    return program.past_stage.past_node.type.definition


def compilable_program(
    program: Any, offset_provider: Mapping[str, Any], static: Mapping[str, Any] | None = None, transforms: Any = None
) -> Any:
    """The executor's input (`CompilableProgramDef`) for a GT4Py program with its declared argument
    types, `static` values bound as `Program.compile(**static)` binds them (gt4py 1.2: StaticArg
    descriptors in the compile-time arguments). `transforms`: GT4Py's front end (default its
    DEFAULT_TRANSFORMS; fast_frontend.transforms() is icoforge backends')."""
    from gt4py.next import backend as gt_backend
    from gt4py.next.otf import arguments, compiled_program, definitions

    ftype = program_signature(program)
    descriptors = {arguments.StaticArg: {n: arguments.StaticArg(value=v) for n, v in static.items()}} if static else {}
    contexts = compiled_program._convert_to_argument_descriptor_context(ftype, descriptors) if static else {}
    cta = arguments.CompileTimeArgs(
        args=tuple(ftype.pos_or_kw_args.values()),
        kwargs={},
        offset_provider=offset_provider,
        column_axis=None,
        argument_descriptor_contexts=contexts,
    )
    front_end = gt_backend.DEFAULT_TRANSFORMS if transforms is None else transforms
    return front_end(definitions.ConcreteProgramDef(data=program.definition_stage, args=cta))


def validate_call_args(program: Any, kwarg_types: Mapping[str, Any]) -> None:
    """GT4Py's own check of keyword arguments' types against the program's signature; raises its
    `DSLError` with GT4Py's message."""
    from gt4py.next.ffront import past_process_args

    past_process_args._validate_args(program.past_stage.past_node, arg_types=[], kwarg_types=kwarg_types)


def default_process_pool() -> Any:
    """The process pool GT4Py compiles in (a `concurrent.futures.ProcessPoolExecutor`), or None
    when it compiles in threads or serially."""
    from gt4py.next.otf import runners

    return getattr(runners.get_default_runner(), "_pool", None)


def set_build_jobs_mode(mode: Any) -> Any:
    """GT4Py's build mode (`config.BuildJobsMode`) from now on; returns the previous one. A
    default runner GT4Py already made (a worker pool) is shut down: the next compile makes one
    from the configuration."""
    from gt4py.next import config
    from gt4py.next.otf import runners

    previous = config.BUILD_JOBS_MODE
    config.BUILD_JOBS_MODE = mode
    runners.reset_default_runner()
    return previous


def serial_build_jobs_mode() -> Any:
    """GT4Py's mode that compiles in the calling thread (`BuildJobsMode.SERIAL`)."""
    from gt4py.next import config

    return config.BuildJobsMode.SERIAL


def compiled_programs(program: Any) -> Any:
    """The pool of a program's compiled variants, None before its first compile (or if it moved)."""
    return getattr(program, "__dict__", {}).get("_compiled_programs")


def finish_compilations(program: Any) -> bool:
    """Wait for `program`'s pending compilations and load them, keeping GT4Py's worker pool (its
    public `wait_for_compilation()` shuts the pool down). False if these internals are gone."""
    pool = compiled_programs(program)
    jobs = getattr(pool, "_compilation_jobs", None)
    if jobs is None or not hasattr(pool, "_finish_compilation_job"):
        return False
    for key in list(jobs):
        pool._finish_compilation_job(key)
    return True


def ongoing_compilations() -> list[Any]:
    """GT4Py's in-flight compilation futures (its internal registry; empty if it moved)."""
    try:
        from gt4py.next.otf import compiled_program

        return list(compiled_program._ongoing_compilations.keys())
    except (ImportError, AttributeError):
        return []


def save_uids(uids: Any, prefixes: tuple[str, ...]) -> dict[str, int]:
    """The number of the next name `uids` (an `IDGeneratorPool`) gives for each prefix, to go back
    there with `restore_uids`. Reading it takes a number from the prefix's `SequentialIDGenerator`
    counter, so the generator is replaced by one that gives that number next."""
    saved = {p: next(uids[p].counter) for p in prefixes}
    restore_uids(uids, saved)
    return saved


def restore_uids(uids: Any, saved: dict[str, int]) -> None:
    """The next names drawn from `uids` are those drawn after `save_uids` (again)."""
    for p, n in saved.items():
        uids[p] = dataclasses.replace(uids[p], counter=itertools.count(n))
