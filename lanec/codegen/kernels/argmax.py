"""`argmax`: out[r] = the first index of row r's largest value (int32), over bf16 or fp32 rows of
``vocab`` values (the logits). One CTA a row, or a cluster of ``cluster`` CTAs a row (ARGMAX_CLUSTER):
each thread scans its 16-byte vectors in index order keeping the first maximum, then the warps and
the CTA combine (larger value, else smaller index); in a cluster each CTA scans every `cluster`-th
run of THREADS vectors, leaves its pair in its shared memory, and CTA 0 combines them over DSMEM."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from lanec.codegen.facts import ARGMAX_CLUSTER, SM_COUNT, VECTOR_BYTES, WARP, ArgmaxSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import float_bits, load_dsmem_f32, warp_reduce
from lanec.runtime.dtypes import cute_type, storage

THREADS = 1024
WARPS = THREADS // WARP
# Vectors each thread loads before comparing any: loads in flight per thread.
UNROLL = 4


def default_cluster(rows: int, vocab: int, dtype: str) -> int:
    """CTAs a row: the lane's ARGMAX_CLUSTER where one CTA would scan the row in more than one round of
    UNROLL vectors a thread (a cluster's barriers cost more than they save on a one-round row) and the
    rows' clusters fit the SMs in one wave (measured at one row; where a CTA a row already spreads over
    the chip, more CTAs only queue), else one."""
    vectors = vocab // (VECTOR_BYTES // storage(dtype).itemsize)
    return ARGMAX_CLUSTER if vectors > THREADS * UNROLL and rows * ARGMAX_CLUSTER <= SM_COUNT else 1


class Argmax:
    """Params: x [rows, vocab] (bfloat16 or float32), out [rows] int32. `cluster`: CTAs a row (None:
    `default_cluster`)."""

    name = "argmax"

    def __init__(self, rows: int, vocab: int, dtype: str = "bfloat16", cluster: int | None = None):
        cluster = default_cluster(rows, vocab, dtype) if cluster is None else int(cluster)
        ArgmaxSpec(rows, vocab, dtype, cluster).check()
        self.dtype, vector = dtype, VECTOR_BYTES // storage(dtype).itemsize  # values in 16 bytes
        self.rows, self.vocab, self.vector, self.cluster = rows, vocab, vector, cluster
        self.groups = -(-(vocab // vector) // (THREADS * UNROLL * cluster))

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.vocab), self.dtype),
                TensorParam("out", (self.rows,), "int32", written=True)]

    def launch(self) -> LaunchShape:
        if self.cluster == 1:
            return LaunchShape(grid=(self.rows, 1, 1), block=(THREADS, 1, 1), shared_bytes=8 * WARPS)
        return LaunchShape(grid=(self.cluster, self.rows, 1), block=(THREADS, 1, 1), cluster=(self.cluster, 1, 1),
                           shared_bytes=8 * WARPS)

    @cute.jit
    def __call__(self, *, x: cute.Tensor, out: cute.Tensor):
        launch(self, x, out)

    @cute.kernel
    def kernel(self, x: cute.Tensor, out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        rank, row, _ = cute.arch.block_idx()
        if cutlass.const_expr(self.cluster == 1):
            row, rank = rank, Int32(0)
        lane, warp = thread % 32, thread // 32
        element, V = cute_type(self.dtype), self.vector
        vectors: cutlass.Constexpr = self.vocab // V
        C: cutlass.Constexpr = self.cluster
        tiles = cute.zipped_divide(x, (1, V))
        best, where = -Float32.inf, Int32(self.vocab)
        cute.arch.griddepcontrol_wait()  # the logits are a predecessor's output
        for group in cutlass.range(self.groups):
            loaded = cute.make_rmem_tensor((V, UNROLL), element)
            for u in cutlass.range_constexpr(UNROLL):
                vector = ((group * UNROLL + u) * C + rank) * THREADS + thread
                if vector < vectors:
                    cute.autovec_copy(tiles[None, (row, vector)], loaded[None, u])
            for u in cutlass.range_constexpr(UNROLL):
                vector = ((group * UNROLL + u) * C + rank) * THREADS + thread
                if vector < vectors:
                    for e in cutlass.range_constexpr(V):
                        value = Float32(loaded[e, u])
                        # strict: the first maximum of this thread's run stays (and the first
                        # value is always taken, so an all -inf row still names index 0)
                        if (value > best) | (where == self.vocab):
                            best, where = value, vector * V + e
        release_dependents(self)
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
                if cutlass.const_expr(C == 1):
                    out[row] = where
                else:  # the CTA's pair, for CTA 0 to read
                    values[0], indices[0] = best, where
        if cutlass.const_expr(C > 1):
            self.meet(values, indices, out, row, rank, warp, lane)

    @cute.jit
    def meet(self, values, indices, out, row, rank, warp, lane):
        """A cluster's CTAs' pairs (slot 0 of each one's shared memory) combined by CTA 0's first warp, lane c
        reading CTA c's; no CTA leaves before CTA 0 has read it."""
        cute.arch.cluster_arrive()  # release: every CTA's pair is in its shared memory
        cute.arch.cluster_wait()
        if (rank == 0) & (warp == 0):
            best, where = -Float32.inf, Int32(self.vocab)
            if lane < self.cluster:
                best = load_dsmem_f32(values.iterator, lane)
                where = float_bits(load_dsmem_f32(indices.iterator, lane))
            best, where = warp_reduce((best, where), first_largest)
            if lane == 0:
                out[row] = where
        cute.arch.cluster_arrive()  # no CTA leaves while CTA 0 still reads its pair
        cute.arch.cluster_wait()


def first_largest(mine, other):
    """Of two (value, index) pairs the larger value, and the smaller index among equals."""
    (best, where), (other_best, other_where) = mine, other
    take = (other_best > best) | ((other_best == best) & (other_where < where))
    return cutlass.select_(take, other_best, best), cutlass.select_(take, other_where, where)
