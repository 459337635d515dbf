"""CUDA/HIP target: one source for both vendors (a thin macro prelude), plus a host launch plan.

Kernels are `extern "C" __global__` with short names. Their arguments (`kernel_param_order`),
by the kernel's schedule knob `stride_sets`:
- off (the CUDA default): per array its pointer, already shifted by the array's origin, then its
  strides (`vn[i * vn_s0 + k * vn_s1]`); then the scalars and the bounds h0, h1, k0, k1;
- on (the HIP default): the arrays' pointers; the stride sets; the scalars; the bounds. A stride
  set (`stride_sets`) is the strides that several arrays have, passed once for all of them, but
  for the contiguous dimension, whose stride 1 is written into the code: the call's fields of
  one dims and dtype (`next_vn[i + k * Edge_K_s1]`; GT4Py's allocators lay such fields out
  alike, horizontal dimension contiguous), the temporaries of one dims and horizontal range;
  each table has its own, all strides passed. The host plan checks every call, before it launches
  anything, that a set's arrays have its strides (host_checks._shared); a call whose fields are
  laid out otherwise runs the program's variant with the knob off, built at the first such call
  (gpu.bind_program), never a wrong address. Why: on AMD every kernel argument is loaded into
  scalar registers (SGPRs), and the big gather kernels, with two strides per field, spilt them
  into vector lanes (issue 50); sharing alone made nvcc keep the shared products `k * Edge_K_s1`
  live and cost registers (one kernel spilt), the unit stride took that back, but on sm_90 41
  kernels still took more registers than with the knob off (not timed on a GPU: off on CUDA).
The C++ target keeps every stride of every field: its kernels take one `Args` reference, and it
accepts any layout of any field.

How the work is laid out follows the kernel's `Schedule` (schedule.py), and a comment line above
each kernel states the schedule it got:

- maps over points x levels: threads on x over horizontal points, on y over chunks of
  `k_per_thread` consecutive levels; neighbour indices and other k-invariant values (also
  k-invariant field loads when k_per_thread > 1) are loaded once per chunk, before the loop;
- scans: one thread walks a column with the carried state in registers;
- `h_per_thread`: each thread does several points, strided by the grid's threads on x (loads stay
  coalesced); `k_unroll`: the level loop is unrolled by hand (the body is a lambda, forced
  inline, called `k_unroll` times per iteration; a remainder loop takes the rest);
- `smem_tables`: the block's rows of the named neighbour tables are copied to shared memory by
  all threads of the block (coalesced), then `__syncthreads()`; no thread returns before it;
- `index_bits`: the type of indices and strides (`long long` or `int`); the host plan refuses a
  32-bit kernel whose largest index could overflow. "auto" emits each kernel twice, the 32-bit one
  under its name and a 64-bit twin under name + `WIDE_SUFFIX`; the host plan launches the twin
  only for a call whose indices do not fit (a grid larger than ~2**31 points x levels);
- `chiplet_remap`: the linear block number b (x fastest) becomes a permutation of b such that the
  blocks the hardware deals to one chiplet (b % n) get consecutive numbers;
- launch bounds / register caps: `__launch_bounds__` or `__maxnreg__` (CUDA),
  `amdgpu_flat_work_group_size` and `amdgpu_waves_per_eu` (HIP).

The host plan, generated Python that launches these kernels, is printed by `host.py`.
"""

from __future__ import annotations

import collections
import dataclasses

from icoforge.backend.ir import ir
from icoforge.backend.codegen.common import ExprRenderer, cname, render_stmts
from icoforge.backend.codegen.device import DeviceKernel, DeviceModule, DeviceParam
from icoforge.backend.schedule.schedule import KernelLaunch, amd_waves_per_eu

