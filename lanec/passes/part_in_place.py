"""part-in-place (shared): a per-head product over whole units of an explicit part copy reads
the part in place from the copy's input instead (`heads`, `unit`, `offset`, `length` of the
part): the copy's launch goes. The inverse of what hold-per-head-part does when it splits."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import PartOp, ProductOp
from lanec.passes.rule import Judge, Rule, result_name, users


class PartInPlace(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        copy, part = op.x.owner, op.part()
        if not isinstance(copy, PartOp) or part is None:
            return
        heads, unit, offset, length = part
        if offset != 0 or length != unit or heads != copy.heads.value.data or unit != copy.length.value.data:
            self.decide(op, False, f"the product's heads do not read whole units of the part {result_name(op.x)}")
            return
        in_place = (heads, copy.unit.value.data, copy.offset.value.data, length)
        fused = ProductOp(copy.x, list(op.weights), part=in_place, result_types=[r.type for r in op.parts])
        if op.quantize is not None:
            fused.quantize = op.quantize
        self.decide(op, True, f"reads each head's part [{in_place[2]}, {in_place[2] + length}) of "
                              f"{result_name(copy.x)} in place")
        rewriter.replace(op, fused)
        if not users(copy.result):
            rewriter.erase(copy)


@dataclass(frozen=True)
class PartInPlaceRule(Rule):
    name = "part-in-place"
    stage = "shared"
    patterns = (PartInPlace,)
