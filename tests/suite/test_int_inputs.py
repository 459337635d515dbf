"""Inputs for integer index and mask fields, and programs outside the dycore catalogue.

Index fields stay within what they index (a level, an edge, a neighbour table), masks and flags
within their value sets; then such programs verify like the catalogue's."""

from __future__ import annotations

import importlib

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import astype, neighbor_sum
from icon4py.model.common import dimension as dims

from icoforge.errors import IcoforgeError
from icoforge.suite.catalogue import program_info
from icoforge.suite.inputs import make_inputs, make_scalars
from icoforge.suite.ranges import OTHER_PROGRAM_ARGS, OTHER_PROGRAMS
from icoforge.suite.verify import verify

CellDim, KDim, C2EDim = dims.CellDim, dims.KDim, dims.C2EDim


def other(name: str):
    return program_info(getattr(importlib.import_module(OTHER_PROGRAMS[name]), name))


def test_table_names_programs_and_parameters_that_exist():
    assert set(OTHER_PROGRAM_ARGS) == set(OTHER_PROGRAMS)
    for name, specs in OTHER_PROGRAM_ARGS.items():
        assert set(specs) <= {p.name for p in other(name).params}, name


def test_mask_values_stay_in_their_set(tiny_grid):
    args = make_inputs(other("compute_nudgecoeffs"), tiny_grid, seed=1)
    refin = args["refin_ctrl"].asnumpy()
    assert refin.dtype == np.int32 and set(np.unique(refin)) == set(range(-4, 15))  # every value, none else


def test_index_fields_stay_within_what_they_index(tiny_grid):
    info = other("compute_pressure_gradient_downward_extrapolation_mask_distance")
    args = make_inputs(info, tiny_grid, seed=2)
    flat = args["flat_idx_max"].asnumpy()
    assert flat.min() == 0 and flat.max() == tiny_grid.num_levels - 1  # levels [0, nlev)
    np.testing.assert_array_equal(args["e_lev"].asnumpy(), np.arange(tiny_grid.num_edges))
    np.testing.assert_array_equal(args["k_lev"].asnumpy(), np.arange(tiny_grid.num_levels + 1))
    assert make_scalars(info, tiny_grid, seed=2) == {p.name: args[p.name] for p in info.scalars}


@gtx.field_operator
def _gather(x: gtx.Field[[CellDim, KDim], gtx.float64], c2e: gtx.Field[[CellDim, C2EDim], gtx.int32]) -> gtx.Field[[CellDim, KDim], gtx.float64]:
    return x + astype(neighbor_sum(c2e, axis=C2EDim), gtx.float64)


@gtx.program
def gather(
    x: gtx.Field[[CellDim, KDim], gtx.float64],
    c2e: gtx.Field[[CellDim, C2EDim], gtx.int32],
    out: gtx.Field[[CellDim, KDim], gtx.float64],
):
    _gather(x, c2e, out=out)


def test_neighbour_table_shaped_int_field_is_the_grids_table(tiny_grid):
    """With no rule, an int field of dims (Cell, C2E) is taken to be the C2E table itself."""
    args = make_inputs(program_info(gather), tiny_grid, seed=3)
    np.testing.assert_array_equal(args["c2e"].asnumpy(), tiny_grid.connectivities["C2E"].asnumpy())


def test_int_field_without_a_rule_is_refused(tiny_grid):
    @gtx.program
    def shifty(x: gtx.Field[[CellDim, KDim], gtx.int32], out: gtx.Field[[CellDim, KDim], gtx.int32]):
        _copy_int(x, out=out)

    with pytest.raises(IcoforgeError, match="no rule for int32 parameter 'x'.*ranges.py"):
        make_inputs(program_info(shifty), tiny_grid)


@gtx.field_operator
def _copy_int(x: gtx.Field[[CellDim, KDim], gtx.int32]) -> gtx.Field[[CellDim, KDim], gtx.int32]:
    return x


# GT4Py's embedded backend cannot run concat_where over a dimension (open UnitRange): gtfn_cpu there
REFERENCE = {"compute_nudgecoeffs": "embedded", "compute_pressure_gradient_downward_extrapolation_mask_distance": "gtfn_cpu"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OTHER_PROGRAMS))
def test_program_outside_the_catalogue_verifies_against_gt4py(name, tiny_grid):
    result = verify(other(name), "icoforge-cpu", REFERENCE[name], tiny_grid, seed=4)
    assert result.passed, result.summary()
    assert all(o.written > 0 for o in result.outputs)
