"""fuse-quant (shared, quantized numerics only): a product (or gated pair) by checkpoint rows
(q8_0 weights; in a product in parts, any part's) reads its activation quantized, through a `form.quantize` of the knob's words shared by every
such product of the activation; under `fuse_quant` the quantize goes into its producer's
epilogue (`quantize` = words, an i8 result) where every reader of the producer's result reads
it quantized."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from lanec.dialects.form import (
    GatedProductOp,
    ProductOp,
    QuantizedEpilogue,
    QuantizeOp,
    int_prop,
    is_float,
    shape,
    tensor,
)
from lanec.lane import LaneShim
from lanec.passes.rule import Judge, Rule, only_user, result_name, users, weight_format


def checkpoint_rows(op: ProductOp | GatedProductOp) -> list:
    return list(op.weights) if isinstance(op, ProductOp) else [op.gate, op.up]


class QuantizeActivation(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp | GatedProductOp, rewriter: PatternRewriter) -> None:
        if not self.shim.quantized or not is_float(op.x):
            return
        if "q8_0" not in {weight_format(w) for w in checkpoint_rows(op)}:
            return
        words = self.shim.words
        x = op.x
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