PRELUDE = r"""// icoforge GPU prelude: the same kernels compile as CUDA (nvcc, NVRTC) and HIP (hipcc, hiprtc).
#if defined(__HIPCC__) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__)
#define ICF_HIP 1
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
template <class T> __device__ __forceinline__ T icf_min(T a, T b) { return (b < a) ? b : a; }
template <class T> __device__ __forceinline__ T icf_max(T a, T b) { return (a < b) ? b : a; }
template <class T> __device__ __forceinline__ T icf_floordiv(T a, T b) {
  T q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
// chiplet_remap: the hardware deals block b to chiplet b % n; give each chiplet a contiguous
// range of block numbers (a bijection of [0, nb), also when n does not divide nb)
__device__ __forceinline__ unsigned int icf_chiplet_block(unsigned int b, unsigned int nb, unsigned int n) {
  const unsigned int x = b % n, a = b / n, base = nb / n, r = nb % n;
  return x * base + (x < r ? x : r) + a;
}
"""


def kernel_attributes(launch: KernelLaunch, vendor: str) -> str:
    """Launch bounds and register caps; never a CUDA-only qualifier on HIP."""
    s, threads = launch.schedule, launch.threads
    if vendor == "hip":
        attrs = [f"__attribute__((amdgpu_flat_work_group_size(1, {threads})))"]
        waves = amd_waves_per_eu(launch)
        if waves is not None:
            attrs.append(f"__attribute__((amdgpu_waves_per_eu({waves})))")
        return " ".join(attrs)
    if s.max_registers is not None:  # nvcc refuses __maxnreg__ together with __launch_bounds__
        return f"__maxnreg__({s.max_registers})"
    if s.min_blocks_per_sm is not None:
        return f"__launch_bounds__({threads}, {s.min_blocks_per_sm})"
    return f"__launch_bounds__({threads})"


# The argument convention of kernels with stride sets, printed in the second line of a module that
# has such kernels (a module without them reads as before the knob): a change of it changes the
# module text, so every compiled-module cache (CuPy's, keyed by the source) misses on purpose.
# 1: a pointer and strides per array (stride_sets off, no line); 2: a pointer per array, one
# stride set per `StrideSet`.
KERNEL_ARGS_VERSION = 2

WIDE_SUFFIX = "_w"  # the 64-bit twin of an index_bits="auto" kernel (IR kernel names end in _k<number>)


def index_type(launch: KernelLaunch) -> str:
    return "long long" if launch.schedule.index_bits == 64 else "int"


def kernel_functions(program: ir.ProgramIR, launches: dict[str, KernelLaunch]) -> list[tuple[ir.Kernel, KernelLaunch]]:
    """The `__global__` functions of the module, in order: each kernel with its launch, and after
    an index_bits="auto" kernel its 64-bit twin."""
    out = []
    for k in program.kernels():
        la = launches[k.name]
        out.append((k, la))
        if la.schedule.index_bits == "auto":
            twin = dataclasses.replace(la, schedule=la.schedule.replace(index_bits=64))
            out.append((dataclasses.replace(k, name=k.name + WIDE_SUFFIX), twin))
    return out


@dataclasses.dataclass(frozen=True)
class StrideSet:
    """Arrays of one kernel addressed with one set of strides, kernel arguments `<name>_s<d>` for
    each dimension d but `unit`, whose stride is 1 (see `stride_sets`). The host plan passes the
    first member's strides once it has checked that every member has them."""

    name: str
    ndim: int
    members: tuple[str, ...]  # array names, sorted
    unit: int | None = None  # the dimension of stride 1, not passed (None: every stride passed)
    unit_dim: str = ""  # its name

    @property
    def passed(self) -> tuple[int, ...]:
        """The dimensions whose strides are kernel arguments."""
        return tuple(d for d in range(self.ndim) if d != self.unit)


def _contiguous(dims: tuple[str, ...], kinds: dict[str, str]) -> int | None:
    """The dimension GT4Py's allocators make contiguous (the first horizontal one, else the first
    vertical one), which the runtime's temporaries have contiguous too."""
    for kind in ("horizontal", "vertical"):
        found = [d for d, dim in enumerate(dims) if kinds.get(dim) == kind]
        if found:
            return found[0]
    return None


