"""`rmsnorm`: y = h * rsqrt(mean(h^2) + eps) * w with h = x (+ residual), bf16 in and out, fp32
arithmetic. With a residual it also writes h (the new residual stream). One CTA a row; each
thread holds its 16-byte vectors of the row in registers between the sum of squares and the
scaling, so the row is read once.

With `quantize` (1 or 2 words: fuse-quant put the quantize in the norm's epilogue) y leaves in
the quantized form a product by q8_0 rows reads (lanec/codegen/kernels/quantize.py's layout),
quantized from its fp32 values as ops.quantize does: a 32-value block is four consecutive
threads' vectors, whose peak meets by shuffles; no bf16 y is written.

With `gather` (the vocabulary: the lowering folds the step's embed into its first norm) x is the embed
table and row r's input is table[tokens[r]] (a zero row for a token outside the vocabulary, as embed
gives), copied to h as embed would write it, so one launch gathers and norms the rows."""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32

from lanec.codegen.facts import RMSNORM_MAX_THREADS, VECTOR, WARP, RmsNormSpec, quantized_pitch
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.embed import table_vector
from lanec.codegen.kernels.primitives import (
    add_residual,
    at,
    float_bits,
    load_activation_bf16x8,
    load_f32x4,
    norm_input,
    store_global_words,
    unpack_bf16,
    warp_reduce,
)
from lanec.codegen.kernels.quantize import LANES_A_BLOCK, quantized_lane, scale_at, store_quantized


