"""The GT4Py executor: GTIR -> GT4Py's passes -> kernel IR -> source -> build -> loadable artifact.

Each stage is a plain function of the previous stage's value; `translate` is cached on disk
because GT4Py's passes take seconds to minutes. The executor and the artifact are frozen,
picklable dataclasses, as GT4Py's worker-process build mode requires.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import os
import pathlib
import pickle
import sys
import time
from typing import Any

from gt4py.next import common
from gt4py.next.iterator import ir as itir
from gt4py.next.iterator.transforms import pass_manager
from gt4py.next.otf import definitions, stages

from icoforge import settings
from icoforge.backend.ir import ir
from icoforge.backend.lowering import lower
from icoforge.backend.schedule import pipeline
from icoforge.backend.runtime import deferral
from icoforge.cache import atomic_write_bytes, cache_dir, file_lock
from icoforge.errors import CallArgumentError, IcoforgeError

settings.prepare_openmp()  # before the first generated module loads libgomp

def in_pool_worker() -> bool:
    """Running in a child process (GT4Py's compile pool, or one of icoforge's own pools)."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


_priority_lowered = False


def yield_to_main_process() -> None:
    """In a compile worker, lower this process' CPU priority once (nice `settings.worker_nice`,
    default 5; 0 keeps it). While icon4py constructs SolveNonhydro, the main process lowers one program after
    the other to GTIR and submits it; with as many busy workers as cores it got a fraction of a core,
    so every later program, the vertical solvers among them, was submitted late (H200, REGIONAL/80
    cold, session 7: construction 23.3 s with the workers busy, 13.8 s warm)."""
    global _priority_lowered
    if _priority_lowered or not in_pool_worker():
        return
    _priority_lowered = True
    try:
        os.nice(settings.current().worker_nice)
    except OSError:  # not permitted: run at the normal priority
        pass


def gt4py_passes(program: itir.Program, offset_provider: common.OffsetProvider) -> itir.Program:
    """GT4Py's own transformations, configured as its gtfn backend configures them, by default
    with GT4Py's tree machinery sped up while they run (`gt4py_speedups`: the same result, about
    1.8x faster); ICOFORGE_FAST_PASSES=0, or a GT4Py other than the one checked, runs them plain.
    By default stopped before GT4Py's fusion loop (gt4py_early.py); ICOFORGE_EARLY_GTIR=0: all of them."""
    from icoforge.backend.frontend import gt4py_early, gt4py_speedups

    def run() -> itir.Program:
        if settings.current().early_gtir:
            return gt4py_early.early_transforms(program, offset_provider)
        return pass_manager.apply_common_transforms(
            program, extract_temporaries=True, unroll_reduce=True, offset_provider=offset_provider
        )

    if not settings.current().fast_passes or not gt4py_speedups.applicable():
        return run()
    with gt4py_speedups.patched():
        return run()


def passes_key(inp: definitions.CompilableProgramDef) -> str:
    """What GT4Py's passes depend on: the GTIR they get (static arguments are already substituted
    into it), the parameters' types, the connectivity types (skip values, max neighbours), the
    table sizes (the passes bake grid sizes into temporaries' domains) and GT4Py itself.

    The GTIR goes in through GT4Py's location-agnostic fingerprint: source locations hold file
    paths, so a key with them would differ between two installations of the same icon4py (this
    machine and the GPU machine), and a cache computed on one would never be found on the other.
    Node types are skipped by that fingerprint; the parameter types are hashed separately."""
    import gt4py
    from gt4py.next.iterator import ir as gtir

    program = inp.data
    params = repr([(str(p.id), repr(p.type)) for p in program.params])
    op_type = common.offset_provider_to_type(inp.args.offset_provider)
    sizes = sorted((k, tuple(getattr(v, "shape", ()))) for k, v in inp.args.offset_provider.items())
    parts = [
        gtir.lenient_ir_fingerprinter(program), params, repr(inp.args.column_axis),
        repr(sorted((k, repr(v)) for k, v in op_type.items())), repr(sizes), gt4py.__version__,
        "early-v1" if settings.current().early_gtir else "passes-v2",
    ]  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Translation:
    program: ir.ProgramIR
    passes_seconds: float  # 0.0 when GT4Py's passes came from the cache
    lower_seconds: float
    passes_cached: bool


