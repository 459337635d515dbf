"""Faults and bad input: each gives one clear error or a correct result, never wrong numbers and
never a poisoned cache. The README's table "Faults and bad input" lists these with what happens;
faults covered elsewhere are named there (truncated grid files: tests/grids/test_grid_files.py;
a corrupt module or passes entry: tests/backend/test_build_cache.py; too small a field:
tests/backend/test_constructs.py; illegal schedule values: tests/schedule/test_schedule_data.py).
"""

from __future__ import annotations

import concurrent.futures as cf
import errno
import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next.errors import DSLError
from icon4py.model.common import dimension as dims
from icon4py.model.common.dimension import C2E

from icoforge import cache
from icoforge.backend import make_backend
from icoforge.backend.runtime import build, workflow
from icoforge.backend.runtime.precompile import compilable_program
from icoforge.errors import IcoforgeError
from tests.backend.test_build_cache import SOURCE, _load

CellDim, EdgeDim, KDim = dims.CellDim, dims.EdgeDim, dims.KDim
f64 = gtx.float64
ROOT = pathlib.Path(__file__).resolve().parents[1]


@gtx.field_operator
def _weighted_c2e(e: gtx.Field[[EdgeDim, KDim], f64]) -> gtx.Field[[CellDim, KDim], f64]:
    return e(C2E[0]) + 2.0 * e(C2E[1]) + 3.0 * e(C2E[2])


@gtx.program
def weighted_c2e(e: gtx.Field[[EdgeDim, KDim], f64], out: gtx.Field[[CellDim, KDim], f64]):
    _weighted_c2e(e, out=out)


def expected(grid, e: np.ndarray) -> np.ndarray:
    c2e = grid.connectivities["C2E"].asnumpy()
    return e[c2e[:, 0]] + 2.0 * e[c2e[:, 1]] + 3.0 * e[c2e[:, 2]]


def edge_values(grid, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, (grid.num_edges, 10))


def run_icoforge(grid, e_array: np.ndarray, out_array: np.ndarray | None = None) -> np.ndarray:
    out = gtx.as_field([CellDim, KDim], np.full((grid.num_cells, 10), np.nan) if out_array is None else out_array)
    weighted_c2e.with_backend(make_backend("cpu"))(
        gtx.as_field([EdgeDim, KDim], e_array), out, offset_provider=grid.connectivities
    )
    return out.asnumpy()


# --- a process killed while it writes the cache ------------------------------------------------

# SOURCE (a module whose answer() returns %d) behind enough templates that g++ needs a while:
# long enough to be killed mid-build
HEAVY_SOURCE = (
    '#include <map>\n#include <regex>\n#include <string>\n'
    'static int heavy() { std::map<std::string, std::regex> m; m["a"] = std::regex("(a|b)*c[0-9]+"); return (int)m.size(); }\n'
    'int (*keep_heavy)() = heavy;\n'
) + SOURCE


