"""Which index ranges a kernel touches in each field: the basis of the run-time bounds checks
(a field of the wrong shape is an error, never an out-of-bounds access); the byte model
(perf/model.py) classifies indices with `classify` too."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from icoforge.backend.ir import ir
from icoforge.backend.ir.recompute import narrowed


@dataclass(frozen=True)
class Access:
    """How one field dimension is indexed in a kernel.

    kind: "h" (the kernel's horizontal index, shifted by nothing), "k" (level + [lo, hi] offsets),
    "levels" (the levels lo..hi themselves: a store under a level guard, e.g. of a fused kernel),
    "table" (through neighbour table `table`: any index of the target dimension), "const" (a
    fixed index `lo`), "local" (a neighbour slot of a sparse field).
    """

    kind: str
    lo: int = 0
    hi: int = 0
    table: str | None = None
    own_row: bool = False  # "table": the row is the kernel's own horizontal index (`E2C[i, c]`)


def _resolve(e: ir.Expr, defs: dict[str, ir.Expr]) -> ir.Expr:
    while isinstance(e, ir.Var) and e.name in defs:
        e = defs[e.name]
    return e


def classify(e: ir.Expr, defs: dict[str, ir.Expr]) -> Access | None:
    e = _resolve(e, defs)
    if isinstance(e, ir.HIndex):
        return Access("h")
    if isinstance(e, ir.KIndex):
        return Access("k")
    if isinstance(e, ir.Table):
        return Access("table", table=e.table, own_row=isinstance(_resolve(e.row, defs), ir.HIndex))
    if isinstance(e, ir.Const):
        return Access("const", int(e.value), int(e.value))
    if isinstance(e, ir.Binary) and e.op in ("plus", "minus") and isinstance(e.rhs, ir.Const):
        inner = _resolve(e.lhs, defs)
        if isinstance(inner, ir.KIndex):
            c = int(e.rhs.value) * (1 if e.op == "plus" else -1)
            return Access("k", c, c)
    return None  # data-dependent index: not checked statically


def _unconditional_exprs(kernel: ir.Kernel):
    """Expressions evaluated for every point: not under an `If` branch or a `Select` arm
    (GT4Py guards out-of-range neighbours and levels with those, lazily)."""

    def walk(e: ir.Expr):
        yield e
        children = (e.cond,) if isinstance(e, ir.Select) else e.children()
        for c in children:
            yield from walk(c)

    for s in kernel.all_stmts():
        if isinstance(s, (ir.Let, ir.Store)):
            yield from walk(s.value)
        elif isinstance(s, ir.If):
            yield from walk(s.cond)
    for st in kernel.state:
        yield from walk(st.init)


def store_levels(kernel: ir.Kernel) -> dict[str, tuple[int, int] | None]:
    """field -> the levels [lo, hi] the kernel's stores of it can run at: its constant level range
    narrowed by the level guards (`If` on k) around them; None when not known that way."""
    found: dict[str, tuple[int, int] | None] = {}

    def walk(stmts: tuple[ir.Stmt, ...], levels: tuple[int, int] | None) -> None:
        for s in stmts:
            if isinstance(s, ir.If):
                walk(s.then, None if levels is None else narrowed(*levels, s.cond, True))
                walk(s.orelse, None if levels is None else narrowed(*levels, s.cond, False))
            elif isinstance(s, ir.Store):
                old = found.get(s.field, levels)
                found[s.field] = None if old is None or levels is None else (min(old[0], levels[0]), max(old[1], levels[1]))

    walk(kernel.body, kernel.domain.constant_levels())
    return found


def store_access(kernel: ir.Kernel, levels: tuple[int, int] | None, vertical: bool) -> Access:
    """How a store indexes one dimension of a field: "h", "k" or, when `levels` (the field's
    `store_levels`) are fewer than the kernel's, "levels"."""
    if not vertical:
        return Access("h")
    if levels is None or levels == kernel.domain.constant_levels():
        return Access("k")
    return Access("levels", levels[0], levels[1])


def kernel_access_lists(
    kernel: ir.Kernel, program: ir.ProgramIR, unconditional_only: bool = False
) -> dict[tuple[str, int], list[Access]]:
    """(field, dimension position) -> every distinct way the kernel indexes it (reads and writes).

    With `unconditional_only`, reads that happen only under a condition are left out: those are
    what run-time bounds checks may demand, since a guarded read never happens out of range."""
    defs = {s.var.name: s.value for s in ir.walk_stmts(kernel.all_stmts()) if isinstance(s, ir.Let) and not s.declared}
    kinds = dict(program.dim_kinds)
    out: dict[tuple[str, int], list[Access]] = {}

    def add(key, acc: Access | None) -> None:
        if acc is not None and acc not in out.setdefault(key, []):
            out[key].append(acc)

    exprs = _unconditional_exprs(kernel) if unconditional_only else kernel.exprs()
    for e in exprs:
        if isinstance(e, ir.Load):
            dims = program.field(e.field).dims
            for d, idx in enumerate(e.index):
                add((e.field, d), Access("local") if kinds.get(dims[d]) == "local" else classify(idx, defs))
    levels = store_levels(kernel)
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Store):
            dims = program.field(s.field).dims
            for d, dim in enumerate(dims):
                add((s.field, d), store_access(kernel, levels[s.field], kinds.get(dim) == "vertical"))
    return {k: v for k, v in out.items() if v}


