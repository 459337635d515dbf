"""The GPU runtime's per-call work that is done once: table views (and a CPU table's copy to the
device) and the views of pooled temporaries. Runs with NumPy as the device array module."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tests.fake_cuda import FakeCuda

from icoforge.backend.runtime.emulate import EmulatedRuntime


def test_table_view_is_made_once_per_table_array():
    rt = EmulatedRuntime("p")
    c2e = np.arange(12, dtype=np.int32).reshape(4, 3)
    op = {"C2E": SimpleNamespace(ndarray=c2e)}
    first = rt.table(op, "C2E")
    assert rt.table(op, "C2E") is first
    assert first[0] == np.uint64(c2e.ctypes.data) and tuple(first[1:]) == (3, 1)
    other = np.ascontiguousarray(c2e.T)  # another array for the same tag (a new grid): a new view
    op2 = {"C2E": SimpleNamespace(ndarray=other)}
    assert rt.table(op2, "C2E")[0] == np.uint64(other.ctypes.data) and tuple(rt.table(op2, "C2E")[1:]) == (4, 1)


def test_temporary_view_is_reused_until_its_range_or_buffer_changes():
    rt = EmulatedRuntime("p")
    a = rt.temporary("t", (10, 20), (0, 5), np.float64)
    assert rt.temporary("t", (10, 20), (0, 5), np.float64) is a
    buf = rt.pool["t"]
    assert a[0] == np.uint64(buf.ctypes.data - 10 * 8) and tuple(a[1:]) == (1, 10)
    b = rt.temporary("t", (12, 20), (1, 5), np.float64)  # other range, same buffer: other origin and stride
    assert rt.pool["t"] is buf and b[0] == np.uint64(buf.ctypes.data - (12 + 1 * 8) * 8) and tuple(b[1:]) == (1, 8)
    c = rt.temporary("t", (0, 100), (0, 5), np.float64)  # does not fit: a new buffer, a new view
    assert rt.pool["t"] is not buf and c[0] == np.uint64(rt.pool["t"].ctypes.data)


def test_field_view_and_ranges_are_made_once_per_gt4py_field():
    import gc

    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    rt = EmulatedRuntime("p")
    f = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)), origin={dims.KDim: 1})
    v, r = rt.field(f, 2, np.float64)
    assert rt.field(f, 2, np.float64)[0] is v  # the second call reads the cache
    assert v == rt.view(f, 2, np.float64)  # what the uncached call gives
    assert r == [(int(x.start), int(x.stop)) for x in f.domain.ranges] and r[1] == (-1, 3)  # the domain
    with np.testing.assert_raises(Exception):
        rt.field(f, 2, np.float32)  # another dtype asked for: checked again, and refused
    bare = np.zeros((6, 4))  # a bare array is never cached (its shape may change in place)
    assert rt.field(bare, 2, np.float64)[1] == [(0, 6), (0, 4)]
    assert len(rt._fields) == 1
    ref = rt._fields[id(f)][0]
    del f
    gc.collect()
    assert ref() is None  # the cache does not keep fields alive


def test_span_of_a_field_and_of_an_empty_array():
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    rt = EmulatedRuntime("p")
    a = np.zeros((6, 4))
    assert rt.span(a) == (a.ctypes.data, a.ctypes.data + a.nbytes)
    assert rt.span(a[::-1]) == (a.ctypes.data, a.ctypes.data + a.nbytes)  # negative stride
    empty = np.zeros((0, 4))
    lo, hi = rt.span(empty)
    assert lo == hi  # covers nothing: shares memory with nothing
    f = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)))
    arr = f.ndarray  # GT4Py's layout may pad: the span reaches the last addressed element
    last = sum((n - 1) * st for n, st in zip(arr.shape, arr.strides))
    assert rt.span(f) == (arr.ctypes.data, arr.ctypes.data + last + arr.itemsize)
    assert rt.span(f) is rt.span(f)  # made once


def _recorder(rt, calls):
    """A stand-in host plan: views and a temporary from the runtime, one launch per call."""

    def plan(args, offset_provider, kernels, rt_):
        assert rt_ is rt
        calls.append(args)
        view, _ = rt.field(args[0], 2, np.float64)
        tmp = rt.temporary("t", (0, int(args[1])), (0, 4), np.float64)
        rt.launch(kernels["k"], (1, 1, 1), (32, 1, 1), (*view, *tmp, np.int32(args[1])))

    return plan


def test_a_call_with_the_same_fields_and_scalars_replays_its_launches():
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    class Counting(EmulatedRuntime):
        def _launch(self, kernel, grid, block, args):
            self.launched.append((kernel, grid, block, args))

    rt = Counting("p")
    rt.launched = []
    calls: list = []
    plan = _recorder(rt, calls)
    f = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)))
    op = {}
    rt.run(plan, (f, 6), op, {"k": "kernel"})
    rt.run(plan, (f, 6), op, {"k": "kernel"})  # replayed: the plan does not run again
    assert len(calls) == 1 and len(rt.launched) == 2 and rt.launched[0] == rt.launched[1]
    rt.run(plan, (f, 5), op, {"k": "kernel"})  # another scalar: the plan runs
    g = gtx.as_field([dims.CellDim, dims.KDim], np.ones((6, 4)))
    rt.run(plan, (g, 6), op, {"k": "kernel"})  # another field object: the plan runs
    assert len(calls) == 3 and rt.launched[-1][3][0] == np.uint64(g.ndarray.ctypes.data)
    rt.run(plan, (f, 100), op, {"k": "kernel"})  # the temporary grows: a new buffer ...
    rt.run(plan, (f, 6), op, {"k": "kernel"})  # ... so the earlier recording of (f, 6) is stale
    assert len(calls) == 5 and rt.launched[-1][3][3] == np.uint64(rt.pool["t"].ctypes.data)
    rt.run(plan, (np.zeros((6, 4)), 6), op, {"k": "kernel"})  # a bare array: never replayed
    rt.run(plan, (np.zeros((6, 4)), 6), op, {"k": "kernel"})
    assert len(calls) == 7


def test_a_failing_call_records_nothing_and_replay_can_be_switched_off(monkeypatch):
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    rt = EmulatedRuntime("p")
    f = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)))

    def refusing(args, offset_provider, kernels, rt_):
        raise ValueError("refused")

    for _ in range(2):
        with np.testing.assert_raises(ValueError):
            rt.run(refusing, (f,), {}, {})
    assert not rt._plans
    monkeypatch.setenv("ICOFORGE_HOST_REPLAY", "0")
    off = EmulatedRuntime("p")
    calls: list = []
    off._launch = lambda *a: None
    plan = _recorder(off, calls)
    for _ in range(2):
        off.run(plan, (f, 6), {}, {"k": "kernel"})
    assert len(calls) == 2 and not off._plans


def test_launch_observers_run_around_every_launch_replays_included():
    """Timers attach to `Runtime.observers` (perf.timing.KernelTimer, granule DeviceBusy): each is
    called around the launch, the first outermost, and sees replayed calls as the first one."""
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    log: list = []

    class Logging(EmulatedRuntime):
        def _launch(self, kernel, grid, block, args):
            log.append(("launch", kernel))

    def observer(tag):
        def observe(kernel, stream, launch):
            log.append((f"{tag} before", kernel, stream))
            launch()
            log.append((f"{tag} after", kernel))

        return observe

    rt = Logging("p")
    calls: list = []
    plan = _recorder(rt, calls)
    f = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)))
    op = {}  # the same offset provider: the second call replays
    rt.run(plan, (f, 6), op, {"k": "kernel"})
    assert log == [("launch", "kernel")]  # no observer: the launch alone
    outer, inner = observer("outer"), observer("inner")
    rt.observers += [outer, inner]
    for _ in range(2):  # the plan, then its replay
        log.clear()
        rt.run(plan, (f, 6), op, {"k": "kernel"})
        expected = [("outer before", "kernel", None), ("inner before", "kernel", None), ("launch", "kernel")]
        assert log == expected + [("inner after", "kernel"), ("outer after", "kernel")]
    assert len(calls) == 1  # the second call was a replay
    rt.observers.remove(outer)
    log.clear()
    rt.run(plan, (f, 6), op, {"k": "kernel"})
    assert [e[0] for e in log] == ["inner before", "launch", "inner after"]


def test_bind_program_runs_the_host_plan_on_any_runtime():
    """`gpu.bind_program`: the one way a GPU artifact becomes a callable once its kernels are
    loaded (CuPy functions on a GPU; here a stand-in kernel on the emulation's runtime)."""
    from icoforge.backend.runtime.gpu import GPUArtifact, bind_program

    plan = "def launch(args, offset_provider, kernels, rt):\n    rt.launch(kernels['k'], (1, 1, 1), (1, 1, 1), args)\n"
    art = GPUArtifact("p", "cuda", "", plan, ("k",), (), tuple_params=((1, 2),))
    launched = []

    class Logging(EmulatedRuntime):
        def _launch(self, kernel, grid, block, args):
            launched.append((kernel, args))

    rt = Logging("p")
    program = bind_program(art, {"k": "kernel"}, rt)
    program(1, (2, 3), offset_provider={}, out=4)  # the tuple flattened, `out` last, as GT4Py passes them
    assert launched == [("kernel", (1, 2, 3, 4))]
    assert program.icoforge_runtime is rt and program.icoforge_artifact is art and program.icoforge_kernels == {"k": "kernel"}


def test_new_temporaries_start_poisoned():
    """A temporary the runtime allocates starts as NaN (floats) or all bits set (integers), not as
    whatever the allocator left: a kernel reading a point no kernel wrote shows in the outputs."""
    rt = EmulatedRuntime("p")
    rt.temporary("f", (0, 10), (0, 3), np.float64)
    rt.temporary("g", (0, 10), None, np.float32)
    rt.temporary("i", (0, 10), (0, 3), np.int32)
    rt.temporary("u", (0, 4), None, np.uint64)
    assert np.isnan(rt.pool["f"]).all() and np.isnan(rt.pool["g"]).all()
    assert (rt.pool["i"] == -1).all() and (rt.pool["u"] == np.iinfo(np.uint64).max).all()
    rt.pool["f"][:] = 1.0
    rt.temporary("f", (2, 10), (0, 3), np.float64)  # fits: reused as it is, not poisoned again
    assert (rt.pool["f"] == 1.0).all()


def _kernel(cuda, runs):
    """A kernel that logs its arguments when it runs (enqueued on the fake CUDA's stream)."""
    return lambda grid, block, args: cuda.enqueue(lambda: runs.append(args))


def _graph_runtime(cuda):
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    class Direct(EmulatedRuntime):  # launches call the kernel as CuPy's do
        def _launch(self, kernel, grid, block, args):
            kernel(grid, block, args)

    rt = Direct("p")
    rt.graphs = cuda  # what ICOFORGE_HOST_GRAPHS=1 sets to cupy.cuda on a GPU
    return rt, gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)))


