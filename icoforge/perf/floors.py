"""Three compulsory-byte floors of a dycore step: per kernel, per program call, per substep.

The same element-level rule at three scopes (a kernel, a program call, a substep = one
`SolveNonhydro.time_step`); what differs is which accesses share a scope:

  * an element is **read** once in a scope when its first access there is a read (its value comes
    from before the scope); an element the scope writes first and reads afterwards is not read;
  * an element is **written** once in a scope when the scope writes it, except:
    - a program's **temporaries** (allocated by the program call, dead when it returns) are never
      written at the program and substep floors: produced and consumed inside the call, they
      need not reach memory at all (at the kernel floor they count like any field);
    - at the substep floor, an element of a buffer that is **internal** to the dycore (not
      reachable from `time_step`'s arguments: solver-owned intermediate fields) is written only
      when some recorded substep reads it before writing it, i.e. when its value is carried
      from one substep to another. A buffer that every substep overwrites before reading is a
      substep temporary. Buffers of `time_step`'s arguments (prognostic, diagnostic, prep_adv
      states) are the step's interface: their writes always count. Without interface
      information every buffer counts as interface (no write is dropped).
  * neighbour tables are read-only buffers like any other (once per scope).

The kernel floor is `ProgramCost.bytes` summed over the executed kernels of every call (what the
granule roofline has always reported): each kernel moves its own reads and writes.

What an element is: fields are identified by buffer, not by parameter name. A buffer is the
allocation a GT4Py field's array views (NumPy: the root of its `.base` chain; CuPy: the memory
block), its dtype and strides; a view (a slice) is placed in the allocation's index frame by its
offset from the allocation start. Two views with the same strides that overlap share elements; a
view with other strides (a transpose) is a buffer of its own (its elements may then count twice).
The index ranges touched come from the byte model (`model.Traffic.box`): per dimension the range
a kernel reads or writes, the whole extent for neighbour access. Elements are then counted
exactly over the union of those boxes (coordinates compressed to the boxes' edges).

Not modelled: host code reading or writing fields between program calls (icon4py swaps state
references, it does not copy), programs not compiled by icoforge (no kernel IR: listed, in no
floor), and caches (a floor is traffic to memory with an infinitely small on-chip store except for
what the scope keeps: the ideal fused code of that scope).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from icoforge.perf.model import ITEMSIZE, ProgramCost

Box = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Touch:
    """One kernel's access to one buffer: the index box in the buffer's frame."""

    buffer: Hashable
    mode: str  # "read" | "write"
    box: Box
    itemsize: int


@dataclasses.dataclass(frozen=True)
class Bytes:
    read: int = 0
    written: int = 0

    @property
    def total(self) -> int:
        return self.read + self.written

    def __add__(self, other: Bytes) -> Bytes:
        return Bytes(self.read + other.read, self.written + other.written)


# --- buffer identity ------------------------------------------------------------------------------


def _pointers(arr: Any) -> tuple[int, int] | None:
    """(data pointer of the view, start of its allocation) of a NumPy or CuPy array."""
    if hasattr(arr, "__cuda_array_interface__") and hasattr(arr, "data") and hasattr(arr.data, "mem"):
        return int(arr.data.ptr), int(arr.data.mem.ptr)
    if isinstance(arr, np.ndarray):
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        return int(arr.__array_interface__["data"][0]), int(root.__array_interface__["data"][0])
    return None


def _offset(delta: int, strides: tuple[int, ...]) -> tuple[int, ...] | None:
    """Index offset of `delta` bytes in the frame of `strides` (largest stride first); None when
    it does not decompose (negative strides, a remainder)."""
    if delta < 0 or any(s <= 0 for s in strides):
        return None
    out = [0] * len(strides)
    for d in sorted(range(len(strides)), key=lambda d: -strides[d]):
        out[d], delta = divmod(delta, strides[d])
    return tuple(out) if delta == 0 else None


def buffer_frame(value: Any) -> tuple[Hashable, tuple[int, ...], tuple[int, ...]] | None:
    """(buffer key, offset of index 0 of the view in the buffer's frame, domain start per
    dimension) of a GT4Py field or array; None for anything else."""
    arr = getattr(value, "ndarray", value)
    ptrs = _pointers(arr)
    if ptrs is None or not getattr(arr, "ndim", 0):
        return None
    starts = tuple(int(r.start) for r in value.domain.ranges) if hasattr(value, "domain") else (0,) * arr.ndim
    strides = tuple(int(s) for s in arr.strides)
    dtype = str(arr.dtype)
    ptr, alloc = ptrs
    off = _offset(ptr - alloc, strides)
    if off is None:  # not placeable in its allocation's frame: a buffer of its own
        return ("view", ptr, dtype, strides, tuple(arr.shape)), (0,) * arr.ndim, starts
    return ("buffer", alloc, dtype, strides), off, starts


def interface_buffers(*objs: Any, depth: int = 3) -> set[Hashable]:
    """Buffer keys of every GT4Py field reachable from `objs` (dataclasses, objects' attributes,
    tuples, lists, dicts) within `depth` levels: `time_step`'s states."""
    out: set[Hashable] = set()
    seen: set[int] = set()

    def visit(o: Any, d: int) -> None:
        if o is None or id(o) in seen or isinstance(o, (str, bytes, int, float, bool)):
            return
        seen.add(id(o))
        if hasattr(o, "ndarray") and hasattr(o, "domain"):
            frame = buffer_frame(o)
            if frame is not None:
                out.add(frame[0])
            return
        if d <= 0:
            return
        if isinstance(o, Mapping):
            children: Iterable[Any] = o.values()
        elif isinstance(o, (tuple, list)):
            children = o
        elif dataclasses.is_dataclass(o):
            children = (getattr(o, f.name, None) for f in dataclasses.fields(o))
        else:
            children = getattr(o, "__dict__", {}).values()
        for c in children:
            visit(c, d - 1)

    for o in objs:
        visit(o, depth)
    return out


