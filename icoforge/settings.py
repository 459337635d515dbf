"""icoforge's settings: every `ICOFORGE_*` environment variable, read here and nowhere else.

    from icoforge import settings
    settings.current().host_replay      # a frozen `Settings`

The environment is the transport (a shell, ReFrame, GT4Py's spawned compile workers all see it);
`current()` parses it into one `Settings` object, again only when a variable changed (tests
monkeypatch them; `update` and `overridden` change them for this process and its children).

| variable | field | meaning |
| --- | --- | --- |
| ICOFORGE_CACHE | cache | cache root (default `$XDG_CACHE_HOME/icoforge`) |
| ICOFORGE_SCHEDULE | schedule | ProgramSchedule JSON (or a file) of the icoforge GPU backends made by name |
| ICOFORGE_FAST_PASSES | fast_passes | 0: GT4Py's passes without icoforge's speed-ups |
| ICOFORGE_HOST_REPLAY | host_replay | 0: the GPU runtime never replays a call's launches |
| ICOFORGE_HOST_GRAPHS | host_graphs | 1: a replayed call launches its kernels as one CUDA graph, captured at its first replay (default 0) |
| ICOFORGE_STREAMS | streams | N > 1: inside those graphs, consecutive kernels that touch no common field run on up to N streams (default 1; needs ICOFORGE_HOST_GRAPHS=1) |
| ICOFORGE_TRACE | trace | a folder: log every translation and load, keep GTIR of pass-cache misses |
| ICOFORGE_WORKER_NICE | worker_nice | nice increment of compile workers (default 5; 0 keeps the priority) |
| ICOFORGE_WARM_POOL | warm_pool | 0: the granule, `icoforge model` and `icoforge run --in-worker` do not start GT4Py's compile workers ahead of time |
| ICOFORGE_EARLY_GTIR | early_gtir | default 1: stop GT4Py's passes before their fusion loop (gt4py_early.py); 0: all of them (GT4Py's full list) |
| ICOFORGE_TEMPORARIES | temporaries | where the GPU runtime keeps a program's temporaries: persistent (default), per-call, async |
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping

from icoforge.errors import IcoforgeError

# field -> environment variable
VARIABLES = {
    "cache": "ICOFORGE_CACHE",
    "schedule": "ICOFORGE_SCHEDULE",
    "fast_passes": "ICOFORGE_FAST_PASSES",
    "host_replay": "ICOFORGE_HOST_REPLAY",
    "host_graphs": "ICOFORGE_HOST_GRAPHS",
    "streams": "ICOFORGE_STREAMS",
    "trace": "ICOFORGE_TRACE",
    "worker_nice": "ICOFORGE_WORKER_NICE",
    "warm_pool": "ICOFORGE_WARM_POOL",
    "early_gtir": "ICOFORGE_EARLY_GTIR",
    "temporaries": "ICOFORGE_TEMPORARIES",
}

# Allocation policies of the GPU runtime's temporaries (backend/runtime/gpu.py, issue 17 item 5):
# persistent: each loaded program keeps its temporaries from call to call (pointers stay, so a call
#   can be replayed); per-call: taken from CuPy's memory pool at every call and given back at its end
#   (the pool's stream-ordered reuse; peak memory is the largest program's, not the sum); async: the
#   same through CUDA's stream-ordered allocator (cupy.cuda.MemoryAsyncPool, cudaMallocAsync).
TEMPORARY_POLICIES = ("persistent", "per-call", "async")


@dataclasses.dataclass(frozen=True)
class Settings:
    cache: str | None = None
    schedule: str = ""  # "" : the vendor default
    fast_passes: bool = True
    host_replay: bool = True
    host_graphs: bool = False  # off until an H200 A/B shows a gain (issue 17, item 4)
    streams: int = 1  # issue 17 item 5: branches of the host graphs (backend/runtime/gpu.py, `branch_groups`)
    trace: str | None = None
    worker_nice: int = 5
    warm_pool: bool = True
    early_gtir: bool = True
    temporaries: str = "persistent"

    def __post_init__(self) -> None:
        if self.temporaries not in TEMPORARY_POLICIES:
            raise IcoforgeError(f"ICOFORGE_TEMPORARIES={self.temporaries!r}: choose one of {', '.join(TEMPORARY_POLICIES)}")
        if self.streams < 1:
            raise IcoforgeError(f"ICOFORGE_STREAMS={self.streams}: give a whole number of streams, 1 or more")
        if self.streams > 1 and not self.host_graphs:
            raise IcoforgeError(f"ICOFORGE_STREAMS={self.streams} needs ICOFORGE_HOST_GRAPHS=1: the streams are branches captured into those graphs")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Settings":
        raw = {f: env.get(v) for f, v in VARIABLES.items()}
        nice = raw["worker_nice"]
        try:
            worker_nice = int(nice) if nice is not None else cls.worker_nice
        except ValueError:  # a bad value runs at the normal priority (as before settings existed)
            worker_nice = 0
        return cls(
            cache=raw["cache"] or None,
            schedule=(raw["schedule"] or "").strip(),
            fast_passes=raw["fast_passes"] != "0",
            host_replay=raw["host_replay"] != "0",
            host_graphs=raw["host_graphs"] == "1",
            streams=_whole_number("ICOFORGE_STREAMS", raw["streams"], cls.streams),
            trace=raw["trace"] or None,
            worker_nice=worker_nice,
            warm_pool=raw["warm_pool"] != "0",
            early_gtir=raw["early_gtir"] != "0",
            temporaries=raw["temporaries"] or "persistent",
        )

    def to_env(self) -> dict[str, str | None]:
        """Variable -> value that `from_env` reads back as these settings (None: unset)."""
        out: dict[str, str | None] = {}
        for f, var in VARIABLES.items():
            v = getattr(self, f)
            out[var] = ("1" if v else "0") if isinstance(v, bool) else (None if v in (None, "") else str(v))
        return out


def _whole_number(variable: str, text: str | None, default: int) -> int:
    if text is None or not text.strip():
        return default
    try:
        return int(text)
    except ValueError:
        raise IcoforgeError(f"{variable}={text!r}: give a whole number") from None


_last: tuple[tuple[str | None, ...], Settings] | None = None


def current() -> Settings:
    """The settings of this process now."""
    global _last
    raw = tuple(os.environ.get(v) for v in VARIABLES.values())
    if _last is None or _last[0] != raw:
        _last = (raw, Settings.from_env(os.environ))
    return _last[1]


def _export(env: Mapping[str, str | None]) -> None:
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def update(**changes) -> Settings:
    """Change settings for this process and the processes it starts (the CLI's flags)."""
    new = dataclasses.replace(current(), **changes)
    _export({VARIABLES[f]: new.to_env()[VARIABLES[f]] for f in changes})
    return current()


@contextlib.contextmanager
def overridden(**changes) -> Iterator[Settings]:
    """`update(**changes)` for the duration of a `with` block; the variables are restored after."""
    old = {VARIABLES[f]: os.environ.get(VARIABLES[f]) for f in changes}
    try:
        yield update(**changes)
    finally:
        _export(old)


def environment(**extra: str) -> dict[str, str]:
    """This process' environment plus `extra`: for a compiler run as a subprocess."""
    return {**os.environ, **extra}


def prepare_openmp() -> None:
    """OpenMP threads of the CPU target sleep rather than spin between kernels unless the user
    says otherwise: on a shared 2-core machine spinning made a 0.4 ms program take 12 ms
    (measured). Must run before libgomp loads, i.e. before the first generated module is imported."""
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