def test_host_graphs_launch_a_replayed_call_as_one_graph_captured_once():
    cuda = FakeCuda()
    rt, f = _graph_runtime(cuda)
    runs: list = []
    calls: list = []
    plan = _recorder(rt, calls)
    kernels = {"k": _kernel(cuda, runs)}
    op = {}  # one offset provider: the same call again is replayed
    for _ in range(4):  # the plan, then three replays: the first captures, each launches the graph
        rt.run(plan, (f, 6), op, kernels)
    assert len(calls) == 1 and cuda.graph_launches == 3
    assert len(runs) == 4 and all(r == runs[0] for r in runs)  # every call ran its kernel once, the same
    rt.observers.append(lambda kernel, stream, go: go())  # a timer wants each kernel: no graph
    rt.run(plan, (f, 6), op, kernels)
    assert cuda.graph_launches == 3 and len(runs) == 5
    rt.observers.clear()
    cuda.outer_capture = True  # a whole substep being captured takes the launches themselves
    rt.run(plan, (f, 6), op, kernels)
    assert cuda.graph_launches == 3 and len(runs) == 6


def test_host_graphs_fall_back_to_kernel_launches_when_capture_fails(capsys):
    cuda = FakeCuda(fail=True)
    rt, f = _graph_runtime(cuda)
    runs: list = []
    plan = _recorder(rt, [])
    kernels = {"k": _kernel(cuda, runs)}
    op = {}  # one offset provider: the same call again is replayed
    for _ in range(3):
        rt.run(plan, (f, 6), op, kernels)
    assert len(runs) == 3 and cuda.graph_launches == 0  # each call still ran its kernel, once
    assert capsys.readouterr().err.count("CUDA graph capture failed") == 1  # said once, not per call


