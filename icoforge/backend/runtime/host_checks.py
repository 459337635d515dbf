"""The checks every generated host plan (codegen/host.py) calls before it launches: fields hold
what a kernel accesses, 32-bit indices do not overflow, fields that must not share memory do not,
the members of a stride set are laid out alike. A plan imports them from here; they raise the
errors a user sees (but StrideSetMismatch, which the program's callable answers with its
per-field-strides variant)."""

from __future__ import annotations

import numpy as np

from icoforge.backend.schedule.schedule import ScheduleError
from icoforge.errors import CallArgumentError, IcoforgeError

I32_MAX = 2**31 - 1


def _reach(view, ranges):
    """The largest element offset a kernel can form into the array of `view` over `ranges`."""
    return sum(max(abs(lo), abs(hi)) * abs(int(s)) for (lo, hi), s in zip(ranges, view[1:]))


def _as32(view):
    return (view[0], *(np.int32(s) for s in view[1:]))


def _idx32(kernel, name, view, ranges):
    """`view` with 32-bit strides for an index_bits=32 kernel, refused if an index could overflow."""
    largest = _reach(view, ranges)
    if largest > I32_MAX:
        raise ScheduleError(
            f"{kernel}: index_bits=32, but indices into {name} reach {largest:,} (> 2**31 - 1): use index_bits=64"
        )
    return _as32(view)


# --- stride sets (kernels with the schedule's stride_sets on; codegen/cuda.py `stride_sets`) -------


class StrideSetMismatch(CallArgumentError):
    """A call's field is not laid out as the other members of its stride set (or its contiguous
    dimension's stride is not 1). Raised by the host plan's prologue, before any launch: the
    program's callable (gpu.bind_program) then runs its per-field-strides variant. `field`: the
    field's name, `why`: what differs."""

    def __init__(self, program, field, why):
        super().__init__(f"{program}: field {field!r} {why}")
        self.program, self.field, self.why = program, field, why

    def __reduce__(self):  # pickled with its own arguments (the message is made from them)
        return (type(self), (self.program, self.field, self.why))


def _strides32(strides):
    return tuple(np.int32(s) for s in strides)


def _reach32(kernel, arrays):
    """An index_bits=32 kernel with stride sets: refused if an index into any array could
    overflow ((name, view, ranges) per array)."""
    for name, view, ranges in arrays:
        _idx32(kernel, name, view, ranges)


def _shared(program, arrays, unit=None):
    """The strides a stride set passes ((name, view) per member): the kernels address every member
    with the first one's, and with stride 1 along dimension `unit` ((index, name) or None), which
    they are not passed. A member laid out otherwise raises StrideSetMismatch (never addressed
    wrongly)."""
    first, view = arrays[0]
    strides = view[1:]
    for name, other in arrays:
        if name != first and other[1:] == strides:  # the common case: laid out as the first
            continue
        if unit is not None and other[1 + unit[0]] != 1:
            raise StrideSetMismatch(
                program, name, f"has stride {int(other[1 + unit[0]])} along {unit[1]}, not 1 (the stride set's kernels "
                f"take its {unit[1]} dimension contiguous, as GT4Py's allocators lay fields out)",
            )  # fmt: skip
        if other[1:] != strides:
            raise StrideSetMismatch(
                program, name, f"has strides {tuple(int(x) for x in other[1:])}, {first!r} of the same dims and dtype "
                f"{tuple(int(x) for x in strides)} (elements; the stride set's kernels take one set of strides for both)",
            )  # fmt: skip
    return strides if unit is None else strides[: unit[0]] + strides[unit[0] + 1 :]


def _require(kernel, name, dim, have, lo, hi):
    """The field must hold [lo, hi) along `dim` (as the C++ target's icf::require)."""
    if lo < hi and hi >= 0 and (lo < have[0] or hi > have[1]):
        raise IcoforgeError(f"{kernel}: field {name!r} covers {dim} [{have[0]}, {have[1]}) but the kernel accesses [{lo}, {hi})")