# --- touches of one call --------------------------------------------------------------------------


def call_touches(
    program_ir: Any, args: Mapping[str, Any], offset_provider: Mapping[str, Any], cost: ProgramCost, call_id: Hashable,
) -> list[list[Touch]]:  # fmt: skip
    """Per executed kernel of one call (in execution order): its reads, then its writes, as
    touches of buffers. Temporaries are keyed by ("temporary", call_id, name)."""
    fields = {p.name: p for p in program_ir.params if hasattr(p, "dims")}
    temps = {t.name: t for t in program_ir.temporaries}
    tables = {t.name: t for t in program_ir.tables}
    frames: dict[str, tuple[Hashable, tuple[int, ...], tuple[int, ...]]] = {}

    def place(name: str, box: Box) -> tuple[Hashable, Box]:
        if name in temps:
            return ("temporary", call_id, name), box
        if name not in frames:
            value = offset_provider.get(name) if name in tables else args.get(name)
            frame = buffer_frame(value) if value is not None else None
            frames[name] = frame or (("argument", call_id, name), (0,) * len(box), (0,) * len(box))
        key, off, starts = frames[name]
        return key, tuple((lo - s + o, hi - s + o) for (lo, hi), s, o in zip(box, starts, off))

    def itemsize(name: str) -> int:
        dtype = tables[name].dtype if name in tables else (temps[name] if name in temps else fields[name]).dtype
        return ITEMSIZE[dtype]

    out = []
    for k in cost.kernels:
        if not k.executed:
            continue
        touches = []
        for mode in ("read", "write"):  # a kernel reads a point's inputs before it writes it
            for t in k.traffic:
                if (t.mode == "table" and mode == "read") or t.mode == mode:
                    key, box = place(t.name, t.box)
                    touches.append(Touch(key, mode, box, itemsize(t.name)))
        out.append(touches)
    return out


# --- the element rule -----------------------------------------------------------------------------


def _grid(boxes: Sequence[Box]) -> list[np.ndarray]:
    ndim = len(boxes[0])
    return [np.unique([v for b in boxes for v in b[d]]) for d in range(ndim)]


def _mask(box: Box, edges: list[np.ndarray]) -> np.ndarray:
    """Cells of the compressed grid inside `box` (outer product of per-dimension masks)."""
    m = np.ones((), dtype=bool)
    for (lo, hi), e in zip(box, edges):
        m = np.multiply.outer(m, (e[:-1] >= lo) & (e[1:] <= hi))
    return m


