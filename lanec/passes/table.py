"""The rules table: every fusion rule, in the order the pipeline runs them, by stage.

- lane-before: the lane's own rules, linked in before the shared rules can take their candidates.
- shared: fusion by dataflow alone, lane-independent. Merges first (fold-kda and
  fold-shared-expert match what they made), fuse-quant last (it quantizes what the folds left).
- held-back: the lane's kernel facts, its held-back rules (`LaneShim.heldback`, in the order
  they run). A fused op stays fused only where a kernel of the lane launches it (its facts:
  `lanec/codegen/facts.py`), otherwise it is split back into ops of the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from lanec.passes.absorb_latent import AbsorbLatentRule
from lanec.passes.conv_l2norm import ConvL2NormRule
from lanec.passes.fold_kda import FoldKdaRule
from lanec.passes.fold_residual import FoldResidualRule
from lanec.passes.fold_shared_expert import FoldSharedExpertRule
from lanec.passes.fuse_quant import FuseQuantRule
from lanec.passes.gemv_in_parts import GemvInPartsRule
from lanec.passes.latent_whole import LatentWholeRule
from lanec.passes.merge_products import MergeProductsRule
from lanec.passes.pair_gate_up import PairGateUpRule
from lanec.passes.part_in_place import PartInPlaceRule
from lanec.passes.rule import Rule
from lanec.shim import LaneShim

LANE_BEFORE: tuple[type[Rule], ...] = (LatentWholeRule, GemvInPartsRule)

SHARED: tuple[type[Rule], ...] = (
    MergeProductsRule,
    PairGateUpRule,
    ConvL2NormRule,
    FoldKdaRule,
    FoldSharedExpertRule,
    FoldResidualRule,
    PartInPlaceRule,
    AbsorbLatentRule,
    FuseQuantRule,
)

HELD_BACK: tuple[type[Rule], ...] = LaneShim().heldback


@dataclass(frozen=True)
class Stage(ModulePass):
    """A stage of the table as one pass (`lanec opt -p shared`): its rules, in order."""

    name: ClassVar[str]
    rules: ClassVar[tuple[type[Rule], ...]]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for rule in self.rules:
            rule().apply(ctx, op)


@dataclass(frozen=True)
class LaneBefore(Stage):
    name = "lane-before"
    rules = LANE_BEFORE


@dataclass(frozen=True)
class Shared(Stage):
    name = "shared"
    rules = SHARED


@dataclass(frozen=True)
class HeldBack(Stage):
    name = "held-back"
    rules = HELD_BACK


STAGES: tuple[type[Stage], ...] = (LaneBefore, Shared, HeldBack)
TABLE: tuple[tuple[str, tuple[type[Rule], ...]], ...] = tuple((stage.name, stage.rules) for stage in STAGES)
RULES: tuple[type[Rule], ...] = LANE_BEFORE + SHARED + HELD_BACK
