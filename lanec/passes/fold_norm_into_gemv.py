"""fold-norm-into-gemv (held-back, lane; under the `fold_norms` knob, on by default, `--no-fold-norms`
off): a norm whose one reader is a product on the gemv kernel runs in that gemv's prologue. Each
CTA of the gemv reads the norm's input (and residual) whole after the PDL wait and dots its weights
with h times the norm weight while it sums h's squares; each output is then scaled by the row's
rsqrt(mean + eps). One CTA writes the new residual stream. The norm's own one-CTA-a-row launch is
gone: at Kimi Linear's real size, batch 1, 27 launches and 22-29 us a step (bench/RESULTS.md).

The norm stays in the form, marked `prologue = "gemv"` (its meaning unchanged; the interpreter holds
its result in fp32, unrounded, since no kernel stores it); the lowering launches nothing for it and
gives its input, residual, weight and eps to its reader's gemv. Taken only where gemv's prologue
takes the shape (`RowProductsSpec`'s norm facts: the CUDA-core path's 1-3 rows, a thread's share of
the rows within its registers) and the product is a plain bf16 gemv, and not after an all-reduce
(fold-all-reduce-into-norm takes that norm); otherwise held back, the reason recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import RowProductsSpec
from lanec.dialects.form import AllReduceOp, GatedProductOp, NormOp, ProductOp, shape
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, bf16_rows, failures, norm_prologue_checks, users


class FoldNormIntoGemv(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: NormOp, rewriter: PatternRewriter) -> None:
        if not self.shim.fold_norms or op.prologue is not None:
            return
        readers = {id(u): u for u in users(op.result)}
        if len(readers) != 1:
            self.decide(op, False, f"its result has {len(readers)} readers: a prologue serves one launch")
            return
        reader = next(iter(readers.values()))
        if any(isinstance(v.owner, AllReduceOp) for v in (op.x, op.residual) if v is not None):
            self.decide(op, False, "it reads an all-reduce's sum: the all-reduce's one-shot launch takes the norm "
                                   "(fold-all-reduce-into-norm), measured; the prologue is not, after it")
            return
        if isinstance(reader, GatedProductOp):
            self.decide(op, False, "its reader is a gated pair: gated_gemv has no norm prologue yet")
            return
        if not isinstance(reader, ProductOp):
            self.decide(op, False, f"its reader is a {reader.name.removeprefix('form.')}: only gemv takes a norm "
                                   "in its prologue")
            return
        rows, width = shape(op.x)
        parts = tuple(shape(w)[0] for w in reader.weights)
        problems = failures([
            *norm_prologue_checks(op),
            (reader.part() is None, "the product reads a part of each head's unit: the norm needs whole rows"),
            bf16_rows(reader, self.shim, "norm prologue"),
        ])
        problems += RowProductsSpec("gemv", rows, width, parts, norm=True).norm_problems()
        if self.held(op, problems):
            return
        self.mark(op, rewriter, "prologue", "gemv",
                  f"runs in the prologue of its one reader's gemv, {describe(reader)}: {rows} row(s) of {width}, "
                  "each CTA sums the squares itself (one launch fewer)")


@dataclass(frozen=True)
class FoldNormIntoGemvRule(Rule):
    name = "fold-norm-into-gemv"
    stage = "held-back"
    patterns = (FoldNormIntoGemv,)
