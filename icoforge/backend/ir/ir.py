"""icoforge kernel IR: what runs where, with every memory access explicit.

A `ProgramIR` is a list of host steps (kernel launches, host-side conditionals, copies) over
fields, temporaries and neighbour tables. A kernel is a map or a scan over a horizontal range x a
vertical range; its body is straight-line code (`Let`, `Store`) with structured conditionals
(`If`) where GT4Py's `if_` guards work that must not run in the branch not taken.

Expressions are small frozen dataclasses. The same `Expr` type serves kernel bodies (which may use
`HIndex`, `KIndex`, `Load`, `Table`) and host code (domain bounds, kernel-argument values, host
conditions: only `Const`, `Param`, `FieldBound` and operators).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Union

from icoforge.backend.ir.dtypes import ITEMSIZE

# dtype names are GT4Py's scalar kind names, lower case: float64, float32, int32, int64, bool, ...
FLOAT_DTYPES = ("float64", "float32")


def result_dtype(a: str, b: str) -> str:
    """Usual arithmetic conversion for mixed operands (GT4Py type-checks; this is a fallback)."""
    if a == b:
        return a
    for d in ("float64", "float32", "int64", "uint64", "int32", "uint32", "int16", "int8", "bool"):
        if d in (a, b):
            return d
    return a


class Expr:
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        yield self
        for c in self.children():
            yield from c.walk()

    def __str__(self) -> str:  # pragma: no cover - overridden
        return repr(self)


@dataclass(frozen=True)
class Const(Expr):
    value: Union[int, float, bool]
    dtype: str

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Param(Expr):
    """A scalar parameter of the program (host) or a scalar argument of a kernel (device)."""

    name: str
    dtype: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class FieldBound(Expr):
    """Host only: first (`stop=False`) or one-past-last index of a field argument along a dimension."""

    field: str
    dim: str
    axis: int  # position of `dim` among the field's dimensions
    stop: bool
    dtype: str = "int32"

    def __str__(self) -> str:
        return f"{'stop' if self.stop else 'start'}({self.field}, {self.dim})"


@dataclass(frozen=True)
class HIndex(Expr):
    """The horizontal index of the point a kernel computes."""

    dtype: str = "int32"

    def __str__(self) -> str:
        return "i"


@dataclass(frozen=True)
class KIndex(Expr):
    """The vertical level a kernel computes."""

    dtype: str = "int32"

    def __str__(self) -> str:
        return "k"


@dataclass(frozen=True)
class Var(Expr):
    name: str
    dtype: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Table(Expr):
    """Neighbour index: row `row` of connectivity `table`, column `col` (may be the skip value)."""

    table: str
    row: Expr
    col: int
    dtype: str = "int32"

    def children(self) -> tuple[Expr, ...]:
        return (self.row,)

    def __str__(self) -> str:
        return f"{self.table}[{self.row}, {self.col}]"


@dataclass(frozen=True)
class Load(Expr):
    """`field` at one index per field dimension (horizontal, local and vertical, in the field's order)."""

    field: str
    index: tuple[Expr, ...]
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return self.index

    def __str__(self) -> str:
        return f"{self.field}[{', '.join(map(str, self.index))}]"


UNARY_OPS = ("neg", "not_")
BINARY_OPS = {
    "plus": "+",
    "minus": "-",
    "multiplies": "*",
    "divides": "/",
    "mod": "%",
    "eq": "==",
    "not_eq": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
    "and_": "&&",
    "or_": "||",
    "xor_": "^",
}
COMPARISONS = ("eq", "not_eq", "less", "less_equal", "greater", "greater_equal")


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    arg: Expr
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def __str__(self) -> str:
        return f"{'-' if self.op == 'neg' else '!'}{_paren(self.arg)}"


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # a key of BINARY_OPS
    lhs: Expr
    rhs: Expr
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return (self.lhs, self.rhs)

    def __str__(self) -> str:
        return f"{_paren(self.lhs)} {BINARY_OPS[self.op]} {_paren(self.rhs)}"


@dataclass(frozen=True)
class Call(Expr):
    """A math builtin (GT4Py name: sqrt, power, minimum, maximum, abs, floor, ...)."""

    fn: str
    args: tuple[Expr, ...]
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Cast(Expr):
    arg: Expr
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def __str__(self) -> str:
        return f"{self.dtype}({self.arg})"


@dataclass(frozen=True)
class Select(Expr):
    """`cond ? a : b`, evaluated lazily: only the chosen side runs."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.a, self.b)

    def __str__(self) -> str:
        return f"({self.cond} ? {self.a} : {self.b})"


def _paren(e: Expr) -> str:
    s = str(e)
    return f"({s})" if isinstance(e, (Binary, Select)) else s


# ---------------------------------------------------------------------------------------------
# Kernel bodies


class Stmt:
    pass


@dataclass(frozen=True)
class Let(Stmt):
    """Define `var` (declared here unless `declared`, then it is an assignment)."""

    var: Var
    value: Expr
    declared: bool = False

    def __str__(self) -> str:
        return f"{self.var.name} = {self.value}" if self.declared else f"{self.var.dtype} {self.var.name} = {self.value}"


@dataclass(frozen=True)
class Declare(Stmt):
    var: Var

    def __str__(self) -> str:
        return f"{self.var.dtype} {self.var.name}"


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]

    def __str__(self) -> str:
        t = "; ".join(map(str, self.then))
        e = "; ".join(map(str, self.orelse))
        return f"if ({self.cond}) {{ {t} }} else {{ {e} }}"


@dataclass(frozen=True)
class Store(Stmt):
    """Write `value` to `field` at the kernel's current point (i, k)."""

    field: str
    value: Expr

    def __str__(self) -> str:
        return f"{self.field}[i, k] = {self.value}"


def walk_stmts(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    for s in stmts:
        yield s
        if isinstance(s, If):
            yield from walk_stmts(s.then)
            yield from walk_stmts(s.orelse)


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    if isinstance(s, (Let, Store)):
        return (s.value,)
    if isinstance(s, If):
        return (s.cond,)
    return ()


def walk_body_exprs(stmts: tuple[Stmt, ...]) -> Iterator[Expr]:
    for s in walk_stmts(stmts):
        for e in stmt_exprs(s):
            yield from e.walk()


# ---------------------------------------------------------------------------------------------
# Kernels and programs


@dataclass(frozen=True)
class Domain:
    """Half-open ranges; `hdim` is None for purely vertical kernels, `k_start` None without K."""

    hdim: str | None
    h_start: Expr | None
    h_end: Expr | None
    k_start: Expr | None
    k_end: Expr | None

    def constant_levels(self) -> tuple[int, int] | None:
        """[first, last] level when both vertical bounds are constants, else None."""
        if isinstance(self.k_start, Const) and isinstance(self.k_end, Const):
            return int(self.k_start.value), int(self.k_end.value) - 1
        return None

    def __str__(self) -> str:
        parts = []
        if self.hdim is not None:
            parts.append(f"{self.hdim}: [{self.h_start}, {self.h_end})")
        if self.k_start is not None:
            parts.append(f"K: [{self.k_start}, {self.k_end})")
        return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class ScanState:
    var: Var
    init: Expr


@dataclass(frozen=True)
class Kernel:
    """One launch. `args` are the scalar values computed on the host and passed in (Param names).

    For a scan, `state` lists the carried variables: the body reads them (as `Var`s) and must end
    with `Let(var, new_value, declared=True)` for each; `forward` gives the k direction. `column`:
    walked like a scan (one thread per column, levels in order) even without state (fuse.py's
    column fusion).

    `then` (sweep fusion, passes/sweeps.py): after its own walk, the same thread walks its column
    again as that scan (same columns; its own levels, direction, state and prologue; its host
    arguments kept apart from these by name). `on_chip`: temporaries the walks pass to each other
    in per-column on-chip storage (shared memory), never in memory; the kernel owns them, so
    they are not among the program's temporaries and not among `fields_read`/`fields_written`.
    """

    name: str
    domain: Domain
    body: tuple[Stmt, ...]
    args: tuple[tuple[Param, Expr], ...] = ()
    state: tuple[ScanState, ...] = ()
    forward: bool = True
    prologue: tuple[Stmt, ...] = ()  # k-invariant statements, run once per column before the k loop
    column: bool = False
    then: Kernel | None = None
    on_chip: tuple[Temporary, ...] = ()
    statement: int | None = None  # GTIR statement split into several kernels (access.statement_groups)

    @property
    def is_scan(self) -> bool:
        return bool(self.state) or self.column

    def walks(self) -> tuple[Kernel, ...]:
        """The column walks one thread makes, in order: this kernel's own (without `then`), then
        `then`'s. One walk for every kernel but a sweep-fused one."""
        if self.then is None:
            return (self,)
        return (dataclasses.replace(self, then=None), *self.then.walks())

    def column_bytes(self) -> int:
        """Shared memory one column's on-chip values take (levels x item size of each)."""
        return sum((t.domain.constant_levels()[1] - t.domain.constant_levels()[0] + 1) * ITEMSIZE[t.dtype] for t in self.on_chip)

    def all_stmts(self) -> tuple[Stmt, ...]:
        return self.prologue + self.body

    def exprs(self) -> Iterator[Expr]:
        yield from walk_body_exprs(self.all_stmts())
        for st in self.state:
            yield from st.init.walk()
        if self.then is not None:
            yield from self.then.exprs()

    def fields_read(self) -> tuple[str, ...]:
        chip = {t.name for t in self.on_chip}
        return tuple(dict.fromkeys(e.field for e in self.exprs() if isinstance(e, Load) and e.field not in chip))

    def fields_written(self) -> tuple[str, ...]:
        chip = {t.name for t in self.on_chip}
        own = (s.field for s in walk_stmts(self.body) if isinstance(s, Store) and s.field not in chip)
        later = self.then.fields_written() if self.then is not None else ()
        return tuple(dict.fromkeys((*own, *(f for f in later if f not in chip))))

    def tables_used(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.table for e in self.exprs() if isinstance(e, Table)))

    def params_used(self) -> tuple[Param, ...]:
        """Scalars the kernel reads: its own host-computed `args` and program scalars."""
        found = dict.fromkeys(e for e in self.exprs() if isinstance(e, Param))
        for p, _ in self.args:
            found.setdefault(p)
        return tuple(found)

    def __str__(self) -> str:
        kind = f"scan({'forward' if self.forward else 'backward'})" if self.is_scan else "map"
        lines = [f"kernel {self.name}: {kind} over {self.domain}"]
        for t in self.on_chip:
            lines.append(f"  on chip {t.dtype} {t.name} over {t.domain} (per column, shared memory)")
        for p, v in self.args:
            lines.append(f"  arg {p.dtype} {p.name} = {v}")
        for st in self.state:
            lines.append(f"  state {st.var.dtype} {st.var.name} = {st.init}")
        if self.prologue:
            lines.append("  per column (k-invariant):")
            lines.extend(_fmt_stmts(self.prologue, "    "))
            lines.append("  per level:")
        lines.extend(_fmt_stmts(self.body, "  "))
        if self.then is not None:  # the next walk of the same column, by the same thread
            then = str(dataclasses.replace(self.then, name=f"then ({self.then.name})")).splitlines()
            lines += [f"  {line}" for line in then]
        return "\n".join(lines)


def _fmt_stmts(stmts: tuple[Stmt, ...], indent: str) -> list[str]:
    out = []
    for s in stmts:
        if isinstance(s, If):
            out.append(f"{indent}if ({s.cond}) {{")
            out.extend(_fmt_stmts(s.then, indent + "  "))
            out.append(f"{indent}}} else {{")
            out.extend(_fmt_stmts(s.orelse, indent + "  "))
            out.append(f"{indent}}}")
        else:
            out.append(f"{indent}{s}")
    return out


@dataclass(frozen=True)
class HostIf:
    cond: Expr
    then: tuple["Step", ...]
    orelse: tuple["Step", ...]


Step = Union[Kernel, HostIf]


@dataclass(frozen=True)
class FieldParam:
    name: str
    dims: tuple[str, ...]  # dimension names in the field's order
    dtype: str


@dataclass(frozen=True)
class Temporary:
    name: str
    dims: tuple[str, ...]
    dtype: str
    domain: Domain  # the extent to allocate


@dataclass(frozen=True)
class TableInfo:
    name: str  # offset name, e.g. "E2C"
    source_dim: str  # the dimension rows are indexed by (Edge for E2C)
    target_dim: str  # the dimension the entries index (Cell for E2C)
    max_neighbors: int
    skip_value: int | None
    dtype: str = "int32"


@dataclass(frozen=True)
class ProgramIR:
    name: str
    params: tuple[Union[FieldParam, Param], ...]  # in call order (GT4Py's)
    temporaries: tuple[Temporary, ...]
    tables: tuple[TableInfo, ...]
    steps: tuple[Step, ...]
    dim_kinds: tuple[tuple[str, str], ...] = ()  # dim name -> horizontal | vertical | local
    # a connectivity whose row count gives each horizontal dimension's size at run time (for
    # bounds checks of neighbour accesses); any offset-provider entry will do, used or not
    dim_size_tables: tuple[tuple[str, str], ...] = ()
    # (position among GT4Py's arguments, element count) of each tuple-of-fields argument; its
    # elements are consecutive entries of `params` (see `flat_call_args`)
    tuple_params: tuple[tuple[int, int], ...] = ()
    # pairs of field arguments that must not share memory: copy forwarding (forward.py) moved a
    # write of the first before accesses of the second; the host plans refuse such calls
    distinct: tuple[tuple[str, str], ...] = ()

    def kernels(self) -> list[Kernel]:
        return [k for s in self.steps for k in step_kernels(s)]

    def field(self, name: str) -> FieldParam | Temporary:
        for p in (*self.params, *self.temporaries):
            if isinstance(p, (FieldParam, Temporary)) and p.name == name:
                return p
        for k in self.kernels():  # a sweep-fused kernel's on-chip temporaries
            for t in k.on_chip:
                if t.name == name:
                    return t
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"program {self.name}("]
        for p in self.params:
            if isinstance(p, FieldParam):
                lines.append(f"  {p.name}: Field[{', '.join(p.dims)}, {p.dtype}]")
            else:
                lines.append(f"  {p.name}: {p.dtype}")
        lines.append(")")
        for t in self.temporaries:
            lines.append(f"temporary {t.name}: Field[{', '.join(t.dims)}, {t.dtype}] over {t.domain}")
        for tb in self.tables:
            skip = f", skip {tb.skip_value}" if tb.skip_value is not None else ""
            lines.append(f"table {tb.name}: {tb.source_dim} -> {tb.max_neighbors} x {tb.target_dim}{skip}")

        lines += format_steps(self.steps, lambda k: str(k).splitlines())
        return "\n".join(lines)


