"""GT4Py backends and icon4py descriptors whose translation runs with the later C recursion limit
(`icoforge.backend.frontend.c_recursion`): GT4Py's passes over muphys' `graupel_run` need it on
CPython 3.12.1, in every backend, gtfn_cpu included (issue 48). Used by the model verb and by the
greenline's muphys granule; icoforge's own backends raise the limit themselves and pass through."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class CRecursionExecutor:
    """A GT4Py backend's executor (GTIR passes, code generation, compilation) run with the C
    recursion limit of later CPython 3.12 releases where this Python has the early one
    (`icoforge.backend.frontend.c_recursion`): GT4Py's passes over muphys' graupel_run need it
    on CPython 3.12.1, in every backend. Picklable where `inner` is, so GT4Py's compile workers
    (spawned processes) run it too."""

    inner: Any

    def __call__(self, inp: Any) -> Any:
        from icoforge.backend.frontend import c_recursion

        return c_recursion.call(self.inner, inp)


def with_c_recursion_limit(backend: Any) -> Any:
    """`backend` with its executor in `CRecursionExecutor`, for GT4Py backends not icoforge's
    (icoforge's translation does it itself); anything else (None: embedded) unchanged."""
    from gt4py.next import backend as gtx_backend

    if not isinstance(backend, gtx_backend.Backend) or isinstance(backend.executor, CRecursionExecutor):
        return backend
    if type(backend.executor).__module__.startswith("icoforge."):
        return backend
    return dataclasses.replace(backend, executor=CRecursionExecutor(backend.executor))


@dataclasses.dataclass(frozen=True)
class CRecursionFactory:
    """An icon4py descriptor's `backend_factory` whose backends come out `with_c_recursion_limit`."""

    inner: Any

    def __call__(self, **options: Any) -> Any:
        return with_c_recursion_limit(self.inner(**options))


def descriptor_with_c_recursion_limit(descriptor: dict[str, Any]) -> dict[str, Any]:
    """icon4py's descriptor whose per-program backends (`customize_backend(program, descriptor)`
    calls its `backend_factory`, make_custom_dace_backend where it names none) run their
    executors `with_c_recursion_limit`; the options icon4py adds per program are unchanged."""
    from icon4py.model.common import model_backends

    factory = descriptor.get("backend_factory", model_backends.make_custom_dace_backend)
    if isinstance(factory, CRecursionFactory):
        return descriptor
    return {**descriptor, "backend_factory": CRecursionFactory(factory)}
