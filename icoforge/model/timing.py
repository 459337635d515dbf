"""Time to solution of a model run: time to the first step, per-step times after warm-up, and
each component's share of a step.

Time to the first step, two figures (both wall clock):
- `from_process_start_s`: from the start of the Python process (the kernel's start time of this
  process, /proc/self/stat) to the end of step 1: imports, grid file, icon4py's grid manager,
  `initialize_driver` (static fields and granules, compiling), initial condition, step 1 (the
  first call of every program). What a user waits for, `icoforge model ...` typed to the first
  step done.
- `from_driver_setup_s`: the same without the process' own start (imports, grid file): icon4py's
  setup phases as `run_driver` does them, plus step 1.

Per-step times: `Session.step` around icon4py's `time_integration` of one step, which ends in
icon4py's own device synchronisation (`device_utils.sync`): on a GPU the step is the device's
work too. Steps 1..warm-up are left out of the steady-state figures, so are steps while a GT4Py
compile worker was busy (run.BUSY_WORKER_FRACTION); of the rest, those above STALL_FACTOR x their
median are named as stalls (as the greenline names its samples), with Python's collector time
recorded in each step.

Components: on steps run with a `ComponentClock`, each granule's call (`SolveNonhydro.time_step`,
`Diffusion.run`, `Advection.run`, the physics driver's `run`) is timed between two device
synchronisations; the rest of the step is the driver's (its Python, its own small programs such as
the air mass, and the end-of-step synchronisation). The synchronisations change the step (the host
no longer runs ahead of the device), so these steps are extra steps after the timed ones
(`icoforge model --component-steps N`), never the headline step time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import pathlib
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from icoforge.stalls import STALL_FACTOR, stall_positions

SCHEMA = "icoforge-model-timing/1"

# component: (attribute of icon4py's driver.granules, method timed)
COMPONENTS: dict[str, tuple[str, str]] = {
    "dycore": ("solve_nonhydro", "time_step"),
    "diffusion": ("diffusion", "run"),
    "advection": ("tracer_advection", "run"),
    "microphysics": ("physics", "run"),
}
REST = "driver (rest)"

DEFINITION = {
    "from_process_start_s": "process start (/proc/self/stat) to the end of step 1: imports, grid file, "
                            "grid manager, initialize_driver, initial condition, step 1",
    "from_driver_setup_s": "grid manager + initialize_driver + initial condition + step 1",
    "step": "icon4py's time_integration of one step, ending in its device synchronisation",
    "components": "each granule call between device synchronisations, on extra steps after the timed ones; "
                  "driver (rest) = step - components",
    "setup_owners_s": "each setup phase's wall time by whose Python ran (sampled, icoforge.owners): GT4Py's, icon4py's, "
                      "icoforge's, other code, or a wait for a compile job (GT4Py's first call of a program)",
}  # fmt: skip


def process_start_epoch() -> float | None:
    """When this process started (seconds since the epoch), from the kernel; None off Linux."""
    try:
        fields = pathlib.Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        btime = next(int(line.split()[1]) for line in pathlib.Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))  # fmt: skip
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: starttime
    except (OSError, StopIteration, IndexError, ValueError):
        return None


class GcClock:
    """Milliseconds Python's garbage collector ran since the last `take()`."""

    def __init__(self) -> None:
        self._ms = 0.0
        self._t0: float | None = None

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0 is not None:
            self._ms += (time.perf_counter() - self._t0) * 1e3
            self._t0 = None

    @contextlib.contextmanager
    def active(self) -> Iterator[GcClock]:
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)

    def take(self) -> float:
        ms, self._ms = self._ms, 0.0
        return ms


