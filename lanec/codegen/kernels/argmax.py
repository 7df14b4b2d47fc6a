"""`argmax`: out[r] = the first index of row r's largest value (int32), over bf16 or fp32 rows of
``vocab`` values (the logits). One CTA a row: each thread scans its 16-byte vectors in index
order keeping the first maximum, then the warps and the CTA combine (larger value, else smaller
index)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from lanec.codegen.kernels.base import LaunchShape, TensorParam

THREADS = 1024
WARPS = THREADS // 32
# Vectors each thread loads before comparing any: loads in flight per thread.
UNROLL = 4
DTYPES = {"bfloat16": (BFloat16, 8), "float32": (Float32, 4)}  # values in 16 bytes


class Argmax:
    """Params: x [rows, vocab] (bfloat16 or float32), out [rows] int32."""

    name = "argmax"

    def __init__(self, rows: int, vocab: int, dtype: str = "bfloat16"):
        if dtype not in DTYPES:
            raise ValueError(f"argmax reads {' or '.join(DTYPES)} logits; got {dtype!r}")
        self.dtype, vector = dtype, DTYPES[dtype][1]
        if rows < 1:
            raise ValueError(f"argmax needs at least one row; got {rows}")
        if vocab < vector or vocab % vector:
            raise ValueError(f"argmax vocab {vocab} must be a positive multiple of {vector}: {dtype} rows "
                             "are read as 16-byte vectors")
        self.rows, self.vocab, self.vector = rows, vocab, vector
        self.groups = -(-(vocab // vector) // (THREADS * UNROLL))

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.vocab), self.dtype),
                TensorParam("out", (self.rows,), "int32", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.rows, 1, 1), block=(THREADS, 1, 1), shared_bytes=8 * WARPS)

    @cute.jit
    def __call__(self, x: cute.Tensor, out: cute.Tensor):
        shape = self.launch()
        self.kernel(x, out).launch(grid=shape.grid, block=shape.block, smem=shape.shared_bytes)

    @cute.kernel
    def kernel(self, x: cute.Tensor, out: cute.Tensor):
        thread, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        lane, warp = thread % 32, thread // 32
        element, V = DTYPES[self.dtype][0], self.vector
        vectors: cutlass.Constexpr = self.vocab // V
        tiles = cute.zipped_divide(x, (1, V))
        best, where = -Float32.inf, Int32(self.vocab)
        cute.arch.griddepcontrol_wait()  # the logits are a predecessor's output
        for group in cutlass.range(self.groups):
            loaded = cute.make_rmem_tensor((V, UNROLL), element)
            for u in cutlass.range_constexpr(UNROLL):
                vector = (group * UNROLL + u) * THREADS + thread
                if vector < vectors:
                    cute.autovec_copy(tiles[None, (row, vector)], loaded[None, u])
            for u in cutlass.range_constexpr(UNROLL):
                vector = (group * UNROLL + u) * THREADS + thread
                if vector < vectors:
                    for e in cutlass.range_constexpr(V):
                        value = Float32(loaded[e, u])
                        # strict: the first maximum of this thread's run stays (and the first
                        # value is always taken, so an all -inf row still names index 0)
                        if (value > best) | (where == self.vocab):
                            best, where = value, vector * V + e
        cute.arch.griddepcontrol_launch_dependents()
        best, where = warp_argmax(best, where)
        smem = cutlass.memory.SmemAllocator()
        values = smem.allocate_tensor(Float32, cute.make_layout(WARPS), 16)
        indices = smem.allocate_tensor(Int32, cute.make_layout(WARPS), 16)
        if lane == 0:
            values[warp], indices[warp] = best, where
        cute.arch.sync_threads()
        if warp == 0:
            best, where = warp_argmax(values[lane], indices[lane])
            if lane == 0:
                out[row] = where


@cute.jit
def warp_argmax(best: Float32, where: Int32):
    """The warp's largest value and its smallest index among equals, in every lane."""
    for level in cutlass.range_constexpr(5):
        other = cute.arch.shuffle_sync_bfly(best, 16 >> level)
        other_where = cute.arch.shuffle_sync_bfly(where, 16 >> level)
        take = (other > best) | ((other == best) & (other_where < where))
        best = cutlass.select_(take, other, best)
        where = cutlass.select_(take, other_where, where)
    return best, where
