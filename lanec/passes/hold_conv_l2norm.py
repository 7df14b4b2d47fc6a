"""hold-conv-l2norm (the lane's held-back rule "conv + L2 norm"): a conv's epilogue takes a
per-head L2 norm over heads of at most 1024 values, a whole number of warps, dividing the
conv's channels (facts of the `conv` kernel's L2 norm epilogue: `facts.conv_norm_problems`). Held
back: the conv, then a `form.l2norm`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from lanec.codegen.facts import conv_norm_problems
from lanec.dialects.form import ConvOp, L2NormOp, shape
from lanec.passes.rule import Judge, Rule


class HoldConvL2Norm(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ConvOp, rewriter: PatternRewriter) -> None:
        if op.norm_heads is None:
            return
        channels, heads = shape(op.x)[1], op.norm_heads.value.data
        size = channels // heads
        failed = conv_norm_problems(size, channels)
        if not failed:
            self.decide(op, True, f"L2 norm of heads of {size} in the conv's epilogue")
            return
        norm = L2NormOp(op.result, heads, op.norm_eps.value.data)
        self.split_back(op, "conv + L2 norm split into a conv and an l2norm: " + "; ".join(failed), [norm])
        del op.properties["norm_heads"], op.properties["norm_eps"]
        rewriter.notify_op_modified(op)
        rewriter.insert(norm, InsertPoint.after(op))
        rewriter.replace_uses_with_if(op.result, norm.result, lambda use: use.operation is not norm)


@dataclass(frozen=True)
class HoldConvL2NormRule(Rule):
    name = "hold-conv-l2norm"
    stage = "held-back"
    patterns = (HoldConvL2Norm,)
