"""Grid files for the grids tests, each made once per session."""

import pytest


@pytest.fixture(scope="session")
def r2b4_grid(icoforge_cache):
    from icoforge.grids import load_grid

    return load_grid("R2B4", levels=80, show_progress=False)


@pytest.fixture(scope="session")
def small_lam_path(tmp_path_factory):
    """A small limited-area file (~1,550 cells from R2B4) written outside the cache, to load by path."""
    from grid_generator import LimitedAreaGridSpec, Region, generate_grid_to_netcdf

    spec = LimitedAreaGridSpec(
        parent="R2B4", region=Region.circle(lon=10.0, lat=50.0, radius_degrees=30)
    )
    path = tmp_path_factory.mktemp("lam") / "small_lam.nc"
    generate_grid_to_netcdf(spec, path, fields="reduced")
    return path