def _volumes(edges: list[np.ndarray]) -> np.ndarray:
    v = np.ones((), dtype=np.int64)
    for e in edges:
        v = np.multiply.outer(v, np.diff(e).astype(np.int64))
    return v


def floor_bytes(
    scopes: Sequence[Sequence[Touch]], scratch: Callable[[Hashable], bool] = lambda b: False,
    interface: Callable[[Hashable], bool] = lambda b: True,
) -> list[Bytes]:  # fmt: skip
    """Bytes each scope must move by the element rule (module docstring): `scratch(buffer)`:
    its writes never count (program temporaries); `interface(buffer)` False: its writes count
    only on elements some scope reads before writing."""
    out = [Bytes()] * len(scopes)
    for per_scope in floor_bytes_by_buffer(scopes, scratch, interface).values():
        for s, b in per_scope.items():
            out[s] = out[s] + b
    return out


def floor_bytes_by_buffer(
    scopes: Sequence[Sequence[Touch]], scratch: Callable[[Hashable], bool] = lambda b: False,
    interface: Callable[[Hashable], bool] = lambda b: True,
) -> dict[Hashable, dict[int, Bytes]]:  # fmt: skip
    """`floor_bytes` per buffer: buffer -> scope index -> bytes (scopes that touch it)."""
    per_buffer: dict[Hashable, list[tuple[int, Touch]]] = {}
    for s, touches in enumerate(scopes):
        for t in touches:
            if all(hi > lo for lo, hi in t.box):
                per_buffer.setdefault(t.buffer, []).append((s, t))
    out: dict[Hashable, dict[int, Bytes]] = {}
    for buffer, touches in per_buffer.items():
        dims = {len(t.box) for _, t in touches}
        if len(dims) != 1:
            raise ValueError(f"buffer {buffer!r} touched with {sorted(dims)} dimensions")
        itemsize = touches[0][1].itemsize
        edges = _grid([t.box for _, t in touches])
        vol = _volumes(edges)
        first_read, wrote = {}, {}
        for s, group in itertools.groupby(touches, key=lambda x: x[0]):
            seen = np.zeros(vol.shape, dtype=bool)
            fr = np.zeros(vol.shape, dtype=bool)
            w = np.zeros(vol.shape, dtype=bool)
            for _, t in group:
                m = _mask(t.box, edges)
                if t.mode == "read":
                    fr |= m & ~seen
                else:
                    w |= m
                seen |= m
            first_read[s], wrote[s] = fr, w
        carried = np.logical_or.reduce(list(first_read.values())) if not interface(buffer) else None
        mine = out[buffer] = {}
        for s in first_read:
            w = wrote[s] if carried is None else wrote[s] & carried
            written = 0 if scratch(buffer) else int(vol[w].sum()) * itemsize
            mine[s] = Bytes(int(vol[first_read[s]].sum()) * itemsize, written)
    return out


def is_temporary(buffer: Hashable) -> bool:
    return isinstance(buffer, tuple) and bool(buffer) and buffer[0] == "temporary"


# --- a dycore step --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FloorCall:
    """One recorded program call: what the floors need of it."""

    program: str  # display name
    program_ir: Any
    args: Mapping[str, Any]  # parameter name -> value (GT4Py fields, scalars)
    offset_provider: Mapping[str, Any]
    cost: ProgramCost
    substep: int  # index of the `time_step` call it belongs to


@dataclasses.dataclass(frozen=True)
class ProgramFloor:
    """One program's kernel and program floors per dycore step."""

    program: str
    calls: float  # per dycore step
    kernel_bytes: float
    program_bytes: float

    @property
    def gap(self) -> float:
        """What fusing the program's kernels could still save per step."""
        return self.kernel_bytes - self.program_bytes


@dataclasses.dataclass(frozen=True)
class BufferFloor:
    """One buffer's bytes per dycore step at each floor (a program's temporary: all its calls)."""

    names: tuple[str, ...]  # parameter names it was passed as ("name (temporary of program)")
    interface: bool | None  # a buffer of `time_step`'s arguments (None: unknown or a temporary)
    kernel: float
    program: float
    substep: float


