"""fuse-quant (shared, quantized numerics only): a product (or gated pair) by checkpoint rows
(q8_0 weights) reads its activation quantized, through a `form.quantize` of the knob's words
shared by every such product of the activation. What a product reads does not depend on fusion:
a product in parts (or a gated pair) mixing q8_0 and bf16 rows is first split by the rows'
format, so its bf16 parts read bf16 as they do unmerged; a per-head product reading parts that
are not whole 32-value blocks of its activation (the quantized form's), or an activation that is
not whole blocks, reads them through a copy, quantized in the copy's own blocks, as it does
unfused. Under `fuse_quant` the quantize goes into its producer's epilogue (`quantize` = words,
an i8 result) where every reader of the producer's result reads it quantized."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from lanec.dialects.form import (
    BLOCK,
    GatedProductOp,
    ProductOp,
    QuantizedEpilogue,
    QuantizeOp,
    int_prop,
    shape,
    tensor,
)
from lanec.passes.parts import part_copy, split, unpair
from lanec.passes.rule import (
    Judge,
    Rule,
    only_user,
    part_problems,
    reads_int8,
    result_name,
    users,
    weight_format,
)
from lanec.shim import LaneShim


class QuantizeActivation(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp | GatedProductOp, rewriter: PatternRewriter) -> None:
        if not reads_int8(op, self.shim):
            return
        part = op.part() if isinstance(op, ProductOp) else None
        if part is not None and part[2:] != (0, part[1]) and (part_problems(*part) or shape(op.x)[1] % BLOCK):
            # quantized in place, each head's part would be read in the activation's blocks, not
            # its own: the product reads its parts through a copy, quantized in the copy's blocks
            copy, product = part_copy(op)
            why = part_problems(*part) or [f"the activation's width {shape(op.x)[1]} is not whole {BLOCK}-value blocks"]
            self.decide(op, False, f"reads its heads' parts through a copy, quantized in its own blocks: "
                                   f"{'; '.join(why)}")
            rewriter.replace(op, [copy, product])
            op = product
        x = op.x
        if isinstance(op, GatedProductOp) and weight_format(op.gate) != weight_format(op.up):
            made = unpair(op)
            self.decide(op, False, "gated pair split into gate and up products and a swiglu by the rows' format: its "
                                   "bf16 rows read the activation bf16, as they do unpaired")
            rewriter.replace(op, made)
            op = next(p for p in made[:2] if weight_format(p.weights[0]) == "q8_0")
        elif isinstance(op, ProductOp) and len({weight_format(w) for w in op.weights}) > 1:
            formats = [weight_format(w) for w in op.weights]
            groups = [[i for i, f in enumerate(formats) if f == kind] for kind in ("q8_0", "bf16")]
            self.decide(op, False, "product in parts split by the rows' format: its bf16 parts read the activation "
                                  "bf16, as they do unmerged")
            made, results = split(op, groups)
            rewriter.replace(op, made, results)
            op = made[0]
        words = self.shim.words
        shared = next((u for u in users(x) if isinstance(u, QuantizeOp) and u.words.value.data == words), None)
        if shared is None:
            shared = QuantizeOp(x, words)
            rewriter.insert(shared, InsertPoint.after(x.owner))
        rewriter.replace_uses_with_if(x, shared.result, lambda use: use.operation is op)
        self.decide(op, True, f"reads its activation {result_name(x)} quantized ({words} int8 "
                              f"word{'s' if words == 2 else ''} a value): its rows are q8_0 checkpoint rows")


class QuantizeInEpilogue(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: QuantizeOp, rewriter: PatternRewriter) -> None:
        source = op.x
        producer = source.owner
        if not isinstance(producer, Operation):
            return  # a block's argument: no producer to put an epilogue in
        kind = producer.name
        if not isinstance(producer, QuantizedEpilogue):
            self.decide(op, False, f"stays a standalone quantize: {kind} has no quantize epilogue", about=producer)
            return
        if producer.quantize is not None:
            self.decide(op, False, f"stays a standalone quantize: the {kind} already quantizes its result",
                        about=producer)
            return
        if isinstance(producer, ProductOp) and len(producer.parts) > 1:
            self.decide(op, False, "stays a standalone quantize: the product in parts would quantize every part",
                        about=producer)
            return
        if only_user(source) is not op:
            self.decide(op, False, f"stays a standalone quantize: {result_name(source)} is read unquantized too",
                        about=producer)
            return
        producer.quantize = int_prop(op.words.value.data)
        rewriter.notify_op_modified(producer)
        quantized = rewriter.replace_value_with_new_type(source, tensor(shape(source), IntegerType(8)))
        self.decide(op, True, f"quantize of {result_name(quantized)} in the {kind}'s epilogue", about=producer)
        rewriter.replace(op, [], [quantized])


@dataclass(frozen=True)
class FuseQuantRule(Rule):
    name = "fuse-quant"
    stage = "shared"
    patterns = (QuantizeActivation,)

    def phases(self, shim: LaneShim) -> list[tuple[type[Judge], ...]]:
        return [self.patterns] + ([(QuantizeInEpilogue,)] if shim.fuse_quant else [])
