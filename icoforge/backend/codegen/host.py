"""The host launch plan of the CUDA/HIP target: generated Python, `launch(args, offset_provider,
kernels, rt)`, that evaluates domain bounds and host conditions, checks the arguments (extents,
aliasing, 32-bit indices), takes temporaries from the runtime's pool (`gpu.Runtime`), computes
the strides of each stride set (kernels with the schedule's `stride_sets` on; a call whose fields
do not fit a set raises `host_checks.StrideSetMismatch` before any launch, and `gpu.bind_program`
runs the program's per-field-strides variant instead) and launches the kernels of `cuda.py` in
order, with their parameters in `kernel_param_order`.

Names: the plan's own names (`rt`, `np`, `math`, `args`, `h0`..`k1`, the checks it imports from
host_checks.py: `_require`, `_distinct`, ...) are fixed; every name made from a program's symbol
is `<role>_<symbol>` with a one-letter role (`names`), a form no fixed name has, so a field
called `rt` or `np` is `a_rt` / `a_np` and breaks nothing. Fields, temporaries and tables share
the IR's one namespace of arrays (`v_`, `r_`), as `ProgramIR.field` and `access.Requirement.field`
do; scalars (program and kernel) share `s_`.

Host expressions mean what `PyHostRenderer` prints; `evaluate` runs the same text with concrete
values, so the perf models see the sizes the plan computes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from icoforge.backend.ir import ir
from icoforge.backend.schedule.access import bounds_requirements, copying_statements, kernel_aliasing, statements_opened_by
from icoforge.backend.codegen.common import ExprRenderer
from icoforge.backend.codegen.cuda import WIDE_SUFFIX, kernel_param_order, stride_sets
from icoforge.backend.ir.dtypes import DTYPES
from icoforge.backend.schedule.schedule import KernelLaunch
from icoforge.errors import IcoforgeError


@dataclasses.dataclass(frozen=True)
class _Role:
    prefix: str  # one lower-case letter

    def __call__(self, symbol: str) -> str:
        return f"{self.prefix}_{symbol}"


class names:  # noqa: N801 (a namespace)
    """The plan's name for a program symbol in each role (see the module's docstring)."""

    arg = _Role("a")  # the call's argument as passed (a field object, a scalar value)
    scalar = _Role("s")  # a scalar's value, typed (NumPy scalar of its dtype)
    view = _Role("v")  # an array's view: (pointer, strides...) as the kernels take it (stride sets: the pointer)
    ranges = _Role("r")  # an array's index range per dimension
    targets = _Role("t")  # [lo, hi) of the indices a table's rows of the current kernel hold
    # the strides a stride set of fields or temporaries passes, `g_<n>` (n: the set's number in the
    # plan, not a symbol: symbols do not start with a digit)
    strides = _Role("g")
    # the views of one statement's copied inputs (access.StatementGroup), `c_<n>` (n: the statement)
    statement = _Role("c")


class PyHostRenderer(ExprRenderer):
    """Host expressions as Python over the call's scalars (`s_<name>`): the one definition of what
    a host expression means (the plan runs it; `evaluate` runs it for the perf models)."""

    def r_Param(self, e: ir.Param) -> str:
        return names.scalar(e.name)

    def r_Const(self, e: ir.Const) -> str:
        return repr(e.value)

    def r_FieldBound(self, e: ir.FieldBound) -> str:
        return f"rt.bound({names.arg(e.field)}, {e.axis}, {e.stop})"

    def r_Binary(self, e: ir.Binary) -> str:
        ops = {"and_": "and", "or_": "or", "xor_": "!=", "divides": "/" if e.dtype in ir.FLOAT_DTYPES else "//"}
        op = ops.get(e.op, ir.BINARY_OPS[e.op])
        return f"({self.render(e.lhs)} {op} {self.render(e.rhs)})"

    def r_Unary(self, e: ir.Unary) -> str:
        return f"({'-' if e.op == 'neg' else 'not '}{self.render(e.arg)})"

    def r_Call(self, e: ir.Call) -> str:
        args = ", ".join(self.render(a) for a in e.args)
        fn = {"minimum": "min", "maximum": "max", "power": "math.pow", "abs": "abs"}.get(e.fn, f"math.{e.fn}")
        return f"{fn}({args})"

    def r_Cast(self, e: ir.Cast) -> str:
        conv = "float" if e.dtype in ir.FLOAT_DTYPES else ("bool" if e.dtype == "bool" else "int")
        return f"{conv}({self.render(e.arg)})"

    def r_Select(self, e: ir.Select) -> str:
        return f"({self.render(e.a)} if {self.render(e.cond)} else {self.render(e.b)})"


NP_TYPES = {name: d.numpy(name) for name, d in DTYPES.items()}




def launch_grid(launch: KernelLaunch) -> tuple[str, str, str]:
    """(grid, block, largest index a thread forms) as Python expressions over h0, h1, k0, k1."""
    bx, by = launch.block
    hpt, kpt = launch.h_per_thread, launch.k_per_thread
    if launch.kind == "single":
        return "(1, 1, 1)", "(1, 1, 1)", "max(h1, k1)"
    if launch.kind == "vmap":
        n = bx * kpt
        gx = f"(k1 - k0 + {n - 1}) // {n}"
        return f"({gx}, 1, 1)", f"({bx}, 1, 1)", f"k0 + ({gx}) * {n}"
    n = bx * hpt
    gx = f"(h1 - h0 + {n - 1}) // {n}"
    h_last = f"h0 + ({gx}) * {n}"
    if launch.kind == "map2d":
        m = by * kpt
        gy = f"(k1 - k0 + {m - 1}) // {m}"
        return f"({gx}, {gy}, 1)", f"({bx}, {by}, 1)", f"max({h_last}, k0 + ({gy}) * {m})"
    return f"({gx}, 1, 1)", f"({bx}, 1, 1)", f"max({h_last}, k1)"


def _table_set(st) -> bool:
    """A table's stride set: the table alone, every stride its own (passed as they are)."""
    return st.unit is None and len(st.members) == 1


