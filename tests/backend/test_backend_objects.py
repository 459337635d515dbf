"""The ready-made backend objects (`icoforge.backend:cpu`, `:cuda`, `:hip`, `:any_gpu`): made on
first access, cached, and cheap: importing the package and touching `cpu` loads no CuPy (so no CUDA
context), starts no compile worker and writes nothing into the cache (nothing compiled)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import json, multiprocessing, os, pathlib, sys
    import icoforge.backend as b
    after_import = sorted(m for m in sys.modules if m.split(".")[0] in ("cupy", "cuda", "cupy_backends"))
    made_after_import = sorted(b._made_backends)
    cpu = b.cpu
    print(json.dumps({
        "gpu_modules_after_import": after_import,
        "made_after_import": made_after_import,
        "gpu_modules_after_cpu": sorted(m for m in sys.modules if m.split(".")[0] in ("cupy", "cuda", "cupy_backends")),
        "made_after_cpu": sorted(b._made_backends),
        "same_object": cpu is b.cpu,
        "name": cpu.name,
        "children": len(multiprocessing.active_children()),
        "cache_files": sorted(str(p) for p in pathlib.Path(os.environ["ICOFORGE_CACHE"]).rglob("*")),
    }))
    """
)


def test_touching_cpu_loads_no_gpu_library_and_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**os.environ, "ICOFORGE_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["gpu_modules_after_import"] == [] and seen["gpu_modules_after_cpu"] == []
    assert seen["made_after_import"] == [] and seen["made_after_cpu"] == ["cpu"]  # only what was touched
    assert seen["same_object"] and seen["name"] == "icoforge_cpu"
    assert seen["children"] == 0, "a compile worker started"
    assert seen["cache_files"] == [], "something was written into the cache (a compile?)"


def test_objects_are_icoforge_backends_made_by_make_backend():
    import icoforge.backend as b
    from gt4py.next import backend as gt_backend

    assert b.cpu is b.cpu
    assert isinstance(b.cpu, gt_backend.Backend)
    assert b.cpu.name == b.make_backend("cpu").name == "icoforge_cpu"
    assert set(b.BACKEND_OBJECTS) == {"cpu", "cuda", "hip", "any_gpu"}
    assert set(b.BACKEND_OBJECTS) <= set(dir(b))


def test_no_submodule_shadows_a_backend_object():
    """An imported submodule becomes a package attribute and would hide the object of its name:
    that is why the GPU-of-any-vendor object is `any_gpu` (`icoforge.backend.runtime.gpu` is the GPU runtime)."""
    import importlib.util

    import icoforge.backend as b

    assert [n for n in b.BACKEND_OBJECTS if importlib.util.find_spec(f"icoforge.backend.{n}")] == []
    assert importlib.util.find_spec("icoforge.backend.runtime.gpu") is not None


def test_unknown_name_lists_the_backend_objects():
    import icoforge.backend as b

    with pytest.raises(AttributeError, match="cpu, cuda, hip, any_gpu"):
        b.cpux  # noqa: B018
    # submodules still import through the package (the import system relies on AttributeError)
    from icoforge.backend.runtime import workflow

    assert workflow.CPUExecutor


def test_icon4py_resolves_module_symbol_to_the_object():
    """icon4py 0.4.1's own `--backend` resolution (its testing fixtures) and its per-program
    customization hand our object through unchanged."""
    datatest = pytest.importorskip("icon4py.model.testing.fixtures.datatest", reason="make setup installs icon4py-testing")
    from icon4py.model.common import model_backends, model_options

    import icoforge.backend as b

    obj = datatest._get_backend_like("icoforge.backend:cpu")
    assert obj is b.cpu
    assert model_options.customize_backend(None, obj) is b.cpu
    assert model_backends.get_allocator(obj) is b.cpu