def _distinct(rt, program, fields, pairs):
    """Passes (name -> field) of which the pairs `pairs` must not share memory: copy forwarding
    and kernel fusion moved accesses of one before the other (the results would differ from
    GT4Py's). One sweep over the spans sorted by start: only overlapping neighbours are looked up."""
    spans = sorted(((lo, hi), name) for name, (lo, hi) in ((n, rt.span(f)) for n, f in fields.items()) if lo < hi)
    for ((lo, hi), _), ((olo, _), _) in zip(spans, spans[1:]):
        if olo < hi:  # sorted and non-empty: any overlap shows between neighbours
            _overlaps(program, spans, pairs)
            return


def _overlapping(spans):
    """The pairs of names whose spans (sorted by start) overlap."""
    for i, ((lo, hi), a) in enumerate(spans):
        for (olo, _), b in spans[i + 1:]:
            if olo >= hi:
                break
            yield a, b


def _overlaps(program, spans, pairs):
    """Some spans overlap: refuse the call if two of them form a pair."""
    for a, b in _overlapping(spans):
        if (a, b) in pairs or (b, a) in pairs:
            raise CallArgumentError(f"{program}: field {a!r} shares memory with {b!r}; pass distinct fields")


def _aliasing(rt, program, fields, views, refused, same_view):
    """As `_distinct` for `refused`; a pair of `same_view` (a field a kernel writes and one it reads
    only at the points it writes, schedule/access.kernel_aliasing) may share memory only as one
    view (same address and strides), which the GPU kernels then update in place as GT4Py's
    statement means; any other overlap of such a pair is refused."""
    spans = sorted(((lo, hi), name) for name, (lo, hi) in ((n, rt.span(f)) for n, f in fields.items()) if lo < hi)
    _overlaps(program, spans, refused)
    for a, b in _overlapping(spans):
        if ((a, b) in same_view or (b, a) in same_view) and tuple(views[a]) != tuple(views[b]):
            raise CallArgumentError(f"{program}: field {a!r} shares memory with {b!r} through another view "
                                    f"(a kernel writes one and reads the other); pass distinct fields or the same one")


def _points32(kernel, last):
    if last > I32_MAX:
        raise ScheduleError(f"{kernel}: index_bits=32, but thread indices reach {last:,} (> 2**31 - 1): use index_bits=64")


def _fits32(last, views_and_ranges):
    """index_bits="auto": may this call run the 32-bit kernel (thread and field indices < 2**31)?"""
    return last <= I32_MAX and all(_reach(v, r) <= I32_MAX for v, r in views_and_ranges)


def _statement_inputs(rt, program, outputs, inputs):
    """The views one statement lowered to several kernels reads its copied inputs through
    (access.StatementGroup): `inputs` (name -> (field, view)) as they are, or, where one shares
    memory with a field of `outputs`, a copy of its memory made now on the call's stream (its
    strides kept, so every stride set still holds), alive until the call ends. A call that copied
    is not replayed (the copy is this call's); no copy inside a CUDA graph capture."""
    spans = [s for s in (rt.span(f) for f in outputs) if s[0] < s[1]]
    views = {}
    for name, (field, view) in inputs.items():
        lo, hi = rt.span(field)
        if lo < hi and any(olo < hi and lo < ohi for olo, ohi in spans):
            view = _copied_view(rt, program, name, lo, hi, view)
        views[name] = view
    return views


def _copied_view(rt, program, name, lo, hi, view):
    import ctypes

    buf = rt.cp.empty(hi - lo, dtype=np.uint8)
    if rt.cp is np:  # the CPU emulation
        ctypes.memmove(buf.ctypes.data, lo, hi - lo)
    else:
        from icoforge.backend.runtime.graphs import capturing

        stream = rt.stream if rt.stream is not None else rt.cp.cuda.get_current_stream()
        if capturing(stream):
            raise CallArgumentError(f"{program}: field {name!r} shares memory with an output of its statement; "
                                    f"it is copied per call, which a CUDA graph capture cannot hold: pass distinct fields")
        runtime = rt.cp.cuda.runtime
        runtime.memcpyAsync(buf.data.ptr, lo, hi - lo, runtime.memcpyDeviceToDevice, stream.ptr)
    rt._call_buffers.append(buf)
    rt.copied = True
    return (np.uint64(rt._ptr(buf) + int(view[0]) - lo), *view[1:])
