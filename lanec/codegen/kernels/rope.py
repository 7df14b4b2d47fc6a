"""`rope`: rotary embedding (rotate-half) of each head's first `rotary` values at the row's
position, the rest of the head copied; bf16 in and out, fp32 angles and products.

Pair i of a head, values (i, i + rotary/2), turns by pos * inv_freq[i], inv_freq[i] =
1 / theta^(2i/rotary) as the interpreter writes it, the power a correctly rounded fp32 (computed
in fp64: positions reach tens of thousands, so an ulp of inv_freq moves the angle by a few
thousandths of a radian), then sin and cos of the fp32 angle to about an ulp. A thread takes one
vector of a head's first half and the matching vector of its second half (16 bytes each where the
head's halves allow), so both values of every pair are its own. A CTA holds one row's heads (or a
group of them)."""

from __future__ import annotations

import math

import cutlass
import cutlass.cute as cute
import numpy
from cutlass import BFloat16, Float32, Float64, Int32

from lanec.codegen.facts import VECTOR, WARP, RopeSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch

MAX_THREADS = 256
# pi/2 as two fp64 parts (the second the first's remainder): an fp32 angle of tens of thousands
# of radians reduces to [-pi/4, pi/4] with an fp64 error far below an fp32 ulp of the result
HALF_PI = math.pi / 2
HALF_PI_REST = 6.123233995736766e-17
# Cephes' sinf / cosf polynomials on [-pi/4, pi/4] (about an ulp of fp32)
SIN = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
COS = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


@cute.jit
def sin_cos(angle: Float32):
    """sin and cos of an fp32 angle, to about an ulp at any angle a position reaches: the angle
    reduced by pi/2 in fp64 (no local-memory Payne-Hanek path), fp32 polynomials, the quadrant
    applied last."""
    wide = Float64(angle)
    quarter = cute.math.roundeven(wide * Float64(2.0 / math.pi))
    rest = cute.math.fma(-quarter, Float64(HALF_PI), wide)
    r = Float32(cute.math.fma(-quarter, Float64(HALF_PI_REST), rest))
    z = r * r
    sin = ((Float32(SIN[0]) * z + Float32(SIN[1])) * z + Float32(SIN[2])) * z * r + r
    cos = ((Float32(COS[0]) * z + Float32(COS[1])) * z + Float32(COS[2])) * z * z - Float32(0.5) * z + Float32(1.0)
    turn = Int32(quarter) & 3
    swapped = (turn & 1) != 0
    sin_q = cutlass.select_(swapped, cos, sin)
    cos_q = cutlass.select_(swapped, sin, cos)
    sin_q = cutlass.select_(turn >= 2, -sin_q, sin_q)
    cos_q = cutlass.select_((turn == 1) | (turn == 2), -cos_q, cos_q)
    return sin_q, cos_q


