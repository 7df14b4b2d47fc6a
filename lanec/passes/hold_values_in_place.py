"""hold-values-in-place (the lane's held-back rule "attention values in place"): an attention
reads its values in place from a wider row only from an even place at an even pitch (values are
read a pair at a time). The absorbed latent attention reads the latent values at place 0 of the
cache row, pitch lora + rope; held back, it runs expanded."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import LatentAttentionOp
from lanec.lane import Latent
from lanec.passes.rule import Judge, Rule, set_latent_path, failures


class HoldValuesInPlace(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LatentAttentionOp, rewriter: PatternRewriter) -> None:
        if op.path is None or op.path.data != "absorbed":
            return
        latent = Latent.of(op)
        failed = failures([
            (latent.value_place % 2 == 0, f"the values' place {latent.value_place} in the cache row is odd"),
            (latent.pitch % 2 == 0, f"the cache row's pitch {latent.lora} + {latent.rope} = {latent.pitch} is odd"),
        ])
        if not failed:
            self.decide(op, True, f"values read in place at {latent.value_place}, pitch {latent.pitch}: "
                                  "both even")
            return
        self.decide(op, False, "absorbed latent attention run expanded: " + "; ".join(failed))
        set_latent_path(op, "expanded", rewriter)


@dataclass(frozen=True)
class HoldValuesInPlaceRule(Rule):
    name = "hold-values-in-place"
    stage = "held-back"
    patterns = (HoldValuesInPlace,)
