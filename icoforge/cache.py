"""The user cache directory and the two primitives every cache here needs:
atomic writes (a half-written file is never visible) and an inter-process lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import tempfile
from collections.abc import Iterator

from icoforge import settings
from icoforge.errors import IcoforgeError


class CacheWriteError(IcoforgeError):
    """The cache cannot be written (read-only, full, not a directory): one clear error, no entry.
    (A plain message argument: it must unpickle when raised in GT4Py's compile workers.)"""


@contextlib.contextmanager
def _writing(path: os.PathLike | str) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        raise CacheWriteError(
            f"cannot write the icoforge cache at {path}: {e.strerror or e}; "
            "free space there or set ICOFORGE_CACHE to a writable directory"
        ) from e


def cache_root() -> pathlib.Path:
    """`$ICOFORGE_CACHE`, else `$XDG_CACHE_HOME/icoforge`, else `~/.cache/icoforge`."""
    if configured := settings.current().cache:
        root = pathlib.Path(configured)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = pathlib.Path(base) / "icoforge"
    with _writing(root):
        root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(kind: str) -> pathlib.Path:
    d = cache_root() / kind
    with _writing(d):
        d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def atomic_path(target: pathlib.Path | str) -> Iterator[pathlib.Path]:
    """Yield a temporary path next to `target`; rename it onto `target` only if the block succeeds.

    The rename is atomic on POSIX, so readers see either the old file, no file, or the complete
    new one -- never a truncated file after a crash or Ctrl-C.
    """
    target = pathlib.Path(target)
    with _writing(target.parent):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp_path = pathlib.Path(tmp)
    try:
        yield tmp_path
        with _writing(target):
            os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def atomic_write_bytes(target: pathlib.Path | str, data: bytes) -> None:
    with atomic_path(target) as tmp, _writing(target):
        tmp.write_bytes(data)


@contextlib.contextmanager
def file_lock(path: pathlib.Path | str) -> Iterator[None]:
    """Exclusive advisory lock: two processes building the same entry wait for each other."""
    path = pathlib.Path(path)
    with _writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+b")
    with f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
