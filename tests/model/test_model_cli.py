"""`icoforge model`: bad names fail at once with the valid choices; the JW configuration is made
consistent and says so (no model run here: seconds)."""

from __future__ import annotations

import pathlib

import pytest

from icoforge.cli.main import main
from icoforge.model import experiments


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--backend", "gtfn_cpx"], ["unknown backend 'gtfn_cpx'", "gtfn_cpu", "icoforge-cpu", "dace_gpu"]),
        (["--experiment", "jablonowski"], ["unknown experiment 'jablonowski'", "Valid: jw"]),
        (["--grid", "R2B9"], ["unknown grid 'R2B9'", "R2B3", "REGIONAL"]),
        (["--config-dir", "/nonexistent"], ["not icon4py's configuration directory", "atm"]),
        (["--markdown", "x.md"], ["--diagnostics"]),
        (["--check", "--muphys", "--tracers"], ["--muphys or --tracers, not both"]),
    ],
)
def test_bad_input_says_the_valid_choices(argv, words, capsys):
    assert main(["model", "--grid", "R2B3", *argv] if "--grid" not in argv else ["model", *argv]) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err


def test_jw_defaults_made_consistent_and_said(tmp_path):
    run = experiments.jw_config(levels=35, dtime_s=300.0, steps=3, output=tmp_path)
    vg = run.config.vertical_grid
    assert vg.rayleigh_damping_height < vg.model_top_height
    assert any("Rayleigh damping height 45000 m is not below the model top" in n for n in run.notes)
    assert run.config.diffusion.ndyn_substeps == run.config.driver.ndyn_substeps
    assert run.config.nonhydrostatic.max_nudging_coefficient == run.config.interpolation.max_nudging_coefficient
    assert run.config.tracer_advection is None and run.config.muphys is None
    assert experiments.components(run.config) == ["dycore", "diffusion"]


def test_a_consistent_config_is_left_alone(tmp_path):
    run = experiments.jw_config(levels=10, dtime_s=60.0, steps=1, output=tmp_path)
    again, notes = experiments.make_consistent(run.config)
    assert again == run.config
    assert not any("changed" in n or "->" in n or "set to" in n for n in notes)


def test_muphys_switches_on_advection_of_six_species(tmp_path):
    run = experiments.jw_config(levels=10, dtime_s=60.0, steps=1, output=tmp_path, muphys=True)
    c = run.config
    assert c.muphys is not None and c.tracer_advection is not None and c.driver.do_prep_adv
    assert all(getattr(c.tracer_config, q) for q in ("qv", "qc", "qi", "qr", "qs", "qg"))


def test_default_time_step_follows_the_grid():
    assert experiments.default_dtime("R2B4") == 300.0
    assert experiments.default_dtime("r2b6") == 75.0
    assert experiments.default_dtime("R2B3") == 300.0  # coarser grids keep R2B4's step
    assert experiments.default_dtime("REGIONAL") == 37.5  # cut from R2B7


def test_nonpositive_values_are_refused(tmp_path):
    with pytest.raises(Exception, match="steps must be positive"):
        experiments.jw_config(levels=10, dtime_s=60.0, steps=0, output=pathlib.Path(tmp_path))


def test_check_of_a_moist_run_not_stored_says_how_to_record_it(monkeypatch, tmp_path, capsys):
    from icoforge.model import store

    monkeypatch.setitem(store.MOIST_STORES, "tracers", tmp_path / "jw_tracers_references.json")
    assert main(["model", "--check", "--tracers"]) == 2
    err = capsys.readouterr().err
    assert "no stored tracers JW run (jw_tracers_references.json)" in err and "record_jw.py" in err, err


def test_moist_runs_give_a_descriptors_granules_one_backend(tmp_path):
    # icon4py 0.4.1's tracer advection and muphys cannot take a descriptor (run.ONE_BACKEND_WHEN_MOIST)
    from icoforge.model import run as model_run

    dry = experiments.jw_config(levels=10, dtime_s=60.0, steps=1, output=tmp_path)
    moist = experiments.jw_config(levels=10, dtime_s=60.0, steps=1, output=tmp_path, tracers=True)
    assert not model_run._moist(dry.config) and model_run._moist(moist.config)
    assert "customize_backend(None, descriptor)" in model_run.ONE_BACKEND_WHEN_MOIST
