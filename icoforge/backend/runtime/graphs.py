"""A replayed call's launches as one CUDA graph (ICOFORGE_HOST_GRAPHS), with independent kernels as
parallel branches of it (ICOFORGE_STREAMS; issue 17 items 4 and 5). Used by gpu.Runtime.

Why a graph is the call: the runtime replays a call only when its field objects, scalars and offset
provider are those of a recorded call, whose launches (kernels, grids, arguments) are then the
same; the graph holds exactly those launches, captured once at the first replay.

Why branches keep the results: two consecutive kernels run side by side only when neither writes a
field the other reads or writes (by the kernel IR's field names, as fusion decides independence),
and only in a call where no two field arguments share memory (else two names could be one buffer).
Each branch starts after everything before the group and the group joins before what follows.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from icoforge.backend.ir import ir
from icoforge.backend.codegen.cuda import WIDE_SUFFIX

Access = tuple[frozenset[str], frozenset[str]]  # (fields read, fields written) of a kernel


def kernel_fields(program: ir.ProgramIR, device_names: Sequence[str]) -> dict[str, Access]:
    """Device kernel name -> the fields (parameters and temporaries, by name) it reads and writes,
    from its IR kernel (a kernel's 64-bit-index twin, NAME + WIDE_SUFFIX, is the same IR kernel)."""
    by_ir = {k.name: (frozenset(k.fields_read()), frozenset(k.fields_written())) for k in program.kernels()}
    out = {}
    for name in device_names:
        ir_name = name if name in by_ir else name.removesuffix(WIDE_SUFFIX)
        if ir_name in by_ir:
            out[name] = by_ir[ir_name]
    return out


def independent(a: Access | None, b: Access | None) -> bool:
    """Neither writes what the other touches; an unknown kernel (None) depends on everything."""
    if a is None or b is None:
        return False
    (ra, wa), (rb, wb) = a, b
    return not (ra & wb or wa & rb or wa & wb)


def branch_groups(names: Sequence[str | None], fields: dict[str, Access], width: int) -> list[list[int]]:
    """The launches (by kernel name, in call order) as groups of at most `width` consecutive,
    pairwise independent launches: the kernels of a group may run at the same time."""
    groups: list[list[int]] = []
    for i, name in enumerate(names):
        access = fields.get(name) if name is not None else None
        if groups and len(groups[-1]) < width and all(independent(access, fields.get(names[j] or "")) for j in groups[-1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def overlapping(spans: Sequence[tuple[int, int]]) -> bool:
    """Whether any two of the [lo, hi) byte ranges share memory (empty ranges share nothing)."""
    live = sorted((lo, hi) for lo, hi in spans if hi > lo)
    return any(b[0] < a[1] for a, b in zip(live, live[1:]))


def capturing(stream: Any) -> bool:
    """Whether `stream` is being captured; a query CUDA refuses (the legacy stream while a blocking
    stream captures) counts as capturing: the call then launches kernel by kernel."""
    try:
        return bool(stream.is_capturing())
    except Exception:
        return True


def capture(cuda: Any, launches: tuple, groups: list[list[int]], branches: list[Any], program: str) -> Any:
    """The launches as a CUDA graph, recorded on a side stream (not run); a group of several
    launches forks onto `branches` (streams, grown as needed) and joins again. False if the capture
    fails (said once; the call then launches kernel by kernel, as without graphs)."""
    side = cuda.Stream(non_blocking=True)
    try:
        with side:
            side.begin_capture()
            try:
                for group in groups:
                    _capture_group(cuda, side, [launches[i] for i in group], branches)
            finally:
                graph = side.end_capture()
        return graph
    except Exception as e:
        print(f"[icoforge] {program}: CUDA graph capture failed, launching kernel by kernel ({type(e).__name__}: {e})", file=sys.stderr)
        return False


def _capture_group(cuda: Any, side: Any, group: list[tuple], branches: list[Any]) -> None:
    (kernel, grid, block, kargs), rest = group[0], group[1:]
    if not rest:
        kernel(grid, block, kargs)
        return
    fork = side.record()
    joins = []
    for j, (k, g, b, a) in enumerate(rest):
        if j == len(branches):
            branches.append(cuda.Stream(non_blocking=True))
        branch = branches[j]
        branch.wait_event(fork)
        with branch:
            k(g, b, a)
        joins.append(branch.record())
    kernel(grid, block, kargs)  # the first of the group on the side stream itself
    for event in joins:
        side.wait_event(event)
