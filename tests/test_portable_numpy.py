"""icoforge/portable_numpy: recording a stored bitwise reference is refused where numpy rounds with
its AVX-512 paths (a granule fingerprint records the flag instead), and the test suite runs without them."""

import os

import pytest

from icoforge import portable_numpy
from icoforge.errors import IcoforgeError


def test_suite_runs_without_numpys_avx512_paths():
    assert os.environ["NPY_DISABLE_CPU_FEATURES"] == portable_numpy.NPY_DISABLE_CPU_FEATURES
    assert not portable_numpy.avx512_paths_on()
    portable_numpy.require_portable_rounding("a test")  # no error here


def test_suite_runs_openblas_with_avx2_kernels():
    # the wheel's numpy links its own OpenBLAS; on an AVX-512 host it would choose SkylakeX unasked
    assert os.environ["OPENBLAS_CORETYPE"] == portable_numpy.OPENBLAS_CORETYPE
    assert portable_numpy.openblas_core() in portable_numpy.PORTABLE_OPENBLAS_CORES


def test_recording_is_refused_with_openblas_skylakex_kernels(monkeypatch):
    monkeypatch.setattr(portable_numpy, "openblas_core", lambda: "SkylakeX")
    with pytest.raises(IcoforgeError, match="OPENBLAS_CORETYPE=Haswell") as e:
        portable_numpy.require_portable_rounding("recording x")
    assert "SkylakeX" in str(e.value) and "AVX-512 paths" not in str(e.value)


def test_the_setting_decides_the_openblas_core_of_child_processes():
    # shows the setting is what decides the core: a child with OPENBLAS_CORETYPE=Sandybridge reports it
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_CORETYPE": "Sandybridge"}
    code = "from icoforge import portable_numpy as p; print(p.openblas_core())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "Sandybridge"


def test_recording_is_refused_with_avx512_paths_on(monkeypatch, tmp_path):
    from icoforge.model import store

    monkeypatch.setattr(portable_numpy, "avx512_paths_on", lambda: True)
    with pytest.raises(IcoforgeError, match="NPY_DISABLE_CPU_FEATURES"):
        store.write_store(tmp_path / "s.json", {})
    assert not (tmp_path / "s.json").exists()


def test_a_granule_fingerprint_records_the_avx512_flag_instead_of_refusing(monkeypatch, tmp_path):
    # the device's greenline runs write their fingerprints on Intel hosts with AVX-512 (compared
    # within one run); the stored references' test checks the flag
    import json

    from icoforge.granule import golden

    monkeypatch.setattr(golden, "avx512_paths_on", lambda: True)
    monkeypatch.setattr(golden, "input_backends", lambda granule, static: {})
    monkeypatch.setattr(golden, "fingerprint", lambda results, version, sequence: [])
    golden.write(tmp_path / "g.json", type("G", (), {"name": "x"})(), None, {}, [], {"host": "h"})
    env = json.loads((tmp_path / "g.json").read_text())["environment"]
    assert env["host"] == "h" and env["numpy_avx512_paths"] is True and env["openblas_core"] in portable_numpy.PORTABLE_OPENBLAS_CORES


def test_the_makefile_exports_the_same_features():
    # `make` sets it for every command it runs (the device scripts and the CLI do not read it)
    import pathlib
    import re

    makefile = (pathlib.Path(__file__).parents[1] / "Makefile").read_text()
    for key, value in portable_numpy.ENVIRONMENT.items():
        m = re.search(rf"^export {key} \?= (.+)$", makefile, re.M)
        assert m and m.group(1).strip() == value, (key, m)
