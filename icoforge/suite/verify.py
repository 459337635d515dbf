"""Run one program on two backends with identical inputs and compare every output array.

Protocol:
1. build random inputs once (on the host, from `seed`);
2. POISON the pure outputs (written, never read): floats with a NaN carrying a private payload,
   ints with a sentinel. In-out fields keep their input values (the program reads them);
3. for each backend copy the inputs to its device, compile, run once, copy the outputs back;
4. compare the ENTIRE arrays, position by position:
   - poisoned in both         -> untouched by both: fine (outside the written domain);
   - poisoned in one only     -> one backend wrote a point the other did not: FAIL
                                 (`unwritten` if the tested backend skipped it, `extra_written`
                                 if it wrote outside the reference's domain);
   - written by both          -> must be finite in both, and |test - ref| <= atol + rtol * |ref|,
                                 where atol defaults to ATOL_SCALE * max |ref| of that output:
                                 points near zero (cancellation) are judged on the output's scale,
                                 whatever its units (a divergence ~1e-5, a potential temperature
                                 ~300).
   A NaN that is not our poison (computed, or a NaN copied from elsewhere) never passes, even if
   both backends produce it. Bool outputs cannot be poisoned: they must be equal everywhere.
5. inputs that are not outputs must come back unchanged from both runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import gt4py.next as gtx
import numpy as np

from icoforge.suite.catalogue import ProgramInfo
from icoforge.suite.inputs import is_field, make_inputs, to_numpy
from icoforge.suite.runner import (
    BackendLike,
    allocator_for,
    grid_fields,
    prepare,
    resolve_backend,
    static_variant,
    synchronizer,
)

# A quiet NaN with a payload no arithmetic produces (x86 and CUDA both generate payload-free
# "default" NaNs), so "still poisoned" is told apart from "computed NaN" by the bit pattern.
POISON_BITS = {np.dtype(np.float64): np.uint64(0x7FF8_DEAD_BEEF_F00D), np.dtype(np.float32): np.uint32(0x7FC0_F00D)}
ATOL_SCALE = 1e-12
POISON_INT = {np.dtype(np.int32): np.iinfo(np.int32).min + 7, np.dtype(np.int64): np.iinfo(np.int64).min + 7}


def poison_value(dtype: np.dtype) -> Any:
    """The value written into outputs before a run, or None where a dtype cannot be poisoned."""
    dtype = np.dtype(dtype)
    if dtype in POISON_BITS:
        return POISON_BITS[dtype].view(dtype)
    return POISON_INT.get(dtype)


def poison(array: np.ndarray) -> None:
    value = poison_value(array.dtype)
    if value is not None:
        array[...] = value


def is_poisoned(array: np.ndarray) -> np.ndarray:
    """Bool mask: where `array` still holds the poison (bit-exact for floats)."""
    dtype = array.dtype
    if dtype in POISON_BITS:
        unsigned = np.uint64 if dtype.itemsize == 8 else np.uint32
        return np.ascontiguousarray(array).view(unsigned) == POISON_BITS[dtype]
    if dtype in POISON_INT:
        return array == POISON_INT[dtype]
    return np.zeros(array.shape, dtype=bool)


@dataclasses.dataclass(frozen=True)
class OutputStats:
    """Comparison of one output array, test backend vs reference."""

    name: str
    shape: tuple[int, ...]
    written: int  # points not poisoned in either result: compared with tolerance
    untouched: int  # points left poisoned by both (0 for in-out fields: never poisoned, all compared)
    unwritten: int  # written by the reference, left poisoned by the test backend
    extra_written: int  # written by the test backend outside the reference's writes
    non_finite: int  # written points where either value is NaN/Inf (never passes)
    mismatches: int  # written finite points beyond tolerance
    max_abs_err: float
    max_rel_err: float
    atol: float  # the absolute tolerance applied
    worst_index: tuple[int, ...] | None  # first failing point, else the largest error (None: equal)

    @property
    def passed(self) -> bool:
        return self.unwritten == self.extra_written == self.non_finite == self.mismatches == 0

    def describe(self) -> str:
        errors = f"max abs {self.max_abs_err:.2e}, max rel {self.max_rel_err:.2e}"
        if self.passed:
            return f"{self.name}: ok ({self.written} points, {errors})"
        problems = [
            f"{count} {what}"
            for count, what in (
                (self.mismatches, "beyond tolerance"),
                (self.unwritten, "not written"),
                (self.extra_written, "written outside the reference's domain"),
                (self.non_finite, "NaN/Inf"),
            )
            if count
        ]
        where = f" (e.g. at {self.worst_index})" if self.worst_index is not None else ""
        return f"{self.name}: FAIL {', '.join(problems)}{where}; {errors}"


def _first(mask: np.ndarray) -> tuple[int, ...] | None:
    hits = np.argwhere(mask)
    return tuple(int(i) for i in hits[0]) if len(hits) else None


def compare_output(
    name: str, test: np.ndarray, ref: np.ndarray, *, rtol: float, atol: float | None = None
) -> OutputStats:
    """Compare one output array (see the module docstring for the rules); atol=None scales the
    absolute tolerance with the largest reference value, ATOL_SCALE * max |ref|."""
    if test.shape != ref.shape:
        raise ValueError(f"{name}: shapes differ, {test.shape} vs {ref.shape}")
    poisoned_test, poisoned_ref = is_poisoned(test), is_poisoned(ref)
    written = ~poisoned_test & ~poisoned_ref
    unwritten = poisoned_test & ~poisoned_ref
    extra = ~poisoned_test & poisoned_ref

    t = test.astype(np.float64)
    r = ref.astype(np.float64)
    non_finite = written & ~(np.isfinite(t) & np.isfinite(r))
    comparable = written & ~non_finite
    if atol is None:
        atol = ATOL_SCALE * float(np.abs(r[comparable]).max()) if comparable.any() else 0.0
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_err = np.where(comparable, np.abs(t - r), 0.0)
        rel_err = np.where(comparable & (abs_err > 0), abs_err / np.abs(r), 0.0)  # inf where ref == 0
        beyond = comparable & (abs_err > atol + rtol * np.abs(r))

    failing = beyond | unwritten | extra | non_finite
    if failing.any():
        worst = _first(failing)
    elif abs_err.size and abs_err.max() > 0:
        worst = tuple(int(i) for i in np.unravel_index(np.argmax(abs_err), abs_err.shape))
    else:
        worst = None
    return OutputStats(
        name=name,
        shape=tuple(test.shape),
        written=int(written.sum()),
        untouched=int((poisoned_test & poisoned_ref).sum()),
        unwritten=int(unwritten.sum()),
        extra_written=int(extra.sum()),
        non_finite=int(non_finite.sum()),
        mismatches=int(beyond.sum()),
        max_abs_err=float(abs_err.max()) if abs_err.size else 0.0,
        max_rel_err=float(rel_err.max()) if rel_err.size else 0.0,
        atol=atol,
        worst_index=worst,
    )


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    program: str
    backend: str
    reference: str
    grid: str
    num_levels: int
    seed: int
    rtol: float
    atol: float | None  # None: scaled per output (see OutputStats.atol)
    outputs: tuple[OutputStats, ...]
    modified_inputs: tuple[str, ...]  # non-output fields that a backend changed (never allowed)

    @property
    def passed(self) -> bool:
        return not self.modified_inputs and all(o.passed for o in self.outputs)

    @property
    def max_abs_err(self) -> float:
        return max((o.max_abs_err for o in self.outputs), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((o.max_rel_err for o in self.outputs), default=0.0)

    def output(self, name: str) -> OutputStats:
        return next(o for o in self.outputs if o.name == name)

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        lines = [
            f"{verdict}: {self.program} on {self.backend} vs {self.reference} "
            f"({self.grid}, {self.num_levels} levels, seed {self.seed}, rtol {self.rtol:g}, "
            f"atol {'scaled' if self.atol is None else format(self.atol, 'g')})"
        ]
        lines += [f"  {o.describe()}" for o in self.outputs]
        lines += [f"  {name}: input modified" for name in self.modified_inputs]
        return "\n".join(lines)


def _to_device(host_args: dict[str, Any], allocator: Any) -> dict[str, Any]:
    """Copy of the host arguments on the backend's device (fresh buffers every time)."""
    return {
        name: gtx.as_field(v.domain, v.asnumpy().copy(), allocator=allocator) if is_field(v) else v
        for name, v in host_args.items()
    }