def _child(code: str) -> subprocess.Popen:
    """A Python child in its own session (so that killing its group kills its compiler too)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, start_new_session=True)


def test_killed_during_a_cpu_build_leaves_no_usable_entry():
    name = "icf_fault_killed_build"
    source = HEAVY_SOURCE % (41, name, name)
    child = _child(f"from icoforge.backend.runtime import build; build.build_cpu_module({source!r}, {name!r})")
    deadline = time.monotonic() + 120
    entry_glob = f"{name}-*/.{name}*.part"
    while not list(cache.cache_dir("cpu-build").glob(entry_glob)):  # the compiler is writing its output
        assert child.poll() is None, "the child finished before it could be killed"
        assert time.monotonic() < deadline, "the child's build never started"
        time.sleep(0.02)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    so, seconds = build.build_cpu_module(source, name)  # the lock died with the child
    assert seconds > 0, "the killed build's entry was served from the cache"
    assert _load(so, name).answer() == 41


def test_killed_between_writing_and_publishing_a_passes_entry(tiny_grid):
    """The child dies (SIGKILL) at the rename that would publish its GT4Py-passes entry: all bytes
    written, nothing published. The parent then computes the entry and runs correctly."""
    inp = compilable_program(weighted_c2e, tiny_grid.connectivities)
    for old in cache.cache_dir("gt4py-passes").glob(f"weighted_c2e-{workflow.passes_key(inp)}*"):
        old.unlink()  # another test's entry would be a hit: the child would write nothing
    child = _child(
        """
        import os, signal
        from icoforge import cache
        from icoforge.backend.runtime import workflow
        from icoforge.backend.runtime.precompile import compilable_program
        from icoforge.grids import load_grid
        from tests.test_faults import weighted_c2e
        cache.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        grid = load_grid("R2B3", levels=10, show_progress=False)
        workflow.cached_passes(compilable_program(weighted_c2e, grid.connectivities))
        """
    )
    assert child.wait(timeout=600) == -signal.SIGKILL
    entries = list(cache.cache_dir("gt4py-passes").glob(f"weighted_c2e-{workflow.passes_key(inp)}*"))
    assert entries and all(p.name.endswith((".part", ".lock")) for p in entries), entries  # written, unpublished
    _, hit = workflow.cached_passes(inp)
    assert not hit
    e = edge_values(tiny_grid)
    np.testing.assert_array_equal(run_icoforge(tiny_grid, e), expected(tiny_grid, e))


# --- eight processes building the same program at once ---------------------------------------


def _build_and_run(seed: int) -> tuple[bool, float]:
    from icoforge.grids import load_grid

    grid = load_grid("R2B3", levels=10, show_progress=False)
    e = edge_values(grid, seed)
    return bool(np.array_equal(run_icoforge(grid, e), expected(grid, e))), time.time()


@pytest.mark.slow
def test_eight_processes_building_the_same_program_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))  # cold: all eight translate and build at once
    monkeypatch.setenv("GT4PY_BUILD_JOBS_MODE", "serial")  # each builds in its own process, not in a pool of 2
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(8, mp_context=ctx) as pool:
        results = list(pool.map(_build_and_run, range(8)))
    assert [ok for ok, _ in results] == [True] * 8
    assert len(list((tmp_path / "gt4py-passes").glob("weighted_c2e-*.pkl"))) == 1
    assert len([p for p in (tmp_path / "cpu-build").iterdir() if p.is_dir() and "weighted" in p.name]) == 1


# --- a corrupt or truncated cache entry --------------------------------------------------------


def test_truncated_passes_entry_is_recomputed(tiny_grid):
    inp = compilable_program(weighted_c2e, tiny_grid.connectivities)
    workflow.cached_passes(inp)
    (entry,) = cache.cache_dir("gt4py-passes").glob(f"weighted_c2e-{workflow.passes_key(inp)}.pkl")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    _, hit = workflow.cached_passes(inp)
    assert not hit
    _, hit = workflow.cached_passes(inp)
    assert hit, "the recomputed entry was not stored again"


def test_truncated_cached_grid_is_made_again(tmp_path, monkeypatch):
    """Our writes are atomic, so a truncated cached preset was damaged from outside: it is made
    again instead of refused on every later run. (A truncated grid *file* named by path is refused
    with one line: tests/grids/test_grid_files.py.)"""
    from icoforge.grids import forget_loaded_grids, load_grid

    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))
    forget_loaded_grids()
    try:
        grid = load_grid("R2B3", levels=10, show_progress=False)
        path, size, c2e = pathlib.Path(grid.path), pathlib.Path(grid.path).stat().st_size, grid.connectivities["C2E"]
        path.write_bytes(path.read_bytes()[: size // 3])
        forget_loaded_grids()
        again = load_grid("R2B3", levels=10, show_progress=False)
        assert pathlib.Path(again.path) == path and path.stat().st_size == size
        np.testing.assert_array_equal(again.connectivities["C2E"].asnumpy(), c2e.asnumpy())
    finally:
        forget_loaded_grids()


# --- a read-only or full cache directory -------------------------------------------------------


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_full_or_read_only_cache_gives_one_clear_error_and_no_entry(tiny_grid, tmp_path, monkeypatch, code):
    """The OS's refusal is injected where the cache writes (a real full disk needs a mount): the
    error says where and what to do, and nothing half-written is left to be loaded later."""
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))
    inp = compilable_program(weighted_c2e, tiny_grid.connectivities)
    real_write = pathlib.Path.write_bytes

    def refuse(self, data):
        if self.name.endswith(".part"):
            raise OSError(code, os.strerror(code))
        return real_write(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", refuse)
    with pytest.raises(cache.CacheWriteError, match=rf"cannot write the icoforge cache at {tmp_path}.*ICOFORGE_CACHE"):
        workflow.cached_passes(inp)
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".pkl", ".part")]
    monkeypatch.setattr(pathlib.Path, "write_bytes", real_write)  # space freed: it works
    _, hit = workflow.cached_passes(inp)
    assert not hit


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_cache_directory(tmp_path, monkeypatch):
    tmp_path.chmod(0o555)
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path / "icoforge"))
    try:
        with pytest.raises(cache.CacheWriteError, match="set ICOFORGE_CACHE"):
            cache.cache_dir("cpu-build")
    finally:
        tmp_path.chmod(0o755)


def test_cache_path_that_is_a_file(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path / "file"))
    with pytest.raises(cache.CacheWriteError, match="file"):
        cache.cache_dir("cpu-build")


def test_cache_write_error_survives_pickling():
    """Raised in GT4Py's compile workers, it must come back to the caller as itself."""
    import pickle

    error = cache.CacheWriteError("cannot write the icoforge cache at /x: No space left on device")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cache.CacheWriteError and str(again) == str(error)


