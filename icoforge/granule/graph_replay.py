"""A substep captured as one CUDA graph and replayed (issue 17, item 4): what the host's part of a
substep (Python, GT4Py's call path, the backend's launches) costs, for any GPU backend.

Why a replay is the same substep: stream capture records every operation the substep enqueues on
the capturing stream (the backend's launches, CuPy's work inside icon4py's Python) with the
pointers of this call's arguments. Replaying it on the same state pair is what `time_variants`
does with normal calls: the same variant again and again on the same states. What the substep
allocates while captured comes from a private CuPy pool that lives as long as the graph, so no
other allocation reuses those blocks between replays. What is not captured (work a backend puts
on a stream of its own, a host decision taken from device values) would make the replay differ:
so a replay counts only when one replay from a fresh state (the states refilled in place after the
capture) equals a normal call's result bit for bit, NaN failing; otherwise the report says so and
shows no time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from icoforge.granule.state import prognostic_to_numpy


def median_ms(call: Callable[[], Any], sync: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def identical(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Bit-identical and free of NaN (NaN never passes)."""
    return a.keys() == b.keys() and all(not np.isnan(a[k]).any() and np.array_equal(a[k], b[k]) for k in a)


def replay_variant(granule: Any, variant: str, repeat: int) -> dict[str, Any]:
    """{"replay_ms", "bit_identical"} for one substep variant of a set-up GPU granule, or
    {"capture_error"} where the substep cannot be captured (the error names the operation)."""
    import cupy as cp

    fresh = granule.fresh_states()
    granule.step(variant, fresh)
    granule.sync()
    reference = prognostic_to_numpy(fresh[0].next)
    states = granule.fresh_states()
    stream = cp.cuda.Stream(non_blocking=True)
    pool = cp.cuda.MemoryPool()  # lives with the graph: blocks the capture allocated stay its own
    try:
        with cp.cuda.using_allocator(pool.malloc), stream:
            stream.begin_capture()
            try:
                granule.step(variant, states)
            finally:
                graph = stream.end_capture()
        # Work a backend launched on a stream of its own ran during the capture instead of being
        # recorded (dace_gpu: an empty replay of 0.2 ms per step that "equalled" the normal call, as
        # the states already held its result). Back to the initial values first, in the same
        # buffers: then only what the graph itself does can produce the reference.
        granule.refill_states(states)
        granule.sync()
        graph.launch(stream)
        stream.synchronize()
        if not identical(prognostic_to_numpy(states[0].next), reference):
            return {"bit_identical": False}
        return {"bit_identical": True, "replay_ms": median_ms(lambda: graph.launch(stream), stream.synchronize, repeat)}
    except Exception as e:  # which operation of the substep cannot be captured is the finding
        return {"capture_error": f"{type(e).__name__}: {e}"[:400]}


def replayed_step_ms(replay: dict[str, dict[str, Any]], mix: tuple[str, ...]) -> float | None:
    """The dycore step from replayed substeps (`mix`: the variants of one step), None unless every
    variant replayed bit-identically."""
    if any("replay_ms" not in replay.get(v, {}) for v in mix):
        return None
    return sum(replay[v]["replay_ms"] for v in mix)