@dataclass(frozen=True)
class Requirement:
    """A field must hold [lo, hi) along dimension `d` before a kernel runs. The bounds are
    symbolic: "h0"/"h1"/"k0"/"k1" (the kernel's domain, plus `offset` for levels), "size" (the
    run-time size of the target dimension), "table_lo"/"table_hi" (the indices rows [h0, h1) of
    `table` hold) or an integer."""

    field: str
    d: int
    dim: str
    lo: str | int
    hi: str | int
    lo_offset: int = 0
    hi_offset: int = 0
    table: str | None = None  # own-row table to scan ("table_*") or whose target size to use ("size")

    def bound_exprs(self, table_lo: str, table_hi: str, size: str) -> tuple[str, str]:
        """(lo, hi) as target-language expressions, given how that target names the table's
        scanned range and the dimension's size."""
        named = {"table_lo": table_lo, "table_hi": table_hi, "size": size}

        def one(v: str | int, offset: int) -> str:
            if v in named:
                return named[v]
            return f"{v} + ({offset})" if offset else str(v)

        return one(self.lo, self.lo_offset), one(self.hi, self.hi_offset)


def bounds_requirements(kernel: ir.Kernel, program: ir.ProgramIR, sized_dims: set[str]) -> list[Requirement]:
    """What every target's host side checks before launching `kernel`: its table rows and the
    unconditional accesses of its fields; `sized_dims`: dimensions whose size the host knows at
    run time. `Requirement.field` names a field or a table. A sweep-fused kernel: each walk's,
    a later walk's levels as numbers (its level bounds are constants, not the kernel's k0/k1), its
    on-chip temporaries left out (they are in no memory)."""
    if kernel.then is not None:
        chip = {t.name for t in kernel.on_chip}
        first, *later = kernel.walks()
        out = [r for r in bounds_requirements(first, program, sized_dims) if r.field not in chip]
        for w in later:
            lo, hi = w.domain.constant_levels()
            for r in bounds_requirements(w, program, sized_dims):
                if r.field in chip:
                    continue
                if r.lo == "k0":
                    r = dataclasses.replace(r, lo=lo + r.lo_offset, lo_offset=0)
                if r.hi == "k1":
                    r = dataclasses.replace(r, hi=hi + 1 + r.hi_offset, hi_offset=0)
                out.append(r)
        return list(dict.fromkeys(out))
    tables = {t.name: t for t in program.tables}
    # the kernel's own rows of every table indexed by its horizontal point (checked first: the
    # table ranges below are scanned from those rows)
    out = [
        Requirement(t, 0, tables[t].source_dim, "h0", "h1")
        for t in kernel.tables_used()
        if tables[t].source_dim == kernel.domain.hdim
    ]
    for (field, d), accesses in kernel_access_lists(kernel, program, unconditional_only=True).items():
        dim = program.field(field).dims[d]
        for acc in accesses:
            if acc.kind == "h":
                out.append(Requirement(field, d, dim, "h0", "h1"))
            elif acc.kind == "k":
                out.append(Requirement(field, d, dim, "k0", "k1", acc.lo, acc.hi))
            elif acc.kind == "levels":
                out.append(Requirement(field, d, dim, acc.lo, acc.hi + 1))
            elif acc.kind == "table" and acc.own_row:
                # exactly the indices rows [h0, h1) of the table hold: on limited-area grids GT4Py
                # sizes temporaries to that, not to the whole dimension
                out.append(Requirement(field, d, dim, "table_lo", "table_hi", table=acc.table))
            elif acc.kind == "table" and tables[acc.table].target_dim in sized_dims:
                out.append(Requirement(field, d, dim, 0, "size", table=acc.table))  # through another lookup
            elif acc.kind == "const":
                out.append(Requirement(field, d, dim, acc.lo, acc.lo + 1))
    return out


