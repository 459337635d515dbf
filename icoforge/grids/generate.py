"""Generate preset grids once into the user cache (`icoforge.cache.cache_dir("grids")`).

Publication is atomic and locked: the generator writes a temporary `.part` file next to the
final one, which is renamed into place only after the generator returned. A crash or Ctrl-C
leaves no file at the final path, so a half-written grid is never picked up; the next caller
finds no file, takes the lock and generates again.
"""

from __future__ import annotations

import contextlib
import pathlib
import time
from collections.abc import Iterator

from icoforge.cache import atomic_path, cache_dir, file_lock
from icoforge.grids.presets import NETCDF_FIELDS, Preset


def preset_path(preset: Preset) -> pathlib.Path:
    """Where the preset's file lives in the cache (it may not exist yet)."""
    return cache_dir("grids") / preset.file_name()


def is_cached(preset: Preset) -> bool:
    return preset_path(preset).is_file()


def ensure_grid_file(preset: Preset, *, show_progress: bool = True) -> pathlib.Path:
    """Path of the preset's grid file, generating it first if it is not cached."""
    final = preset_path(preset)
    if final.is_file():
        return final
    with file_lock(final.with_name(f".{final.name}.lock")):
        if final.is_file():  # another process generated it while we waited for the lock
            return final
        # We hold the lock, so any temporary file of this grid is a leftover of a killed writer.
        _remove_leftovers(final)
        start = time.perf_counter()
        with _spinner(preset, enabled=show_progress), atomic_path(final) as tmp:
            try:
                run_generator(preset, tmp)
                _set_file_uri(tmp, final)
            finally:
                # The generator's own temporary file, left behind if it was interrupted.
                tmp.with_name(tmp.name + ".partial").unlink(missing_ok=True)
        if show_progress:
            _stderr_console().print(
                f"generated grid {preset.name} ({preset.cells:,} cells) in "
                f"{time.perf_counter() - start:.1f} s: {final}",
                soft_wrap=True,  # keep the path on one line, copy-pastable
            )
    return final


def run_generator(preset: Preset, out: pathlib.Path) -> None:
    """Write the preset's grid to `out` (a seam for tests that simulate an interrupted write)."""
    from grid_generator import generate_grid_to_netcdf

    generate_grid_to_netcdf(preset.make_spec(), out, fields=NETCDF_FIELDS)


def _set_file_uri(tmp: pathlib.Path, final: pathlib.Path) -> None:
    # The generator records the path it wrote to; record the path readers will see instead.
    import netCDF4

    with netCDF4.Dataset(tmp, "a") as ds:
        ds.setncattr("ICON_grid_file_uri", str(final))
        ds.setncattr("history", f"icoforge grid make ({final.name})")


def _remove_leftovers(final: pathlib.Path) -> None:
    for stale in final.parent.glob(f".{final.name}.*.part*"):
        stale.unlink(missing_ok=True)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


@contextlib.contextmanager
def _spinner(preset: Preset, *, enabled: bool) -> Iterator[None]:
    """What is being generated, with the elapsed time (a line when piped); the generator has no
    progress callback to drive a bar."""
    if not enabled:
        yield
        return
    from icoforge.console import StepProgress, make_console

    with StepProgress(make_console(stderr=True)) as step:
        step(f"generating grid {preset.name} ({preset.cells:,} cells, about {preset.approx_seconds:g} s)")
        yield
