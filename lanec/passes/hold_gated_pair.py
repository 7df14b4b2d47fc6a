"""hold-gated-pair (the lane's held-back rule "gated pair"): gate and up products as one launch
run as GEMVs for a decode step's rows, a batch's rows, or under precise numerics; on the tensor
cores (one GEMM, gate and up tiles side by side) only where their formats agree and the hidden
width is a whole number of pair tiles. Held back: two products and a swiglu (which takes the
pair's quantize epilogue, if any)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import GatedProductOp, ProductOp, SwigluOp, shape
from lanec.lane import PAIR_TILE
from lanec.passes.rule import Judge, Rule, failures, name_after, rows_of, weight_format


class HoldGatedPair(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GatedProductOp, rewriter: PatternRewriter) -> None:
        rows = rows_of(op)
        if self.shim.as_gemv(rows) or not self.shim.quantized:
            why = self.shim.gemv_reason(rows) if self.shim.as_gemv(rows) else "precise numerics"
            self.decide(op, True, f"gated pair as one gated GEMV: {why}")
            return
        hidden = shape(op.gate)[0]
        gate_format, up_format = weight_format(op.gate), weight_format(op.up)
        failed = failures([
            (gate_format == up_format, f"gate ({gate_format}) and up ({up_format}) formats differ"),
            (hidden % PAIR_TILE == 0, f"hidden width {hidden} is not a whole number of pair tiles ({PAIR_TILE})"),
        ])
        if not failed:
            self.decide(op, True, f"gated pair on the tensor cores: {rows} rows, {hidden // PAIR_TILE} pair tiles")
            return
        self.decide(op, False, "gated pair split into gate and up products and a swiglu: " + "; ".join(failed))
        gate, up = ProductOp(op.x, [op.gate]), ProductOp(op.x, [op.up])
        swiglu = SwigluOp(gate.parts[0], up.parts[0], result_type=op.result.type)
        if op.quantize is not None:
            swiglu.quantize = op.quantize
        name_after(gate.parts[0], op.result, "gate")
        name_after(up.parts[0], op.result, "up")
        rewriter.replace(op, [gate, up, swiglu])


@dataclass(frozen=True)
class HoldGatedPairRule(Rule):
    name = "hold-gated-pair"
    stage = "held-back"
    patterns = (HoldGatedPair,)
