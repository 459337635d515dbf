"""Fixtures shared by all test directories.

Every test session gets its own empty icoforge cache, so tests never read or pollute the
user's cache (and always exercise generation); grids are generated once per session.
"""

import pytest


@pytest.fixture(scope="session", autouse=True)
def icoforge_cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("icoforge-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ICOFORGE_CACHE", str(path))
        yield path


@pytest.fixture(scope="session")
def tiny_grid(icoforge_cache):
    """The R2B3 preset (5,120 cells) with 10 levels: the smallest global grid."""
    from icoforge.grids import load_grid

    return load_grid("R2B3", levels=10, show_progress=False)