def test_host_graphs_are_off_by_default_and_never_on_the_emulation(monkeypatch):
    assert EmulatedRuntime("p").graphs is None
    monkeypatch.setenv("ICOFORGE_HOST_GRAPHS", "1")
    assert EmulatedRuntime("p").graphs is None  # NumPy memory: no CUDA graphs to capture


def test_a_capture_query_cuda_refuses_counts_as_capturing():
    from icoforge.backend.runtime.graphs import capturing as _capturing

    class Refusing:
        def is_capturing(self):
            raise RuntimeError("cudaErrorStreamCaptureImplicit")

    assert _capturing(Refusing()) and not _capturing(FakeCuda().current)


def test_branch_groups_put_only_consecutive_independent_kernels_side_by_side():
    from icoforge.backend.runtime.graphs import branch_groups

    f = {
        "a": (frozenset({"x"}), frozenset({"t1"})),
        "b": (frozenset({"x", "y"}), frozenset({"t2"})),  # reads what a reads: independent of it
        "c": (frozenset({"t1", "t2"}), frozenset({"z"})),  # reads a's and b's outputs
        "d": (frozenset({"x"}), frozenset({"t3"})),
        "e": (frozenset({"t3"}), frozenset({"x"})),  # writes what d reads
    }  # fmt: skip
    names = ["a", "b", "c", "d", "e"]
    assert branch_groups(names, f, 2) == [[0, 1], [2, 3], [4]]  # c and d touch no common field
    assert branch_groups(names, f, 1) == [[0], [1], [2], [3], [4]]  # one stream: no groups
    assert branch_groups(["a", None, "b"], f, 4) == [[0], [1], [2]]  # an unknown kernel depends on all


