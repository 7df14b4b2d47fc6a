"""gemv-in-parts (lane, before the shared rules): a decode step's products of one activation
become one GEMV in parts, before merge-products can take them for the tensor cores. A decode
step's rows: at most the rows a gemv launch takes, or any number where the products are a
batch's."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import GEMV_ROWS
from lanec.dialects.form import ProductOp
from lanec.passes.parts import merge, names, products_of
from lanec.passes.rule import Judge, Rule, rows_of, weight_format


class GemvInParts(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        group = products_of(op.x)
        if len(group) < 2 or group[0] is not op:
            return
        rows = rows_of(op)
        what = f"{len(group)} products of one activation ({names(group)})"
        if not self.shim.as_gemv(rows):
            self.decide(op, False, f"{what} left to merge-products: {rows} rows are above the {GEMV_ROWS} a gemv "
                                   "launch takes and the products are not a batch's")
            return
        kernel = self.shim.gemv_kernel([weight_format(w) for p in group for w in p.weights])
        self.decide(op, True, f"{what} as one GEMV in parts ({kernel}): {self.shim.gemv_reason(rows)}")
        merge(group, rewriter)


@dataclass(frozen=True)
class GemvInPartsRule(Rule):
    name = "gemv-in-parts"
    stage = "lane-before"
    patterns = (GemvInParts,)
