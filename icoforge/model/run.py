"""icon4py's driver with a backend from icoforge's registry, one time step at a time.

`start` does what icon4py's `run_driver` does before its time loop (grid manager,
`initialize_driver`, initial condition, driver states), each phase timed; `Session.step` runs one
time step through the driver's own `time_integration` (with its step count set to one), so every
step is icon4py's code path, and returns its wall time.

Step times can be spoiled by others: a GT4Py compile worker still busy (GT4Py compiles in worker
processes) or OpenMP threads spinning. Each step records the CPU seconds that this process'
children (the compile workers) used while it ran; a step where they used more than
`BUSY_WORKER_FRACTION` of its wall time is marked and kept out of the steady-state figures.
OpenMP threads are told to sleep between kernels (`OMP_WAIT_POLICY=passive` unless set).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import os
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from icoforge import settings
from icoforge.model import timing
from icoforge.owners import OwnerSampler

BUSY_WORKER_FRACTION = 0.05
Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class StepTime:
    index: int  # 1-based
    seconds: float
    worker_cpu_s: float  # CPU seconds of compile workers during the step
    gc_ms: float = 0.0  # Python's garbage collector during the step
    components: dict[str, float] | None = None  # seconds per component (timing.ComponentClock), if timed

    @property
    def worker_busy(self) -> bool:
        return self.worker_cpu_s > BUSY_WORKER_FRACTION * self.seconds


@dataclasses.dataclass
class Session:
    """A driver ready to step: icon4py's `Icon4pyDriver` and its `DriverStates`."""

    driver: Any
    states: Any
    setup_s: dict[str, float]
    setup_owners: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # phase -> owner -> s
    steps: list[StepTime] = dataclasses.field(default_factory=list)
    peer_options: dict[str, str] = dataclasses.field(default_factory=dict)  # program -> icon4py's options
    gc_clock: Any = dataclasses.field(default_factory=lambda: timing.GcClock())

    def step(self, components: timing.ComponentClock | None = None) -> StepTime:
        """One time step; with `components`, each granule call timed between device
        synchronisations (which change the step: see `timing`)."""
        mtv = self.driver.model_time_variables
        mtv.n_time_steps = 1  # time_integration loops over n_time_steps: one step per call
        cpu0 = children_cpu_seconds()
        self.gc_clock.take()
        with self.gc_clock.active(), components.active() if components else contextlib.nullcontext():
            t0 = time.perf_counter()
            self.driver.time_integration(self.states)
            seconds = time.perf_counter() - t0
        record = StepTime(len(self.steps) + 1, seconds, max(0.0, children_cpu_seconds() - cpu0), self.gc_clock.take(),
                          components.take() if components else None)  # fmt: skip
        self.steps.append(record)
        return record

    def component_clock(self) -> timing.ComponentClock:
        """A clock for `step(components=...)` synchronising as icon4py's driver does at the end of
        a step (`device_utils.sync` of its backend: CuPy's device synchronise on a GPU)."""
        from icon4py.model.common.utils import device_utils

        backend = self.driver.backend
        return timing.ComponentClock(self.driver.granules, lambda: device_utils.sync(backend))

    @property
    def prognostics(self) -> Any:
        return self.states.prognostics.current


def children_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process' live child processes (GT4Py's
    compile workers are multiprocessing children); children that ended count no more."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for child in multiprocessing.active_children():
        try:
            fields = pathlib.Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def workers_alive() -> int:
    return len(multiprocessing.active_children())


@contextlib.contextmanager
def _phase(name: str, times: dict[str, float], owners: dict[str, dict[str, float]], progress: Progress) -> Iterator[None]:
    """Times the block as setup phase `name`, and splits its wall time by whose Python ran
    (`icoforge.owners`: GT4Py's front end, a wait for a compile job, icon4py's factories, ours)."""
    progress(f"{name} ...")
    with OwnerSampler() as whose:
        yield
    times[name] = whose.wall_s
    owners[name] = whose.seconds
    progress(f"{name}: {times[name]:.1f} s")