def reads_in_place(kernel: ir.Kernel, program: ir.ProgramIR, read: str) -> bool:
    """May the kernel run with `read` (a field it only reads) and a field it writes being one
    buffer seen through the same view? Yes where every load of `read` is at the thread's own point
    (the kernel's horizontal index and level, no offset, no table, no neighbour slot; the field
    over the kernel's own dimensions, so a point is written once) and no load of it follows a store
    in statement order (the printers keep that order): each thread then reads its point before
    anything writes it, and reads no other thread's point, so the result is GT4Py's (the
    statement's inputs read before its outputs are written). icon4py's tracer updates are such
    kernels (`tracer_new = tracer_now + ...`, one field passed as both)."""
    if kernel.then is not None:  # a sweep-fused kernel's later walk reads after its first has written
        return False
    dims = program.field(read).dims
    kinds = dict(program.dim_kinds)
    d = kernel.domain
    if sorted(kinds.get(x) for x in dims) != sorted(k for k, on in (("horizontal", d.hdim), ("vertical", d.k_start)) if on is not None):
        return False
    defs = {s.var.name: s.value for s in ir.walk_stmts(kernel.all_stmts()) if isinstance(s, ir.Let) and not s.declared}
    own = {"horizontal": Access("h"), "vertical": Access("k")}
    for e in kernel.exprs():
        if isinstance(e, ir.Load) and e.field == read:
            if any(classify(idx, defs) != own.get(kinds.get(dim)) for dim, idx in zip(dims, e.index)):
                return False
    stored = False
    for s in ir.walk_stmts(kernel.all_stmts()):
        if stored and any(isinstance(e, ir.Load) and e.field == read for x in ir.stmt_exprs(s) for e in x.walk()):
            return False
        stored = stored or isinstance(s, ir.Store)
    return True


@dataclass(frozen=True)
class StatementGroup:
    """The kernels one GTIR statement was lowered to (`Kernel.statement`), in launch order, and its
    hazards: (written, read) field arguments where a kernel of the statement reads the second after
    an earlier kernel of it (on the same path through host conditionals) wrote the first. GT4Py's
    statement reads its inputs before it writes its outputs, so where such a pair shares memory
    (icon4py calls muphys' graupel_run with q_out = q_in and t_out = te) the later kernel would read
    the statement's output instead of its input: every target copies those inputs (`copied`) that
    share memory with any output of the statement (`outputs`) once, before the statement's first
    kernel, and the statement's kernels read the copies (codegen/cpp.py, codegen/host.py). Fields the
    statement writes are not inputs: its kernels may pass values through them."""

    statement: int
    kernels: tuple[ir.Kernel, ...]
    hazards: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]

    @property
    def copied(self) -> tuple[str, ...]:
        """The inputs copied where they share memory with an output: those a hazard reads."""
        return tuple(dict.fromkeys(r for _, r in self.hazards))


