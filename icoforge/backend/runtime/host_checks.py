"""The checks every generated host plan (codegen/host.py) calls before it launches: fields hold
what a kernel accesses, 32-bit indices do not overflow, fields that must not share memory do not.
A plan imports them from here; they raise the errors a user sees."""

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


def _overlaps(program, spans, pairs):
    """Some spans overlap: refuse the call if two of them form a pair."""
    for i, ((lo, hi), a) in enumerate(spans):
        for (olo, _), b in spans[i + 1:]:
            if olo >= hi:
                break
            if (a, b) in pairs or (b, a) in pairs:
                raise CallArgumentError(f"{program}: field {a!r} shares memory with {b!r}; pass distinct fields")


def _aliasing(rt, program, fields, views, refused, same_view):
    """As `_distinct` for `refused`; a pair of `same_view` (a field a kernel writes and one it reads
    only at the points it writes, schedule/access.kernel_aliasing) may share memory only as one
    view (same address and strides), which the GPU kernels then update in place as GT4Py's
    statement means; any other overlap of such a pair is refused."""
    spans = sorted(((lo, hi), name) for name, (lo, hi) in ((n, rt.span(f)) for n, f in fields.items()) if lo < hi)
    for i, ((lo, hi), a) in enumerate(spans):
        for (olo, _), b in spans[i + 1:]:
            if olo >= hi:
                break
            if (a, b) in refused or (b, a) in refused:
                raise CallArgumentError(f"{program}: field {a!r} shares memory with {b!r}; pass distinct fields")
            if ((a, b) in same_view or (b, a) in same_view) and tuple(views[a]) != tuple(views[b]):
                raise CallArgumentError(f"{program}: field {a!r} shares memory with {b!r} through another view "
                                        f"(a kernel writes one and reads the other); pass distinct fields or the same one")


def _points32(kernel, last):
    if last > I32_MAX:
        raise ScheduleError(f"{kernel}: index_bits=32, but thread indices reach {last:,} (> 2**31 - 1): use index_bits=64")


def _fits32(last, views_and_ranges):
    """index_bits="auto": may this call run the 32-bit kernel (thread and field indices < 2**31)?"""
    return last <= I32_MAX and all(_reach(v, r) <= I32_MAX for v, r in views_and_ranges)
