"""icoforge/portable_numpy: recording a bitwise reference is refused where numpy rounds with its
AVX-512 paths, and the test suite runs without them."""

import os

import pytest

from icoforge import portable_numpy
from icoforge.errors import IcoforgeError


def test_suite_runs_without_numpys_avx512_paths():
    assert os.environ["NPY_DISABLE_CPU_FEATURES"] == portable_numpy.NPY_DISABLE_CPU_FEATURES
    assert not portable_numpy.avx512_paths_on()
    portable_numpy.require_portable_rounding("a test")  # no error here


def test_recording_is_refused_with_avx512_paths_on(monkeypatch, tmp_path):
    from icoforge.model import store

    monkeypatch.setattr(portable_numpy, "avx512_paths_on", lambda: True)
    with pytest.raises(IcoforgeError, match="NPY_DISABLE_CPU_FEATURES"):
        store.write_store(tmp_path / "s.json", {})
    assert not (tmp_path / "s.json").exists()
