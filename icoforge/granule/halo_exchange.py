"""Halo exchanges of the decomposed granule: GHEX (icon4py's) or plain mpi4py, timed.

icon4py's `SolveNonhydro` calls `exchange.exchange(dim, *fields, stream=...)` at five places of a
substep (vn and rho at edges after the predictor's horizontal part, w (and dwdz) after the
predictor, vn in the corrector, rho/exner/w at its end). Which runtime answers:

- "ghex": icon4py's `GHexMultiNodeExchange` (`mpi_decomposition.create_exchange`), GHEX's
  unstructured halo exchange over MPI, as icon4py runs distributed. Needs the `ghex` package
  (PyPI 0.9.0 is a source package: cmake, Boost headers, MPI; `scripts/ci/build_ghex.sh`). GPU
  buffers only with a GHEX built with GHEX_USE_GPU=ON.
- "mpi": `MpiHaloExchange` below, ours: the same halo (every non-owned point receives its owner's
  value), one message per neighbour rank and call with every field of the call in it
  (Isend/Irecv, receives posted first). NumPy fields are packed into the message buffers
  themselves. CuPy fields are packed on the device into one buffer per call (a gather kernel per
  field and neighbour), copied once to a pinned host buffer, sent, received into another pinned
  buffer, copied once back and scattered (works without a CUDA-aware MPI); or sent from device
  memory with `gpu_aware=True`. Buffers are made at a kind of call's first use and reused.
- "auto": ghex if it imports, else mpi.

`TimedExchange` wraps either and adds up the seconds spent inside the exchange calls (after a
device synchronisation on GPU backends, so a call does not absorb kernels still running).
`MpiHaloExchange.phase_seconds` (set to a dict) splits them into PHASES, with a device
synchronisation at each phase's end so that its kernels and copies are its own: a timing pass of
its own (ranks.py), since those synchronisations slow the exchange down.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.granule.decompose import HORIZONTAL, LocalIndices, RankProperties

EXCHANGES = ("auto", "ghex", "mpi")
_TAG = 23_000  # base MPI tag of our exchanges (one tag per dimension)
# the phases of an exchange call that `MpiHaloExchange.phase_seconds` times. With two ranks
# time-sliced on one GPU (no MPS) every phase that touches the device includes waiting for the
# GPU to turn to this rank; mpi_wait includes waiting for the peer to reach the exchange
PHASES = ("pack", "to_host", "mpi_wait", "to_device", "unpack")


def ghex_available() -> str | None:
    """None if icon4py's GHEX exchange can be used; else why not."""
    try:
        import ghex  # noqa: F401
    except ImportError as e:
        return f"ghex is not installed ({e})"
    from icon4py.model.common.decomposition import mpi_decomposition

    if mpi_decomposition.import_error is not None:
        return f"icon4py's mpi_decomposition could not import GHEX: {mpi_decomposition.import_error}"
    return None


def _dim_name(dim: Any) -> str:
    """icon4py's dimension object -> "CellDim" / "EdgeDim" / "VertexDim"."""
    from icon4py.model.common import dimension as dims

    for name in HORIZONTAL:
        if getattr(dims, name) == dim:
            return name
    raise IcoforgeError(f"halo exchange over {dim}: only {', '.join(HORIZONTAL)} have halos")


def _array(f: Any) -> Any:
    return f.ndarray if hasattr(f, "ndarray") else f


