"""fold-kda (shared): the KDA chain becomes one `form.kda`: three convs (SiLU) of the q, k and v
parts of one product sharing one conv state at offsets 0, dim and 2 dim, the L2 norms of q and k
(as l2norm ops or in the convs' epilogues), the f_b product of f_a's output, the KDA gate, the
sigmoid of the raw beta, the delta rule (a decay a key, as many key heads as value heads), and
the sigmoid-gated norm. The kda takes f_a's output, the raw beta and the output gate."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import (
    ConvOp,
    DeltaRuleOp,
    KdaGateOp,
    KdaOp,
    L2NormOp,
    NormGatedOp,
    ProductOp,
    SigmoidOp,
    float_prop,
    shape,
)
from lanec.passes.rule import Judge, Rule, is_single_product, only_user, optional


class Mismatch(Exception):
    """The chain is not a KDA chain; the message says where it departs."""


def sole(value: SSAValue, reader: Operation, kind: type[Operation], what: str):
    """The op of `kind` producing value, read only by `reader`."""
    op = value.owner
    if not isinstance(op, kind):
        raise Mismatch(f"{what} is not a {kind.name}")
    if only_user(value) is not reader:
        raise Mismatch(f"{what} is read outside the chain")
    return op


def normed(value: SSAValue, reader: Operation, what: str) -> tuple[ConvOp, float, int, list[Operation]]:
    """The conv whose output, L2 normed, is value: (conv, eps, heads, the ops computing it)."""
    if isinstance(value.owner, L2NormOp):
        norm = sole(value, reader, L2NormOp, f"the L2 norm of {what}")
        conv = sole(norm.x, norm, ConvOp, f"{what}'s conv")
        if conv.norm_heads is not None:
            raise Mismatch(f"{what}'s conv already norms its output")
        return conv, norm.eps.value.data, norm.heads.value.data, [norm, conv]
    conv = sole(value, reader, ConvOp, f"{what}'s conv")
    if conv.norm_heads is None:
        raise Mismatch(f"{what} is not L2 normed")
    return conv, conv.norm_eps.value.data, conv.norm_heads.value.data, [conv]


def match_chain(out: NormGatedOp) -> tuple[dict, list[Operation]]:
    """The kda's operands and properties, and the chain's ops (last first), or Mismatch."""
    if out.activation.data != "sigmoid" or out.quantize is not None:
        raise Mismatch("the gated norm is not a plain sigmoid-gated norm")
    rule = sole(out.x, out, DeltaRuleOp, "the gated norm's input")
    heads = rule.heads.value.data
    if rule.key_heads.value.data != heads or rule.quantize is not None:
        raise Mismatch("the delta rule shares key heads or quantizes")
    gate = sole(rule.decay, rule, KdaGateOp, "the decay")
    f_b = sole(gate.g, gate, ProductOp, "the gate's input")
    if not is_single_product(f_b):
        raise Mismatch("the f_b product is in parts or quantizes")
    beta = sole(rule.beta, rule, SigmoidOp, "beta")
    if beta.quantize is not None:
        raise Mismatch("beta's sigmoid quantizes")
    conv_q, eps_q, heads_q, ops_q = normed(rule.q, rule, "q")
    conv_k, eps_k, heads_k, ops_k = normed(rule.k, rule, "k")
    conv_v = sole(rule.v, rule, ConvOp, "v's conv")
    convs = (conv_q, conv_k, conv_v)
    if conv_v.norm_heads is not None:
        raise Mismatch("v is L2 normed")
    if eps_q != eps_k or heads_q != heads or heads_k != heads:
        raise Mismatch("q and k are normed differently or over other heads")
    if gate.heads.value.data != heads or out.heads.value.data != heads:
        raise Mismatch("the gate or the gated norm counts other heads")
    dim = shape(conv_q.x)[1]
    if shape(conv_v.x)[1] != dim or shape(rule.decay)[1] != dim:
        raise Mismatch("v or the decay is not as wide as q (the kda's q, k, v and decay are one width)")
    state = conv_q.state
    if shape(state)[1] != 3 * dim:
        raise Mismatch(f"the conv state holds {shape(state)[1]} channels, not q, k and v's {3 * dim}")
    for conv, offset in zip(convs, (0, dim, 2 * dim), strict=True):
        if conv.state is not state or conv.slots is not rule.slots or conv.accepted is not rule.accepted:
            raise Mismatch("the convs and the delta rule do not share one conv state and one slot table")
        if conv.offset.value.data != offset or conv.activation.data != "silu":
            raise Mismatch(f"q, k, v's convs are not SiLU convs at offsets 0, {dim}, {2 * dim}")
    if len({shape(c.weight)[1] for c in convs}) != 1:
        raise Mismatch("the convs differ in width")
    biases = [c.bias for c in convs]
    if any(b is None for b in biases) and any(b is not None for b in biases):
        raise Mismatch("some convs have a bias and some do not")
    product = conv_q.x.owner
    if not (isinstance(product, ProductOp) and conv_k.x.owner is product and conv_v.x.owner is product):
        raise Mismatch("q, k and v are not the parts of one product")
    operands = {
        "q": conv_q.x, "k": conv_k.x, "v": conv_v.x,
        "conv_q": conv_q.weight, "conv_k": conv_k.weight, "conv_v": conv_v.weight, "conv_state": state,
        "f_a": f_b.x, "f_b": f_b.weights[0], "a_log": gate.a_log, "dt_bias": gate.dt_bias, "beta": beta.x,
        "gate": out.gate, "norm_weight": out.weight, "state": rule.state, "slots": rule.slots,
        "accepted": rule.accepted, "biases": [b for b in biases if b is not None],
    }
    properties = {"heads": rule.heads, "form": gate.form, "scale": rule.scale, "l2_eps": float_prop(eps_q),
                  "eps": out.eps}
    if gate.lower_bound is not None:
        properties["lower_bound"] = gate.lower_bound
    chain = [rule, gate, f_b, beta, *ops_q, *ops_k, conv_v]
    return {"operands": operands, "properties": properties}, chain


def kda_op(operands: dict, properties: dict, result_type) -> KdaOp:
    o = operands
    return KdaOp.build(
        operands=[o["q"], o["k"], o["v"], o["conv_q"], o["conv_k"], o["conv_v"], o["conv_state"], o["f_a"],
                  o["f_b"], o["a_log"], o["dt_bias"], o["beta"], o["gate"], optional(o.get("gate_b")),
                  o["norm_weight"], o["state"], o["slots"], optional(o["accepted"]), o["biases"]],
        properties=properties, result_types=[result_type])


def kda_with_gate(op: KdaOp, gate: SSAValue, gate_b: SSAValue | None) -> KdaOp:
    """`op` with its output gate read as `gate`, through the product weight `gate_b` if given."""
    operands = {name: getattr(op, name) for name in (
        "q", "k", "v", "conv_q", "conv_k", "conv_v", "conv_state", "f_a", "f_b", "a_log", "dt_bias", "beta",
        "norm_weight", "state", "slots", "accepted")}
    operands.update(gate=gate, gate_b=gate_b, biases=list(op.biases))
    properties = {k: v for k, v in op.properties.items() if k != "operandSegmentSizes"}
    made = kda_op(operands, properties, op.result.type)
    made.attributes.update(op.attributes)
    made.result.name_hint = op.result.name_hint
    return made


class FoldKda(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NormGatedOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.x.owner, DeltaRuleOp):
            return
        try:
            found, chain = match_chain(op)
        except Mismatch as why:
            self.decide(op, False, f"not a KDA chain: {why}", about=op.x.owner)
            return
        fused = kda_op(found["operands"], found["properties"], op.result.type)
        fused.result.name_hint = op.result.name_hint
        self.decide(op, True, "conv, L2 norm, gate, beta, delta rule and gated norm folded into one kda",
                    about=fused)
        rewriter.replace(op, fused)
        for dead in chain:
            rewriter.erase(dead)


@dataclass(frozen=True)
class FoldKdaRule(Rule):
    name = "fold-kda"
    stage = "shared"
    patterns = (FoldKda,)
