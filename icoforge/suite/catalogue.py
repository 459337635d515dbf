"""The catalogue of icon4py's dycore GT4Py programs, read from their signatures and GTIR.

Discovery imports `icon4py.model.atmosphere.dycore.stencils.*` and inspects each
`gt4py.next.ffront.decorator.Program` defined there (not re-exported ones). Everything here comes
from the program's type and its untransformed GTIR (`program.gtir`), which GT4Py builds in
milliseconds; nothing is compiled.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
import re
from collections.abc import Iterator

from gt4py.next.ffront.decorator import Program
from gt4py.next.iterator import ir as itir
from gt4py.next.type_system import type_specifications as ts

from icoforge.backend.frontend.gt4py_compat import program_signature
from icoforge.errors import UnknownNameError

STENCILS_PACKAGE = "icon4py.model.atmosphere.dycore.stencils"
# the four programs that take most of the dycore step's time (benchmarks, side-by-side runs)
BIG_FOUR = (
    "vertically_implicit_solver_at_predictor_step",
    "compute_rho_theta_pgrad_and_update_vn",
    "compute_advection_in_horizontal_momentum",
    "compute_horizontal_velocity_quantities_and_fluxes",
)


@dataclasses.dataclass(frozen=True)
class Param:
    """One program parameter: a field (dims + dtype) or a scalar (dtype only)."""

    name: str
    type: ts.FieldType | ts.ScalarType
    is_output: bool = False  # target of a `SetAt` (written by the program)
    is_read: bool = False  # referenced by a `SetAt` expression (read by the program)

    @property
    def is_field(self) -> bool:
        return isinstance(self.type, ts.FieldType)

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d.value for d in self.type.dims) if self.is_field else ()

    @property
    def dtype(self) -> str:
        """numpy dtype name: 'float64', 'int32', 'bool', ..."""
        scalar = self.type.dtype if self.is_field else self.type
        return scalar.kind.name.lower()

    @property
    def is_inout(self) -> bool:
        """Written and read by the same program: its initial values matter (never poisoned)."""
        return self.is_output and self.is_read


@dataclasses.dataclass(frozen=True)
class ProgramInfo:
    name: str
    module: str  # full module name
    program: Program = dataclasses.field(repr=False, compare=False)
    params: tuple[Param, ...]
    connectivities: tuple[str, ...]  # neighbour-table offsets used (E2C, C2E2CO, ...)
    has_scan: bool
    has_vertical_shift: bool  # uses Koff / K-shifts
    # scalar params used directly as a domain bound: (param, dimension, "start" | "stop")
    domain_bounds: tuple[tuple[str, str, str], ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.is_output)

    @property
    def inouts(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.is_inout)

    @property
    def fields(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_field)

    @property
    def scalars(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.is_field)

    @property
    def dims(self) -> tuple[str, ...]:
        """Non-local dimensions of the fields: horizontal ones sorted, then vertical ones,
        e.g. ('Cell', 'Edge', 'K')."""
        kinds = {d.value: d.kind for p in self.fields for d in p.type.dims}
        horizontal = sorted(n for n, k in kinds.items() if k == k.HORIZONTAL)
        vertical = sorted(n for n, k in kinds.items() if k == k.VERTICAL)
        return (*horizontal, *vertical)

    def bound_of(self, param: str) -> tuple[str, str] | None:
        """(dimension, "start" | "stop") if `param` is used directly as a domain bound."""
        for name, dim, side in self.domain_bounds:
            if name == param:
                return dim, side
        return None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UnknownNameError(f"parameter of {self.name}", name, [p.name for p in self.params])


# --- GTIR inspection -------------------------------------------------------------------------


def set_at_statements(body: list[itir.Stmt]) -> Iterator[itir.SetAt]:
    """All `SetAt`s of a program body, including those inside (nested) `IfStmt` branches."""
    for stmt in body:
        if isinstance(stmt, itir.IfStmt):
            yield from set_at_statements(stmt.true_branch)
            yield from set_at_statements(stmt.false_branch)
        elif isinstance(stmt, itir.SetAt):
            yield stmt
        else:
            raise TypeError(f"unexpected GTIR statement {type(stmt).__name__}")


def _symref_names(node: itir.Node) -> set[str]:
    return {str(n.id) for n in node.walk_values().if_isinstance(itir.SymRef)}


def _targets(stmt: itir.SetAt) -> set[str]:
    # a target is a SymRef or a (nested) make_tuple of SymRefs: every SymRef in it is written
    return _symref_names(stmt.target) - {"make_tuple"}


def _domain_bounds(stmt: itir.SetAt) -> set[tuple[str, str, str]]:
    bounds = set()
    for call in stmt.domain.walk_values().if_isinstance(itir.FunCall):
        if isinstance(call.fun, itir.SymRef) and call.fun.id == "named_range":
            axis, start, stop = call.args
            for side, bound in (("start", start), ("stop", stop)):
                if isinstance(bound, itir.SymRef):
                    bounds.add((str(bound.id), str(axis.value), side))
    return bounds


def _program_info(name: str, module: str, program: Program) -> ProgramInfo:
    gtir = program.gtir
    signature = program_signature(program)
    assert not signature.pos_only_args, f"{name}: positional-only parameters are not expected"
    param_types = {**signature.pos_or_kw_args, **signature.kw_only_args}

    written: set[str] = set()
    read: set[str] = set()
    bounds: set[tuple[str, str, str]] = set()
    for stmt in set_at_statements(gtir.body):
        written |= _targets(stmt)
        read |= _symref_names(stmt.expr)
        bounds |= _domain_bounds(stmt)

    params = tuple(
        Param(n, t, is_output=n in written, is_read=n in read) for n, t in param_types.items()
    )
    offsets = sorted(
        {str(o.value) for o in gtir.walk_values().if_isinstance(itir.OffsetLiteral) if isinstance(o.value, str)}
    )
    has_scan = any(str(r.id) == "scan" for r in gtir.walk_values().if_isinstance(itir.SymRef))
    has_kshift = any(True for _ in gtir.walk_values().if_isinstance(itir.CartesianOffset))
    return ProgramInfo(
        name=name,
        module=module,
        program=program,
        params=params,
        connectivities=tuple(offsets),
        has_scan=has_scan,
        has_vertical_shift=has_kshift,
        domain_bounds=tuple(sorted(bounds)),
    )


# --- discovery ---------------------------------------------------------------------------------


@functools.cache
def _discovered() -> dict[str, Program]:
    """name -> Program for every program defined in the stencils package (imports only)."""
    package = importlib.import_module(STENCILS_PACKAGE)
    found: dict[str, Program] = {}
    for mod_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{STENCILS_PACKAGE}.{mod_info.name}")
        for attr, value in vars(module).items():
            # only programs defined in this module; many modules import others' programs
            if isinstance(value, Program) and value.definition.__module__ == module.__name__:
                assert attr not in found, f"program {attr} defined twice"
                found[attr] = value
    return dict(sorted(found.items()))


@functools.cache
def _info(name: str) -> ProgramInfo:
    program = _discovered()[name]
    return _program_info(name, program.definition.__module__, program)


def program_names() -> tuple[str, ...]:
    return tuple(_discovered())


def all_programs() -> tuple[ProgramInfo, ...]:
    """Every program of icon4py's dycore stencils package, sorted by name."""
    return tuple(_info(name) for name in _discovered())


