"""fold-shared-expert (shared): `add(mixture(x), down(swiglu(gate x, up x)))` (or with the gated
pair already made) becomes the mixture with its shared expert (`shared` operands: gate, up,
down). A scattering mixture (`rows`) is left alone: its shared expert's rows are not scattered."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.dialects.form import AddOp, GatedProductOp, MixtureOp, ProductOp, SwigluOp
from lanec.passes.rule import Judge, Rule, defined_before, is_single_product, only_user, optional


def shared_expert(value: SSAValue, x: SSAValue) -> tuple[list, list] | None:
    """(gate, up, down) weights and the ops that compute `down(swiglu(gate x, up x))` into value,
    each read only by the next, or None."""
    down = value.owner
    if not (isinstance(down, ProductOp) and is_single_product(down) and only_user(value) is not None):
        return None
    hidden = down.x.owner
    if only_user(down.x) is not down:
        return None
    if isinstance(hidden, GatedProductOp) and hidden.quantize is None and hidden.x is x:
        return [hidden.gate, hidden.up, down.weights[0]], [down, hidden]
    if not isinstance(hidden, SwigluOp) or hidden.quantize is not None:
        return None
    gate, up = hidden.lhs.owner, hidden.rhs.owner
    for product, part in ((gate, hidden.lhs), (up, hidden.rhs)):
        if not (isinstance(product, ProductOp) and is_single_product(product) and product.x is x
                and only_user(part) is hidden):
            return None
    return [gate.weights[0], up.weights[0], down.weights[0]], [down, hidden, gate, up]


class FoldSharedExpert(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: AddOp, rewriter: PatternRewriter) -> None:
        sides = ((mixed.owner, other) for mixed, other in ((op.lhs, op.rhs), (op.rhs, op.lhs))
                 if isinstance(mixed.owner, MixtureOp) and only_user(mixed) is op)
        mixture, other = next(sides, (None, None))
        if mixture is None:
            return
        if mixture.shared or op.quantize is not None:
            return
        found = shared_expert(other, mixture.x)
        if found is None:
            return
        weights, chain = found
        if mixture.rows is not None:
            self.decide(mixture, False, "shared expert not folded: the mixture scatters its rows "
                                        "and the shared expert's rows would not be scattered")
            return
        if not all(defined_before(w, mixture) for w in weights):
            self.decide(mixture, False, "shared expert not folded: its weights are defined after the mixture")
            return
        folded = MixtureOp.build(
            operands=[mixture.x, mixture.router, mixture.gate, mixture.up, mixture.down, optional(mixture.correction),
                      weights, []],
            properties={k: v for k, v in mixture.properties.items() if k != "operandSegmentSizes"},
            result_types=[op.result.type])
        self.decide(mixture, True, "shared expert folded into the mixture's block of kept experts")
        rewriter.replace(op, folded)
        rewriter.erase(mixture)
        for dead in chain:
            rewriter.erase(dead)


@dataclass(frozen=True)
class FoldSharedExpertRule(Rule):
    name = "fold-shared-expert"
    stage = "shared"
    patterns = (FoldSharedExpert,)
