"""fold-norm-into-router (held-back, lane; the `fold_router_norms` knob, on by default: measured
faster, `--no-fold-router-norms` turns it off): a norm whose one reader is a mixture (its router's
and experts' input) runs in the prologue of the mixture's fused router. Each CTA of the router's
cluster reads the norm's input (and residual) after the PDL wait, norms its block's rows into its
shared memory and dots its router rows with them; the first CTA writes the normed rows (the
experts read them) and the new residual stream. The norm's own one-CTA-a-row launch and its step
between kernels are gone; the router's eight CTAs redo a norm of a few KB each, where a gemv's
thousands of CTAs would redo it thousands of times (fold-norm-into-gemv's cost).

The norm stays in the form, marked `prologue = "router"` (its meaning unchanged, so the oracle is
the same); the lowering launches nothing for it and gives its input, residual, weight and eps to
the mixture's router. Taken only where the router is the fused one (below ROUTER_GEMM_ROWS its
logits are not a gemm_tc launch's) and its facts take the norm (`MixtureRouterSpec.norm_problems`:
a thread's share of the block's rows within its registers, the normed rows within its shared
memory); otherwise held back, the reason recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import (
    MixtureRouterSpec,
    router_gemm_spec,
    router_rows_a_cta,
    router_split,
    router_warps,
)
from lanec.dialects.form import MixtureOp, NormOp, shape
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, failures, norm_prologue_checks, only_user


class FoldNormIntoRouter(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NormOp, rewriter: PatternRewriter) -> None:
        if not self.shim.fold_router_norms or op.prologue is not None:
            return
        reader = only_user(op.result)
        if not isinstance(reader, MixtureOp):
            return  # not this rule's candidate (fold-norm-into-gemv's, or no fold's)
        rows, width = shape(op.x)
        experts = shape(reader.router)[0]
        split = router_split(experts)
        rows_a_cta = router_rows_a_cta(rows, router_warps(experts, split)[2])
        problems = failures([
            (reader.x == op.result and list(reader.operands).count(op.result) == 1,
             "the mixture reads the norm's result as more than its input rows"),
            *norm_prologue_checks(op),
            (router_gemm_spec(rows, width, experts) is None,
             f"{rows} rows: the router's logits are a gemm_tc launch (ROUTER_GEMM_ROWS), no fused router to "
             "take the norm"),
        ])
        problems += MixtureRouterSpec(rows, width, experts, reader.top_k.value.data, split=split,
                                      rows_a_cta=rows_a_cta, norm=True).norm_problems()
        if self.held(op, problems):
            return
        self.mark(op, rewriter, "prologue", "router",
                  f"runs in the prologue of its one reader's router, {describe(reader)}: {rows} row(s) of {width}, "
                  f"{split} CTA(s) a cluster, each norming its {rows_a_cta} row(s) itself (one launch fewer)")


@dataclass(frozen=True)
class FoldNormIntoRouterRule(Rule):
    name = "fold-norm-into-router"
    stage = "held-back"
    patterns = (FoldNormIntoRouter,)
