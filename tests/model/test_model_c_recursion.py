"""The model lab runs every GT4Py backend's executor with the raised C recursion limit
(icoforge/model/run.py `with_c_recursion_limit`; issue 48: on CPython 3.12.1 GT4Py's passes over
muphys' graupel_run raise RecursionError in gtfn_cpu too); icoforge's own backends translate with
it themselves (frontend/c_recursion.py) and are left as they are."""

from __future__ import annotations

import pickle
import sys

import pytest

from icoforge.backend.frontend import c_recursion
from icoforge.model import run


def _icon4py_backend(name: str):
    from icon4py.model.common import model_options

    from icoforge.suite.backends import get_backend

    return model_options.customize_backend(program=None, backend=get_backend(name))


def test_gtfn_cpu_gets_the_wrapper_icoforge_and_embedded_do_not():
    gtfn = _icon4py_backend("gtfn_cpu")
    wrapped = run.with_c_recursion_limit(gtfn)
    assert isinstance(wrapped.executor, run.CRecursionExecutor) and wrapped.executor.inner is gtfn.executor
    assert (wrapped.name, wrapped.allocator, wrapped.transforms) == (gtfn.name, gtfn.allocator, gtfn.transforms)
    assert run.with_c_recursion_limit(wrapped) is wrapped  # not twice
    icf = _icon4py_backend("icoforge-cpu")
    assert run.with_c_recursion_limit(icf) is icf
    assert run.with_c_recursion_limit(None) is None
    # GT4Py ships the executor to its compile worker processes by pickle
    assert isinstance(pickle.loads(pickle.dumps(wrapped.executor)), run.CRecursionExecutor)


def _counter_in(inp):
    return inp, c_recursion.remaining()


@pytest.mark.skipif(not (sys.implementation.name == "cpython" and sys.version_info[:3] in ((3, 12, 0), (3, 12, 1))),
                    reason="CPython 3.12.0/3.12.1 only")
def test_the_wrapper_runs_the_executor_with_the_raised_limit():
    inp, counter = run.CRecursionExecutor(_counter_in)("program")
    assert inp == "program"
    assert counter > c_recursion.C_LIMIT_3_12_EARLY


def test_a_descriptors_per_program_backends_get_the_wrapper_with_icon4pys_options():
    """The granules of `icoforge model --backend gtfn_cpu` get icon4py's descriptor: every backend
    `customize_backend(program, descriptor)` makes from it must be wrapped too."""
    from icon4py.model.common import model_options

    from icoforge.suite.backends import get_backend

    descriptor = get_backend("dace_cpu")
    factory = descriptor["backend_factory"]
    wrapped = run.descriptor_with_c_recursion_limit(descriptor)
    assert run.descriptor_with_c_recursion_limit(wrapped) is wrapped  # not twice
    assert descriptor["backend_factory"] is factory  # icon4py's descriptor itself is left alone

    class vertically_implicit_solver_at_predictor_step:  # customize_backend keys its options on __name__
        pass

    plain = model_options.customize_backend(vertically_implicit_solver_at_predictor_step, descriptor)
    ours = model_options.customize_backend(vertically_implicit_solver_at_predictor_step, wrapped)
    assert isinstance(ours.executor, run.CRecursionExecutor) and not isinstance(plain.executor, run.CRecursionExecutor)
    assert ours.name == plain.name
    assert type(ours.executor.inner) is type(plain.executor)
