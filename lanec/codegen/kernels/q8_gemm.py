"""`q8_gemm_tc`: a batch's products by q8_0 checkpoint rows on tensor cores, reading the activation
in the quantized form: y[rows, N] = x[rows, K] . w[N, K], bf16 out, the weight read from memory
once for all rows (q8_gemv reads it again for every 32 rows). The integer path of `q8_gemv`, on
tensor cores: per 32-value block `mma.m16n8k32` of signed bytes sums the block's products exactly
in int32 (from zero), then each sum is scaled into the fp32 accumulator by the weight row's fp16
scale d times the activation row's fp32 scale s (with two words, the residual word's sum times
1/254 is added to the high word's first): y = sum over blocks of d s (q . a1 + (q . a2) / 254), the
values q8_gemv sums, up to fp32 rounding and the order of the sums.

gemm_tc's mma.sync engine (GemmTc) with bytes for values: one CTA of 8 warps a (K split, row block,
weight tile), the activation rows the MMA's M side, the weight rows its N side, both read by
`ldmatrix` as stored (an int8 A fragment of 16 x 32 bytes is the bf16 one of 16 x 16 halves), its
grid model, its cp.async pipeline start (weights before `griddepcontrol.wait`) and its split-K
epilogue over the cluster's shared memory.

The weight rows are `q8_0_planes` (weights.py, a transform recorded at load): a row's int8 values
back to back, then its blocks' fp16 scales, the same 34 bytes a block as llama.cpp's interleaved
blocks, but 16-byte aligned where the width is whole runs of 256 values (`Q8GemmSpec`). A stage is
128 K values (4 blocks): each weight row's 128 value bytes and 8 scale bytes, each activation row's
128 bytes a word and 16 bytes of scales, in three shared buffers a stage."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint8, Uint16, Uint32

from lanec.codegen.facts import GEMM_BLOCK_ROWS, SHARED_LIMIT, GemmSchedule, Q8GemmSpec, quantized_pitch
from lanec.codegen.kernels.base import TensorParam, release_dependents_at_entry
from lanec.codegen.kernels.gemm_tc import MMA_M, MMA_N, STAGE_BUDGET, THREADS, GemmTc, blocks_of
from lanec.codegen.kernels.primitives import at, bits_float, copy_g2s_zfill, half_to_float, ldmatrix_x4, mma_s8

BLOCK = 32  # values a q8_0 block (and an m16n8k32)
STAGE_K = 128  # K values a stage: 8 16-byte copies of a row's bytes
STAGE_BLOCKS = STAGE_K // BLOCK
ROW_BYTES = STAGE_K + 16  # a shared row's bytes: 16 of padding keep ldmatrix's 8 rows in 8 bank groups
# stages by default: measured on the H200 (bench/q8.py LANEC_Q8_SET=tc, 2026-11-30, Llama-3.1-8B's
# five products at 33-256 rows, one word) 3 stages beat 6 (the budget's) by up to 24% (lm head at 33
# rows 228 against 300 us, gate+up 60 against 76) and lose at most 2%: two CTAs share an SM
DEFAULT_STAGES = 3
INV_RESIDUAL = 1.0 / 254.0  # the residual word's scale is its block's scale over 254
MAGIC, MAGIC_BITS = 12582912.0, 0x4B400000  # 1.5 x 2^23 and its bits: `block_float`


class Q8GemmTc(GemmTc):
    """y[b, n] = the quantized x row b . the q8_0 row n, for the concatenated parts' rows n (see
    the module docstring). ``words``: the activation's int8 words a value (1, or 2: high and
    residual); ``schedule``: gemm_tc's fields (tile_n, splits, stages, block_rows)."""

    name = "q8_gemm_tc"
    engine = "mma"

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, rows: int, width: int, parts, *, words: int = 1, schedule=None):
        parts = tuple(int(p) for p in parts)
        Q8GemmSpec(rows, width, parts, words).check()
        schedule = GemmSchedule.of(schedule or {})
        for field in ("loads", "multicast"):
            if getattr(schedule, field, None) not in (None, "copies", 1):
                raise ValueError(f"q8_gemm_tc {field} {getattr(schedule, field)!r}: its stages are filled by "
                                 "cp.async (gemm_tc's mma.sync engine)")
        if schedule.tile_n not in (None, *self.tiles):
            raise ValueError(f"q8_gemm_tc tile_n {schedule.tile_n}: {' or '.join(map(str, self.tiles))} weight "
                             "rows a CTA")
        if (schedule.block_rows or 0) > GEMM_BLOCK_ROWS:
            raise ValueError(f"q8_gemm_tc block_rows {schedule.block_rows}: at most {GEMM_BLOCK_ROWS} activation "
                             "rows a CTA")
        self.rows, self.width, self.parts, self.outputs = rows, width, parts, sum(parts)
        self.words, self.gated, self.x_pitch = words, False, None
        self.y_width = self.outputs
        self.x_bytes = quantized_pitch(width, words)
        self.w_bytes = width + width // BLOCK * 2  # the planes: values, then fp16 scales
        self.row_blocks, self.block_rows = blocks_of(rows, schedule.block_rows or GEMM_BLOCK_ROWS)
        self.padded_rows = -(-self.block_rows // MMA_M) * MMA_M
        self.k_tiles = width // STAGE_K
        tile_n, splits = self.default_grid()
        self.tile_n = schedule.tile_n or tile_n
        self.splits = schedule.splits or (splits if schedule.tile_n in (None, tile_n) else 1)
        if self.splits > self.k_tiles:
            raise ValueError(f"q8_gemm_tc splits {self.splits}: K {width} has only {self.k_tiles} stages of "
                             f"{STAGE_K} to split")
        self.n_tiles = -(-self.outputs // self.tile_n)
        self.per_split = -(-self.k_tiles // self.splits)
        self.arrange_warps()
        fit = STAGE_BUDGET // self.stage_bytes()
        self.stages = schedule.stages or max(self.min_stages, min(DEFAULT_STAGES, fit))
        if self.stages < self.min_stages:
            raise ValueError(f"q8_gemm_tc stages {self.stages}: at least {self.min_stages}")
        if self.shared_bytes() > SHARED_LIMIT:
            raise ValueError(f"q8_gemm_tc: {self.stages} stages of {self.tile_n} weight rows and {self.padded_rows} "
                             f"activation rows take {self.shared_bytes()} bytes of shared memory, above the SM's "
                             f"{SHARED_LIMIT}")

    def stage_rows(self) -> int:
        """A stage's rows of value bytes: the tile's weight rows, then each word's activation rows."""
        return self.tile_n + self.words * self.padded_rows

    def stage_bytes(self) -> int:
        return self.stage_rows() * ROW_BYTES + 2 * STAGE_BLOCKS * self.tile_n + 4 * STAGE_BLOCKS * self.padded_rows

    def shared_bytes(self) -> int:
        values = self.stages * self.stage_rows() * ROW_BYTES
        scales = self.stages * STAGE_BLOCKS * (2 * self.tile_n + 4 * self.padded_rows)
        if self.splits > 1:  # the fp32 partial tile reuses the value buffers
            values = max(values, 4 * self.padded_rows * self.partial_pitch())
        return -(-values // 128) * 128 + scales + 64

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.x_bytes), "int8"),
                TensorParam("w", (self.outputs, self.w_bytes), "uint8"),
                TensorParam("y", (self.rows, self.outputs), "bfloat16", written=True)]

    @cute.kernel
    def kernel(self, x: cute.Tensor, w: cute.Tensor, y: cute.Tensor):
        release_dependents_at_entry(self)
        S: cutlass.Constexpr = self.stages
        smem = cutlass.memory.SmemAllocator()
        R: cutlass.Constexpr = self.stage_rows()
        values = smem.allocate_tensor(Uint8, cute.make_layout((S, R, ROW_BYTES), stride=(R * ROW_BYTES, ROW_BYTES, 1)),
                                      128)
        if cutlass.const_expr(self.splits > 1):  # room for the partial tile past the stages' value rows
            smem.allocate_tensor(Uint8, cute.make_layout(max(0, 4 * self.padded_rows * self.partial_pitch()
                                                             - S * R * ROW_BYTES) + 16), 16)
        w_scales = smem.allocate_tensor(Uint16, cute.make_layout((S, self.tile_n, STAGE_BLOCKS),
                                                                 stride=(self.tile_n * STAGE_BLOCKS, STAGE_BLOCKS, 1)),
                                        16)
        x_scales = smem.allocate_tensor(Float32, cute.make_layout((S, self.padded_rows, STAGE_BLOCKS),
                                                                  stride=(self.padded_rows * STAGE_BLOCKS,
                                                                          STAGE_BLOCKS, 1)), 16)
        self.stream(x, w, y, (values, w_scales, x_scales), values)

    @cute.jit
    def load_weights(self, w, buffers, n0: Int32, k_tile: Int32, buffer, tid: Int32):
        """cp.async of weight rows n0 + [0, tile_n) at K stage `k_tile` into `buffer`: each row's
        128 value bytes (8 copies) and its 4 blocks' fp16 scales (one 8-byte copy); zeros past N."""
        values, w_scales, _ = buffers
        for j in cutlass.range_constexpr(self.tile_n * 8 // THREADS):
            c = tid + j * THREADS
            r, v = c // 8, c % 8
            n = n0 + r
            source = at(w, cutlass.min(n, self.outputs - 1), k_tile * STAGE_K + v * 16)
            copy_g2s_zfill(at(values, buffer, r, v * 16), source, n < self.outputs)
        for j in cutlass.range_constexpr(-(-self.tile_n // THREADS)):
            r = tid + j * THREADS
            n = n0 + r
            if r < self.tile_n:
                source = at(w, cutlass.min(n, self.outputs - 1), self.width + k_tile * 2 * STAGE_BLOCKS)
                copy_g2s_zfill(at(w_scales, buffer, r, 0), source, n < self.outputs, 8)

    @cute.jit
    def load_rows(self, x, buffers, first_row: Int32, k_tile: Int32, buffer, tid: Int32):
        """cp.async of the block's activation rows at K stage `k_tile`: each word's 128 bytes of a
        row after the weight rows, and the row's 4 fp32 block scales; zeros in the padding rows."""
        values, _, x_scales = buffers
        copies: cutlass.Constexpr = self.words * self.padded_rows * 8
        for j in cutlass.range_constexpr(-(-copies // THREADS)):
            c = tid + j * THREADS
            word, i, v = c // (self.padded_rows * 8), (c // 8) % self.padded_rows, c % 8
            row = first_row + i
            if c < copies:
                keep = (i < self.block_rows) & (row < self.rows)
                source = at(x, cutlass.min(row, self.rows - 1), word * self.width + k_tile * STAGE_K + v * 16)
                copy_g2s_zfill(at(values, buffer, self.tile_n + word * self.padded_rows + i, v * 16), source, keep)
        for j in cutlass.range_constexpr(-(-self.padded_rows // THREADS)):
            i = tid + j * THREADS
            row = first_row + i
            if i < self.padded_rows:
                keep = (i < self.block_rows) & (row < self.rows)
                source = at(x, cutlass.min(row, self.rows - 1), self.words * self.width + k_tile * 4 * STAGE_BLOCKS)
                copy_g2s_zfill(at(x_scales, buffer, i, 0), source, keep)

    @cute.jit
    def multiply(self, buffers, acc, buffer: Int32, warp: Int32, lane: Int32):
        """acc += this warp's rows x weight rows over one stage's 4 blocks: per block one integer
        MMA a (row tile, weight tile, word), its sums made floats (the residual word's over 254
        added) and scaled by d s into acc."""
        values, w_scales, x_scales = buffers
        row0 = (warp // self.warps_n) * self.warp_row_tiles * MMA_M
        col0 = (warp % self.warps_n) * self.warp_col_tiles * MMA_N
        for kk in cutlass.range_constexpr(STAGE_BLOCKS // 2):
            # one x4 a weight tile: its 8 rows x 64 bytes, the B words of two blocks
            b = [ldmatrix_x4(at(values, buffer, col0 + ct * MMA_N + lane % 8, kk * 2 * BLOCK + (lane // 8) * 16))
                 for ct in range(self.warp_col_tiles)]
            for half in cutlass.range_constexpr(2):
                kb: cutlass.Constexpr = 2 * kk + half
                # the weight scales of this thread's two columns of each weight tile
                d = [[half_to_float(Uint32(w_scales[buffer, col0 + ct * MMA_N + 2 * (lane % 4) + e, kb]))
                      for e in range(2)] for ct in range(self.warp_col_tiles)]
                for rt in cutlass.range_constexpr(self.warp_row_tiles):
                    # the activation scales of this thread's two rows (lane / 4 and 8 past it)
                    s = [x_scales[buffer, row0 + rt * MMA_M + lane // 4 + 8 * h, kb] for h in range(2)]
                    a = [ldmatrix_x4(at(values, buffer, self.tile_n + word * self.padded_rows + row0 + rt * MMA_M
                                        + lane % 16, kb * BLOCK + (lane // 16) * 16))
                         for word in range(self.words)]
                    for ct in cutlass.range_constexpr(self.warp_col_tiles):
                        sums = [mma_s8(a[word], (b[ct][2 * half], b[ct][2 * half + 1])) for word in range(self.words)]
                        for e in cutlass.range_constexpr(4):
                            # the high word's sum by cvt, the residual's by `block_float`: two pipes
                            value = Float32(sums[0][e])
                            if cutlass.const_expr(self.words == 2):
                                value = block_float(sums[1][e]) * INV_RESIDUAL + value
                            acc[rt, ct, e] = value * (d[ct][e % 2] * s[e // 2]) + acc[rt, ct, e]


@cute.jit
def block_float(total: Int32) -> Float32:
    """A block's integer sum as a float, exactly: |total| <= 32 x 127 x 127 < 2^22, so its bits
    added to those of 1.5 x 2^23 are that float plus total (an integer add and a float subtract,
    full rate, where cvt.rn.f32.s32 runs at a quarter of it: with two words, the residual's sums
    by this beside the high word's by cvt took 2.6-3.9x off q8_gemm_tc, bench/q8.py, H200)."""
    return bits_float(Uint32(total + Int32(MAGIC_BITS))) - Float32(MAGIC)