def stride_sets(k: ir.Kernel, program: ir.ProgramIR) -> tuple[StrideSet, ...]:
    """The kernel's stride sets, sorted by name:
    - the call's fields of one dims and dtype (`Edge_K`; `Cell_K_bool` beside `Cell_K_float64`
      where one kernel has both): GT4Py's allocators lay them out alike, the horizontal
      dimension contiguous (stride 1, not passed: `vn[i + k * Edge_K_s1]`), the others padded by
      dtype (a 2-d field's vertical extent does not enter its strides);
    - the temporaries of one dims and horizontal range (`tmp_Cell_K`; `tmp_Cell_K_1`, `_2` where
      one kernel has several ranges): the runtime lays each out as (1, points of its range);
    - each table alone, named after it, every stride passed (each has its own width and layout)."""
    temporaries = {t.name: t for t in program.temporaries}
    kinds = dict(program.dim_kinds)
    groups: dict[tuple, list[str]] = {}
    for n in sorted({*k.fields_read(), *k.fields_written()}):
        f = program.field(n)
        if n in temporaries:
            d = temporaries[n].domain
            key: tuple = ("tmp_" + "_".join(f.dims), d.h_start, d.h_end)
        else:
            key = ("_".join(f.dims), f.dtype)
        groups.setdefault(key, []).append(n)
    bases = collections.Counter(key[0] for key in groups)
    seen: collections.Counter[str] = collections.Counter()
    sets = []
    for key, members in groups.items():
        name = key[0]
        if bases[name] > 1:  # fields named with their dtype, temporaries numbered
            seen[name] += 1
            name += f"_{key[1]}" if len(key) == 2 else f"_{seen[name]}"
        dims = program.field(members[0]).dims
        unit = _contiguous(dims, kinds)
        sets.append(StrideSet(name, len(dims), tuple(members), unit, "" if unit is None else dims[unit]))
    sets += [StrideSet(cname(t), 2, (t,)) for t in sorted(k.tables_used())]
    args = [f"{st.name}_s{d}" for st in sets for d in st.passed]
    symbols = {cname(m) for st in sets for m in st.members} | {cname(p.name) for p in k.params_used()}
    if len(set(args)) < len(args) or symbols & set(args):  # pragma: no cover - dims are CamelCase, icon4py's symbols not
        raise AssertionError(f"{k.name}: stride arguments {args} clash with each other or with {sorted(symbols)}")
    return tuple(sorted(sets, key=lambda st: st.name))


def kernel_params(
    k: ir.Kernel, program: ir.ProgramIR, r: ExprRenderer, idx: str = "long long", shared: bool = False
) -> list[DeviceParam]:  # fmt: skip
    """The kernel's parameters, in `kernel_param_order` (the host plan passes them in that order);
    `shared`: its schedule's `stride_sets` (off: each array's strides after its pointer)."""
    written = set(k.fields_written())
    sets = {st.name: st for st in stride_sets(k, program)} if shared else {}
    params: list[DeviceParam] = []
    for kind, name in kernel_param_order(k, program, shared):
        if kind == "field":
            f = program.field(name)
            const = "" if name in written else "const "
            params.append(DeviceParam(f"{const}{r.ctype(f.dtype)}*", cname(name)))
            if not shared:
                params += [DeviceParam(f"const {idx}", f"{cname(name)}_s{d}") for d in range(len(f.dims))]
        elif kind == "table":
            tb = next(x for x in program.tables if x.name == name)
            params.append(DeviceParam(f"const {r.ctype(tb.dtype)}*", cname(name)))
            if not shared:
                params += [DeviceParam(f"const {idx}", f"{cname(name)}_s0"), DeviceParam(f"const {idx}", f"{cname(name)}_s1")]
        elif kind == "strides":
            params += [DeviceParam(f"const {idx}", f"{name}_s{d}") for d in sets[name].passed]
        else:
            p = next(p for p in k.params_used() if p.name == name)
            params.append(DeviceParam(f"const {r.ctype(p.dtype)}", cname(p.name)))
    params += [DeviceParam("const int", n) for n in ("h0", "h1", "k0", "k1")]
    return params


