"""icoforge's dead-code elimination (backend/frontend/dead_code.py) gives GT4Py's `dead_code_elimination`
result: the same GTIR (`==` and `str`), the same names drawn from the pass manager's pool, and so
the same kernels; where it does not handle a case, GT4Py's pass runs (the same result too)."""

from __future__ import annotations

import pytest
from gt4py.next import common, utils
from gt4py.next.iterator import ir as itir
from gt4py.next.iterator.ir_utils import ir_makers as im
from gt4py.next.iterator.transforms import dead_code_elimination as gt4py_dce
from gt4py.next.iterator.type_system import inference
from gt4py.next.type_system import type_specifications as ts

from icoforge.backend.frontend import dead_code, gt4py_compat, gt4py_early, gt4py_speedups
from icoforge.backend.lowering import lower
from icoforge.perf.static import compilable_program_static
from icoforge.suite.catalogue import get_program
from icoforge.suite.inputs import make_scalars
from icoforge.suite.runner import static_param_names
from icoforge.suite.specs import cast_scalar

PREFIXES = ("__ct_el",)
OURS = dead_code.dead_code_elimination  # the test below wraps the module's in a comparison


def _both(program: itir.Program, uids: utils.IDGeneratorPool, op_type) -> itir.Program:
    """Ours and GT4Py's on the same input from the same names; asserts they agree, returns ours
    with `uids` where ours left it."""
    saved = gt4py_compat.save_uids(uids, PREFIXES)
    ours = OURS(program, uids=uids, offset_provider_type=op_type)
    after = gt4py_compat.save_uids(uids, PREFIXES)
    gt4py_compat.restore_uids(uids, saved)
    theirs = gt4py_dce.dead_code_elimination(program, uids=uids, offset_provider_type=op_type)
    assert ours == theirs and str(ours) == str(theirs)
    assert gt4py_compat.save_uids(uids, PREFIXES) == after  # the same names drawn
    return ours


def _fallbacks(monkeypatch) -> list[str]:
    seen: list[str] = []
    eliminate = dead_code._eliminate

    def spy(program, uids):
        try:
            return eliminate(program, uids)
        except dead_code._Unsupported as e:
            seen.append(str(e))
            raise

    monkeypatch.setattr(dead_code, "_eliminate", spy)
    return seen


@pytest.mark.parametrize(
    "name",
    [
        "vertically_implicit_solver_at_predictor_step",  # the largest: every rule the suite needs
        "compute_rho_theta_pgrad_and_update_vn",  # most tuple rewrites, nested lets renamed
        "apply_divergence_damping_and_update_vn",  # constant `if_`s folded, tuple_get through lets
        "compute_advection_in_corrector_vertical_momentum",  # make_tuple(t[0], t[1]) -> t
        "solve_tridiagonal_matrix_for_w_forward_sweep",  # a scan with a tuple carry
    ],
)
def test_same_program_and_kernels_as_gt4pys_pass(name, tiny_grid, monkeypatch):
    """The early path with each: the same input to the pass, the same output and names drawn,
    the same GTIR at the end and the same kernels (the lowering also reads what the passes after
    it leave on the nodes: the inferred domains)."""
    info = get_program(name)
    scalars = make_scalars(info, tiny_grid, seed=0)
    static = {n: cast_scalar(scalars[n], info.param(n).dtype) for n in static_param_names(info, "icon4py")}
    inp = compilable_program_static(info.program, tiny_grid.connectivities, static)
    op = inp.args.offset_provider
    fallbacks = _fallbacks(monkeypatch)
    seen: dict[str, tuple] = {}

    def recorded(mode, fn):
        def run(program, *, uids, offset_provider_type):
            out = fn(program, uids=uids, offset_provider_type=offset_provider_type)
            seen[mode] = (program, out, gt4py_compat.save_uids(uids, PREFIXES))
            return out

        return run

    monkeypatch.setattr(dead_code, "dead_code_elimination", recorded("icoforge", OURS))
    monkeypatch.setattr(gt4py_dce, "dead_code_elimination", recorded("gt4py", gt4py_dce.dead_code_elimination))
    with gt4py_speedups.patched():
        ours = gt4py_early.early_transforms(inp.data, op)
        theirs = gt4py_early.early_transforms(inp.data, op, gt4py_dce=True)
    assert set(seen) == {"icoforge", "gt4py"} and not fallbacks
    (a_in, a_out, a_uids), (b_in, b_out, b_uids) = seen["icoforge"], seen["gt4py"]
    assert a_in == b_in and a_out == b_out and str(a_out) == str(b_out) and a_uids == b_uids
    assert ours == theirs and str(ours) == str(theirs)
    op_type = common.offset_provider_to_type(op)
    kernels = [str(lower.lower_program(p, inp.args.args, op_type, early=True)) for p in (ours, theirs)]
    assert kernels[0] == kernels[1]


