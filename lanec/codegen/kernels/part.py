"""`part`: the copy of each head's part of a row, y[:, h * length + j] = x[:, h * unit + offset + j]
(Qwen3-Next's q, k, v and gate of one head side by side in the product's row, split apart). A
thread copies one vector of a head's part: 16 bytes where the part, the unit and the pitch are
whole 8-value vectors, narrower where they are not (a head's b and a, two values each)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16

from lanec.codegen.facts import WARP, PartSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry

THREADS = 256


class Part:
    """Params: x [rows, heads * unit] bf16 (rows x_pitch apart), y [rows, heads * length] bf16."""

    name = "part"

    def __init__(self, rows: int, heads: int, unit: int, offset: int, length: int, x_pitch=None):
        PartSpec(rows, heads, unit, offset, length, x_pitch).check()
        self.rows, self.heads, self.unit, self.offset, self.length = rows, heads, unit, offset, length
        self.x_pitch = heads * unit if x_pitch is None else int(x_pitch)
        self.per_vector = next(n for n in (8, 4, 2, 1)
                               if not (offset % n or length % n or unit % n or self.x_pitch % n))
        self.vectors = rows * heads * length // self.per_vector
        self.threads = min(THREADS, -(-self.vectors // WARP) * WARP)

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.heads * self.unit), "bfloat16", (self.x_pitch, 1)),
                TensorParam("y", (self.rows, self.heads * self.length), "bfloat16", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(-(-self.vectors // self.threads), 1, 1), block=(self.threads, 1, 1))

    @cute.jit
    def __call__(self, *, x: cute.Tensor, y: cute.Tensor):
        launch(self, x, y)

    @cute.kernel
    def kernel(self, x: cute.Tensor, y: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        N: cutlass.Constexpr = self.per_vector
        a_head: cutlass.Constexpr = self.length // N  # vectors of a head's part
        a_row: cutlass.Constexpr = self.heads * a_head
        item = block * self.threads + thread
        row, rest = item // a_row, item % a_row
        head, vector = rest // a_head, rest % a_head
        x_tiles = cute.zipped_divide(x, (1, N))
        y_tiles = cute.zipped_divide(y, (1, N))
        held = cute.make_rmem_tensor(N, BFloat16)
        held.fill(0)
        cute.arch.griddepcontrol_wait()  # x is a predecessor's output
        if item < self.vectors:
            source = (head * self.unit + self.offset) // N + vector
            cute.autovec_copy(x_tiles[None, (row, source)], held)
        release_dependents(self)
        if item < self.vectors:
            cute.autovec_copy(held, y_tiles[None, (row, rest)])
