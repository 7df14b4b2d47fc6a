"""hold-products-in-parts (the lane's held-back rule "products in parts"): several products of
one activation are one GEMV in parts (`gemv`, which takes any parts) for a decode step's rows
(at most a gemv launch's) or a batch's. Above those rows they are kept for the tensor cores'
launch in parts where its facts take them (`facts.batch_parts_problems`: one format, and gemm_tc's
facts with the parts side by side at their aligned places, any count and size); the plan runs a
kept product in parts as one `gemm_tc` launch (`q8_gemm_tc` for q8_0 rows read quantized; gemv
launches of 32 rows where those kernels' own facts refuse the shape). Held back: one product a
part, except that a kda's q, k and v stay one product in parts where they alone meet the
conditions (KdaSplit reads them as one [rows, 3 dim] buffer)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import GEMV_ROWS, batch_parts_problems
from lanec.dialects.form import KdaOp, ProductOp, shape
from lanec.passes.parts import split
from lanec.passes.rule import Judge, Rule, rows_of, users, weight_format


def gemm_problems(rows: int, weights: list[SSAValue]) -> list[str]:
    return batch_parts_problems(rows, shape(weights[0])[1], [shape(w)[0] for w in weights],
                                [weight_format(w) for w in weights])


def kda_groups(op: ProductOp) -> list[list[int]]:
    """The parts of `op` some kda reads as its q, k and v, each group launchable on its own."""
    groups = []
    for user in {id(u): u for r in op.parts for u in users(r)}.values():
        if isinstance(user, KdaOp) and all(v.owner is op for v in (user.q, user.k, user.v)):
            group = [list(op.parts).index(v) for v in (user.q, user.k, user.v)]
            if not gemm_problems(rows_of(op), [op.weights[i] for i in group]):
                groups.append(group)
    return groups


class HoldProductsInParts(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        if len(op.weights) < 2:
            return
        rows = rows_of(op)
        if self.shim.as_gemv(rows):
            kernel = self.shim.gemv_kernel([weight_format(w) for w in op.weights])
            self.decide(op, True, f"{len(op.weights)} parts as one GEMV in parts ({kernel}): "
                                  f"{self.shim.gemv_reason(rows)}")
            return
        failed = gemm_problems(rows, list(op.weights))
        if not failed:
            self.decide(op, True, f"{len(op.weights)} parts kept for the tensor cores' GEMM in parts ({rows} rows): "
                                  f"one gemm_tc launch (gemv launches of {GEMV_ROWS} rows where its facts refuse the "
                                  "shape)")
            return
        groups = kda_groups(op)
        kept = {i for group in groups for i in group}
        groups += [[i] for i in range(len(op.weights)) if i not in kept]
        groups.sort()
        reason = "products in parts split into one product a part (a gemm_tc launch each): " + "; ".join(failed)
        if kept:
            reason += " (a kda's q, k and v stay one product in parts)"
        made, results = split(op, groups)
        self.split_back(op, reason, made)
        rewriter.replace(op, made, results)


@dataclass(frozen=True)
class HoldProductsInPartsRule(Rule):
    name = "hold-products-in-parts"
    stage = "held-back"
    patterns = (HoldProductsInParts,)