def run_once(
    info: ProgramInfo, backend: BackendLike, grid: Any, host_args: dict[str, Any], static_params: str | Sequence[str]
) -> dict[str, np.ndarray]:
    """Run on fresh device copies of `host_args`; return every field argument afterwards."""
    _, backend_obj = resolve_backend(backend)
    args = _to_device(host_args, allocator_for(backend_obj))
    call, _ = prepare(info, backend, grid, args, static_params=static_params)
    call(args)
    synchronizer(args)()
    return {name: to_numpy(v) for name, v in args.items() if is_field(v)}


def verify(
    info: ProgramInfo,
    backend: BackendLike,
    reference_backend: BackendLike,
    grid: Any,
    seed: int = 0,
    rtol: float = 1e-10,
    atol: float | None = None,
    *,
    static_params: str | Sequence[str] = "icon4py",
    static_values: Mapping[str, str] | None = None,
) -> VerifyResult:
    """Run `info.program` on `backend` and on `reference_backend` with the same random inputs
    (poisoned outputs) and compare all outputs completely; see the module docstring.
    `static_values` (NAME -> text) replace static scalars of the inputs (runner.static_variant).

    Backends: names ("gtfn_cpu", "icoforge-cuda", ...), GT4Py Backend objects, None (embedded)
    or a CustomBackend. atol=None: ATOL_SCALE times each output's largest reference value.
    """
    overrides, static_params = static_variant(info, static_params, static_values or {})
    host_args = {**poisoned_inputs(info, grid, seed), **overrides}
    before = {name: to_numpy(v).copy() for name, v in host_args.items() if is_field(v)}

    ref_fields = run_once(info, reference_backend, grid, host_args, static_params)
    test_fields = run_once(info, backend, grid, host_args, static_params)

    stats = tuple(
        compare_output(name, test_fields[name], ref_fields[name], rtol=rtol, atol=atol) for name in info.outputs
    )
    modified = tuple(
        name
        for name in before
        if name not in info.outputs
        and not (same_bits(before[name], ref_fields[name]) and same_bits(before[name], test_fields[name]))
    )
    return VerifyResult(
        program=info.name,
        backend=resolve_backend(backend)[0],
        reference=resolve_backend(reference_backend)[0],
        **grid_fields(grid),
        seed=seed,
        rtol=rtol,
        atol=atol,
        outputs=stats,
        modified_inputs=modified,
    )


def poisoned_inputs(info: ProgramInfo, grid: Any, seed: int) -> dict[str, Any]:
    """`make_inputs` on the host with the pure outputs poisoned (steps 1-2 of the protocol)."""
    host_args = make_inputs(info, grid, seed)
    for name in info.outputs:
        if not info.param(name).is_inout:
            poison(host_args[name].ndarray)
    return host_args


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