class Rope:
    """Params: x [rows, heads * unit] bf16 (rows x_pitch apart), positions [rows] int32, out
    [rows, heads * unit] bf16 (rows out_pitch apart)."""

    name = "rope"

    def __init__(self, rows: int, heads: int, unit: int, rotary: int, theta: float, x_pitch=None,
                 out_pitch=None):
        RopeSpec(rows, heads, unit, rotary, theta, x_pitch, out_pitch).check()
        self.rows, self.heads, self.unit, self.rotary, self.theta = rows, heads, unit, rotary, float(theta)
        self.width = heads * unit
        # x may be one part of a wider row (a product in parts' output, read in place)
        self.x_pitch = self.width if x_pitch is None else int(x_pitch)
        self.out_pitch = self.width if out_pitch is None else int(out_pitch)
        half = rotary // 2
        # the widest vector that tiles both halves and the head (rows start 16-byte aligned)
        self.per_vector = next(n for n in (VECTOR, 4, 2, 1) if half % n == 0 and unit % n == 0)
        self.pairs = half // self.per_vector  # rotated vector pairs a head
        self.copies = (unit - rotary) // self.per_vector  # vectors a head copies unturned
        self.heads_per_cta = max(1, min(heads, MAX_THREADS // self.pairs))
        self.threads = min(MAX_THREADS, WARP * -(-(self.heads_per_cta * self.pairs) // WARP))
        self.turn_steps = -(-(self.heads_per_cta * self.pairs) // self.threads)
        self.copy_steps = -(-(self.heads_per_cta * self.copies) // self.threads)

    def params(self) -> list[TensorParam]:
        shape = (self.rows, self.width)
        return [TensorParam("x", shape, "bfloat16", (self.x_pitch, 1)),
                TensorParam("positions", (self.rows,), "int32"),
                TensorParam("out", shape, "bfloat16", (self.out_pitch, 1), written=True)]

    def launch(self) -> LaunchShape:
        groups = -(-self.heads // self.heads_per_cta)
        return LaunchShape(grid=(self.rows, groups, 1), block=(self.threads, 1, 1))

    @cute.jit
    def __call__(self, *, x: cute.Tensor, positions: cute.Tensor, out: cute.Tensor):
        launch(self, x, positions, out)

    @cute.jit
    def inverse_frequency(self, pair):
        """1 / theta^(2 pair / rotary) as the interpreter means it: the exponent an fp32 quotient,
        the power in fp64 rounded once to fp32 (a correctly rounded powf), an fp32 reciprocal."""
        exponent = Float32(2 * pair) / Float32(self.rotary)
        log2_theta: cutlass.Constexpr = math.log2(float(numpy.float32(self.theta)))
        power = Float32(cute.math.exp2(Float64(exponent) * Float64(log2_theta)))
        return Float32(1.0) / power

    @cute.kernel
    def kernel(self, x: cute.Tensor, positions: cute.Tensor, out: cute.Tensor):
        thread, _, _ = cute.arch.thread_idx()
        row, group, _ = cute.arch.block_idx()
        N: cutlass.Constexpr = self.per_vector
        half: cutlass.Constexpr = self.rotary // 2
        vectors_a_head: cutlass.Constexpr = self.unit // N
        turn_items: cutlass.Constexpr = self.heads_per_cta * self.pairs
        copy_items: cutlass.Constexpr = self.heads_per_cta * self.copies
        first_head = group * self.heads_per_cta
        x_tiles = cute.zipped_divide(x, (1, N))
        out_tiles = cute.zipped_divide(out, (1, N))
        # [low half, high half] of each turned pair of vectors, then the copied vectors
        low = cute.make_rmem_tensor((N, self.turn_steps), BFloat16)
        high = cute.make_rmem_tensor((N, self.turn_steps), BFloat16)
        kept = cute.make_rmem_tensor((N, max(1, self.copy_steps)), BFloat16)
        low.fill(0)
        high.fill(0)
        kept.fill(0)
        cute.arch.griddepcontrol_wait()  # x and the positions are predecessors' outputs
        for s in cutlass.range_constexpr(self.turn_steps):
            item = thread + s * self.threads
            head = first_head + item // self.pairs
            if item < turn_items and head < self.heads:
                vector = head * vectors_a_head + item % self.pairs
                cute.autovec_copy(x_tiles[None, (row, vector)], low[None, s])
                cute.autovec_copy(x_tiles[None, (row, vector + half // N)], high[None, s])
        for s in cutlass.range_constexpr(self.copy_steps):
            item = thread + s * self.threads
            head = first_head + item // self.copies
            if item < copy_items and head < self.heads:
                vector = head * vectors_a_head + self.rotary // N + item % self.copies
                cute.autovec_copy(x_tiles[None, (row, vector)], kept[None, s])
        position = Float32(positions[row])
        cute.arch.griddepcontrol_launch_dependents()  # every input of this CTA is read
        for s in cutlass.range_constexpr(self.copy_steps):
            item = thread + s * self.threads
            head = first_head + item // self.copies
            if item < copy_items and head < self.heads:
                vector = head * vectors_a_head + self.rotary // N + item % self.copies
                cute.autovec_copy(kept[None, s], out_tiles[None, (row, vector)])
        for s in cutlass.range_constexpr(self.turn_steps):
            item = thread + s * self.threads
            head = first_head + item // self.pairs
            if item < turn_items and head < self.heads:
                first_pair = (item % self.pairs) * N
                lo = low[None, s].load().to(Float32)
                hi = high[None, s].load().to(Float32)
                turned_low = cute.make_rmem_tensor(N, Float32)
                turned_high = cute.make_rmem_tensor(N, Float32)
                for e in cutlass.range_constexpr(N):
                    angle = position * self.inverse_frequency(first_pair + e)
                    sin, cos = sin_cos(angle)
                    turned_low[e] = lo[e] * cos - hi[e] * sin
                    turned_high[e] = hi[e] * cos + lo[e] * sin
                vector = head * vectors_a_head + item % self.pairs
                result = cute.make_rmem_tensor(N, BFloat16)
                result.store(turned_low.load().to(BFloat16))
                cute.autovec_copy(result, out_tiles[None, (row, vector)])
                result.store(turned_high.load().to(BFloat16))
                cute.autovec_copy(result, out_tiles[None, (row, vector + half // N)])
