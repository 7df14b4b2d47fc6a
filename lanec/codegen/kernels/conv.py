"""`conv`: the short causal convolution of a decode step with its state slots, SiLU, and (with
`norm_heads`) the per-head L2 norm in its epilogue (`conv_l2norm` of the held-back rules).

A thread is one channel of one request: it keeps the channel's taps of state and its weights in
registers (loaded before the PDL wait: weights are ready at launch, and a conv state is written
only by this conv of an earlier step), reads the request's tokens, and writes each token's output
and the shifted state back. With the L2 norm a CTA is one head of one request, a channel a thread,
and each token's sum of squares is reduced over the CTA."""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from lanec.codegen.facts import WARP, ConvSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import alloc, shared_bytes, sigmoid, warp_reduce, zeros

CHANNELS_A_CTA = 128  # without the norm: channels a CTA of one request


class Conv:
    """Params: x [rows, channels] bf16 (rows x_pitch apart), weight [channels, width] bf16, (bias
    [channels] bf16), slots [batch] or [batch, slot_columns] int32, (accepted [batch] int32 with
    tokens > 1), state [state_slots, state_channels, width - 2 + tokens] bf16 (channels from
    `offset`; read and written), y [rows, channels] bf16.

    As the interpreter: a request is padding where slots[b, accepted - 1] <= 0 (zero rows, no
    state written); its conv state is slots[b, 0]; token t's window is the last `width` values of
    taps ++ x_0..x_t with taps = state[c, a - 1 : a - 1 + width - 1]; the state becomes
    taps[1:] ++ x_0..x_{q-1}. `activation` silu or none; the L2 norm takes `norm_eps`."""

    name = "conv"

    def __init__(self, batch: int, tokens: int, channels: int, width: int, state_slots: int, state_channels: int,
                 offset: int = 0, activation: str = "silu", bias: bool = False, norm_heads: int | None = None,
                 norm_eps: float = 1e-6, slot_columns: int = 0, x_pitch=None):
        ConvSpec(batch, tokens, channels, width, state_slots, state_channels, offset, norm_heads, slot_columns,
                 x_pitch).check()
        if activation not in ("silu", "none"):
            raise ValueError(f"conv activation {activation!r}: silu or none")
        self.batch, self.tokens, self.channels, self.width = batch, tokens, channels, width
        self.state_slots, self.state_channels, self.offset = state_slots, state_channels, offset
        self.activation, self.bias, self.slot_columns = activation, bool(bias), slot_columns
        self.norm_heads, self.norm_eps = norm_heads, float(norm_eps)
        self.x_pitch = channels if x_pitch is None else int(x_pitch)
        self.taps = width - 2 + tokens  # state values a channel keeps
        if norm_heads is None:
            self.block = min(CHANNELS_A_CTA, -(-channels // WARP) * WARP)
        else:
            self.block = channels // norm_heads  # one head a CTA, a whole number of warps
        self.warps = self.block // WARP

    def params(self) -> list[TensorParam]:
        rows = self.batch * self.tokens
        params = [TensorParam("x", (rows, self.channels), "bfloat16", (self.x_pitch, 1)),
                  TensorParam("weight", (self.channels, self.width), "bfloat16")]
        if self.bias:
            params.append(TensorParam("bias", (self.channels,), "bfloat16"))
        slots = (self.batch,) if self.slot_columns == 0 else (self.batch, self.slot_columns)
        params.append(TensorParam("slots", slots, "int32"))
        if self.tokens > 1:
            params.append(TensorParam("accepted", (self.batch,), "int32"))
        params += [TensorParam("state", (self.state_slots, self.state_channels, self.taps), "bfloat16",
                               written=True),
                   TensorParam("y", (rows, self.channels), "bfloat16", written=True)]
        return params

    def shared_bytes(self) -> int:
        return shared_bytes([(4 * self.tokens * self.warps, 16)]) if self.norm_heads is not None else 0

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(-(-self.channels // self.block), self.batch, 1), block=(self.block, 1, 1),
                           shared_bytes=self.shared_bytes())

    def touched(self) -> dict[str, int]:
        """The conv state slots a step reads and writes: one a request."""
        return {"state": self.batch}

    @cute.jit
    def __call__(self, *, x: cute.Tensor, weight: cute.Tensor, bias: cute.Tensor = None, slots: cute.Tensor,
                 accepted: cute.Tensor = None, state: cute.Tensor, y: cute.Tensor):
        launch(self, x, weight, bias, slots, accepted, state, y)

    @cute.kernel
    def kernel(self, x: cute.Tensor, weight: cute.Tensor, bias: cute.Tensor, slots: cute.Tensor,
               accepted: cute.Tensor, state: cute.Tensor, y: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, request, _ = cute.arch.block_idx()
        T: cutlass.Constexpr = self.tokens
        W: cutlass.Constexpr = self.width
        channel = block * self.block + thread
        inside = channel < self.channels
        column = self.offset + channel
        # the slots: the read slot decides padding; the conv state is the request's first slot
        first = Int32(0)
        if cutlass.const_expr(T == 1):
            read = slots[request] if cutlass.const_expr(self.slot_columns == 0) else slots[request, 0]
            conv_slot = read
        else:
            first = accepted[request] - 1
            read = slots[request, first]
            conv_slot = slots[request, 0]
        active = read > 0
        sequence = zeros(W - 1 + T, Float32)  # taps ++ the tokens' inputs
        weights = zeros(W, Float32)
        shift = Float32(0.0)
        if inside:
            for i in cutlass.range_constexpr(W):
                weights[i] = weight[channel, i].to(Float32)
            if cutlass.const_expr(self.bias):
                shift = bias[channel].to(Float32)
            if active:
                for i in cutlass.range_constexpr(W - 1):
                    sequence[i] = state[conv_slot, column, first + i].to(Float32)
        cute.arch.griddepcontrol_wait()  # x is a predecessor's output
        if inside & active:
            for t in cutlass.range_constexpr(T):
                sequence[W - 1 + t] = x[request * T + t, channel].to(Float32)
        release_dependents(self)  # every input of this CTA is read
        outputs = zeros(T, Float32)
        for t in cutlass.range_constexpr(T):
            total = Float32(0.0)
            for i in cutlass.range_constexpr(W):
                total += weights[i] * sequence[t + i]
            total += shift
            if cutlass.const_expr(self.activation == "silu"):
                total = total * sigmoid(total)
            outputs[t] = total
        if cutlass.const_expr(self.norm_heads is not None):
            self.normed(outputs, thread)
        if inside:
            for t in cutlass.range_constexpr(T):
                value = outputs[t]
                if not active:
                    value = Float32(0.0)
                y[request * T + t, channel] = value.to(BFloat16)
            if active:
                for j in cutlass.range_constexpr(self.taps):
                    state[conv_slot, column, j] = sequence[1 + j].to(BFloat16)

    @cute.jit
    def normed(self, outputs, thread):
        """Each token's outputs times rsqrt(sum of the head's squares + eps), in place."""
        T: cutlass.Constexpr = self.tokens
        smem = cutlass.memory.SmemAllocator()
        sums = alloc(smem, Float32, (T, self.warps))
        lane, warp = thread % WARP, thread // WARP
        for t in cutlass.range_constexpr(T):
            square = warp_reduce(outputs[t] * outputs[t], operator.add)
            if lane == 0:
                sums[t, warp] = square
        cute.arch.sync_threads()
        for t in cutlass.range_constexpr(T):
            total = Float32(0.0)
            for w in cutlass.range_constexpr(self.warps):
                total += sums[t, w]
            outputs[t] = outputs[t] * cute.math.rsqrt(total + Float32(self.norm_eps))
