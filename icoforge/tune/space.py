"""The schedules the tuner tries: each knob alone on top of the vendor default, then the pairs that
won in the H200 sweeps (benchmarks/h200-2026-11-29-s2, -s3, -30-s4).

A candidate is applied to every kernel of the program at once; the tuner then picks, kernel by
kernel, the candidate that timed best. So the space lists whole-kernel schedules, not combinations
per kernel: N candidates cost N program runs, whatever the number of kernels.
"""

from __future__ import annotations

from icoforge.backend.schedule import VENDOR_DEFAULTS, Schedule
from icoforge.errors import IcoforgeError

SPACES = ("quick", "full")


def candidates(vendor: str, space: str = "quick") -> dict[str, Schedule]:
    """id -> Schedule, the vendor default first (as "default"). The same space on a GPU and in the
    CPU emulation (which runs shared-memory staging and its barriers too)."""
    if vendor not in VENDOR_DEFAULTS:
        raise IcoforgeError(f"no schedules for vendor {vendor!r}; choose one of {', '.join(VENDOR_DEFAULTS)}")
    if space not in SPACES:
        raise IcoforgeError(f"unknown search space {space!r}; choose one of {', '.join(SPACES)}")
    base = VENDOR_DEFAULTS[vendor]

    def s(**knobs) -> Schedule:
        return base.replace(**knobs).validate()

    quick = {
        "block128x1": s(block=(128, 1)),
        "block256x1": s(block=(256, 1)),
        "block32x8": s(block=(32, 8)),
        "block64x4": s(block=(64, 4)),
        "kpt2": s(k_per_thread=2),
        "kpt4": s(k_per_thread=4),
        "unroll2": s(k_unroll=2),
        "hpt2": s(h_per_thread=2),
        "block32x4": s(block=(32, 4)),
        "idx32": s(index_bits=32),
        "idx64": s(index_bits=64),
        "idx_auto": s(index_bits="auto"),
        "smem": s(smem_tables=("*",)),
        "block32x8_idx32": s(block=(32, 8), index_bits=32),
        "kpt2_idx32": s(k_per_thread=2, index_bits=32),
        "block128x1_kpt4_idx32": s(block=(128, 1), k_per_thread=4, index_bits=32),
    }
    full = {
        "block64x1": s(block=(64, 1)),
        "block512x1": s(block=(512, 1)),
        "block32x2": s(block=(32, 2)),
        "block128x2": s(block=(128, 2)),
        "block64x8": s(block=(64, 8)),
        "kpt8": s(k_per_thread=8),
        "unroll4": s(k_unroll=4),
        "hpt4": s(h_per_thread=4),
        "maxreg64": s(max_registers=64),
        "maxreg128": s(max_registers=128),
        "minblocks4": s(min_blocks_per_sm=4),
        "kpt2_unroll2": s(k_per_thread=2, k_unroll=2),
        "kpt4_idx32": s(k_per_thread=4, index_bits=32),
        "smem_idx32": s(smem_tables=("*",), index_bits=32),
        "smem_kpt2": s(smem_tables=("*",), k_per_thread=2),
        "block32x8_kpt2": s(block=(32, 8), k_per_thread=2),
    }
    if vendor == "hip":
        full["chiplet8"] = s(chiplet_remap=True)
    chosen = {"default": base, **quick, **(full if space == "full" else {})}
    # the same schedule under two names (a knob equal to the vendor default) is timed once
    unique: dict[str, Schedule] = {}
    for name, sched in chosen.items():
        if sched in unique.values() and name != "default":
            continue
        unique[name] = sched
    return unique
