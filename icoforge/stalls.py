"""Stalls in timing samples: one rule for every report (the greenline's, the model's).

A sample above STALL_FACTOR x the median of its series is a stall (of the host or the device): it
is named in the reports, and the medians, which it does not move, stay the headline figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

STALL_FACTOR = 2.0


def stall_positions(samples: Sequence[float], factor: float = STALL_FACTOR) -> list[int]:
    """Positions (0-based) of the samples above `factor` x the median of `samples`."""
    if not samples:
        return []
    median = statistics.median(samples)
    return [i for i, s in enumerate(samples) if median > 0 and s > factor * median]