class MpiHaloExchange:
    """icon4py's `ExchangeRuntime` protocol over mpi4py point-to-point messages (see the module
    docstring). The plan (who sends which local points to whom) is made once, collectively."""

    def __init__(self, props: RankProperties, idx: LocalIndices, *, gpu_aware: bool = False):
        self.props = props
        self.comm = props.comm
        self.gpu_aware = gpu_aware
        # dim -> [(peer, local indices to send)], [(peer, local indices to receive into)]
        self.sends: dict[str, list[tuple[int, np.ndarray]]] = {}
        self.recvs: dict[str, list[tuple[int, np.ndarray]]] = {}
        self._device_index: dict[tuple[str, str, int], Any] = {}
        self._buffers: dict[tuple, list[_CallBuffers]] = {}
        # a dict: each call adds its seconds per phase (PHASES) to it, synchronising the device
        # between phases; None: no phase timing, no extra synchronisation
        self.phase_seconds: dict[str, float] | None = None
        for dim in HORIZONTAL:
            self._plan(dim, idx)

    def _plan(self, dim: str, idx: LocalIndices) -> None:
        gidx, owned = idx.global_index[dim], idx.owned[dim]
        # every rank's owned global indices -> the owner of each of my halo points
        all_owned = self.comm.allgather(gidx[owned])
        halo_local = np.flatnonzero(~owned)
        halo_global = gidx[halo_local]
        owners = np.full(halo_global.shape, -1, dtype=np.int64)
        for r, g in enumerate(all_owned):
            if r == self.props.rank or g.size == 0:
                continue
            order = np.argsort(g)
            pos = np.searchsorted(g, halo_global, sorter=order)
            pos = np.minimum(pos, g.size - 1)
            hit = g[order[pos]] == halo_global
            owners[hit] = r
        if (owners < 0).any():
            missing = halo_global[owners < 0][:5]
            raise IcoforgeError(f"{dim}: halo points without an owner on another rank (global {missing.tolist()} ...)")
        # ask each owner for my halo points (global indices, in my receive order)
        requests = [halo_global[owners == r] for r in range(self.props.comm_size)]
        self.recvs[dim] = [(r, halo_local[owners == r]) for r in range(self.props.comm_size) if (owners == r).any()]
        asked = self.comm.alltoall(requests)
        local_of = {int(g): i for i, g in enumerate(gidx)}
        sends = []
        for r, wanted in enumerate(asked):
            if r == self.props.rank or len(wanted) == 0:
                continue
            sends.append((r, np.array([local_of[int(g)] for g in wanted], dtype=np.int64)))
        self.sends[dim] = sends

    # -- icon4py's ExchangeRuntime protocol ---------------------------------------------------------

    def get_size(self) -> int:
        return self.props.comm_size

    def my_rank(self) -> int:
        return self.props.rank

    def start(self, dim: Any, *fields: Any, stream: Any = None) -> _Pending:
        name = _dim_name(dim)
        arrays = [_array(f) for f in fields]
        xp = _namespace(arrays[0]) if arrays else np
        on_gpu = xp is not np
        if on_gpu:
            xp.cuda.runtime.deviceSynchronize()  # the kernels that wrote the fields are done
        clock = _PhaseClock(self.phase_seconds, xp)
        bufs = self._free_buffers(name, arrays, xp)
        tag = _TAG + list(HORIZONTAL).index(name)
        # receives first: a peer's message then lands in its buffer, not in MPI's unexpected queue
        requests = [self.comm.Irecv(message, source=peer, tag=tag) for peer, message in bufs.recv_messages]
        for (peer, local), views in zip(self.sends[name], bufs.send_fields):
            index = self._index(xp, name, "send", peer, local)
            for a, view in zip(arrays, views):
                xp.take(a, index, axis=0, out=view)
        clock.lap("pack")
        if bufs.send_host is not bufs.send_device:
            bufs.send_device.get(out=bufs.send_host)  # one copy per call; waits for it and the packing
            clock.lap("to_host")
        elif on_gpu:
            xp.cuda.runtime.deviceSynchronize()  # gpu-aware MPI reads the device buffer: packed first
        requests += [self.comm.Isend(message, dest=peer, tag=tag) for peer, message in bufs.send_messages]
        return _Pending(self, name, arrays, xp, requests, bufs)

    def exchange(self, dim: Any, *fields: Any, stream: Any = None) -> None:
        self.start(dim, *fields, stream=stream).finish(stream)

    def __call__(self, *fields: Any, dim: Any, full_exchange: bool = True, stream: Any = None) -> Any:
        pending = self.start(dim, *fields, stream=stream)
        if not full_exchange:
            return pending
        pending.finish(stream)
        return None

    # -- packing ------------------------------------------------------------------------------

    def _index(self, xp: Any, dim: str, kind: str, peer: int, local: np.ndarray) -> Any:
        if xp is np:
            return local
        key = (dim, kind, peer)
        if key not in self._device_index:
            self._device_index[key] = xp.asarray(local)
        return self._device_index[key]

    def _free_buffers(self, dim: str, arrays: list[Any], xp: Any) -> _CallBuffers:
        """The buffers of this kind of call (dimension, the fields' shapes, dtype), made at its first
        use; another set while an earlier call of the same kind is still unfinished."""
        dtypes = {a.dtype for a in arrays}
        if len(dtypes) > 1:
            kinds = sorted(map(str, dtypes))
            raise IcoforgeError(f"halo exchange over {dim}: fields of different dtypes ({', '.join(kinds)}) in one call")
        shapes = tuple(tuple(a.shape[1:]) for a in arrays)
        key = (dim, shapes, arrays[0].dtype, xp is np)
        for bufs in self._buffers.setdefault(key, []):
            if not bufs.busy:
                bufs.busy = True
                return bufs
        staged = xp is not np and not self.gpu_aware
        bufs = _CallBuffers.make(xp, staged, self.sends[dim], self.recvs[dim], shapes, arrays[0].dtype)
        self._buffers[key].append(bufs)
        return bufs


