"""Run under `mpirun -n 2` by tests/granule/test_ranks.py: icon4py's decomposition of R2B3 and our
halo exchanges, without compiling anything.

Checks, on every rank: the partition splits every dimension's points into owners (gathered owned
global indices are a permutation of the global ones); after an exchange every halo point holds
its owner's value, for NumPy buffers and for device-like buffers (a stand-in namespace with
CuPy's calls, so the staging path of GPU buffers runs on the CPU), twice (the second round reuses
the buffers); the phases an exchange times; with GHEX when it is installed. Prints one line
`RESULT {json}` on rank 0.
"""

import json
import sys
import types

import numpy as np

from icoforge.granule import decompose, halo_exchange
from icoforge.grids import load_grid


class FakeDevice(types.SimpleNamespace):
    """CuPy's namespace as the exchange uses it, on host memory: counts synchronisations, host <->
    device copies and pinned allocations, so the test sees the staging happen, and how often."""

    def __init__(self):
        self.syncs = 0
        self.copies = 0
        self.pinned = 0
        super().__init__(
            take=np.take,
            empty=lambda size, dtype: DeviceArray(np.empty(size, dtype), self),
            cuda=types.SimpleNamespace(
                runtime=types.SimpleNamespace(deviceSynchronize=self._sync), alloc_pinned_memory=self._pinned
            ),
        )

    def _sync(self):
        self.syncs += 1

    def _pinned(self, nbytes):
        self.pinned += 1
        return bytearray(nbytes)

    def asarray(self, a):
        self.copies += 1
        return DeviceArray(np.array(a), self)


class DeviceArray(np.ndarray):
    """A device array: copies to and from the host (CuPy's `get(out=)`, `set`) are counted."""

    def __new__(cls, a, device):
        out = np.asarray(a).view(cls)
        out.owner = device
        return out

    def __array_finalize__(self, obj):
        self.owner = getattr(obj, "owner", None)

    def get(self, out):
        assert not isinstance(out, DeviceArray)
        self.owner.copies += 1
        out[...] = self
        return out

    def set(self, host):
        assert not isinstance(host, DeviceArray)
        self.owner.copies += 1
        self[...] = host


def main() -> None:
    from icon4py.model.common import dimension as dims

    props = decompose.mpi_world()
    method = sys.argv[1] if len(sys.argv) > 1 else "metis"
    grid = load_grid("R2B3", levels=4, show_progress=False)
    part = decompose.cell_partition(decompose.global_c2e2c(grid), props.comm_size, method) if props.rank == 0 else None
    part = props.comm.bcast(part)
    manager = decompose.load_local_grid(grid, props, part)
    idx = decompose.LocalIndices.from_decomposition(manager.decomposition_info)
    sizes = {"CellDim": grid.num_cells, "EdgeDim": grid.num_edges, "VertexDim": grid.num_vertices}
    result = {"sizes": idx.sizes(), "partition": True, "numpy": True, "device": True, "ghex": None}
    for name, n in sizes.items():
        owned = props.comm.gather(idx.global_index[name][idx.owned[name]], root=0)
        if props.rank == 0:
            result["partition"] &= bool(np.array_equal(np.sort(np.concatenate(owned)), np.arange(n)))

    def poisoned(name):
        g = idx.global_index[name].astype(float)
        a = np.stack([g, 2 * g + 1, -g], axis=1)  # (points, levels)
        b = g.copy()
        a[~idx.owned[name]] = np.nan
        b[~idx.owned[name]] = np.nan
        return g, a, b

    def check(g, a, b):
        return bool(np.array_equal(a[:, 0], g) and np.array_equal(a[:, 1], 2 * g + 1) and np.array_equal(b, g))

    ours = halo_exchange.MpiHaloExchange(props, idx)
    fake = FakeDevice()
    original = halo_exchange._namespace
    halo_exchange._namespace = lambda arr: fake if isinstance(arr, DeviceArray) else np
    calls = []  # per device exchange: (host <-> device copies, pinned allocations) it made
    try:
        for repeat in range(2):  # the second round reuses the first round's buffers
            for name in sizes:
                g, a, b = poisoned(name)
                ours.exchange(getattr(dims, name), a, b)
                result["numpy"] &= check(g, a, b)
                g, a, b = poisoned(name)
                a, b = DeviceArray(a, fake), DeviceArray(b, fake)
                copies, pinned = fake.copies, fake.pinned
                ours.exchange(getattr(dims, name), a, b)
                calls.append((fake.copies - copies, fake.pinned - pinned))
                result["device"] &= check(g, np.asarray(a), np.asarray(b))
        # phase timing: every phase of the staged path, only pack/wait/unpack without staging
        ours.phase_seconds = {}
        g, a, b = poisoned("EdgeDim")
        ours.exchange(dims.EdgeDim, DeviceArray(a, fake), DeviceArray(b, fake))
        result["phases_device"] = dict(ours.phase_seconds)
        ours.phase_seconds = {}
        ours.exchange(dims.EdgeDim, a, b)
        result["phases_numpy"] = dict(ours.phase_seconds)
    finally:
        halo_exchange._namespace = original
    result["device_syncs"], result["device_copies"], result["device_calls"] = fake.syncs, fake.copies, calls
    if halo_exchange.ghex_available() is None:
        ghex, used = halo_exchange.make_exchange("ghex", props, idx, manager.decomposition_info, gpu=False)
        result["ghex"] = used == "ghex"
        for name in sizes:
            g, a, b = poisoned(name)
            fa, fb = (_as_field(x, getattr(dims, name)) for x in (a, b))
            ghex.exchange(getattr(dims, name), fa, fb)
            result["ghex"] &= check(g, fa.asnumpy(), fb.asnumpy())
    flags = props.comm.gather(result, root=0)
    if props.rank == 0:
        merged = dict(flags[0])
        for key in ("partition", "numpy", "device", "ghex"):
            values = [f[key] for f in flags if f[key] is not None]
            merged[key] = all(values) if values else None
        merged["sizes"] = [f["sizes"] for f in flags]
        print("RESULT " + json.dumps(merged), flush=True)


def _as_field(a, dim):
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    return gtx.as_field((dim, dims.KDim) if a.ndim == 2 else (dim,), np.ascontiguousarray(a))


if __name__ == "__main__":
    main()
