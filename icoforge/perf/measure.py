"""One measurement: a suite program on a grid and backend -> model costs, per-kernel and whole-call
times, the copy-bandwidth ceiling of the same run, and the FP64 peak; then the roofline files.

The whole call runs through GT4Py exactly as a user runs it (`suite.runner.prepare`, int and bool
scalars static like icon4py); per-kernel times come from our own builds of the same kernel IR
(static.py), one kernel at a time on the CPU, with events on the GPU (timing.py).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Callable
from typing import Any

from icoforge.errors import IcoforgeError
from icoforge.perf import roofline, timing
from icoforge.perf.floors import call_floors
from icoforge.perf.model import ProgramCost, cost_of_call

BACKENDS = ("icoforge-cpu", "icoforge-cuda", "icoforge-hip")

# Vector FP64 peaks (not tensor/matrix cores) by device-name substring, in flop/s, from the
# vendors' data sheets; pass --peak-gflops for anything else.
GPU_FP64_PEAK = {"H200": 34e12, "GH200": 34e12, "H100": 34e12, "A100": 9.7e12, "MI300A": 61.3e12,
                 "MI300X": 81.7e12, "MI250X": 47.9e12}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Measurement:
    program: str
    grid: str
    levels: int
    backend: str
    device: str
    cost: ProgramCost
    kernels: dict[str, timing.Stats]
    whole: timing.Stats
    ceiling: timing.Ceiling
    peak_flops: float
    peak_how: str
    floors: tuple[int, int] | None = None  # (kernel floor, program floor) in bytes (floors.py)

    def floors_note(self) -> str | None:
        """One line: the kernel and program floors of the call, bytes and ms at the copy bandwidth."""
        if self.floors is None:
            return None
        (kb, pb), bw = self.floors, self.ceiling.bytes_per_s
        return (
            f"floors: per kernel {kb / 1e6:.4g} MB ({1e3 * kb / bw:.4g} ms at copy bandwidth), per program call "
            f"{pb / 1e6:.4g} MB ({1e3 * pb / bw:.4g} ms): fusing the kernels could save up to {(kb - pb) / 1e6:.4g} MB "
            "(each element the call touches moved once, temporaries not at all; icoforge/perf/floors.py)"
        )

    def points(self) -> list[roofline.Point]:
        """Each executed kernel; the program as the sum of its kernels' medians ("all kernels",
        device time); and the whole call by wall clock (Python, launches, synchronisation: table only)."""
        ran = [k for k in self.cost.kernels if k.executed]
        pts = [roofline.Point(k.name, k.bytes, k.flops, self.kernels[k.name].median if k.name in self.kernels else None) for k in ran]
        if ran and all(k.name in self.kernels for k in ran):
            total = sum(self.kernels[k.name].median for k in ran)
            pts.append(roofline.Point(self.program, self.cost.bytes, self.cost.flops, total, kind="program"))
        pts.append(roofline.Point(f"{self.program} (whole call)", self.cost.bytes, self.cost.flops, self.whole.median, kind="call"))
        return pts


def cpu_description() -> tuple[str, float, str]:
    """(model name, nominal FP64 peak flop/s, how the peak was estimated)."""
    model, mhzs, flags = "CPU", [], ""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = (x.strip() for x in line.partition(":"))
            if key == "model name" and model == "CPU":
                model = val
            elif key == "cpu MHz":
                mhzs.append(float(val))
            elif key == "flags" and not flags:
                flags = val
    except (OSError, ValueError):
        pass
    mhz = max(mhzs, default=2500.0)
    per_cycle = 32 if "avx512f" in flags else 16 if "fma" in flags.split() else 4  # FMA: lanes x 2 units x 2
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return f"{model} ({cores} cores)", cores * mhz * 1e6 * per_cycle, f"nominal: {cores} cores x {mhz:.0f} MHz x {per_cycle} flop/cycle"


def gpu_description() -> tuple[str, float | None]:
    from icoforge.backend.runtime.gpu import device_name

    name = device_name() or "no GPU"
    peak = next((v for k, v in GPU_FP64_PEAK.items() if k in name), None)
    return name, peak


def measure(
    program: str, grid: Any, backend: str = "icoforge-cpu", repeat: int = 10, seed: int = 0,
    peak_gflops: float | None = None, status: Callable[[str], None] = lambda s: None,
) -> Measurement:  # fmt: skip
    from icoforge.perf.static import suite_program_ir
    from icoforge.suite import get_backend, get_program, make_inputs, prepare
    from icoforge.suite.runner import synchronizer

    if backend not in BACKENDS:
        raise IcoforgeError(f"roofline backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    info = get_program(program)
    backend_obj = get_backend(backend)
    args = make_inputs(info, grid, seed, allocator=backend_obj)
    status(f"GT4Py passes and lowering of {program}")
    pir = suite_program_ir(info, grid, args)  # the kernels `prepare` compiles (static int scalars)
    cost = cost_of_call(pir, args, grid.connectivities)
    floors = call_floors(pir, args, grid.connectivities, cost)
    executed = [k.name for k in cost.kernels if k.executed]

    status(f"compiling {program} for {backend}")
    call, _ = prepare(info, backend, grid, args)
    sync = synchronizer(args)
    status(f"timing {program}")
    whole = timing.time_call(lambda: call(args), repeat, 1, sync)
    if backend == "icoforge-cpu":
        status("building and timing each kernel alone")
        kernels = timing.time_cpu_kernels(pir, args, grid.connectivities, executed, repeat)
        status("measuring copy bandwidth")
        ceiling = timing.cpu_copy_bandwidth()
        device, peak, peak_how = cpu_description()
    else:
        vendor = backend.split("-", 1)[1]
        status("timing each kernel with events")
        kernels, _ = timing.time_gpu_kernels(pir, args, grid.connectivities, vendor, repeat=repeat)
        status("measuring copy bandwidth")
        ceiling = timing.gpu_copy_bandwidth()
        device, peak = gpu_description()
        peak_how = "data sheet (vector FP64)"
        if peak is None and peak_gflops is None:
            raise IcoforgeError(f"no FP64 peak known for {device}: pass --peak-gflops")
    if peak_gflops is not None:
        peak, peak_how = peak_gflops * 1e9, "given"
    return Measurement(program, grid.name, int(grid.num_levels), backend, device, cost, kernels, whole, ceiling, peak, peak_how,
                       floors)  # fmt: skip


def write_roofline(m: Measurement, out: str | os.PathLike | None = None) -> roofline.Figure:
    """PNG and Markdown for a measurement; `out` defaults to roofline_<program>_<grid>.png."""
    out = out or f"roofline_{m.program}_{m.grid}_{m.levels}.png"
    title = f"{m.program} on {m.grid}/{m.levels} levels, {m.backend}"
    points = m.points()
    fig = roofline.plot_roofline(points, m.ceiling.bytes_per_s, m.peak_flops, out, title)
    notes = [
        f"device: {m.device}",
        f"ceiling: {m.ceiling.how}; FP64 peak: {m.peak_how}",
        f"whole call: median {m.whole.median * 1e3:.3f} ms over {len(m.whole.samples)} calls (spread {m.whole.spread:.0%})",
    ]
    if m.floors is not None:
        notes.append(m.floors_note())
    md = roofline.write_report(points, m.ceiling.bytes_per_s, m.peak_flops, fig.png, title, notes)
    return dataclasses.replace(fig, markdown=md)