def matches(pattern: str, name: str) -> bool:
    """`pattern` as a substring of `name`, or its words (split at _, - and spaces) each one a
    substring, in any order: "theta_rho" finds compute_rho_theta_pgrad_and_update_vn."""
    pattern, name = pattern.lower(), name.lower()
    words = [w for w in re.split(r"[\s_\-]+", pattern) if w]
    return pattern in name or all(w in name for w in words)


def find_programs(pattern: str) -> tuple[str, ...]:
    """Names of the programs `pattern` matches (see `matches`); all of them for ""."""
    return tuple(n for n in program_names() if matches(pattern, n))


def get_program(name: str) -> ProgramInfo:
    """The program called `name`; a misspelt name raises UnknownNameError with suggestions (and,
    for a part of a name, the programs that contain it)."""
    if name not in _discovered():
        error = UnknownNameError("program", name, program_names(), see="icoforge list")
        found = [n for n in find_programs(name) if n not in error.suggestions][:5] if name else []
        if found:
            error.args = (f"{error.args[0]} Names containing it: {', '.join(found)}.",)
        raise error
    return _info(name)


def program_info(program: Program, name: str | None = None) -> ProgramInfo:
    """The catalogue's view of any GT4Py program, not only the dycore's: inputs, runs and
    verification then work as for the catalogue (its arguments' rules in ranges.py, by name)."""
    if not isinstance(program, Program):
        raise TypeError(f"not a GT4Py program: {program!r}")
    return _program_info(name or program.definition.__name__, program.definition.__module__, program)
