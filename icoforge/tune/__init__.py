"""Layer 4, `tune`: the autotuner. A schedule per kernel of one program, found by running every
candidate of a search space on the GPU (or the CPU emulation of the GPU code), verifying its
outputs against the vendor default's and timing each kernel; the result is a schedule file for
`--schedule` / $ICOFORGE_SCHEDULE. `icoforge tune` is its command line.
"""

from icoforge.tune.space import SPACES, candidates
from icoforge.tune.tuner import Target, TuneResult, target_for_backend, tune_program, tune_suite_program, write_schedule

__all__ = [
    "SPACES",
    "Target",
    "TuneResult",
    "candidates",
    "target_for_backend",
    "tune_program",
    "tune_suite_program",
    "write_schedule",
]
