"""The model lab and the muphys granule run every GT4Py backend's executor with the raised C
recursion limit (icoforge/suite/recursion.py `with_c_recursion_limit`; issue 48: on CPython 3.12.1 GT4Py's passes over
muphys' graupel_run raise RecursionError in gtfn_cpu too); icoforge's own backends translate with
it themselves (frontend/c_recursion.py) and are left as they are."""

from __future__ import annotations

import pickle
import sys

import pytest

from icoforge.backend.frontend import c_recursion
from icoforge.suite import recursion


def _icon4py_backend(name: str):
    from icon4py.model.common import model_options

    from icoforge.suite.backends import get_backend

    return model_options.customize_backend(program=None, backend=get_backend(name))


def test_gtfn_cpu_gets_the_wrapper_icoforge_and_embedded_do_not():
    gtfn = _icon4py_backend("gtfn_cpu")
    wrapped = recursion.with_c_recursion_limit(gtfn)
    assert isinstance(wrapped.executor, recursion.CRecursionExecutor) and wrapped.executor.inner is gtfn.executor
    assert (wrapped.name, wrapped.allocator, wrapped.transforms) == (gtfn.name, gtfn.allocator, gtfn.transforms)
    assert recursion.with_c_recursion_limit(wrapped) is wrapped  # not twice
    icf = _icon4py_backend("icoforge-cpu")
    assert recursion.with_c_recursion_limit(icf) is icf
    assert recursion.with_c_recursion_limit(None) is None
    # GT4Py ships the executor to its compile worker processes by pickle
    assert isinstance(pickle.loads(pickle.dumps(wrapped.executor)), recursion.CRecursionExecutor)


def _counter_in(inp):
    return inp, c_recursion.remaining()


@pytest.mark.skipif(not (sys.implementation.name == "cpython" and sys.version_info[:3] in ((3, 12, 0), (3, 12, 1))),
                    reason="CPython 3.12.0/3.12.1 only")
def test_the_wrapper_runs_the_executor_with_the_raised_limit():
    inp, counter = recursion.CRecursionExecutor(_counter_in)("program")
    assert inp == "program"
    assert counter > c_recursion.C_LIMIT_3_12_EARLY


def test_a_descriptors_per_program_backends_get_the_wrapper_with_icon4pys_options():
    """The granules of `icoforge model --backend gtfn_cpu` get icon4py's descriptor: every backend
    `customize_backend(program, descriptor)` makes from it must be wrapped too."""
    from icon4py.model.common import model_options

    from icoforge.suite.backends import get_backend

    descriptor = get_backend("dace_cpu")
    factory = descriptor["backend_factory"]
    wrapped = recursion.descriptor_with_c_recursion_limit(descriptor)
    assert recursion.descriptor_with_c_recursion_limit(wrapped) is wrapped  # not twice
    assert descriptor["backend_factory"] is factory  # icon4py's descriptor itself is left alone

    class vertically_implicit_solver_at_predictor_step:  # customize_backend keys its options on __name__
        pass

    plain = model_options.customize_backend(vertically_implicit_solver_at_predictor_step, descriptor)
    ours = model_options.customize_backend(vertically_implicit_solver_at_predictor_step, wrapped)
    assert isinstance(ours.executor, recursion.CRecursionExecutor) and not isinstance(plain.executor, recursion.CRecursionExecutor)
    assert ours.name == plain.name
    assert type(ours.executor.inner) is type(plain.executor)
