"""`icoforge list` and `icoforge run` through the real entry point."""

import re

import pytest

from icoforge.cli.main import main


def test_list_shows_every_program(capsys):
    assert main(["list", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "icon4py dycore programs (78)" in out
    row = next(line for line in out.splitlines() if "vertically_implicit_solver_at_predictor_step" in line)
    assert "Cell Edge K" in row and "C2E" in row and "yes" in row  # dims, table, scan


def test_list_filters_by_name(capsys):
    assert main(["list", "divergence_of_fluxes", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "programs (1)" in out and "z_flxdiv_mass" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "compute_airmass", "--levels", "0"], "--levels must be a positive"),
        (["run", "compute_airmass", "--levels", "-3"], "--levels must be a positive"),
        (["run", "compute_airmass", "--repeat", "0"], "--repeat must be at least 1"),
        (["run", "compute_airmass", "--backend", "gtfn_cp"], "Did you mean 'gtfn_cpu'"),
        (["run", "compute_airmass", "--compare", "dace"], "unknown backend 'dace'"),
        (["run", "vertically_implicit_solver", "--levels", "5"], "vertically_implicit_solver_at_predictor_step"),
        (["run", "compute_airmass", "--static-value", "nflatlev=3"], "its scalars: horizontal_start"),
        (["run", "compute_hydrostatic_correction_term", "--static-value", "vertical_end=ten"], "'ten' is not a int32"),
        (["run", "compute_hydrostatic_correction_term", "--static-value", "vertical_end", "--grid", "R2B3"], "NAME=VALUE"),
        (["run", "compute_airmass", "--gpu-lock", "/no/such/dir/gpu.lock"], "--gpu-lock /no/such/dir/gpu.lock"),
    ],
)
def test_run_refuses_bad_arguments_in_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("icoforge: error:") and message in err
    assert "Traceback" not in err


def _row(out: str, backend: str) -> list[str]:
    # the table's row (a box-drawing or pipe border first), not the plain progress/verification lines
    line = next(line for line in out.splitlines() if re.match(rf"\s*[│|]\s*{re.escape(backend)}\s", line))
    return [cell.strip() for cell in re.split(r"[│|]", line) if cell.strip()]


def test_run_embedded_with_compare(tiny_grid, capsys):
    argv = ["run", "compute_airmass", "--grid", "R2B3", "--levels", "10", "--backend", "embedded",
            "--compare", "embedded", "--repeat", "2", "--seed", "3", "--wide"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "compute_airmass on R2B3 (5,120 cells" in out
    cells = _row(out, "embedded")
    # backend, compile s, first call ms, median ms, min ms, checksum, verification
    assert len(cells) == 7
    assert float(cells[3]) >= float(cells[4]) > 0
    assert re.fullmatch(r"[0-9a-f]{12}", cells[5])
    assert cells[6].startswith("PASS")


@pytest.mark.slow
def test_run_gtfn_cpu_verified_against_embedded(tiny_grid, capsys):
    argv = ["run", "compute_divergence_of_fluxes_of_rho_and_theta", "--grid", "R2B3", "--levels", "10",
            "--backend", "embedded", "--compare", "gtfn_cpu", "--repeat", "3", "--wide"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    embedded, gtfn = _row(out, "embedded"), _row(out, "gtfn_cpu")
    assert embedded[6] == "reference" and gtfn[6].startswith("PASS")
    assert embedded[5] == gtfn[5]  # same checksum


@pytest.mark.slow
def test_run_on_gtfn_cpu_without_compare_has_no_verification_column(tiny_grid, capsys):
    # the program of the test above: GT4Py's build cache holds it when both run (the predictor
    # solver, used here before, took ~170 s of gtfn_cpu compile on 2 cores; the stored references
    # check it against gtfn_cpu in every CI run)
    argv = ["run", "compute_divergence_of_fluxes_of_rho_and_theta", "--grid", "R2B3", "--levels", "10",
            "--backend", "gtfn_cpu", "--repeat", "2", "--wide"]  # fmt: skip
    assert main(argv) == 0
    cells = _row(capsys.readouterr().out, "gtfn_cpu")
    assert len(cells) == 6  # no verification column without --compare
    assert float(cells[1]) >= 0 and float(cells[3]) > 0  # compile s is 0.0 on a build-cache hit


def test_run_with_a_static_value_compiles_that_variant(tiny_grid, capsys):
    """--static-value: a granule variant's static scalars (as `tune` and `profile` take them): the
    suite's hydrostatic correction computes the last level only; from one level up it writes two."""
    base = ["run", "compute_hydrostatic_correction_term", "--grid", "R2B3", "--levels", "10", "--backend", "embedded",
            "--compare", "embedded", "--repeat", "1", "--wide"]  # fmt: skip
    assert main(base) == 0
    suite = _row(capsys.readouterr().out, "embedded")
    assert main([*base, "--static-value", "vertical_start=8"]) == 0
    out = capsys.readouterr().out
    assert "static scalars: icon4py vertical_start=8" in out
    variant = _row(out, "embedded")
    assert variant[5] != suite[5] and variant[6].startswith("PASS")  # other outputs, verified alike


def test_run_holds_the_gpu_lock_while_the_calls_run_not_while_compiling(tiny_grid, tmp_path, capsys, monkeypatch):
    """--gpu-lock PATH (parallel `run` processes on one GPU, scripts/device/run_verify_sweep.sh): every
    call of the program (first, warm-up, timed) runs while PATH is flocked, its compile does not."""
    import fcntl
    import os

    from icoforge.suite import runner

    path = tmp_path / "gpu.lock"

    def locked() -> bool:  # another open file description: flock conflicts even within this process
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # releases the test's own lock, if it got one

    seen = []
    real_prepare = runner.prepare

    def prepare(*args, **kwargs):
        seen.append(("compile", locked()))
        call, compile_s = real_prepare(*args, **kwargs)

        def observed(call_args):
            seen.append(("call", locked()))
            return call(call_args)

        return observed, compile_s

    monkeypatch.setattr(runner, "prepare", prepare)
    argv = ["run", "compute_airmass", "--grid", "R2B3", "--levels", "10", "--backend", "embedded", "--repeat", "2",
            "--gpu-lock", str(path)]  # fmt: skip
    assert main(argv) == 0
    assert seen == [("compile", False)] + [("call", True)] * 4  # first call, one warm-up, two timed
    assert "embedded: GPU lock acquired after" in capsys.readouterr().out
    assert not locked()  # released at the end
