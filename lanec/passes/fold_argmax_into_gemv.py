"""fold-argmax-into-gemv (held-back, lane; only under the `fold_argmax` knob, `--fold-argmax`): an
argmax whose input is a product on the gemv kernel's CUDA-core path (the lm head of a decode step's
1-3 rows) runs in that gemv's epilogue. Each CTA keys its outputs' best (the value as stored, then
the smaller index) into one 64-bit atomic minimum a row; the CTA that ends the grid writes the
index. The argmax's own one-CTA-a-row launch over the vocabulary is gone.

The argmax stays in the form, marked `epilogue = "gemv"` (its meaning unchanged, so the oracle is
the same); the lowering launches nothing for it and gives its result to the gemv that writes its
input. Taken only where gemv's epilogue takes the shape (`RowProductsSpec.argmax_problems`: the
CUDA-core path, one part, no per-head read) and the product is a plain bf16 gemv of at most the
rows one launch takes; otherwise held back, the reason recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from lanec.codegen.facts import GEMV_ROWS, RowProductsSpec
from lanec.dialects.form import ArgmaxOp, ProductOp, shape
from lanec.passes.decisions import describe
from lanec.passes.rule import Judge, Rule, bf16_rows, failures


class FoldArgmaxIntoGemv(Judge):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ArgmaxOp, rewriter: PatternRewriter) -> None:
        if not self.shim.fold_argmax or op.epilogue is not None:
            return
        product = op.x.owner
        if not isinstance(product, ProductOp):
            name = getattr(product, "name", "a step input").removeprefix("form.")
            self.decide(op, False, f"its input comes from {name}, not a product: only gemv takes an argmax in its "
                                   "epilogue")
            return
        rows, width = shape(product.x)
        parts = tuple(shape(w)[0] for w in product.weights)
        problems = failures([
            (rows <= GEMV_ROWS and self.shim.as_gemv(rows), f"{rows} rows run on gemm_tc, not the gemv"),
            bf16_rows(product, self.shim, "argmax epilogue"),
        ])
        part = product.part()  # (heads, unit, offset, length) of a per-head read
        problems += RowProductsSpec("gemv", rows, width, parts, part[:3] if part else None,
                                    argmax=True).argmax_problems()
        if self.held(op, problems):
            return
        self.mark(op, rewriter, "epilogue", "gemv",
                  f"runs in the epilogue of the gemv that writes its input, {describe(product)}: {rows} row(s) of "
                  f"{sum(parts)} values, each CTA's best into one 64-bit atomic minimum a row (one launch fewer)")


@dataclass(frozen=True)
class FoldArgmaxIntoGemvRule(Rule):
    name = "fold-argmax-into-gemv"
    stage = "held-back"
    patterns = (FoldArgmaxIntoGemv,)
