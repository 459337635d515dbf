"""Halo exchanges of the decomposed granule: GHEX (icon4py's) or plain mpi4py, timed.

icon4py's `SolveNonhydro` calls `exchange.exchange(dim, *fields, stream=...)` at five places of a
substep (vn and rho at edges after the predictor's horizontal part, w (and dwdz) after the
predictor, vn in the corrector, rho/exner/w at its end). Which runtime answers:

- "ghex": icon4py's `GHexMultiNodeExchange` (`mpi_decomposition.create_exchange`), GHEX's
  unstructured halo exchange over MPI, as icon4py runs distributed. Needs the `ghex` package
  (PyPI 0.9.0 is a source package: cmake, Boost headers, MPI; `scripts/ci/build_ghex.sh`). GPU
  buffers only with a GHEX built with GHEX_USE_GPU=ON.
- "mpi": `MpiHaloExchange` below, ours: the same halo (every non-owned point receives its owner's
  value), one message per neighbour rank and dimension with every field of the call packed
  (Isend/Irecv). NumPy buffers directly; CuPy buffers are packed on the device and staged through
  host memory (works without a CUDA-aware MPI), or sent from device memory with `gpu_aware=True`.
- "auto": ghex if it imports, else mpi.

`TimedExchange` wraps either and adds up the seconds spent inside the exchange calls (after a
device synchronisation on GPU backends, so a call does not absorb kernels still running).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from icoforge.errors import IcoforgeError
from icoforge.granule.decompose import HORIZONTAL, LocalIndices, RankProperties

EXCHANGES = ("auto", "ghex", "mpi")
_TAG = 23_000  # base MPI tag of our exchanges (one tag per dimension)


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
        requests, receive_buffers = [], []
        for peer, local in self.recvs[name]:
            buf = self._buffer(xp if (on_gpu and self.gpu_aware) else np, arrays, len(local))
            requests.append(self.comm.Irecv(buf, source=peer, tag=_TAG + list(HORIZONTAL).index(name)))
            receive_buffers.append((local, buf))
        for peer, local in self.sends[name]:
            packed = self._pack(xp, arrays, self._index(xp, name, "send", peer, local))
            if on_gpu and not self.gpu_aware:
                packed = xp.asnumpy(packed)
            elif on_gpu:
                xp.cuda.runtime.deviceSynchronize()
            requests.append(self.comm.Isend(packed, dest=peer, tag=_TAG + list(HORIZONTAL).index(name)))
            receive_buffers.append((None, packed))  # keeps the send buffer alive until the wait
        return _Pending(self, name, arrays, xp, requests, receive_buffers)

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

    @staticmethod
    def _columns(arrays: list[Any]) -> int:
        return sum(int(np.prod(a.shape[1:], dtype=np.int64)) for a in arrays)

    def _buffer(self, xp: Any, arrays: list[Any], points: int) -> Any:
        return xp.empty((points, self._columns(arrays)), dtype=arrays[0].dtype)

    def _pack(self, xp: Any, arrays: list[Any], index: Any) -> Any:
        parts = [a[index].reshape(index.shape[0], -1) for a in arrays]
        return xp.ascontiguousarray(xp.concatenate(parts, axis=1))

    def unpack(self, xp: Any, name: str, arrays: list[Any], peer_local: tuple[int, np.ndarray], buf: Any) -> None:
        peer, local = peer_local
        index = self._index(xp, name, "recv", peer, local)
        if xp is not np and isinstance(buf, np.ndarray):
            buf = xp.asarray(buf)
        col = 0
        for a in arrays:
            width = int(np.prod(a.shape[1:], dtype=np.int64))
            a[index] = buf[:, col : col + width].reshape((index.shape[0], *a.shape[1:]))
            col += width


class _Pending:
    """icon4py's `ExchangeResult` of `MpiHaloExchange.start`."""

    def __init__(self, owner: MpiHaloExchange, name: str, arrays: list[Any], xp: Any, requests: list, buffers: list):
        self.owner, self.name, self.arrays, self.xp = owner, name, arrays, xp
        self.requests, self.buffers = requests, buffers
        self.done = False

    def finish(self, stream: Any = None) -> None:
        if self.done:
            return
        from mpi4py import MPI

        MPI.Request.Waitall(self.requests)
        recvs = [b for b in self.buffers if b[0] is not None]
        for (peer, _), (local, buf) in zip(self.owner.recvs[self.name], recvs):
            self.owner.unpack(self.xp, self.name, self.arrays, (peer, local), buf)
        if self.xp is not np:
            self.xp.cuda.runtime.deviceSynchronize()
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