def format_steps(steps: tuple[Step, ...], kernel_lines, indent: str = "") -> list[str]:
    """The steps as `str(ProgramIR)` prints them, each kernel as `kernel_lines(kernel)` gives it."""
    lines: list[str] = []
    for s in steps:
        if isinstance(s, Kernel):
            lines.extend(indent + line for line in kernel_lines(s))
        else:
            lines.append(f"{indent}host if ({s.cond}) {{")
            lines += format_steps(s.then, kernel_lines, indent + "  ")
            lines.append(f"{indent}}} else {{")
            lines += format_steps(s.orelse, kernel_lines, indent + "  ")
            lines.append(f"{indent}}}")
    return lines


def step_kernels(step: Step) -> list[Kernel]:
    """The kernel a step launches, or the kernels in both branches of a host conditional."""
    if isinstance(step, Kernel):
        return [step]
    return [k for s in (*step.then, *step.orelse) for k in step_kernels(s)]


def map_step_kernels(steps: tuple[Step, ...], fn) -> tuple[Step, ...]:
    """`steps` with every kernel `k` (in host conditionals too, true branch first) replaced by `fn(k)`."""
    return tuple(fn(s) if isinstance(s, Kernel) else HostIf(s.cond, map_step_kernels(s.then, fn), map_step_kernels(s.orelse, fn)) for s in steps)


