"""`argmax`: out[r] = the first index of row r's largest value (int32), over bf16 or fp32 rows of
``vocab`` values (the logits). One CTA a row: each thread scans its 16-byte vectors in index
order keeping the first maximum, then the warps and the CTA combine (larger value, else smaller
index)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from lanec.codegen.facts import VECTOR_BYTES, WARP, ArgmaxSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch
from lanec.codegen.kernels.primitives import warp_reduce
from lanec.runtime.dtypes import cute_type, storage

THREADS = 1024
WARPS = THREADS // WARP
# Vectors each thread loads before comparing any: loads in flight per thread.
UNROLL = 4


class Argmax:
    """Params: x [rows, vocab] (bfloat16 or float32), out [rows] int32."""

    name = "argmax"

    def __init__(self, rows: int, vocab: int, dtype: str = "bfloat16"):
        ArgmaxSpec(rows, vocab, dtype).check()
        self.dtype, vector = dtype, VECTOR_BYTES // storage(dtype).itemsize  # values in 16 bytes
        self.rows, self.vocab, self.vector = rows, vocab, vector
        self.groups = -(-(vocab // vector) // (THREADS * UNROLL))

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.vocab), self.dtype),
                TensorParam("out", (self.rows,), "int32", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.rows, 1, 1), block=(THREADS, 1, 1), shared_bytes=8 * WARPS)

    @cute.jit
    def __call__(self, *, x: cute.Tensor, out: cute.Tensor):
        launch(self, x, out)

    @cute.kernel
    def kernel(self, x: cute.Tensor, out: cute.Tensor):
        thread, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        lane, warp = thread % 32, thread // 32
        element, V = cute_type(self.dtype), self.vector
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
        best, where = warp_reduce((best, where), first_largest)
        smem = cutlass.memory.SmemAllocator()
        values = smem.allocate_tensor(Float32, cute.make_layout(WARPS), 16)
        indices = smem.allocate_tensor(Int32, cute.make_layout(WARPS), 16)
        if lane == 0:
            values[warp], indices[warp] = best, where
        cute.arch.sync_threads()
        if warp == 0:
            best, where = warp_reduce((values[lane], indices[lane]), first_largest)
            if lane == 0:
                out[row] = where


def first_largest(mine, other):
    """Of two (value, index) pairs the larger value, and the smaller index among equals."""
    (best, where), (other_best, other_where) = mine, other
    take = (other_best > best) | ((other_best == best) & (other_where < where))
    return cutlass.select_(take, other_best, best), cutlass.select_(take, other_where, where)
