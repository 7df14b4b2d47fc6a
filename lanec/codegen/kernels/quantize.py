"""`quantize`: bf16 activation rows -> the quantized form a product by q8_0 rows reads, exactly as
the interpreter's `ops.quantize` computes it: per 32-value block s = max|x| / 127, q1 = rint(x / s)
(ties to even); two words add q2 = clip(rint((x - q1 s) / (s / 254)), -127, 127); an all-zero
block stays zero. Every step is one fp32 operation rounded to nearest (explicit `div.rn`, `mul.rn`,
`sub.rn`: never fused into an FMA), so the int8 words and the scale are bit for bit numpy's. A residual
of exactly zero (a block's peak's, about one value in 30 of bf16 rows) is not divided: div.rn's range
check sends a zero dividend down its slow path, a call each lane with one takes in turn (measured on the
H200: 2.2-2.5 us a two-word quantize with those divisions, 1.5-1.6 us without).

A row of the result (`quantized_pitch` bytes, lanec/codegen/facts.py): the int8 high words, then
(two words) the residual words, then one fp32 scale a block (the residual's scale is s / 254,
which the product recomputes). Four lanes take a block, 8 values (one 16-byte vector) each, and
find its max with two butterfly steps: a row's blocks are quantized side by side, a CTA of at most
128 lanes a row part, so even a one-row step spreads over many SMs."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint32

from lanec.codegen.facts import VECTOR, quantized_pitch, quantized_problems, row_pitch
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    at,
    float_bits,
    load_activation_bf16x8,
    round_to_int,
    rounded,
    store_global_byte,
    store_global_words,
    unpack_bf16,
    warp_reduce,
)

MAX_THREADS = 128  # lanes a CTA: 32 blocks of a row
LANES_A_BLOCK = 4  # 32 values / 8 a lane
WARP_LANES = 32  # a block a warp, a value a lane (`store_warp_quantized`)


def int8_word(values):
    """Four integers in -127..127 as one word of signed bytes, the first value lowest."""
    word = Uint32(0)
    for e in range(4):
        word = word | ((Uint32(values[e]) & Uint32(0xFF)) << Uint32(8 * e))
    return word


def int8_words(values) -> tuple:
    """Eight integers in -127..127 as two words of signed bytes, the first value lowest."""
    return tuple(int8_word(values[4 * half:4 * half + 4]) for half in range(2))


def clamp_int8(value):
    return cutlass.max(cutlass.min(value, Int32(127)), Int32(-127))


def quantized_lane(values, words: int):
    """One lane's 8 consecutive fp32 values of a 32-value block in the quantized form, as
    ops.quantize computes them: ([high words (2 x 4 int8), then (two words) the residual's], the
    block's fp32 scale). The block's four lanes (consecutive lanes of one warp) call it together,
    every lane of the warp (their peak meets by shuffles; a lane past the row gives zeros)."""
    planes, scale = quantized_values(values, words, LANES_A_BLOCK)
    return [int8_words(plane) for plane in planes], scale


def quantized_values(values, words: int, lanes: int):
    """This lane's fp32 `values` of a 32-value block spread over `lanes` consecutive lanes of one
    warp (32 / lanes values each), as ops.quantize computes them: ([the high int8 values, then (two
    words) the residual's], the block's fp32 scale). Every lane of the warp calls it together (the
    block's peak meets by shuffles; a lane past the row gives zeros)."""
    peak = Float32(0.0)
    for v in values:
        peak = cutlass.max(peak, cutlass.max(v, -v))
    peak = warp_reduce(peak, cutlass.max, width=lanes)
    # max(+0, -0) may be -0 on the GPU: an all-zero block's scale is stored as numpy's +0
    scale = cutlass.select_(peak > Float32(0.0), rounded("div", peak, Float32(127.0)), Float32(0.0))
    safe = cutlass.select_(scale > Float32(0.0), scale, Float32(1.0))  # an all-zero block stays zero
    high = [clamp_int8(round_to_int(rounded("div", v, safe))) for v in values]
    planes = [high]
    if words == 2:
        step = rounded("div", safe, Float32(254.0))
        residual = []
        for v, h in zip(values, high, strict=True):
            rest = rounded("sub", v, rounded("mul", Float32(h), scale))
            # a remainder of zero (a block's peak's, about one value in 30) is divided as step / step and
            # its word taken as 0: div.rn's check sends a zero dividend down its slow path
            nonzero = rest != Float32(0.0)
            quotient = round_to_int(rounded("div", cutlass.select_(nonzero, rest, step), step))
            residual.append(cutlass.select_(nonzero, clamp_int8(quotient), Int32(0)))
        planes.append(residual)
    return planes, scale


@cute.jit
def store_warp_quantized(q, row, column, width: cutlass.Constexpr, words: cutlass.Constexpr, value):
    """A warp's 32 consecutive fp32 values of row `row` (lane l's at `column`, the block starting at a
    multiple of 32) into the quantized form `q` of rows of `width` values, as ops.quantize computes
    them: the block's peak by a whole-warp butterfly (every lane calls it), one byte a lane and word,
    and the block's scale stored by the lane at its first column."""
    planes, scale = quantized_values([value], words, WARP_LANES)
    for plane in cutlass.range_constexpr(words):
        store_global_byte(at(q, row, plane * width + column), planes[plane][0])
    if column % WARP_LANES == 0:
        store_global_words(at(q, row, words * width + 4 * (column // WARP_LANES)), float_bits(scale))


def store_quantized(q, row, unit, width: int, packed) -> None:
    """A lane's words (`quantized_lane`'s) for values [unit x 8, unit x 8 + 8) of row `row` of the
    quantized form `q` of rows of `width` values; the block's scale goes to `scale_at`."""
    for plane, words in enumerate(packed):
        store_global_words(at(q, row, plane * width + unit * VECTOR), words)


def scale_at(q, row, unit, width: int, words: int):
    """Where the scale of the block holding vector `unit` lies in row `row` (stored by one lane
    of the block's four: `lane % LANES_A_BLOCK == 0`)."""
    return at(q, row, words * width + 4 * (unit // LANES_A_BLOCK))


class Quantize:
    """q[rows, pitch] = the quantized form of x[rows, width] in ``words`` int8 words a value (see
    the module's docstring for the row's layout). ``x_pitch``: x's rows are parts of wider rows,
    read in place. Params: x, q."""

    name = "quantize"

    def __init__(self, rows: int, width: int, words: int, *, x_pitch: int | None = None):
        problems = quantized_problems(width, words)
        if rows < 1:
            problems.append(f"needs at least one row; got {rows}")
        if x_pitch is not None:
            problems += filter(None, [row_pitch("x pitch", x_pitch, width)])
        if problems:
            raise ValueError("quantize " + "; ".join(problems))
        self.rows, self.width, self.words, self.x_pitch = rows, width, words, x_pitch
        self.units = width // VECTOR  # 16-byte vectors of a row: one a lane
        self.threads = min(MAX_THREADS, -(-self.units // 32) * 32)
        self.pitch = quantized_pitch(width, words)

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.width), "bfloat16", (self.x_pitch or self.width, 1)),
                TensorParam("q", (self.rows, self.pitch), "int8", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(-(-self.units // self.threads), self.rows, 1), block=(self.threads, 1, 1))

    @cute.jit
    def __call__(self, *, x: cute.Tensor, q: cute.Tensor):
        launch(self, x, q)

    @cute.kernel
    def kernel(self, x: cute.Tensor, q: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        part, row, _ = cute.arch.block_idx()
        lane = part * self.threads + thread
        # lanes past the row redo its last vector: every lane of a block's four takes the shuffles
        unit = cutlass.min(lane, self.units - 1)
        cute.arch.griddepcontrol_wait()  # x is the predecessor's output
        packed = load_activation_bf16x8(at(x, row, unit * VECTOR))
        release_dependents(self)
        values = []
        for word in packed:
            low, high = unpack_bf16(word)
            values += [low, high]
        words, scale = quantized_lane(values, self.words)
        if lane < self.units:
            store_quantized(q, row, unit, self.width, words)
            if lane % LANES_A_BLOCK == 0:
                store_global_words(scale_at(q, row, unit, self.width, self.words), float_bits(scale))
