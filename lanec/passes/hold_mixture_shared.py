"""hold-mixture-shared (the lane's held-back rule "mixture + shared expert"): a mixture folds its
shared expert into a block of kept experts of at most 32 warps (one warp a kept expert: top_k
routed and the shared one), and a mixture, with or without a shared expert, never writes its
result at a row a parameter names (no fused scatter). Facts of the mixture kernels
(`facts.mixture_problems`: mixture_gated and mixture_down run a block of kept experts, a warp
each). Held back: the routed mixture, the shared expert's gate, up, swiglu and down, and an add.
A scattering mixture, or a shared expert with a gate row, has no split the form can say (it has
no scatter and no broadcast multiply): the lane cannot run it, a one-line error naming the fact."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.utils.exceptions import DiagnosticException

from lanec.codegen.facts import mixture_problems
from lanec.dialects.form import AddOp, MixtureOp, ProductOp, SwigluOp
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, name_after, optional


class HoldMixtureShared(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MixtureOp, rewriter: PatternRewriter) -> None:
        if not op.shared and op.rows is None:
            return
        top_k = op.top_k.value.data
        failed = mixture_problems(top_k, shared=bool(op.shared), scatters=op.rows is not None)
        if not failed:
            self.decide(op, True, f"shared expert in a block of {top_k + 1} warps, no scatter")
            return
        if not op.shared:
            self.decide(op, False, "; ".join(failed))
            raise DiagnosticException(f"{describe(op)}: {'; '.join(failed)}, and the form has no scatter to split "
                                      "it into")
        if op.rows is not None or len(op.shared) == 4:
            self.decide(op, False, "shared expert split out of the mixture: " + "; ".join(failed))
            raise DiagnosticException(f"{describe(op)}: {'; '.join(failed)}, and the form cannot split a shared "
                                      "expert out of a scattering mixture or one with a gate row")
        gate_w, up_w, down_w = op.shared
        routed = MixtureOp.build(
            operands=[op.x, op.router, op.gate, op.up, op.down, optional(op.correction), [], []],
            properties={k: v for k, v in op.properties.items() if k != "operandSegmentSizes"},
            result_types=[op.result.type])
        gate, up = ProductOp(op.x, [gate_w]), ProductOp(op.x, [up_w])
        hidden = SwigluOp(gate.parts[0], up.parts[0])
        down = ProductOp(hidden.result, [down_w], result_types=[op.result.type])
        total = AddOp(routed.result, down.parts[0])
        for value, suffix in ((routed.result, "routed"), (gate.parts[0], "shared_gate"), (up.parts[0], "shared_up"),
                              (hidden.result, "shared_hidden"), (down.parts[0], "shared")):
            name_after(value, op.result, suffix)
        made = [routed, gate, up, hidden, down, total]
        self.split_back(op, "shared expert split out of the mixture: " + "; ".join(failed), made)
        rewriter.replace(op, made)


@dataclass(frozen=True)
class HoldMixtureSharedRule(Rule):
    name = "hold-mixture-shared"
    stage = "held-back"
    patterns = (HoldMixtureShared,)
