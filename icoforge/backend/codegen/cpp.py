"""C++/OpenMP target: one CPython extension module per program.

Layout of the generated file:
  * `struct Args`: every field view, table view and scalar of one call;
  * one `static void <kernel>(const Args&, bounds..., kernel args...)` per kernel: OpenMP over the
    horizontal, the vertical loop inside, neighbour indices and k-invariant values per column;
  * `run(...)`: reads GT4Py's arguments (one C call, no per-argument Python work), checks shapes,
    aliasing and bounds, evaluates host conditions and domain bounds, runs the kernels.
"""

from __future__ import annotations

from icoforge.backend.ir import ir
from icoforge.backend.schedule.access import StatementGroup, bounds_requirements, copying_statements, statements_opened_by
from icoforge.backend.codegen.common import ExprRenderer, cname, ctype, render_stmts
from icoforge.backend.ir.dtypes import ITEMSIZE



class HostRenderer(ExprRenderer):
    """Host-side expressions: program scalars live in `a.<name>`."""

    def r_Param(self, e: ir.Param) -> str:
        return f"a.{cname(e.name)}"

    def r_FieldBound(self, e: ir.FieldBound) -> str:
        return f"a.{cname(e.field)}.{'stop' if e.stop else 'start'}[{e.axis}]"


def _views_of_kernel(k: ir.Kernel, program: ir.ProgramIR) -> list[tuple[str, bool]]:
    written = set(k.fields_written())
    names = list(dict.fromkeys([*k.fields_read(), *k.fields_written()]))
    return [(n, n in written) for n in names]


def kernel_comment(k: ir.Kernel) -> str:
    kind = f"scan ({'forward' if k.forward else 'backward'})" if k.is_scan else "map"
    return f"// {k.name}: {kind} over {k.domain}"


def render_kernel_cpp(k: ir.Kernel, program: ir.ProgramIR) -> str:
    r = ExprRenderer("std::")
    kernel_params = [f"const {ctype(p.dtype)} {cname(p.name)}" for p, _ in k.args]
    sig = ", ".join(["const Args& a", "const long h0", "const long h1", "const long k0", "const long k1", *kernel_params])
    lines = [kernel_comment(k), f"static void {k.name}({sig}) {{"]
    for name, written in _views_of_kernel(k, program):
        f = program.field(name)
        c = cname(name)
        const = "" if written else "const "
        lines.append(f"  {const}{ctype(f.dtype)}* __restrict__ {c} = a.{c}.ptr<{ctype(f.dtype)}>();")
        strides = ", ".join(f"{c}_s{d} = a.{c}.s[{d}]" for d in range(len(f.dims)))
        lines.append(f"  const long {strides};")
    for t in k.tables_used():
        tb = next(x for x in program.tables if x.name == t)
        c = cname(t)
        lines.append(f"  const {ctype(tb.dtype)}* __restrict__ {c} = a.{c}.ptr<{ctype(tb.dtype)}>();")
        lines.append(f"  const long {c}_s0 = a.{c}.s[0], {c}_s1 = a.{c}.s[1];")
    kernel_arg_names = {p.name for p, _ in k.args}
    for p in k.params_used():
        if p.name not in kernel_arg_names:
            lines.append(f"  const {ctype(p.dtype)} {cname(p.name)} = a.{cname(p.name)};")

    def store(field: str, value: str) -> str:
        f = program.field(field)
        c = cname(field)
        idx = tuple(ir.HIndex() if program_dim_kind(program, d) == "horizontal" else ir.KIndex() for d in f.dims)
        return f"{c}[{r.offset(c, idx)}] = {value};"

    has_h, has_k = k.domain.hdim is not None, k.domain.k_start is not None
    # threads only where there is enough work to pay for the fork/join
    omp_if = "if ((h1 - h0) * (k1 - k0) >= 65536)"
    if has_h and has_k and not k.is_scan:
        # Two loop orders, chosen per call by the layout: levels innermost when they are contiguous
        # (NumPy C order), the horizontal innermost otherwise (GT4Py's allocators).
        written = k.fields_written()[0]
        lines.append(f"  if ({cname(written)}_s1 == 1) {{")
        lines.extend(_column_loops(k, r, store, omp_if, "    "))
        lines.append("  } else {")
        # Levels outside, the horizontal inside, each thread the same static share of every level
        # (a map: no point depends on another, so no barrier between levels). Not `collapse(2)`:
        # GCC's collapsed loop recomputes (k, i) from one counter and is neither hoisted nor
        # vectorised; it ran R2B3/10's diffusion programs 1.3-5x slower, threaded or not (issue 48).
        lines.append(f"#pragma omp parallel {omp_if}")
        lines.append("    for (long k = k0; k < k1; ++k) {")
        lines.append("#pragma omp for schedule(static) nowait")
        lines.append("      for (long i = h0; i < h1; ++i) {")
        lines.extend(render_stmts(k.prologue + k.body, r, "        ", store))
        lines.append("      }")
        lines.append("    }")
        lines.append("  }")
    else:
        lines.extend(_column_loops(k, r, store, omp_if, "  "))
    lines.append("}")
    return "\n".join(lines)


