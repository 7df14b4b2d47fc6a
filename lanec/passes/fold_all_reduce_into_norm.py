"""fold-all-reduce-into-norm (held-back, lane): a tensor-parallel step's all-reduce whose only
reader is the norm right after it (fold-residual made the add before that norm its residual) runs
in one launch with the norm, `all_reduce_norm`: each CTA takes a row, sums it over the ranks'
mapped memory as the one-shot all-reduce does, adds the residual and normalizes it. The total
never reaches memory, and the norm's own launch and its wait for the all-reduce are gone.

The all-reduce stays in the form, marked `into = "norm"` (its meaning unchanged). The fused launch
exists only on the one-shot engine: the plan keeps the all-reduce and the norm's launch beside it,
for NCCL (which has no norm) and for LANEC_ALL_REDUCE=oneshot-apart. Taken where the one-shot
takes the message as rows (`PeerLayout(rows=...)`) and the rmsnorm kernel takes the rows (bf16,
no quantize epilogue, not in a gemv's prologue); otherwise held back, the reason recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import RmsNormSpec
from lanec.dialects.form import AllReduceOp, NormOp, element, is_float, shape
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, result_name
from lanec.runtime.peer import PeerLayout


class FoldAllReduceIntoNorm(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AllReduceOp, rewriter: PatternRewriter) -> None:
        if op.into is not None:
            return
        norm = op.next_op
        readers = {use.operation for use in op.result.uses}
        if not isinstance(norm, NormOp) or readers != {norm} or list(norm.operands).count(op.result) != 1:
            names = ", ".join(sorted(r.name.removeprefix("form.") for r in readers)) or "nothing"
            self.decide(op, False, f"its readers are {names}: only a norm right after it, its only reader, sums "
                                   "it in its kernel, reading it once")
            return
        rows, width = shape(op.result)
        ranks = op.ranks.value.data
        problems = []
        if norm.prologue is not None:
            problems.append(f"the norm runs in its reader's {norm.prologue.data} prologue "
                            f"(fold-norm-into-{norm.prologue.data})")
        if norm.quantize is not None:
            problems.append("the norm quantizes its result: all_reduce_norm writes bf16")
        if not is_float(op.result) or str(element(op.result)) != "bf16":
            problems.append(f"it sums {element(op.result)}: the norm's kernel reads bf16")
        else:
            layout = PeerLayout(rows * width, "bfloat16", ranks, rows=rows)
            problems += [f"the one-shot: {p}" for p in layout.problems()]
        problems += [f"rmsnorm: {p}" for p in RmsNormSpec(rows, width, norm.eps.value.data).problems()]
        if self.held(op, problems):
            return
        self.mark(op, rewriter, "into", "norm",
                  f"sums in the launch of {describe(norm)} on the one-shot engine (all_reduce_norm: a CTA a row of "
                  f"{width}, {rows * width * 2} bytes from every rank's memory); {result_name(op.result)} never "
                  "reaches memory, one launch fewer")


@dataclass(frozen=True)
class FoldAllReduceIntoNormRule(Rule):
    name = "fold-all-reduce-into-norm"
    stage = "held-back"
    patterns = (FoldAllReduceIntoNorm,)
