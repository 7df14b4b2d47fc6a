"""hold-gated-pair (the lane's held-back rule "gated pair"): gate and up products as one launch
run as one gated GEMV (`gated_gemv`) for a decode step's rows, a batch's rows, or under precise
numerics. Otherwise the pair is kept for the tensor cores' GEMM of gate and up tiles side by side
(not built yet: `unbuilt.gated_pair_problems`) only where their formats agree and the hidden width
is whole pair tiles of 128 hidden values (a 256-wide tile); until that GEMM is built the plan runs
a kept pair as two `gemm_tc` launches (gate, up) and a swiglu, or `gated_gemv` launches of 32 rows
where gemm_tc's facts refuse the shape. Held back: two products and a swiglu (which
takes the pair's quantize epilogue, if any)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import GEMV_ROWS
from lanec.codegen.unbuilt import PAIR_TILE, gated_pair_problems
from lanec.dialects.form import GatedProductOp, shape
from lanec.passes.parts import unpair
from lanec.passes.rule import Judge, Rule, rows_of, weight_format


class HoldGatedPair(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GatedProductOp, rewriter: PatternRewriter) -> None:
        rows = rows_of(op)
        if self.shim.as_gemv(rows) or not self.shim.quantized:
            why = self.shim.gemv_reason(rows) if self.shim.as_gemv(rows) else "precise numerics"
            self.decide(op, True, f"gated pair as one gated GEMV (gated_gemv): {why}")
            return
        hidden = shape(op.gate)[0]
        failed = gated_pair_problems(hidden, weight_format(op.gate), weight_format(op.up))
        if not failed:
            self.decide(op, True, f"gated pair kept for the tensor cores ({rows} rows, {hidden // PAIR_TILE} pair "
                                  f"tiles of {PAIR_TILE}); their side-by-side GEMM is not built yet: gate and up by "
                                  f"gemm_tc (each weight read once; gated_gemv where gemm_tc cannot, {GEMV_ROWS} rows "
                                  "a launch), then a swiglu")
            return
        made = unpair(op)
        self.split_back(op, "gated pair split into gate and up products (gemv) and a swiglu (elementwise): "
                            + "; ".join(failed), made)
        rewriter.replace(op, made)


@dataclass(frozen=True)
class HoldGatedPairRule(Rule):
    name = "hold-gated-pair"
    stage = "held-back"
    patterns = (HoldGatedPair,)
