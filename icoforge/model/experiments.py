"""What icon4py's driver runs: an `icon4py.model.driver.config.ExperimentConfig` plus the notes that
say which defaults were changed to make it consistent, and why.

Two sources:
- a named experiment (`EXPERIMENTS`): built from icon4py's configuration classes and their
  defaults, no files needed. `jw` is the Jablonowski-Williamson baroclinic wave (icon4py's
  analytic initial condition and topography; dycore + diffusion; dry);
- icon4py's own configuration directory (the three namelist-JSON files its CLI reads), read
  with icon4py's `read_experiment_config_from_fortran`.

Either way the same checks run (`make_consistent`); a changed value is said in `notes`, never
changed silently.
"""

from __future__ import annotations

import dataclasses
import datetime
import pathlib
from typing import Any

from icoforge.errors import IcoforgeError, UnknownNameError

# The Rayleigh damping layer starts at this fraction of the model top when the configured
# height is not below the top (icon4py's default, 45 km, lies above its default top, 23.5 km).
DAMPING_FRACTION_OF_TOP = 0.75
# icon4py's JW datatest (R02B04, ICON's exclaim_nh35_tri_jws) takes one 300 s step; finer grids
# scale it with the edge length, coarser ones keep it.
DTIME_R2B4_S = 300.0
START = datetime.datetime(2008, 9, 1, tzinfo=datetime.UTC)  # the JW datatest's start date


@dataclasses.dataclass(frozen=True)
class Experiment:
    name: str
    description: str


EXPERIMENTS = {
    "jw": Experiment(
        "jw",
        "Jablonowski-Williamson baroclinic wave: icon4py's analytic initial condition and topography, "
        "dycore + diffusion, dry, no downloaded data",
    ),
}


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The experiment config icon4py's driver takes, and what was done to it."""

    config: Any  # icon4py.model.driver.config.ExperimentConfig
    source: str  # "experiment jw" or the configuration directory
    notes: tuple[str, ...]


def lookup_experiment(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name.lower()]
    except KeyError:
        raise UnknownNameError("experiment", name, list(EXPERIMENTS)) from None


def default_dtime(preset_name: str) -> float:
    """A time step for the JW case on a preset: 300 s on R2B4 (icon4py's JW datatest), halved per
    further bisection; REGIONAL is cut from R2B7."""
    import math

    from icoforge.grids.presets import lookup_preset

    preset = lookup_preset(preset_name)
    bisections = 7 if preset.limited_area else round(math.log(preset.cells / 80, 4))  # cells = 20·2²·4^k
    return DTIME_R2B4_S * 2.0 ** min(0, 4 - bisections)


def jw_config(*, levels: int, dtime_s: float, steps: int, substeps: int = 5, output: pathlib.Path,
              tracers: bool = False, muphys: bool = False) -> RunConfig:
    """The JW baroclinic wave from icon4py's configuration classes and their defaults; dry unless
    `tracers` (tracer advection of qv, moist JW initial state) or `muphys` (AES graupel
    microphysics, which needs all six water species, so their advection too)."""
    from icon4py.model.atmosphere.diffusion import diffusion
    from icon4py.model.atmosphere.dycore import solve_nonhydro
    from icon4py.model.common import initial_condition, prescribed_tendencies, topography
    from icon4py.model.common.grid import geometry_config, vertical
    from icon4py.model.common.initial_condition.analytical import jablonowski_williamson as jw_ic
    from icon4py.model.common.interpolation import interpolation_factory
    from icon4py.model.common.metrics import metrics_factory
    from icon4py.model.common.topography.analytical import jablonowski_williamson as jw_topo
    from icon4py.model.driver import config as driver_config

    _check_positive(levels=levels, steps=steps, substeps=substeps, dtime=dtime_s)
    driver = driver_config.DriverConfig.make_initial(
        experiment_name="jablonowski_williamson",
        profiling_options=None,
        dtime=datetime.timedelta(seconds=dtime_s),
        start_of_simulation=START,
        end_of_simulation=steps,
        output_path=output,
        ndyn_substeps=substeps,
    )
    config = driver_config.ExperimentConfig(
        geometry=geometry_config.GeometryConfig(use_analytical_means=True),
        metrics=metrics_factory.MetricsConfig(),
        interpolation=interpolation_factory.InterpolationConfig(),
        vertical_grid=vertical.VerticalGridConfig(num_levels=levels),
        topography=topography.TopographyConfig(config=jw_topo.JablonowskiWilliamsonConfig()),
        initial_condition=initial_condition.InitialConditionConfig(config=jw_ic.JablonowskiWilliamsonConfig()),
        prescribed_tendencies=prescribed_tendencies.PrescribedTendenciesConfig(),
        driver=driver,
        nonhydrostatic=solve_nonhydro.NonHydrostaticConfig(),
        diffusion=diffusion.DiffusionConfig(),
    )
    config, notes = make_consistent(config)
    if tracers or muphys:
        config, more = _moist(config, muphys)
        notes += more
    return RunConfig(config, "experiment jw" + (" + muphys" if muphys else " + tracer advection" if tracers else ""), tuple(notes))


