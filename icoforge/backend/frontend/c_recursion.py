"""Early CPython 3.12 releases' fixed C recursion limit, raised while icoforge translates a program
(issue 48: `icoforge model --muphys` failed with RecursionError).

CPython 3.12 counts recursion twice: Python frames against `sys.setrecursionlimit`, and calls
that go through C against a separate per-thread counter, `c_recursion_remaining`, which
`sys.setrecursionlimit` does not touch. In 3.12.0 and 3.12.1 (this venv's Python) it starts at
`C_RECURSION_LIMIT` = 1500 (Include/cpython/pystate.h), and a call of a bound method with
`**kwargs` costs 2 of it (`_probe` checks exactly that). GT4Py's eve visitors recurse that way
(`PreserveLocationVisitor.visit` -> `NodeTranslator.visit` -> `generic_visit` -> `self.visit(child,
**kwargs)`, through lists too): measured 18 units per level of a GTIR `plus(plus(...), 1.0)` chain,
so no GT4Py pass walks a tree deeper than about 80 such levels, whatever icon4py sets. icon4py's
`graupel_run` (muphys: one scan operator of nested lets and ifs) is deeper: GT4Py's first pass on
it, `MergeLet`, raises RecursionError in every backend, gtfn_cpu included. icon4py raises
`sys.setrecursionlimit` around it, which is all it needs where the C limit is CPython's later
one, 10000 on Linux release builds (gh-112215: 3.13, and backported to 3.12 in
python/cpython#115083, February 2024; the first 3.12.x that has it is not checked here).

`call(fn, ...)` runs `fn` with that later limit, where it can be shown to apply (`state()`):
CPython 3.12, 64-bit, the thread state's `c_recursion_remaining` where 3.12's `struct _ts` has it
(offset 36: after prev, next, interp, _status, py_recursion_remaining, py_recursion_limit), and
that field behaving as the counter: `py_recursion_limit` beside it equals
`sys.getrecursionlimit()`, and the field drops by exactly 2 inside a `**kwargs` call of a bound
method and by 0 inside a plain one, and it starts a fresh thread at no more than 1500 (a later 3.12
starts it at its own, larger limit: nothing to do). Anywhere else `fn` is called as it is.

The C limit protects the C stack, so the raised limit needs stack: `fn` runs in a thread of its
own with a `STACK_BYTES` stack (virtual memory; pages are touched only as deep as it goes), the
counter of that thread raised by `TARGET - C_LIMIT_3_12_EARLY` and lowered again before the thread
ends. Measured on this 3.12.1 (x86-64): ~270 bytes of C stack per unit (eve over GTIR: 1 MiB of
stack overflows at 250 levels, 8 MiB at 1800), so 10000 units need ~2.7 MiB; `STACK_BYTES` is 32
MiB, 3.3 KiB per unit. `tests/backend/test_c_recursion.py` runs recursion to exhaustion of the
raised counter through `call` in a subprocess and checks it ends in RecursionError, not a crash.
The caller's thread is not touched; `fn`'s result or exception comes back to it. `fn` runs in a
copy of the caller's contextvars.
"""

from __future__ import annotations

import contextvars
import ctypes
import platform
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

C_LIMIT_3_12_EARLY = 1500  # CPython 3.12.0/3.12.1 Include/cpython/pystate.h C_RECURSION_LIMIT (not WASI, not debug)
TARGET = 10000  # Py_C_RECURSION_LIMIT of 3.13.0 and of the 3.12 backport on Linux release builds
STACK_BYTES = 32 << 20  # the translating thread's C stack (see the module docstring)
# struct _ts of CPython 3.12 (64-bit): prev, next, interp (pointers), _status (32-bit bitfield),
# then int py_recursion_remaining, py_recursion_limit, c_recursion_remaining
_PY_LIMIT_OFFSET = 32
_C_REMAINING_OFFSET = 36
_stack_size_lock = threading.Lock()  # threading.stack_size is process-wide: set and reset under it
T = TypeVar("T")


