"""`q8_gemv` and `q8_gated_gemv`: the decode step's products by q8_0 checkpoint rows, reading an
activation in the quantized form (`quantize`'s rows: int8 words, one or two a value, and an fp32
scale a 32-value block), bf16 out. The weights are the plan's q8_0 buffer as llama.cpp stores
it: per 32 values of a row an fp16 scale d, then the 32 int8 values (34 bytes, so a block is only
2-byte aligned). Per block the products are integers: dp4a sums four int8 products a step in
int32; y = sum over blocks of d s (q . a1) (+ d (s / 254) (q . a2) with the residual word), in
fp32: the interpreter's product of the values the two sides stand for, up to fp32 rounding.

The same row products as `gemv`'s CUDA-core path (RowProducts: a CTA owns a few weight rows,
lanes split K, one reduce-scatter a warp, the epilogue reads `total`), with a lane's 16-byte bf16
vector replaced by a quarter block: 8 int8 weights, which a lane reads as two aligned words and
(where the block's values sit two bytes off a word, every other block) the two bytes after them,
funnel-shifted into place after the PDL wait; every weight load is issued before it. Four
neighbouring lanes read one block, so a warp's loads cover 8 blocks back to back."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint32

from lanec.codegen.facts import (
    GEMV_WARPS,
    Q8_0_BLOCK_BYTES,
    Q8_ONE_STEP_ROWS_PER_CTA,
    WARP,
    RowSchedule,
    quantized_pitch,
    quantized_problems,
)
from lanec.codegen.kernels.base import TensorParam
from lanec.codegen.kernels.gated_gemv import GatedGemv
from lanec.codegen.kernels.gemv import Gemv
from lanec.codegen.kernels.primitives import (
    at,
    dp4a,
    funnel_right,
    half_to_float,
    load_activation_f32,
    load_activation_words,
    load_weight_half,
    load_weight_word,
    rounded,
)

QUARTER = 8  # int8 values a lane takes of a 32-value block
BLOCK = 32


def q8_default_schedule(rows: int, width: int, sources: int) -> dict:
    """The warps a CTA, and where a row is one step of 9 warps the weight rows a CTA
    (Q8_ONE_STEP_ROWS_PER_CTA, facts.py), where no schedule says. Warps: of 8 and 9, the one whose
    last step over a row's quarter blocks (a thread each) leaves the fewest threads idle; 8 where both
    fill it. A 2304-wide row is 288 quarters: 9 warps take it in one step, where 8 take two and the
    second keeps 32 threads of 256 busy. Measured on the H200 (bench/q8.py's floor set, 2026-11-30:
    one row against 2304-wide rows of 2.5 to 401 MB, each fitted to t = launch + bytes / rate):
    8 warps x 2 rows a CTA 2.14 us + 3.10 TB/s (75% of the copy bandwidth), 9 x 2 2.06 us + 3.57 TB/s
    (Kimi Linear's lm head 131.0 -> 114.1 us), 9 x 4 2.06 us + 4.17 TB/s (97.7 us); again with 4 rows a
    CTA the default: 9 x 4 1.99 us + 4.24 TB/s, the lm head 96.4 us against 112.3 at 9 x 2."""
    units = width // QUARTER

    def idle(warps: int) -> int:
        threads = WARP * warps
        return -(-units // threads) * threads - units

    warps = 9 if idle(9) < idle(GEMV_WARPS) else GEMV_WARPS
    chosen = {"warps": warps}
    per_cta = Q8_ONE_STEP_ROWS_PER_CTA
    if (per_cta is not None and warps == 9 and units <= WARP * warps
            and per_cta * sources * (1 << max(0, rows - 1).bit_length()) <= WARP):
        chosen["rows_per_cta"] = per_cta
    return chosen


class Q8Products:
    """What q8_gemv and q8_gated_gemv add to their bf16 kernels (mixed in before them): q8_0
    weight rows, the quantized activation of `words` int8 words a value, CUDA cores only (dp4a).
    Limits beyond RowProducts': whole 32-value blocks; no per-head read and no pitched
    activation (a quantize launch writes whole rows)."""

    def __init__(self, *args, words: int = 1, schedule=None, **kwargs):
        width = args[1]
        problems = quantized_problems(width, words)
        if kwargs.get("per_head") is not None:
            problems.append("takes no per-head read (the quantized form's parts are read through a copy)")
        if problems:
            raise ValueError(f"{self.name} " + "; ".join(problems))
        schedule = RowSchedule.of(schedule or {})
        if schedule.tensor_cores:
            raise ValueError(f"{self.name} multiplies on CUDA cores (dp4a): schedule tensor_cores must be false")
        if schedule.preload:
            raise ValueError(f"{self.name} reads its q8_0 blocks from global memory: schedule preload must be false")
        if schedule.warps is None:
            default = q8_default_schedule(args[0], width, self.sources)
            schedule = schedule.updated({k: v for k, v in default.items() if getattr(schedule, k) is None})
        self.words = words
        self.blocks = width // BLOCK  # q8_0 blocks a weight row
        self.row_bytes = self.blocks * Q8_0_BLOCK_BYTES
        super().__init__(*args, schedule=schedule.updated({"tensor_cores": False}), **kwargs)
        self.x_pitch_bytes = quantized_pitch(width, words)

    def x_param(self) -> TensorParam:
        return TensorParam("x", (self.rows, self.x_pitch_bytes), "int8")

    def weight_param(self, name: str, rows: int) -> TensorParam:
        return TensorParam(name, (rows, self.row_bytes), "uint8")

    @cute.jit
    def shift_of(self, row: Int32, unit: Int32):
        """Bits a quarter block's values sit past its first aligned word: 16 where its byte offset
        (row * 34 blocks + 34 * block + 2 + 8 * quarter) is 2 mod 4, else 0."""
        return Uint32(((row * self.blocks + unit // 4 + 1) & 1) * 16)

    @cute.jit
    def load_vectors(self, weights, first: Int32, thread: Int32):
        """Issue every weight load of this thread's quarter blocks: [4 words, source * rows_per_cta
        * steps]: the two aligned words over its values, the two bytes after them (or 0 where the
        values are aligned), and the block's fp16 scale."""
        R, S, threads = self.rows_per_cta, self.steps, 32 * self.warps
        units: cutlass.Constexpr = self.width // QUARTER
        held = cute.make_rmem_tensor((4, self.sources * R * S), Uint32)
        held.fill(0)
        for src in cutlass.range_constexpr(self.sources):
            for r in cutlass.range_constexpr(R):
                # rows past the end (the last CTA of an uneven split) re-read the last row
                row = cutlass.min(first + r, self.outputs - 1)
                for s in cutlass.range_constexpr(S):
                    unit = thread + s * threads
                    slot = (src * R + r) * S + s
                    if cutlass.const_expr((s + 1) * threads <= units):
                        self.load_quarter(weights[src], held, slot, row, unit)
                    else:  # the last step may run past the row
                        if unit < units:  # noqa: SIM102
                            self.load_quarter(weights[src], held, slot, row, unit)
        return held

    @cute.jit
    def load_quarter(self, weights, held, slot: cutlass.Constexpr, row: Int32, unit: Int32):
        block = unit // 4
        start = block * Q8_0_BLOCK_BYTES + 2 + QUARTER * (unit % 4)  # the quarter's first value
        shift = self.shift_of(row, unit)
        aligned = start - shift // 8  # the word boundary at or below it (rows start 16-byte aligned)
        held[0, slot] = load_weight_word(at(weights, row, aligned))
        held[1, slot] = load_weight_word(at(weights, row, aligned + 4))
        # the two bytes past the words only where the values are off by two: never past the buffer
        held[2, slot] = load_weight_half(at(weights, row, aligned + 8), shift != Uint32(0))
        held[3, slot] = load_weight_half(at(weights, row, block * Q8_0_BLOCK_BYTES))

    @cute.jit
    def accumulate(self, x, held, first: Int32, thread: Int32, normed=None):
        """Dot every held quarter block with the activation rows' quarters: [values] fp32 partial
        sums, index (source * rows_per_cta + r) * rows + b. (`normed`: the bf16 GEMV's norm
        prologue, which a quantized activation never takes.)"""
        S, threads = self.steps, 32 * self.warps
        units: cutlass.Constexpr = self.width // QUARTER
        sums = cute.make_rmem_tensor(self.values, Float32)
        sums.fill(0.0)
        for s in cutlass.range_constexpr(S):
            unit = thread + s * threads
            if cutlass.const_expr((s + 1) * threads <= units):
                self.accumulate_quarter(x, held, sums, first, unit, s)
            else:
                if unit < units:  # noqa: SIM102
                    self.accumulate_quarter(x, held, sums, first, unit, s)
        return sums

    @cute.jit
    def accumulate_quarter(self, x, held, sums, first: Int32, unit: Int32, s: cutlass.Constexpr):
        R, S, B = self.rows_per_cta, self.steps, self.rows
        count: cutlass.Constexpr = self.sources * R
        values = []  # each held quarter's two value words and its scale as a float
        for i in cutlass.range_constexpr(count):
            slot = i * S + s
            row = cutlass.min(first + i % R, self.outputs - 1)
            shift = self.shift_of(row, unit)
            values.append((funnel_right(held[0, slot], held[1, slot], shift),
                           funnel_right(held[1, slot], held[2, slot], shift), half_to_float(held[3, slot])))
        scales: cutlass.Constexpr = self.words * self.width  # where a row's block scales start
        for b in cutlass.range_constexpr(B):
            high = load_activation_words(at(x, b, unit * QUARTER))
            scale = load_activation_f32(at(x, b, scales + 4 * (unit // 4)))
            low = high
            step = scale
            if cutlass.const_expr(self.words == 2):
                low = load_activation_words(at(x, b, self.width + unit * QUARTER))
                step = rounded("div", scale, Float32(254.0))  # the residual word's scale
            for i in cutlass.range_constexpr(count):
                v0, v1, d = values[i]
                dot = Float32(dp4a(v1, high[1], dp4a(v0, high[0], Int32(0))))
                value = scale * dot
                if cutlass.const_expr(self.words == 2):
                    value += step * Float32(dp4a(v1, low[1], dp4a(v0, low[0], Int32(0))))
                sums[i * B + b] += d * value


class Q8Gemv(Q8Products, Gemv):
    """y[b, n] = sum_k x[b, k] w[n, k] over the concatenated parts' rows n, w in q8_0 blocks, x in
    the quantized form of ``words`` words. ``schedule``: see `RowProducts` (CUDA cores only);
    ``quantize``: y quantized in the epilogue (`RowProducts.quantize_epilogue`)."""

    name = "q8_gemv"

    def __init__(self, rows: int, width: int, parts, *, words: int = 1, schedule=None, quantize: int = 0):
        super().__init__(rows, width, parts, words=words, schedule=schedule, quantize=quantize)

    def params(self) -> list[TensorParam]:
        return [self.x_param(), self.weight_param("w", self.outputs), *self.out_params("y")]


class Q8GatedGemv(Q8Products, GatedGemv):
    """out[b, j] = silu(x[b] . gate[j]) * (x[b] . up[j]), gate and up in q8_0 blocks, x in the
    quantized form of ``words`` words; ``quantize``: out quantized in the epilogue (`GatedGemv`)."""

    name = "q8_gated_gemv"

    def __init__(self, rows: int, width: int, hidden: int, *, words: int = 1, schedule=None, quantize: int = 0):
        super().__init__(rows, width, hidden, words=words, schedule=schedule, quantize=quantize)

    def params(self) -> list[TensorParam]:
        return [self.x_param(), self.weight_param("gate", self.hidden), self.weight_param("up", self.hidden),
                *self.out_params("out")]
