"""What a newcomer meets first (issue 21): errors that list the valid choices, a program search by
words, tables that fit 80 columns, quiet broken pipes, progress lines when piped, and the small
fixes (explain checks the name first, grid info of a file has no levels). No compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from icoforge.cli.main import main
from icoforge.suite.backends import backend_names


def _error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("icoforge: error:") and err.count("\n") == 1 and "Traceback" not in err
    return err


# --- errors name the valid choices ----------------------------------------------------------------


def test_an_unknown_backend_lists_every_backend(capsys):
    err = _error(["run", "compute_airmass", "--backend", "nonsense"], capsys)
    assert all(name in err for name in backend_names())


def test_greenline_lists_its_backends_with_the_roundtrip_ones(capsys):
    err = _error(["greenline", "--backend", "nonsense"], capsys)
    assert "icoforge-cpu" in err and "roundtrip" in err


def test_an_unknown_grid_lists_the_presets(capsys):
    err = _error(["grid", "info", "R2B44"], capsys)
    assert all(name in err for name in ("R2B3", "R2B7", "REGIONAL"))


def test_an_unknown_program_says_where_the_names_are_and_which_contain_it(capsys):
    err = _error(["run", "theta_rho", "--backend", "icoforge"], capsys)
    assert "`icoforge list`" in err and "compute_rho_theta_pgrad_and_update_vn" in err


def test_an_unknown_schedule_parameter_lists_the_parameters(capsys):
    from icoforge.backend.schedule.schedule import field_names

    err = _error(["schedule", "check", "compute_airmass", "--set", "blok=256,1"], capsys)
    assert "block" in err and all(name in err for name in field_names())


def test_run_help_lists_the_backends(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert all(name in help_text.replace("- ", "-") for name in backend_names())


# --- icoforge list ---------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [["theta_rho"], ["rho theta"], ["PGRAD"], ["update_vn", "rho"]])
def test_list_matches_words_in_any_order(pattern, capsys):
    assert main(["list", *pattern]) == 0
    assert "compute_rho_theta_pgrad_and_update_vn" in capsys.readouterr().out


def test_list_says_when_nothing_matches(capsys):
    assert main(["list", "no_such_words"]) == 0
    assert "no program matches 'no_such_words'" in capsys.readouterr().out


def test_list_fits_80_columns_and_wide_shows_every_column(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "--wide for all" in out and "vertically_implicit_solver_at_predictor_step" in out
    monkeypatch.delenv("COLUMNS")
    assert main(["list", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "connectivities" in wide and "--wide for all" not in wide


# --- broken pipes ----------------------------------------------------------------------------------


def test_a_closed_pipe_exits_quietly_with_status_0():
    """`icoforge grid list | head`: the reader is gone before anything is written."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "icoforge", "grid", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    proc.stdout.close()  # before the first write: every write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err


# --- progress when piped ---------------------------------------------------------------------------


def test_run_prints_a_line_per_step_when_piped(tiny_grid, monkeypatch, capsys):
    """Each backend's phases (compiling can take minutes) as plain lines; run_program is replaced."""
    import icoforge.suite.runner as runner

    def fake_run(info, name, grid, seed, repeat, *, static_params, static_values, on_status, measuring):
        for phase in ("building inputs", "compiling", "running"):
            on_status(f"{phase} {info.name} for {name}")
        return SimpleNamespace(
            backend=name, compile_s=1.5, first_call_s=0.002, median_ms=1.0, min_ms=0.9, checksum="0123456789ab"
        )

    monkeypatch.setattr(runner, "run_program", fake_run)
    assert main(["run", "compute_airmass", "--grid", "R2B3", "--levels", "10", "--backend", "icoforge"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for text in ("loading the grid", "compiling compute_airmass for icoforge", "running compute_airmass for icoforge"):
        assert any(line.startswith("[") and " s] " in line and text in line for line in lines), text
    assert any(line.startswith("icoforge: compiled in 1.5 s") for line in lines)


def test_construction_reports_each_submission_and_each_finished_job(monkeypatch):
    """The greenline's construct phase: how many programs icon4py submitted, how many compiled."""
    import concurrent.futures as cf

    from gt4py.next.otf import runners

    from icoforge.backend.runtime import compile_pool

    pending: list[cf.Future] = []

    def fake_submit(self, task):
        pending.append(cf.Future())
        return pending[-1]

    monkeypatch.setattr(runners.ProcessRunner, "submit", fake_submit)
    task = SimpleNamespace(name="icoforge_cpu", construct_compilable=lambda with_refs: SimpleNamespace(data=SimpleNamespace(id="prog_a")))
    seen = []
    with compile_pool.recorded_submissions(lambda *event: seen.append(event)) as record:
        runners.ProcessRunner.submit(None, task)
        runners.ProcessRunner.submit(None, task)
        pending[0].set_result(None)
    pending[1].set_result(None)  # after the block: the compile phase reports it, not construction
    assert seen == [(1, 0, "prog_a"), (2, 0, "prog_a"), (2, 1, "prog_a")]
    assert [name for _, name in record] == ["icoforge_cpu", "icoforge_cpu"]


def test_the_suite_prints_each_files_time_and_still_running_lines(tmp_path):
    """tests/conftest.py's progress, in a pytest run of its own whose output is a pipe."""
    conftest = (os.path.dirname(os.path.dirname(__file__)) + "/conftest.py").replace("\\", "/")
    (tmp_path / "conftest.py").write_text(open(conftest).read().replace("HEARTBEAT_S = 60.0", "HEARTBEAT_S = 0.5"))
    (tmp_path / "test_quick.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    (tmp_path / "test_long.py").write_text(textwrap.dedent("""
        import time

        def test_long():
            time.sleep(3)
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:benchmark", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    ).stdout  # fmt: skip
    assert any(line.startswith("test_quick.py .. ") and "s (suite " in line for line in out.splitlines()), out
    assert "still running test_long.py::test_long" in out, out


# --- small fixes -----------------------------------------------------------------------------------


def test_explain_checks_the_program_before_making_a_grid(monkeypatch, capsys):
    import icoforge.grids

    def no_grid(*args, **kwargs):
        raise AssertionError("a grid was loaded before the program name was checked")

    monkeypatch.setattr(icoforge.grids, "load_grid", no_grid)
    err = _error(["explain", "compute_rho_theta_pgrad_and_updte_vn", "--grid", "R2B6"], capsys)
    assert "Did you mean 'compute_rho_theta_pgrad_and_update_vn'" in err


def test_grid_info_of_a_file_shows_no_levels(tiny_grid, capsys):
    assert main(["grid", "info", str(tiny_grid.path), "--levels", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_cells"] == 5120
    assert main(["grid", "info", str(tiny_grid.path), "--levels", "3", "--wide"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any("cells" in row for row in rows) and not any(" levels " in row for row in rows)
    assert main(["grid", "info", "R2B3", "--levels", "3"]) == 0
    assert any(" levels " in row for row in capsys.readouterr().out.splitlines())