@dataclasses.dataclass(frozen=True)
class StepFloors:
    """The three floors in bytes per dycore step (averaged over `steps` recorded steps)."""

    steps: int
    substeps: int
    kernel: float
    program: float
    substep: float
    programs: tuple[ProgramFloor, ...]  # sorted by gap, largest first
    interface_known: bool  # False: every buffer's writes counted at the substep floor
    buffers: tuple[BufferFloor, ...] = ()  # largest kernel-floor bytes first

    def ms(self, bytes_per_s: float) -> dict[str, float]:
        return {k: 1e3 * getattr(self, k) / bytes_per_s for k in ("kernel", "program", "substep")}

    def to_json(self, bytes_per_s: float) -> dict[str, Any]:
        """What benchmarks/granule-latest.json holds: `floors_ms` at `bytes_per_s`, the bytes, the
        bandwidth; and per program its calls, kernel and program floor bytes per dycore step (the
        greenline's per-program table divides them by the measured time)."""
        return {
            "floors_ms": {k: round(v, 4) for k, v in self.ms(bytes_per_s).items()},
            "floors_bytes": {k: int(round(getattr(self, k))) for k in ("kernel", "program", "substep")},
            "floors_bandwidth_GBps": round(bytes_per_s / 1e9, 2),
            "programs": {
                f.program: {"calls": f.calls, "kernel_bytes": int(round(f.kernel_bytes)), "program_bytes": int(round(f.program_bytes))}
                for f in self.programs
            },
        }


def step_floors(calls: Sequence[FloorCall], steps: int, interface: set[Hashable] | None = None) -> StepFloors:
    """Floors of `steps` recorded dycore steps (`calls` in order, each tagged with its substep),
    per dycore step; `interface`: buffer keys of `time_step`'s arguments (None: unknown)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    touches = [call_touches(c.program_ir, c.args, c.offset_provider, c.cost, n) for n, c in enumerate(calls)]
    kernel_bytes = [c.cost.bytes for c in calls]
    program_bytes = [b.total for b in floor_bytes([[t for k in ks for t in k] for ks in touches], is_temporary)]
    substeps = sorted({c.substep for c in calls})
    by_substep = {s: [] for s in substeps}
    for c, ks in zip(calls, touches):
        by_substep[c.substep] += [t for k in ks for t in k]
    inside = (lambda b: True) if interface is None else (lambda b: b in interface)
    substep_by_buffer = floor_bytes_by_buffer([by_substep[s] for s in substeps], is_temporary, inside)
    substep_bytes = [Bytes()] * len(substeps)
    for per_scope in substep_by_buffer.values():
        for s, b in per_scope.items():
            substep_bytes[s] = substep_bytes[s] + b
    buffers = _buffer_floors(calls, touches, substep_by_buffer, steps, interface)

    rows: dict[str, list[float]] = {}
    for c, kb, pb in zip(calls, kernel_bytes, program_bytes):
        r = rows.setdefault(c.program, [0, 0, 0])
        r[0] += 1
        r[1] += kb
        r[2] += pb
    programs = sorted(
        (ProgramFloor(p, n / steps, kb / steps, pb / steps) for p, (n, kb, pb) in rows.items()),
        key=lambda r: (-r.gap, r.program),
    )
    return StepFloors(
        steps=steps, substeps=len(substeps), kernel=sum(kernel_bytes) / steps, program=sum(program_bytes) / steps,
        substep=sum(b.total for b in substep_bytes) / steps, programs=tuple(programs),
        interface_known=interface is not None, buffers=buffers,
    )  # fmt: skip


def _buffer_floors(
    calls: Sequence[FloorCall], touches: list[list[list[Touch]]], substep_by_buffer: dict[Hashable, dict[int, Bytes]],
    steps: int, interface: set[Hashable] | None,
) -> tuple[BufferFloor, ...]:  # fmt: skip
    """Per buffer (temporaries grouped per program and name): the floors' shares."""
    names: dict[Hashable, set[str]] = {}
    group: dict[Hashable, Hashable] = {}  # buffer key -> row key
    for n, c in enumerate(calls):
        for name in {t.name for k in c.cost.kernels if k.executed for t in k.traffic}:
            if name in {t.name for t in c.program_ir.temporaries}:
                group[("temporary", n, name)] = row = ("temporary", c.program, name)
                names.setdefault(row, set()).add(f"{name} (temporary of {c.program})")
                continue
            value = c.offset_provider.get(name) if name in {t.name for t in c.program_ir.tables} else c.args.get(name)
            frame = buffer_frame(value) if value is not None else None
            key = frame[0] if frame else ("argument", n, name)
            group[key] = key
            names.setdefault(key, set()).add(name)
    acc: dict[Hashable, list[float]] = {}

    def add(per_buffer: dict[Hashable, dict[int, Bytes]], slot: int) -> None:
        for key, per_scope in per_buffer.items():
            acc.setdefault(group.get(key, key), [0.0, 0.0, 0.0])[slot] += sum(b.total for b in per_scope.values())

    add(floor_bytes_by_buffer([k for ks in touches for k in ks]), 0)  # one scope per kernel
    add(floor_bytes_by_buffer([[t for k in ks for t in k] for ks in touches], is_temporary), 1)
    add(substep_by_buffer, 2)
    rows = [
        BufferFloor(tuple(sorted(names.get(key, {repr(key)}))),
                    None if interface is None or is_temporary(key) else key in interface, *(v / steps for v in b))
        for key, b in acc.items()
    ]  # fmt: skip
    return tuple(sorted(rows, key=lambda r: (-r.kernel, r.names)))


