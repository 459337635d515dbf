"""The stored GT4Py references (icoforge/suite/references.py): the digests catch one wrong point,
and every dycore program compiled with icoforge-cpu matches gtfn_cpu's stored outputs.

`test_program_matches_stored_gt4py_reference` (marker `references`, `make test-references`)
compiles all 78 programs with icoforge-cpu on R2B3/10: see the README for its time.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

from icoforge.errors import IcoforgeError
from icoforge.suite import references as refs
from icoforge.suite.catalogue import get_program
from icoforge.suite.verify import poison

STORE = refs.load_store() if refs.STORE.exists() else None
needs_store = pytest.mark.skipif(STORE is None, reason="no stored references: run `make references`")


def reference_array(shape=(200, 11), seed=1):
    """A pure output: written in rows 10..189, levels 0..9 (the rest poisoned, as a program leaves it)."""
    array = np.empty(shape)
    poison(array)
    array[10:190, :10] = np.random.default_rng(seed).uniform(-2.0, 3.0, (180, 10))
    return array


def problems_of(test, ref):
    digest = refs.digest_output("prog", "out", ref, seed=0)
    return refs.compare_output("prog", "out", test, digest, seed=0)


# --- the digest on plain arrays: what it catches ------------------------------------------------


def test_identical_array_matches_its_digest():
    ref = reference_array()
    assert problems_of(ref.copy(), ref) == []


def test_rounding_noise_passes():
    ref = reference_array()
    test = ref.copy()
    test[10:190, :10] *= 1 + 4e-16 * np.random.default_rng(2).choice([-1, 1], (180, 10))
    assert problems_of(test, ref) == []


@pytest.mark.parametrize("point", [(10, 0), (100, 5), (189, 9)])
def test_one_point_off_by_a_millionth_fails(point):
    ref = reference_array()
    test = ref.copy()
    test[point] += 1e-6
    found = problems_of(test, ref)
    assert any("checksum sum" in p for p in found), found


def test_two_points_swapped_fail_although_plain_sums_agree():
    ref = reference_array()
    test = ref.copy()
    test[50, 3], test[120, 7] = ref[120, 7], ref[50, 3]
    found = problems_of(test, ref)
    assert not any("checksum sum " in p or "checksum abs" in p for p in found)  # invariant under a swap
    assert any("checksum proj" in p for p in found), found


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_or_inf_at_one_point_never_passes(value):
    ref = reference_array()
    test = ref.copy()
    test[77, 4] = value
    assert any("NaN/Inf" in p for p in problems_of(test, ref))


def test_nan_in_a_reference_is_refused_when_recording():
    ref = reference_array()
    ref[11, 1] = np.nan
    with pytest.raises(IcoforgeError, match="NaN"):
        refs.digest_output("prog", "out", ref, seed=0)


def test_unwritten_point_and_write_outside_the_domain_fail():
    ref = reference_array()
    skipped = ref.copy()
    poison(skipped[100:101, 5])
    assert any("wrote 1799 points" in p for p in problems_of(skipped, ref))
    extra = ref.copy()
    extra[0, 0] = 0.0  # a zero outside moves no sum: only the mask sees it
    assert any("wrote 1801 points" in p for p in problems_of(extra, ref))
    moved = ref.copy()
    moved[0, 0], moved[10, 0] = 0.0, extra[10, 0]
    poison(moved[10:11, 0])
    assert any("at other points" in p for p in problems_of(moved, ref))


def test_wrong_shape_or_dtype_fails():
    ref = reference_array()
    assert "reference float64[200, 11]" in problems_of(ref[:, :10].copy(), ref)[0]
    assert "float32" in problems_of(ref.astype(np.float32), ref)[0]


def test_bool_and_int_outputs_compare_exactly():
    ref = np.random.default_rng(3).random((50, 11)) < 0.5
    test = ref.copy()
    assert problems_of(test, ref) == []
    test[7, 2] = not test[7, 2]
    assert problems_of(test, ref)


# --- against the store: one real program --------------------------------------------------------

SMALL = "compute_airmass"  # small and quick to build, one pure output


@pytest.fixture(scope="module")
def small_run(tiny_grid):
    """SMALL's reference entry, inputs and icoforge-cpu's fields after one run."""
    from icoforge.suite.verify import poisoned_inputs, run_once

    info = get_program(SMALL)
    host_args = poisoned_inputs(info, tiny_grid, STORE["meta"]["seed"])
    fields = run_once(info, "icoforge-cpu", tiny_grid, host_args, refs.STATIC)
    return info, STORE["programs"][SMALL], host_args, fields


@needs_store
@pytest.mark.slow
def test_perturbing_one_point_of_a_real_output_fails_the_check(small_run):
    info, entry, host_args, fields = small_run
    seed = STORE["meta"]["seed"]
    assert refs.compare_program(info, entry, host_args, fields, seed) == []  # the unperturbed run passes
    (output,) = info.outputs
    digest = entry["outputs"][output]
    tolerance = refs.SUM_RTOL * digest["sums"]["abs"]  # what one point may move the sums by
    sampled = set(digest["samples"]["at"])
    written = [p for p in np.argwhere(refs.written_mask(fields[output])) if
               np.ravel_multi_index(tuple(p), fields[output].shape) not in sampled]  # fmt: skip
    for point in (tuple(written[0]), tuple(written[len(written) // 2]), tuple(written[-1])):
        bad = copy.deepcopy(fields)
        bad[output][point] += 10 * tolerance
        found = refs.compare_program(info, entry, host_args, bad, seed)
        assert found and all(p.startswith(f"{output}:") for p in found), found
        bad[output][point] = fields[output][point] + 0.1 * tolerance  # within the stated tolerance
        assert refs.compare_program(info, entry, host_args, bad, seed) == []
        bad[output][point] = np.nan
        assert any("NaN/Inf" in p for p in refs.compare_program(info, entry, host_args, bad, seed))


@needs_store
@pytest.mark.slow
def test_modified_input_and_changed_inputs_are_reported(small_run):
    info, entry, host_args, fields = small_run
    seed = STORE["meta"]["seed"]
    read_only = next(p.name for p in info.fields if not p.is_output)
    bad = copy.deepcopy(fields)
    bad[read_only].flat[0] += 1.0
    assert f"{read_only}: input modified" in refs.compare_program(info, entry, host_args, bad, seed)
    stale = {**entry, "inputs": "0" * 16}
    assert "make references" in refs.compare_program(info, stale, host_args, fields, seed)[0]


@needs_store
@pytest.mark.parametrize("static", ["icon4py", "none"])
def test_store_covers_the_catalogue_and_records_its_versions(static):
    # "none": the variant the emulated GPU tests compile (tests/backend/test_gpu_emulation.py)
    from icoforge.suite.catalogue import program_names

    store = refs.load_store(static=static)
    meta = store["meta"]
    assert meta["static"] == static and meta["reference_backend"] == "gtfn_cpu"
    assert set(store["programs"]) == set(program_names())
    assert meta["versions"]["gt4py"] and meta["versions"]["icon4py-atmosphere-dycore"]
    assert (meta["grid"]["name"], meta["levels"], meta["seed"]) == (refs.GRID, refs.LEVELS, refs.SEED)
    for name, entry in store["programs"].items():
        assert set(entry["outputs"]) == set(get_program(name).outputs), name
        assert all(o["written"] > 0 for o in entry["outputs"].values()), name  # every output has points to check


def test_a_store_for_another_grid_is_refused(tiny_grid):
    meta = {"grid": {"name": "R2B4", "cells": 20480}, "levels": 10}
    with pytest.raises(IcoforgeError, match="R2B4"):
        refs._check_grid(tiny_grid, meta)


# --- every program: icoforge-cpu against the stored gtfn_cpu outputs ----------------------------


def _stored_names():
    return sorted(STORE["programs"]) if STORE else []


@pytest.fixture(scope="module")
def warm_caches(request, tiny_grid):
    """The selected programs compiled once in cpu_count processes (the GT4Py passes dominate):
    the tests then translate from the on-disk caches in this process. Failures show in the tests."""
    names = {
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_program_matches_stored_gt4py_reference"
    }
    refs.warm_up(sorted(names), "icoforge-cpu", jobs=os.cpu_count() or 1)


@needs_store
@pytest.mark.references
@pytest.mark.parametrize("name", _stored_names())
def test_program_matches_stored_gt4py_reference(name, tiny_grid, warm_caches):
    result = refs.check_program(get_program(name), "icoforge-cpu", tiny_grid, STORE)
    assert result.passed, result.summary()


# --- `icoforge run --reference` (what `make demo` runs) -----------------------------------------


@needs_store
@pytest.mark.slow
def test_run_with_reference_prints_pass_and_the_time(tiny_grid, capsys):
    from icoforge.cli.main import main

    assert main(["run", SMALL, "--reference", "--backend", "icoforge", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert f"PASS: {SMALL} on icoforge vs stored gtfn_cpu reference" in out and "ms per call" in out


def test_run_with_reference_on_another_grid_is_refused(capsys):
    from icoforge.cli.main import main

    if STORE is None:
        pytest.skip("no stored references")
    assert main(["run", SMALL, "--reference", "--grid", "R2B4"]) == 2
    assert "stored references are for --grid R2B3, not R2B4" in capsys.readouterr().err
