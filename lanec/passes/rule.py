"""What every rule shares: a rule is a `ModulePass` that reads the lane's knobs from the module,
walks its patterns once over the step (in block order, new ops not revisited, so each candidate
is decided once), and records what it decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.utils.exceptions import DiagnosticException

from lanec.dialects.form import BLOCK, GatedProductOp, LatentAttentionOp, ProductOp, WeightOp, is_float, shape, step_of
from lanec.passes.decisions import Decision, Decisions, describe, layer_of, note_split, record, value_label
from lanec.shim import KnobError, LaneShim


class Judge(RewritePattern):
    """A rule's pattern: it sees the lane's knobs and writes down what it decides."""

    def __init__(self, rule: Rule, shim: LaneShim, decisions: Decisions):
        self.rule, self.shim, self.decisions = rule, shim, decisions

    def decide(self, op: Operation, taken: bool, reason: str, about: Operation | None = None) -> Decision:
        """Record a candidate (`about`: the op whose names describe it, if not `op`)."""
        subject = about or op
        decision = Decision(stage=self.rule.stage, rule=self.rule.name, op=describe(subject),
                            layer=layer_of(subject), taken=taken, reason=reason)
        self.decisions.append(decision)
        return decision

    def held(self, op: Operation, problems: Sequence[str]) -> bool:
        """Record `op` held back for `problems` (the failed conditions' words, in order); whether any
        failed."""
        if problems:
            self.decide(op, False, "; ".join(problems))
        return bool(problems)

    def mark(self, op: Operation, rewriter: PatternRewriter, prop: str, value: str, reason: str) -> None:
        """Take `op` by setting its property `prop` (a fold that leaves its meaning unchanged, for
        the lowering to read), and record why."""
        setattr(op, prop, StringAttr(value))
        rewriter.notify_op_modified(op)
        self.decide(op, True, reason)

    def split_back(self, op: Operation, reason: str, made: Sequence[Operation]) -> None:
        """Record a fused op held back, split into the new ops `made` (which the rule then puts in
        its place): an op of them that does not lower names this decision as its cause."""
        note_split(self.decide(op, False, reason), made)


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


def optional(value: SSAValue | None) -> list[SSAValue]:
    """An optional operand as an op's builder takes it: [value], or [] where there is none."""
    return [] if value is None else [value]


def checkpoint_rows(op: ProductOp | GatedProductOp) -> list[SSAValue]:
    return list(op.weights) if isinstance(op, ProductOp) else [op.gate, op.up]


def reads_int8(op: ProductOp | GatedProductOp, shim: LaneShim) -> bool:
    """Whether the op reads its activation int8 (fuse-quant quantizes it for it): under quantized
    numerics, a product or gated pair by q8_0 checkpoint rows reading a float activation."""
    return shim.quantized and is_float(op.x) and any(weight_format(w) == "q8_0" for w in checkpoint_rows(op))


def bf16_rows(product: ProductOp, shim: LaneShim, fold: str) -> tuple[bool, str]:
    """The check a fold into a gemv makes of its product (`failures`' form): its rows bf16, read
    by gemv (q8_0 rows go to q8_gemv, which has no `fold`)."""
    return (all(weight_format(w) == "bf16" for w in product.weights) and not reads_int8(product, shim),
            f"the product's rows are q8_0: q8_gemv has no {fold}")


def is_plain_product(op: Operation) -> bool:
    """A product by whole rows that no rule has given a part or an epilogue."""
    return isinstance(op, ProductOp) and op.part() is None and op.quantize is None


def is_single_product(op: Operation) -> bool:
    return is_plain_product(op) and len(op.weights) == 1


def part_problems(heads: int, unit: int, offset: int, length: int) -> list[str]:
    """Why each of `heads` units' part [offset, offset + length) is not whole 32-value blocks of
    the row (the quantized form's): its offset, its length, and where there is more than one
    head, the unit (head h's part starts at h x unit + offset)."""
    return failures([
        (offset % BLOCK == 0, f"the part's offset {offset} is not a whole number of {BLOCK}-value blocks"),
        (length % BLOCK == 0, f"the part's length {length} is not a whole number of {BLOCK}-value blocks"),
        (heads == 1 or unit % BLOCK == 0, (f"the unit {unit} is not a whole number of {BLOCK}-value blocks "
                                           f"(head 1's part starts at {unit + offset})")),
    ])


def result_name(value: SSAValue) -> str:
    return value_label(value)


def norm_prologue_checks(op: Operation) -> list[tuple[bool, str]]:
    """What any kernel taking a norm `op` in its prologue needs of the norm itself (the conditions
    fold-norm-into-gemv and fold-norm-into-router share, for `failures`)."""
    return [
        (op.quantize is None, "the norm quantizes its result (fuse-quant): its reader reads int8"),
        (is_float(op.x), "the norm reads an int8 input"),
        (isinstance(op.weight.owner, WeightOp), "the norm weight is an activation: the prologue loads it "
                                                "before the PDL wait"),
    ]


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