def call_floors(program_ir: Any, args: Mapping[str, Any], offset_provider: Mapping[str, Any], cost: ProgramCost) -> tuple[int, int]:
    """(kernel floor, program floor) in bytes of one call (`icoforge roofline PROGRAM`)."""
    touches = call_touches(program_ir, args, offset_provider, cost, 0)
    (b,) = floor_bytes([[t for k in touches for t in k]], is_temporary)
    return cost.bytes, b.total


# --- Markdown -------------------------------------------------------------------------------------


def buffers_markdown(f: StepFloors, top: int = 30) -> str:
    """The `top` buffers by kernel-floor bytes: what each floor keeps of them."""
    lines = [
        "| buffer (passed as) | interface | kernel MB | program MB | substep MB |",
        "|---|---|---:|---:|---:|",
    ]
    for b in f.buffers[:top] if top else f.buffers:
        iface = {True: "yes", False: "no", None: "–"}[b.interface]
        names = ", ".join(b.names[:4]) + (f" (+{len(b.names) - 4})" if len(b.names) > 4 else "")
        lines.append(f"| {names} | {iface} | {b.kernel / 1e6:.4g} | {b.program / 1e6:.4g} | {b.substep / 1e6:.4g} |")
    return "\n".join(lines)


def markdown(f: StepFloors, bytes_per_s: float, top: int = 0) -> str:
    """The three floors, then per program kernel vs program floor sorted by the gap."""
    ms = f.ms(bytes_per_s)
    lines = [
        "| floor | MB per dycore step | ms at copy bandwidth | of kernel floor |",
        "|---|---:|---:|---:|",
    ]
    for key, what in (("kernel", "per kernel"), ("program", "per program call"), ("substep", "per substep")):
        b = getattr(f, key)
        lines.append(f"| {what} | {b / 1e6:.4g} | {ms[key]:.4g} | {100 * b / f.kernel if f.kernel else 0:.1f} % |")
    rows = f.programs[:top] if top else f.programs
    lines += [
        "",
        "| program | calls/step | kernel floor MB | program floor MB | gap MB | gap ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.program} | {r.calls:g} | {r.kernel_bytes / 1e6:.4g} | {r.program_bytes / 1e6:.4g} | "
        f"{r.gap / 1e6:.4g} | {1e3 * r.gap / bytes_per_s:.4g} |"
        for r in rows
    ]
    return "\n".join(lines)


# --- producer -> consumer pairs inside programs (candidates for intra-program fusion) -------------


@dataclasses.dataclass(frozen=True)
class FusionPair:
    """Kernel `consumer` reads field `field` that kernel `producer` of the same call wrote last."""

    program: str
    producer: str
    consumer: str
    field: str
    access: str  # "point" (same point), "column" (same column, other levels), "neighbour" (through a table)
    temporary: bool
    calls: float  # per dycore step
    saved_bytes: float  # per dycore step: the consumer's read, plus the producer's write of a temporary read once


