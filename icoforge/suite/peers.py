"""GT4Py's backends as icon4py runs them: the peers every comparison is made with.

icon4py does not hand GT4Py's ready-made backend objects to its programs. `SolveNonhydro` and
the other components take a *descriptor* from `icon4py.model.common.model_backends.BACKENDS`
(a dict: device and backend factory), and `model_options.customize_backend` builds a backend per
program from it (icon4py 0.4.1: for DaCe, unit horizontal stride everywhere, scan-loop unrolling
and access-node copy removal in both vertically implicit solvers, zero origin in
`compute_rho_theta_pgrad_and_update_vn`). So the names `gtfn_cpu`, `gtfn_gpu`, `dace_cpu` and
`dace_gpu` mean those descriptors, handed to icon4py unchanged; GT4Py's plain objects keep
names of their own (`dace_gpu_plain`, ...) for whoever asks for them.

Where icoforge calls a program itself (`icoforge run --compare`, `verify-all`, the tuner), it
asks icon4py's `customize_backend` for that program's backend, as `setup_program` would.
`recording_options()` collects what icon4py logs about each program it customized, so reports
can say which options each program of a peer got.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

PEERS = ("gtfn_cpu", "gtfn_gpu", "dace_cpu", "dace_gpu")
PLAIN_SUFFIX = "_plain"
PLAIN_PEERS = tuple(name + PLAIN_SUFFIX for name in PEERS)

# GT4Py's ready-made objects behind the plain names (module, attribute)
_PLAIN_OBJECTS = {
    "gtfn_cpu": ("gt4py.next.program_processors.runners.gtfn", "run_gtfn"),
    "gtfn_gpu": ("gt4py.next.program_processors.runners.gtfn", "run_gtfn_gpu"),
    "dace_cpu": ("gt4py.next.program_processors.runners.dace", "run_dace_cpu"),
    "dace_gpu": ("gt4py.next.program_processors.runners.dace", "run_dace_gpu"),
}

_OPTIONS_LOGGER = "icon4py.model.common.model_options"
# icon4py 0.4.1's line for a customized program (model_options.customize_backend)
_CUSTOM_LINE = re.compile(r"Using custom backend '(?P<backend>[^']*)' for '(?P<program>[^']*)' with options: (?P<options>.*)\.$", re.S)


def is_peer(name: str) -> bool:
    return name in PEERS


def is_descriptor(backend: Any) -> bool:
    """True for icon4py's backend descriptors (what the peer names resolve to)."""
    return isinstance(backend, dict)


def descriptor(name: str) -> dict[str, Any]:
    """icon4py's own descriptor for `name`: the very object in `model_backends.BACKENDS`, unchanged."""
    from icon4py.model.common import model_backends

    return model_backends.BACKENDS[name]


def plain(name: str) -> Any:
    """GT4Py's ready-made backend object for a peer name (with or without the `_plain` suffix)."""
    import importlib

    module, attribute = _PLAIN_OBJECTS[name.removesuffix(PLAIN_SUFFIX)]
    return getattr(importlib.import_module(module), attribute)


def source(name: str) -> str:
    """Where a peer's configuration comes from, in words (reports, granule-latest.json)."""
    if name.endswith(PLAIN_SUFFIX):
        module, attribute = _PLAIN_OBJECTS[name.removesuffix(PLAIN_SUFFIX)]
        return f"GT4Py's plain {module}.{attribute}, no per-program options"
    return (f"icon4py {icon4py_version()} model_backends.BACKENDS[{name!r}], customized per program by "
            "model_options.customize_backend")  # fmt: skip


def icon4py_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("icon4py-common")
    except metadata.PackageNotFoundError:
        return "?"


def program_name(program: Any) -> str:
    """The name icon4py's `customize_backend` keys its options on (`program.__name__`)."""
    return getattr(program, "__name__", "") or ""


def for_program(backend: dict[str, Any], program: Any) -> Any:
    """The GT4Py backend icon4py's `setup_program` would give `program` for the descriptor
    `backend`: `model_options.customize_backend(program, backend)`, once per (descriptor, program)
    in this process, so that a program compiled twice reuses one backend object and its caches."""
    from icon4py.model.common import model_options

    key = (id(backend), program_name(program))
    if key not in _CUSTOMIZED:
        _CUSTOMIZED[key] = (backend, model_options.customize_backend(program, backend))
    return _CUSTOMIZED[key][1]


def generic(name: str) -> Any:
    """The one backend icon4py makes of a peer's descriptor where no program is named (its field
    factories and test fixtures: `model_options.customize_backend(None, descriptor)`), for places
    that take a GT4Py Backend object rather than a descriptor."""
    return for_program(descriptor(name), None)


# (id of the descriptor, program name) -> (the descriptor, kept alive so its id stays its own; backend)
_CUSTOMIZED: dict[tuple[int, str], tuple[dict[str, Any], Any]] = {}


class _OptionsHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.options: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        match = _CUSTOM_LINE.match(record.getMessage())
        if match:
            self.options[match["program"]] = match["options"]


@contextlib.contextmanager
def recording_options() -> Iterator[dict[str, str]]:
    """Collect, per program name, the options icon4py logged while customizing a peer's backend
    inside the block (empty for icoforge's backends and GT4Py's plain objects, which icon4py
    takes as they are). The dict fills as icon4py constructs its programs."""
    logger = logging.getLogger(_OPTIONS_LOGGER)
    handler = _OptionsHandler()
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield handler.options
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def summarize(options: str) -> str:
    """icon4py's options line without what every program of the peer gets (device, factory), for
    a table cell: e.g. `use_zero_origin=True` or `scan_loop_unrolling=True, factor 0, hook
    TopLevelDataFlowStep`."""
    parts = []
    if "'use_zero_origin': True" in options:
        parts.append("use_zero_origin=True")
    if "'scan_loop_unrolling': True" in options:
        factor = re.search(r"'scan_loop_unrolling_factor': (\d+)", options)
        parts.append("scan_loop_unrolling=True" + (f", factor {factor[1]}" if factor else ""))
    hooks = re.findall(r"GT4PyAutoOptHook\.(\w+)", options)
    parts += [f"hook {h}" for h in hooks]
    for key in ("fuse_tasklets", "gpu_maxnreg", "gpu_block_size_2d", "make_persistent"):
        m = re.search(rf"'{key}': ([^,}}]+(?:\)[^,}}]*)?)", options)
        if m:
            parts.append(f"{key}={m[1]}")
    return ", ".join(parts) or "defaults"


def describe_for(name: str, program: Any) -> str:
    """One line for a command that runs one program on a peer: where the peer comes from and the
    options icon4py's `get_options` gives this program (the function `customize_backend` uses)."""
    if not is_peer(name):
        return f"{name}: {source(name)}" if name in PLAIN_PEERS else name
    from icon4py.model.common import model_options

    options = model_options.get_options(program_name(program), **descriptor(name))
    stride = "; unit horizontal stride" if name.startswith("dace") else ""
    return f"{name}: {source(name)}{stride}; {program_name(program)}: {summarize(str(options))}"


def peer_config(name: str, options: dict[str, str] | None = None) -> dict[str, Any]:
    """What `granule-latest.json` and the reports say about a backend's configuration."""
    if name.startswith("icoforge"):
        return {"source": "icoforge (this commit)"}
    config: dict[str, Any] = {"source": source(name)}
    if is_peer(name):
        config["unit_horizontal_stride"] = name.startswith("dace")  # make_custom_dace_backend sets it for every program
        config["programs"] = {p: summarize(o) for p, o in sorted((options or {}).items()) if summarize(o) != "defaults"}
    return config
