"""hold-kda (the lane's held-back rule for the KDA fold): KdaSplit runs a kda only where its spec
(`KdaSplitSpec`, the limits its `__init__` checks too) takes the form's shape: heads of 128
values (128 main threads, a key and a value lane each), 1 to 8 tokens a request (the decay
barrier expects 512 bytes a token, sent for at most 8), and a conv of width 4 (3 taps of state a
channel). Its other limits (the schedule, the pitches) constrain what the lowering picks, not the
form. Held back: the chain it folded. A folded output gate product (fold-gate-product) KdaSplit
cannot do (`KdaSplitSpec.gate_problems`: rank 128, bf16 rows) is held back alone, a product before
the kda again."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import KdaSplitSpec
from lanec.dialects.form import (
    ConvOp,
    DeltaRuleOp,
    KdaGateOp,
    KdaOp,
    L2NormOp,
    NormGatedOp,
    ProductOp,
    SigmoidOp,
    shape,
    step_of,
    tokens_of,
)
from lanec.passes.fold_gate_product import gate_problems
from lanec.passes.fold_kda import kda_with_gate
from lanec.passes.rule import Judge, Rule, name_after


def gate_product(op: KdaOp) -> ProductOp:
    """The output gate's product a kda with `gate_b` folded (fold-gate-product), as its own op."""
    return ProductOp(op.gate, [op.gate_b])


def chain_of(op: KdaOp):
    """The unfused ops with the kda's meaning, the last one's result the kda's."""
    dim, heads = shape(op.q)[1], op.heads.value.data
    accepted = op.accepted
    bias = list(op.biases) or [None, None, None]
    convs = [
        ConvOp(x, op.conv_state, w, op.slots, offset, accepted=accepted, bias=b)
        for x, w, offset, b in zip((op.q, op.k, op.v), (op.conv_q, op.conv_k, op.conv_v), (0, dim, 2 * dim), bias,
                                   strict=True)
    ]
    l2_eps = op.l2_eps.value.data
    norm_q, norm_k = (L2NormOp(c.result, heads, l2_eps) for c in convs[:2])
    projected = ProductOp(op.f_a, [op.f_b])
    lower = op.lower_bound.value.data if op.lower_bound is not None else None
    gate = KdaGateOp(projected.parts[0], op.a_log, op.dt_bias, heads, op.form.data, lower)
    beta = SigmoidOp(op.beta)
    rule = DeltaRuleOp(norm_q.result, norm_k.result, convs[2].result, gate.result, beta.result, op.state, op.slots,
                       heads, heads, op.scale.value.data, accepted=accepted)
    gating = [gate_product(op)] if op.gate_b is not None else []
    out = NormGatedOp(rule.result, gating[0].parts[0] if gating else op.gate, op.norm_weight, heads,
                      op.eps.value.data, "sigmoid", result_type=op.result.type)
    if op.quantize is not None:  # fuse-quant's epilogue: the gated norm writes the quantized form
        out.quantize = op.quantize
    return [*convs, norm_q, norm_k, projected, gate, beta, rule, *gating, out]


class HoldKda(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: KdaOp, rewriter: PatternRewriter) -> None:
        heads = op.heads.value.data
        size = shape(op.q)[1] // heads
        tokens = tokens_of(op)
        width = shape(op.conv_q)[1]
        step = step_of(op)
        spec = KdaSplitSpec(heads=heads, batch=step.batch.value.data if step is not None else 1, tokens=tokens,
                            head_size=size, conv_width=width, gate_form=op.form.data)
        failed = spec.problems()
        if failed:
            chain = chain_of(op)
            suffixes = ("conv_q", "conv_k", "conv_v", "q", "k", "f_b", "decay", "beta", "rule")
            suffixes += ("gate",) if op.gate_b is not None else ()
            for made, suffix in zip(chain, suffixes, strict=False):
                name_after(made.results[0], op.result, suffix)
            self.split_back(op, "kda split back into its chain: " + "; ".join(f"{spec.kernel} {p}" for p in failed),
                            chain)
            rewriter.replace(op, chain)
            return
        launch = (f"one KdaSplit launch: heads of {size}, {tokens} token(s) a request, conv width {width}")
        if op.gate_b is None:
            self.decide(op, True, launch)
            return
        failed = gate_problems(op, op.gate, op.gate_b)
        if not failed:
            self.decide(op, True, f"{launch}, its output gate's product of rank {shape(op.gate)[1]} in the output CTA")
            return
        product = gate_product(op)
        name_after(product.parts[0], op.result, "gate")
        unfolded = kda_with_gate(op, product.parts[0], None)
        self.split_back(op, f"{launch}; its output gate's product held back: " + "; ".join(failed), [product])
        rewriter.replace(op, [product, unfolded])


@dataclass(frozen=True)
class HoldKdaRule(Rule):
    name = "hold-kda"
    stage = "held-back"
    patterns = (HoldKda,)