def _moist(config: Any, muphys: bool) -> tuple[Any, list[str]]:
    """Tracer advection (ICON's transport_nml as in icon4py's APE/AES experiment: MIURA with
    positive-definite limiter, PPM with semi-monotonic limiter) and, with `muphys`, AES graupel."""
    from icon4py.model.atmosphere.subgrid_scale_physics.muphys import config as muphys_config
    from icon4py.model.atmosphere.tracer_advection import tracer_advection as adv
    from icon4py.model.common.states import tracer_states

    advection = adv.AdvectionConfig(
        horizontal_advection_type=adv.HorizontalAdvectionType.LINEAR_2ND_ORDER,
        horizontal_advection_limiter=adv.HorizontalAdvectionLimiter.POSITIVE_DEFINITE,
        vertical_advection_type=adv.VerticalAdvectionType.PPM_3RD_ORDER,
        vertical_advection_limiter=adv.VerticalAdvectionLimiter.SEMI_MONOTONIC,
    )
    active = tracer_states.TracerConfig.all() if muphys else tracer_states.TracerConfig(qv=True)
    notes = [
        "tracer advection: MIURA (2nd order, positive definite) + PPM (semi-monotonic); the driver's "
        "do_prep_adv on (the dycore accumulates the mass fluxes advection needs)",
        "moist JW initial state: qv from icon4py's JW initial condition (70 % relative humidity at 1000 hPa)",
    ]
    if muphys:
        notes.append("muphys: AES graupel on all six water species (qv qc qi qr qs qg), each advected")
    config = config.with_overrides(
        tracer_config=active, tracer_advection=advection, driver={"do_prep_adv": True},
        muphys=muphys_config.MuphysConfig() if muphys else None,
    )
    return config, notes


def from_directory(path: pathlib.Path, *, steps: int | None, levels: int | None, output: pathlib.Path) -> RunConfig:
    """icon4py's configuration directory (what `icon4py-driver --config-file-path` reads)."""
    from icon4py.model.common.utils import fortran_config

    names = (fortran_config.ATM_DICT_FNAME, fortran_config.MASTER_DICT_FNAME, fortran_config.INPUT_DICT_FNAME)
    missing = [n for n in names if not (path / n).is_file()]
    if missing:
        raise IcoforgeError(f"{path}: not icon4py's configuration directory (missing {', '.join(missing)})")
    from icon4py.model.driver import config as driver_config  # imports every component: seconds
    config = driver_config.read_experiment_config_from_fortran(path)
    notes = []
    overrides: dict[str, Any] = {"driver": {"output_path": output}}
    if steps is not None:
        _check_positive(steps=steps)
        overrides["driver"]["end_of_simulation"] = steps
        notes.append(f"steps: {steps} (--steps; the directory's stop date is not used)")
    if levels is not None and levels != config.vertical_grid.num_levels:
        _check_positive(levels=levels)
        overrides["vertical_grid"] = {"num_levels": levels}
        notes.append(f"levels: {levels} (--levels; the directory says {config.vertical_grid.num_levels})")
    config, fixes = make_consistent(config.with_overrides(**overrides))
    return RunConfig(config, str(path), tuple(notes + fixes))