def _thread_state() -> int:
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    return int(get())


def _counter() -> ctypes.c_int:
    """The current thread's `c_recursion_remaining` (where state() says the layout is 3.12's)."""
    return ctypes.c_int.from_address(_thread_state() + _C_REMAINING_OFFSET)


class _Probe:
    def kwargs_call(self, counter: ctypes.c_int, **kwargs: Any) -> int:
        return counter.value

    def plain_call(self, counter: ctypes.c_int) -> int:
        return counter.value


def _probe() -> str | None:
    """None where this thread's offset-36 field behaves as 3.12.1's C recursion counter, else why not."""
    base = _thread_state()
    py_limit = ctypes.c_int.from_address(base + _PY_LIMIT_OFFSET).value
    if py_limit != sys.getrecursionlimit():
        return f"thread state layout not recognised (py_recursion_limit {py_limit}, sys says {sys.getrecursionlimit()})"
    counter = _counter()
    before = counter.value
    kw, plain = before - _Probe().kwargs_call(counter, **{}), before - _Probe().plain_call(counter)
    if (kw, plain) != (2, 0) or counter.value != before:
        return f"thread state field not the C recursion counter (a **kwargs call moved it by {kw}, a plain one by {plain})"
    return None


def _fresh_thread_counter() -> tuple[int | None, str | None]:
    """(the counter a new thread starts with, None), or (None, why the layout is not recognised)."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(_probe() or _counter().value), name="icoforge-c-recursion-probe")
    t.start()
    t.join()
    return (out[0], None) if isinstance(out[0], int) else (None, out[0])


def state() -> tuple[bool, str]:
    """(whether `call` raises the limit here, why)."""
    if platform.python_implementation() != "CPython" or sys.version_info[:2] != (3, 12):
        return False, f"{platform.python_implementation()} {platform.python_version()}: not CPython 3.12"
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return False, "not a 64-bit build"
    start, why = _fresh_thread_counter()
    if why is not None:
        return False, why
    if not 0 < start <= C_LIMIT_3_12_EARLY:
        return False, f"a new thread's C recursion counter is {start}: not the early 3.12 limit of {C_LIMIT_3_12_EARLY}, nothing to raise"
    return True, (f"CPython {platform.python_version()}: C recursion limit {C_LIMIT_3_12_EARLY} raised to {TARGET} "
                  f"in a thread with a {STACK_BYTES >> 20} MiB stack")


_STATE: tuple[bool, str] | None = None


def cached_state() -> tuple[bool, str]:
    """`state()`, worked out once per process (it starts a thread)."""
    global _STATE
    if _STATE is None:
        _STATE = state()
    return _STATE


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, with the later C recursion limit where `cached_state()` says it
    applies (in a thread of its own, module docstring), else in the calling thread as it is."""
    if not cached_state()[0]:
        return fn(*args, **kwargs)
    context = contextvars.copy_context()
    result: list = []
    error: list[BaseException] = []

    def run() -> None:
        counter = _counter()
        extra = TARGET - C_LIMIT_3_12_EARLY
        counter.value += extra
        try:
            result.append(context.run(fn, *args, **kwargs))
        except BaseException as e:  # re-raised in the caller's thread
            error.append(e)
        finally:
            counter.value -= extra

    with _stack_size_lock:
        old = threading.stack_size(STACK_BYTES)
        try:
            thread = threading.Thread(target=run, name=f"icoforge-c-recursion-{getattr(fn, '__name__', 'call')}", daemon=True)
            thread.start()
        finally:
            threading.stack_size(old)
    thread.join()
    if error:
        raise error[0]
    return result[0]


def remaining() -> int | None:
    """This thread's C recursion counter where the layout is recognised (`_probe`), else None."""
    if not (platform.python_implementation() == "CPython" and sys.version_info[:2] == (3, 12) and ctypes.sizeof(ctypes.c_void_p) == 8):
        return None
    return None if _probe() is not None else _counter().value
