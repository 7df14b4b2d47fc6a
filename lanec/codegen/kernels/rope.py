"""`rope`: rotary embedding of each head's `rotary` values from `offset` at the row's position, the
rest of the head copied; bf16 in and out, fp32 angles and products.

Pair i of a head, values (offset + i, offset + i + rotary/2) (rotate-half) or (offset + 2i,
offset + 2i + 1) (`interleaved`, DeepSeek's layout), turns by pos * inv_freq[i]. The inverse
frequencies are computed once, on the host, by the interpreter's own function
(`lanec.interp.ops.frequencies`, through `RopeSpec.frequencies`): theta^(-2i/rotary) correctly
rounded, or Llama 3.1's or YaRN's scaled frequencies; the kernel holds them as compile-time fp32
constants and picks a thread's by selects (no table in memory, no local memory), so the angle
pos * inv_freq[i] is the interpreter's bit for bit. YaRN's attention factor multiplies cos and
sin (fp32), as the interpreter does. sin and cos of the fp32 angle are about an ulp. A thread
turns one vector of a head's first half and the matching vector of its second half (rotate-half)
or one vector of whole pairs (interleaved), 16 bytes each where the head allows. A CTA holds one
row's heads (or a group of them)."""

from __future__ import annotations

import math

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Float64, Int32

