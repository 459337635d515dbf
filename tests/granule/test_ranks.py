"""The dycore step decomposed over MPI ranks (issue 23): icon4py's decomposition, our halo
exchanges, and the two-rank step against the one-rank step.

The MPI tests run `mpirun -n 2` in a subprocess (MPI is never initialised inside pytest). Without
Open MPI's mpirun or mpi4py they skip and say which is missing (`make setup` installs mpi4py;
Debian: `apt-get install openmpi-bin libopenmpi-dev`, as .ci/run does).

    pytest tests/granule/test_ranks.py                     # unit tests + exchange check (~1 min)
    pytest -m slow tests/granule/test_ranks.py             # + the 2-rank step vs 1 rank (R2B3/10, icoforge-cpu)
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from icoforge.errors import IcoforgeError

from icoforge.granule import decompose, halo_exchange
from icoforge.granule.fields import Array, StaticFields

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parents[1]


def mpi_missing() -> str | None:
    if shutil.which("mpirun") is None:
        return "mpirun not found: install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev; .ci/run does)"
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py not installed (make setup installs it: pyproject's [mpi] extra)"
    return None


needs_mpi = pytest.mark.skipif(mpi_missing() is not None, reason=f"MPI missing: {mpi_missing()}")


def mpirun(args: list[str], timeout: float, cache: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ICOFORGE_CACHE=str(cache), PYTHONUNBUFFERED="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")  # fmt: skip
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "--bind-to", "none", sys.executable, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


# --- no MPI needed -------------------------------------------------------------------------------


def test_bfs_partition_is_balanced_and_deterministic(tiny_grid):
    c2e2c = decompose.global_c2e2c(tiny_grid)
    for ranks in (2, 3, 4):
        labels = decompose.bfs_partition(c2e2c, ranks)
        counts = np.bincount(labels, minlength=ranks)
        assert counts.sum() == c2e2c.shape[0] and counts.max() - counts.min() <= 1
        assert np.array_equal(labels, decompose.bfs_partition(c2e2c, ranks))
        # compact: most cells' neighbours are on the same rank (a cut, not a scatter)
        same = (labels[c2e2c] == labels[:, None]).mean()
        assert same > 0.9, same


def test_partition_refuses_bad_input(tiny_grid):
    c2e2c = decompose.global_c2e2c(tiny_grid)
    with pytest.raises(Exception, match="choose one of metis, bfs"):
        decompose.cell_partition(c2e2c, 2, "scotch")
    with pytest.raises(Exception, match="cannot split"):
        decompose.cell_partition(c2e2c, 0)
    assert (decompose.cell_partition(c2e2c, 1) == 0).all()


def test_limited_area_grids_are_refused_with_the_reason():
    grid = types.SimpleNamespace(limited_area=True, name="REGIONAL")
    with pytest.raises(Exception, match="limited-area grid.*global grid"):
        decompose.check_decomposable(grid, 2)
    decompose.check_decomposable(grid, 1)  # one rank: nothing to decompose


def test_local_fields_are_the_global_ones_at_the_rank_points():
    gidx = {"CellDim": np.array([4, 0, 2]), "EdgeDim": np.array([1, 3]), "VertexDim": np.array([0])}
    owned = {"CellDim": np.array([True, True, False]), "EdgeDim": np.array([True, False]), "VertexDim": np.array([True])}
    idx = decompose.LocalIndices(gidx, owned)
    cells = np.arange(10.0).reshape(5, 2)
    static = StaticFields(
        geometry={"cell_area": Array(("CellDim",), (0,), np.arange(5.0)),
                  "cell_owner_mask": Array(("CellDim",), (0,), np.ones(5, bool))},
        interpolation={"e_bln_c_s": Array(("CellDim", "C2EDim"), (0, 0), cells)},
        metrics={"vct": Array(("KDim",), (0,), np.arange(3.0))},
        scalars={}, vct_a=np.zeros(1), vct_b=np.zeros(1), factory_backend="x", timings={},
    )  # fmt: skip
    local = decompose.local_static_fields(static, idx)
    assert local.geometry["cell_area"].values.tolist() == [4.0, 0.0, 2.0]
    assert local.geometry["cell_owner_mask"].values.tolist() == [True, True, False]  # the rank's own
    assert local.interpolation["e_bln_c_s"].values.tolist() == [[8, 9], [0, 1], [4, 5]]
    assert local.metrics["vct"].values.tolist() == [0, 1, 2]
    state = decompose.local_state({"vn": np.arange(4.0), "rho": np.arange(5.0) * 10}, idx)
    assert state["vn"].tolist() == [1.0, 3.0] and state["rho"].tolist() == [40.0, 0.0, 20.0]
    shifted = StaticFields(**{**static.__dict__, "metrics": {"x": Array(("CellDim",), (2,), np.zeros(3))}})
    with pytest.raises(Exception, match="not 0"):
        decompose.local_static_fields(shifted, idx)


def test_mask_prog_halo_c_is_true_on_the_rank_halo():
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import horizontal as h_grid

    refin = np.array([0, 0, 0, 0, 2, 0, 0])  # 4 owned cells, 3 halo cells, one in the lateral boundary
    bounds = {h_grid.Zone.HALO: 4, h_grid.Zone.END: 7}
    grid = types.SimpleNamespace(
        num_cells=7,
        refinement_control={dims.CellDim: types.SimpleNamespace(ndarray=refin)},
        start_index=lambda d: bounds[d.zone], end_index=lambda d: bounds[d.zone],
    )  # fmt: skip
    assert decompose.mask_prog_halo_c(grid).tolist() == [False] * 4 + [False, True, True]


def test_one_gpu_per_rank_device_selection(monkeypatch):
    used = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda i: types.SimpleNamespace(use=lambda: used.append(i))))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert [decompose.select_device(r, n_gpus=4) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert used == [0, 1, 2, 3, 0, 1]
    assert decompose.select_device(3, n_gpus=1) == 0  # ranks sharing one GPU
    with pytest.raises(Exception, match="no GPU"):
        decompose.select_device(0, n_gpus=0)


def test_device_grid_copies_only_the_tables(tiny_grid):
    copies = []

    class Xp:  # CuPy's asarray, on the host
        @staticmethod
        def asarray(a):
            copies.append(a.shape)
            return np.array(a, copy=True)

    host = tiny_grid.icon_grid
    dev = decompose.device_icon_grid(host, Xp)
    assert len(copies) == sum(hasattr(c, "ndarray") for c in host.connectivities.values()) > 10
    for name, conn in host.connectivities.items():
        if hasattr(conn, "ndarray"):
            assert dev.connectivities[name].ndarray is not conn.ndarray
            assert np.array_equal(dev.connectivities[name].ndarray, conn.ndarray)
            assert dev.connectivities[name].skip_value == conn.skip_value
    assert (dev.num_cells, dev.num_edges, dev.num_levels) == (host.num_cells, host.num_edges, host.num_levels)
    assert dev.start_index is host.start_index and dev.end_index is host.end_index


def test_local_rank_from_the_launcher(monkeypatch):
    for name in decompose.LOCAL_RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert decompose.local_rank_from_environment() is None
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3")
    assert decompose.local_rank_from_environment() == 3


def test_exchange_choice_lists_valid_names():
    props = decompose.RankProperties(comm=None, rank=0, comm_size=2, local_rank=0)
    with pytest.raises(Exception, match="choose one of auto, ghex, mpi"):
        halo_exchange.make_exchange("nccl", props, None, None, gpu=False)


def test_exchange_phases_per_step_adds_up_a_dycore_step():
    from icoforge.granule import ranks

    assert ranks.exchange_phases_per_step({}) is None  # GHEX or one rank: no phases
    phase_ms = {"pack": 1.0, "to_host": 0.5, "mpi_wait": 3.0, "to_device": 0.5, "unpack": 1.0}
    timings = {
        v: {"exchange_ms": [7.0, 9.0, 8.0]} | {f"{p}_ms": [ms, 100.0, ms] for p, ms in phase_ms.items()}
        for v in ("first", "middle", "last")
    }
    out = ranks.exchange_phases_per_step(timings)
    assert list(out) == [*halo_exchange.PHASES, "other", "total"]
    # medians, summed over first + 3 x middle + last
    assert out["mpi_wait"] == 15.0 and out["total"] == 40.0 and out["other"] == 40.0 - 5 * 6.0


def test_ranks_report_names_stalled_samples_per_rank():
    from icoforge.granule import ranks

    def rank(i, first):
        variants = {v: {"step_ms": 18.0, "samples_ms": [18.0, 18.1, 17.9]} for v in ("first", "middle", "last")}
        variants["first"]["samples_ms"] = first
        return {"rank": i, "points": {"cells": {"owned": 10, "halo": 2}, "edges": {"owned": 15, "halo": 3}},
                "variants": variants, "dycore_step_ms": 90.0, "exchange_ms_per_step": 50.0,
                "exchange_calls_per_step": 20.0, "exchange": "mpi", "build_window": [0.0, 30.0]}  # fmt: skip

    report = {"grid": {"name": "R2B5", "levels": 80}, "ranks": 2, "decomposer": "metis", "options": {},
              "backends": [{"backend": "icoforge-cuda", "ranks": [rank(0, [18.0, 488.5, 18.2]), rank(1, [18.0, 18.1, 17.9])],
                            "dycore_step_ms": 90.0, "exchange_ms_per_step": 50.0, "verification": None}]}  # fmt: skip
    stalled = [line for line in ranks.report_lines(report) if "samples above" in line]
    assert stalled == [
        "icoforge-cuda: samples above 2x their median (the medians are not moved by them; a stall of the host or "
        "the device?): rank 0 first 1 of 3 (up to 488.5 ms, median 18.20) (Python's collector not recorded)"
    ]
    report["backends"][0]["ranks"][0]["gc_pauses"] = {"frozen_objects": 1234, "collections": {"0": 9, "1": 1, "2": 1},
                                                      "total_ms": 480.0, "longest_ms": 470.2}  # fmt: skip
    stalled = [line for line in ranks.report_lines(report) if "samples above" in line]
    assert stalled[0].endswith("(Python's collector during the timing: 9/1/1 collections of generation 0/1/2, longest "
                               "470.2 ms (1,234 setup objects frozen))")  # fmt: skip


def test_ranks_launcher_command(monkeypatch):
    import argparse

    from icoforge.cli import ranks_cmd

    args = argparse.Namespace(ranks=4, mpirun="definitely-not-a-launcher", compile_in_turn=False)
    with pytest.raises(Exception, match="not found.*openmpi-bin"):
        ranks_cmd.launch_command(args, ["greenline", "--ranks", "4"])
    if shutil.which("mpirun"):
        cmd, env = ranks_cmd.launch_command(argparse.Namespace(ranks=4, mpirun="mpirun", compile_in_turn=False), ["greenline", "--ranks", "4"])
        assert cmd[:3] == ["mpirun", "-n", "4"] and cmd[-4:] == ["icoforge", "greenline", "--ranks", "4"]
        assert "OMP_NUM_THREADS" in env
    monkeypatch.delenv("GT4PY_BUILD_JOBS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(ranks_cmd, "_is_open_mpi", lambda launcher: False)
    _, env = ranks_cmd.launch_command(argparse.Namespace(ranks=4, mpirun="mpiexec", compile_in_turn=False), ["greenline"])
    assert env["GT4PY_BUILD_JOBS"] == env["OMP_NUM_THREADS"] == "4"  # the ranks share the cores
    _, env = ranks_cmd.launch_command(argparse.Namespace(ranks=4, mpirun="mpiexec", compile_in_turn=True), ["greenline"])
    assert env["GT4PY_BUILD_JOBS"] == "16" and env["OMP_NUM_THREADS"] == "4"  # one rank compiles at a time


def test_ranks_mode_is_chosen_from_flag_and_launcher(monkeypatch):
    import argparse

    from icoforge.cli import ranks_cmd

    for name in ranks_cmd.WORLD_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert ranks_cmd.world_size() is None
    assert not ranks_cmd.wanted(argparse.Namespace(ranks=None))  # plain greenline
    assert ranks_cmd.wanted(argparse.Namespace(ranks=2))
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")  # started by mpirun -n 4 without --ranks
    assert ranks_cmd.world_size() == 4 and ranks_cmd.wanted(argparse.Namespace(ranks=None))
    with pytest.raises(Exception, match="--ranks 2, but MPI started 4 ranks"):
        ranks_cmd.run(argparse.Namespace(ranks=2))


def test_options_of_the_other_mode_are_refused_by_name():
    from icoforge.cli import ranks_cmd
    from icoforge.cli.main import build_parser

    parse = build_parser().parse_args
    ranks_cmd.refuse_one_process_options(parse(["greenline", "--ranks", "2", "--verify", "--json", "r.json"]))  # defaults pass
    args = parse(["greenline", "--ranks", "2", "--cold", "--floors-steps", "1", "--gpu-lock", "/tmp/l"])
    with pytest.raises(IcoforgeError, match="--ranks does not take --cold, --gpu-lock, --floors-steps"):
        ranks_cmd.run(args)  # before mpirun is looked for or started
    ranks_cmd.refuse_ranks_options(parse(["greenline", "--grid", "R2B3"]))  # one process, defaults pass
    for flags in (["--compile-in-turn"], ["--exchange", "mpi", "--decomposer", "bfs"]):
        with pytest.raises(IcoforgeError, match=f"{flags[0]}.* need --ranks N"):
            ranks_cmd.refuse_ranks_options(parse(["greenline", *flags]))


# --- under mpirun ----------------------------------------------------------------------------------


@needs_mpi
@pytest.mark.mpi
def test_decomposition_and_halo_exchange_on_two_ranks(tmp_path, icoforge_cache):
    """icon4py's decomposition of R2B3 on 2 ranks: owners partition every dimension; after an
    exchange every halo point holds its owner's value (NumPy buffers, device-like buffers staged
    through the host, and GHEX's exchange when it is installed)."""
    out = mpirun([str(HERE / "mpi_exchange_check.py")], timeout=300, cache=icoforge_cache)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["partition"] and result["numpy"] and result["device"], result
    assert result["device_syncs"] > 0 and result["device_copies"] > 0  # the staging path ran
    # a device call: one copy to the host and one back, whatever the number of fields; the first
    # call of each dimension also uploads its index arrays and allocates the pinned buffers once
    first, again = result["device_calls"][:3], result["device_calls"][3:]
    assert [pinned for _, pinned in first] == [2, 2, 2] and again == [[2, 0]] * 3, result["device_calls"]
    assert set(result["phases_device"]) == set(halo_exchange.PHASES), result["phases_device"]
    assert set(result["phases_numpy"]) == {"pack", "mpi_wait", "unpack"}, result["phases_numpy"]
    assert all(s >= 0 for s in (*result["phases_device"].values(), *result["phases_numpy"].values()))
    assert all(s["CellDim"][1] > 0 for s in result["sizes"])  # both ranks have halos
    if halo_exchange.ghex_available() is None:
        assert result["ghex"] is True, result


