"""fold-residual (shared): an add feeding a norm becomes the norm's residual; the add's other
readers take the norm's sum (the new residual stream)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from lanec.dialects.form import AddOp, NormOp
from lanec.passes.rule import Judge, Rule, defined_before, result_name


class FoldResidual(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NormOp, rewriter: PatternRewriter) -> None:
        add = op.x.owner
        if not isinstance(add, AddOp) or op.residual is not None:
            return
        if add.quantize is not None:
            self.decide(op, False, f"the add {result_name(add.result)} quantizes its result: the norm reads int8")
            return
        if not defined_before(op.weight, add):
            self.decide(op, False, "the norm weight is defined after the add")
            return
        folded = NormOp(add.lhs, op.weight, op.eps.value.data, residual=add.rhs, result_type=op.result.type)
        if op.quantize is not None:
            folded.quantize = op.quantize
        folded.result.name_hint, folded.sum.name_hint = op.result.name_hint, add.result.name_hint
        self.decide(op, True, "the add before it folded into the norm as its residual")
        rewriter.insert(folded, InsertPoint.before(add))
        rewriter.replace(op, [], [folded.result])
        rewriter.replace(add, [], [folded.sum])


@dataclass(frozen=True)
class FoldResidualRule(Rule):
    name = "fold-residual"
    stage = "shared"
    patterns = (FoldResidual,)
