"""The three floors' arithmetic (icoforge/perf/floors.py) on synthetic calls: hand-built kernel IR
through the real byte model, GT4Py fields on NumPy arrays for buffer identity. Expected bytes are
worked out from the sizes in each test (n rows x levels x 8 bytes per float64 element)."""

from __future__ import annotations

import dataclasses

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import common
from icon4py.model.common import dimension as dims

from icoforge.backend.ir import ir
from icoforge.perf.floors import (
    FloorCall, Touch, buffer_frame, call_floors, call_touches, floor_bytes, interface_buffers, is_temporary, step_floors,
)  # fmt: skip
from icoforge.perf.model import cost_of_call

N, L = 64, 4  # rows, levels a kernel covers; fields have L + 1 levels as icon4py's
F8 = "float64"
I32 = "int32"
ROW = L * 8  # bytes of one row over the kernels' levels


def c(v, dtype=I32):
    return ir.Const(v, dtype)


def load(name, k_off=0):
    k = ir.KIndex() if not k_off else ir.Binary("plus", ir.KIndex(), c(k_off), I32)
    return ir.Load(name, (ir.HIndex(), k), F8)


def add(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = ir.Binary("plus", out, x, F8)
    return out


def kernel(name, out, value, h=(0, None)):
    dom = ir.Domain("Cell", c(h[0]), c(h[1]) if h[1] is not None else ir.Param("n", I32), c(0), c(L))
    return ir.Kernel(name, dom, (ir.Store(out, value),))


def program(kernels, fields, temporaries=()):
    temps = tuple(ir.Temporary(t, ("Cell", "K"), F8, ir.Domain("Cell", c(0), ir.Param("n", I32), c(0), c(L))) for t in temporaries)
    return ir.ProgramIR(
        "synthetic", (*(ir.FieldParam(f, ("Cell", "K"), F8) for f in fields), ir.Param("n", I32)), temps, (),
        tuple(kernels), dim_kinds=(("Cell", "horizontal"), ("K", "vertical")),
    )  # fmt: skip


def fld(rows=N):
    return gtx.as_field([dims.CellDim, dims.KDim], np.zeros((rows, L + 1)))


def numpy_view(arr):
    """A GT4Py field on a NumPy view, without the copy `gtx.as_field` makes."""
    return common._field(arr, domain=common.domain({dims.CellDim: arr.shape[0], dims.KDim: arr.shape[1]}))


def floors(pir, args):
    args = {**args, "n": np.int32(N)}
    return call_floors(pir, args, {}, cost_of_call(pir, args, {}))


def test_read_only_input_reused_by_two_kernels():
    pir = program([kernel("k0", "x", load("a")), kernel("k1", "y", add(load("a"), load("a", 1)))], ["a", "x", "y"])
    kernel_b, program_b = floors(pir, {"a": fld(), "x": fld(), "y": fld()})
    a0, a1 = N * ROW, N * (L + 1) * 8  # k1 reads levels [0, L + 1)
    assert kernel_b == a0 + N * ROW + a1 + N * ROW
    assert program_b == a1 + 2 * N * ROW  # a once (union of both boxes), x and y written once


def test_temporary_written_then_read_moves_nothing_at_the_program_floor():
    pir = program([kernel("k0", "tmp", load("a")), kernel("k1", "out", add(load("tmp"), load("a")))], ["a", "out"], ["tmp"])
    kernel_b, program_b = floors(pir, {"a": fld(), "out": fld()})
    assert kernel_b == 5 * N * ROW  # a, tmp written; tmp, a read; out written
    assert program_b == 2 * N * ROW  # a read once, out written once


def test_output_written_then_read_counts_its_write_only():
    pir = program([kernel("k0", "b", load("a")), kernel("k1", "out", load("b"))], ["a", "b", "out"])
    kernel_b, program_b = floors(pir, {"a": fld(), "b": fld(), "out": fld()})
    assert kernel_b == 4 * N * ROW
    assert program_b == 3 * N * ROW  # a read, b and out written: b's value never comes from memory


def test_partly_overwritten_field_reads_the_rest():
    half = N // 2
    pir = program([kernel("k0", "b", load("a"), h=(0, half)), kernel("k1", "out", load("b"))], ["a", "b", "out"])
    _, program_b = floors(pir, {"a": fld(), "b": fld(), "out": fld()})
    assert program_b == half * ROW + half * ROW + (N - half) * ROW + N * ROW  # a, b written, b's other half read, out


def test_in_place_update_reads_and_writes():
    pir = program([kernel("k0", "a", add(load("a"), load("a")))], ["a"])
    kernel_b, program_b = floors(pir, {"a": fld()})
    assert kernel_b == program_b == 2 * N * ROW


def test_aliasing_views_share_elements():
    pir = program([kernel("k0", "x", load("a")), kernel("k1", "y", load("b"))], ["a", "b", "x", "y"])
    base, x, y = fld(), fld(), fld()
    same = floors(pir, {"a": base, "b": base, "x": x, "y": y})[1]
    assert same == N * ROW + 2 * N * ROW  # one buffer passed twice: read once
    # a GT4Py slice of the same buffer: domain starts at 16, rows [16, N) are shared
    sliced = floors(pir, {"a": base, "b": base[16:, :], "x": x, "y": y})[1]
    assert sliced == same
    # a NumPy view (domain from 0, placed by its pointer): rows [16, N) of base again
    view = numpy_view(base.ndarray[16:])
    k0 = program([kernel("k0", "x", load("a"), h=(16, None)), kernel("k1", "y", load("b"), h=(0, N - 16))], ["a", "b", "x", "y"])
    _, pb = floors(k0, {"a": base, "b": view, "x": x, "y": y})
    assert pb == (N - 16) * ROW + 2 * (N - 16) * ROW
    # a different buffer of the same shape is not an alias
    assert floors(pir, {"a": base, "b": fld(), "x": x, "y": y})[1] == 4 * N * ROW


def test_buffer_frame_places_views():
    base = fld()
    key, off, starts = buffer_frame(base)
    key2, off2, starts2 = buffer_frame(numpy_view(base.ndarray[5:, 2:]))
    assert key == key2 and off == (0, 0) and off2 == (5, 2) and starts == starts2 == (0, 0)
    assert buffer_frame(fld())[0] != key
    assert buffer_frame(base[3:, :])[1:] == ((3, 0), (3, 0))  # shifted domain and pointer cancel
    assert buffer_frame(np.float64(1.0)) is None and buffer_frame(3) is None


def test_kernel_scope_matches_the_byte_model():
    """One scope per kernel, nothing scratch: the rule gives each kernel's model bytes."""
    pir = program(
        [kernel("k0", "tmp", add(load("a"), load("a", 1))), kernel("k1", "out", add(load("tmp"), load("b"))),
         kernel("k2", "b", load("out"), h=(3, 40))], ["a", "b", "out"], ["tmp"],
    )  # fmt: skip
    args = {"a": fld(), "b": fld(), "out": fld(), "n": np.int32(N)}
    cost = cost_of_call(pir, args, {})
    per_kernel = call_touches(pir, args, {}, cost, 0)
    assert [b.total for b in floor_bytes(per_kernel)] == [k.bytes for k in cost.kernels]


def _call(pir, args, substep, program="p"):
    args = {**args, "n": np.int32(N)}
    return FloorCall(program, pir, args, {}, cost_of_call(pir, args, {}), substep)


def test_step_floors_shared_buffers_across_calls_and_substeps():
    p0 = program([kernel("k0", "x", load("a"))], ["a", "x"])
    p1 = program([kernel("k0", "y", add(load("a"), load("x")))], ["a", "x", "y"])
    a, x, y = fld(), fld(), fld()
    calls = [_call(p0, {"a": a, "x": x}, s, "p0") for s in (0, 1)]
    calls.insert(1, _call(p1, {"a": a, "x": x, "y": y}, 0, "p1"))
    calls.append(_call(p1, {"a": a, "x": x, "y": y}, 1, "p1"))
    f = step_floors(calls, steps=1)
    one = N * ROW
    assert f.kernel == 2 * (2 * one) + 2 * (3 * one)
    assert f.program == 2 * (2 * one) + 2 * (3 * one)  # one kernel per program: nothing to fuse
    assert f.substep == 2 * (3 * one)  # per substep: a read, x and y written (x read after its write)
    assert f.kernel >= f.program >= f.substep and f.substeps == 2
    assert {r.program: r.gap for r in f.programs} == {"p0": 0, "p1": 0}
    assert step_floors(calls, steps=2).substep == f.substep / 2
    # per buffer: the same totals, a buffer named by every parameter it was passed as
    assert sum(b.kernel for b in f.buffers) == f.kernel and sum(b.program for b in f.buffers) == f.program
    assert sum(b.substep for b in f.buffers) == f.substep
    assert {b.names: b.substep for b in f.buffers} == {("a",): 2 * one, ("x",): 2 * one, ("y",): 2 * one}
    # what a report records: per program its calls and floors per step (the greenline's model GB/s)
    rec = f.to_json(1e6)
    assert rec["floors_bytes"]["kernel"] == f.kernel and rec["floors_ms"]["kernel"] == 1e3 * f.kernel / 1e6
    assert rec["programs"] == {"p0": {"calls": 2, "kernel_bytes": 4 * one, "program_bytes": 4 * one},
                               "p1": {"calls": 2, "kernel_bytes": 6 * one, "program_bytes": 6 * one}}  # fmt: skip


def test_internal_buffers_written_before_read_in_every_substep_are_substep_temporaries():
    p0 = program([kernel("k0", "z", load("a"))], ["a", "z"])
    p1 = program([kernel("k0", "out", load("z"))], ["z", "out"])
    a, z, out = fld(), fld(), fld()
    calls = [c for s in (0, 1) for c in (_call(p0, {"a": a, "z": z}, s), _call(p1, {"z": z, "out": out}, s))]
    one = N * ROW
    assert step_floors(calls, 1).substep == 2 * 3 * one  # interface unknown: z's writes count
    iface = interface_buffers({"state": [a, out]})
    assert step_floors(calls, 1, iface).substep == 2 * 2 * one  # z internal, never carried: not written
    z_row = next(b for b in step_floors(calls, 1, iface).buffers if b.names == ("z",))
    assert (z_row.interface, z_row.kernel, z_row.program, z_row.substep) == (False, 4 * one, 4 * one, 0)
    # z read first in substep 1 (its value carried from substep 0): its writes count again
    carried = [_call(p0, {"a": a, "z": z}, 0), _call(p1, {"z": z, "out": out}, 0), _call(p1, {"z": z, "out": out}, 1)]
    assert step_floors(carried, 1, iface).substep == (3 * one) + (2 * one)


def test_element_rule_on_raw_touches():
    def t(mode, box, buf="b"):
        return Touch(buf, mode, box, 8)

    # write rows [0, 10), read rows [5, 20): read only [10, 20); write [0, 10)
    (b,) = floor_bytes([[t("write", ((0, 10), (0, 2))), t("read", ((5, 20), (0, 2)))]])
    assert (b.read, b.written) == (10 * 2 * 8, 10 * 2 * 8)
    (b,) = floor_bytes([[t("write", ((0, 10),)), t("read", ((0, 10),))]], scratch=lambda buf: True)
    assert b.total == 0
    with pytest.raises(ValueError, match="dimensions"):
        floor_bytes([[t("read", ((0, 1),)), t("read", ((0, 1), (0, 1)))]])
    assert is_temporary(("temporary", 0, "tmp")) and not is_temporary(("buffer", 1))


def test_fusion_pairs_point_column_and_temporaries():
    from icoforge.perf.floors import fusion_pairs

    half = N // 2
    pir = program(
        [kernel("k0", "tmp", load("a")), kernel("k1", "b", add(load("tmp"), load("a", 1))),
         kernel("k2", "out", add(load("b", 1), load("b")), h=(0, half))], ["a", "b", "out"], ["tmp"],
    )  # fmt: skip
    calls = [_call(pir, {"a": fld(), "b": fld(), "out": fld()}, s) for s in (0, 1)]
    pairs = {(p.producer, p.consumer, p.field): p for p in fusion_pairs(calls, steps=1)}
    assert set(pairs) == {("k0", "k1", "tmp"), ("k1", "k2", "b")}
    tmp, b = pairs[("k0", "k1", "tmp")], pairs[("k1", "k2", "b")]
    # tmp: read at the same point by its only consumer: its read and its write go, in both calls
    assert (tmp.access, tmp.temporary, tmp.calls) == ("point", True, 2)
    assert tmp.saved_bytes == 2 * (N * ROW + N * ROW)
    # b: read at k and k + 1 on half the rows; k1 wrote levels [0, L): level L still comes from memory
    assert (b.access, b.temporary) == ("column", False)
    assert b.saved_bytes == 2 * half * ROW


def test_granule_floors_records_substeps_and_the_interface():
    """`granule_floors` (what the side-by-side greenline calls) on a stand-in granule: a solver
    whose `time_step` calls two compiled "programs" the way GT4Py does, through their pool."""
    import functools
    import types

    from icoforge.perf.greenline import granule_floors

    class Program:  # what icon4py binds: a GT4Py program with its pool of compiled variants
        def __init__(self, pir):
            def variant(*args, offset_provider):  # the stand-in computes nothing
                return None

            variant.icoforge_artifact = types.SimpleNamespace(program_ir=pir)
            self.definition_stage = types.SimpleNamespace(definition=types.SimpleNamespace(__name__=pir.name))
            self._compiled_programs = types.SimpleNamespace(compiled_programs={"v": variant})

        def __call__(self, *args, offset_provider):
            return self._compiled_programs.compiled_programs["v"](*args, offset_provider=offset_provider)

    def compiled(pir):
        return functools.partial(Program(pir))

    p0 = dataclasses.replace(program([kernel("k0", "z", load("a"))], ["a", "z"]), name="p0")
    p1 = dataclasses.replace(program([kernel("k0", "out", load("z"))], ["z", "out"]), name="p1")
    a, z, out = fld(), fld(), fld()

    class Solver:
        def __init__(self):
            self.prog0, self.prog1, self.z = compiled(p0), compiled(p1), z

        def time_step(self, *, state):
            for prog, args in ((self.prog0, (state["a"], self.z)), (self.prog1, (self.z, state["out"]))):
                prog(*args, np.int32(N), offset_provider={})

    solver = Solver()

    class Granule:
        gpu, sync, solver = False, staticmethod(lambda: None), None

        def timed_dycore_steps(self, n):
            for _ in range(n * 5):
                self.solver.time_step(state={"a": a, "out": out})
            return 0.0

    g = Granule()
    g.solver = solver
    data = granule_floors(g, steps=2, bytes_per_s=1e9)
    one = N * ROW
    assert data["floors_bytes"] == {"kernel": 5 * 4 * one, "program": 5 * 4 * one, "substep": 5 * 2 * one}
    assert data["floors_ms"]["substep"] == pytest.approx(1e3 * 5 * 2 * one / 1e9, rel=1e-3)
    assert "time_step" not in vars(solver)  # the method is back
