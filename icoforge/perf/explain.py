"""`icoforge explain`: a program from its GT4Py source to the generated code, one page per stage.

Stages (each a plain function of the previous one, as in the compiler):
  source  -- the GT4Py program and the field/scan operators it calls (inspect.getsource)
  gtir    -- `program.gtir`, before any pass (milliseconds)
  passes  -- after GT4Py's passes (`workflow.gt4py_passes`, cached on disk; seconds to minutes)
  ir      -- our kernel IR, each kernel with its schedule and compulsory bytes / flops
  pipeline -- (on request) the kernel IR after each pass of backend/schedule/pipeline.py, in order
  code    -- the generated source of each kernel (C++ or CUDA/HIP; plus the GPU host plan)
  diff    -- unified diff of the generated GPU module between two schedules
Pages are data (`Page`); `render` prints them with rich's syntax highlighting on a terminal and
as plain text when piped.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from collections.abc import Iterable
from typing import Any, TextIO

from icoforge.errors import IcoforgeError

STAGES = ("source", "gtir", "passes", "ir", "code")
EXTRA_STAGES = ("pipeline",)  # not in "all": one page per pass, each the whole program
TARGETS = ("cpp", "cuda", "hip")


@dataclasses.dataclass(frozen=True)
class Page:
    stage: str
    title: str
    text: str
    lexer: str = "text"  # a Pygments lexer name


# --- source ---------------------------------------------------------------------------------------


def _is_gt4py_operator(obj: Any) -> bool:
    return type(obj).__module__.startswith("gt4py.next.ffront") and callable(getattr(obj, "definition", None))


def gt4py_sources(program: Any) -> list[tuple[str, str]]:
    """(name, source) of the program's definition and, breadth first, every GT4Py field/scan
    operator it calls (icon4py programs are thin wrappers around `_operator(...)`)."""
    out, seen, queue = [], set(), [program.definition]
    while queue:
        fn = queue.pop(0)
        if fn in seen:
            continue
        seen.add(fn)
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            src = f"# source of {fn.__qualname__} not available\n"
        out.append((f"{fn.__module__}.{fn.__qualname__}", src))
        for name in fn.__code__.co_names:
            obj = fn.__globals__.get(name)
            if _is_gt4py_operator(obj):
                queue.append(obj.definition)
    return out


def source_page(info: Any) -> Page:
    parts = [f"# --- {name}\n{src}" for name, src in gt4py_sources(info.program)]
    return Page("source", f"GT4Py source: {info.name}", "\n".join(parts), "python")


def gtir_page(info: Any) -> Page:
    return Page("gtir", "GTIR before GT4Py's passes (program.gtir)", str(info.program.gtir))


def compilable(info: Any, grid: Any, sizes: Any, static_params: str) -> Any:
    """The executor's input: with the suite's int/bool scalars bound (what `icoforge run` and icon4py
    compile) unless static_params == "none"."""
    from icoforge.perf.static import compilable_program_static
    from icoforge.suite.runner import static_param_names
    from icoforge.suite.specs import cast_scalar

    names = static_param_names(info, static_params)
    static = {n: cast_scalar(sizes.scalars[n], info.param(n).dtype) for n in names}
    return compilable_program_static(info.program, grid.connectivities, static)


def passes_page(inp: Any, static: dict) -> Page:
    from icoforge.backend.runtime import workflow

    transformed, hit = workflow.cached_passes(inp)
    bound = ", ".join(f"{k}={v}" for k, v in static.items()) or "none"
    return Page("passes", f"GTIR after GT4Py's passes{' (cached)' if hit else ''}; static scalars: {bound}", str(transformed))


# --- kernel IR with schedules and costs -----------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 1e6:.3f} MB"


def kernel_summary(cost: Any) -> str:
    ran = "" if cost.executed else "  [not run with these arguments]"
    return (
        f"{cost.kind} over {cost.h_points} x {cost.k_levels} points; compulsory bytes: read "
        f"{_mb(cost.bytes_read)} (tables {_mb(cost.table_bytes)}), written {_mb(cost.bytes_written)}; "
        f"{cost.flops:,} flop; {cost.arithmetic_intensity:.3f} flop/B{ran}"
    )


def ir_text(pir: Any, costs: Any, schedules: dict[str, str]) -> str:
    """The program IR as `str(ProgramIR)` prints it, with two comment lines above each kernel."""
    lines = []
    for ln in str(pir).splitlines():  # the header: parameters, temporaries, tables
        if ln.startswith(("kernel ", "host if ")):
            break
        lines.append(ln)
    from icoforge.backend.ir import ir

    by_name = {k.name: k for k in costs.kernels}

    def kernel_lines(k) -> list[str]:
        return [f"# schedule: {schedules.get(k.name, '-')}", f"# {kernel_summary(by_name[k.name])}", *str(k).splitlines()]

    lines += ir.format_steps(pir.steps, kernel_lines)
    lines.append(
        f"# program total: {_mb(costs.bytes_read)} read, {_mb(costs.bytes_written)} written, "
        f"{costs.flops:,} flop, {costs.arithmetic_intensity:.3f} flop/B"
    )
    return "\n".join(lines)


def gpu_schedule(target: str, settings: Iterable[str] = (), inline_policy: str = "auto", schedule_text: str = "") -> Any:
    """The GPU pages' schedule: `schedule_text` (ProgramSchedule JSON or a file, `--schedule`; ""
    the vendor default) with `settings` on its default and the inline policy."""
    from icoforge.backend.schedule.schedule import schedule_from_text

    base = schedule_from_text(schedule_text, target, "--schedule")
    return dataclasses.replace(base, default=base.default.with_settings(list(settings)), inline=inline_policy)


def inline_page(inp: Any, policy: str) -> Page | None:
    """The inline pass's decision for every temporary GT4Py left (backend/passes/inline.py); None
    without temporaries."""
    from icoforge.backend.schedule import pipeline
    from icoforge.backend.runtime import workflow

    lowered = workflow.lower_gtir(inp, workflow.cached_passes(inp)[0])
    decisions = pipeline.inline_decisions(lowered, policy)
    done = sum(d.inlined for d in decisions)
    lines = [
        "A temporary is recomputed in each reader (inlined) where that moves fewer field accesses than",
        "storing it and reading it back (an access over a kernel's domain counts 1; 0.1 for a field over",
        "points or levels only), unless that lost time on the H200: recomputing inside a scan, or",
        "gathering a neighbour reduction again at every neighbour.",
        "",
        *(d.describe() for d in decisions),
    ]
    if not decisions:
        return None
    return Page("ir", f"temporaries: {done} of {len(decisions)} inlined (inline={policy})", "\n".join(lines))


def schedule_descriptions(pir: Any, target: str, schedule: Any) -> dict[str, str]:
    if target == "cpp":
        return {k.name: "C++/OpenMP: threads over horizontal points, levels in an inner loop" for k in pir.kernels()}
    from icoforge.backend.schedule.schedule import resolve

    return {name: la.describe() for name, la in resolve(pir, schedule, target).items()}


def pipeline_pages(inp: Any, target: str, schedule: Any, dim_sizes: Any = None) -> list[Page]:
    """The kernel IR after each pass, in the order the compiler runs them (GPU passes with the
    schedule of the code pages, at the grid's sizes)."""
    from icoforge.backend.schedule import pipeline
    from icoforge.backend.runtime import workflow

    lowered = workflow.lower_gtir(inp, workflow.cached_passes(inp)[0])
    vendor = None if target == "cpp" else target
    return [Page("pipeline", f"{n}. after `{name}`: {what}", str(pir)) for n, (name, what, pir)
            in enumerate(pipeline.stages(lowered, schedule, vendor, dim_sizes), 1)]  # fmt: skip


# --- generated code ------------------------------------------------------------------------------


def code_pages(pir: Any, target: str, schedule: Any, dim_sizes: Any = None) -> list[Page]:
    pages = []
    if target == "cpp":
        from icoforge.backend.codegen.cpp import render_kernel_cpp

        for k in pir.kernels():
            pages.append(Page("code", f"C++ of {k.name}", render_kernel_cpp(k, pir), "cpp"))
        return pages
    from icoforge.backend.codegen.cuda import render_kernel_gpu
    from icoforge.backend.codegen.host import render_host_plan
    from icoforge.backend.schedule.pipeline import gpu_passes

    decisions: list = []
    _, final, launches = gpu_passes(pir, schedule, target, dim_sizes, decisions)
    if refused := [str(d) for d in decisions if d.status == "not fused"]:  # the column-count rule at this grid's size
        pages.append(Page("code", f"fusions refused at this grid's size ({len(refused)})", "\n".join(refused)))
    lexer = "cuda" if target == "cuda" else "cpp"
    for k in final.kernels():
        pages.append(Page("code", f"{target.upper()} of {k.name}", render_kernel_gpu(k, final, launches[k.name], target), lexer))
    pages.append(Page("code", "host plan (Python)", render_host_plan(final, launches), "python"))
    return pages


def parse_diff_spec(spec: str) -> list[str]:
    """`256,1` (a block) or `NAME=VALUE[;NAME=VALUE]` -> schedule settings."""
    if re.fullmatch(r"\s*\d+\s*[,x]\s*\d+\s*", spec):
        return [f"block={spec.strip()}"]
    settings = [s for s in re.split(r"[;\s]+", spec) if s]
    if not all("=" in s for s in settings):
        raise IcoforgeError(f"--diff {spec!r}: expected BLOCKX,BLOCKY or NAME=VALUE settings")
    return settings


def diff_page(pir: Any, target: str, settings: list[str], other: list[str]) -> Page:
    from icoforge.backend.codegen.cuda import render_module_gpu
    from icoforge.backend.schedule.pipeline import gpu_passes

    vendor = "cuda" if target == "cpp" else target
    a, b = gpu_schedule(vendor, settings), gpu_schedule(vendor, [*settings, *other])
    left = render_module_gpu(*gpu_passes(pir, a, vendor)[1:], vendor).splitlines(keepends=True)
    right = render_module_gpu(*gpu_passes(pir, b, vendor)[1:], vendor).splitlines(keepends=True)
    name_a, name_b = a.default.describe(), b.default.describe()
    text = "".join(difflib.unified_diff(left, right, f"{vendor}: {name_a}", f"{vendor}: {name_b}", n=2))
    return Page("diff", f"{vendor.upper()} code: {' '.join(settings) or 'default'} -> {' '.join(other)}",
                text or "(no difference in the generated code)\n", "diff")  # fmt: skip


# --- all pages ------------------------------------------------------------------------------------


def explain(
    program: str, grid: Any = None, target: str = "cuda", stages: Iterable[str] = STAGES,
    settings: Iterable[str] = (), diff: str | None = None, seed: int = 0, static_params: str = "icon4py",
    inline_policy: str = "auto", schedule_text: str = "",
) -> list[Page]:  # fmt: skip
    """Pages for `program`. `grid` (an icoforge grid) is needed from the "passes" stage on and for
    --diff; `settings` are schedule NAME=VALUE strings for the GPU pages; scalars (and the static
    ones bound at compile time) are the suite's (`suite.ranges`)."""
    from icoforge.suite import get_program

    if target not in TARGETS:
        raise IcoforgeError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    stages = list(stages)
    unknown = [s for s in stages if s not in STAGES + EXTRA_STAGES]
    if unknown:
        raise IcoforgeError(f"unknown stage {unknown[0]!r}; choose from {', '.join(STAGES + EXTRA_STAGES)} or all")
    info = get_program(program)
    settings = list(settings)
    needs_ir = bool({"ir", "code", "pipeline"} & set(stages)) or diff is not None
    if (needs_ir or "passes" in stages) and grid is None:
        raise IcoforgeError("explain: the passes, ir, code and diff pages need a grid")
    pages: list[Page] = []
    if "source" in stages:
        pages.append(source_page(info))
    if "gtir" in stages:
        pages.append(gtir_page(info))
    if grid is None or not (needs_ir or "passes" in stages):
        return pages
    from icoforge.backend.runtime import workflow
    from icoforge.perf.model import program_cost
    from icoforge.perf.sizes import suite_sizes
    from icoforge.suite.runner import static_param_names

    sizes = suite_sizes(info, grid, seed)
    inp = compilable(info, grid, sizes, static_params)
    if "passes" in stages:
        pages.append(passes_page(inp, {n: sizes.scalars[n] for n in static_param_names(info, static_params)}))
    if needs_ir:
        pir = workflow.translate(inp, inline_policy=inline_policy)[0].program
        if target == "cpp":  # no launch layout; the inline policy still applies
            from icoforge.backend.schedule.schedule import ProgramSchedule

            schedule = ProgramSchedule(inline=inline_policy)
        else:
            schedule = gpu_schedule(target, settings, inline_policy, schedule_text)
        from icoforge.backend.schedule.tuned import dim_sizes_of

        dim_sizes = dim_sizes_of(inp.args.offset_provider)  # the fusions' column-count rule
        if "pipeline" in stages:
            pages.extend(pipeline_pages(inp, target, schedule, dim_sizes))
        if "ir" in stages:
            costs = program_cost(pir, sizes)
            title = f"kernel IR ({len(pir.kernels())} kernels; costs on {grid.name}/{grid.num_levels} levels)"
            pages.append(Page("ir", title, ir_text(pir, costs, schedule_descriptions(pir, target, schedule))))
            decisions = inline_page(inp, inline_policy)
            if decisions is not None:  # programs GT4Py left temporaries in
                pages.append(decisions)
        if "code" in stages:
            pages.extend(code_pages(pir, target, schedule, dim_sizes))
        if diff is not None:
            pages.append(diff_page(pir, target, settings, parse_diff_spec(diff)))
    return pages


def render(pages: list[Page], file: TextIO | None = None, color: bool | None = None, pager: bool = False) -> None:
    """Highlighted on a terminal (`color=None`: decide by the output), plain text otherwise."""
    from rich.console import Console
    from rich.syntax import Syntax

    console = Console(file=file, highlight=False, soft_wrap=True)
    use_color = console.is_terminal if color is None else color
    if not use_color:
        out = console.file
        for p in pages:
            out.write(f"{'=' * 8} [{p.stage}] {p.title} {'=' * 8}\n{p.text.rstrip()}\n\n")
        out.flush()
        return
    console = Console(file=file, force_terminal=True, highlight=False)

    def show() -> None:
        for p in pages:
            console.rule(f"[bold][{p.stage}][/bold] {p.title}")
            text = p.text.rstrip()
            width = max((len(line) for line in text.splitlines()), default=1)
            # generated code has long lines: never crop them to the terminal's width
            syntax = Syntax(text, p.lexer, theme="ansi_dark", word_wrap=False, background_color="default", code_width=width)
            console.print(syntax, soft_wrap=True, crop=False)

    if pager:
        with console.pager(styles=True):
            show()
    else:
        show()