def quiet_icon4py(verbose: bool) -> None:
    """icon4py logs every substep at INFO: keep it to warnings unless asked for."""
    level = logging.INFO if verbose else logging.WARNING
    logging.getLogger("icon4py").setLevel(level)
    if not logging.getLogger().handlers:
        logging.basicConfig(format="icon4py: %(levelname)s %(message)s")


def start(config: Any, grid_file: pathlib.Path, backend: Any, progress: Progress, *,
          per_program: bool = True, times: dict[str, float] | None = None,
          owners: dict[str, dict[str, float]] | None = None) -> Session:  # fmt: skip
    """icon4py's driver set up as `run_driver` does before its time loop. `backend` is whatever
    icoforge's registry returned for the name (a GT4Py backend, icon4py's descriptor, or None).

    The driver itself (its field factories, initial condition, own programs) takes
    `model_options.customize_backend(program=None, ...)`, as icon4py's driver CLI
    (`icon4py.model.driver.main`) gives it: a GT4Py backend or None comes out unchanged, a
    descriptor becomes one backend (its factories cannot take the descriptor itself: icon4py's
    geometry factory asks it for `.name`). With a descriptor and `per_program` (the default), the
    granules (SolveNonhydro, Diffusion, tracer advection, muphys) get the descriptor itself, so
    every program they set up gets icon4py's per-program options (`setup_program` ->
    `customize_backend(program, descriptor)`, as in icon4py's granule tests and benchmarks, and as
    icoforge's peers everywhere: `icoforge.suite.peers`); icon4py's driver CLI gives them the one
    backend instead (`per_program=False`), and so does a run with tracer advection or muphys
    (`ONE_BACKEND_WHEN_MOIST`). What icon4py logged per program is `Session.peer_options`.
    `times` (filled as the phases end) may be the caller's, to see the phases while they run;
    `owners` likewise, each phase's wall time by whose Python ran (`Session.setup_owners`)."""
    settings.prepare_openmp()
    from icon4py.model.common import model_backends, model_options
    from icon4py.model.common.decomposition import definitions as decomposition
    from icon4py.model.driver import driver, driver_utils

    from icoforge.suite import peers
    from icoforge.suite.recursion import descriptor_with_c_recursion_limit, with_c_recursion_limit

    times = {} if times is None else times
    owners = {} if owners is None else owners
    if peers.is_descriptor(backend) and per_program and _moist(config):
        progress(f"note: {ONE_BACKEND_WHEN_MOIST}")
        per_program = False
    descriptor = descriptor_with_c_recursion_limit(backend) if peers.is_descriptor(backend) and per_program else None
    # the driver's one backend and every per-program backend of a descriptor with the later C
    # recursion limit (muphys' graupel_run on CPython 3.12.1)
    backend = with_c_recursion_limit(model_options.customize_backend(program=None, backend=backend))
    allocator = model_backends.get_allocator(backend)
    props = decomposition.get_process_properties(decomposition.get_runtype(with_mpi=False))
    with _phase("grid (icon4py's GridManager)", times, owners, progress):
        manager = driver_utils.create_grid_manager(
            grid_file_path=grid_file, vertical_grid_config=config.vertical_grid, allocator=allocator, process_props=props
        )
    with (
        _phase("initialize_driver (static fields, granules: compiles)", times, owners, progress),
        peers.recording_options() as options,
        _quiet_options_log(),
        _granules_with(descriptor),
    ):
        icon4py_driver = driver.initialize_driver(config=config, grid_manager=manager, process_props=props, backend=backend)
    with _phase("initial condition and driver states", times, owners, progress):
        states = _initial_states(icon4py_driver, allocator)
    return Session(icon4py_driver, states, times, owners, peer_options=dict(options))