@needs_mpi
@pytest.mark.mpi
@pytest.mark.slow
def test_two_rank_step_equals_one_rank(tmp_path, icoforge_cache):
    """`icoforge greenline --ranks 2 --verify` on R2B3/10 with icoforge-cpu: three substeps on two
    ranks against the same substeps on one rank, owned points gathered; rtol 1e-12 on
    max|a-b|/max|ref| per prognostic field, a NaN fails. Both ranks exchanged halos and timed.
    With --compile-in-turn: rank 1 built its programs only after rank 0 had built its own."""
    report_file = tmp_path / "ranks.json"
    args = ["-m", "icoforge", "greenline", "--ranks", "2", "--grid", "R2B3", "--levels", "10",
            "--backend", "icoforge-cpu", "--verify", "--only-used-variants", "--steps", "2", "--warmup", "0",
            "--compile-in-turn", "--json", str(report_file)]  # fmt: skip
    out = mpirun(args, timeout=1500, cache=icoforge_cache)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    report = json.loads(report_file.read_text())
    (backend,) = report["backends"]
    ver = backend["verification"]
    assert ver["passed"] and ver["rtol"] == 1e-12, ver["worst_rel"]
    assert set(ver["worst_rel"]) == {"vn", "w", "rho", "exner", "theta_v"}
    assert len(backend["ranks"]) == 2
    (start0, end0), (start1, end1) = (r["build_window"] for r in backend["ranks"])
    assert start0 < end0 <= start1 < end1, backend["ranks"]  # in turn, not at once
    assert "build (construct + compile) s, ranks in turn: rank 0 " in out.stdout + out.stderr
    for r in backend["ranks"]:
        assert r["exchange_calls_per_step"] > 0 and r["exchange_ms_per_step"] > 0
        assert 0 < r["exchange_ms_per_step"] < r["dycore_step_ms"]
        assert r["gc_pauses"]["frozen_objects"] > 10_000  # each rank timed with its setup frozen