def render_host_plan(program: ir.ProgramIR, launches: dict[str, KernelLaunch]) -> str:
    """Python source of `launch(args, offset_provider, kernels, rt)`; `rt` gives views and the pool."""
    plan = _HostPlan(program, launches)
    plan.prologue()
    plan.steps(program.steps, "    ")
    return "\n".join(plan.lines) + "\n"


class _HostPlan:
    """The lines of one host plan, written top to bottom: `prologue` (argument views, tables,
    temporaries), then the steps (bounds checks and launches of each kernel, host conditionals)."""

    def __init__(self, program: ir.ProgramIR, launches: dict[str, KernelLaunch]):
        self.program, self.launches = program, launches
        self.hr = PyHostRenderer()
        self.lines: list[str] = []
        self.tables = {t.name: t for t in program.tables}
        # statements lowered to several kernels with hazards: their copied inputs (host_checks._statement_inputs)
        self.statements = copying_statements(program)
        self.opened: set[int] = set()
        self.dim_size = {dim: f"int(offset_provider[{tag!r}].ndarray.shape[0])" for dim, tag in program.dim_size_tables}
        # the stride sets of fields and temporaries of the kernels with `stride_sets` on, each
        # (members, unit) once: (members, unit) -> the plan's name of its strides
        self.sets: dict[tuple, str] = {}
        for k in program.kernels():
            if launches[k.name].schedule.stride_sets:
                for st in stride_sets(k, program):
                    if not _table_set(st):
                        self.sets.setdefault((st.members, st.unit, st.unit_dim), names.strides(str(len(self.sets))))

    def prologue(self) -> None:
        program, hr, lines = self.program, self.hr, self.lines
        lines += [
            f"# Host plan of `{program.name}` (generated by icoforge).",
            "import math",
            "import numpy as np",
            "from icoforge.backend.runtime.host_checks import " + ", ".join(self.checks_used()),
        ]
        refused, same_view = kernel_aliasing(program)
        self.refused, self.same_view = tuple(dict.fromkeys((*program.distinct, *refused))), same_view
        if self.refused or same_view:  # made once, not per call
            lines += ["", f"DISTINCT = frozenset({self.refused!r})", f"SAME_VIEW = frozenset({same_view!r})"]
        lines += ["", "def launch(args, offset_provider, kernels, rt):"]
        args = [names.arg(p.name) for p in program.params]
        lines.append(f"    ({', '.join(args)},) = args" if args else "    pass")
        ranges: dict[str, str] = {}  # array -> Python expression of its index ranges (32-bit checks)
        for p in program.params:
            if isinstance(p, ir.FieldParam):  # view and index ranges (32-bit and extent checks)
                view, rng, arg = names.view(p.name), names.ranges(p.name), names.arg(p.name)
                lines.append(f"    {view}, {rng} = rt.field({arg}, {len(p.dims)}, {NP_TYPES[p.dtype]})")
            else:
                lines.append(f"    {names.scalar(p.name)} = {NP_TYPES[p.dtype]}({names.arg(p.name)})")
        if self.refused or self.same_view:  # moved accesses (copy forwarding, fusion); a kernel's own fields
            involved = sorted({f for pair in (*self.refused, *self.same_view) for f in pair})
            named = ", ".join(f"{f!r}: {names.arg(f)}" for f in involved)
            if not self.same_view:
                lines.append(f"    _distinct(rt, {program.name!r}, {{{named}}}, DISTINCT)")
            else:
                views = ", ".join(f"{f!r}: {names.view(f)}" for f in involved)
                lines.append(f"    _aliasing(rt, {program.name!r}, {{{named}}}, {{{views}}}, DISTINCT, SAME_VIEW)")
        for t in program.tables:
            lines.append(f"    {names.view(t.name)} = rt.table(offset_provider, {t.name!r})")
            ranges[t.name] = f"rt.ranges(offset_provider[{t.name!r}].ndarray, 2)"
        for t in program.temporaries:
            d = t.domain
            h = f"({hr(d.h_start)}, {hr(d.h_end)})" if d.hdim else "None"
            kk = f"({hr(d.k_start)}, {hr(d.k_end)})" if d.k_start is not None else "None"
            lines.append(f"    {names.view(t.name)} = rt.temporary({t.name!r}, {h}, {kk}, {NP_TYPES[t.dtype]})")
            ranges[t.name] = "[" + ", ".join(x for x in (h, kk) if x != "None") + "]"

        for name in ranges:
            lines.append(f"    {names.ranges(name)} = {ranges[name]}")
        # before any launch: a call whose fields do not fit their stride set raises StrideSetMismatch
        for (members, unit, unit_dim), var in self.sets.items():
            views = ", ".join(f"({m!r}, {names.view(m)})" for m in members)
            where = "None" if unit is None else repr((unit, unit_dim))
            lines.append(f"    {var} = _shared({program.name!r}, ({views},), {where})")

    def checks_used(self) -> list[str]:
        """The names the plan imports from host_checks (those of stride sets only where it has some)."""
        used = ["_aliasing", "_as32", "_distinct", "_fits32", "_idx32", "_points32", "_require", "_statement_inputs"]
        if self.sets:
            used += ["_reach32", "_shared", "_strides32"]
        return sorted(used)

    def checks(self, k: ir.Kernel, ind: str) -> None:
        """Every unconditional access of the kernel inside the extent of its field (a field of the
        wrong shape is an error, never an out-of-bounds read on the device)."""
        tables, dim_size = self.tables, self.dim_size
        scanned: set[str] = set()

        for req in bounds_requirements(k, self.program, set(dim_size)):
            if req.lo == "table_lo" and req.table not in scanned:
                scanned.add(req.table)
                skip = tables[req.table].skip_value
                self.lines.append(f"{ind}{names.targets(req.table)} = rt.table_targets(offset_provider, {req.table!r}, h0, h1, {skip})")
            size = dim_size.get(tables[req.table].target_dim, "") if req.table else ""
            targets = names.targets(req.table) if req.table else ""
            lo, hi = req.bound_exprs(f"{targets}[0]", f"{targets}[1]", size)
            have = f"{names.ranges(req.field)}[{req.d}]"
            self.lines.append(f"{ind}_require({k.name!r}, {req.field!r}, {req.dim!r}, {have}, {lo}, {hi})")

    def steps(self, ss: tuple[ir.Step, ...], ind: str) -> None:
        lines = self.lines
        for s in ss:
            for g in statements_opened_by(s, self.statements, self.opened):  # before the step holding its first kernel
                self.statement_inputs(g, ind)
            if isinstance(s, ir.Kernel):
                self.kernel(s, ind)
            else:
                lines.append(f"{ind}if {self.hr(s.cond)}:")
                n = len(lines)
                self.steps(s.then, ind + "    ")
                if len(lines) == n:
                    lines.append(f"{ind}    pass")
                if s.orelse:
                    lines.append(f"{ind}else:")
                    self.steps(s.orelse, ind + "    ")

    def statement_inputs(self, g: Any, ind: str) -> None:
        """The views of the statement's copied inputs, copies where they share memory with one of
        its outputs (host_checks._statement_inputs)."""
        outputs = ", ".join(names.arg(f) for f in g.outputs)
        inputs = ", ".join(f"{f!r}: ({names.arg(f)}, {names.view(f)})" for f in g.copied)
        self.lines.append(f"{ind}{names.statement(str(g.statement))} = _statement_inputs(rt, {self.program.name!r}, "
                          f"({outputs},), {{{inputs}}})")

    def kernel(self, s: ir.Kernel, ind: str) -> None:
        """Domain, bounds checks, kernel arguments and launch of one kernel."""
        hr, lines = self.hr, self.lines
        la = self.launches[s.name]
        bits = la.schedule.index_bits
        d = s.domain
        h0, h1 = (hr(d.h_start), hr(d.h_end)) if d.hdim else ("0", "1")
        k0, k1 = (hr(d.k_start), hr(d.k_end)) if d.k_start is not None else ("0", "1")
        lines.append(f"{ind}h0, h1, k0, k1 = int({h0}), int({h1}), int({k0}), int({k1})")
        lines.append(f"{ind}if h0 < h1 and k0 < k1:")
        self.checks(s, ind + "    ")
        for p, v in s.args:
            lines.append(f"{ind}    {names.scalar(p.name)} = {NP_TYPES[p.dtype]}({hr(v)})")
        grid, block, last = launch_grid(la)
        shared = la.schedule.stride_sets
        arrays = [n for kind, n in kernel_param_order(s, self.program, shared) if kind in ("field", "table")]
        if bits == 32:
            lines.append(f"{ind}    _points32({s.name!r}, {last})")
            if shared:  # without stride sets each array's 32-bit view is checked as it is passed (kernel_args)
                checked = ", ".join(f"({n!r}, {names.view(n)}, {names.ranges(n)})" for n in arrays)
                lines.append(f"{ind}    _reach32({s.name!r}, [{checked}])")

        def launch_line(name: str, bits: int | str, at: str) -> str:
            return f"{at}rt.launch(kernels[{name!r}], {grid}, {block}, ({self.kernel_args(s, bits)},))"

        if bits == "auto":  # the 32-bit kernel when this call's indices fit, else its twin
            fits = ", ".join(f"({names.view(n)}, {names.ranges(n)})" for n in arrays)
            lines.append(f"{ind}    if _fits32({last}, [{fits}]):")
            lines.append(launch_line(s.name, "auto", ind + "        "))
            lines.append(f"{ind}    else:")
            lines.append(launch_line(s.name + WIDE_SUFFIX, 64, ind + "        "))
        else:
            lines.append(launch_line(s.name, bits, ind + "    "))

    def kernel_args(self, s: ir.Kernel, bits: int | str) -> str:
        """Stride sets off: per array its view, `bits` 64: as it is; 32: a checked 32-bit view;
        "auto": a 32-bit view that _fits32 has checked already. On: a pointer per array, the
        strides of each stride set (computed and checked in the prologue; a table's its own), as
        they are (64) or as 32-bit integers (`_reach32` or `_fits32` checked the indices before).
        Then the scalars and the bounds."""
        shared = self.launches[s.name].schedule.stride_sets
        array_arg = {64: "*{v}", 32: "*_idx32({k!r}, {n!r}, {v}, {r})", "auto": "*_as32({v})"}[bits]
        sets = {st.name: st for st in stride_sets(s, self.program)} if shared else {}
        kargs = []
        copied = self.statements[s.statement].copied if s.statement in self.statements else ()
        for kind, n in kernel_param_order(s, self.program, shared):
            if kind in ("field", "table"):
                v = f"{names.statement(str(s.statement))}[{n!r}]" if n in copied else names.view(n)
                kargs.append(f"{v}[0]" if shared else array_arg.format(k=s.name, n=n, v=v, r=names.ranges(n)))
            elif kind == "strides":
                st = sets[n]
                strides = f"{names.view(st.members[0])}[1:]" if _table_set(st) else self.sets[(st.members, st.unit, st.unit_dim)]
                kargs.append(f"*{strides}" if bits == 64 else f"*_strides32({strides})")
            else:
                dtype = next(p.dtype for p in s.params_used() if p.name == n)
                kargs.append(f"{NP_TYPES[dtype]}({names.scalar(n)})")
        kargs += ["np.int32(h0)", "np.int32(h1)", "np.int32(k0)", "np.int32(k1)"]
        return ", ".join(kargs)