def _column_loops(k: ir.Kernel, r: ExprRenderer, store, omp_if: str, ind: str) -> list[str]:
    """One column per iteration of the horizontal loop: k-invariant values once per column."""
    lines: list[str] = []
    has_h, has_k = k.domain.hdim is not None, k.domain.k_start is not None
    outer = ind
    if has_h:
        lines.append(f"#pragma omp parallel for schedule(static) {omp_if}")
        lines.append(f"{ind}for (long i = h0; i < h1; ++i) {{")
        ind += "  "
    lines.extend(render_stmts(k.prologue, r, ind, store))
    for st in k.state:
        lines.append(f"{ind}{ctype(st.var.dtype)} {cname(st.var.name)} = {r(st.init)};")
    if has_k:
        loop = "for (long k = k0; k < k1; ++k)" if k.forward else "for (long k = k1 - 1; k >= k0; --k)"
        lines.append(f"{ind}{loop} {{")
        lines.extend(render_stmts(k.body, r, ind + "  ", store))
        lines.append(f"{ind}}}")
    else:
        lines.extend(render_stmts(k.body, r, ind, store))
    if has_h:
        lines.append(f"{outer}}}")
    return lines


def program_dim_kind(program: ir.ProgramIR, dim: str) -> str:
    return dict(program.dim_kinds)[dim]


# ---------------------------------------------------------------------------------------------
# host side


def _dim_size_exprs(program: ir.ProgramIR) -> dict[str, str]:
    """Size of a horizontal dimension at run time: the row count of a table indexed by it."""
    return {dim: f"size_{dim}" for dim, _ in program.dim_size_tables}


def render_host_checks(k: ir.Kernel, program: ir.ProgramIR, indent: str, base: str = "a") -> list[str]:
    lines: list[str] = []
    dim_sizes = _dim_size_exprs(program)
    tables = {t.name: t for t in program.tables}
    scanned: set[str] = set()  # own-row tables whose target range is computed already

    for req in bounds_requirements(k, program, set(dim_sizes)):
        if req.lo == "table_lo" and req.table not in scanned:
            scanned.add(req.table)
            tb, t = tables[req.table], cname(req.table)
            skip = tb.skip_value if tb.skip_value is not None else "LONG_MIN"
            lines.append(f"{indent}long {t}_lo, {t}_hi;")
            lines.append(f"{indent}icf::table_targets<{ctype(tb.dtype)}>(a.{t}, h0, h1, {skip}, &{t}_lo, &{t}_hi);")
        t = cname(req.table) if req.table else ""
        size = dim_sizes.get(tables[req.table].target_dim, "") if req.table else ""
        lo, hi = req.bound_exprs(f"{t}_lo", f"{t}_hi", size)
        lines.append(f'{indent}if (!icf::require(a.{cname(req.field)}, {req.d}, {lo}, {hi}, "{req.field}", "{req.dim}", "{k.name}")) return nullptr;')
    lines += render_aliasing(k, program, indent, base)
    return lines


def _snapshot_switch(written: list[str], read_only: list[str], base: str, copy: str, what: str, indent: str) -> list[str]:
    """`copy` (an std::optional<Args>) made from `base` where a written field shares memory with a
    read one, its read fields then pointing at snapshots (icf::snapshot); two written fields
    sharing memory are refused."""
    named = lambda ns: ", ".join(f"{{&{base}.{cname(n)}, \"{n}\"}}" for n in ns)  # noqa: E731
    return [
        f'{indent}switch (icf::aliasing({{{named(written)}}}, {{{named(read_only)}}}, "{what}")) {{',
        f"{indent}  case -1: return nullptr;",
        f"{indent}  case 1:",
        f"{indent}    {copy}.emplace({base});",
        f"{indent}    icf::snapshot(scope, {{{', '.join(f'&{base}.{cname(n)}' for n in written)}}}, "
        f"{{{', '.join(f'&{copy}->{cname(n)}' for n in read_only)}}});",
    ]


def render_aliasing(k: ir.Kernel, program: ir.ProgramIR, indent: str, base: str = "a") -> list[str]:
    """The kernel's arguments as `ka`: `base` itself (`a`, or its statement's arguments), or,
    where a field it writes shares memory with one it only reads, a copy whose read field points
    at a snapshot (icf::snapshot: the kernel reads the memory as it was before it ran, as GT4Py's
    statement means, and its __restrict__ pointers do not alias)."""
    views = _views_of_kernel(k, program)
    written = [w for w, is_written in views if is_written]
    read_only = [v for v, is_written in views if not is_written]
    lines = [f"{indent}const Args* ka = &{base};"]
    if not written or len(views) < 2:
        return lines
    return [*lines, f"{indent}std::optional<Args> snap;", *_snapshot_switch(written, read_only, base, "snap", k.name, indent),
            f"{indent}    ka = &*snap;", f"{indent}}}"]