class RmsNorm:
    """Rows of ``width`` bf16 values; ``residual``: add a residual input first and also write the
    sum; ``quantize``: y in the quantized form of that many int8 words a value; ``gather``: x is a
    table of that many rows, row r's input its row tokens[r], also written to h; ``slots``: x is a
    grouped mixture's fp32 partial rows [rows x slots, width], row r's input the bf16 of its slots summed
    in slot order, as mixture_sum writes it (the mixture_sum launch folded in). Params: x,
    (residual), (tokens), w, y (bf16, or int8 rows of the quantized form), (h)."""

    name = "rmsnorm"

    def __init__(self, rows: int, width: int, eps: float, residual: bool = False, x_pitch=None, quantize: int = 0,
                 gather: int | None = None, slots: int = 0):
        RmsNormSpec(rows, width, eps, x_pitch, quantize, gather, residual, slots).check()
        self.slots = int(slots)
        self.rows, self.width, self.eps, self.residual = rows, width, float(eps), bool(residual)
        self.gather = gather  # the table's rows (the vocabulary), None: x is the rows themselves
        self.quantize = int(quantize)
        # x may be one part of a wider row (a product in parts' output, read in place)
        self.x_pitch = width if x_pitch is None else int(x_pitch)
        vectors = width // VECTOR
        self.warps = min(RMSNORM_MAX_THREADS // WARP, -(-vectors // WARP))
        self.steps = -(-vectors // (WARP * self.warps))  # at most RMSNORM_MAX_STEPS (the spec's width limit)

    def params(self) -> list[TensorParam]:
        row = (self.rows, self.width)
        if self.gather:
            params = [TensorParam("x", (self.gather, self.width), "bfloat16"),
                      TensorParam("tokens", (self.rows,), "int32")]
        elif self.slots:
            params = [TensorParam("x", (self.rows * self.slots, self.width), "float32")]
        else:
            params = [TensorParam("x", row, "bfloat16", (self.x_pitch, 1))]
        if self.residual:
            params.append(TensorParam("residual", row, "bfloat16"))
        params.append(TensorParam("w", (self.width,), "bfloat16"))
        if self.quantize:
            params.append(TensorParam("y", (self.rows, quantized_pitch(self.width, self.quantize)), "int8",
                                      written=True))
        else:
            params.append(TensorParam("y", row, "bfloat16", written=True))
        if self.residual or self.gather:
            params.append(TensorParam("h", row, "bfloat16", written=True))
        return params

    def touched(self) -> dict[str, int]:
        return {"x": self.rows} if self.gather else {}  # a row of the table a token

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.rows, 1, 1), block=(32 * self.warps, 1, 1), shared_bytes=4 * self.warps)

    @cute.jit
    def __call__(self, *, x: cute.Tensor, residual: cute.Tensor = None, tokens: cute.Tensor = None, w: cute.Tensor,
                 y: cute.Tensor, h: cute.Tensor = None):
        launch(self, x, residual, tokens, w, y, h)

    @cute.kernel
    def kernel(self, x: cute.Tensor, residual: cute.Tensor, tokens: cute.Tensor, w: cute.Tensor, y: cute.Tensor,
               h_out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        threads: cutlass.Constexpr = 32 * self.warps
        vectors: cutlass.Constexpr = self.width // VECTOR
        S: cutlass.Constexpr = self.steps
        scale = self.weights(w, thread)  # the norm weights are ready at launch
        cute.arch.griddepcontrol_wait()
        values = cute.make_rmem_tensor((VECTOR, S), Float32)
        values.fill(0.0)
        squares = Float32(0.0)
        for s in cutlass.range_constexpr(S):
            vector = thread + s * threads
            if vector < vectors:
                if cutlass.const_expr(self.gather):
                    h = self.gathered(x, tokens, h_out, row, vector)
                elif cutlass.const_expr(self.slots):
                    h = add_residual(self.slot_sum(x, row, vector), residual if cutlass.const_expr(self.residual)
                                     else None, h_out, row, vector, True)
                else:
                    h = norm_input(x, residual if cutlass.const_expr(self.residual) else None, h_out, row, vector,
                                   True)
                values[None, s].store(h)
                squares += (h * h).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
        release_dependents(self)  # every input of this CTA is read
        self.normalize(values, squares, scale, y, row, thread)

    @cute.jit
    def gathered(self, table: cute.Tensor, tokens: cute.Tensor, h_out: cute.Tensor, row, vector):
        """Vector `vector` of table row tokens[row] (zeros for a token outside the table) as fp32, stored
        to h_out as embed stores it."""
        loaded = cute.make_rmem_tensor(VECTOR, BFloat16)
        loaded.fill(0)
        table_vector(table, tokens[row], vector, self.gather, loaded)
        cute.autovec_copy(loaded, cute.zipped_divide(h_out, (1, VECTOR))[None, (row, vector)])
        return loaded.load().to(Float32)

    @cute.jit
    def slot_sum(self, partial: cute.Tensor, row, vector):
        """`slots`: vector `vector` of row `row`'s slots summed in slot order (fp32), rounded to bf16 as
        mixture_sum stores the mixture's result, as fp32."""
        total = [Float32(0.0)] * VECTOR
        for k in cutlass.range_constexpr(self.slots):
            for half in cutlass.range_constexpr(2):
                values = load_f32x4(at(partial, row * self.slots + k, vector * VECTOR + 4 * half))
                for e in cutlass.range_constexpr(4):
                    total[4 * half + e] = total[4 * half + e] + values[e]
        summed = cute.make_rmem_tensor(VECTOR, Float32)
        for e in cutlass.range_constexpr(VECTOR):
            summed[e] = total[e]
        return summed.load().to(BFloat16).to(Float32)

    @cute.jit
    def weights(self, w: cute.Tensor, thread):
        """This thread's vectors of the norm weights, as registers [VECTOR, steps]."""
        return norm_weight_vectors(w, self.width, 32 * self.warps, self.steps, thread)

    @cute.jit
    def normalize(self, values, squares, scale, y: cute.Tensor, row, thread):
        """y of row `row` from h (`values`, this thread's vectors in fp32) and this thread's part of
        the sum of squares: the CTA's sum through shared memory, then h * rsqrt(mean + eps) * w."""
        lane, warp = thread % 32, thread // 32
        threads: cutlass.Constexpr = 32 * self.warps
        vectors: cutlass.Constexpr = self.width // VECTOR
        S: cutlass.Constexpr = self.steps
        smem = cutlass.memory.SmemAllocator()
        sums = smem.allocate_tensor(Float32, cute.make_layout(self.warps), 16)
        squares = warp_reduce(squares, operator.add)
        if lane == 0:
            sums[warp] = squares
        cute.arch.sync_threads()
        total = Float32(0.0)
        for v in cutlass.range_constexpr(self.warps):
            total += sums[v]
        rstd = cute.math.rsqrt(total * Float32(1.0 / self.width) + Float32(self.eps))
        for s in cutlass.range_constexpr(S):
            vector = thread + s * threads
            if cutlass.const_expr(self.quantize):
                # every lane takes the block's shuffles (a lane past the row holds zeros); a block's
                # four vectors are four consecutive lanes' (vectors is a multiple of 4)
                normed = [values[e, s] * rstd * scale[e, s].to(Float32) for e in range(VECTOR)]
                words, block_scale = quantized_lane(normed, self.quantize)
                if vector < vectors:
                    store_quantized(y, row, vector, self.width, words)
                    if lane % LANES_A_BLOCK == 0:
                        store_global_words(scale_at(y, row, vector, self.width, self.quantize),
                                           float_bits(block_scale))
            elif vector < vectors:
                out = cute.make_rmem_tensor(VECTOR, BFloat16)
                out.store((values[None, s].load() * rstd * scale[None, s].load().to(Float32)).to(BFloat16))
                cute.autovec_copy(out, cute.zipped_divide(y, (1, VECTOR))[None, (row, vector)])


# --- a norm in another kernel's prologue (the weight's vectors: gemv's and mixture_router's; ------
# --- the normed rows: mixture_router's, since gemv scales its sums instead; one warp's row: -------
# --- mixture_gated's early shared warp and gemv's rider) --------------------------------------


@cute.jit
def norm_weight_vectors(w: cute.Tensor, width: cutlass.Constexpr, threads: cutlass.Constexpr,
                        steps: cutlass.Constexpr, thread):
    """A thread's vectors of a norm weight of `width` values (vector thread + s * threads for s
    below `steps`), as registers [VECTOR, steps] bf16, zero past the row."""
    vectors: cutlass.Constexpr = width // VECTOR
    w_tiles = cute.zipped_divide(cute.make_tensor(w.iterator, cute.make_layout((1, width))), (1, VECTOR))
    scale = cute.make_rmem_tensor((VECTOR, steps), BFloat16)
    scale.fill(0)
    for s in cutlass.range_constexpr(steps):
        vector = thread + s * threads
        if vector < vectors:
            cute.autovec_copy(w_tiles[None, (0, vector)], scale[None, s])
    return scale


@cute.jit
def normed_rows(x, residual, scales, h_out, rows, width: cutlass.Constexpr, warps: cutlass.Constexpr,
                steps: cutlass.Constexpr, eps: cutlass.Constexpr, writes_sum, thread):
    """The normed activation of x's rows `rows` (a list of row indices) at a thread's positions
    of a CTA of `warps` warps, [VECTOR, len(rows) * steps] bf16 (index b * steps + s), as rmsnorm
    computes and stores it: h = x (+ `residual`, None for none) in fp32, the row's 1/rms from the
    CTA's sum of h^2, bf16(h * rstd * w) (`scales`: `norm_weight_vectors`). Where `writes_sum`
    the CTA writes bf16(h) to `h_out`, the new residual stream."""
    B: cutlass.Constexpr = len(rows)
    threads: cutlass.Constexpr = 32 * warps
    lane, warp = thread % 32, thread // 32
    vectors: cutlass.Constexpr = width // VECTOR
    values = cute.make_rmem_tensor((VECTOR, B * steps), Float32)
    values.fill(0.0)
    squares = cute.make_rmem_tensor(B, Float32)
    squares.fill(0.0)
    for b in cutlass.range_constexpr(B):
        for s in cutlass.range_constexpr(steps):
            vector = thread + s * threads
            if vector < vectors:
                h = norm_input(x, residual, h_out, rows[b], vector, writes_sum)
                values[None, b * steps + s].store(h)
                squares[b] = squares[b] + (h * h).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
    smem = cutlass.memory.SmemAllocator()
    sums = smem.allocate_tensor(Float32, cute.make_layout((B, warps)), 16)
    for b in cutlass.range_constexpr(B):
        total = warp_reduce(squares[b], operator.add)
        if lane == 0:
            sums[b, warp] = total
    cute.arch.sync_threads()
    normed = cute.make_rmem_tensor((VECTOR, B * steps), BFloat16)
    for b in cutlass.range_constexpr(B):
        total = Float32(0.0)
        for v in cutlass.range_constexpr(warps):
            total += sums[b, v]
        rstd = cute.math.rsqrt(total * Float32(1.0 / width) + Float32(eps))
        for s in cutlass.range_constexpr(steps):
            scaled = values[None, b * steps + s].load() * rstd * scales[None, s].load().to(Float32)
            normed[None, b * steps + s].store(scaled.to(BFloat16))
    return normed


@cute.jit
def warp_normed_row(x, residual, w, staged, normed, row, out_row, width: cutlass.Constexpr, eps: cutlass.Constexpr,
                    lane):
    """One warp's rmsnorm of row `row` into row `out_row` of `normed` ([rows, width] bf16, shared or global),
    as rmsnorm computes it: h = x (+ `residual`, None for none) in fp32, the row's 1/rms from the warp's sum
    of h^2, bf16(h * rstd * w). h waits for the sum in `staged` (shared, [1, width] fp32), or in registers
    where `staged` is None (a short row). x and the residual are read through L2 only (a launch's input read
    before its PDL wait: mixture_gated's `early_shared`). Lane l takes the 16-byte vectors l, l + 32, ...:
    the ones `rows_dots` has it read back."""
    vectors: cutlass.Constexpr = width // VECTOR
    steps: cutlass.Constexpr = -(-vectors // WARP)
    scale = norm_weight_vectors(w, width, WARP, steps, lane)  # the weights, issued first: ready at launch
    kept = None
    if cutlass.const_expr(staged is None):
        kept = cute.make_rmem_tensor((VECTOR, steps), Float32)
        kept.fill(0.0)
    squares = Float32(0.0)
    for s in cutlass.range_constexpr(steps):
        vector = lane + s * WARP
        if vector < vectors:
            words = load_activation_bf16x8(at(x, row, vector * VECTOR), l2_only=True)
            added = [Float32(0.0)] * 4
            if cutlass.const_expr(residual is not None):
                added = load_activation_bf16x8(at(residual, row, vector * VECTOR), l2_only=True)
            for e in cutlass.range_constexpr(4):
                low, high = unpack_bf16(words[e])
                if cutlass.const_expr(residual is not None):
                    r_low, r_high = unpack_bf16(added[e])
                    low, high = low + r_low, high + r_high
                if cutlass.const_expr(staged is None):
                    kept[2 * e, s], kept[2 * e + 1, s] = low, high
                else:
                    staged[0, vector * VECTOR + 2 * e] = low
                    staged[0, vector * VECTOR + 2 * e + 1] = high
                squares = squares + low * low + high * high
    total = warp_reduce(squares, operator.add)
    rstd = cute.math.rsqrt(total * Float32(1.0 / width) + Float32(eps))
    tiles = cute.zipped_divide(normed, (1, VECTOR))
    for s in cutlass.range_constexpr(steps):
        vector = lane + s * WARP
        if vector < vectors:
            h = cute.make_rmem_tensor(VECTOR, Float32)
            for e in cutlass.range_constexpr(VECTOR):
                if cutlass.const_expr(staged is None):
                    h[e] = kept[e, s]
                else:
                    h[e] = staged[0, vector * VECTOR + e]
            out = cute.make_rmem_tensor(VECTOR, BFloat16)
            out.store((h.load() * rstd * scale[None, s].load().to(Float32)).to(BFloat16))
            cute.autovec_copy(out, tiles[None, (out_row, vector)])
