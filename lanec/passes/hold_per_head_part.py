"""hold-per-head-part (the lane's held-back rule "per-head part"): a product reads a part of
every head's unit of its input in place only where the part's offset and length are whole
32-value blocks (the quantized form's block). Held back: an explicit `form.part` copy, then the
per-head product over the copy's whole units. An absorbed latent attention reads each head's
first `nope` query values the same way; held back, it runs expanded."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import BLOCK, LatentAttentionOp, PartOp, ProductOp
from lanec.passes.rule import Judge, Rule, set_latent_path, failures, name_after


def part_checks(offset: int, length: int) -> list[tuple[bool, str]]:
    return [
        (offset % BLOCK == 0, f"the part's offset {offset} is not a whole number of {BLOCK}-value blocks"),
        (length % BLOCK == 0, f"the part's length {length} is not a whole number of {BLOCK}-value blocks"),
    ]


class HoldPartProduct(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        part = op.part()
        if part is None:
            return
        heads, unit, offset, length = part
        if offset == 0 and length == unit:
            return  # whole units: a per-head product with no part to read
        failed = failures(part_checks(offset, length))
        if not failed:
            self.decide(op, True, f"reads each head's part [{offset}, {offset + length}) in place: "
                                  f"whole {BLOCK}-value blocks")
            return
        copy = PartOp(op.x, heads, unit, offset, length)
        product = ProductOp(copy.result, list(op.weights), part=(heads, length, 0, length),
                            result_types=[r.type for r in op.parts])
        if op.quantize is not None:
            product.quantize = op.quantize
        name_after(copy.result, op.parts[0], "part")
        self.decide(op, False, "per-head part split into a part copy and a per-head product: " + "; ".join(failed))
        rewriter.replace(op, [copy, product])


class HoldLatentNope(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LatentAttentionOp, rewriter: PatternRewriter) -> None:
        if op.path is None or op.path.data != "absorbed":
            return
        failed = failures(part_checks(0, op.nope.value.data))
        if not failed:
            self.decide(op, True, f"absorbed: each head's nope part (0, {op.nope.value.data}) read in place")
            return
        self.decide(op, False, "absorbed latent attention run expanded: each head's nope part: " + "; ".join(failed))
        set_latent_path(op, "expanded", rewriter)


@dataclass(frozen=True)
class HoldPerHeadPartRule(Rule):
    name = "hold-per-head-part"
    stage = "held-back"
    patterns = (HoldPartProduct, HoldLatentNope)