def kernel_param_order(k: ir.Kernel, program: ir.ProgramIR, shared: bool = False) -> list[tuple[str, str]]:
    """What the host passes, in order: ("field", name) | ("table", name) (a pointer each, and
    without `shared` its strides), then with `shared` (the schedule's `stride_sets`) ("strides",
    stride set name), then ("scalar", name).

    Sorted by name, so the order does not depend on where in the body a value is first used
    (passes move loads around); kernel and host plan are printed from the same final IR."""
    out = [("field", n) for n in sorted({*k.fields_read(), *k.fields_written()})]
    out += [("table", t) for t in sorted(k.tables_used())]
    if shared:
        out += [("strides", st.name) for st in stride_sets(k, program)]
    out += [("scalar", n) for n in sorted({p.name for p in k.params_used()})]
    return out


def stride_set_comments(k: ir.Kernel, program: ir.ProgramIR) -> list[str]:
    """The stride sets as comment lines: the arrays of each set of fields or temporaries (a table's
    set is named after it), and the folded unit strides."""
    sets = stride_sets(k, program)
    lines = [f"// {st.name}_s*: strides of {', '.join(st.members)}" for st in sets if st.passed and st.members != (st.name,)]
    if any(st.unit is not None for st in sets):
        lines.append("// stride 1, not passed: the horizontal dimension of every field and temporary (else the vertical; the host plan checks)")
    return lines


# ---------------------------------------------------------------------------------------------
# kernels


class DeviceRenderer(ExprRenderer):
    """Device expressions; lookups of staged tables at the kernel's own point read shared memory."""

    def __init__(self, staged: dict[str, int], on_chip: dict[str, tuple[int, int]] | None = None):
        super().__init__("", device=True)
        self.staged = staged  # table -> columns
        self.on_chip = on_chip or {}  # a sweep-fused kernel's on-chip temporary -> (first level, its position in the index)

    def r_Table(self, e: ir.Table) -> str:
        if e.table in self.staged and isinstance(e.row, ir.HIndex):
            return f"{cname(e.table)}_sh[icf_i_sh * {self.staged[e.table]} + {e.col}]"
        return super().r_Table(e)

    def chip_slot(self, field: str, level: str) -> str:
        """This thread's slot of an on-chip temporary at `level`: levels apart by a block's width."""
        return f"{cname(field)}_oc[({level} - {self.on_chip[field][0]}) * blockDim.x + threadIdx.x]"

    def r_Load(self, e: ir.Load) -> str:
        if e.field in self.on_chip:
            return self.chip_slot(e.field, self(e.index[self.on_chip[e.field][1]]))
        return super().r_Load(e)


def _level_loop(body: list[str], ind: str, idx: str, unroll: int, first: str, end: str, forward: bool = True) -> list[str]:
    """Levels [first, end) (backward: end-1 down to first) with `body` (lines using `k`)."""
    if unroll == 1:
        head = f"for ({idx} k = {first}; k < {end}; ++k)" if forward else f"for ({idx} k = {end} - 1; k >= {first}; --k)"
        return [f"{ind}{head} {{", *body, f"{ind}}}"]
    # unrolled by hand: the body once, as a lambda forced inline, called `unroll` times per step
    out = [f"{ind}auto icf_level = [&](const {idx} k) __attribute__((always_inline)) {{", *body, f"{ind}}};"]
    if forward:
        calls = " ".join(f"icf_level(icf_k + {u});" if u else "icf_level(icf_k);" for u in range(unroll))
        out += [f"{ind}{idx} icf_k = {first};",
                f"{ind}for (; icf_k + {unroll} <= {end}; icf_k += {unroll}) {{ {calls} }}",
                f"{ind}for (; icf_k < {end}; ++icf_k) icf_level(icf_k);  // remainder"]  # fmt: skip
    else:
        calls = " ".join(f"icf_level(icf_k - {u});" if u else "icf_level(icf_k);" for u in range(unroll))
        out += [f"{ind}{idx} icf_k = ({idx}){end} - 1;",
                f"{ind}for (; icf_k - {unroll - 1} >= {first}; icf_k -= {unroll}) {{ {calls} }}",
                f"{ind}for (; icf_k >= {first}; --icf_k) icf_level(icf_k);  // remainder"]  # fmt: skip
    return out