def map_kernels(program: ProgramIR, fn) -> ProgramIR:
    """`program` with every kernel `k` (in host conditionals too) replaced by `fn(k)`."""
    return dataclasses.replace(program, steps=map_step_kernels(program.steps, fn))


def rewrite(e: Expr, fn) -> Expr:
    """Rebuild `e` bottom-up, replacing each node by `fn(node)` (return the node to keep it)."""
    if isinstance(e, Table):
        e = dataclasses.replace(e, row=rewrite(e.row, fn))
    elif isinstance(e, Load):
        e = dataclasses.replace(e, index=tuple(rewrite(x, fn) for x in e.index))
    elif isinstance(e, Unary) or isinstance(e, Cast):
        e = dataclasses.replace(e, arg=rewrite(e.arg, fn))
    elif isinstance(e, Binary):
        e = dataclasses.replace(e, lhs=rewrite(e.lhs, fn), rhs=rewrite(e.rhs, fn))
    elif isinstance(e, Call):
        e = dataclasses.replace(e, args=tuple(rewrite(x, fn) for x in e.args))
    elif isinstance(e, Select):
        e = dataclasses.replace(e, cond=rewrite(e.cond, fn), a=rewrite(e.a, fn), b=rewrite(e.b, fn))
    return fn(e)


def rewrite_stmts(stmts: tuple[Stmt, ...], fn) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Let):
            out.append(dataclasses.replace(s, value=rewrite(s.value, fn)))
        elif isinstance(s, Store):
            out.append(dataclasses.replace(s, value=rewrite(s.value, fn)))
        elif isinstance(s, If):
            out.append(If(rewrite(s.cond, fn), rewrite_stmts(s.then, fn), rewrite_stmts(s.orelse, fn)))
        else:
            out.append(s)
    return tuple(out)
