import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.grids import GridInfo, PRESETS, load_grid, resolve_grid_path


@pytest.fixture(params=["tiny", "r2b4"])
def grid(request, tiny_grid, r2b4_grid):
    return {"tiny": tiny_grid, "r2b4": r2b4_grid}[request.param]


def test_sizes_match_analytic_counts(grid):
    p = PRESETS[grid.name]
    assert (grid.num_cells, grid.num_edges, grid.num_vertices) == (p.cells, p.edges, p.vertices)
    assert grid.icon_grid.num_cells == p.cells
    assert not grid.limited_area


def test_every_connectivity_entry_is_in_range_or_skip(grid):
    sizes = {"Cell": grid.num_cells, "Edge": grid.num_edges, "Vertex": grid.num_vertices}
    assert {"C2E", "E2C", "E2V", "C2V", "V2E", "V2C", "C2E2C", "C2E2CO", "E2C2V", "E2C2EO"} <= set(
        grid.connectivities
    )
    for name, conn in grid.connectivities.items():
        table = np.asarray(conn.ndarray)
        target = sizes[conn.codomain.value]
        valid = (table >= 0) & (table < target)
        if conn.skip_value is not None:
            valid |= table == conn.skip_value
        assert valid.all(), name
        assert table.shape[0] == sizes[conn.domain.dims[0].value], name


def test_global_grid_skips_only_at_the_12_pentagons(grid):
    info = grid.info()
    for name in ("V2E", "V2C", "V2E2V"):
        c = info.connectivity(name)
        assert (c.skip_value, c.num_skipped, c.max_neighbors) == (-1, 12, 6)
    for name in ("C2E", "E2C", "C2E2C", "E2V", "C2V"):
        assert info.connectivity(name).num_skipped == 0


def test_c2e_and_e2c_are_inverse(grid):
    c2e = np.asarray(grid.connectivities["C2E"].ndarray)
    e2c = np.asarray(grid.connectivities["E2C"].ndarray)
    cells = np.repeat(np.arange(grid.num_cells), 3)
    assert (e2c[c2e.ravel()] == cells[:, None]).any(axis=1).all()
    assert np.bincount(c2e.ravel(), minlength=grid.num_edges).tolist() == [2] * grid.num_edges


def test_info_describes_connectivities_and_zones(grid):
    info = grid.info()
    assert isinstance(info, GridInfo)
    assert (info.num_cells, info.num_levels, info.limited_area) == (
        grid.num_cells,
        grid.num_levels,
        False,
    )
    c2e = info.connectivity("C2E")
    assert (c2e.source, c2e.target, c2e.max_neighbors, c2e.has_skip_values) == (
        "Cell",
        "Edge",
        3,
        False,
    )
    assert info.connectivity("E2C2EO").max_neighbors == 5
    local = {z.dim: (z.start, z.end) for z in info.zones if z.zone == "LOCAL"}
    assert local == {
        "Cell": (0, grid.num_cells),
        "Edge": (0, grid.num_edges),
        "Vertex": (0, grid.num_vertices),
    }
    assert all(z.start == z.end for z in info.zones if z.zone.startswith("LATERAL_BOUNDARY"))
    assert info.as_dict()["num_edges"] == grid.num_edges


def test_start_and_end_index_delegate_to_icon4py(tiny_grid):
    from icon4py.model.common.grid import horizontal as h_grid

    interior = h_grid.cell_domain(h_grid.Zone.INTERIOR)
    end = h_grid.edge_domain(h_grid.Zone.END)
    assert tiny_grid.start_index(interior) == 0 and type(tiny_grid.start_index(interior)) is int
    assert tiny_grid.end_index(interior) == tiny_grid.num_cells
    assert tiny_grid.start_index(end) == tiny_grid.end_index(end) == tiny_grid.num_edges


def test_levels_and_cpu_arrays(tiny_grid):
    assert tiny_grid.num_levels == 10
    assert isinstance(tiny_grid.connectivities["C2E"].ndarray, np.ndarray)
    assert "cell_area" in tiny_grid.manager.geometry_fields


def test_same_grid_and_levels_give_the_same_object(tiny_grid):
    assert load_grid("r2b3", levels=10) is tiny_grid
    assert load_grid("R02B03", 10) is tiny_grid
    assert load_grid(resolve_grid_path("R2B3"), levels=10) is tiny_grid  # by path too
    other = load_grid("R2B3", levels=11)
    assert other is not tiny_grid and other.num_levels == 11


@pytest.mark.parametrize("levels", [0, -1, True, 2.5, "80", None])
def test_levels_must_be_a_positive_int(levels):
    with pytest.raises(IcoforgeError, match="levels must be a positive integer"):
        load_grid("R2B3", levels=levels)


def test_numpy_int_levels_are_accepted(tiny_grid):
    assert load_grid("R2B3", levels=np.int64(10)) is tiny_grid


def test_limited_area_file_by_path(small_lam_path):
    g = load_grid(str(small_lam_path), levels=5, show_progress=False)
    assert g.limited_area and g.name == "small_lam" and g.path == small_lam_path
    info = g.info()
    assert info.connectivity("E2C").num_skipped > 0  # boundary edges have one cell
    zones = {z.zone: (z.start, z.end) for z in info.zones_of("Cell")}
    assert zones["LATERAL_BOUNDARY"][0] == 0 < zones["LATERAL_BOUNDARY"][1]
    assert zones["INTERIOR"][1] == g.num_cells


def test_missing_path_is_reported():
    with pytest.raises(IcoforgeError, match="grid file .*nope.nc not found"):
        load_grid("/nonexistent/nope.nc", levels=1)