def render_kernel_gpu(k: ir.Kernel, program: ir.ProgramIR, launch: KernelLaunch, vendor: str) -> str:
    idx = index_type(launch)
    kind = launch.kind
    bx = launch.block[0]
    hpt = launch.h_per_thread
    staged = {t: cols for t, cols, _ in launch.smem}
    kinds = dict(program.dim_kinds)
    on_chip = {t.name: (t.domain.constant_levels()[0], next(d for d, dim in enumerate(t.dims) if kinds.get(dim) == "vertical"))
               for t in k.on_chip}  # fmt: skip
    r = DeviceRenderer(staged, on_chip)
    shared = launch.schedule.stride_sets
    if shared:
        r.stride_sets = {cname(m): (st.name, st.unit) for st in stride_sets(k, program) for m in st.members}

    def store(field: str, value: str) -> str:
        if field in on_chip:
            return f"{r.chip_slot(field, 'k')} = {value};"
        f = program.field(field)
        index = tuple(ir.HIndex() if kinds[d] == "horizontal" else ir.KIndex() for d in f.dims)
        return f"{cname(field)}[{r.offset(cname(field), index)}] = {value};"

    what = f"scan ({'forward' if k.forward else 'backward'})" if k.is_scan else "map"
    lines = [f"// {k.name}: {what} over {k.domain}", f"// schedule: {launch.describe()}"]
    if shared:
        lines += stride_set_comments(k, program)
    lines.append(f'extern "C" __global__ void {kernel_attributes(launch, vendor)}')
    lines.append(f"{k.name}({', '.join(p.declaration() for p in kernel_params(k, program, r, idx, shared))}) {{")
    ind = "  "
    has_h = kind in ("map2d", "hmap", "scan")
    lines += _block_lines(launch, idx, ind)
    if staged:  # shared memory staging: every thread of the block takes part, then one barrier
        lines += _staging_lines(launch, program, r, idx, ind)
    for t in k.on_chip:  # sweep fusion: each thread's column of the values one walk hands the next
        lo, hi = t.domain.constant_levels()
        lines.append(f"{ind}__shared__ {r.ctype(t.dtype)} {cname(t.name)}_oc[{(hi - lo + 1) * bx}];  "
                     f"// {t.name}: levels [{lo}, {hi}] x {bx} columns, on chip between the walks")  # fmt: skip
    lines += _level_range_lines(launch, idx, ind)

    def point(ind: str) -> list[str]:
        return _point_lines(k, launch, r, store, idx, ind)

    if not has_h:
        lines.append(f"{ind}const {idx} i = 0;  // no horizontal dimension")
        lines += point(ind)
    elif hpt == 1:
        lines.append(f"{ind}const {idx} i = icf_i0 + threadIdx.x;")
        lines.append(f"{ind}if (i >= h1) return;")
        if staged:
            lines.append(f"{ind}const int icf_i_sh = threadIdx.x;  // row of i in the staged tables")
        lines += point(ind)
    else:
        lines.append(f"{ind}for (int icf_h = 0; icf_h < {hpt}; ++icf_h) {{  // h_per_thread points, coalesced")
        lines.append(f"{ind}  const {idx} i = icf_i0 + threadIdx.x + icf_h * icf_hs;")
        lines.append(f"{ind}  if (i >= h1) break;")
        if staged:
            lines.append(f"{ind}  const int icf_i_sh = icf_h * {bx} + threadIdx.x;  // row of i in the staged tables")
        lines += point(ind + "  ")
        lines.append(f"{ind}}}")
    lines.append("}")
    return "\n".join(lines)


