"""GT4Py's passes stopped before their fusion loop (issue 20): the "early GTIR" path.

`pass_manager.apply_common_transforms` (gt4py 1.2.1) runs, in order: front-end clean-up (inline
fundefs and lifts, expand tuple arguments, dead-code elimination, dynamic shifts), domain
inference, broadcast removal, `concat_where` -> `as_fieldop`; then a fixed-point loop of
InlineLambdas, ConstantFolding, CollapseTuple, InlineScalar and FuseAsFieldOp (GT4Py's fusion
decisions: which field operator is recomputed inside which, 59 % of the pass time on the granule);
then CSE, temporaries extraction, FuseMaps, CollapseListGet and the unrolling of reductions.

`early_transforms` runs the passes before that loop and stops after `transform_to_as_fieldop`:
field operators stay nested (`as_fieldop(...)(as_fieldop(...)(a), b)`), with `let`-bound fields,
tuples of fields, reductions not unrolled. lower_fields.py lowers that GTIR: it decides per read
whether a field operator is recomputed in its reader or stored in a temporary (GT4Py's fusion
choices, per read), and lower_stencil.py unrolls reductions and list maps itself; the temporaries
it stores are then icoforge's inline pass's to recompute (inline.py, the byte cost model).
benchmarks/early-gtir-R2B3-10.md: 8.5 instead of 25.7 CPU-s on the predictor solver; 4.0 instead of 7.8
with dead_code.py's dead-code elimination in place of GT4Py's (session 15, section 6).

| pass | why the lowering needs it |
| --- | --- |
| InlineFundefs, InlineLifts, NormalizeShifts | the lowering has no function definitions or `lift`; shifts normalised |
| expand_tuple_args, ExpandTupleMaps | domain inference needs them (no tuple `concat_where`, no maps over tuples) |
| dead_code_elimination (dead_code.py's; `gt4py_dce=True`: GT4Py's) | domain inference needs it: no dead code (constant `if_`), no lambda-valued lets, tuples taken apart; dead_code.py applies GT4Py's rules with GT4Py's result (78 of 78 programs), 0.27 instead of 4.7 CPU-s on the predictor |
| InlineDynamicShifts, InferDomainOps, canonicalize_domain_argument | domain inference needs them |
| infer_domain, prune_empty_concat_where, RemoveBroadcast | every `as_fieldop` gets its domain: kernel and temporary ranges |
| transform_to_as_fieldop | `concat_where` -> `as_fieldop` with an `if_` on the index |

Not run: the fixed-point loop (FuseAsFieldOp, CollapseTuple, InlineScalar, ConstantFolding,
InlineLambdas), CSE, create_global_tmps, FuseMaps, CollapseListGet, UnrollReduce.
`extract_temporaries=True` adds a restricted FuseAsFieldOp (lists only) and GT4Py's temporaries
extraction instead (the first attempt: as slow as the full list, create_global_tmps alone took 9
of 23 CPU-s on the predictor); `gt4py_loop=True` is GT4Py's own list, each pass timed.

Every GT4Py internal used here is named in gt4py_compat.py's table; checked on gt4py 1.2.1.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from gt4py.next import common, utils
from gt4py.next.iterator import ir as itir
from gt4py.next.iterator.transforms import (
    concat_where,
    dead_code_elimination,
    expand_tuple_maps,
    fuse_as_fieldop,
    global_tmps,
    infer_domain,
    infer_domain_ops,
    inline_dynamic_shifts,
    inline_fundefs,
    inline_lifts,
    pass_manager,
    prune_empty_concat_where,
    remove_broadcast,
)
from gt4py.next.iterator.transforms.collapse_list_get import CollapseListGet
from gt4py.next.iterator.transforms.fuse_maps import FuseMaps
from gt4py.next.iterator.transforms.inline_lambdas import InlineLambdas
from gt4py.next.iterator.transforms.merge_let import MergeLet
from gt4py.next.iterator.transforms.normalize_shifts import NormalizeShifts
from gt4py.next.iterator.transforms.unroll_reduce import UnrollReduce
from gt4py.next.iterator.type_system import inference
from gt4py.next.type_system import type_info, type_specifications as ts

from icoforge.backend.frontend import dead_code

Timer = Callable[[str, float], None]


def _must_fuse(node: itir.Expr, shifts) -> bool:
    """FuseAsFieldOp's predicate restricted to what cannot be a temporary: list-valued fields and
    tuples of literals (GT4Py's `_arg_inline_predicate` also fuses single-argument field operators
    and those read only at the centre: those are ours to decide)."""
    if fuse_as_fieldop._is_tuple_expr_of_literals(node):
        return True
    from gt4py.next.iterator.ir_utils import common_pattern_matcher as cpm

    if cpm.is_applied_as_fieldop(node) and not cpm.is_call_to(node.fun.args[0], "scan"):
        inference.reinfer(node)
        if isinstance(node.type, ts.TypeSpec):
            dtype = type_info.tree_map_type(type_info.extract_dtype)(node.type)
            return isinstance(dtype, ts.ListType)
    return False


# no FUSE_MAKE_TUPLE: tuples of fields stay tuples (create_global_tmps stores each element)
_LIST_FUSION = (
    fuse_as_fieldop.FuseAsFieldOp.Transformation.FUSE_AS_FIELDOP
    | fuse_as_fieldop.FuseAsFieldOp.Transformation.INLINE_LET_VARS_OPCOUNT_PRESERVING
)


@contextlib.contextmanager
def _list_fusion_only() -> Iterator[None]:
    original = fuse_as_fieldop._arg_inline_predicate
    fuse_as_fieldop._arg_inline_predicate = _must_fuse
    try:
        yield
    finally:
        fuse_as_fieldop._arg_inline_predicate = original


def early_transforms(
    program: itir.Program,
    offset_provider: common.OffsetProvider,
    timer: Timer | None = None,
    gt4py_loop: bool = False,
    extract_temporaries: bool = False,
    gt4py_dce: bool = False,
) -> itir.Program:
    """GTIR -> GTIR as the lowering needs it, without GT4Py's fusion loop (module docstring).
    `gt4py_loop=True` runs GT4Py's loop and CSE in their place instead: the same result as
    `apply_common_transforms` (for timing each pass of the reference path). `gt4py_dce=True` runs
    GT4Py's dead_code_elimination instead of dead_code.py's (the same result, ~15x the time)."""
    op_type = common.offset_provider_to_type(offset_provider)
    sizes = pass_manager._process_symbolic_domains_option(program, offset_provider, None, None)
    uids = utils.IDGeneratorPool()
    ir = program

    def step(name: str, fn: Callable[[itir.Program], itir.Program]) -> None:
        nonlocal ir
        t0 = time.process_time()  # CPU seconds: the machines these are measured on are shared
        ir = fn(ir)
        if timer is not None:
            timer(name, time.process_time() - t0)

    step("MergeLet", MergeLet().visit)
    step("InlineFundefs", lambda p: inline_fundefs.prune_unreferenced_fundefs(inline_fundefs.InlineFundefs().visit(p)))
    step("NormalizeShifts", NormalizeShifts().visit)
    step("InlineLifts", inline_lifts.InlineLifts().visit)
    step("expand_tuple_args", lambda p: concat_where.expand_tuple_args(p, offset_provider_type=op_type))
    step("ExpandTupleMaps", lambda p: expand_tuple_maps.ExpandTupleMaps.apply(p, uids=uids, offset_provider_type=op_type))
    dce = dead_code_elimination.dead_code_elimination if gt4py_dce else dead_code.dead_code_elimination
    step("dead_code_elimination", lambda p: dce(p, uids=uids, offset_provider_type=op_type))
    step("InlineDynamicShifts", lambda p: inline_dynamic_shifts.InlineDynamicShifts.apply(p, offset_provider_type=op_type, uids=uids))
    step("InferDomainOps", infer_domain_ops.InferDomainOps.apply)
    step("canonicalize_domain_argument", concat_where.canonicalize_domain_argument)
    step("infer_domain", lambda p: infer_domain.infer_program(p, offset_provider=offset_provider, symbolic_domain_sizes=sizes))
    step("prune_empty_concat_where", prune_empty_concat_where.prune_empty_concat_where)
    step("RemoveBroadcast", remove_broadcast.RemoveBroadcast.apply)
    step("transform_to_as_fieldop", concat_where.transform_to_as_fieldop)
    if not (gt4py_loop or extract_temporaries):
        return ir  # nested field operators, lets, tuples: lowered by lower.py (lower_fields.py)
    if gt4py_loop:
        _gt4py_fusion_loop(step, op_type, uids)
    else:
        with _list_fusion_only():
            step("FuseAsFieldOp(lists)", lambda p: fuse_as_fieldop.FuseAsFieldOp.apply(
                p, uids=uids, offset_provider_type=op_type, enabled_transformations=_LIST_FUSION))
    step("infer(before tmps)", lambda p: inference.infer(p, inplace=True, offset_provider_type=op_type))
    step("create_global_tmps", lambda p: global_tmps.create_global_tmps(p, offset_provider=offset_provider, symbolic_domain_sizes=sizes, uids=uids))
    step("NormalizeShifts(2)", NormalizeShifts().visit)
    step("FuseMaps", FuseMaps(uids=uids).visit)
    step("CollapseListGet", CollapseListGet().visit)
    step("unroll_reduce", lambda p: _unroll(p, op_type, uids))
    step("InlineLambdas(final)", lambda p: InlineLambdas.apply(p, opcount_preserving=True))
    return ir


def _gt4py_fusion_loop(step, op_type, uids) -> None:
    """pass_manager's fixed-point loop and CSE, each pass timed under its own name."""
    from gt4py.next.iterator.transforms.collapse_tuple import CollapseTuple
    from gt4py.next.iterator.transforms.constant_folding import ConstantFolding
    from gt4py.next.iterator.transforms.cse import CommonSubexpressionElimination
    from gt4py.next.iterator.transforms.inline_scalar import InlineScalar

    tuples = ~CollapseTuple.Transformation.PROPAGATE_TO_IF_ON_TUPLES
    holder: dict = {}
    for _ in range(10):
        step("loop:snapshot", lambda p: holder.setdefault("before", p) and p)
        before = holder.pop("before")
        step("loop:InlineLambdas", lambda p: InlineLambdas.apply(p, opcount_preserving=True))
        step("loop:ConstantFolding", ConstantFolding.apply)
        step("loop:CollapseTuple", lambda p: CollapseTuple.apply(p, enabled_transformations=tuples, uids=uids, offset_provider_type=op_type))
        step("loop:InlineScalar", lambda p: InlineScalar.apply(p, offset_provider_type=op_type))
        step("loop:FuseAsFieldOp", lambda p: fuse_as_fieldop.FuseAsFieldOp.apply(p, uids=uids, offset_provider_type=op_type))
        converged: list = []
        step("loop:compare", lambda p: converged.append(p == before) or p)
        if converged[0]:
            break
    step("CSE", lambda p: CommonSubexpressionElimination.apply(p, offset_provider_type=op_type, uids=uids))
    step("MergeLet(2)", MergeLet().visit)
    step("InlineLambdas(2)", lambda p: InlineLambdas.apply(p, opcount_preserving=True))


def _unroll(ir: itir.Program, op_type, uids) -> itir.Program:
    for _ in range(10):
        unrolled = UnrollReduce.apply(ir, offset_provider_type=op_type, uids=uids)
        unrolled = CollapseListGet().visit(unrolled)
        unrolled = NormalizeShifts().visit(unrolled)
        unrolled = inline_lifts.InlineLifts().visit(unrolled)
        unrolled = NormalizeShifts().visit(unrolled)
        if unrolled == ir:
            return ir
        ir = unrolled
    raise RuntimeError("Reduction unrolling failed.")