def translate(inp: definitions.CompilableProgramDef, use_cache: bool = True, inline_policy: str = "auto") -> tuple[Translation, bool]:
    """GT4Py's passes (cached on disk: seconds to minutes) then our lowering and translation
    passes (milliseconds, so they are redone on every build and a change to them never serves a
    stale translation). `inline_policy`: `ProgramSchedule.inline`. On CPython 3.12.0/3.12.1 it runs
    with the C recursion limit of later releases, in a thread with the stack for it
    (frontend/c_recursion.py: GT4Py's visitors recurse per IR level, and muphys' graupel_run is
    deeper than 3.12.1's limit lets them go); elsewhere in the calling thread."""
    from icoforge.backend.frontend import c_recursion

    return c_recursion.call(_translate, inp, use_cache, inline_policy)


def _translate(inp: definitions.CompilableProgramDef, use_cache: bool, inline_policy: str) -> tuple[Translation, bool]:
    t0 = time.perf_counter()
    trace_dir = settings.current().trace
    key = passes_key(inp) if use_cache or trace_dir else ""  # once: ~0.1 s on the predictor solver
    transformed, hit = cached_passes(inp, key) if use_cache else (gt4py_passes(inp.data, inp.args.offset_provider), False)
    t1 = time.perf_counter()
    prog = pipeline.translate_passes(lower_gtir(inp, transformed), inline_policy)
    if trace_dir:
        _trace_translation(trace_dir, inp, key, hit, t1 - t0, time.perf_counter() - t1)
    return Translation(prog, 0.0 if hit else t1 - t0, time.perf_counter() - t1, hit), hit


def lower_gtir(inp: definitions.CompilableProgramDef, transformed: itir.Program) -> ir.ProgramIR:
    """GTIR after GT4Py's passes -> kernel IR, before icoforge's passes (pipeline.py)."""
    op_type = common.offset_provider_to_type(inp.args.offset_provider)
    return lower.lower_program(transformed, inp.args.args, op_type, early=settings.current().early_gtir)


def _trace_translation(
    trace_dir: str, inp: definitions.CompilableProgramDef, key: str, hit: bool, passes_s: float, lower_s: float
) -> None:
    """ICOFORGE_TRACE=DIR: one line per translation on stderr, and on a passes-cache miss the GTIR
    that missed (DIR/<program>-<key>.gtir), to find out on another machine why a carried cache
    did not serve it (a static argument with other last bits, another GT4Py, ...)."""
    name = getattr(inp.data, "id", "?")
    passes = "passes cached" if hit else f"passes computed in {passes_s:.1f} s"
    print(f"[icoforge {time.strftime('%H:%M:%S')}] {name}: {passes}, lowered in {lower_s:.2f} s (key {key[:12]})", file=sys.stderr, flush=True)
    if not hit:
        path = pathlib.Path(trace_dir)
        path.mkdir(parents=True, exist_ok=True)
        (path / f"{name}-{key}.gtir").write_text(str(inp.data))


_MAGIC = b"icoforge-gtir-v1\n"


