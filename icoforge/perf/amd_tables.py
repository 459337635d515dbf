"""Tables of `amd_resources` rows: the terminal table (fit_table: 80 columns unless `--wide`), the
Markdown written by `icoforge gpu-check --target hip --out F` (compact, 80 columns; `--wide`: every
column), and the k_unroll sweep of the scan kernels."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from icoforge.backend.schedule.occupancy import amd_arch
from icoforge.console import Col
from icoforge.perf.amd_resources import ResourceRow


def _n(x) -> str:
    return "-" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def short(kernel: str, width: int = 30) -> str:
    """The kernel name, its stem cut so that its `_kN` suffix stays (names are unique by it)."""
    if len(kernel) <= width:
        return kernel
    stem, _, k = kernel.rpartition("_")
    return stem[: width - len(k) - 2] + "~_" + k


def _arch_cells(r: ResourceRow, arch: str) -> list[str]:
    x = r.res(arch)
    if x is None:
        return ["-"] * 8
    return [str(x.vgprs), str(x.sgprs), str(x.agprs), str(x.lds_bytes), str(x.scratch_bytes),
            _n(r.waves(arch)), r.limiter(arch), _n(x.compiler_occupancy or None)]  # fmt: skip


WIDE_ARCH = ("VGPR", "SGPR", "AGPR", "LDS B", "scratch", "waves", "limit", "clang w")


def wide_columns(archs: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    return ["program", "kernel", "kind", "threads"] + [f"{a[3:]} {h}" for a in archs for h in WIDE_ARCH] + [
        "sm90 regs", "sm90 spill", "sm90 warps", "bytes", "status"]  # fmt: skip


def wide_cells(r: ResourceRow, archs: Sequence[str]) -> list[str]:
    s = r.sm90
    cells = [r.program, r.kernel, r.kind, str(r.threads)]
    for a in archs:
        cells += _arch_cells(r, a)
    cells += [_n(s and s.registers), "-" if s is None else f"{s.spill_stores}/{s.spill_loads}", _n(r.sm90_warps()),
              str(r.model_bytes), "; ".join(r.problems()) or "ok"]  # fmt: skip
    return cells


def terminal_table(rows: Sequence[ResourceRow], archs: Sequence[str]):
    """(columns, cells) for console.fit_table: the essential columns first (priority 0)."""
    cols = [Col("kernel", 0, no_wrap=True)]
    for a in archs:
        cols += [Col(f"{a[3:]} VGPR", 0, "right"), Col(f"{a[3:]} SGPR", 2, "right"), Col(f"{a[3:]} AGPR", 3, "right"),
                 Col(f"{a[3:]} LDS", 3, "right"), Col(f"{a[3:]} scr", 1, "right"), Col(f"{a[3:]} w", 0, "right")]  # fmt: skip
    cols += [Col("sm90 R", 0, "right"), Col("sm90 w", 0, "right"), Col("thr", 4, "right"), Col("status", 1)]
    cells = []
    for r in rows:
        row = [r.kernel]
        for a in archs:
            x = r.res(a)
            row += ["-"] * 6 if x is None else [str(x.vgprs), str(x.sgprs), str(x.agprs), str(x.lds_bytes),
                                                str(x.scratch_bytes), _n(r.waves(a))]  # fmt: skip
        row += [_n(r.sm90 and r.sm90.registers), _n(r.sm90_warps()), str(r.threads), "; ".join(r.problems()) or "ok"]
        cells.append(row)
    return cols, cells


def _md(header: list[str], body: list[list[str]], right_from: int = 1) -> list[str]:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |", *("| " + " | ".join(b) + " |" for b in body)]


def markdown(rows: Sequence[ResourceRow], archs: Sequence[str], title: str, wide: bool = False) -> str:
    lines = [title, "", *summary(rows, archs), ""]
    if wide:
        header = wide_columns(archs)
        return "\n".join(lines + _md(header, [wide_cells(r, archs) for r in rows], 4)) + "\n"
    header = ["kernel"] + [h for a in archs for h in (f"{a[3:]} V", "w")] + ["sm90 R", "w"]
    body = []
    for r in rows:
        cells = [short(r.kernel)]
        for a in archs:
            x = r.res(a)
            cells += ["-" if x is None else str(x.vgprs), _n(r.waves(a))]
        body.append(cells + [_n(r.sm90 and r.sm90.registers), _n(r.sm90_warps())])
    lines += ["Per kernel: VGPRs and waves per SIMD (of 8) per AMD arch; sm_90 registers and",
              "warps per scheduler (of 16). SGPR, AGPR, LDS, scratch: `--wide`, and the",
              "exceptions below.", ""]  # fmt: skip
    lines += _md(header, body)
    lines += ["", *exceptions(rows, archs)]
    return "\n".join(lines) + "\n"


def summary(rows: Sequence[ResourceRow], archs: Sequence[str]) -> list[str]:
    ok = [r for r in rows if r.kernel != "*"]
    out = _wrap(f"{len({r.program for r in rows})} programs, {len(ok)} kernels; "
                f"{sum(bool(r.problems()) for r in rows)} with a build error or a spill; "
                f"{sum(bool(r.notes()) for r in rows)} with SGPRs spilt into VGPR lanes (no scratch).")  # fmt: skip
    for a in archs:
        got = [(r, r.res(a)) for r in ok if r.res(a) is not None]
        if not got:
            out.append(f"- {a}: no results")
            continue
        top = max(got, key=lambda t: t[1].vgprs)
        full = amd_arch(a).max_waves_per_simd
        below = sum(1 for r, _ in got if (r.waves(a) or 0) < full)
        agree = sum(1 for r, x in got if x.compiler_occupancy == r.waves(a))
        out += _wrap(f"- {a} ({amd_arch(a).product}): max {top[1].vgprs} VGPRs ({short(top[0].kernel, 40)}), "
                   f"{below} kernels below {full} waves/SIMD, clang's occupancy = ours on {agree} of {len(got)}")  # fmt: skip
    regs = [r for r in ok if r.sm90 is not None]
    if regs:
        top = max(regs, key=lambda r: r.sm90.registers)
        out += _wrap(f"- sm_90 (H200, the HIP module via the HIP-on-CUDA header): max {top.sm90.registers} registers "
                   f"({short(top.kernel, 40)}), {sum(1 for r in regs if (r.sm90_warps() or 0) < 16)} kernels below 16 warps/scheduler")  # fmt: skip
    return out


def exceptions(rows: Sequence[ResourceRow], archs: Sequence[str]) -> list[str]:
    """Kernels with AGPRs, LDS, scratch or SGPR-limited occupancy, and every problem."""
    body = []
    for r in rows:
        for a in archs:
            x = r.res(a)
            if x is not None and (x.agprs or x.lds_bytes or x.spills or x.sgpr_spill or r.limiter(a) not in ("-", "vgpr")):
                body.append([short(r.kernel, 28), str(r.k_unroll), a, str(x.sgprs), str(x.sgpr_spill), str(x.agprs),
                             str(x.lds_bytes), str(x.scratch_bytes), r.limiter(a)])  # fmt: skip
    out = _wrap("Kernels with AGPRs, LDS, spills (SGPR spills go to VGPR lanes; scratch is memory), or an occupancy "
                "not set by VGPRs: " + ("none." if not body else f"{len(body)}."))  # fmt: skip
    if body:
        out += ["", *_md(["kernel", "u", "arch", "SGPR", "S spill", "AGPR", "LDS B", "scratch", "limit"], body, 3)]
    out.append("")
    for r in rows:
        for p in r.problems():
            out += _wrap(f"- {r.program} {r.kernel} (k_unroll {r.k_unroll}): {p.splitlines()[0][:200]}")
        for n in r.notes():
            out += _wrap(f"- note: {r.program} {r.kernel} (k_unroll {r.k_unroll}): {n}")
    return out


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 80, subsequent_indent="  " if text.startswith("- ") else "")


def unroll_cells(rows: Sequence[ResourceRow], archs: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """(header, body) of the scan kernels per k_unroll factor (rows of several `collect` k_unrolls)."""
    header = ["scan kernel", "u"] + [h for a in archs for h in (f"{a[3:]} V", f"{a[3:]} scr", "w")] + ["sm90 R", "w", "MB"]
    body = []
    for r in sorted((r for r in rows if r.kind == "scan"), key=lambda r: (r.program, r.kernel, r.k_unroll)):
        cells = [short(r.kernel, 28), str(r.k_unroll)]
        for a in archs:
            x = r.res(a)
            cells += ["-", "-", "-"] if x is None else [str(x.vgprs), str(x.scratch_bytes), _n(r.waves(a))]
        body.append(cells + [_n(r.sm90 and r.sm90.registers), _n(r.sm90_warps()), f"{r.model_bytes / 1e6:.2f}"])
    return header, body


def unroll_markdown(rows: Sequence[ResourceRow], archs: Sequence[str]) -> list[str]:
    return _md(*unroll_cells(rows, archs), 1)


def unroll_terminal(rows: Sequence[ResourceRow], archs: Sequence[str]):
    """(columns, cells) of `unroll_cells` for console.fit_table: scratch columns go first when narrow."""
    header, body = unroll_cells(rows, archs)
    cols = [Col(h, 1 if h.endswith(" scr") else 0, "left" if i == 0 else "right", no_wrap=i == 0) for i, h in enumerate(header)]
    return cols, body
