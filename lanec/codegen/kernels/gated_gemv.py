"""`gated_gemv`: a gated pair as one launch, out[rows, H] = silu(x @ gate^T) * (x @ up^T), bf16
weights and activation, fp32 accumulation, bf16 out. The same row products as `gemv` (a CTA owns
a few hidden units and loads both their gate and up rows before the PDL wait); the SwiGLU is the
epilogue, on the fp32 sums.

With `quantize` (1 or 2 words: fuse-quant put the quantize in the gated pair's epilogue, its
hidden width whole 32-value blocks) out is written in the quantized form a product by q8_0 rows
reads (lanec/codegen/kernels/quantize.py's layout), from the fp32 SwiGLU values as ops.quantize
does. A block is 32 hidden units, which CTAs of fewer units share: every CTA stages its values
(fp32, `staged`) and draws a ticket for its block (`tickets`, one counter a block, `atom.inc`
modulo the block's CTAs); the CTA that draws the block's last ticket quantizes it for every row, a
warp a row (a lane a value, the peak a whole-warp butterfly). A CTA of whole blocks quantizes its
own. Every CTA's units divide a block or are whole blocks (`quantize_problems`)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Uint32, Uint64

from lanec.codegen.facts import quantized_pitch, quantized_problems
from lanec.codegen.kernels.base import TensorParam, launch
from lanec.codegen.kernels.gemv import RowProducts
from lanec.codegen.kernels.primitives import (
    at,
    bits_float,
    float_bits,
    load_word_l2,
    store_global_byte,
    store_global_words,
    ticket,
)
from lanec.codegen.kernels.quantize import quantized_values

BLOCK = 32  # values of a quantized block: hidden units here


class GatedGemv(RowProducts):
    """out[b, j] = silu(x[b] . gate[j]) * (x[b] . up[j]) for j < hidden; gate and up are two
    [hidden, width] buffers. ``schedule``: see `RowProducts` (its rows are hidden units).
    ``quantize``: out in the quantized form of that many int8 words a value, with the scratch
    params staged (fp32 [rows, hidden]) and tickets (int32, one a block) after it."""

    name = "gated_gemv"
    sources = 2

    def __init__(self, rows: int, width: int, hidden: int, *, schedule=None, x_pitch=None, quantize: int = 0):
        super().__init__(rows, width, (hidden,), schedule=schedule, x_pitch=x_pitch)
        self.hidden = hidden
        self.quantize = int(quantize)
        problems = self.quantize_problems()
        if problems:
            raise ValueError(f"{self.name} quantize epilogue: " + "; ".join(problems))

    def quantize_problems(self) -> list[str]:
        """Why this launch cannot quantize its out in its epilogue (none without `quantize`)."""
        if not self.quantize:
            return []
        found = quantized_problems(self.hidden, self.quantize)
        R = self.rows_per_cta
        if BLOCK % R and R % BLOCK:
            found.append(f"a CTA's {R} hidden units neither divide a {BLOCK}-value block nor are whole blocks")
        return found

    def out_params(self) -> list[TensorParam]:
        """out (bf16, or int8 rows of the quantized form with its two scratch params)."""
        if not self.quantize:
            return [TensorParam("out", (self.rows, self.hidden), "bfloat16", written=True)]
        return [TensorParam("out", (self.rows, quantized_pitch(self.hidden, self.quantize)), "int8", written=True),
                TensorParam("staged", (self.rows, self.hidden), "float32", written=True),
                TensorParam("tickets", (max(2, self.hidden // BLOCK),), "int32", written=True)]

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.width), "bfloat16", self.x_strides()),
                TensorParam("gate", (self.hidden, self.width), "bfloat16"),
                TensorParam("up", (self.hidden, self.width), "bfloat16"), *self.out_params()]

    def shared_bytes(self) -> int:
        return super().shared_bytes() + (16 if self.quantize else 0)  # the last-CTA flag

    @cute.jit
    def __call__(self, *, x: cute.Tensor, gate: cute.Tensor, up: cute.Tensor, out: cute.Tensor,
                 staged: cute.Tensor = None, tickets: cute.Tensor = None):
        launch(self, x, gate, up, out, staged, tickets)

    @cute.kernel
    def kernel(self, x: cute.Tensor, gate: cute.Tensor, up: cute.Tensor, out: cute.Tensor, staged: cute.Tensor,
               tickets: cute.Tensor):
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
            self.quantize_epilogue(staged, tickets, out, first, thread)

    @cute.jit
    def quantize_epilogue(self, staged, tickets, out, first: Int32, thread: Int32):
        """The blocks this CTA completes, quantized for every row (the module's docstring)."""
        R: cutlass.Constexpr = self.rows_per_cta
        warps: cutlass.Constexpr = self.warps
        warp, lane = thread // 32, thread % 32
        cute.arch.sync_threads()  # every thread's staged values are written
        if cutlass.const_expr(R % BLOCK == 0):  # whole blocks: this CTA's own
            jobs: cutlass.Constexpr = (R // BLOCK) * self.rows
            for start in cutlass.range_constexpr(0, jobs, warps):
                job = start + warp
                unit = first // BLOCK + job % (R // BLOCK)
                if (job < jobs) & (unit * BLOCK < self.hidden):
                    self.quantize_block(staged, out, job // (R // BLOCK), unit, lane)
        else:
            sharing: cutlass.Constexpr = BLOCK // R  # CTAs a block
            last = cutlass.memory.SmemAllocator().allocate_tensor(Int32, cute.make_layout(2), 16)
            if thread == 0:
                # modulo the block's CTAs (wrapping past sharing - 1): from a poisoned start or the
                # count the last step left, the block's last CTA draws sharing - 2
                drawn = ticket(at(tickets, first // BLOCK), Uint32(sharing - 1))
                last[0] = Int32(cutlass.select_(drawn == Uint32((sharing - 2) % (1 << 32)), 1, 0))
            cute.arch.sync_threads()
            if last[0] == 1:
                cute.arch.fence_acq_rel_gpu()  # every sharing CTA's staged values are seen
                for start in cutlass.range_constexpr(0, self.rows, warps):
                    b = start + warp
                    if b < self.rows:
                        self.quantize_block(staged, out, b, first // BLOCK, lane)

    @cute.jit
    def quantize_block(self, staged, out, b, unit, lane):
        """Block `unit` of row `b`: lane l quantizes its value l (read through L2: other CTAs
        staged it); lane 0 stores the scale."""
        column = unit * BLOCK + lane
        value = bits_float(load_word_l2(Uint64(at(staged, b, column).toint())))
        planes, scale = quantized_values([value], self.quantize, 32)
        for plane in cutlass.range_constexpr(self.quantize):
            store_global_byte(at(out, b, plane * self.hidden + column), planes[plane][0])
        if lane == 0:
            store_global_words(at(out, b, self.quantize * self.hidden + 4 * unit), float_bits(scale))