def render_statement_snapshot(g: StatementGroup, program: ir.ProgramIR, indent: str) -> list[str]:
    """Before the first kernel of a statement lowered to several with hazards (access.StatementGroup):
    its arguments `a<id>`, whose inputs a later kernel reads that share memory with an output of
    the statement are copies made now, so that they are read as they were before the statement.
    Without hazards the statement's kernels take `a` itself."""
    copy = f"stmt{g.statement}"
    names = ", ".join(k.name for k in g.kernels)
    return [
        f"{indent}// {names}: one statement of `{program.name}`; inputs a later kernel reads as before it",
        f"{indent}std::optional<Args> {copy};",
        *_snapshot_switch(list(g.outputs), list(g.copied), "a", copy, f"{program.name} ({names})", indent),
        f"{indent}}}",
        f"{indent}const Args& a{g.statement} = {copy} ? *{copy} : a;",
    ]


def render_launch(k: ir.Kernel, program: ir.ProgramIR, indent: str, base: str = "a") -> list[str]:
    hr = HostRenderer("std::")
    d = k.domain
    h0 = hr(d.h_start) if d.hdim else "0"
    h1 = hr(d.h_end) if d.hdim else "1"
    k0 = hr(d.k_start) if d.k_start is not None else "0"
    k1 = hr(d.k_end) if d.k_start is not None else "1"
    lines = [f"{indent}{{  // {k.name}", f"{indent}  const long h0 = {h0}, h1 = {h1}, k0 = {k0}, k1 = {k1};"]
    lines.append(f"{indent}  if (h0 < h1 && k0 < k1) {{")
    lines.extend(render_host_checks(k, program, indent + "    ", base))
    args = ["*ka", "h0", "h1", "k0", "k1", *(f"static_cast<{ctype(p.dtype)}>({hr(v)})" for p, v in k.args)]
    lines.append(f"{indent}    {k.name}({', '.join(args)});")
    lines.append(f"{indent}  }}")
    lines.append(f"{indent}}}")
    return lines


def render_steps(
    steps: tuple[ir.Step, ...], program: ir.ProgramIR, indent: str, groups: dict[int, StatementGroup], opened: set[int]
) -> list[str]:
    """The launches in order; a statement of `groups` (access.copying_statements) gets its snapshot
    before the step holding its first kernel (`opened`: the statements whose snapshot is in scope)."""
    hr = HostRenderer("std::")
    out: list[str] = []
    for s in steps:
        for g in statements_opened_by(s, groups, opened):
            out.extend(render_statement_snapshot(g, program, indent))
        if isinstance(s, ir.Kernel):
            out.extend(render_launch(s, program, indent, f"a{s.statement}" if s.statement in groups else "a"))
        else:
            out.append(f"{indent}if ({hr(s.cond)}) {{")
            out.extend(render_steps(s.then, program, indent + "  ", groups, opened))
            if s.orelse:
                out.append(f"{indent}}} else {{")
                out.extend(render_steps(s.orelse, program, indent + "  ", groups, opened))
            out.append(f"{indent}}}")
    return out


def render_program_cpp(program: ir.ProgramIR, module_name: str) -> str:
    pname = program.name
    lines = [
        f"// Generated by icoforge from the GT4Py program `{pname}`. Do not edit: regenerate.",
        f"// Kernels: {', '.join(k.name for k in program.kernels())}",
        '#include "icf_cpu.h"',
        "",
        "namespace {",
        "",
        "struct Args {",
    ]
    for p in program.params:
        if isinstance(p, ir.FieldParam):
            lines.append(f"  icf::View {cname(p.name)};  // Field[{', '.join(p.dims)}], {p.dtype}")
        else:
            lines.append(f"  {ctype(p.dtype)} {cname(p.name)};")
    for t in program.temporaries:
        lines.append(f"  icf::View {cname(t.name)};  // temporary Field[{', '.join(t.dims)}], {t.dtype}")
    for t in program.tables:
        lines.append(f"  icf::View {cname(t.name)};  // {t.source_dim} -> {t.max_neighbors} x {t.target_dim}")
    lines += ["};", ""]
    for t in program.temporaries:
        lines.append(f"icf::TempBuffer tmp_{cname(t.name)};")
    lines.append("")
    for k in program.kernels():
        lines.append(render_kernel_cpp(k, program))
        lines.append("")
    lines.append("}  // namespace")
    lines.append("")
    lines += _run_function(program)
    lines += _module_definition(module_name)
    return "\n".join(lines)


