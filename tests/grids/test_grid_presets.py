import pytest

from icoforge.errors import IcoforgeError, UnknownNameError
from icoforge.grids import PRESETS
from icoforge.grids.presets import canonical_name, global_sizes, lookup_preset


def test_expected_presets_exist():
    assert {"R2B3", "R2B4", "R2B5", "R2B6", "R2B7", "REGIONAL"} <= set(PRESETS)
    assert PRESETS["REGIONAL"].limited_area
    assert not any(p.limited_area for n, p in PRESETS.items() if n != "REGIONAL")


@pytest.mark.parametrize("k", [3, 4, 5, 6, 7])
def test_global_preset_sizes_are_analytic(k):
    p = PRESETS[f"R2B{k}"]
    assert (p.cells, p.edges, p.vertices) == (20 * 4 * 4**k, 30 * 4 * 4**k, 10 * 4 * 4**k + 2)
    assert global_sizes(2, k) == (p.cells, p.edges, p.vertices)
    # Euler's formula on the sphere: V - E + F = 2
    assert p.vertices - p.edges + p.cells == 2


def test_r2b6_matches_icon4py_benchmark_size():
    assert PRESETS["R2B6"].cells == 327_680


def test_regional_is_near_icon4py_benchmark_size():
    assert abs(PRESETS["REGIONAL"].cells - 44_528) / 44_528 < 0.01
    spec = PRESETS["REGIONAL"].make_spec()
    assert type(spec).__name__ == "LimitedAreaGridSpec"
    assert spec.parent.name == "R02B07"


@pytest.mark.parametrize("name", ["R2B4", "r2b4", " R2b4 ", "R02B04", "r02b004"])
def test_names_are_case_insensitive_and_accept_zero_padding(name):
    assert lookup_preset(name) is PRESETS["R2B4"]
    assert canonical_name(name) == "R2B4"


@pytest.mark.parametrize(
    "typo, suggestion", [("R2B44", "R2B4"), ("regionl", "regional"), ("REGINAL", "REGIONAL")]
)
def test_misspelt_name_suggests_closest(typo, suggestion):
    with pytest.raises(UnknownNameError) as e:
        lookup_preset(typo)
    assert isinstance(e.value, IcoforgeError)
    assert e.value.suggestions[0] == suggestion
    assert f"Did you mean '{suggestion}'" in str(e.value)
    assert "\n" not in str(e.value)


def test_cache_file_name_depends_on_the_spec():
    names = {p.file_name() for p in PRESETS.values()}
    assert len(names) == len(PRESETS)
    assert PRESETS["R2B4"].file_name() == PRESETS["R2B4"].file_name()  # stable
    assert PRESETS["R2B4"].file_name().startswith("R2B4-")
