"""hold-gated-pair (the lane's held-back rule "gated pair"): gate and up products as one launch.
A decode step's rows or a batch's (at most a gemv launch's) run as one gated GEMV (`gated_gemv`).
Above them the pair is one `gemm_tc` launch with gate and up tiles side by side (each CTA's
128-row wgmma tile 64 gate rows beside the same 64 up rows, the weights interleaved once at load,
SwiGLU in the epilogue: the [rows, 2 hidden] products never reach memory), only where their formats
agree and the hidden width is whole pair tiles of 64 (`facts.gated_pair_problems`). Held back: two
products (each its own gemm_tc launch) and a swiglu (which takes the pair's quantize epilogue, if
any)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import PAIR_TILE, gated_pair_problems
from lanec.dialects.form import GatedProductOp, shape
from lanec.passes.parts import unpair
from lanec.passes.rule import Judge, Rule, rows_of, weight_format


class HoldGatedPair(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GatedProductOp, rewriter: PatternRewriter) -> None:
        rows = rows_of(op)
        if self.shim.as_gemv(rows):
            kernel = self.shim.gemv_kernel([weight_format(op.gate), weight_format(op.up)], gated=True)
            self.decide(op, True, f"gated pair as one gated GEMV ({kernel}): {self.shim.gemv_reason(rows)}")
            return
        hidden = shape(op.gate)[0]
        failed = gated_pair_problems(hidden, weight_format(op.gate), weight_format(op.up))
        if not failed:
            self.decide(op, True, f"gated pair on the tensor cores ({rows} rows): one gemm_tc launch of "
                                  f"{hidden // PAIR_TILE} pair tiles, {PAIR_TILE} gate rows beside their {PAIR_TILE} "
                                  "up rows, SwiGLU in the epilogue")
            return
        made = unpair(op)
        self.split_back(op, "gated pair split into gate and up products and a swiglu (elementwise): "
                            + "; ".join(failed), made)
        rewriter.replace(op, made)


@dataclass(frozen=True)
class HoldGatedPairRule(Rule):
    name = "hold-gated-pair"
    stage = "held-back"
    patterns = (HoldGatedPair,)
