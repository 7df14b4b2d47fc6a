"""What every rule shares: a rule is a `ModulePass` that reads the lane's knobs from the module,
walks its patterns once over the step (in block order, new ops not revisited, so each candidate
is decided once), and records what it decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    PatternRewriter,
    RewritePattern,
)
from xdsl.utils.exceptions import DiagnosticException

from lanec.dialects.form import LatentAttentionOp, ProductOp, WeightOp, shape, step_of
from lanec.lane import KnobError, LaneShim
from lanec.passes.decisions import Decision, Decisions, describe, layer_of, record, value_label


class Judge(RewritePattern):
    """A rule's pattern: it sees the lane's knobs and writes down what it decides."""

    def __init__(self, rule: Rule, shim: LaneShim, decisions: Decisions):
        self.rule, self.shim, self.decisions = rule, shim, decisions

    def decide(self, op: Operation, taken: bool, reason: str, about: Operation | None = None) -> None:
        """Record a candidate (`about`: the op whose names describe it, if not `op`)."""
        subject = about or op
        self.decisions.append(Decision(stage=self.rule.stage, rule=self.rule.name, op=describe(subject),
                                       layer=layer_of(subject), taken=taken, reason=reason))


@dataclass(frozen=True)
class Rule(ModulePass):
    """One row of the rules table."""

    name: ClassVar[str]
    stage: ClassVar[str]
    patterns: ClassVar[tuple[type[Judge], ...]]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            shim = LaneShim.of(op)
        except KnobError as error:
            raise DiagnosticException(str(error)) from None
        decisions: Decisions = []
        for phase in self.phases(shim):
            applier = GreedyRewritePatternApplier([p(self, shim, decisions) for p in phase])
            PatternRewriteWalker(applier, apply_recursively=False).rewrite_module(op)
        record(op, decisions)

    def phases(self, shim: LaneShim) -> list[tuple[type[Judge], ...]]:
        """The walks a rule makes, in order: one, over its patterns."""
        return [self.patterns]


# ----------------------------------------------------------------------------------------------
# Questions the rules ask of the dataflow


def users(value: SSAValue) -> list[Operation]:
    return [use.operation for use in value.uses]


def only_user(value: SSAValue) -> Operation | None:
    found = {id(u): u for u in users(value)}
    return next(iter(found.values())) if len(found) == 1 else None


def defined_before(value: SSAValue, op: Operation) -> bool:
    owner = value.owner
    return not isinstance(owner, Operation) or owner.is_before_in_block(op)


def rows_of(op: Operation) -> int:
    step = step_of(op)
    return step.rows if step is not None else shape(op.results[0])[0]


def weight_format(value: SSAValue) -> str:
    return value.owner.format.data if isinstance(value.owner, WeightOp) else "bf16"


def is_plain_product(op: Operation) -> bool:
    """A product by whole rows that no rule has given a part or an epilogue."""
    return isinstance(op, ProductOp) and op.part() is None and op.quantize is None


def is_single_product(op: Operation) -> bool:
    return is_plain_product(op) and len(op.weights) == 1


def result_name(value: SSAValue) -> str:
    return value_label(value)


def failures(checks: list[tuple[bool, str]]) -> list[str]:
    """The failed conditions' words, in the order the table lists them."""
    return [words for holds, words in checks if not holds]


def name_after(value: SSAValue, base: SSAValue, suffix: str) -> None:
    """Name a split's new value after the fused value it came from (`%h` -> `%h_gate`)."""
    if base.name_hint:
        value.name_hint = f"{base.name_hint}_{suffix}"


def set_latent_path(op: LatentAttentionOp, path: str, rewriter: PatternRewriter) -> None:
    """Choose how a latent attention runs ("absorbed" or "expanded"; its meaning stays)."""
    op.path = StringAttr(path)
    rewriter.notify_op_modified(op)
