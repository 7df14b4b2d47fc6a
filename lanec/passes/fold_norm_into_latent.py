"""fold-norm-into-latent (held-back, lane; under the `fold_norms` knob, on by default, `--no-fold-norms`
off): a norm whose one reader is an absorbed latent attention, as its latent row (the row the step
writes into the latent cache: Kimi Linear's and DeepSeek-V3's kv_a_layernorm), rides in the
attention's first launch. The query's absorption gemv takes one CTA more a row, whose first warp norms
that row after the PDL wait and writes it where the attention reads it (the attention's launch comes
after). The norm's own one-CTA launch and its hop between kernels are gone: 7 a step at Kimi
Linear's real size, 4.7 us of its batch-1 step on the H200 (bench/RESULTS.md, twenty-fifth session).

The norm stays in the form, marked `prologue = "latent"` (its meaning unchanged: the rider writes the
bf16 norm as rmsnorm does, so the oracle is the same); the lowering launches nothing for it and gives
its input, weight and eps to the absorption gemv. Taken only without a residual (the rider writes no
sum), on the absorbed path, where one gemv launch absorbs the query (at most GEMV_ROWS rows and below
GEMM_FROM_ROWS: gemm_tc takes more) and a warp holds the row (`RiderSpec`); otherwise held back, the
reason recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import GEMM_FROM_ROWS, RiderSpec
from lanec.dialects.form import LatentAttentionOp, NormOp, shape
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, failures, norm_prologue_checks, only_user


class FoldNormIntoLatent(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NormOp, rewriter: PatternRewriter) -> None:
        if not self.shim.fold_norms or op.prologue is not None:
            return
        reader = only_user(op.result)
        if not isinstance(reader, LatentAttentionOp):
            return  # not this rule's candidate
        rows, width = shape(op.x)
        problems = failures([
            (reader.latent == op.result and list(reader.operands).count(op.result) == 1,
             "the latent attention reads the norm's result as more than its latent row"),
            (reader.path is not None and reader.path.data == "absorbed",
             "the latent attention runs expanded: latent_expand reads the latent row, no absorption gemv to ride"),
            (op.residual is None, "the norm adds a residual: the rider writes no sum"),
            *norm_prologue_checks(op),
            (rows < GEMM_FROM_ROWS, f"{rows} rows: the query's absorption is a gemm_tc launch (GEMM_FROM_ROWS "
                                    f"{GEMM_FROM_ROWS}), no gemv to ride"),
        ])
        problems += RiderSpec(rows, width, op.eps.value.data).problems()
        if self.held(op, problems):
            return
        self.mark(op, rewriter, "prologue", "latent",
                  f"rides in the query's absorption gemv of its one reader, {describe(reader)}: {rows} row(s) of "
                  f"{width}, a CTA more a row norming it after the PDL wait (one launch fewer)")


@dataclass(frozen=True)
class FoldNormIntoLatentRule(Rule):
    name = "fold-norm-into-latent"
    stage = "held-back"
    patterns = (FoldNormIntoLatent,)
