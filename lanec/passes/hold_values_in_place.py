"""hold-values-in-place (the lane's held-back rule "attention values in place"): an attention reads
its values in place from a wider row only from an even place at an even pitch (values are read a
pair at a time: the seed's fact, `facts.values_in_place_problems`; where it holds, the lowering's
16-byte part places let `attention` / `latent_attention` read them by 16-byte copies).
A plain attention whose values are a part of a product in parts reads them in place at the
part's place in the product's row; held back, the values' part is split out of the product in
parts into a product of its own (a row of their own). The absorbed latent attention reads the
latent values at place 0 of the cache row, pitch lora + rope; held back, it runs expanded."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import values_in_place_problems
from lanec.dialects.form import AttentionOp, LatentAttentionOp, ProductOp, shape
from lanec.passes.parts import split
from lanec.passes.rule import Judge, Rule, result_name, set_latent_path
from lanec.shim import Latent


def place_in_row(value: SSAValue) -> tuple[ProductOp, int, int, int] | None:
    """Where `value` is one part of a product in parts (read in place from the product's row):
    the product, the part's index, its place in the row and the row's pitch."""
    product = value.owner
    if not isinstance(product, ProductOp) or len(product.parts) < 2:
        return None
    index = list(product.parts).index(value)
    widths = [shape(p)[1] for p in product.parts]
    return product, index, sum(widths[:index]), sum(widths)


class HoldAttentionValues(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AttentionOp, rewriter: PatternRewriter) -> None:
        found = place_in_row(op.v)
        if found is None:
            return  # values in a row of their own: nothing read in place
        product, index, place, pitch = found
        row = f"the row of {', '.join(result_name(p) for p in product.parts)}"
        failed = values_in_place_problems(place, pitch, row)
        if not failed:
            self.decide(op, True, f"values {result_name(op.v)} read in place at {place}, pitch {pitch}: "
                                  "both even")
            return
        made, results = split(product, [[i for i in range(len(product.parts)) if i != index], [index]])
        self.split_back(op, f"values {result_name(op.v)} split out of the product in parts into a row of their "
                            "own: " + "; ".join(failed), made)
        rewriter.replace(product, made, results)


class HoldLatentValues(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LatentAttentionOp, rewriter: PatternRewriter) -> None:
        if op.path is None or op.path.data != "absorbed":
            return
        latent = Latent.of(op)
        failed = values_in_place_problems(latent.value_place, latent.pitch, "the cache row")
        if not failed:
            self.decide(op, True, f"values read in place at {latent.value_place}, pitch {latent.pitch}: "
                                  "both even")
            return
        self.decide(op, False, f"absorbed latent attention run expanded (cache rows of {latent.lora} + {latent.rope} "
                               "values): " + "; ".join(failed))
        set_latent_path(op, "expanded", rewriter)


@dataclass(frozen=True)
class HoldValuesInPlaceRule(Rule):
    name = "hold-values-in-place"
    stage = "held-back"
    patterns = (HoldAttentionValues, HoldLatentValues)
