"""hold-products-in-parts (the lane's held-back rule "products in parts"): several products of
one activation are one tensor-core GEMM in parts only above the GEMV's row limit (below it, or
for a batch's rows, they are one GEMV in parts, which takes any parts), with at most four parts,
one format, each a whole number of 128-output tiles. Held back: one product a part."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import ProductOp, shape
from lanec.lane import MAX_PARTS, PART_TILE
from lanec.passes.rule import Judge, Rule, failures, rows_of, weight_format


class HoldProductsInParts(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        if len(op.weights) < 2:
            return
        rows = rows_of(op)
        if self.shim.as_gemv(rows):
            self.decide(op, True, f"{len(op.weights)} parts as one GEMV in parts: {self.shim.gemv_reason(rows)}")
            return
        formats = sorted({weight_format(w) for w in op.weights})
        ragged = [shape(w)[0] for w in op.weights if shape(w)[0] % PART_TILE]
        failed = failures([
            (len(op.weights) <= MAX_PARTS, f"{len(op.weights)} parts are more than the GEMM's {MAX_PARTS}"),
            (len(formats) == 1, f"the parts mix formats ({', '.join(formats)})"),
            (not ragged, f"outputs {', '.join(map(str, ragged))} are not whole {PART_TILE}-output tiles"),
        ])
        if not failed:
            self.decide(op, True, f"{len(op.weights)} parts as one tensor-core GEMM in parts: {rows} rows")
            return
        self.decide(op, False, "products in parts split into one product a part: " + "; ".join(failed))
        products = []
        for weight, part in zip(op.weights, op.parts, strict=True):
            product = ProductOp(op.x, [weight], result_types=[part.type])
            if op.quantize is not None:
                product.quantize = op.quantize
            products.append(product)
        rewriter.replace(op, products, [p.parts[0] for p in products])


@dataclass(frozen=True)
class HoldProductsInPartsRule(Rule):
    name = "hold-products-in-parts"
    stage = "held-back"
    patterns = (HoldProductsInParts,)
