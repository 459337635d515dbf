"""Files that are not (complete) ICON grids give one clear IcoforgeError line naming the file."""

import shutil

import netCDF4
import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.grids import load_grid, resolve_grid_path
from icoforge.grids import validate


@pytest.fixture(scope="module")
def real_grid(icoforge_cache):
    return resolve_grid_path("R2B3", show_progress=False)


def _copy(src, dst, *, drop=(), edit=None):
    """Copy a NetCDF file variable by variable, leaving out `drop` and applying `edit(name, data)`."""
    with netCDF4.Dataset(src) as s, netCDF4.Dataset(dst, "w", format=s.data_model) as d:
        d.setncatts({a: s.getncattr(a) for a in s.ncattrs()})
        for name, dim in s.dimensions.items():
            d.createDimension(name, len(dim))
        for name, var in s.variables.items():
            if name in drop:
                continue
            out = d.createVariable(name, var.dtype, var.dimensions)
            data = var[:]
            out[:] = edit(name, data) if edit else data
    return dst


def _error_for(path) -> str:
    with pytest.raises(IcoforgeError) as e:
        load_grid(path, levels=5, show_progress=False)
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg and "Traceback" not in msg
    return msg


def test_text_file(tmp_path):
    path = tmp_path / "notes.nc"
    path.write_text("this is not a grid\n")
    assert "not a NetCDF file" in _error_for(path)


def test_netcdf_without_icon_variables(tmp_path):
    path = tmp_path / "other.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 3)
        ds.createVariable("temperature", "f8", ("x",))[:] = [1.0, 2.0, 3.0]
    assert "not an ICON grid file" in _error_for(path)


def test_truncated_copy(tmp_path, real_grid):
    path = tmp_path / "truncated.nc"
    data = real_grid.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "truncated or corrupt" in _error_for(path)


def test_truncated_classic_netcdf(tmp_path, real_grid):
    # NetCDF-3 files open fine when truncated; the failure comes while reading the data.
    full = tmp_path / "classic.nc"
    with (
        netCDF4.Dataset(real_grid) as s,
        netCDF4.Dataset(full, "w", format="NETCDF3_64BIT_OFFSET") as d,
    ):
        d.setncatts({a: s.getncattr(a) for a in s.ncattrs()})
        for name, dim in s.dimensions.items():
            d.createDimension(name, len(dim))
        for name, var in s.variables.items():
            d.createVariable(name, var.dtype, var.dimensions)[:] = var[:]
    path = tmp_path / "classic_truncated.nc"
    path.write_bytes(full.read_bytes()[: full.stat().st_size * 3 // 4])
    msg = _error_for(path)
    assert "truncated" in msg


def test_missing_connectivity_variable(tmp_path, real_grid):
    path = _copy(real_grid, tmp_path / "no_c2e.nc", drop={"edge_of_cell"})
    msg = _error_for(path)
    assert "lacks connectivity variable(s) 'edge_of_cell' (C2E)" in msg


def test_out_of_range_neighbour_index(tmp_path, real_grid):
    def corrupt(name, data):
        if name == "edge_of_cell":
            data = np.array(data)
            data[1, 7] = 10**6  # 1-based in the file; far beyond the 7,680 edges
        return data

    path = _copy(real_grid, tmp_path / "bad_index.nc", edit=corrupt)
    msg = _error_for(path)
    assert "connectivity C2E has 1 entries outside [0, 7680)" in msg and "row 7" in msg


def test_a_copy_of_a_valid_file_loads(tmp_path, real_grid):
    path = shutil.copy(real_grid, tmp_path / "copy.nc")
    g = load_grid(path, levels=2, show_progress=False)
    assert g.num_cells == 5120 and g.name == "copy"


def test_required_names_match_icon4py():
    from icon4py.model.common.grid import gridfile

    for var, (offset, _) in validate.CONNECTIVITY_VARIABLES.items():
        assert gridfile.ConnectivityName[offset].value == var
    assert set(validate.CONNECTIVITY_VARIABLES) == {c.value for c in gridfile.ConnectivityName}
    known = {
        n.value
        for enum in (gridfile.GeometryName, gridfile.CoordinateName, gridfile.GridRefinementName)
        for n in enum
    }
    assert set(validate.OTHER_VARIABLES) <= known
    assert set(validate.DIMENSIONS) == {d.value for d in gridfile.DynamicDimension} - {"max_chdom"}