# --- fields of the wrong shape, dtype or strides; views ---------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda g, e: gtx.as_field([EdgeDim, KDim], e.astype(np.float32)), id="float32"),
        pytest.param(lambda g, e: gtx.as_field([EdgeDim, KDim], (10 * e).astype(np.int32)), id="int32"),
        pytest.param(lambda g, e: gtx.as_field([CellDim, KDim], e[: g.num_cells]), id="wrong-dims"),
        pytest.param(lambda g, e: e, id="plain-numpy"),
    ],
)
def test_field_of_the_wrong_dtype_or_dims_is_refused(tiny_grid, bad):
    out = gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, 10), -1.0))
    with pytest.raises((DSLError, ValueError), match="Invalid argument types|not supported"):  # GT4Py's checks
        weighted_c2e.with_backend(make_backend("cpu"))(
            bad(tiny_grid, edge_values(tiny_grid)), out, offset_provider=tiny_grid.connectivities
        )
    assert (out.asnumpy() == -1.0).all(), "a refused call wrote its output"


def test_too_few_levels_is_refused_before_any_write(tiny_grid):
    out = np.full((tiny_grid.num_cells, 10), -1.0)
    with pytest.raises(IcoforgeError, match=r"field 'e' covers K \[0, 5\) but the kernel accesses \[0, 10\)"):
        run_icoforge(tiny_grid, edge_values(tiny_grid)[:, :5].copy(), out)


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(lambda e: np.asfortranarray(e), id="fortran-order"),
        pytest.param(lambda e: np.repeat(e, 2, axis=1)[:, ::2], id="every-second-level-view"),
        pytest.param(lambda e: np.ascontiguousarray(e[::-1])[::-1], id="negative-strides"),
        pytest.param(lambda e: np.ascontiguousarray(e.T).T, id="transposed-view"),
    ],
)
def test_strided_and_non_contiguous_inputs_give_correct_results(tiny_grid, layout):
    e = edge_values(tiny_grid)
    view = layout(e)
    assert np.array_equal(view, e) and not (view.flags.c_contiguous and view.strides == e.strides)
    np.testing.assert_array_equal(run_icoforge(tiny_grid, view), expected(tiny_grid, e))


def test_output_in_fortran_order_is_written_correctly(tiny_grid):
    e = edge_values(tiny_grid)
    out = np.asfortranarray(np.full((tiny_grid.num_cells, 10), np.nan))
    np.testing.assert_array_equal(run_icoforge(tiny_grid, e, out), expected(tiny_grid, e))


# --- impossible schedules; a schedule of another program ---------------------------------------


def test_impossible_schedule_is_refused_before_any_work(capsys):
    from icoforge.cli.main import main

    started = time.perf_counter()
    code = main(["run", "compute_airmass", "--backend", "icoforge-cuda", "--schedule", '{"default": {"block": [64, 32]}}'])
    assert code == 2 and time.perf_counter() - started < 30
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "2048 threads exceeds 1024" in err, err


@pytest.fixture(scope="module")
def two_programs_ir(tiny_grid):
    from icoforge.backend.runtime.precompile import program_ir
    from icoforge.suite.catalogue import get_program

    names = ("compute_airmass", "compute_exner_from_rhotheta")
    return [program_ir(get_program(n).program, tiny_grid.connectivities) for n in names]


def test_schedule_file_of_another_program_leaves_this_one_at_the_default(two_programs_ir):
    """A schedule file may hold many programs' kernels (one file for a granule): another program's
    entries do not apply, so this program runs with the vendor default -- the same launches."""
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule, resolve

    a, b = two_programs_ir
    tuned_for_a = ProgramSchedule(
        default=VENDOR_DEFAULTS["cuda"],
        per_kernel={k.name: Schedule(block=(64, 2), k_per_thread=2) for k in a.kernels()},
    )
    assert resolve(b, tuned_for_a, "cuda") == resolve(b, ProgramSchedule(default=VENDOR_DEFAULTS["cuda"]), "cuda")
    assert resolve(a, tuned_for_a, "cuda") != resolve(a, ProgramSchedule(default=VENDOR_DEFAULTS["cuda"]), "cuda")


def test_schedule_naming_a_kernel_this_program_lacks_is_refused(two_programs_ir):
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, Schedule, ScheduleError, resolve

    a, _ = two_programs_ir
    typo = a.kernels()[0].name.rsplit("_k", 1)[0] + "_k99"
    schedule = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], per_kernel={typo: Schedule(block=(64, 2))})
    with pytest.raises(ScheduleError, match=f"names kernel '{typo}', which {a.name} lacks"):
        resolve(a, schedule, "cuda")