def _block_lines(launch: KernelLaunch, idx: str, ind: str) -> list[str]:
    """This block's number (remapped for chiplets) and its first horizontal point."""
    kind, s, bx = launch.kind, launch.schedule, launch.block[0]
    lines = []
    if s.chiplet_remap and kind == "map2d":  # blocks are dealt out in linear order (x fastest)
        lines.append(f"{ind}const unsigned int icf_lin = icf_chiplet_block(blockIdx.x + blockIdx.y * gridDim.x, "
                     f"gridDim.x * gridDim.y, {s.chiplets}u);")  # fmt: skip
        lines.append(f"{ind}const unsigned int icf_b = icf_lin % gridDim.x, icf_by = icf_lin / gridDim.x;")
    elif s.chiplet_remap and kind != "single":
        lines.append(f"{ind}const unsigned int icf_b = icf_chiplet_block(blockIdx.x, gridDim.x, {s.chiplets}u);")
    else:
        lines.append(f"{ind}const unsigned int icf_b = blockIdx.x;")
        if kind == "map2d":
            lines.append(f"{ind}const unsigned int icf_by = blockIdx.y;")

    if kind in ("map2d", "hmap", "scan"):
        lines.append(f"{ind}const {idx} icf_i0 = ({idx})h0 + ({idx})icf_b * {bx};  // first point of this block")
        if launch.h_per_thread > 1:
            lines.append(f"{ind}const {idx} icf_hs = ({idx})gridDim.x * {bx};  // stride between a thread's points")
    return lines


def _staging_lines(launch: KernelLaunch, program: ir.ProgramIR, r: ExprRenderer, idx: str, ind: str) -> list[str]:
    """The block's rows of the staged tables copied to shared memory, then one barrier."""
    bx, hpt = launch.block[0], launch.h_per_thread
    lines = []
    for t, cols, _ in launch.smem:
        tb = next(x for x in program.tables if x.name == t)
        n = hpt * bx * cols
        ct = r.ctype(tb.dtype)
        row = f"icf_i0 + icf_e / {cols} % {bx}" + (f" + icf_e / {bx * cols} * icf_hs" if hpt > 1 else "")
        lines += [
            f"{ind}__shared__ {ct} {cname(t)}_sh[{n}];  // {t}: {hpt * bx} rows x {cols}",
            f"{ind}for (int icf_e = threadIdx.y * blockDim.x + threadIdx.x; icf_e < {n}; icf_e += blockDim.x * blockDim.y) {{",
            f"{ind}  const {idx} icf_row = {row};",
            f"{ind}  if (icf_row < h1) {cname(t)}_sh[icf_e] = {cname(t)}[icf_row * {r.stride(cname(t), 0)} + (icf_e % {cols}) * {r.stride(cname(t), 1)}];",
            f"{ind}}}",
        ]  # fmt: skip
    lines.append(f"{ind}__syncthreads();  // staged tables ready (no thread has returned before this)")
    return lines


