"""hold-quantized-activation (the lane's held-back rule "quantized activation"): a quantized
activation is one or two int8 words a value, and a producer quantizes it in its epilogue only
where its kernel can: a norm, an elementwise op, a SwiGLU, a delta rule (KdaSplit's output), a gated norm whose heads
are whole 32-value blocks, a gated pair whose hidden width is whole 32-value blocks, a product of
four rows a warp (a GEMV) whose outputs are whole blocks, a GQA attention whose chunks merge in its
own cluster (the merge writes whole blocks). Held back: the producer writes bf16 and a standalone
quantize follows it."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import BFloat16Type
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from lanec.codegen.facts import GEMV_ROWS
from lanec.dialects.form import (
    BLOCK,
    AddOp,
    AttentionOp,
    DeltaRuleOp,
    GatedProductOp,
    KdaOp,
    MulOp,
    NormGatedOp,
    NormOp,
    ProductOp,
    QuantizedEpilogue,
    QuantizeOp,
    SigmoidOp,
    SiluOp,
    SwigluOp,
    shape,
    tensor,
)
from lanec.passes.decisions import note_split
from lanec.passes.rule import Judge, Rule, failures, rows_of
from lanec.shim import CLUSTER_COMBINE_CTAS, QUANT_WORDS, LaneShim, gqa_chunks

ALWAYS = (NormOp, AddOp, MulOp, SiluOp, SigmoidOp, SwigluOp, DeltaRuleOp, KdaOp)  # KdaSplit: heads of 128


def epilogue_checks(op: Operation, shim: LaneShim) -> list[tuple[bool, str]]:
    words = op.quantize_words()
    checks = [(words in QUANT_WORDS, f"{words} words: an activation value is one or two int8 words")]
    if isinstance(op, ALWAYS):
        return checks
    if isinstance(op, NormGatedOp):  # head_norm: a warp a head quantizes the head's own blocks
        size = shape(op.x)[1] // op.heads.value.data
        return checks + [(size % BLOCK == 0, f"the gated norm's head size {size} is not whole {BLOCK}-value "
                                             "blocks (a warp quantizes its head's blocks)")]
    if isinstance(op, GatedProductOp):
        hidden = shape(op.gate)[0]
        return checks + [(hidden % BLOCK == 0, (f"the gated pair's hidden width {hidden} is not whole "
                                              f"{BLOCK}-value blocks"))]
    if isinstance(op, AttentionOp):  # the lowering's choice of chunks and where they merge
        batch, max_pages = shape(op.pages)
        heads, kv_heads = op.heads.value.data, op.kv_heads.value.data
        splits, merged = gqa_chunks(batch, heads, kv_heads, max_pages * shape(op.k_cache)[1], shape(op.k_cache)[3])
        where = ("is one chunk, stored from the MMA's fragments" if splits == 1 else
                 f"merges its {splits} chunks in an attention_combine launch")
        return checks + [(merged, f"the attention {where}: only a merge in the attention's own cluster "
                                  f"quantizes (at most {CLUSTER_COMBINE_CTAS} CTAs)")]
    if isinstance(op, ProductOp):
        rows = rows_of(op)
        widths = [shape(p)[1] for p in op.parts]
        return checks + [
            (shim.as_gemv(rows), (f"a product of {rows} rows (above the {GEMV_ROWS} a gemv launch takes) is kept for "
                                  "the tensor cores, not four rows a warp")),
            (all(w % BLOCK == 0 for w in widths), f"outputs {widths} are not whole {BLOCK}-value blocks"),
        ]
    return checks + [(False, f"{op.name} has no quantizing epilogue in the lane")]


class HoldQuantizedActivation(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, QuantizedEpilogue) or not op.quantize_words():
            return
        failed = failures(epilogue_checks(op, self.shim))
        words = op.quantize_words()
        if not failed:
            self.decide(op, True, f"quantizes its result in its epilogue ({words} word{'s' if words == 2 else ''})")
            return
        decision = self.decide(op, False, "quantize epilogue split into a standalone quantize: " + "; ".join(failed))
        quantized = list(op.parts) if isinstance(op, ProductOp) else [op.results[0]]
        made = []
        del op.properties["quantize"]
        rewriter.notify_op_modified(op)
        for result in quantized:
            plain = rewriter.replace_value_with_new_type(result, tensor(shape(result), BFloat16Type()))
            quantize = QuantizeOp(plain, words)
            made.append(quantize)
            rewriter.insert(quantize, InsertPoint.after(op))
            rewriter.replace_uses_with_if(plain, quantize.result, lambda use, q=quantize: use.operation is not q)
        note_split(decision, made)


@dataclass(frozen=True)
class HoldQuantizedActivationRule(Rule):
    name = "hold-quantized-activation"
    stage = "held-back"
    patterns = (HoldQuantizedActivation,)