# --- host expressions with concrete values (the perf models) -------------------------------------


class HostEvalError(IcoforgeError):
    pass


Ranges = Sequence[tuple[int, int]]  # (start, stop) per field dimension


@functools.lru_cache(maxsize=4096)
def _compiled(e: ir.Expr) -> tuple[Any, str]:
    source = PyHostRenderer()(e)
    return compile(source, "<icoforge host expression>", "eval"), source


class _Bounds:
    """`rt` of an evaluated expression: `rt.bound(field, axis, stop)` as `gpu.Runtime.bound`, over
    the index ranges given for a field (bound to the field's argument name)."""

    @staticmethod
    def bound(ranges: Ranges, axis: int, stop: bool) -> int:
        start, end = ranges[axis]
        return int(end if stop else start)


def evaluate(e: ir.Expr, scalars: Mapping[str, Any], fields: Mapping[str, Ranges] | None = None) -> Any:
    """Value of host expression `e` as the host plan computes it (the plan's own text, run here):
    `scalars` by parameter name (Python numbers: NumPy scalars are unwrapped), `fields` the index
    ranges of field arguments (for `FieldBound`)."""
    code, source = _compiled(e)
    env: dict[str, Any] = {"math": math, "rt": _Bounds}
    env.update((names.scalar(n), v.item() if hasattr(v, "item") else v) for n, v in scalars.items())
    env.update((names.arg(n), r) for n, r in (fields or {}).items())
    try:
        return eval(code, env)  # noqa: S307 (our own printed expression)
    except NameError as err:
        symbol = str(err).split("'")[1] if "'" in str(err) else str(err)
        what = "scalar" if symbol.startswith(names.scalar("")) else "field's index ranges"
        raise HostEvalError(f"no value for {what} {symbol[2:]!r} in host expression {e} ({source})") from None
    except (AttributeError, TypeError) as err:
        raise HostEvalError(f"host expression {e} cannot be evaluated ({source}): {err}") from None


def domain_ranges(
    d: ir.Domain, scalars: Mapping[str, Any], fields: Mapping[str, Ranges] | None = None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((h0, h1), (k0, k1)) of a domain; a missing dimension is (0, 1), as the plan's launches."""
    h = (int(evaluate(d.h_start, scalars, fields)), int(evaluate(d.h_end, scalars, fields))) if d.hdim else (0, 1)
    k = (int(evaluate(d.k_start, scalars, fields)), int(evaluate(d.k_end, scalars, fields))) if d.k_start is not None else (0, 1)
    return h, k