from lanec.codegen.facts import VECTOR, WARP, RopeSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry

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
    [rows, heads * unit] bf16 (rows out_pitch apart). `scaling`: None, or the form's scaling as a
    dict (`kind` "llama3" or "yarn" and that kind's properties)."""

    name = "rope"

    def __init__(self, rows: int, heads: int, unit: int, rotary: int, theta: float, x_pitch=None,
                 out_pitch=None, offset: int = 0, interleaved: bool = False, scaling=None):
        spec = RopeSpec(rows, heads, unit, rotary, float(theta), x_pitch, out_pitch, int(offset), bool(interleaved),
                        None if scaling is None else dict(scaling))
        spec.check()
        self.rows, self.heads, self.unit, self.rotary, self.theta = rows, heads, unit, rotary, float(theta)
        self.offset, self.interleaved = int(offset), bool(interleaved)
        table, magnitude = spec.frequencies()
        self.inv_freq = tuple(float(f) for f in table)  # fp32 values, exact as Python floats
        self.magnitude = magnitude  # yarn's attention factor on cos and sin (1.0: none)
        self.width = heads * unit
        # x may be one part of a wider row (a product in parts' output, read in place)
        self.x_pitch = self.width if x_pitch is None else int(x_pitch)
        self.out_pitch = self.width if out_pitch is None else int(out_pitch)
        # the widest vector that tiles the turned values' place, its halves (rotate-half) or its
        # pairs (interleaved: both values of a pair in one vector), and the head (rows start 16-byte aligned)
        if self.interleaved:
            self.per_vector = next(n for n in (VECTOR, 4, 2) if rotary % n == 0 and unit % n == 0 and offset % n == 0)
            self.turns = rotary // self.per_vector  # vectors of whole pairs a head
            self.per_turn = self.per_vector // 2  # frequencies a turned vector takes
        else:
            half = rotary // 2
            self.per_vector = next(n for n in (VECTOR, 4, 2, 1)
                                   if half % n == 0 and unit % n == 0 and offset % n == 0)
            self.turns = half // self.per_vector  # rotated vector pairs a head
            self.per_turn = self.per_vector
        self.copies = (unit - rotary) // self.per_vector  # vectors a head copies unturned
        self.heads_per_cta = max(1, min(heads, MAX_THREADS // self.turns))
        self.threads = min(MAX_THREADS, WARP * -(-(self.heads_per_cta * self.turns) // WARP))
        self.turn_steps = -(-(self.heads_per_cta * self.turns) // self.threads)
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

    def frequency(self, turn, k: int):
        """inv_freq[turn * per_turn + k] for a thread's run-time `turn` (its vector's place among
        the head's turned vectors) and a compile-time `k`: a chain of selects over the head's
        turns, among compile-time constants (traced as plain Python)."""
        value = Float32(self.inv_freq[k])
        for t in range(1, self.turns):
            value = cutlass.select_(turn == t, Float32(self.inv_freq[t * self.per_turn + k]), value)
        return value

    def copied_vector(self, kept):
        """A head's `kept`-th copied vector's place in the head: the vectors before the turned
        values, then those after them (traced as plain Python)."""
        first, turned = self.offset // self.per_vector, self.rotary // self.per_vector
        if first == 0:
            return kept + turned
        if self.offset + self.rotary == self.unit:
            return kept
        return kept + cutlass.select_(kept >= first, Int32(turned), Int32(0))

    @cute.kernel
    def kernel(self, x: cute.Tensor, positions: cute.Tensor, out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        row, group, _ = cute.arch.block_idx()
        N: cutlass.Constexpr = self.per_vector
        partner: cutlass.Constexpr = self.rotary // 2 // N  # rotate-half: the high vector's distance
        first_turned: cutlass.Constexpr = self.offset // N
        vectors_a_head: cutlass.Constexpr = self.unit // N
        turn_items: cutlass.Constexpr = self.heads_per_cta * self.turns
        copy_items: cutlass.Constexpr = self.heads_per_cta * self.copies
        first_head = group * self.heads_per_cta
        x_tiles = cute.zipped_divide(x, (1, N))
        out_tiles = cute.zipped_divide(out, (1, N))
        # [low half, high half] of each turned pair of vectors (interleaved: the vector in low),
        # then the copied vectors
        low = cute.make_rmem_tensor((N, self.turn_steps), BFloat16)
        high = cute.make_rmem_tensor((N, self.turn_steps), BFloat16)
        kept = cute.make_rmem_tensor((N, max(1, self.copy_steps)), BFloat16)
        low.fill(0)
        high.fill(0)
        kept.fill(0)
        cute.arch.griddepcontrol_wait()  # x and the positions are predecessors' outputs
        for s in cutlass.range_constexpr(self.turn_steps):
            item = thread + s * self.threads
            head = first_head + item // self.turns
            if item < turn_items and head < self.heads:
                vector = head * vectors_a_head + first_turned + item % self.turns
                cute.autovec_copy(x_tiles[None, (row, vector)], low[None, s])
                if cutlass.const_expr(not self.interleaved):
                    cute.autovec_copy(x_tiles[None, (row, vector + partner)], high[None, s])
        for s in cutlass.range_constexpr(self.copy_steps):
            item = thread + s * self.threads
            head = first_head + item // self.copies
            if item < copy_items and head < self.heads:
                vector = head * vectors_a_head + self.copied_vector(item % self.copies)
                cute.autovec_copy(x_tiles[None, (row, vector)], kept[None, s])
        position = Float32(positions[row])
        release_dependents(self)  # every input of this CTA is read
        for s in cutlass.range_constexpr(self.copy_steps):
            item = thread + s * self.threads
            head = first_head + item // self.copies
            if item < copy_items and head < self.heads:
                vector = head * vectors_a_head + self.copied_vector(item % self.copies)
                cute.autovec_copy(kept[None, s], out_tiles[None, (row, vector)])
        for s in cutlass.range_constexpr(self.turn_steps):
            item = thread + s * self.threads
            head = first_head + item // self.turns
            if item < turn_items and head < self.heads:
                turn = item % self.turns
                vector = head * vectors_a_head + first_turned + turn
                result = cute.make_rmem_tensor(N, BFloat16)
                if cutlass.const_expr(self.interleaved):
                    values = low[None, s].load().to(Float32)
                    turned = cute.make_rmem_tensor(N, Float32)
                    for j in cutlass.range_constexpr(N // 2):
                        sin, cos = sin_cos(position * self.frequency(turn, j))
                        if cutlass.const_expr(self.magnitude != 1.0):
                            sin, cos = sin * Float32(self.magnitude), cos * Float32(self.magnitude)
                        turned[2 * j] = values[2 * j] * cos - values[2 * j + 1] * sin
                        turned[2 * j + 1] = values[2 * j + 1] * cos + values[2 * j] * sin
                    result.store(turned.load().to(BFloat16))
                    cute.autovec_copy(result, out_tiles[None, (row, vector)])
                else:
                    lo = low[None, s].load().to(Float32)
                    hi = high[None, s].load().to(Float32)
                    turned_low = cute.make_rmem_tensor(N, Float32)
                    turned_high = cute.make_rmem_tensor(N, Float32)
                    for e in cutlass.range_constexpr(N):
                        sin, cos = sin_cos(position * self.frequency(turn, e))
                        if cutlass.const_expr(self.magnitude != 1.0):
                            sin, cos = sin * Float32(self.magnitude), cos * Float32(self.magnitude)
                        turned_low[e] = lo[e] * cos - hi[e] * sin
                        turned_high[e] = hi[e] * cos + lo[e] * sin
                    result.store(turned_low.load().to(BFloat16))
                    cute.autovec_copy(result, out_tiles[None, (row, vector)])
                    result.store(turned_high.load().to(BFloat16))
                    cute.autovec_copy(result, out_tiles[None, (row, vector + partner)])
