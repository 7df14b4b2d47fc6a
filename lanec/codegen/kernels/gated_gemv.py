"""`gated_gemv`: a gated pair as one launch, out[rows, H] = silu(x @ gate^T) * (x @ up^T), bf16
weights and activation, fp32 accumulation, bf16 out. The same row products as `gemv` (a CTA owns
a few hidden units and loads both their gate and up rows before the PDL wait); the SwiGLU is the
epilogue, on the fp32 sums.

With `quantize` (fuse-quant put the quantize in the gated pair's epilogue, its hidden width whole
32-value blocks) out leaves in the quantized form a product by q8_0 rows reads, from the fp32
SwiGLU values as ops.quantize does: RowProducts' quantize epilogue (gemv.py), a ticket a block
where CTAs share one."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32

from lanec.codegen.kernels.base import TensorParam, launch, release_dependents_at_entry
from lanec.codegen.kernels.gemv import RowProducts


class GatedGemv(RowProducts):
    """out[b, j] = silu(x[b] . gate[j]) * (x[b] . up[j]) for j < hidden; gate and up are two
    [hidden, width] buffers. ``schedule``: see `RowProducts` (its rows are hidden units).
    ``quantize``: out in the quantized form of that many int8 words a value, with the scratch
    params staged (fp32 [rows, hidden]) and block_tickets (int32, one a block) after it."""

    name = "gated_gemv"
    sources = 2

    def __init__(self, rows: int, width: int, hidden: int, *, schedule=None, x_pitch=None, quantize: int = 0):
        super().__init__(rows, width, (hidden,), schedule=schedule, x_pitch=x_pitch, quantize=quantize)
        self.hidden = hidden

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.width), "bfloat16", self.x_strides()),
                TensorParam("gate", (self.hidden, self.width), "bfloat16"),
                TensorParam("up", (self.hidden, self.width), "bfloat16"), *self.out_params("out")]

    @cute.jit
    def __call__(self, *, x: cute.Tensor, gate: cute.Tensor, up: cute.Tensor, out: cute.Tensor,
                 staged: cute.Tensor = None, block_tickets: cute.Tensor = None):
        launch(self, x, gate, up, out, staged, block_tickets)

    @cute.kernel
    def kernel(self, x: cute.Tensor, gate: cute.Tensor, up: cute.Tensor, out: cute.Tensor, staged: cute.Tensor,
               block_tickets: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        first = block * self.rows_per_cta
        partial = self.products(x, [gate, up], first, thread)
        count: cutlass.Constexpr = self.rows_per_cta * self.rows
        for start in cutlass.range_constexpr(0, count, 32 * self.warps):
            index = start + thread  # hidden unit fastest: neighbouring threads store neighbours
            r, b = index % self.rows_per_cta, index // self.rows_per_cta
            if (index < count) & (first + r < self.hidden):
                g, u = self.total(partial, 0, r, b), self.total(partial, 1, r, b)
                value = g / (Float32(1.0) + cute.math.exp(-g)) * u
                if cutlass.const_expr(self.quantize):
                    staged[b, first + r] = value
                else:
                    out[b, first + r] = BFloat16(value)
        if cutlass.const_expr(self.quantize):
            self.quantize_epilogue(staged, block_tickets, out, first, thread)
