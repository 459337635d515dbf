"""`icoforge schedule show|check` through the real entry point (tiny grid: R2B3, 10 levels)."""

from __future__ import annotations

import json

import pytest

from icoforge import settings
from icoforge.backend.runtime.gpu_check import find_nvcc
from icoforge.backend.schedule.schedule import VENDOR_FUSE
from icoforge.cli.main import main

GRID = ["--grid", "R2B3", "--levels", "10"]
nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")


@nvcc
def test_show_lists_kernels_with_schedule_and_registers(tiny_grid, capsys):
    assert main(["schedule", "show", "compute_divergence_of_fluxes_of_rho_and_theta", *GRID, "--wide"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "comp_dive_flux_rho_thet_k0" in line)
    assert "map2d" in row and "block 32x8, k_per_thread 1" in row and "index_bits auto" in row and "0/0" in row  # the CUDA default
    assert "resources from nvcc sm_90" in out


def _damping_kernels(grid) -> tuple[str, str]:
    """apply_divergence_damping_and_update_vn's kernels by what they do (GT4Py's full list gives
    10 under host conditionals, the early path 2): the fourth-order damping's E2C2EO sum, and the
    kernel storing the E2C difference it reads."""
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.suite.catalogue import get_program

    kernels = program_ir(get_program("apply_divergence_damping_and_update_vn").program, grid.connectivities).kernels()
    damping = next(k.name for k in kernels if "E2C2EO" in k.tables_used())
    gradient = next(k.name for k in kernels if "E2C" in k.tables_used())
    assert damping != gradient
    return damping, gradient


@nvcc
def test_check_applies_settings_to_one_kernel_and_reports_resources(tiny_grid, capsys, tmp_path):
    damping, gradient = _damping_kernels(tiny_grid)
    src = tmp_path / "k.cu"
    argv = ["schedule", "check", "apply_divergence_damping_and_update_vn", *GRID, "--kernel", damping,
            "--set", "block=64,2", "--set", "smem_tables=E2C2EO", "--set", "h_per_thread=2", "--json", "--emit", str(src)]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    chosen = next(k for k in out["kernels"] if k["kernel"] == damping)
    assert chosen["schedule"]["block"] == [64, 2] and chosen["smem_bytes"] == 2 * 64 * 5 * 4
    assert chosen["resources"]["shared_bytes"] == chosen["smem_bytes"]
    other = next(k for k in out["kernels"] if k["kernel"] == gradient)
    assert other["schedule"]["block"] == [32, 8] and other["smem_bytes"] == 0  # the CUDA default
    assert "__shared__ int E2C2EO_sh[640]" in src.read_text()
    assert set(out["schedule"]["per_kernel"]) == {damping}


@pytest.mark.parametrize(
    "settings, message",
    [
        (["--set", "block=2048,1"], "block 2048x1 = 2048 threads exceeds 1024"),
        (["--set", "k_per_thread=0"], "k_per_thread must be an integer >= 1, got 0"),
        (["--set", "k_unrol=2"], "Did you mean 'k_unroll'"),
        # "10 kernels" on GT4Py's full list, the two kernels' names on the early path
        (["--set", "smem_tables=C2E"], "smem_tables names 'C2E', which none of its "),
        (["--set", "smem_tables=E2C", "--set", "block=1024", "--set", "h_per_thread=8"], "beyond the limit of 49152 B"),
        (["--kernel", "appl_dive_damp_upda_vn_k42", "--set", "k_unroll=2"], "unknown kernel of apply_divergence"),
        (["--kernel", "appl_dive_damp_upda_vn_k1"], "--kernel needs at least one --set"),
    ],
)
def test_check_refuses_illegal_schedules_in_one_line(tiny_grid, capsys, settings, message):
    assert main(["schedule", "check", "apply_divergence_damping_and_update_vn", *GRID, "--no-compile", *settings]) == 2
    err = capsys.readouterr().err
    # progress lines ("[  0 s] GT4Py passes ...") may come first; the error is one line, the last
    last = err.strip().splitlines()[-1]
    assert last.startswith("icoforge: error:") and message in last, err
    assert "Traceback" not in err


@pytest.mark.skipif(settings.current().early_gtir, reason="GT4Py's full list only (ICOFORGE_EARLY_GTIR=0): the early path recomputes rho_theta's gradients in its lowering, no kernels are left to fuse")
def test_fuse_shows_the_fused_kernels_and_takes_settings_for_them(tiny_grid, capsys, tmp_path):
    # rho_theta's four gradient kernels fuse when they are not inlined into their reader
    src, sched = tmp_path / "k.cu", tmp_path / "s.json"
    sched.write_text('{"inline": "off"}')
    argv = ["schedule", "check", "compute_rho_theta_pgrad_and_update_vn", *GRID, "--fuse", "--no-compile", "--json",
            "--schedule", str(sched), "--kernel", "comp_rho_thet_pgra_upda_vn_k7to10", "--set", "block=64,2",
            "--emit", str(src)]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    names = [k["kernel"] for k in out["kernels"]]
    assert "comp_rho_thet_pgra_upda_vn_k7to10" in names and "comp_rho_thet_pgra_upda_vn_k7" not in names
    fused = next(k for k in out["kernels"] if k["kernel"] == "comp_rho_thet_pgra_upda_vn_k7to10")
    assert fused["schedule"]["block"] == [64, 2]
    assert out["schedule"]["fuse"] == ["compute_rho_theta_pgrad_and_update_vn"] and out["schedule"]["inline"] == "off"
    assert "comp_rho_thet_pgra_upda_vn_k7to10(" in src.read_text()
    # with the default inline policy the gradients are recomputed in the last kernel: nothing to fuse
    assert main(argv[:-8] + ["--set", "block=64,2"]) == 0
    names = [k["kernel"] for k in json.loads(capsys.readouterr().out)["kernels"]]
    assert not any(n.startswith("comp_rho_thet_pgra_upda_vn_k7") for n in names)


@pytest.mark.skipif(not settings.current().early_gtir, reason="the early-GTIR path only (the default; ICOFORGE_EARLY_GTIR unset or 1)")
def test_fuse_on_the_early_path_shows_the_fused_kernels_and_takes_settings_for_them(tiny_grid, capsys, tmp_path):
    # the corrector without static arguments: maps over the same columns (k4 and k6, k5 and k7) fuse
    src = tmp_path / "k.cu"
    argv = ["schedule", "check", "vertically_implicit_solver_at_corrector_step", *GRID, "--fuse", "--no-compile", "--json",
            "--kernel", "vert_impl_solv_corr_step_k4to6", "--set", "block=64,2", "--emit", str(src)]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    names = [k["kernel"] for k in out["kernels"]]
    assert {"vert_impl_solv_corr_step_k4to6", "vert_impl_solv_corr_step_k5to7"} <= set(names)
    assert not {f"vert_impl_solv_corr_step_k{i}" for i in (4, 5, 6, 7)} & set(names)
    fused = next(k for k in out["kernels"] if k["kernel"] == "vert_impl_solv_corr_step_k4to6")
    assert fused["schedule"]["block"] == [64, 2]
    # the default's own fusions stay (schedule.VENDOR_FUSE), --fuse adds this program
    assert out["schedule"]["fuse"] == sorted({*VENDOR_FUSE["cuda"], "vertically_implicit_solver_at_corrector_step"})
    assert "vert_impl_solv_corr_step_k4to6(" in src.read_text()
    # rho_theta (no static arguments): the lowering stores its four gradients over the cells, as
    # GT4Py's split does; inline off keeps them and fusion joins them into one kernel; auto
    # recomputes those its readers load at one neighbour per path
    names = {}
    for inline in ("off", "auto"):
        sched = tmp_path / f"{inline}.json"
        sched.write_text(json.dumps({"inline": inline}))
        assert main(["schedule", "check", "compute_rho_theta_pgrad_and_update_vn", *GRID, "--fuse", "--no-compile", "--json", "--schedule", str(sched)]) == 0
        names[inline] = [k["kernel"] for k in json.loads(capsys.readouterr().out)["kernels"]]
    assert names["off"][0] == "comp_rho_thet_pgra_upda_vn_k0to3", names
    assert names["auto"][0] == "comp_rho_thet_pgra_upda_vn_k2to3", names


@pytest.mark.parametrize(
    "command, schedule, message",
    [
        ("greenline", "{bad", "--schedule: not valid JSON"),
        ("greenline", '{"default": {"block": [2000, 1]}}', "2000 threads exceeds 1024"),
        ("run", '{"fuse": 5}', 'fuse: a list of program names (or "*")'),
        ("run", '{"default": 5}', "--schedule: not a schedule"),
        ("run", "/no/such/schedule.json", "neither JSON nor a readable file"),
    ],
)
def test_bad_schedule_option_fails_in_one_line_before_any_work(command, schedule, message, capsys, monkeypatch):
    monkeypatch.delenv("ICOFORGE_SCHEDULE", raising=False)
    argv = [command, *(["extrapolate_at_top"] if command == "run" else []), "--schedule", schedule]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "icoforge: error:" in err and message in err and "Traceback" not in err
    assert "ICOFORGE_SCHEDULE" not in __import__("os").environ  # a refused schedule is not left behind


def test_schedule_option_reaches_the_backend_made_by_name(tiny_grid, capsys, monkeypatch):
    from icoforge.suite.backends import get_backend

    monkeypatch.delenv("ICOFORGE_SCHEDULE", raising=False)
    plain = get_backend("icoforge-emulated-cuda")
    argv = ["run", "extrapolate_at_top", *GRID, "--backend", "icoforge-emulated-cuda", "--compare", "icoforge-cpu",
            "--repeat", "1", "--schedule", '{"default": {"block": [64, 2]}, "fuse": ["*"]}']  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS" in out
    fused = get_backend("icoforge-emulated-cuda")  # made under the option's schedule, not the plain one
    assert fused is not plain and plain.executor.gpu.schedule.fuse == VENDOR_FUSE["cuda"]  # the default's
    schedule = fused.executor.gpu.schedule
    assert schedule.default.block == (64, 2) and schedule.fuses("extrapolate_at_top")
