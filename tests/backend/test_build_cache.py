"""The persistent caches: corrupt entries are rebuilt, never loaded; concurrent builds agree;
unsupported constructs fail at compile time with the program, construct and place named."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import pathlib

import gt4py.next as gtx
import numpy as np
import pytest
from icon4py.model.common import dimension as dims

from icoforge.backend import make_backend
from icoforge.backend.runtime import build, workflow
from icoforge.backend.runtime.precompile import compilable_program
from icoforge.cache import cache_dir
from icoforge.errors import UnsupportedConstructError

CellDim, KDim = dims.CellDim, dims.KDim

SOURCE = """
#include "icf_cpu.h"
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(%d); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef md = {PyModuleDef_HEAD_INIT, "%s", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_%s(void) { return PyModule_Create(&md); }
"""


def _load(path: pathlib.Path, name: str):
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_build_is_cached_and_a_corrupt_module_is_rebuilt():
    name = "icf_test_answer_a"
    src = SOURCE % (42, name, name)
    so, first = build.build_cpu_module(src, name)
    assert first > 0 and so.exists()
    so2, second = build.build_cpu_module(src, name)
    assert so2 == so and second == 0.0  # served from the cache
    so.write_bytes(so.read_bytes()[:100])  # truncated, as after a crash mid-copy
    so3, third = build.build_cpu_module(src, name)
    assert third > 0, "a corrupt module must be rebuilt"
    assert _load(so3, name).answer() == 42


def _build_in_child(args):
    src, name = args
    so, _ = build.build_cpu_module(src, name)
    return str(so), so.read_bytes() == pathlib.Path(so).read_bytes()


def test_two_processes_building_the_same_module_agree():
    name = "icf_test_answer_b"
    src = SOURCE % (7, name, name)
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        results = list(pool.map(_build_in_child, [(src, name), (src, name)]))
    assert results[0][0] == results[1][0]
    assert _load(pathlib.Path(results[0][0]), name).answer() == 7


@gtx.field_operator
def _twice(a: gtx.Field[[CellDim, KDim], gtx.float64]) -> gtx.Field[[CellDim, KDim], gtx.float64]:
    return a * 2.0


@gtx.program
def twice(a: gtx.Field[[CellDim, KDim], gtx.float64], out: gtx.Field[[CellDim, KDim], gtx.float64]):
    _twice(a, out=out)


def test_corrupt_pass_cache_entry_is_recomputed(tiny_grid):
    inp = compilable_program(twice, tiny_grid.connectivities)
    _, hit = workflow.cached_passes(inp)
    _, hit_again = workflow.cached_passes(inp)
    assert hit_again
    (entry,) = cache_dir("gt4py-passes").glob(f"twice-{workflow.passes_key(inp)}.pkl")
    data = entry.read_bytes()
    entry.write_bytes(data[:-10] + b"0123456789")  # payload no longer matches its checksum
    program, hit_after = workflow.cached_passes(inp)
    assert not hit_after and str(program.id) == "twice"
    # and the program still runs correctly through the backend
    a = gtx.as_field([CellDim, KDim], np.random.default_rng(0).random((tiny_grid.num_cells, 10)))
    out = gtx.as_field([CellDim, KDim], np.full((tiny_grid.num_cells, 10), np.nan))
    twice.with_backend(make_backend("cpu"))(a, out, offset_provider=tiny_grid.connectivities)
    np.testing.assert_array_equal(out.asnumpy(), 2.0 * a.asnumpy())


@gtx.field_operator
def _scaled_first(
    pair: tuple[gtx.Field[[CellDim, KDim], gtx.float64], gtx.float64],
) -> gtx.Field[[CellDim, KDim], gtx.float64]:
    return pair[0] * pair[1]


@gtx.program
def tuple_param(
    pair: tuple[gtx.Field[[CellDim, KDim], gtx.float64], gtx.float64],
    out: gtx.Field[[CellDim, KDim], gtx.float64],
):
    _scaled_first(pair, out=out)


def test_unsupported_construct_names_program_and_construct(tiny_grid):
    # tuples of fields are lowered (tests/backend/test_constructs.py); a field beside a scalar is not
    with pytest.raises(UnsupportedConstructError, match=r"program 'tuple_param'.*parameter 'pair'.*tuple"):
        workflow.translate(compilable_program(tuple_param, tiny_grid.connectivities))


@gtx.field_operator
def _thrice(a: gtx.Field[[CellDim, KDim], gtx.float64]) -> gtx.Field[[CellDim, KDim], gtx.float64]:
    return a * 3.0


@gtx.program
def thrice(a: gtx.Field[[CellDim, KDim], gtx.float64], out: gtx.Field[[CellDim, KDim], gtx.float64]):
    _thrice(a, out=out)


def test_pass_cache_key_ignores_source_locations_but_not_the_program(tiny_grid):
    """The same program installed elsewhere (another machine's site-packages) must find the
    entry; a different program, argument type or grid size must not."""
    from gt4py import eve
    from gt4py.next.iterator import ir as gtir

    class Relocate(eve.NodeTranslator):
        def visit_Node(self, node, **kwargs):
            node = self.generic_visit(node, **kwargs)
            if getattr(node, "location", None) is not None:
                loc = node.location
                node.location = type(loc)(
                    filename="/elsewhere/site-packages" + (loc.filename or ""), line=loc.line + 3, column=loc.column,
                    end_line=loc.end_line, end_column=loc.end_column,
                )  # fmt: skip
            return node

    inp = compilable_program(twice, tiny_grid.connectivities)
    assert any(getattr(n, "location", None) is not None for n in inp.data.walk_values().if_isinstance(gtir.Node))
    moved = type(inp)(data=Relocate().visit(inp.data), args=inp.args)
    assert moved.data.location.filename != inp.data.location.filename
    assert workflow.passes_key(moved) == workflow.passes_key(inp)
    assert workflow.passes_key(compilable_program(thrice, tiny_grid.connectivities)) != workflow.passes_key(inp)
    bigger = {k: v for k, v in tiny_grid.connectivities.items()}
    c2e = bigger["C2E"]
    bigger["C2E"] = gtx.as_connectivity(domain=c2e.domain.dims, codomain=c2e.codomain, data=np.concatenate([c2e.ndarray, c2e.ndarray]), skip_value=c2e.skip_value)
    assert workflow.passes_key(compilable_program(twice, bigger)) != workflow.passes_key(inp)


def test_gpu_executor_reports_its_translation_cache_hits(tiny_grid, tmp_path, monkeypatch, capsys):
    """The granule's setup table counts cache hits from the artifacts' timings: the CUDA executor
    records them as the C++ one does (the H200 run of 2026-11-30 showed 0/20 with every pass
    cached). With ICOFORGE_TRACE each translation is logged and a miss leaves its GTIR behind."""
    from icoforge.backend.runtime.gpu import GPUExecutor

    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ICOFORGE_TRACE", str(tmp_path / "trace"))
    inp = compilable_program(twice, tiny_grid.connectivities)
    first = dict(GPUExecutor("cuda")(inp).timings)  # generates source only: no GPU needed
    second = dict(GPUExecutor("cuda")(inp).timings)
    assert (first["translation_cache_hit"], second["translation_cache_hit"]) == (0.0, 1.0)
    log = capsys.readouterr().err.splitlines()
    assert "twice: passes computed in" in log[0] and "twice: passes cached" in log[1]
    (missed,) = (tmp_path / "trace").glob("twice-*.gtir")
    assert missed.name == f"twice-{workflow.passes_key(inp)}.gtir" and "twice" in missed.read_text()


def _nice_after_yield(_: int) -> tuple[int, int]:
    before = os.nice(0)
    workflow.yield_to_main_process()
    workflow.yield_to_main_process()  # once per process, not once per job
    return before, os.nice(0)


def test_compile_workers_yield_to_the_main_process(monkeypatch):
    """A compile worker (a child process) lowers its priority once, by ICOFORGE_WORKER_NICE, so
    that the main process constructing SolveNonhydro keeps a core; the main process never does."""
    monkeypatch.setenv("ICOFORGE_WORKER_NICE", "3")
    main_before = os.nice(0)
    workflow.yield_to_main_process()
    assert os.nice(0) == main_before
    with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        before, after = pool.submit(_nice_after_yield, 0).result()
    assert after == min(before + 3, 19)


def test_executors_stamp_when_their_job_ran(tiny_grid, tmp_path, monkeypatch):
    """The granule's setup line names the compile job that finished last and when it started:
    the executors stamp each job with wall-clock start and end (in the worker)."""
    import time

    from icoforge.backend.runtime.gpu import GPUExecutor

    monkeypatch.setenv("ICOFORGE_CACHE", str(tmp_path / "cache"))
    t0 = time.time()
    timings = dict(GPUExecutor("cuda")(compilable_program(twice, tiny_grid.connectivities)).timings)
    assert t0 <= timings["started_at"] <= timings["finished_at"] <= time.time()
    assert timings["finished_at"] - timings["started_at"] >= timings["translate"]