@dataclasses.dataclass
class _CallBuffers:
    """Send and receive buffers of one kind of exchange call. Each is one array holding a segment
    per neighbour (its MPI message), the segment the call's fields one after another, each as
    (points, *the field's other dimensions): packing is one gather per field and neighbour into
    its view, and a device buffer is one copy to its host buffer. Without staging (NumPy, or
    gpu-aware MPI) the host buffer is the device buffer."""

    send_device: Any
    send_host: Any
    recv_device: Any
    recv_host: Any
    send_fields: list[list[Any]]  # per neighbour (MpiHaloExchange.sends order), per field: its view
    recv_fields: list[list[Any]]
    send_messages: list[tuple[int, Any]]  # (peer, the segment of the host buffer MPI sends)
    recv_messages: list[tuple[int, Any]]
    busy: bool = True

    @classmethod
    def make(cls, xp: Any, staged: bool, sends: list, recvs: list, shapes: tuple, dtype: Any) -> _CallBuffers:
        widths = [math.prod(shape) for shape in shapes]
        send_size = sum(len(local) for _, local in sends) * sum(widths)
        recv_size = sum(len(local) for _, local in recvs) * sum(widths)
        send_device, recv_device = xp.empty(send_size, dtype), xp.empty(recv_size, dtype)
        # page-locked host memory: the copies are DMA transfers, with no driver staging copy
        send_host = _pinned(xp, send_size, dtype) if staged else send_device
        recv_host = _pinned(xp, recv_size, dtype) if staged else recv_device
        def field_views(buffer: Any, plan: list) -> list[list[Any]]:
            return [fields for _, fields in _segments(buffer, plan, shapes, widths)]

        def messages(buffer: Any, plan: list) -> list[tuple[int, Any]]:
            return [(peer, message) for (peer, _), (message, _) in zip(plan, _segments(buffer, plan, shapes, widths))]

        return cls(
            send_device, send_host, recv_device, recv_host,
            send_fields=field_views(send_device, sends), recv_fields=field_views(recv_device, recvs),
            send_messages=messages(send_host, sends), recv_messages=messages(recv_host, recvs),
        )  # fmt: skip


def _segments(buffer: Any, plan: list, shapes: tuple, widths: list[int]) -> list[tuple[Any, list[Any]]]:
    """(message, [field views]) per neighbour of `plan`, laid out in `buffer` as `_CallBuffers` says."""
    out, offset = [], 0
    for _, local in plan:
        n = len(local)
        message = buffer[offset : offset + n * sum(widths)]
        fields, column = [], 0
        for shape, width in zip(shapes, widths):
            fields.append(message[n * column : n * (column + width)].reshape((n, *shape)))
            column += width
        out.append((message, fields))
        offset += message.size
    return out


def _pinned(xp: Any, size: int, dtype: Any) -> np.ndarray:
    memory = xp.cuda.alloc_pinned_memory(max(1, size) * np.dtype(dtype).itemsize)
    return np.frombuffer(memory, dtype=dtype, count=size)


class _PhaseClock:
    """Adds each phase's seconds to `seconds` (a dict; None: timing off, and no synchronisations):
    `lap(phase)` waits for the device, then charges the time since the last lap to `phase`."""

    def __init__(self, seconds: dict[str, float] | None, xp: Any):
        self.seconds, self.xp = seconds, xp
        self.last = time.perf_counter()

    def lap(self, phase: str) -> None:
        if self.seconds is None:
            return
        if self.xp is not np:
            self.xp.cuda.runtime.deviceSynchronize()
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now


