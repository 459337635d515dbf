"""Generation into the cache is atomic and locked: interrupted writes leave nothing behind."""

import threading
import time

import pytest

from icoforge.grids import PRESETS, load_grid
from icoforge.grids import generate
from icoforge.grids.validate import check_grid_file

TINY = PRESETS["R2B3"]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path))
    return tmp_path / "grids"


def _temporaries(cache):
    return sorted(p.name for p in cache.glob(".*part*"))


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_interrupted_generation_leaves_no_file(fresh_cache, monkeypatch, interrupt):
    real = generate.run_generator

    def dies_halfway(preset, out):
        out.write_bytes(b"CDF\x01 half a grid")
        raise interrupt("simulated")

    monkeypatch.setattr(generate, "run_generator", dies_halfway)
    with pytest.raises(interrupt):
        generate.ensure_grid_file(TINY, show_progress=False)
    final = generate.preset_path(TINY)
    assert not final.exists()
    assert _temporaries(fresh_cache) == []

    # Only now, with a working generator, does a later load generate the grid.
    monkeypatch.setattr(generate, "run_generator", real)
    g = load_grid("R2B3", levels=3, show_progress=False)
    assert g.path == final and final.is_file() and g.num_cells == TINY.cells


def test_stale_part_file_is_ignored_and_removed(fresh_cache):
    final = generate.preset_path(TINY)
    stale = final.with_name(f".{final.name}.abc123.part")
    stale.write_bytes(b"left by a killed process")
    stale_partial = final.with_name(stale.name + ".partial")
    stale_partial.write_bytes(b"also stale")

    assert generate.ensure_grid_file(TINY, show_progress=False) == final
    check_grid_file(final)  # a complete grid, not the stale bytes
    assert not stale.exists() and not stale_partial.exists()


def test_cached_file_is_not_regenerated(fresh_cache, monkeypatch):
    final = generate.ensure_grid_file(TINY, show_progress=False)
    mtime = final.stat().st_mtime_ns

    def must_not_run(preset, out):
        raise AssertionError("regenerated a cached grid")

    monkeypatch.setattr(generate, "run_generator", must_not_run)
    assert generate.ensure_grid_file(TINY, show_progress=False) == final
    assert final.stat().st_mtime_ns == mtime and generate.is_cached(TINY)


def test_concurrent_callers_generate_once(fresh_cache, monkeypatch):
    real, calls = generate.run_generator, []

    def slow_counting(preset, out):
        calls.append(preset.name)
        time.sleep(0.3)  # make the two callers overlap
        real(preset, out)

    monkeypatch.setattr(generate, "run_generator", slow_counting)
    results = []
    threads = [
        threading.Thread(
            target=lambda: results.append(generate.ensure_grid_file(TINY, show_progress=False))
        )
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["R2B3"]
    assert results == [generate.preset_path(TINY)] * 2
