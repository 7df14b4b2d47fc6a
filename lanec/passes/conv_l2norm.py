"""conv-l2norm (shared): a per-head L2 norm of a convolution's output goes into the conv's
epilogue (`norm_heads`, `norm_eps`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import ConvOp, L2NormOp
from lanec.passes.rule import Judge, Rule, only_user, result_name


class ConvL2Norm(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: L2NormOp, rewriter: PatternRewriter) -> None:
        conv = op.x.owner
        if not isinstance(conv, ConvOp) or conv.norm_heads is not None:
            return
        if only_user(conv.result) is not op:
            self.decide(op, False, f"the conv's output {result_name(conv.result)} is read unnormed too", about=conv)
            return
        self.decide(op, True, f"L2 norm of {op.heads.value.data} heads in the conv's epilogue", about=conv)
        conv.norm_heads = op.heads
        conv.norm_eps = op.eps
        rewriter.notify_op_modified(conv)
        rewriter.replace(op, [], [conv.result])


@dataclass(frozen=True)
class ConvL2NormRule(Rule):
    name = "conv-l2norm"
    stage = "shared"
    patterns = (ConvL2Norm,)
