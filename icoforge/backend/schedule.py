"""Schedules: how a kernel runs, as plain data (the algorithm is the GT4Py program).

A `Schedule` never changes what a kernel computes, only how the work is laid out on the GPU.
`ProgramSchedule` holds a default plus per-kernel overrides (by short kernel name).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from icoforge.errors import IcoforgeError

MAX_THREADS_PER_BLOCK = 1024


class ScheduleError(IcoforgeError):
    pass


@dataclass(frozen=True)
class Schedule:
    block: tuple[int, int] = (128, 1)  # threads along (horizontal, vertical)
    k_per_thread: int = 1  # "kloop": consecutive levels computed by one thread
    max_registers: int | None = None  # register cap per thread (CUDA: __maxnreg__ / -maxrregcount)
    min_blocks_per_sm: int | None = None  # second argument of __launch_bounds__

    def validate(self, where: str = "schedule") -> "Schedule":
        bx, by = self.block
        if bx < 1 or by < 1:
            raise ScheduleError(f"{where}: block {self.block} must be positive")
        if bx * by > MAX_THREADS_PER_BLOCK:
            raise ScheduleError(f"{where}: block {bx}x{by} = {bx * by} threads exceeds {MAX_THREADS_PER_BLOCK}")
        if self.k_per_thread < 1:
            raise ScheduleError(f"{where}: k_per_thread must be >= 1, got {self.k_per_thread}")
        if self.max_registers is not None and not 16 <= self.max_registers <= 255:
            raise ScheduleError(f"{where}: max_registers must be in [16, 255], got {self.max_registers}")
        if self.min_blocks_per_sm is not None and self.min_blocks_per_sm < 1:
            raise ScheduleError(f"{where}: min_blocks_per_sm must be >= 1")
        return self

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Schedule":
        d = dict(d)
        if "block" in d:
            d["block"] = tuple(d["block"])
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ScheduleError(f"unknown schedule parameters {sorted(unknown)}")
        return cls(**d).validate()


@dataclass(frozen=True)
class ProgramSchedule:
    default: Schedule = Schedule()
    per_kernel: tuple[tuple[str, Schedule], ...] = field(default=())

    def for_kernel(self, name: str) -> Schedule:
        return dict(self.per_kernel).get(name, self.default)

    def key(self) -> str:
        return json.dumps(
            {"default": self.default.to_json(), "per_kernel": {k: s.to_json() for k, s in self.per_kernel}},
            sort_keys=True,
        )


VENDOR_DEFAULTS = {
    "cuda": Schedule(block=(128, 1)),
    "hip": Schedule(block=(256, 1)),  # 256x1 beat 32x8 on MI300A in icon4py's AMD work
}