# icon4py 0.4.1 gives a descriptor to granules only as far as each goes through `setup_program`:
# tracer advection's NoFluxCondition calls `with_backend(backend)` itself and muphys' State
# allocates with `allocator=backend`; both raise on a descriptor (AttributeError 'dict' object has
# no attribute 'transforms', ValueError Invalid field allocator), in icon4py's own code too.
ONE_BACKEND_WHEN_MOIST = (
    "tracer advection / muphys on: the granules get the descriptor's one backend, customize_backend(None, "
    "descriptor), as icon4py's driver CLI gives them (icon4py 0.4.1's NoFluxCondition and muphys State "
    "cannot take a descriptor), so no per-program options"
)


def _moist(config: Any) -> bool:
    return getattr(config, "tracer_advection", None) is not None or getattr(config, "muphys", None) is not None


@contextlib.contextmanager
def _quiet_options_log() -> Iterator[None]:
    """`peers.recording_options` lowers icon4py's model_options logger to INFO to read its lines:
    keep them off the console unless icon4py logs at INFO anyway (--verbose)."""
    logger = logging.getLogger("icon4py.model.common.model_options")
    propagate = logger.propagate
    logger.propagate = logging.getLogger("icon4py").isEnabledFor(logging.INFO)
    try:
        yield
    finally:
        logger.propagate = propagate


@contextlib.contextmanager
def _granules_with(descriptor: dict[str, Any] | None) -> Iterator[None]:
    """While `initialize_driver` runs, its `driver_utils.initialize_granules` gets `descriptor` as
    the granules' backend (nothing changes when None)."""
    from icon4py.model.driver import driver_utils

    if descriptor is None:
        yield
        return
    original = driver_utils.initialize_granules

    def initialize_granules(**kwargs: Any) -> Any:
        return original(**{**kwargs, "backend": descriptor})

    driver_utils.initialize_granules = initialize_granules
    try:
        yield
    finally:
        driver_utils.initialize_granules = original


def _initial_states(drv: Any, allocator: Any) -> Any:
    """The prognostic, tracer and diagnostic states and the initial condition, through icon4py's
    own functions, in `run_driver`'s order."""
    from icon4py.model.common import initial_condition
    from icon4py.model.common.states import diagnostic_state, nonhydro_states, prognostic_state, tracer_states
    from icon4py.model.driver import driver_states, driver_utils

    grid, config = drv.grid, drv.config
    prognostic_now = prognostic_state.initialize_prognostic_state(grid=grid, allocator=allocator)
    tracer_now = tracer_states.initialize_tracer_state(grid=grid, allocator=allocator, tracer_config=config.tracer_config)
    nonhydro_diagnostic = (
        nonhydro_states.initialize_solve_nonhydro_diagnostic_state(grid=grid, allocator=allocator)
        if config.nonhydrostatic is not None
        else None
    )
    # what icon4py's initial condition and its driver states both take (run_driver passes the same)
    shared = dict(
        grid=grid, static_fields=drv.static_field_factories, backend=drv.backend, exchange=drv.exchange,
        prognostic_state_now=prognostic_now, tracer_state_now=tracer_now, solve_nonhydro_diagnostic_state=nonhydro_diagnostic,
    )  # fmt: skip
    initial_condition.create(
        config=config.initial_condition, vertical_config=config.vertical_grid, global_reductions=drv.global_reductions, **shared
    )
    states = driver_states.assemble_driver_states(
        allocator=allocator, experiment_config=config,
        diagnostic_state=diagnostic_state.initialize_diagnostic_state(grid=grid, allocator=allocator), **shared,
    )  # fmt: skip
    driver_utils.validate_granule_state_consistency(config=config, granules=drv.granules, states=states)
    return states


PROGNOSTIC_FIELDS = ("vn", "w", "rho", "exner", "theta_v")


def prognostic_arrays(session: Session) -> dict[str, Any]:
    """The prognostic fields now, as NumPy copies (vn, w, rho, exner, theta_v; plus active tracers)."""
    p = session.prognostics
    out = {name: getattr(p, name).asnumpy().copy() for name in PROGNOSTIC_FIELDS}
    for tracer in session.states.tracers.current.active_fields():
        out[tracer.name] = tracer.field.asnumpy().copy()
    return out
