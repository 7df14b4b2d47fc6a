"""pair-gate-up (shared): gate and up products of one activation feeding a swiglu become one
gated pair, `form.gated_product` (the swiglu's epilogue, if it has one, goes with it)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import GatedProductOp, ProductOp, SwigluOp
from lanec.passes.rule import Judge, Rule, is_single_product, only_user, result_name


class PairGateUp(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SwigluOp, rewriter: PatternRewriter) -> None:
        gate, up = op.lhs.owner, op.rhs.owner
        if not (isinstance(gate, ProductOp) and isinstance(up, ProductOp)):
            return
        if gate.x is not up.x:
            return
        pair = f"gate {result_name(op.lhs)} and up {result_name(op.rhs)}"
        for part, product in ((op.lhs, gate), (op.rhs, up)):
            if not is_single_product(product):
                self.decide(op, False, f"{pair} not paired: {result_name(part)} is a part of a product in parts, "
                                       "a per-head part or a quantizing product")
                return
            if only_user(part) is not op:
                self.decide(op, False, f"{pair} not paired: {result_name(part)} is read elsewhere too")
                return
        paired = GatedProductOp(gate.x, gate.weights[0], up.weights[0], result_type=op.result.type)
        if op.quantize is not None:
            paired.quantize = op.quantize
        self.decide(op, True, f"{pair} of one activation as one gated pair")
        rewriter.replace(op, paired)
        for product in {id(gate): gate, id(up): up}.values():
            rewriter.erase(product)


@dataclass(frozen=True)
class PairGateUpRule(Rule):
    name = "pair-gate-up"
    stage = "shared"
    patterns = (PairGateUp,)
