"""The schedules the tuner tries: each knob alone on top of the vendor default, then the pairs that
won in the H200 sweeps (benchmarks/h200/2026-11-29-s2, -s3, -30-s4).

A candidate is applied to every kernel of the program at once; the tuner then picks, kernel by
kernel, the candidate that timed best. So the space lists whole-kernel schedules, not combinations
per kernel: N candidates cost N program runs, whatever the number of kernels.
"""

from __future__ import annotations

import re

from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, Schedule
from icoforge.errors import IcoforgeError

SPACES = ("quick", "full")

# A candidate's id names its knobs, words joined by "_" (e.g. "block128x1_kpt4_idx32"): the id is
# the one place a candidate is written down, `knobs` reads it.
QUICK = (
    "block128x1", "block256x1", "block32x8", "block64x4", "kpt2", "kpt4", "unroll2", "hpt2", "block32x4",
    "idx32", "idx64", "idx_auto", "smem", "block32x8_idx32", "kpt2_idx32", "block128x1_kpt4_idx32",
    "stridesets", "fieldstrides",
)  # fmt: skip
FULL = (
    "block64x1", "block512x1", "block32x2", "block128x2", "block64x8", "kpt8", "unroll4", "hpt4", "maxreg64",
    "maxreg128", "minblocks4", "kpt2_unroll2", "kpt4_idx32", "smem_idx32", "smem_kpt2", "block32x8_kpt2",
    "maxreg40", "maxreg48", "block32x2_maxreg48",
)  # fmt: skip
# maxreg40/48: REGIONAL's rho_theta main kernel runs at 56 registers, 53 % occupancy and 2.2 TB/s
# (ncu, benchmarks/h200/2026-12-03-s23): caps below 64 let more warps hide its gathers' latency.
# stridesets / fieldstrides: the kernel arguments' `stride_sets` on / off, the other one than the
# vendor default (the one equal to it is dropped below): fewer arguments (AMD's SGPRs) against the
# registers nvcc spent on the shared strides (sm_90); not timed on a GPU yet. A kernel that picks
# stride sets runs its per-field-strides variant for fields laid out otherwise (gpu.bind_program).
HIP_ONLY = ("chiplet8",)

_WORDS = (  # word -> knobs of the Schedule
    (r"block(\d+)x(\d+)", lambda x, y: {"block": (int(x), int(y))}),
    (r"kpt(\d+)", lambda n: {"k_per_thread": int(n)}),
    (r"unroll(\d+)", lambda n: {"k_unroll": int(n)}),
    (r"hpt(\d+)", lambda n: {"h_per_thread": int(n)}),
    (r"idx(32|64)", lambda n: {"index_bits": int(n)}),
    (r"idx_auto", lambda: {"index_bits": "auto"}),
    (r"smem", lambda: {"smem_tables": ("*",)}),
    (r"maxreg(\d+)", lambda n: {"max_registers": int(n)}),
    (r"minblocks(\d+)", lambda n: {"min_blocks_per_sm": int(n)}),
    (r"chiplet(\d+)", lambda n: {"chiplet_remap": True, "chiplets": int(n)}),
    (r"stridesets", lambda: {"stride_sets": True}),
    (r"fieldstrides", lambda: {"stride_sets": False}),
)


def knobs(candidate: str) -> dict:
    """The Schedule knobs a candidate id names: "block32x8_idx32" -> block (32, 8), index_bits 32."""
    out: dict = {}
    rest = candidate
    while rest:
        for pattern, make in _WORDS:
            m = re.match(pattern + r"(?:_|$)", rest)
            if m:
                out.update(make(*m.groups()))
                rest = rest[m.end() :]
                break
        else:
            raise IcoforgeError(f"candidate {candidate!r}: no knob is named {rest!r}")
    return out


def candidates(vendor: str, space: str = "quick") -> dict[str, Schedule]:
    """id -> Schedule, the vendor default first (as "default"). The same space on a GPU and in the
    CPU emulation (which runs shared-memory staging and its barriers too)."""
    if vendor not in VENDOR_DEFAULTS:
        raise IcoforgeError(f"no schedules for vendor {vendor!r}; choose one of {', '.join(VENDOR_DEFAULTS)}")
    if space not in SPACES:
        raise IcoforgeError(f"unknown search space {space!r}; choose one of {', '.join(SPACES)}")
    base = VENDOR_DEFAULTS[vendor]
    ids = QUICK + ((FULL + (HIP_ONLY if vendor == "hip" else ())) if space == "full" else ())
    chosen = {"default": base, **{c: base.replace(**knobs(c)).validate() for c in ids}}
    # the same schedule under two names (a knob equal to the vendor default) is timed once
    unique: dict[str, Schedule] = {}
    for name, sched in chosen.items():
        if sched in unique.values() and name != "default":
            continue
        unique[name] = sched
    return unique
