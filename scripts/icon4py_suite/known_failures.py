"""icon4py tests known to fail with icoforge for a reason that is not ours, each with whose error it
is and why. The plugin marks them xfail(strict=True, raises=...): they are counted and shown in the
tables as xfailed with this reason, and a fix upstream turns them into an XPASS failure, so the entry
is removed then, not forgotten.

`test` is a node id relative to icon4py's tests folder; a trailing `*` matches every parametrization.
`when`: the precisions / grids it fails on (None: all).
"""

from __future__ import annotations

import dataclasses
import fnmatch


@dataclasses.dataclass(frozen=True)
class KnownFailure:
    test: str
    owner: str  # one of OWNERS
    reason: str
    raises: str  # the exception's class name
    precisions: tuple[str, ...] | None = None
    grids: tuple[str, ...] | None = None  # "simple" or "icon" (any --grid FILE:LEVELS)

    def applies(self, nodeid: str, precision: str, grid_kind: str) -> bool:
        return (
            fnmatch.fnmatchcase(nodeid, self.test)
            and (self.precisions is None or precision in self.precisions)
            and (self.grids is None or grid_kind in self.grids)
        )


OWNERS = ("ours", "GT4Py's", "icon4py's")

# Removed 2026-12-07: test_prepare_ffsl_flux_area_patches_list (GT4Py 1.2.1's front end raised
# RecursionError in past_to_gtir for prepare_ffsl_flux_area_patches_list, gtfn_cpu alike). Since
# icoforge's backends build GTIR with the fast tree machinery (backend/frontend/fast_frontend.py)
# it compiles and passes (the XPASS said so); with ICOFORGE_FAST_PASSES=0 it fails as before.
KNOWN: tuple[KnownFailure, ...] = ()


def known_failure(nodeid: str, precision: str, grid_kind: str) -> KnownFailure | None:
    for entry in KNOWN:
        if entry.applies(nodeid, precision, grid_kind):
            return entry
    return None


@dataclasses.dataclass(frozen=True)
class KnownCollectionFailure:
    """pytest stops before any test runs (a conftest import fails): matched in pytest's output."""

    match: str
    owner: str
    reason: str
    precisions: tuple[str, ...] | None = None


KNOWN_COLLECTION: tuple[KnownCollectionFailure, ...] = (
    KnownCollectionFailure(
        match="Invalid argument types in call to '_compute_perturbation_of_rho_and_theta'",
        owner="icon4py's",
        reason="with FLOAT_PRECISION=mixed, icon4py 0.4.1's dycore module compute_cell_diagnostics_for_dycore.py "
        "passes float64 rho_ref_mc/theta_ref_mc to float32 (vpfloat) parameters; GT4Py's frontend rejects it "
        "when the module is imported, and every test folder's conftest imports it (icon4py.model.testing."
        "fixtures -> datatest_utils -> driver config -> solve_nonhydro), so no test is collected. Without "
        "FLOAT_PRECISION set beforehand, icon4py's --enable-mixed-precision alone runs double precision",
        precisions=("mixed",),
    ),
)


def known_collection_failure(output: str, precision: str) -> KnownCollectionFailure | None:
    for entry in KNOWN_COLLECTION:
        if entry.match in output and (entry.precisions is None or precision in entry.precisions):
            return entry
    return None
