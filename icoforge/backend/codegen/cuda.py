"""CUDA/HIP target: one source for both vendors (a thin macro prelude), plus a host launch plan.

Kernels are `extern "C" __global__` with short names. One thread per horizontal point on x (unit
stride in GPU layouts); for maps, levels on y, `k_per_thread` consecutive levels per thread with
the neighbour indices and k-invariant values loaded once. A scan walks its column in one thread
with the carried state in registers. Field pointers arrive already shifted by the field's origin.

The host plan is generated Python (`def launch(...)`): evaluates domain bounds and host
conditions, takes temporaries from a persistent pool and launches the kernels in order.
"""

from __future__ import annotations

from icoforge.backend import ir
from icoforge.backend.codegen.common import ExprRenderer, cname, render_stmts
from icoforge.backend.schedule import ProgramSchedule, Schedule

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
"""


def launch_bounds(s: Schedule, vendor: str) -> str:
    threads = s.block[0] * s.block[1]
    if vendor == "hip":
        # __launch_bounds__ exists in HIP too; the waves-per-EU hint is HIP's own attribute.
        return f"__launch_bounds__({threads})"
    if s.min_blocks_per_sm:
        return f"__launch_bounds__({threads}, {s.min_blocks_per_sm})"
    return f"__launch_bounds__({threads})"


def kernel_signature(k: ir.Kernel, program: ir.ProgramIR, r: ExprRenderer) -> list[str]:
    written = set(k.fields_written())
    params: list[str] = []
    for name in dict.fromkeys([*k.fields_read(), *k.fields_written()]):
        f = program.field(name)
        const = "" if name in written else "const "
        params.append(f"{const}{r.ctype(f.dtype)}* __restrict__ {cname(name)}")
        params += [f"const long long {cname(name)}_s{d}" for d in range(len(f.dims))]
    for t in k.tables_used():
        tb = next(x for x in program.tables if x.name == t)
        params.append(f"const {r.ctype(tb.dtype)}* __restrict__ {cname(t)}")
        params += [f"const long long {cname(t)}_s0", f"const long long {cname(t)}_s1"]
    for p in k.params_used():
        params.append(f"const {r.ctype(p.dtype)} {cname(p.name)}")
    params += ["const int h0", "const int h1", "const int k0", "const int k1"]
    return params


def kernel_param_order(k: ir.Kernel, program: ir.ProgramIR) -> list[tuple[str, str]]:
    """What the host passes, in order: ("field", name) | ("table", name) | ("scalar", name)."""
    out = [("field", n) for n in dict.fromkeys([*k.fields_read(), *k.fields_written()])]
    out += [("table", t) for t in k.tables_used()]
    out += [("scalar", p.name) for p in k.params_used()]
    return out


def render_kernel_gpu(k: ir.Kernel, program: ir.ProgramIR, s: Schedule, vendor: str) -> str:
    r = ExprRenderer("", device=True)
    kinds = dict(program.dim_kinds)

    def store(field: str, value: str) -> str:
        f = program.field(field)
        idx = tuple(ir.HIndex() if kinds[d] == "horizontal" else ir.KIndex() for d in f.dims)
        return f"{cname(field)}[{r.offset(cname(field), idx)}] = {value};"

    kind = f"scan ({'forward' if k.forward else 'backward'})" if k.is_scan else "map"
    sched = f"block {s.block[0]}x{s.block[1]}, k_per_thread {s.k_per_thread}"
    lines = [f"// {k.name}: {kind} over {k.domain}; {sched}"]
    params = kernel_signature(k, program, r)
    lines.append(f'extern "C" __global__ void {launch_bounds(s, vendor)}')
    lines.append(f"{k.name}({', '.join(params)}) {{")
    has_h, has_k = k.domain.hdim is not None, k.domain.k_start is not None
    ind = "  "
    if has_h:
        lines.append(f"{ind}const long long i = (long long)h0 + blockIdx.x * (long long)blockDim.x + threadIdx.x;")
        lines.append(f"{ind}if (i >= h1) return;")
    if k.is_scan or not has_k:
        lines.extend(render_stmts(k.prologue, r, ind, store))
        for st in k.state:
            lines.append(f"{ind}{r.ctype(st.var.dtype)} {cname(st.var.name)} = {r(st.init)};")
        if has_k:
            loop = "for (long long k = k0; k < k1; ++k)" if k.forward else "for (long long k = k1 - 1; k >= k0; --k)"
            lines.append(f"{ind}{loop} {{")
            lines.extend(render_stmts(k.body, r, ind + "  ", store))
            lines.append(f"{ind}}}")
        else:
            lines.extend(render_stmts(k.body, r, ind, store))
        lines.append("}")
        return "\n".join(lines)
    # a map over levels: thread (x, y) computes k_per_thread consecutive levels
    ky = "threadIdx.x" if not has_h else "threadIdx.y"
    kb = "blockIdx.x" if not has_h else "blockIdx.y"
    kd = "blockDim.x" if not has_h else "blockDim.y"
    kpt = s.k_per_thread
    lines.append(f"{ind}const long long k_first = (long long)k0 + ({kb} * (long long){kd} + {ky}) * {kpt};")
    lines.append(f"{ind}if (k_first >= k1) return;")
    if not has_h:
        lines.append(f"{ind}const long long i = 0;  // no horizontal dimension")
    lines.extend(render_stmts(k.prologue, r, ind, store))
    if kpt == 1:
        lines.append(f"{ind}{{")
        lines.append(f"{ind}  const long long k = k_first;")
    else:
        lines.append(f"{ind}const long long k_last = k_first + {kpt} < (long long)k1 ? k_first + {kpt} : (long long)k1;")
        lines.append(f"{ind}for (long long k = k_first; k < k_last; ++k) {{")
    lines.extend(render_stmts(k.body, r, ind + "  ", store))
    lines.append(f"{ind}}}")
    lines.append("}")
    return "\n".join(lines)


def render_module_gpu(program: ir.ProgramIR, schedule: ProgramSchedule, vendor: str) -> str:
    parts = [
        f"// Generated by icoforge from the GT4Py program `{program.name}` ({vendor.upper()}). Do not edit: regenerate.",
        PRELUDE,
    ]
    for k in program.kernels():
        parts.append(render_kernel_gpu(k, program, schedule.for_kernel(k.name), vendor))
        parts.append("")
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# host launch plan (Python)


class PyHostRenderer(ExprRenderer):
    """Host expressions as Python over the call's scalars (`s_<name>`)."""

    def r_Param(self, e: ir.Param) -> str:
        return f"s_{e.name}"

    def r_Const(self, e: ir.Const) -> str:
        return repr(e.value)

    def r_FieldBound(self, e: ir.FieldBound) -> str:
        return f"rt.bound({cname(e.field)}, {e.axis}, {e.stop})"

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


