"""hold-products-in-parts (the lane's held-back rule "products in parts"): several products of
one activation are one tensor-core GEMM in parts only above the GEMV's row limit (below it, or
for a batch's rows, they are one GEMV in parts, which takes any parts), with at most four parts,
one format, each a whole number of 128-output tiles. Held back: one product a part, except that
a kda's q, k and v stay one product in parts where they alone meet the conditions (KdaSplit
reads them as one [rows, 3 dim] buffer)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import KdaOp, ProductOp, shape
from lanec.lane import MAX_PARTS, PART_TILE
from lanec.passes.rule import Judge, Rule, failures, rows_of, users, weight_format


def gemm_checks(weights: list[SSAValue]) -> list[tuple[bool, str]]:
    formats = sorted({weight_format(w) for w in weights})
    ragged = [shape(w)[0] for w in weights if shape(w)[0] % PART_TILE]
    return [
        (len(weights) <= MAX_PARTS, f"{len(weights)} parts are more than the GEMM's {MAX_PARTS}"),
        (len(formats) == 1, f"the parts mix formats ({', '.join(formats)})"),
        (not ragged, f"outputs {', '.join(map(str, ragged))} are not whole {PART_TILE}-output tiles"),
    ]


def kda_groups(op: ProductOp) -> list[list[int]]:
    """The parts of `op` some kda reads as its q, k and v, each group launchable on its own."""
    groups = []
    for user in {id(u): u for r in op.parts for u in users(r)}.values():
        if isinstance(user, KdaOp) and all(v.owner is op for v in (user.q, user.k, user.v)):
            group = [list(op.parts).index(v) for v in (user.q, user.k, user.v)]
            if not failures(gemm_checks([op.weights[i] for i in group])):
                groups.append(group)
    return groups


class HoldProductsInParts(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        if len(op.weights) < 2:
            return
        rows = rows_of(op)
        if self.shim.as_gemv(rows):
            self.decide(op, True, f"{len(op.weights)} parts as one GEMV in parts: {self.shim.gemv_reason(rows)}")
            return
        failed = failures(gemm_checks(list(op.weights)))
        if not failed:
            self.decide(op, True, f"{len(op.weights)} parts as one tensor-core GEMM in parts: {rows} rows")
            return
        groups = kda_groups(op)
        kept = {i for group in groups for i in group}
        groups += [[i] for i in range(len(op.weights)) if i not in kept]
        groups.sort()
        reason = "products in parts split into one product a part: " + "; ".join(failed)
        if kept:
            reason += " (a kda's q, k and v stay one product in parts)"
        self.decide(op, False, reason)
        products, results = [], {}
        for group in groups:
            product = ProductOp(op.x, [op.weights[i] for i in group], result_types=[op.parts[i].type for i in group])
            if op.quantize is not None:
                product.quantize = op.quantize
            products.append(product)
            results.update(zip(group, product.parts, strict=True))
        rewriter.replace(op, products, [results[i] for i in range(len(op.weights))])


@dataclass(frozen=True)
class HoldProductsInPartsRule(Rule):
    name = "hold-products-in-parts"
    stage = "held-back"
    patterns = (HoldProductsInParts,)
