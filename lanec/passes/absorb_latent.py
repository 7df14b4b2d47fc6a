"""absorb-latent (shared): a latent attention not taken whole runs absorbed (`path =
"absorbed"`): it reads each head's nope part of the query in place as a per-head part product
(absorbing the key half into the latent) and its values in place from the cache row."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import LatentAttentionOp
from lanec.passes.rule import Judge, Rule, set_latent_path


class AbsorbLatent(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LatentAttentionOp, rewriter: PatternRewriter) -> None:
        if op.path is not None:
            return
        self.decide(op, True, "absorbed: each head's nope part read in place, values read in place "
                              "from the cache row")
        set_latent_path(op, "absorbed", rewriter)


@dataclass(frozen=True)
class AbsorbLatentRule(Rule):
    name = "absorb-latent"
    stage = "shared"
    patterns = (AbsorbLatent,)
