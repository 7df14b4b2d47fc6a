"""latent-whole (lane, before the shared rules): a wide chunk's latent attention is taken whole
and run expanded (`path = "expanded"`): its query rows a request make the absorbed path cost
more than expanding the cache once (`Latent.wide`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import LatentAttentionOp
from lanec.passes.rule import Judge, Rule, set_latent_path
from lanec.shim import Latent


class LatentWhole(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LatentAttentionOp, rewriter: PatternRewriter) -> None:
        if op.path is not None:
            return
        latent = Latent.of(op)
        costs = (f"{latent.rows} query rows a request: absorbed {latent.absorbed_cost()} multiply-adds, "
                 f"expanded {latent.expanded_cost()} over {latent.len} cached rows")
        if not latent.wide():
            self.decide(op, False, f"not a wide chunk, left to absorb-latent: {costs}")
            return
        self.decide(op, True, f"a wide chunk taken whole, run expanded: {costs}")
        set_latent_path(op, "expanded", rewriter)


@dataclass(frozen=True)
class LatentWholeRule(Rule):
    name = "latent-whole"
    stage = "lane-before"
    patterns = (LatentWhole,)