def _level_range_lines(launch: KernelLaunch, idx: str, ind: str) -> list[str]:
    """The levels this thread does (maps over levels), or the one thread of a kernel without points."""
    kind, kpt = launch.kind, launch.k_per_thread
    lines = []
    if kind == "single":
        lines.append(f"{ind}if (icf_b != 0 || threadIdx.x != 0) return;  // no horizontal dimension: one thread")
    if kind in ("map2d", "vmap"):
        ky, kb, kd = ("threadIdx.y", "icf_by", "blockDim.y") if kind == "map2d" else ("threadIdx.x", "icf_b", "blockDim.x")
        lines.append(f"{ind}const {idx} k_first = ({idx})k0 + (({idx}){kb} * {kd} + {ky}) * {kpt};")
        lines.append(f"{ind}if (k_first >= k1) return;")
        if kpt > 1:
            lines.append(f"{ind}const {idx} k_last = k_first + {kpt} < ({idx})k1 ? k_first + {kpt} : ({idx})k1;")
    return lines


def _point_lines(k: ir.Kernel, launch: KernelLaunch, r: ExprRenderer, store, idx: str, ind: str) -> list[str]:
    """The work of one horizontal point `i`."""
    kind, kpt, unroll = launch.kind, launch.k_per_thread, launch.k_unroll
    out = render_stmts(k.prologue, r, ind, store)
    if kind in ("map2d", "vmap"):
        inner = render_stmts(k.body, r, ind + "  ", store)
        if kpt == 1:
            out += [f"{ind}{{", f"{ind}  const {idx} k = k_first;", *inner, f"{ind}}}"]
        else:
            out += _level_loop(inner, ind, idx, unroll, "k_first", "k_last")
    elif k.is_scan:
        for st in k.state:
            out.append(f"{ind}{r.ctype(st.var.dtype)} {cname(st.var.name)} = {r(st.init)};")
        if k.domain.k_start is not None:
            inner = render_stmts(k.body, r, ind + "  ", store)
            out += _level_loop(inner, ind, idx, unroll, "k0", "k1", k.forward)
        else:
            out += render_stmts(k.body, r, ind, store)
        if k.then is not None:  # sweep fusion: the same column walked again, in a scope of its own
            then = k.then
            lo, hi = then.domain.constant_levels()
            out.append(f"{ind}{{  // then {then.name}: {'forward' if then.forward else 'backward'} over levels [{lo}, {hi}]")
            out += render_stmts(then.prologue, r, ind + "  ", store)
            for st in then.state:
                out.append(f"{ind}  {r.ctype(st.var.dtype)} {cname(st.var.name)} = {r(st.init)};")
            inner = render_stmts(then.body, r, ind + "    ", store)
            out += _level_loop(inner, ind + "  ", idx, unroll, str(lo), str(hi + 1), then.forward)
            out.append(f"{ind}}}")
    else:  # no level loop
        if k.domain.k_start is not None:  # pragma: no cover - a map over levels is map2d/vmap
            raise AssertionError(kind)
        out += render_stmts(k.body, r, ind, store)
    return out


def device_module(program: ir.ProgramIR, launches: dict[str, KernelLaunch], vendor: str) -> DeviceModule:
    """The module of every kernel, as data; `launches`: `schedule.resolve(program, schedule, vendor)`."""
    first = f"// Generated by icoforge from the GT4Py program `{program.name}` ({vendor.upper()}). Do not edit: regenerate."
    if any(la.schedule.stride_sets for la in launches.values()):
        first += (f"\n// Kernel arguments of the kernels with stride_sets on, convention {KERNEL_ARGS_VERSION}: array pointers, "
                  "stride sets, scalars, h0 h1 k0 k1.")  # fmt: skip
    kernels = tuple(
        DeviceKernel(k.name, tuple(kernel_params(k, program, DeviceRenderer({}), index_type(la), la.schedule.stride_sets)),
                     render_kernel_gpu(k, program, la, vendor), barriers=bool(la.smem), smem_bytes=la.smem_bytes)
        for k, la in kernel_functions(program, launches)
    )  # fmt: skip
    return DeviceModule(program.name, vendor, f"{first}\n{PRELUDE}", kernels)


def render_module_gpu(program: ir.ProgramIR, launches: dict[str, KernelLaunch], vendor: str) -> str:
    """The module as one source text."""
    return device_module(program, launches, vendor).source
