"""A stand-in for `cupy.cuda` in the tests of the CUDA-graph paths (no GPU on CI)."""

from __future__ import annotations


class FakeCuda:
    """Just enough of `cupy.cuda` for the CUDA-graph paths (ICOFORGE_HOST_GRAPHS, greenline
    --graph-replay) on a machine without a GPU: work enqueued (`enqueue`) while a stream captures
    is recorded into that stream's graph instead of running, and a graph launch runs what it
    recorded. `fail`: end_capture raises, as CUDA does for an operation a capture cannot hold;
    `outer_capture`: the current stream is itself being captured."""

    def __init__(self, fail: bool = False):
        self.capturing: list | None = None
        self.outer_capture = False
        self.fail = fail
        self.graph_launches = 0
        self.stack: list = []  # the streams entered (`with stream:`), the current one last
        self.enqueued_on: list = []  # the current stream of each enqueue, in order
        cuda = self

        class Graph:
            def __init__(self, recorded):
                self.recorded = recorded

            def launch(self, stream=None):
                cuda.graph_launches += 1
                for work in self.recorded:
                    work()

        class Stream:
            def __init__(self, non_blocking=False):
                self.events = 0  # events recorded on it (a branch's fork or join)
                self.waits = 0  # events it waited for

            def __enter__(self):
                cuda.stack.append(self)
                return self

            def __exit__(self, *exc):
                cuda.stack.pop()
                return False

            def record(self):
                self.events += 1
                return object()

            def wait_event(self, event):
                self.waits += 1

            def begin_capture(self):
                cuda.capturing = []

            def end_capture(self):
                recorded, cuda.capturing = cuda.capturing, None
                if cuda.fail:
                    raise RuntimeError("operation not permitted when stream is capturing")
                return Graph(recorded)

            def is_capturing(self):
                return cuda.outer_capture

            def synchronize(self):
                pass

        self.Stream = Stream
        self.current = Stream()

    def get_current_stream(self):
        return self.current

    def MemoryPool(self):  # noqa: N802 (CuPy's name)
        import types

        return types.SimpleNamespace(malloc=None)

    def using_allocator(self, malloc):
        import contextlib

        return contextlib.nullcontext()

    def enqueue(self, work) -> None:
        self.enqueued_on.append(self.stack[-1] if self.stack else self.current)
        if self.capturing is not None:
            self.capturing.append(work)
        else:
            work()
