"""merge-products (shared): the products of one activation become one product in parts (one
launch reads the activation once)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import ProductOp
from lanec.passes.parts import merge, names, products_of
from lanec.passes.rule import Judge, Rule


class MergeProducts(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        group = products_of(op.x)
        if len(group) < 2 or group[0] is not op:
            return
        self.decide(op, True, f"{len(group)} products of one activation ({names(group)}) as one product in parts")
        merge(group, rewriter)


@dataclass(frozen=True)
class MergeProductsRule(Rule):
    name = "merge-products"
    stage = "shared"
    patterns = (MergeProducts,)
