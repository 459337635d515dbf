"""Whose Python is running: icoforge's, GT4Py's, icon4py's or someone else's.

`OwnerSampler` samples one thread's stack every few milliseconds while a block runs and charges
each sample to the innermost frame that belongs to a known package; frames of the standard library
and of packages not named here are charged to their nearest known caller (a `hashlib` call made by
GT4Py is GT4Py's time). Only when no frame is known is a sample "other". A C call that holds the GIL delays the
sampler until it returns; its time goes to the Python frame that runs then, mostly its caller's
owner. Used where a phase is
mostly Python of several parties (the granule's construction, issue 47 item 5: which part of the
cold compile is ours to cut).
"""

from __future__ import annotations

import collections
import functools
import pathlib
import sys
import threading
import time
from types import FrameType, TracebackType

from icoforge.backend.frontend.gt4py_compat import WAITS_FOR_COMPILE_JOB

OURS, GT4PY, ICON4PY, DACE, OTHER = "ours", "GT4Py's", "icon4py's", "DaCe's", "other"
# the thread blocked on a compile job that GT4Py's first call of a program waits for (the job runs
# in a worker process, its own owner's time there): no one's Python runs in the sampled thread
WAITING = "waiting"
# the order and words of reports' rows
OWNER_ORDER = (OURS, GT4PY, ICON4PY, DACE, OTHER, WAITING)
OWNER_LABELS = {OURS: "icoforge's Python", GT4PY: "GT4Py's Python", ICON4PY: "icon4py's Python",
                DACE: "DaCe's Python", OTHER: "other code", WAITING: "a wait for a compile job"}  # fmt: skip
_WAITS = {("threading.py", "wait"), ("_base.py", "result"), ("_base.py", "wait")}


@functools.cache
def package_roots() -> tuple[tuple[str, str], ...]:
    """(folder prefix, owner) of every known package, the longest prefix first."""
    import dace
    import gt4py
    import icon4py

    import icoforge

    roots = [(str(pathlib.Path(icoforge.__file__).resolve().parent), OURS)]
    roots += [(str(pathlib.Path(p).resolve()), GT4PY) for p in gt4py.__path__]
    roots += [(str(pathlib.Path(p).resolve()), ICON4PY) for p in icon4py.__path__]
    roots += [(str(pathlib.Path(p).resolve()), DACE) for p in dace.__path__]
    return tuple(sorted(((r + "/", o) for r, o in roots), key=lambda ro: -len(ro[0])))


@functools.lru_cache(maxsize=4096)
def _located(filename: str) -> tuple[str | None, str]:
    """(owner or None, the path from the package's folder on, else the file's name): resolved once
    per file, since the sampler asks for every sample."""
    try:
        path = str(pathlib.Path(filename).resolve())
    except (OSError, ValueError):
        return None, pathlib.Path(filename).name
    for root, owner in package_roots():
        if path.startswith(root):
            return owner, pathlib.Path(root).name + "/" + path[len(root):]
    return None, pathlib.Path(path).name


def owner_of(filename: str) -> str | None:
    """The owner of a source file, None where it is none of the known packages."""
    return _located(filename)[0]


def _waits_for_a_compile_job(frame: FrameType) -> bool:
    """The innermost frame is a stdlib wait and a caller is GT4Py's wait for a program's compile job."""
    if (pathlib.Path(frame.f_code.co_filename).name, frame.f_code.co_name) not in _WAITS:
        return False
    f: FrameType | None = frame
    while f is not None:
        if f.f_code.co_name == WAITS_FOR_COMPILE_JOB and owner_of(f.f_code.co_filename) == GT4PY:
            return True
        f = f.f_back
    return False


def charged_frame(frame: FrameType | None) -> tuple[str, FrameType | None]:
    """(owner, the frame charged): WAITING (None) while GT4Py waits for a compile job, else the
    innermost frame of a known package, else (OTHER, None)."""
    if frame is not None and _waits_for_a_compile_job(frame):
        return WAITING, None
    while frame is not None:
        if (owner := owner_of(frame.f_code.co_filename)) is not None:
            return owner, frame
        frame = frame.f_back
    return OTHER, None


def _sites_of(frame: FrameType | None, owner: str) -> set[str]:
    """The sites of `owner`'s frames on the stack from `frame` outwards, each once."""
    sites = set()
    while frame is not None:
        if owner_of(frame.f_code.co_filename) == owner:
            sites.add(site_of(frame))
        frame = frame.f_back
    return sites


def site_of(frame: FrameType) -> str:
    """`package/module.py:function` of a frame of a known package, else `file.py:function`."""
    return f"{_located(frame.f_code.co_filename)[1]}:{frame.f_code.co_name}"


class OwnerSampler:
    """`with OwnerSampler() as s: ...` samples the entering thread; `s.seconds` is the block's wall
    time per owner (time-weighted samples scaled to the measured wall time), `s.samples` the counts.
    One sampler entered again adds the next block to the same figures (time between the blocks is
    not sampled)."""

    def __init__(self, interval_s: float = 0.005):
        self.interval_s = interval_s
        self.samples: collections.Counter[str] = collections.Counter()
        self._weights: collections.Counter[str] = collections.Counter()
        # our own time by function (the innermost icoforge frame): where ours is, to cut it
        self._our_sites: collections.Counter[str] = collections.Counter()
        # GT4Py's time by function, inclusive (every GT4Py function on the stack, once per
        # sample): which of its stages (front end, cache keys, submitting jobs) holds it
        self._gt4py_sites: collections.Counter[str] = collections.Counter()
        self.wall_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> OwnerSampler:
        package_roots()  # imports done before the first sample, not charged to anyone
        target = threading.get_ident()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, args=(target,), name="icoforge-owner-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self, target: int) -> None:
        # The sampler runs only when the sampled thread lets go of the GIL: every switch interval
        # (5 ms) while it runs Python, far more often while it waits in C code that releases it.
        # So each sample stands for the time since the previous one, not for one interval.
        last = time.perf_counter()
        while not self._stop.wait(self.interval_s):
            frame = sys._current_frames().get(target)
            now = time.perf_counter()
            owner, charged = charged_frame(frame)
            self.samples[owner] += 1
            self._weights[owner] += now - last
            if owner == OURS and charged is not None:
                self._our_sites[site_of(charged)] += now - last
            elif owner == GT4PY and charged is not None:
                for site in _sites_of(charged, GT4PY):
                    self._gt4py_sites[site] += now - last
            last = now

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.wall_s += time.perf_counter() - self._started
        self._stop = threading.Event()  # ready for the next block

    @property
    def seconds(self) -> dict[str, float]:
        return self._scaled(self._weights)

    def our_sites(self, top: int = 8) -> dict[str, float]:
        """The `top` icoforge functions our seconds went to (same scale as `seconds`)."""
        return self._scaled(self._our_sites, top)

    def gt4py_sites(self, top: int = 10) -> dict[str, float]:
        """The `top` GT4Py functions by inclusive time while GT4Py's Python ran (same scale as
        `seconds`; they overlap: a caller holds its callees' time)."""
        return self._scaled(self._gt4py_sites, top)

    def _scaled(self, weights: collections.Counter[str], top: int | None = None) -> dict[str, float]:
        # time-weighted samples scaled to the measured wall time (all owners' weights sum to it)
        total = sum(self._weights.values())
        if not total:
            return {}
        return {key: round(self.wall_s * w / total, 3) for key, w in weights.most_common(top)}
