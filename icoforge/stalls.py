"""Stalls in timing samples: one rule for every report (the greenline's, the model's).

A sample above STALL_FACTOR x the median of its series is a stall (of the host or the device): it
is named in the reports, and the medians, which it does not move, stay the headline figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

STALL_FACTOR = 2.0


def stall_positions(samples: Sequence[float], factor: float = STALL_FACTOR) -> list[int]:
    """Positions (0-based) of the samples above `factor` x the median of `samples`."""
    if not samples:
        return []
    median = statistics.median(samples)
    return [i for i, s in enumerate(samples) if median > 0 and s > factor * median]


# A timed sample above this multiple of its variant's median is most likely a stall of the host or
# the device, not the code: H200 session 28, one sample of the first substep took 488 ms against a
# median of 18.3 ms, on all four ranks at once. The median keeps the figures right; the report says
# it happened, and what Python's collector did meanwhile (`instrument.quiet_gc`).
STALL_NOTE = (f"samples above {STALL_FACTOR:g}x their median (the medians are not moved by them; "
              "a stall of the host or the device?)")  # the reports' heading of the `stalls` list


def stalls(samples_ms: dict[str, list[float]], factor: float = STALL_FACTOR) -> str | None:
    """The variants with samples above `factor` x their median, as "first 1 of 5 (up to 488.5 ms,
    median 18.25)", joined by "; "; None when there are none."""
    parts = []
    for variant, samples in samples_ms.items():
        far = [samples[i] for i in stall_positions(samples, factor)]
        if far:
            median = statistics.median(samples)
            parts.append(f"{variant} {len(far)} of {len(samples)} (up to {max(far):.1f} ms, median {median:.2f})")
    return "; ".join(parts) or None


def gc_note(pauses: dict[str, Any] | None) -> str:
    """One phrase on a recorded `GcPauses.to_json()`, for the stall notes."""
    if not pauses:
        return "Python's collector not recorded"
    n = pauses["collections"]
    return (f"Python's collector during the timing: {n['0']}/{n['1']}/{n['2']} collections of generation 0/1/2, "
            f"longest {pauses['longest_ms']:.1f} ms ({pauses['frozen_objects']:,} setup objects frozen)")  # fmt: skip