def _run_function(program: ir.ProgramIR) -> list[str]:
    """The entry point `run(*args, offset_provider)`: argument views, checks, temporaries, steps."""
    pname = program.name
    nparams = len(program.params)
    lines = [
        "static PyObject* run(PyObject*, PyObject* const* args, Py_ssize_t nargs) {",
        f'  static const char* P = "{pname}";',
        f"  if (nargs != {nparams + 1}) {{",
        f'    icf::fail("%s: expected {nparams} arguments and the offset provider, got %d", P, (int)nargs);',
        "    return nullptr;",
        "  }",
        "  icf::CallScope scope;",
        "  Args a;",
    ]
    for n, p in enumerate(program.params):
        c = cname(p.name)
        if isinstance(p, ir.FieldParam):
            lines.append(
                f'  if (!icf::get_view(scope, args[{n}], "{p.name}", {len(p.dims)}, {ITEMSIZE[p.dtype]}, P, &a.{c})) return nullptr;'
            )
        else:
            lines.append(f'  if (!icf::get_scalar(args[{n}], "{p.name}", P, &a.{c})) return nullptr;')
    for written, others in distinct_groups(program):  # copy forwarding moved these writes earlier
        alls = ", ".join(f"{{&a.{cname(f)}, \"{f}\"}}" for f in others)
        lines.append(f'  if (!icf::no_alias({{{{&a.{cname(written)}, "{written}"}}}}, {{{alls}}}, P)) return nullptr;')
    lines.append(f"  PyObject* offset_provider = args[{nparams}];")
    for t in program.tables:
        lines.append(
            f'  if (!icf::get_table(scope, offset_provider, "{t.name}", {ITEMSIZE[t.dtype]}, P, &a.{cname(t.name)})) return nullptr;'
        )
    for dim, tag in program.dim_size_tables:
        lines.append(f'  const long size_{dim} = icf::table_rows(offset_provider, "{tag}");')
    hr = HostRenderer("std::")
    if any(t.domain.hdim is not None and t.domain.k_start is not None for t in program.temporaries):
        # temporaries laid out as the first (horizontal, K) field argument is
        like = _layout_field(program)
        lines.append(f"  const bool h_inner = {f'icf::horizontal_inner(a.{cname(like)})' if like else 'false'};")
    for t in program.temporaries:
        d = t.domain
        h0, h1 = (hr(d.h_start), hr(d.h_end)) if d.hdim else ("0", "1")
        k0, k1 = (hr(d.k_start), hr(d.k_end)) if d.k_start is not None else ("0", "1")
        both = d.hdim is not None and d.k_start is not None
        lines.append(
            f"  a.{cname(t.name)} = tmp_{cname(t.name)}.view({h0}, {h1}, {k0}, {k1}, "
            f"{str(d.hdim is not None).lower()}, {str(d.k_start is not None).lower()}, {ITEMSIZE[t.dtype]}"
            f"{', h_inner' if both else ''});"
        )
    lines += render_steps(program.steps, program, "  ", copying_statements(program), set())
    lines += ["  Py_RETURN_NONE;", "}", ""]
    return lines


def _layout_field(program: ir.ProgramIR) -> str | None:
    """The first field argument over exactly (horizontal, K): its layout is the temporaries'."""
    kinds = dict(program.dim_kinds)
    for p in program.params:
        if isinstance(p, ir.FieldParam) and [kinds.get(d) for d in p.dims] == ["horizontal", "vertical"]:
            return p.name
    return None


def _module_definition(module_name: str) -> list[str]:
    """The CPython module around `run`."""
    return [
        "static PyObject* set_error_class(PyObject*, PyObject* cls) {",
        "  Py_INCREF(cls);",
        "  icf::error_class = cls;",
        "  Py_RETURN_NONE;",
        "}",
        "",
        "static PyMethodDef methods[] = {",
        '  {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL, "run the program"},',
        '  {"set_error_class", set_error_class, METH_O, "exception type for argument errors"},',
        "  {nullptr, nullptr, 0, nullptr}};",
        "",
        f'static struct PyModuleDef moduledef = {{PyModuleDef_HEAD_INIT, "{module_name}", nullptr, -1, methods}};',
        f"PyMODINIT_FUNC PyInit_{module_name}(void) {{ return PyModule_Create(&moduledef); }}",
        "",
    ]


def distinct_groups(program: ir.ProgramIR) -> list[tuple[str, list[str]]]:
    """`ProgramIR.distinct` grouped by its first field: [(written field, fields it must not share memory with)]."""
    groups: dict[str, list[str]] = {}
    for a, b in program.distinct:
        groups.setdefault(a, []).append(b)
    return list(groups.items())