IDIM = common.Dimension("IDim")
FIELD = ts.FieldType(dims=[IDIM], dtype=ts.ScalarType(kind=ts.ScalarKind.FLOAT64))
DOMAIN = im.domain(common.GridType.CARTESIAN, {IDIM: (0, 10)})


def _program(expr: itir.Expr, target: itir.Expr, params: dict[str, ts.TypeSpec]) -> itir.Program:
    program = itir.Program(
        id="p", function_definitions=[], params=[im.sym(n, t) for n, t in params.items()], declarations=[],
        body=[itir.SetAt(expr=expr, domain=DOMAIN, target=target)],
    )  # fmt: skip
    return inference.infer(program, offset_provider_type={})  # types, as expand_tuple_args leaves them


def _add(*args: str) -> itir.Expr:
    return im.as_fieldop(im.lambda_("__arg0", "__arg1")(im.plus(im.deref("__arg0"), im.deref("__arg1"))), DOMAIN)(*args)


def test_lets_constants_and_tuples_as_gt4py(monkeypatch):
    """Small programs with what the rules do: a let bound twice and an argument whose stencil
    parameter names clash with the body's (renamed), a constant `if_`, a tuple taken apart through
    a let, a tuple rebuilt from its elements, a let nested in a let's argument."""
    fallbacks = _fallbacks(monkeypatch)
    pair = ts.TupleType(types=[FIELD, FIELD])
    fields = {"a": FIELD, "b": FIELD, "out": FIELD}
    cases = [
        _program(im.let("x", _add("a", "b"))(im.let("y", im.if_(True, "x", "b"))(_add("y", "y"))), im.ref("out"), fields),
        _program(im.let("t", im.make_tuple(_add("a", "b"), "b"))(_add(im.tuple_get(0, "t"), im.tuple_get(1, "t"))), im.ref("out"), fields),
        _program(
            im.let("s", im.make_tuple(im.tuple_get(0, "tp"), im.tuple_get(1, "tp")))(im.make_tuple(im.tuple_get(1, "s"), _add(im.tuple_get(0, "s"), "a"))),
            im.make_tuple("out", "out2"), {"a": FIELD, "tp": pair, "out": FIELD, "out2": FIELD},
        ),
        _program(im.let("z", im.let("w", _add("a", "a"))(_add("w", "w")))(_add("z", "b")), im.ref("out"), fields),
    ]  # fmt: skip
    uids = utils.IDGeneratorPool()
    for program in cases:
        _both(program, uids, {})
    assert not fallbacks


def test_tuple_argument_of_a_field_operator_runs_gt4pys_pass(monkeypatch):
    """FLATTEN_AS_FIELDOP_ARGS (not transcribed; no suite program needs it): GT4Py's pass runs,
    from the names ours had not drawn yet."""
    fallbacks = _fallbacks(monkeypatch)
    stencil = im.lambda_("t")(im.plus(im.tuple_get(0, im.deref("t")), im.tuple_get(1, im.deref("t"))))
    program = _program(
        im.let("x", im.make_tuple("a", _add("b", "b")))(im.as_fieldop(stencil, DOMAIN)("x")), im.ref("out"),
        {"a": FIELD, "b": FIELD, "out": FIELD},
    )  # fmt: skip
    result = _both(program, utils.IDGeneratorPool(), {})
    assert len(fallbacks) == 1 and "FLATTEN_AS_FIELDOP_ARGS" in fallbacks[0]
    assert "__ct_flat_el_0_t" in str(result)