def cached_passes(inp: definitions.CompilableProgramDef, key: str | None = None) -> tuple[itir.Program, bool]:
    """(transformed GTIR, cache hit); `key`: `passes_key(inp)` where the caller has it. Entries
    carry a checksum; a corrupt one is recomputed."""
    path = cache_dir("gt4py-passes") / f"{inp.data.id}-{key or passes_key(inp)}.pkl"
    cached = _read_checked(path)
    if cached is not None:
        return cached, True
    with file_lock(path.with_suffix(".lock")):
        cached = _read_checked(path)
        if cached is not None:
            return cached, True
        transformed = gt4py_passes(inp.data, inp.args.offset_provider)
        payload = pickle.dumps(transformed)
        atomic_write_bytes(path, _MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    return transformed, False


def _read_checked(path: pathlib.Path) -> itir.Program | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data.startswith(_MAGIC):
        return None
    digest, _, payload = data[len(_MAGIC) :].partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return None
    try:
        return pickle.loads(payload)
    except Exception:
        return None


# ---------------------------------------------------------------------------------------------
# CPU artifact


def module_name_for(program: ir.ProgramIR) -> str:
    digest = hashlib.sha256(str(program).encode()).hexdigest()[:10]
    return f"icf_{lower.short_program_name(program.name)}_{digest}"


@dataclasses.dataclass(frozen=True)
class CPUArtifact:
    """A built extension module; `load()` gives GT4Py's callable."""

    module_path: str
    module_name: str
    program_name: str
    timings: tuple[tuple[str, float], ...] = ()
    program_ir: ir.ProgramIR | None = dataclasses.field(default=None, compare=False, repr=False)  # for perf models
    tuple_params: tuple[tuple[int, int], ...] = ()  # ir.ProgramIR.tuple_params

    def load(self) -> stages.ExecutableProgram:
        loader = importlib.machinery.ExtensionFileLoader(self.module_name, self.module_path)
        spec = importlib.util.spec_from_file_location(self.module_name, self.module_path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        mod.set_error_class(IcoforgeError)
        run = mod.run

        def program(*args: Any, offset_provider: common.OffsetProvider, out: Any = None, **kwargs: Any) -> None:
            if out is not None:
                args = (*args, out)
            args = flat_call_args(args, self.tuple_params, self.program_name)
            if kwargs:
                raise IcoforgeError(f"{self.program_name}: unexpected keyword arguments {sorted(kwargs)}")
            if (block := deferral.active()) is not None:
                block.flush()  # the C++ target is not deferred: what a substep block recorded runs first
            run(*args, offset_provider)

        program.icoforge_artifact = self  # type: ignore[attr-defined]
        return program


@dataclasses.dataclass(frozen=True)
class CPUExecutor:
    """GT4Py executor for the C++/OpenMP target. Of a schedule it takes the inline policy only
    (`ProgramSchedule.inline`): the C++ target has no launch layout."""

    use_translation_cache: bool = True
    inline_policy: str = "auto"

    def __call__(self, inp: definitions.CompilableProgramDef) -> CPUArtifact:
        from icoforge.backend.runtime.build import build_cpu_module
        from icoforge.backend.codegen.cpp import render_program_cpp

        started_at = time.time()
        yield_to_main_process()
        t0 = time.perf_counter()
        tr, hit = translate(inp, self.use_translation_cache, self.inline_policy)
        t1 = time.perf_counter()
        name = module_name_for(tr.program)
        source = render_program_cpp(tr.program, name)
        so, build_s = build_cpu_module(source, name)
        timings = (("translate", t1 - t0), ("translation_cache_hit", float(hit)), ("build", build_s))
        return CPUArtifact(
            str(so),
            name,
            tr.program.name,
            (*timings, ("started_at", started_at), ("finished_at", time.time())),
            tr.program,
            tr.program.tuple_params,
        )


def flat_call_args(args: tuple, tuple_params: tuple[tuple[int, int], ...], program: str) -> tuple:
    """GT4Py's call arguments in `ProgramIR.params` order: each tuple-of-fields argument unpacked."""
    if not tuple_params:
        return args
    sizes = dict(tuple_params)
    flat: list = []
    for position, a in enumerate(args):
        n = sizes.get(position)
        if n is None:
            flat.append(a)
            continue
        if not isinstance(a, tuple) or len(a) != n:
            got = f"a tuple of {len(a)}" if isinstance(a, tuple) else type(a).__name__
            raise CallArgumentError(f"{program}: argument {position + 1} must be a tuple of {n} fields, got {got}")
        flat.extend(a)
    return tuple(flat)
