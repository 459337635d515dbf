"""Stored GT4Py references: every dycore program's outputs from gtfn_cpu, kept as digests.

CI cannot afford gtfn_cpu's compile of all 78 programs on 2 cores (about 15 minutes on top of ours),
so its results on fixed inputs are recorded once (`make references`) and every CI run compares
icoforge against the record (`make test-references`).

Inputs: `make_inputs(info, grid, seed)` with the pure outputs poisoned (verify.py's protocol).
Two stores, one per static variant (runner.static_param_names), each recorded by its own gtfn_cpu
compile: `gt4py_references.json` with icon4py's int/bool scalars compiled static (as icon4py's
setup_program binds them; what the CPU tests and the fused/GPU tests compile), and
`gt4py_references_static_none.json` with every scalar a run-time argument (what the emulated
CUDA/HIP tests compile: tests/backend/test_gpu_emulation.py). The scalar values are the same. Per program the store keeps a hash of every input (values
and scalars): when today's inputs differ from the reference's (a changed ranges table, another
numpy), the check says "inputs changed, regenerate" instead of reporting wrong numbers.

Per output, enough to catch a single wrong point and far smaller than the array:
- `written` and `mask`: how many points the reference wrote and a hash of where; a backend that
  skips a point or writes outside the reference's domain fails exactly;
- `sums`: sum, sum |x|, sum x^2 and PROJECTIONS sums weighted by seeded random weights in [-1, 1]
  over the written points, compared as |test - ref| <= SUM_RTOL * scale (scale: sum |x| for the
  linear sums, sum x^2 for the square). One point off by more than SUM_RTOL * sum |x| moves the
  plain sum; errors that cancel in it (two points swapped) move the weighted ones;
- `samples`: the values at SAMPLES seeded written points and at the largest |value|, compared like
  verify.py (rtol SAMPLE_RTOL, atol ATOL_SCALE * max |ref|).
A NaN or Inf at a written point never passes; fields that are not outputs must come back unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.suite.catalogue import ProgramInfo
from icoforge.suite.inputs import is_field, to_numpy
from icoforge.suite.runner import BackendLike, resolve_backend
from icoforge.suite.verify import ATOL_SCALE, is_poisoned, poisoned_inputs, run_once, same_bits

STORE = pathlib.Path(__file__).with_name("gt4py_references.json")
# the store of each static variant (runner.static_param_names); the file's meta names its variant
STORES = {"icon4py": STORE, "none": STORE.with_name("gt4py_references_static_none.json")}
# R2B3 (5,120 cells) at 10 levels: what the other CI tests compile on (tests' `tiny_grid`), so the
# GT4Py-passes cache is shared; the level indices of ranges.py all fit in 10 levels.
GRID, LEVELS, SEED = "R2B3", 10, 0
REFERENCE_BACKEND = "gtfn_cpu"
STATIC = "icon4py"

SUM_RTOL = 1e-12
SAMPLE_RTOL = 1e-10
SAMPLES = 16
PROJECTIONS = 3
FORMAT = 1
VERSIONED = ("gt4py", "icon4py-common", "icon4py-atmosphere-dycore", "icon-grid-generator", "numpy")


# --- digests -----------------------------------------------------------------------------------


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the names (stable across processes, unlike hash())."""
    return np.random.default_rng([zlib.crc32("/".join(map(str, key)).encode())])


def _mask_hash(mask: np.ndarray) -> str:
    return hashlib.sha256(np.packbits(np.ascontiguousarray(mask, dtype=bool)).tobytes()).hexdigest()[:16]


