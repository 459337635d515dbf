"""`icoforge.settings`: the ICOFORGE_* variables read in one place, and the compiler's other
modules reading none of them."""

from __future__ import annotations

import ast
import os
import pathlib

import pytest

from icoforge import settings
from icoforge.errors import IcoforgeError
from icoforge.settings import VARIABLES, Settings

ROOT = pathlib.Path(__file__).resolve().parents[1] / "icoforge"


def test_defaults_when_nothing_is_set():
    assert Settings.from_env({}) == Settings()
    s = Settings()
    assert s.cache is None and s.schedule == "" and s.trace is None
    assert s.fast_passes and s.host_replay and s.warm_pool and s.worker_nice == 5 and s.early_gtir


def test_every_variable_is_read():
    env = {
        "ICOFORGE_CACHE": "/c", "ICOFORGE_SCHEDULE": ' {"fuse": ["*"]} ', "ICOFORGE_FAST_PASSES": "0",
        "ICOFORGE_HOST_REPLAY": "0", "ICOFORGE_HOST_GRAPHS": "1", "ICOFORGE_STREAMS": "2", "ICOFORGE_TRACE": "/t", "ICOFORGE_WORKER_NICE": "3", "ICOFORGE_WARM_POOL": "0",
        "ICOFORGE_EARLY_GTIR": "1", "ICOFORGE_TEMPORARIES": "per-call",
    }  # fmt: skip
    assert set(env) == set(VARIABLES.values())
    s = Settings.from_env(env)
    assert s == Settings(cache="/c", schedule='{"fuse": ["*"]}', fast_passes=False, host_replay=False, host_graphs=True, streams=2,
                         trace="/t", worker_nice=3, warm_pool=False, early_gtir=True, temporaries="per-call")  # fmt: skip
    assert Settings.from_env({k: v for k, v in s.to_env().items() if v is not None}) == s  # a round trip


@pytest.mark.parametrize(
    "env, message",
    [
        ({"ICOFORGE_STREAMS": "2"}, "ICOFORGE_STREAMS=2 needs ICOFORGE_HOST_GRAPHS=1"),
        ({"ICOFORGE_STREAMS": "two", "ICOFORGE_HOST_GRAPHS": "1"}, "ICOFORGE_STREAMS='two': give a whole number"),
        ({"ICOFORGE_STREAMS": "0", "ICOFORGE_HOST_GRAPHS": "1"}, "1 or more"),
    ],
)
def test_streams_are_refused_with_the_reason(env, message):
    with pytest.raises(IcoforgeError, match=message):
        Settings.from_env(env)


def test_a_bad_nice_value_keeps_the_normal_priority():
    assert Settings.from_env({"ICOFORGE_WORKER_NICE": "lots"}).worker_nice == 0


def test_current_follows_the_environment(monkeypatch):
    monkeypatch.setenv("ICOFORGE_HOST_REPLAY", "0")
    assert not settings.current().host_replay
    monkeypatch.delenv("ICOFORGE_HOST_REPLAY")
    assert settings.current().host_replay
    assert settings.current() is settings.current()  # parsed again only after a change


def test_update_and_overridden_reach_child_processes(monkeypatch):
    monkeypatch.delenv("ICOFORGE_SCHEDULE", raising=False)
    monkeypatch.setenv("ICOFORGE_CACHE", "/before")
    monkeypatch.setenv("ICOFORGE_HOST_REPLAY", "1")  # monkeypatch restores it after `update` below
    with settings.overridden(cache="/during", schedule='{"fuse": ["p"]}') as s:
        assert s.cache == "/during" and settings.current().schedule == '{"fuse": ["p"]}'
        assert os.environ["ICOFORGE_CACHE"] == "/during"  # spawned compile workers read it
    assert os.environ["ICOFORGE_CACHE"] == "/before" and "ICOFORGE_SCHEDULE" not in os.environ
    settings.update(host_replay=False)
    assert os.environ["ICOFORGE_HOST_REPLAY"] == "0" and not settings.current().host_replay


def test_the_cache_root_comes_from_the_settings(monkeypatch, tmp_path):
    from icoforge.cache import cache_root

    with settings.overridden(cache=str(tmp_path / "here")):
        assert cache_root() == tmp_path / "here"


@pytest.mark.parametrize("path", sorted((ROOT / "backend").rglob("*.py")), ids=lambda p: p.name)
def test_the_compiler_reads_no_environment(path):
    """No `os.environ` / `os.getenv` in icoforge/backend: the settings object is the one reader."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            assert node.attr not in ("environ", "getenv", "putenv", "unsetenv"), f"{path.name}:{node.lineno}: os.{node.attr}"


def test_make_backend_takes_the_schedule_not_the_environment(monkeypatch):
    from icoforge.backend import make_backend
    from icoforge.backend.schedule.schedule import VENDOR_DEFAULTS, ProgramSchedule, default_program_schedule

    monkeypatch.setenv("ICOFORGE_SCHEDULE", '{"fuse": ["*"]}')
    assert make_backend("emulated-cuda").executor.gpu.schedule == default_program_schedule("cuda")
    fused = ProgramSchedule(default=VENDOR_DEFAULTS["cuda"], fuse=("*",))
    assert make_backend("emulated-cuda", schedule=fused).executor.gpu.schedule == fused
    from icoforge.suite.backends import get_backend  # the lab maps the setting onto the argument

    assert get_backend("icoforge-emulated-cuda").executor.gpu.schedule == fused