def _access_kind(accs: Sequence[Any], dims: Sequence[str], kinds: Mapping[str, str]) -> str | None:
    out = "point"
    for a, d in zip(accs, dims):
        if kinds.get(d) == "local":
            continue
        if a is None or a.kind == "const":
            return None
        if a.kind == "table":
            return "neighbour"
        if a.kind == "k" and (a.lo, a.hi) != (0, 0):
            out = "column"
    return out


def fusion_pairs(calls: Sequence[FloorCall], steps: int) -> list[FusionPair]:
    """Every producer -> consumer pair of the recorded calls with the bytes fusing that pair alone
    would save (the consumer no longer reads what the producer wrote; a temporary with a single
    consumer is no longer written either), summed per dycore step, largest saving first. Pairs
    overlap (one producer, several consumers): their savings do not add up to a floor. A
    "neighbour" pair needs the producer recomputed per neighbour (compute_inline) to save it."""
    from icoforge.perf.model import read_accesses

    acc: dict[tuple, list[float]] = {}
    kinds_memo: dict[tuple[int, str], dict[str, Any]] = {}
    for c in calls:
        pir, kinds = c.program_ir, dict(c.program_ir.dim_kinds)
        temps = {t.name for t in pir.temporaries}
        kernels = {k.name: k for k in pir.kernels()}
        ran = [k for k in c.cost.kernels if k.executed]
        readers: dict[str, int] = {}
        for kc in ran:
            for t in kc.traffic:
                if t.mode == "read":
                    readers[t.name] = readers.get(t.name, 0) + 1
        last_writer: dict[str, Any] = {}
        for kc in ran:
            key = (id(pir), kc.name)
            if key not in kinds_memo:
                kinds_memo[key] = read_accesses(kernels[kc.name], pir)
            reads = {t.name: t for t in kc.traffic if t.mode == "read"}
            for name, t in reads.items():
                producer = last_writer.get(name)
                if producer is None:
                    continue
                kind = _access_kind(kinds_memo[key][name], pir.field(name).dims, kinds)
                if kind is None:
                    continue
                write = next(w for w in producer.traffic if w.mode == "write" and w.name == name)
                # only what the producer wrote comes from it; the rest the consumer still reads
                both = math.prod(max(0, min(r[1], w[1]) - max(r[0], w[0])) for r, w in zip(t.box, write.box))
                single = name in temps and readers[name] == 1
                saved = both * (t.bytes // t.elements if t.elements else 0) + (write.bytes if single else 0)
                a = acc.setdefault((c.program, producer.name, kc.name, name, kind, name in temps), [0, 0.0])
                a[0] += 1
                a[1] += saved
            for t in kc.traffic:
                if t.mode == "write":
                    last_writer[t.name] = kc
    pairs = [FusionPair(p, a, b, f, kind, temp, n / steps, s / steps) for (p, a, b, f, kind, temp), (n, s) in acc.items()]
    return sorted(pairs, key=lambda x: (-x.saved_bytes, x.program, x.producer, x.consumer, x.field))


def pairs_markdown(pairs: Sequence[FusionPair], bytes_per_s: float, top: int = 25) -> str:
    """The `top` pairs by bytes saved, then the totals per access kind."""
    lines = [
        "| program | producer | consumer | field | access | temporary | MB saved/step | ms at copy bandwidth |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    for p in pairs[:top] if top else pairs:
        lines.append(
            f"| {p.program} | `{p.producer}` | `{p.consumer}` | {p.field} | {p.access} | {'yes' if p.temporary else 'no'} | "
            f"{p.saved_bytes / 1e6:.4g} | {1e3 * p.saved_bytes / bytes_per_s:.4g} |"
        )
    lines += ["", "| access | pairs | MB saved/step | ms at copy bandwidth |", "|---|---:|---:|---:|"]
    for kind in ("point", "column", "neighbour"):
        sel = [p for p in pairs if p.access == kind]
        b = sum(p.saved_bytes for p in sel)
        lines.append(f"| {kind} | {len(sel)} | {b / 1e6:.4g} | {1e3 * b / bytes_per_s:.4g} |")
    return "\n".join(lines)