def test_overlapping_spans_share_memory():
    from icoforge.backend.runtime.graphs import overlapping

    assert not overlapping([(0, 8), (8, 16), (16, 16)])
    assert overlapping([(16, 32), (0, 8), (24, 40)])
    assert overlapping([(0, 8), (0, 8)])  # one buffer passed twice


def _two_kernel_plan(rt):
    """A host plan that launches two kernels, `k` then `m`, on its first field argument's view."""

    def plan(args, offset_provider, kernels_, rt_):
        view, _ = rt.field(args[0], 2, np.float64)
        rt.launch(kernels_["k"], (1, 1, 1), (32, 1, 1), (*view, np.int32(1)))
        rt.launch(kernels_["m"], (1, 1, 1), (32, 1, 1), (*view, np.int32(2)))

    return plan


def test_host_streams_capture_independent_kernels_as_branches_and_keep_each_launch_once():
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    cuda = FakeCuda()
    rt, f = _graph_runtime(cuda)
    rt.streams = 2
    rt.kernel_fields = {"k": (frozenset({"x"}), frozenset({"t"})), "m": (frozenset({"x"}), frozenset({"u"}))}
    runs: list = []
    kernels = {"k": _kernel(cuda, runs), "m": _kernel(cuda, runs)}
    op = {}
    plan = _two_kernel_plan(rt)
    h = gtx.as_field([dims.CellDim, dims.KDim], np.ones((6, 4)))  # another buffer
    for _ in range(3):  # record, capture + launch, launch
        rt.run(plan, (f, h), op, kernels)
    assert cuda.graph_launches == 2 and len(runs) == 6  # each call ran both kernels once
    assert len(rt._branches) == 1 and rt._branches[0].waits == 1 and rt._branches[0].events == 1
    side_streams = {id(s) for s in cuda.enqueued_on[2:4]}  # the captured launches ran on two streams
    assert len(side_streams) == 2
    # one field as both arguments: two names, one buffer, so the IR's names prove nothing: no branches
    g = gtx.as_field([dims.CellDim, dims.KDim], np.zeros((6, 4)))
    rt.run(plan, (g, g), op, kernels)  # recorded
    cuda.enqueued_on.clear()
    rt.run(plan, (g, g), op, kernels)  # captured and launched
    assert len(cuda.enqueued_on) == 2 and len({id(s) for s in cuda.enqueued_on}) == 1, "aliased fields must not branch"
