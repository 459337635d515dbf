"""pytest plugin loaded into icon4py's own test run (`-p suite_plugin`, by run.py).

- Refuses to run when the float precision in effect is not the one asked for: icon4py's
  `--enable-mixed-precision` sets FLOAT_PRECISION only in pytest_configure, after its own hooks
  module imported `type_alias` with the old value, so without the variable set beforehand the
  "mixed" run would silently be a double one.
- Marks the entries of known_failures.KNOWN xfail(strict=True, raises=...), with whose error it is.
- Records every test's outcome, time and, for a failure or error, whose code raised it, into the
  JSON file $ICOFORGE_I4P_RESULTS that table.py turns into the Markdown tables.
"""

from __future__ import annotations

import builtins
import json
import os
import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from known_failures import known_failure  # noqa: E402

_records: dict[str, dict] = {}
_started = time.time()


def _wanted() -> tuple[str, str]:
    precision = os.environ.get("ICOFORGE_I4P_PRECISION", "double")
    grid = os.environ.get("ICOFORGE_I4P_GRID_KIND", "simple")
    return precision, grid


def pytest_configure(config: pytest.Config) -> None:
    from icon4py.model.common import type_alias

    precision, _ = _wanted()
    if type_alias.precision != precision:
        raise pytest.UsageError(
            f"asked for {precision} precision, icon4py's type_alias has {type_alias.precision!r} "
            f"(FLOAT_PRECISION={os.environ.get('FLOAT_PRECISION')!r}): set FLOAT_PRECISION before pytest starts"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    precision, grid = _wanted()
    for item in items:
        entry = known_failure(item.nodeid, precision, grid)
        if entry is not None:
            raises = getattr(builtins, entry.raises)
            item.add_marker(pytest.mark.xfail(reason=f"{entry.owner} error: {entry.reason}", raises=raises, strict=True))


def package_roots() -> list[tuple[pathlib.Path, str]]:
    """Folders whose files are ours, GT4Py's or icon4py's (icon4py's packages and its tests folder)."""
    import gt4py
    import icon4py

    import icoforge

    roots = [(pathlib.Path(icoforge.__file__).resolve().parent, "ours")]
    roots += [(pathlib.Path(p).resolve(), "GT4Py's") for p in gt4py.__path__]
    roots += [(pathlib.Path(p).resolve(), "icon4py's") for p in icon4py.__path__]
    tests = os.environ.get("ICOFORGE_I4P_TESTS")
    return roots + ([(pathlib.Path(tests).resolve(), "icon4py's")] if tests else [])


def whose(excinfo: pytest.ExceptionInfo, roots: list[tuple[pathlib.Path, str]] | None = None) -> str:
    """The innermost frame in icoforge, GT4Py or icon4py decides; an AssertionError raised in
    icon4py's code (its verification) means our backend's numbers differ from icon4py's NumPy reference."""
    roots = package_roots() if roots is None else roots
    owners = []
    for entry in excinfo.traceback:
        path = pathlib.Path(str(entry.path)).resolve()
        owners += [owner for root, owner in roots if path.is_relative_to(root)][:1]
    if not owners:
        return "unknown"
    if isinstance(excinfo.value, AssertionError) and owners[-1] == "icon4py's":
        return "ours (result differs from icon4py's NumPy reference)"
    return owners[-1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    rec = _records.setdefault(item.nodeid, {"test": item.nodeid, "outcome": "passed", "seconds": 0.0})
    rec["seconds"] += call.duration
    if report.skipped and hasattr(report, "wasxfail"):
        rec["outcome"], rec["reason"] = "xfailed", report.wasxfail
    elif report.skipped:
        rec["outcome"] = "skipped"
        rec["reason"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    elif report.failed:
        rec["outcome"] = "failed" if call.when == "call" else "error"
        if call.excinfo is not None:
            rec["whose"] = whose(call.excinfo)
            rec["exception"] = call.excinfo.typename
            rec["message"] = str(call.excinfo.value).strip().splitlines()[0][:300] if str(call.excinfo.value).strip() else ""
        else:  # a strict xfail that passed
            rec["whose"], rec["exception"], rec["message"] = "known-failure list", "XPASS", str(report.longrepr)[:300]
    elif report.passed and hasattr(report, "wasxfail"):
        rec["outcome"] = "xpassed"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get("ICOFORGE_I4P_RESULTS")
    if not out:
        return
    from icon4py.model.common import type_alias

    precision, grid = _wanted()
    data = {
        "run": os.environ.get("ICOFORGE_I4P_RUN", ""),
        "precision": type_alias.precision,
        "vpfloat": type_alias.vpfloat.__name__,
        "wpfloat": type_alias.wpfloat.__name__,
        "grid": os.environ.get("ICOFORGE_I4P_GRID", grid),
        "backend": session.config.getoption("backend"),
        "exitstatus": int(exitstatus),
        "wall_s": time.time() - _started,
        "tests": list(_records.values()),
    }
    pathlib.Path(out).write_text(json.dumps(data, indent=1))