def _weights(program: str, output: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    return _rng(program, output, seed, "weights").uniform(-1.0, 1.0, (PROJECTIONS, *shape))


def _sums(values: np.ndarray, weights: np.ndarray) -> dict[str, Any]:
    """values: float64 with 0 at unwritten points."""
    return {
        "sum": float(np.sum(values)),
        "abs": float(np.sum(np.abs(values))),
        "sq": float(np.sum(values * values)),
        "proj": [float(np.sum(w * values)) for w in weights],
    }


def written_mask(array: np.ndarray) -> np.ndarray:
    return ~is_poisoned(array)


def digest_output(program: str, output: str, ref: np.ndarray, seed: int) -> dict[str, Any]:
    """The stored digest of one reference output array."""
    written = written_mask(ref)
    values = np.where(written, ref.astype(np.float64), 0.0)
    if not np.isfinite(values).all():
        raise IcoforgeError(f"{program}.{output}: the reference has NaN/Inf at written points; not storable")
    flat = np.flatnonzero(written)
    picks = _rng(program, output, seed, "samples").choice(flat, size=min(SAMPLES, flat.size), replace=False)
    if flat.size:
        picks = np.append(picks, int(np.argmax(np.abs(values))))
    points = sorted({int(i) for i in picks})
    return {
        "shape": list(ref.shape),
        "dtype": str(ref.dtype),
        "written": int(flat.size),
        "mask": _mask_hash(written),
        "max_abs": float(np.abs(values).max()) if values.size else 0.0,
        "sums": _sums(values, _weights(program, output, ref.shape, seed)),
        "samples": {"at": points, "values": [float(values.flat[i]) for i in points]},
    }


def input_hash(args: dict[str, Any]) -> str:
    """Hash of every argument (field values with shape and dtype, scalars by repr)."""
    h = hashlib.sha256()
    for name in sorted(args):
        value = args[name]
        h.update(name.encode())
        if is_field(value):
            array = np.ascontiguousarray(to_numpy(value))
            h.update(f"{array.dtype}{array.shape}".encode())
            h.update(array.tobytes())
        else:
            h.update(repr(value).encode())
    return h.hexdigest()[:16]


def compare_output(program: str, output: str, test: np.ndarray, ref: dict[str, Any], seed: int) -> list[str]:
    """Problems of one test output against its stored digest (empty: it matches)."""
    if list(test.shape) != ref["shape"] or str(test.dtype) != ref["dtype"]:
        return [f"{output}: {test.dtype}{list(test.shape)}, reference {ref['dtype']}{ref['shape']}"]
    written = written_mask(test)
    values = np.where(written, test.astype(np.float64), 0.0)
    problems = []
    if (n := int(written.sum())) != ref["written"] or _mask_hash(written) != ref["mask"]:
        problems.append(f"{output}: wrote {n} points, reference {ref['written']} (or at other points)")
    if bad := int((~np.isfinite(values)).sum()):
        problems.append(f"{output}: {bad} NaN/Inf at written points")
    sums = _sums(values, _weights(program, output, test.shape, seed))
    scale = {"sum": ref["sums"]["abs"], "abs": ref["sums"]["abs"], "sq": ref["sums"]["sq"], "proj": ref["sums"]["abs"]}
    for key, limit in scale.items():
        got, want = np.atleast_1d(sums[key]), np.atleast_1d(ref["sums"][key])
        err = np.abs(got - want)
        if not (err <= SUM_RTOL * limit).all():  # NaN fails too
            problems.append(f"{output}: checksum {key} {got.tolist()} vs reference {want.tolist()}")
    at = np.asarray(ref["samples"]["at"], dtype=np.int64)
    want = np.asarray(ref["samples"]["values"], dtype=np.float64)
    got = values.flat[at] if at.size else np.zeros(0)
    atol = ATOL_SCALE * ref["max_abs"]
    off = ~(np.abs(got - want) <= atol + SAMPLE_RTOL * np.abs(want))
    if off.any():
        i = int(np.argmax(off))
        where = tuple(int(x) for x in np.unravel_index(int(at[i]), test.shape))
        problems.append(f"{output}: {int(off.sum())} sampled points differ, e.g. at {where}: {got[i]!r} vs {want[i]!r}")
    return problems


# --- one program -------------------------------------------------------------------------------


def record_program(
    info: ProgramInfo, grid: Any, seed: int = SEED, backend: BackendLike = REFERENCE_BACKEND, static: str = STATIC
) -> dict:
    """Run `info.program` on the reference backend (scalars compiled static as `static` says)
    and return its store entry."""
    host_args = poisoned_inputs(info, grid, seed)
    fields = run_once(info, backend, grid, host_args, static)
    return {
        "inputs": input_hash(host_args),
        "outputs": {name: digest_output(info.name, name, fields[name], seed) for name in info.outputs},
    }


@dataclasses.dataclass(frozen=True)
class ReferenceCheck:
    program: str
    backend: str
    problems: tuple[str, ...]
    static: str = STATIC  # the variant compared (the store's)

    @property
    def passed(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        head = f"{verdict}: {self.program} on {self.backend} vs stored {REFERENCE_BACKEND} reference"
        if self.static != STATIC:
            head += f" (static scalars: {self.static})"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


def compare_program(
    info: ProgramInfo, entry: dict, host_args: dict[str, Any], fields: dict[str, np.ndarray], seed: int
) -> list[str]:
    """Problems of a run (`fields`: every field after the call on copies of `host_args`)."""
    problems = []
    if input_hash(host_args) != entry["inputs"]:
        problems.append("inputs differ from the reference's (ranges table or numpy changed?): run `make references`")
    if set(entry["outputs"]) != set(info.outputs):
        problems.append(f"outputs {sorted(info.outputs)}, reference has {sorted(entry['outputs'])}")
    for name in info.outputs:
        if name in entry["outputs"]:
            problems += compare_output(info.name, name, fields[name], entry["outputs"][name], seed)
    for name, value in host_args.items():
        if is_field(value) and name not in info.outputs and not same_bits(to_numpy(value), fields[name]):
            problems.append(f"{name}: input modified")
    return problems


def check_program(
    info: ProgramInfo, backend: BackendLike, grid: Any, store: dict | None = None, *, run: Callable | None = None
) -> ReferenceCheck:
    """Run `info.program` on `backend` with the reference's inputs, its scalars compiled static
    as the store's variant says (meta "static"), and compare with the store.

    `run(info, backend, grid, host_args) -> fields` replaces the real run (tests inject faults)."""
    store = store if store is not None else load_store()
    meta = store["meta"]
    _check_grid(grid, meta)
    static = meta.get("static", STATIC)
    entry = store["programs"].get(info.name)
    name = resolve_backend(backend)[0]
    if entry is None:
        hint = f"run `icoforge references make --static {static} {info.name}`"
        return ReferenceCheck(info.name, name, (f"no stored reference for this program: {hint}",), static)
    host_args = poisoned_inputs(info, grid, meta["seed"])
    fields = (run or (lambda i, b, g, a: run_once(i, b, g, a, static)))(info, backend, grid, host_args)
    return ReferenceCheck(info.name, name, tuple(compare_program(info, entry, host_args, fields, meta["seed"])), static)


def _check_grid(grid: Any, meta: dict) -> None:
    got = {"cells": int(grid.num_cells), "levels": int(grid.num_levels)}
    want = {"cells": meta["grid"]["cells"], "levels": meta["levels"]}
    if got != want:
        raise IcoforgeError(
            f"the stored references are for {meta['grid']['name']} ({want['cells']} cells), {want['levels']} levels; "
            f"got a grid of {got['cells']} cells, {got['levels']} levels"
        )


# --- the store ---------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {}
    for dist in VERSIONED:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def make_meta(grid: Any, seed: int = SEED, static: str = STATIC) -> dict:
    return {
        "format": FORMAT,
        "reference_backend": REFERENCE_BACKEND,
        "grid": {"name": getattr(grid, "name", "?"), "cells": int(grid.num_cells), "edges": int(grid.num_edges)},
        "levels": int(grid.num_levels),
        "seed": seed,
        "static": static,
        "tolerance": {"sum_rtol": SUM_RTOL, "sample_rtol": SAMPLE_RTOL, "sample_atol_scale": ATOL_SCALE},
        "versions": versions(),
        "made": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "host": f"{platform.node()}, {platform.machine()}",
        "regenerate": "make references" if static == STATIC else f"icoforge references make --static {static} [PROGRAM ...]",
    }


def load_store(path: pathlib.Path | str | None = None, *, static: str = STATIC) -> dict:
    """The store at `path`, by default the one of the static variant `static` (STORES)."""
    path = pathlib.Path(path if path is not None else STORES[static])
    try:
        store = json.loads(path.read_text())
    except FileNotFoundError:
        raise IcoforgeError(f"no stored references at {path}: run `make references`") from None
    except json.JSONDecodeError as e:
        raise IcoforgeError(f"{path} is not a reference store ({e})") from None
    if not isinstance(store, dict) or store.get("meta", {}).get("format") != FORMAT:
        raise IcoforgeError(f"{path}: not a reference store of format {FORMAT}")
    return store


def write_store(path: pathlib.Path | str, meta: dict, programs: dict[str, dict]) -> None:
    """One line per output keeps the file diffable and small."""
    from icoforge.cache import atomic_write_bytes

    lines = ["{", f'"meta": {json.dumps(meta, sort_keys=True)},', '"programs": {']
    names = sorted(programs)
    for i, name in enumerate(names):
        entry = programs[name]
        outs = [f"  {json.dumps(o)}: {json.dumps(d, sort_keys=True)}" for o, d in sorted(entry["outputs"].items())]
        body = ",\n".join(outs)
        comma = "," if i < len(names) - 1 else ""
        lines.append(f'{json.dumps(name)}: {{"inputs": {json.dumps(entry["inputs"])}, "outputs": {{\n{body}\n}}}}{comma}')
    lines += ["}", "}"]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())


def generate(
    names: Iterable[str],
    jobs: int = 1,
    path: pathlib.Path | str | None = None,
    on_done: Callable[[str, str | None], None] | None = None,
    static: str = STATIC,
) -> dict[str, str]:
    """Record `names` (in `jobs` processes) into the store at `path` (default: the variant's,
    STORES[static]), keeping the other programs already there if they were made for the same
    grid, levels, seed and variant. Written after every program, so an interrupted run keeps what
    it finished. Returns {program: error} of failures."""
    import functools

    from icoforge.grids import load_grid
    from icoforge.parallel import map_isolated

    path = path if path is not None else STORES[static]
    grid = load_grid(GRID, levels=LEVELS, show_progress=False)
    meta = make_meta(grid, static=static)
    programs: dict[str, dict] = {}
    try:
        old = load_store(path)
        if all(old["meta"][k] == meta[k] for k in ("grid", "levels", "seed", "static", "reference_backend")):
            programs = old["programs"]
    except IcoforgeError:
        pass
    failed = {}
    with _serial_gt4py_builds():
        for name, outcome in map_isolated(functools.partial(_record_in_worker, GRID, LEVELS, static), biggest_first(names), jobs):
            if isinstance(outcome, dict):
                programs[name] = outcome
                write_store(path, meta, programs)
            else:
                failed[name] = f"{type(outcome).__name__}: {outcome}"
            if on_done:
                on_done(name, failed.get(name))
    return failed


def biggest_first(names: Iterable[str]) -> list[str]:
    """Programs by the size of their GTIR, largest first: the long compiles start first, so
    the last worker does not finish alone with a vertical solver."""
    from icoforge.suite.catalogue import get_program

    return sorted(names, key=lambda n: (-len(str(get_program(n).program.gtir)), n))


def warm_up(names: Iterable[str], backend: str = "icoforge-cpu", jobs: int = 2, static: str = STATIC) -> dict[str, str]:
    """Compile `names` for `backend` with the store's grid and static scalars in `jobs` processes,
    filling the on-disk caches (GT4Py passes, builds) that a later in-process check then hits:
    the 78 compiles use every core. Returns {program: error} of failures."""
    import functools

    from icoforge.parallel import map_isolated

    failed = {}
    with _serial_gt4py_builds():
        work = functools.partial(_compile_in_worker, GRID, LEVELS, backend, static)
        for name, outcome in map_isolated(work, biggest_first(names), jobs):
            if isinstance(outcome, BaseException):
                failed[name] = f"{type(outcome).__name__}: {outcome}"
    return failed


@contextlib.contextmanager
def _serial_gt4py_builds():
    """Our workers are the parallelism: GT4Py compiling in each worker's thread, not in a pool
    of cpu_count more processes per worker (spawned workers inherit the environment)."""
    old = os.environ.get("GT4PY_BUILD_JOBS_MODE")
    os.environ["GT4PY_BUILD_JOBS_MODE"] = "serial"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GT4PY_BUILD_JOBS_MODE", None)
        else:
            os.environ["GT4PY_BUILD_JOBS_MODE"] = old


def _worker_grid(grid_name: str, levels: int) -> Any:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from icoforge.grids import load_grid

    return load_grid(grid_name, levels=levels, show_progress=False)


def _record_in_worker(grid_name: str, levels: int, static: str, name: str) -> dict:
    from icoforge.suite.catalogue import get_program

    return record_program(get_program(name), _worker_grid(grid_name, levels), static=static)


def _compile_in_worker(grid_name: str, levels: int, backend: str, static: str, name: str) -> None:
    from icoforge.suite.catalogue import get_program
    from icoforge.suite.inputs import make_scalars
    from icoforge.suite.runner import prepare

    grid = _worker_grid(grid_name, levels)
    info = get_program(name)
    prepare(info, backend, grid, make_scalars(info, grid, SEED), static_params=static)