class _Pending:
    """icon4py's `ExchangeResult` of `MpiHaloExchange.start`."""

    def __init__(
        self, owner: MpiHaloExchange, name: str, arrays: list[Any], xp: Any, requests: list, bufs: _CallBuffers
    ):
        self.owner, self.name, self.arrays, self.xp = owner, name, arrays, xp
        self.requests, self.bufs = requests, bufs
        self.done = False

    def finish(self, stream: Any = None) -> None:
        if self.done:
            return
        from mpi4py import MPI

        owner, xp, bufs = self.owner, self.xp, self.bufs
        clock = _PhaseClock(owner.phase_seconds, xp)  # from here: the time between start and finish is the caller's
        MPI.Request.Waitall(self.requests)
        clock.lap("mpi_wait")
        if bufs.recv_host is not bufs.recv_device:
            bufs.recv_device.set(bufs.recv_host)
            clock.lap("to_device")
        for (peer, local), views in zip(owner.recvs[self.name], bufs.recv_fields):
            index = owner._index(xp, self.name, "recv", peer, local)
            for a, view in zip(self.arrays, views):
                a[index] = view
        if xp is not np:
            xp.cuda.runtime.deviceSynchronize()  # the halo is written and the buffers are free again
        clock.lap("unpack")
        bufs.busy = False
        self.done = True

    def is_ready(self) -> bool:
        if not self.done:
            self.finish()
        return True


def _namespace(array: Any) -> Any:
    if isinstance(array, np.ndarray):
        return np
    import cupy as cp

    return cp


class TimedExchange:
    """Any icon4py exchange runtime, with the seconds spent in its calls added up (`seconds`,
    `calls`; `reset()` between measurements)."""

    def __init__(self, inner: Any, sync: Any = None):
        self.inner = inner
        self.sync = sync or (lambda: None)
        self.seconds = 0.0
        self.calls = 0

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, 0
        if self.phases is not None:
            self.phases.clear()

    def time_phases(self, on: bool) -> bool:
        """Have the inner exchange time its phases (PHASES; it synchronises the device between
        them, so in a timing pass of its own) or stop; False when it cannot (GHEX, one rank)."""
        if not hasattr(self.inner, "phase_seconds"):
            return False
        self.inner.phase_seconds = {} if on else None
        return True

    @property
    def phases(self) -> dict[str, float] | None:
        """Seconds per phase since the last reset, while `time_phases(True)`; else None."""
        return getattr(self.inner, "phase_seconds", None)

    def exchange(self, dim: Any, *fields: Any, stream: Any = None) -> None:
        from icon4py.model.common.decomposition import definitions as decomposition

        self.sync()
        t0 = time.perf_counter()
        self.inner.exchange(dim, *fields, stream=decomposition.DEFAULT_STREAM if stream is None else stream)
        self.sync()
        self.seconds += time.perf_counter() - t0
        self.calls += 1

    def start(self, dim: Any, *fields: Any, stream: Any = None) -> Any:
        # split exchanges (start now, finish later) are timed as their start only
        self.sync()
        t0 = time.perf_counter()
        try:
            return self.inner.start(dim, *fields, stream=stream) if stream is not None else self.inner.start(dim, *fields)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1

    def __call__(self, *fields: Any, dim: Any, full_exchange: bool = True, stream: Any = None) -> Any:
        if full_exchange:
            return self.exchange(dim, *fields, stream=stream)
        return self.start(dim, *fields, stream=stream)

    def get_size(self) -> int:
        return self.inner.get_size()

    def my_rank(self) -> int:
        return self.inner.my_rank()


def make_exchange(kind: str, props: RankProperties, idx: LocalIndices, decomposition_info: Any, *, gpu: bool) -> tuple[Any, str]:
    """(exchange runtime, name of what was chosen) for `kind` in EXCHANGES."""
    if kind not in EXCHANGES:
        raise IcoforgeError(f"exchange {kind!r}: choose one of {', '.join(EXCHANGES)}")
    if props.comm_size == 1:
        from icon4py.model.common.decomposition import definitions as decomposition

        return decomposition.SingleNodeExchange(), "none (one rank)"
    why_not = ghex_available()
    if kind == "ghex" and why_not:
        raise IcoforgeError(f"--exchange ghex: {why_not}; --exchange mpi needs only mpi4py")
    if kind in ("ghex", "auto") and not why_not:
        from icon4py.model.common.decomposition import mpi_decomposition

        if gpu:
            import ghex

            if not ghex.__config__.get("gpu"):
                if kind == "ghex":
                    raise IcoforgeError("--exchange ghex with a GPU backend: this GHEX was built without GPU support "
                                        "(GHEX_USE_GPU=ON); --exchange mpi stages GPU buffers through the host")  # fmt: skip
                return MpiHaloExchange(props, idx), "mpi (ghex built without GPU support)"
        return mpi_decomposition.GHexMultiNodeExchange(
            mpi_decomposition.MPICommProcessProperties(props.comm), decomposition_info
        ), "ghex"
    return MpiHaloExchange(props, idx), "mpi" + (f" ({why_not})" if kind == "auto" else "")
