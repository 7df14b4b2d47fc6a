"""`head_norm`: a norm of each head of a row on its own, bf16 in and out, fp32 arithmetic. One kernel
serves three form ops: `l2norm` (x rsqrt(sum(x^2) + eps)), `head_norm` (Qwen3's q_norm / k_norm:
x rsqrt(mean(x^2) + eps) w, w one head's size) and `norm_gated` (the same times act(gate),
sigmoid or swish). A warp is one head of one row, its values a few a lane (lane l holds values
l, l + 32, ...: each load of the warp is one contiguous run), the sum a butterfly.

With `quantize` (1 or 2 words: fuse-quant put the quantize in the norm's epilogue, where the head
is whole 32-value blocks) y leaves in the quantized form a product by q8_0 rows reads
(lanec/codegen/kernels/quantize.py's layout), quantized from its fp32 values as ops.quantize does:
a block is the warp's i-th values, so its peak meets by a whole-warp butterfly and each lane stores
its byte of every plane; lane 0 stores the block's scale. No bf16 y is written."""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32

from lanec.codegen.facts import WARP, HeadNormSpec, quantized_pitch
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    sigmoid,
    warp_reduce,
    zeros,
)
from lanec.codegen.kernels.quantize import store_warp_quantized

WARPS = 4  # heads a CTA


class HeadNorm:
    """Params: x [rows, heads * size] bf16 (rows x_pitch apart), (gate [rows, heads * size] bf16,
    rows gate_pitch apart, with `gate`), (w [size] bf16 with `weight`), y [rows, heads * size] bf16
    (int8 rows of the quantized form with `quantize` words). `mean`: divide the sum of squares by
    the head size (an RMS norm); otherwise an L2 norm."""

    name = "head_norm"

    def __init__(self, rows: int, heads: int, size: int, eps: float, mean: bool = True, weight: bool = True,
                 gate: str | None = None, x_pitch=None, gate_pitch=None, quantize: int = 0):
        HeadNormSpec(rows, heads, size, eps, bool(mean), bool(weight), gate, x_pitch, gate_pitch, quantize).check()
        self.quantize = int(quantize)
        self.rows, self.heads, self.size, self.eps = rows, heads, size, float(eps)
        self.mean, self.weight, self.gate = bool(mean), bool(weight), gate
        self.width = heads * size
        self.x_pitch = self.width if x_pitch is None else int(x_pitch)
        self.gate_pitch = self.width if gate_pitch is None else int(gate_pitch)
        self.per_lane = -(-size // WARP)
        self.items = rows * heads  # (row, head) pairs, one a warp
        self.warps = min(WARPS, self.items)

    def params(self) -> list[TensorParam]:
        shape = (self.rows, self.width)
        params = [TensorParam("x", shape, "bfloat16", (self.x_pitch, 1))]
        if self.gate is not None:
            params.append(TensorParam("gate", shape, "bfloat16", (self.gate_pitch, 1)))
        if self.weight:
            params.append(TensorParam("w", (self.size,), "bfloat16"))
        if self.quantize:
            return [*params, TensorParam("y", (self.rows, quantized_pitch(self.width, self.quantize)), "int8",
                                         written=True)]
        return [*params, TensorParam("y", shape, "bfloat16", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(-(-self.items // self.warps), 1, 1), block=(WARP * self.warps, 1, 1))

    @cute.jit
    def __call__(self, *, x: cute.Tensor, gate: cute.Tensor = None, w: cute.Tensor = None, y: cute.Tensor):
        launch(self, x, gate, w, y)

    @cute.kernel
    def kernel(self, x: cute.Tensor, gate: cute.Tensor, w: cute.Tensor, y: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        N: cutlass.Constexpr = self.per_lane
        lane = thread % WARP
        item = block * self.warps + thread // WARP
        row, head = item // self.heads, item % self.heads
        busy = item < self.items
        scale = zeros(N, Float32)
        for i in cutlass.range_constexpr(N):  # the norm weights are ready at launch
            scale[i] = Float32(1.0)
            if cutlass.const_expr(self.weight):
                if lane + i * WARP < self.size:
                    scale[i] = w[lane + i * WARP].to(Float32)
        cute.arch.griddepcontrol_wait()  # x and the gate are predecessors' outputs
        values = zeros(N, Float32)
        gates = zeros(N, Float32)
        if busy:
            for i in cutlass.range_constexpr(N):
                if lane + i * WARP < self.size:
                    column = head * self.size + lane + i * WARP
                    values[i] = x[row, column].to(Float32)
                    if cutlass.const_expr(self.gate is not None):
                        gates[i] = gate[row, column].to(Float32)
        release_dependents(self)  # every input of this CTA is read
        squares = Float32(0.0)
        for i in cutlass.range_constexpr(N):
            squares += values[i] * values[i]
        squares = warp_reduce(squares, operator.add)
        if cutlass.const_expr(self.mean):
            squares = squares * Float32(1.0 / self.size)
        rstd = cute.math.rsqrt(squares + Float32(self.eps))
        if busy:
            for i in cutlass.range_constexpr(N):
                result = values[i] * rstd * scale[i]
                if cutlass.const_expr(self.gate == "sigmoid"):
                    result = result * sigmoid(gates[i])
                if cutlass.const_expr(self.gate == "swish"):
                    result = result * (gates[i] * sigmoid(gates[i]))
                column = head * self.size + lane + i * WARP
                if cutlass.const_expr(self.quantize):
                    # the head is whole blocks (the spec's): block i of the head is every lane's i-th value
                    store_warp_quantized(y, row, column, self.width, self.quantize, result)
                elif lane + i * WARP < self.size:
                    y[row, column] = result.to(BFloat16)