def statement_groups(program: ir.ProgramIR) -> dict[int, StatementGroup]:
    params = {p.name for p in program.params if isinstance(p, ir.FieldParam)}
    members: dict[int, list[ir.Kernel]] = {}
    for k in program.kernels():
        if k.statement is not None:
            members.setdefault(k.statement, []).append(k)
    outputs = {sid: {f for k in ks for f in k.fields_written() if f in params} for sid, ks in members.items()}
    hazards: dict[int, dict[tuple[str, str], None]] = {sid: {} for sid in members}

    def walk(steps: tuple[ir.Step, ...], written: dict[int, set[str]]) -> dict[int, set[str]]:
        """`written`: per statement, the fields its kernels have written so far on this path."""
        for s in steps:
            if isinstance(s, ir.HostIf):  # one branch runs: each from here, then either may have
                a = walk(s.then, {sid: set(w) for sid, w in written.items()})
                b = walk(s.orelse, {sid: set(w) for sid, w in written.items()})
                written = {sid: a.get(sid, set()) | b.get(sid, set()) for sid in a.keys() | b.keys()}
            elif s.statement is not None:
                before = written.setdefault(s.statement, set())
                reads = [r for r in s.fields_read() if r in params and r not in outputs[s.statement]]
                hazards[s.statement].update(((w, r), None) for w in sorted(before) for r in reads)
                before.update(f for f in s.fields_written() if f in params)
        return written

    walk(program.steps, {})
    return {sid: StatementGroup(sid, tuple(ks), tuple(hazards[sid]), tuple(sorted(outputs[sid]))) for sid, ks in members.items()}


def copying_statements(program: ir.ProgramIR) -> dict[int, StatementGroup]:
    """The statements whose copied inputs the targets copy before them: those with hazards."""
    return {sid: g for sid, g in statement_groups(program).items() if g.hazards}


def statements_opened_by(step: ir.Step, groups: dict[int, StatementGroup], opened: set[int]) -> list[StatementGroup]:
    """The statements of `groups` whose first kernel lies in `step` (none of `opened`), now added
    to `opened`: the code copying their inputs goes before `step`, in scope for all their kernels."""
    new = [groups[sid] for sid in dict.fromkeys(k.statement for k in ir.step_kernels(step)) if sid in groups and sid not in opened]
    opened.update(g.statement for g in new)
    return new


def statement_hazards(program: ir.ProgramIR) -> tuple[tuple[str, str], ...]:
    """Every statement's hazards (`StatementGroup`), each pair once."""
    return tuple(dict.fromkeys(p for g in statement_groups(program).values() for p in g.hazards))


def kernel_aliasing(program: ir.ProgramIR) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(pairs that must not share memory, pairs that may only as one view) of field arguments, per
    kernel: two fields it writes must not; a field it writes and one it only reads may be one
    buffer through one view where `reads_in_place` says so, else must not (the GPU targets run
    kernels in place; the C++ target copies the read field instead, codegen/cpp.py). A field its
    statement copies where it shares memory with the statement's outputs (`StatementGroup.copied`)
    needs neither."""
    params = {p.name for p in program.params if isinstance(p, ir.FieldParam)}
    groups = statement_groups(program)
    refused: dict[tuple[str, str], None] = {}
    same_view: dict[tuple[str, str], None] = {}
    for k in program.kernels():
        written = [f for f in k.fields_written() if f in params]
        copied = set(groups[k.statement].copied) if k.statement is not None else set()
        read_only = [f for f in k.fields_read() if f in params and f not in written and f not in copied]
        for i, w in enumerate(written):
            refused.update(((w, o), None) for o in written[i + 1:])
            for r in read_only:
                (same_view if reads_in_place(k, program, r) else refused)[(w, r)] = None
    return tuple(refused), tuple(p for p in same_view if p not in refused)