class ComponentClock:
    """Times each granule call of a driver between device synchronisations while `active()`:
    the methods are replaced on the granule instances and put back after."""

    def __init__(self, granules: Any, sync: Callable[[], None]):
        self.granules = granules
        self.sync = sync
        self.seconds: dict[str, float] = {}

    def present(self) -> list[str]:
        return [c for c, (attr, _) in COMPONENTS.items() if getattr(self.granules, attr, None) is not None]

    def _wrap(self, component: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.sync()
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[component] = self.seconds.get(component, 0.0) + time.perf_counter() - t0

        return timed

    @contextlib.contextmanager
    def active(self) -> Iterator[ComponentClock]:
        patched = []
        for component in self.present():
            attr, name = COMPONENTS[component]
            granule = getattr(self.granules, attr)
            setattr(granule, name, self._wrap(component, getattr(granule, name)))
            patched.append((granule, name))
        try:
            yield self
        finally:
            for granule, name in patched:
                with contextlib.suppress(AttributeError):
                    delattr(granule, name)  # the instance attribute: the class' method again

    def take(self) -> dict[str, float]:
        out = {c: self.seconds.get(c, 0.0) for c in self.present()}
        self.seconds = {}
        return out


@dataclasses.dataclass
class Record:
    """Everything `--json` writes; written again after every phase and step, so that a run cut by
    a deadline leaves what it had (`finished` false, `running` the phase it was in)."""

    backend: str
    meta: dict[str, Any]  # grid, levels, experiment, components, device, peer configuration, ...
    warmup: int = 1
    process_start: float | None = None  # epoch
    lock_wait_s: float = 0.0  # waited for --gpu-lock: not part of the time to the first step
    t_start: float = dataclasses.field(default_factory=time.time)  # epoch: the driver's setup began
    setup_s: dict[str, float] = dataclasses.field(default_factory=dict)
    setup_owners_s: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # phase -> owner -> s
    running: str | None = None
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    component_steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    first_step_end: float | None = None  # epoch
    finished: bool = False
    path: pathlib.Path | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def phase(self, message: str) -> None:
        """A progress line of `run.start`: "NAME ..." starts a phase, "NAME: X s" ends one."""
        self.running = message[:-4] if message.endswith(" ...") else None
        self.write()

    def add_step(self, seconds: float, worker_cpu_s: float, worker_busy: bool, gc_ms: float,
                 components: dict[str, float] | None = None) -> None:  # fmt: skip
        if not self.steps:
            self.first_step_end = time.time()
        row = {"index": len(self.steps) + len(self.component_steps) + 1, "seconds": seconds,
               "worker_cpu_s": worker_cpu_s, "worker_busy": worker_busy, "gc_ms": gc_ms}  # fmt: skip
        if components is None:
            self.steps.append(row)
        else:
            self.component_steps.append({**row, "components": components})
        self.running = None
        self.write()

    def to_json(self) -> dict[str, Any]:
        first = None
        if self.first_step_end is not None and self.steps:
            first = {
                "from_process_start_s": (None if self.process_start is None
                                         else self.first_step_end - self.process_start - self.lock_wait_s),
                "from_driver_setup_s": sum(self.setup_s.values()) + self.steps[0]["seconds"],
            }
        return {
            "schema": SCHEMA, "backend": self.backend, **self.meta, "warmup": self.warmup,
            "definition": DEFINITION, "setup_s": self.setup_s, "setup_owners_s": self.setup_owners_s,
            "process_to_setup_s": None if self.process_start is None else self.t_start - self.process_start - self.lock_wait_s,
            "lock_wait_s": self.lock_wait_s,
            "time_to_first_step": first, "steps": self.steps, "step_stats": step_stats(self.steps, self.warmup),
            "component_steps": self.component_steps, "components": component_stats(self.component_steps),
            "finished": self.finished, "running": self.running,
            "elapsed_s": time.time() - (self.process_start or self.t_start) - self.lock_wait_s,
        }  # fmt: skip

    def write(self) -> None:
        if self.path is None:
            return
        with self._lock:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
            os.replace(tmp, self.path)

    @contextlib.contextmanager
    def heartbeat(self, every_s: float = 5.0) -> Iterator[None]:
        """Write the record every `every_s` seconds while the block runs (from a daemon thread), so
        that `elapsed_s` of a run killed mid-phase is at most that much below the moment it died."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(every_s):
                with contextlib.suppress(Exception):  # a list changing under json.dumps: the next beat writes
                    self.write()

        thread = threading.Thread(target=beat, name="record-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def step_stats(steps: list[dict[str, Any]], warmup: int) -> dict[str, Any] | None:
    """Median and min of the steps after `warmup` whose compile workers were idle; the busy ones and
    the stalls (above STALL_FACTOR x that median) named by step index."""
    later = steps[warmup:]
    quiet = [s for s in later if not s["worker_busy"]]
    if not quiet:
        return None
    seconds = [s["seconds"] for s in quiet]
    return {
        "n": len(quiet), "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
        "stalls": [{"index": quiet[i]["index"], "seconds": seconds[i], "gc_ms": quiet[i]["gc_ms"]} for i in stall_positions(seconds)],
        "worker_busy_steps": [s["index"] for s in later if s["worker_busy"]],
    }  # fmt: skip


def component_stats(steps: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per component (and the driver's rest, and the synchronised step itself), median and min
    seconds over the component-timed steps."""
    if not steps:
        return {}
    out: dict[str, dict[str, float]] = {}
    names = list(steps[0]["components"])
    columns = {c: [s["components"].get(c, 0.0) for s in steps] for c in names}
    columns[REST] = [s["seconds"] - sum(s["components"].values()) for s in steps]
    columns["step"] = [s["seconds"] for s in steps]
    for name, values in columns.items():
        out[name] = {"median_s": statistics.median(values), "min_s": min(values)}
    return out
