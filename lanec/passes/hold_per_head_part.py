"""hold-per-head-part (the lane's held-back rule "per-head part"): a product reads a part of
every head's unit of its input in place only at whole 32-value blocks (the quantized form's
block): the part's offset and length, and, where there is more than one head, the unit (head h's
part starts at h x unit + offset, so a unit that is not whole blocks puts head 1's part across
two blocks). Held back: an explicit `form.part` copy, then the per-head product over the copy's
whole units. An absorbed latent attention reads each head's first `nope` query values the same
way (its unit: nope + rope); held back, it runs expanded."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import BLOCK, LatentAttentionOp, ProductOp
from lanec.passes.parts import part_copy
from lanec.passes.rule import Judge, Rule, part_problems, set_latent_path


class HoldPartProduct(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ProductOp, rewriter: PatternRewriter) -> None:
        part = op.part()
        if part is None:
            return
        heads, unit, offset, length = part
        if offset == 0 and length == unit:
            return  # whole units: a per-head product with no part to read
        failed = part_problems(heads, unit, offset, length)
        if not failed:
            self.decide(op, True, f"reads each head's part [{offset}, {offset + length}) of its {unit} values in "
                                  f"place: whole {BLOCK}-value blocks")
            return
        copy, product = part_copy(op)
        self.split_back(op, "per-head part split into a part copy and a per-head product: " + "; ".join(failed),
                        [copy, product])
        rewriter.replace(op, [copy, product])


class HoldLatentNope(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LatentAttentionOp, rewriter: PatternRewriter) -> None:
        if op.path is None or op.path.data != "absorbed":
            return
        heads, nope, rope = op.heads.value.data, op.nope.value.data, op.rope.value.data
        failed = part_problems(heads, nope + rope, 0, nope)
        if not failed:
            self.decide(op, True, f"absorbed: each head's nope part (0, {nope}) of its {nope + rope} query values "
                                  "read in place")
            return
        self.decide(op, False, "absorbed latent attention run expanded: each head's nope part: " + "; ".join(failed))
        set_latent_path(op, "expanded", rewriter)


@dataclass(frozen=True)
class HoldPerHeadPartRule(Rule):
    name = "hold-per-head-part"
    stage = "held-back"
    patterns = (HoldPartProduct, HoldLatentNope)