def make_consistent(config: Any) -> tuple[Any, list[str]]:
    """The config with values that contradict each other changed, and one note per change."""
    notes: list[str] = []
    config = _damping_below_top(config, notes)
    config = _same_substeps(config, notes)
    config = _same_nudging(config, notes)
    _say_heights_above_top(config, notes)
    return config, notes


def _damping_below_top(config: Any, notes: list[str]) -> Any:
    vg = config.vertical_grid
    if vg.rayleigh_damping_height < vg.model_top_height:
        return config
    height = DAMPING_FRACTION_OF_TOP * vg.model_top_height
    notes.append(
        f"Rayleigh damping height {vg.rayleigh_damping_height:.0f} m is not below the model top "
        f"({vg.model_top_height:.0f} m): set to {height:.0f} m ({DAMPING_FRACTION_OF_TOP:g} of the top)"
    )
    return config.with_overrides(vertical_grid={"rayleigh_damping_height": height})


def _same_substeps(config: Any, notes: list[str]) -> Any:
    n = config.driver.ndyn_substeps
    if config.diffusion is None or config.diffusion.ndyn_substeps == n:
        return config
    notes.append(f"diffusion ndyn_substeps {config.diffusion.ndyn_substeps} -> {n} (the driver's substeps)")
    return config.with_overrides(diffusion={"ndyn_substeps": n})


def _same_nudging(config: Any, notes: list[str]) -> Any:
    """ICON passes the interpolation's max nudging coefficient to the dycore and diffusion
    (icon4py's `from_fortran_dict` does too); the classes' own defaults differ (0.1 vs 0.375)."""
    value = config.interpolation.max_nudging_coefficient
    for part in ("nonhydrostatic", "diffusion"):
        own = getattr(config, part)
        if own is not None and own.max_nudging_coefficient != value:
            notes.append(f"{part} max_nudging_coefficient {own.max_nudging_coefficient:g} -> {value:g} (the interpolation's, as ICON passes it)")
            config = config.with_overrides(**{part: {"max_nudging_coefficient": value}})
    return config


def _say_heights_above_top(config: Any, notes: list[str]) -> None:
    """ICON defaults that lie above the model top are kept (they then act as 'never reached'), but said."""
    top = config.vertical_grid.model_top_height
    above = []
    if config.nonhydrostatic is not None and config.nonhydrostatic.fourth_order_divdamp_z >= top:
        above.append(f"divergence damping ramp starts at {config.nonhydrostatic.fourth_order_divdamp_z:.0f} m")
    if config.diffusion is not None and config.diffusion.smagorinski_scaling_height >= top:
        above.append(f"Smagorinsky scaling ramp starts at {config.diffusion.smagorinski_scaling_height:.0f} m")
    if above:
        notes.append(f"kept ICON defaults above the model top ({top:.0f} m), so never reached: " + "; ".join(above))


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise IcoforgeError(f"{name} must be positive, got {value}")


def describe(run: RunConfig) -> list[tuple[str, str]]:
    """The settings a user should see before minutes of compiling: (name, value)."""
    c = run.config
    vg = c.vertical_grid
    parts = [
        ("source", run.source),
        ("levels", f"{vg.num_levels}, model top {vg.model_top_height:.0f} m, flat above {vg.flat_height:.0f} m, "
                   f"Rayleigh damping above {vg.rayleigh_damping_height:.0f} m"),
        ("time step", f"{c.driver.dtime.total_seconds():g} s, {c.driver.ndyn_substeps} dynamics substeps"),
        ("initial condition", type(c.initial_condition.config).__name__),
        ("topography", type(c.topography.config).__name__),
        ("components", ", ".join(components(c)) or "none"),
    ]
    return parts


def components(config: Any) -> list[str]:
    names = {"nonhydrostatic": "dycore", "diffusion": "diffusion", "tracer_advection": "tracer advection",
             "graupel": "graupel microphysics", "muphys": "muphys"}
    return [label for attr, label in names.items() if getattr(config, attr) is not None]
