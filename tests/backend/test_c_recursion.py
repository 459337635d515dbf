"""frontend/c_recursion.py: the C recursion limit of later CPython 3.12 releases for icoforge's
translation on 3.12.0/3.12.1 (issue 48: muphys' graupel_run is deeper than GT4Py's visitors can
walk under 3.12.1's limit). Each test that expects the raise fails where `call` does not raise it;
where the interpreter is not an early 3.12 the raise is skipped, and only the "does nothing" tests
run."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import threading

import pytest

from icoforge.backend.frontend import c_recursion

EARLY_3_12 = sys.implementation.name == "cpython" and sys.version_info[:3] in ((3, 12, 0), (3, 12, 1))
early_only = pytest.mark.skipif(not EARLY_3_12, reason="CPython 3.12.0/3.12.1 only (the fixed C recursion limit of 1500)")


class _Deep:
    """Recursion the way GT4Py's eve visitors recurse: a bound method called with **kwargs."""

    def down(self, n: int, **kwargs) -> int:
        return 0 if n == 0 else self.down(n - 1, **kwargs) + 1


@pytest.fixture
def python_limit():
    """The Python frame limit out of the way (icon4py raises it too): only the C limit is tested."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    yield
    sys.setrecursionlimit(old)


def _gtir_chain(levels: int):
    from gt4py.next.iterator.ir_utils import ir_makers as im

    e = im.ref("x")
    for _ in range(levels):
        e = im.plus(e, im.literal_from_value(1.0))
    return e


@early_only
def test_this_interpreter_is_recognised():
    ok, why = c_recursion.state()
    assert ok, why
    assert "raised to 10000" in why


@early_only
def test_deep_kwargs_recursion_fails_without_call_and_works_with_it(python_limit):
    """3000 calls of 2 units each: past 1500, within 10000."""
    with pytest.raises(RecursionError):
        _Deep().down(3000, tag=1)
    assert c_recursion.call(_Deep().down, 3000, tag=1) == 3000


@early_only
def test_a_gt4py_pass_over_a_deep_gtir_tree_needs_call(python_limit):
    """GT4Py's own first pass (MergeLet, what failed on graupel_run) over a GTIR chain 250 levels
    deep (18 units per level: 4500 of the 10000, past 1500)."""
    from gt4py.next.iterator.transforms.merge_let import MergeLet

    tree = _gtir_chain(250)
    with pytest.raises(RecursionError):
        MergeLet().visit(tree)
    assert c_recursion.call(MergeLet().visit, tree) == tree


@early_only
def test_the_caller_keeps_its_counter_and_gets_the_exception():
    before = c_recursion.remaining()
    inside: list = []

    def fn():
        inside.append((threading.get_ident(), c_recursion.remaining()))
        raise ValueError("from the translation")

    with pytest.raises(ValueError, match="from the translation"):
        c_recursion.call(fn)
    ident, counter = inside[0]
    assert ident != threading.get_ident()  # its own thread, with its own stack
    assert counter > c_recursion.C_LIMIT_3_12_EARLY  # raised there
    assert c_recursion.remaining() == before  # the caller's thread untouched


@early_only
@pytest.mark.parametrize("offset", [28, 32, 40])
def test_another_field_is_not_taken_for_the_counter(monkeypatch, offset):
    """py_recursion_remaining (28: moves by 1 per Python call), py_recursion_limit (32) and
    recursion_headroom (40) are not the counter: state() says no and call() runs in this thread."""
    monkeypatch.setattr(c_recursion, "_C_REMAINING_OFFSET", offset)
    monkeypatch.setattr(c_recursion, "_STATE", None)
    ok, why = c_recursion.state()
    assert not ok
    assert "not the C recursion counter" in why or "not the early 3.12 limit" in why, why
    assert c_recursion.call(threading.get_ident) == threading.get_ident()


@early_only
def test_a_later_limit_is_left_alone(monkeypatch):
    """A counter above the early limit (as a later 3.12 starts it) is not raised."""
    monkeypatch.setattr(c_recursion, "C_LIMIT_3_12_EARLY", 1000)
    monkeypatch.setattr(c_recursion, "_STATE", None)
    ok, why = c_recursion.state()
    assert not ok and "nothing to raise" in why, why
    assert c_recursion.call(threading.get_ident) == threading.get_ident()


def test_not_3_12_does_nothing(monkeypatch):
    monkeypatch.setattr(c_recursion.sys, "version_info", (3, 13, 0, "final", 0))
    monkeypatch.setattr(c_recursion, "_STATE", None)
    ok, why = c_recursion.state()
    assert not ok and "not CPython 3.12" in why
    assert c_recursion.call(threading.get_ident) == threading.get_ident()
    assert c_recursion.remaining() is None


@early_only
def test_exhausting_the_raised_limit_is_a_recursion_error_not_a_crash():
    """The raised counter runs out before the thread's stack does: recursion until RecursionError,
    through Python calls (2 units each), GT4Py's visitor over GTIR, and C alone (repr of nested
    lists, 1 unit each, no Python frames), in a subprocess, where a stack overflow would kill it."""
    script = textwrap.dedent("""
        import sys
        sys.setrecursionlimit(10**6)
        from icoforge.backend.frontend import c_recursion
        from gt4py.next.iterator.transforms.merge_let import MergeLet
        from gt4py.next.iterator.ir_utils import ir_makers as im

        class Deep:
            def down(self, n, **kw):
                return 0 if n == 0 else self.down(n - 1, **kw) + 1

        def attempt(what, fn, *args):
            try:
                c_recursion.call(fn, *args)
                print(what, "completed")
            except RecursionError:
                print(what, "RecursionError")

        e = im.ref("x")
        for _ in range(1500):
            e = im.plus(e, im.literal_from_value(1.0))
        nested = []
        for _ in range(200_000):
            nested = [nested]
        attempt("python", Deep().down, 10**6)
        attempt("gtir", MergeLet().visit, e)
        attempt("c", repr, nested)
        print("depth", c_recursion.call(Deep().down, 4500))
    """)
    root = pathlib.Path(c_recursion.__file__).parents[3]
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.split("\n")[:4] == ["python RecursionError", "gtir RecursionError", "c RecursionError", "depth 4500"], proc.stdout
