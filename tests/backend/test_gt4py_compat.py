"""backend/frontend/gt4py_compat.py: GT4Py's internals are reached from there only (the places still to
move are listed and must not grow), and its helpers give what the callers relied on."""

from __future__ import annotations

import pathlib
import re

import gt4py
import gt4py.next as gtx
import numpy as np
import pytest

from icoforge.backend.frontend import gt4py_compat

ROOT = pathlib.Path(__file__).resolve().parents[2] / "icoforge"
INTERNALS = re.compile(
    r"_compiled_programs|\._pool\b|_convert_to_argument_descriptor_context|_validate_args|_ongoing_compilations"
    r"|past_stage|ProcessRunner|_finish_compilation_job|_compilation_jobs"
)
# Still reaching GT4Py's internals directly: modules other work was rewriting when the compat
# module was made (issue 18); each is a one-line move to gt4py_compat once that work has landed.
NOT_YET_MOVED = {"backend/runtime/compile_pool.py", "perf/greenline.py", "granule/instrument.py"}

IDim = gtx.Dimension("IDim")


@gtx.field_operator
def _double(a: gtx.Field[[IDim], gtx.float64], n: gtx.int32) -> gtx.Field[[IDim], gtx.float64]:
    return a * 2.0 if n > 0 else a


@gtx.program
def double(a: gtx.Field[[IDim], gtx.float64], n: gtx.int32, out: gtx.Field[[IDim], gtx.float64]):
    _double(a, n, out=out)


def test_gt4py_internals_only_in_the_compat_module():
    found = {
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if path.name != "gt4py_compat.py" and INTERNALS.search(path.read_text())
    }
    assert found <= NOT_YET_MOVED, f"GT4Py internals outside backend/frontend/gt4py_compat.py: {sorted(found - NOT_YET_MOVED)}"


def test_the_checked_version_is_the_installed_one():
    # a GT4Py upgrade must be re-checked here (and the pass speed-ups turn themselves off)
    assert gt4py.__version__ in gt4py_compat.CHECKED_GT4PY


def test_compilable_program_with_and_without_static_arguments():
    sig = gt4py_compat.program_signature(double)
    assert list(sig.pos_or_kw_args) == ["a", "n", "out"]
    plain = gt4py_compat.compilable_program(double, {})
    assert plain.args.argument_descriptor_contexts == {} and len(plain.args.args) == 3
    bound = gt4py_compat.compilable_program(double, {}, {"n": np.int32(1)})
    assert bound.args.argument_descriptor_contexts
    assert bound.data != plain.data  # GT4Py's transforms substitute the static value into the GTIR


def test_no_compiled_variants_before_the_first_compile():
    assert gt4py_compat.compiled_programs(object()) is None
    assert gt4py_compat.finish_compilations(object()) is False  # the caller falls back to GT4Py's public wait
    assert isinstance(gt4py_compat.ongoing_compilations(), list)


def test_gt4py_checks_call_arguments():
    from gt4py.next import errors
    from gt4py.next.type_system import type_translation

    good = {"a": gtx.zeros({IDim: 3}), "n": np.int32(1), "out": gtx.zeros({IDim: 3})}
    gt4py_compat.validate_call_args(double, {k: type_translation.from_value(v) for k, v in good.items()})
    bad = {**good, "n": 1.5}
    with pytest.raises(errors.DSLError):
        gt4py_compat.validate_call_args(double, {k: type_translation.from_value(v) for k, v in bad.items()})
