"""`kda_gate`: the decay of a delta rule from its raw gate, fp32 out. KDA's decays are a head's keys
(`size` values a head, `dt_bias` one a value); Gated DeltaNet's one a head (`size` 1, `dt_bias`
one a head). lower_bound: exp(lb sigmoid(exp(A_log[h]) (g + dt_bias))); softplus (Kimi Linear,
Qwen3-Next): exp(-exp(A_log[h]) softplus(g + dt_bias)). A thread a value."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32

from lanec.codegen.facts import WARP, KdaGateSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import sigmoid, softplus

THREADS = 256


class KdaGate:
    """Params: g [rows, heads * size] bf16 (rows g_pitch apart), a_log [heads] f32, dt_bias
    [heads * size] f32, decay [rows, heads * size] f32."""

    name = "kda_gate"

    def __init__(self, rows: int, heads: int, size: int, form: str = "softplus", lower_bound: float | None = None,
                 g_pitch=None):
        KdaGateSpec(rows, heads, size, form, lower_bound, g_pitch).check()
        self.rows, self.heads, self.size, self.form = rows, heads, size, form
        self.lower_bound = None if lower_bound is None else float(lower_bound)
        self.width = heads * size
        self.g_pitch = self.width if g_pitch is None else int(g_pitch)
        self.threads = min(THREADS, -(-rows * self.width // WARP) * WARP)

    def params(self) -> list[TensorParam]:
        shape = (self.rows, self.width)
        return [TensorParam("g", shape, "bfloat16", (self.g_pitch, 1)),
                TensorParam("a_log", (self.heads,), "float32"),
                TensorParam("dt_bias", (self.width,), "float32"),
                TensorParam("decay", shape, "float32", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(-(-self.rows * self.width // self.threads), 1, 1), block=(self.threads, 1, 1))

    @cute.jit
    def __call__(self, *, g: cute.Tensor, a_log: cute.Tensor, dt_bias: cute.Tensor, decay: cute.Tensor):
        launch(self, g, a_log, dt_bias, decay)

    @cute.kernel
    def kernel(self, g: cute.Tensor, a_log: cute.Tensor, dt_bias: cute.Tensor, decay: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        item = block * self.threads + thread
        row, column = item // self.width, item % self.width
        busy = item < self.rows * self.width
        rate, bias = Float32(0.0), Float32(0.0)
        if busy:  # weights: ready at launch
            rate = cute.math.exp(a_log[column // self.size])
            bias = dt_bias[column]
        cute.arch.griddepcontrol_wait()  # g is a predecessor's output
        raw = Float32(0.0)
        if busy:
            raw = g[row, column].to(Float32) + bias
        release_dependents(self)
        if busy:
            if cutlass.const_expr(self.form == "lower_bound"):
                decay[row, column] = cute.math.exp(Float32(self.lower_bound) * sigmoid(rate * raw))
            else:
                decay[row, column] = cute.math.exp(-rate * softplus(raw))
