"""fold-gate-product (held-back, lane; only under the `fold_gate` knob, `--fold-gate`): a kda whose
output gate is a product read by nothing else takes that product's input and weight (`gate_b`)
instead, and KdaSplit does the product in each token's output CTA. In Kimi Linear the gate is
g_b(g_a(x)): g_a's [rows, 128] output is already a part of the layer's merged product, and g_b's
[rows, dim] result is a launch of its own between that product and the kda. Taken only where
KdaSplit can do the product (`KdaSplitSpec.gate_problems`: rank 128, bf16 rows). Off by default:
measured slower on the H200 (bench/RESULTS.md, 2026-11-30): the output CTA's dot sits on the
step's critical path (batch 1: no gain), and at 64 and 256 requests every output CTA reads its
head's 32 KB of rows where g_b's own launch read the weight once (kimi-kda-b64 12%, b256 29% slower)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import KdaSplitSpec
from lanec.dialects.form import KdaOp, ProductOp, shape
from lanec.passes.fold_kda import kda_with_gate
from lanec.passes.rule import Judge, Rule, defined_before, is_single_product, only_user, weight_format


def gate_problems(kda: KdaOp, gate: SSAValue, weight: SSAValue) -> list[str]:
    """Why KdaSplit cannot do `kda`'s output gate as the product of `gate` by `weight` (its facts,
    `KdaSplitSpec.gate_problems`, which read neither the heads nor the batch), each a phrase after the
    kernel's name."""
    spec = KdaSplitSpec(heads=kda.heads.value.data, batch=1, gate_rank=shape(gate)[1],
                        gate_format=weight_format(weight))
    return [f"{spec.kernel} {p}" for p in spec.gate_problems()]


class FoldGateProduct(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: KdaOp, rewriter: PatternRewriter) -> None:
        product = op.gate.owner
        if not self.shim.fold_gate or op.gate_b is not None or not isinstance(product, ProductOp):
            return
        if not is_single_product(product):
            self.decide(op, False, "the output gate's product is in parts or quantizes")
            return
        if only_user(op.gate) is not op:
            self.decide(op, False, "the output gate's product is read outside the kda")
            return
        if not defined_before(product.weights[0], op):
            self.decide(op, False, "the output gate's product weight is defined after the kda")
            return
        if self.held(op, gate_problems(op, product.x, product.weights[0])):
            return
        rank = shape(product.x)[1]
        folded = kda_with_gate(op, product.x, product.weights[0])
        self.decide(op, True, f"the output gate's product ({rank} -> {shape(op.gate)[1]}) done in KdaSplit's output "
                              "CTA: its input read, no launch of its own", about=folded)
        rewriter.replace(op, folded)
        rewriter.erase(product)


@dataclass(frozen=True)
class FoldGateProductRule(Rule):
    name = "fold-gate-product"
    stage = "held-back"
    patterns = (FoldGateProduct,)