NP_TYPES = {"float64": "np.float64", "float32": "np.float32", "int32": "np.int32", "int64": "np.int64",
            "bool": "np.bool_", "int8": "np.int8", "uint8": "np.uint8", "int16": "np.int16",
            "uint16": "np.uint16", "uint32": "np.uint32", "uint64": "np.uint64"}  # fmt: skip


def render_host_plan(program: ir.ProgramIR, schedule: ProgramSchedule) -> str:
    """Python source of `launch(args, offset_provider, kernels, rt)`; `rt` gives views and the pool."""
    hr = PyHostRenderer()
    lines = [
        f"# Host plan of `{program.name}` (generated by icoforge).",
        "import math",
        "import numpy as np",
        "",
        "def launch(args, offset_provider, kernels, rt):",
    ]
    names = [cname(p.name) for p in program.params]
    lines.append(f"    ({', '.join(names)},) = args" if names else "    pass")
    for p in program.params:
        if isinstance(p, ir.FieldParam):
            lines.append(f"    v_{p.name} = rt.view({cname(p.name)}, {len(p.dims)}, {NP_TYPES[p.dtype]})")
        else:
            lines.append(f"    s_{p.name} = {NP_TYPES[p.dtype]}({cname(p.name)})")
    for t in program.tables:
        lines.append(f"    v_{t.name} = rt.table(offset_provider, {t.name!r})")
    for t in program.temporaries:
        d = t.domain
        h = f"({hr(d.h_start)}, {hr(d.h_end)})" if d.hdim else "None"
        kk = f"({hr(d.k_start)}, {hr(d.k_end)})" if d.k_start is not None else "None"
        lines.append(f"    v_{t.name} = rt.temporary({t.name!r}, {h}, {kk}, {NP_TYPES[t.dtype]})")

    def steps(ss: tuple[ir.Step, ...], ind: str) -> None:
        for s in ss:
            if isinstance(s, ir.Kernel):
                sched = schedule.for_kernel(s.name)
                d = s.domain
                h0, h1 = (hr(d.h_start), hr(d.h_end)) if d.hdim else ("0", "1")
                k0, k1 = (hr(d.k_start), hr(d.k_end)) if d.k_start is not None else ("0", "1")
                lines.append(f"{ind}h0, h1, k0, k1 = int({h0}), int({h1}), int({k0}), int({k1})")
                lines.append(f"{ind}if h0 < h1 and k0 < k1:")
                for p, v in s.args:
                    lines.append(f"{ind}    s_{p.name} = {NP_TYPES[p.dtype]}({hr(v)})")
                kargs = []
                for kind, n in kernel_param_order(s, program):
                    if kind in ("field", "table"):
                        kargs.append(f"*v_{n}")
                    else:
                        dtype = next(p.dtype for p in s.params_used() if p.name == n)
                        kargs.append(f"{NP_TYPES[dtype]}(s_{n})")
                kargs += ["np.int32(h0)", "np.int32(h1)", "np.int32(k0)", "np.int32(k1)"]
                bx, by = sched.block
                if s.is_scan or d.k_start is None:
                    grid = f"((h1 - h0 + {bx - 1}) // {bx}, 1, 1)"
                    block = f"({bx}, 1, 1)"
                elif d.hdim is None:
                    grid = f"((k1 - k0 + {bx * sched.k_per_thread - 1}) // {bx * sched.k_per_thread}, 1, 1)"
                    block = f"({bx}, 1, 1)"
                else:
                    kk = by * sched.k_per_thread
                    grid = f"((h1 - h0 + {bx - 1}) // {bx}, (k1 - k0 + {kk - 1}) // {kk}, 1)"
                    block = f"({bx}, {by}, 1)"
                lines.append(f"{ind}    rt.launch(kernels[{s.name!r}], {grid}, {block}, ({', '.join(kargs)},))")
            else:
                lines.append(f"{ind}if {hr(s.cond)}:")
                n = len(lines)
                steps(s.then, ind + "    ")
                if len(lines) == n:
                    lines.append(f"{ind}    pass")
                if s.orelse:
                    lines.append(f"{ind}else:")
                    steps(s.orelse, ind + "    ")

    steps(program.steps, "    ")
    return "\n".join(lines) + "\n"
