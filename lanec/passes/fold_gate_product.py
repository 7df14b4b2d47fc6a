"""fold-gate-product (held-back, lane; under the `fold_gate` knob, on by default, `--no-fold-gate` turns it
off): a kda whose output gate is a product read by nothing else takes that product's input and weight
(`gate_b`) instead, and KdaSplit does the product: its gate warps, after the decays, multiply their
partition's rows by the row's input and send the sigmoids to the token's output CTA with the dots. In
Kimi Linear the gate is g_b(g_a(x)): g_a's [rows, 128] output is already a part of the layer's merged
product, and g_b's [rows, dim] result is a launch of its own between that product and the kda. Taken
only where KdaSplit can do the product (`KdaSplitSpec.gate_problems`: rank 128, bf16 rows) and at most
KDA_GATE_FOLD_ROWS rows (facts.py): measured on the H200 (bench/RESULTS.md, 2026-11-30), one row gains
about 1.1 us a layer (the real-size batch-1 step 2091.5 -> 2069.5 us), while at 64 requests each
request's CTAs read the head's 32 KB of rows where g_b's own launch read the weight once (kimi-kda-b64
507.5 -> 531.6 us)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import KDA_GATE_FOLD_ROWS, KdaSplitSpec
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
        rows = shape(op.gate)[0]
        if rows > KDA_GATE_FOLD_ROWS:
            self.decide(op, False, f"its {rows} rows are more than the {KDA_GATE_FOLD_ROWS} at which the fold was "
                                   "measured faster (KDA_GATE_FOLD_ROWS; at 64 requests it was slower: each "
                                   "request's CTAs read the head's rows, the product's launch reads them once)")
            return
        if self.held(op, gate_problems(op, product.x, product.weights[0])):
            return
        rank = shape(product.x)[1]
        folded = kda_with_gate(op, product.x, product.weights[0])
        self.decide(op, True, f"the output gate's product ({rank} -> {shape(op.gate)[1]}) done in KdaSplit's gate "
                              "warps: its input read, no launch of its own", about=folded)
        rewriter.replace(op, folded)
        rewriter.erase(product)


@dataclass(frozen=True)
class FoldGateProductRule(Rule):
    name = "fold-gate-product"
    stage = "held-back"
    patterns = (FoldGateProduct,)
