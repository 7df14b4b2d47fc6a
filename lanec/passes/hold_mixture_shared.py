"""hold-mixture-shared (the lane's held-back rule "mixture + shared expert"): a mixture folds its
shared expert into a block of kept experts of at most 32 warps (one warp a kept expert: top_k
routed and the shared one) and never writes its result at a row a parameter names (no fused
scatter). Held back: the routed mixture, the shared expert's gate, up, swiglu and down, and an
add. A shared expert with a gate row, or a scattering mixture, has no split the form can say (it
has no broadcast multiply and no scatter): the lane cannot run it, a one-line error."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.utils.exceptions import DiagnosticException

from lanec.dialects.form import AddOp, MixtureOp, ProductOp, SwigluOp
from lanec.lane import MIXTURE_MAX_WARPS
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, failures, name_after


class HoldMixtureShared(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MixtureOp, rewriter: PatternRewriter) -> None:
        if not op.shared:
            return
        warps = op.top_k.value.data + 1
        failed = failures([
            (warps <= MIXTURE_MAX_WARPS, (f"a block of {warps} kept experts ({op.top_k.value.data} routed + 1 "
                                         f"shared, a warp each) is above {MIXTURE_MAX_WARPS} warps")),
            (op.rows is None, "the mixture scatters its result to rows a parameter names"),
        ])
        if not failed:
            self.decide(op, True, f"shared expert in a block of {warps} warps, no scatter")
            return
        self.decide(op, False, "shared expert split out of the mixture: " + "; ".join(failed))
        if op.rows is not None or len(op.shared) == 4:
            raise DiagnosticException(f"{describe(op)}: {'; '.join(failed)}, and the form cannot split a shared "
                                      "expert out of a scattering mixture or one with a gate row")
        gate_w, up_w, down_w = op.shared
        opt = lambda v: [v] if v is not None else []
        routed = MixtureOp.build(
            operands=[op.x, op.router, op.gate, op.up, op.down, opt(op.correction), [], []],
            properties={k: v for k, v in op.properties.items() if k != "operandSegmentSizes"},
            result_types=[op.result.type])
        gate, up = ProductOp(op.x, [gate_w]), ProductOp(op.x, [up_w])
        hidden = SwigluOp(gate.parts[0], up.parts[0])
        down = ProductOp(hidden.result, [down_w], result_types=[op.result.type])
        total = AddOp(routed.result, down.parts[0])
        for value, suffix in ((routed.result, "routed"), (gate.parts[0], "shared_gate"), (up.parts[0], "shared_up"),
                              (hidden.result, "shared_hidden"), (down.parts[0], "shared")):
            name_after(value, op.result, suffix)
        rewriter.replace(op, [routed, gate, up, hidden, down, total])


@dataclass(frozen=True)
class HoldMixtureSharedRule(Rule):
    name = "hold-mixture-shared"
    stage = "held-back"
    patterns = (HoldMixtureShared,)
