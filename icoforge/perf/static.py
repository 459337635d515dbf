"""The kernel IR of a program as the suite compiles it: int and bool scalars bound at compile time
(icon4py's `setup_program` does the same). Binding them lets GT4Py's passes fold domains and host
conditions, so the kernels -- and their names `<prefix>_k<N>` -- differ from the IR without static
arguments; costs, per-kernel timings and profiler filters must all use this one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def compilable_program_static(program: Any, offset_provider: Mapping[str, Any], static: Mapping[str, Any]):
    """`precompile.compilable_program` with `static` values bound, as `Program.compile(**static)`
    builds it."""
    from icoforge.backend.frontend import gt4py_compat

    return gt4py_compat.compilable_program(program, offset_provider, static)


def suite_program_ir(info: Any, grid: Any, scalars: Mapping[str, Any], static_params: str | Sequence[str] = "icon4py"):
    """Kernel IR of suite program `info` on `grid` with the suite's static scalars taken from `scalars`."""
    from icoforge.backend.runtime import workflow
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    # the GT4Py scalar types the suite passes (np.int32, bool): the fingerprint depends on them
    static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, static_params)}
    tr, _ = workflow.translate(compilable_program_static(info.program, grid.connectivities, static))
    return tr.program
