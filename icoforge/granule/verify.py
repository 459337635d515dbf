"""Verification: the same substeps with two backends from the same initial state, compared.

Each backend's granule gets fresh states (copies of the same NumPy arrays) and runs
`VERIFY_SEQUENCE` (first, middle, last substep; the time levels swapped between substeps, as the
model does). After each substep the five prognostic fields of the new time level are compared:
the largest difference relative to the reference field's largest magnitude,
max|a - b| / max|b|, per field (a pointwise relative error is meaningless where w or vn cross
zero). A NaN or Inf in either result fails the check.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from icoforge.granule.state import prognostic_to_numpy

VERIFY_SEQUENCE = ("first", "middle", "last")
DEFAULT_RTOL = 1e-9


@dataclasses.dataclass
class FieldDiff:
    field: str
    max_abs: float
    max_rel: float  # max|a - b| / max|b|
    finite: bool


@dataclasses.dataclass
class Comparison:
    backend: str
    reference: str
    rtol: float
    substeps: list[tuple[str, list[FieldDiff]]]

    def worst(self) -> dict[str, float]:
        """Largest relative difference per field over all substeps."""
        out: dict[str, float] = {}
        for _, diffs in self.substeps:
            for d in diffs:
                value = d.max_rel if d.finite else float("inf")
                out[d.field] = max(out.get(d.field, 0.0), value)
        return out

    @property
    def passed(self) -> bool:
        return all(v <= self.rtol for v in self.worst().values())

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "reference": self.reference,
            "rtol": self.rtol,
            "passed": self.passed,
            "worst_rel": self.worst(),
            "substeps": [
                {"variant": v, "fields": [dataclasses.asdict(d) for d in diffs]} for v, diffs in self.substeps
            ],
        }


def compare_fields(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[FieldDiff]:
    """Every field of the reference `b` (the prognostic ones; advection.py's tracer fields)."""
    out = []
    for name in b:
        x, y = a[name], b[name]
        finite = bool(np.isfinite(x).all() and np.isfinite(y).all())
        if not finite:
            out.append(FieldDiff(name, float("inf"), float("inf"), False))
            continue
        diff = float(np.max(np.abs(x - y))) if x.size else 0.0
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        out.append(FieldDiff(name, diff, diff / scale if scale > 0 else diff, True))
    return out


def run_sequence(granule: Any) -> list[dict[str, np.ndarray]]:
    """Prognostic results (NumPy) after each substep of VERIFY_SEQUENCE, from fresh states (another
    granule, e.g. diffusion.py's, runs its own `verification_sequence`)."""
    if (own := getattr(granule, "verification_sequence", None)) is not None:
        return own()
    prognostic, diagnostic, prep_adv = granule.fresh_states()
    results = []
    for i, variant in enumerate(VERIFY_SEQUENCE):
        if i:
            prognostic.swap()
        granule.step(variant, (prognostic, diagnostic, prep_adv))
        granule.sync()
        results.append(prognostic_to_numpy(prognostic.next))
    return results


def compare_runs(
    backend: str,
    results: list[dict[str, np.ndarray]],
    reference: str,
    reference_results: list[dict[str, np.ndarray]],
    rtol: float,
    sequence: tuple[str, ...] = VERIFY_SEQUENCE,
) -> Comparison:
    """Two backends' results of `run_sequence`, substep by substep (`sequence`: their labels)."""
    return Comparison(
        backend=backend,
        reference=reference,
        rtol=rtol,
        substeps=[(v, compare_fields(r, ref)) for v, r, ref in zip(sequence, results, reference_results, strict=True)],
    )
