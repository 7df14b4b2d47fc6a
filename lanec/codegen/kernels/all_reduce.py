"""`all_reduce_oneshot`: a decode step's small all-reduce (sum) over N GPUs in one kernel, every
rank reading the others' values through CUDA IPC over NVLink; the protocol and the memory are
lanec/runtime/peer.py's (`PeerLayout`). `source` holds this rank's partial sums, `target` gets the
total (the same buffer: in place).

CTA c owns chunk c of the values (16-byte vectors, `ONESHOT_THREADS` threads a CTA): it stages
its chunk into this rank's workspace half (the step's parity), raises flag (c, this rank) at every
rank, waits for flag (c, p) of every rank p, and sums the chunk of every rank's half in rank order
(fp32, then rounded once): the same bits on every rank. The values come after `griddepcontrol.wait`
(a predecessor's output); nothing is read before it. A decode step's all-reduce is a few KB to a
few hundred: one round trip over NVLink instead of NCCL's ring protocol and its launch."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint64

from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch
from lanec.codegen.kernels.primitives import (
    acquire_flag_sys,
    bits_float,
    float_bits,
    join_u64,
    load_word_l2,
    load_words_l2,
    pack_bf16,
    release_flag_sys,
    store_word_at,
    store_words_at,
    unpack_bf16,
)
from lanec.runtime.peer import ONESHOT_THREADS, VECTOR_BYTES, PeerLayout, check_layout


class OneShotAllReduce:
    """Params: source [count] (bfloat16 or float32), target [count] (its dtype), peers
    [2 (ranks + 1)] int32 (`peer.table`: this rank, then each rank's region address as two words)."""

    name = "all_reduce_oneshot"

    def __init__(self, count: int, dtype: str, ranks: int):
        self.layout = PeerLayout(int(count), dtype, int(ranks))
        check_layout(self.layout)
        self.count, self.dtype, self.ranks = self.layout.count, dtype, self.layout.ranks
        self.ctas = self.layout.ctas
        self.per_thread = -(-self.layout.vectors // (self.ctas * ONESHOT_THREADS))

    def params(self) -> list[TensorParam]:
        return [TensorParam("source", (self.count,), self.dtype),
                TensorParam("target", (self.count,), self.dtype, written=True),
                TensorParam("peers", (2 * (self.ranks + 1),), "int32")]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.ctas, 1, 1), block=(ONESHOT_THREADS, 1, 1))

    @cute.jit
    def __call__(self, *, source: cute.Tensor, target: cute.Tensor, peers: cute.Tensor):
        launch(self, source, target, peers)

    @cute.kernel
    def kernel(self, source: cute.Tensor, target: cute.Tensor, peers: cute.Tensor):
        thread, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        layout = self.layout
        ranks: cutlass.Constexpr = self.ranks
        vectors: cutlass.Constexpr = layout.vectors
        cute.arch.griddepcontrol_wait()  # the partial sums are a predecessor's output
        me = Int32(peers[0])
        bases = [region(peers, p) for p in range(ranks)]
        own = region(peers, me)
        epoch = Int32(load_word_l2(own + Uint64(layout.epoch + 4 * cta))) + 1
        half = Uint64(layout.bytes) * Uint64(epoch & 1)
        values, totals = Uint64(source.iterator.toint()), Uint64(target.iterator.toint())
        first = cta * (self.per_thread * ONESHOT_THREADS) + thread
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * ONESHOT_THREADS
            if vector < vectors:
                at = Uint64(vector * VECTOR_BYTES)
                store_words_at(own + half + at, load_words_l2(values + at))
        cute.arch.sync_threads()
        if thread < ranks:
            release_flag_sys(region(peers, thread) + Uint64(layout.flags + 4 * (cta * ranks + me)), epoch)
            acquire_flag_sys(own + Uint64(layout.flags + 4 * (cta * ranks + thread)), epoch)
        cute.arch.sync_threads()
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * ONESHOT_THREADS
            if vector < vectors:
                at = Uint64(vector * VECTOR_BYTES)
                sums = [Float32(0.0)] * (8 if self.dtype == "bfloat16" else 4)
                for p in cutlass.range_constexpr(ranks):
                    words = load_words_l2(bases[p] + half + at)
                    for w in cutlass.range_constexpr(4):
                        if cutlass.const_expr(self.dtype == "bfloat16"):
                            low, high = unpack_bf16(words[w])
                            sums[2 * w] = sums[2 * w] + low
                            sums[2 * w + 1] = sums[2 * w + 1] + high
                        else:
                            sums[w] = sums[w] + bits_float(words[w])
                if cutlass.const_expr(self.dtype == "bfloat16"):
                    store_words_at(totals + at, [pack_bf16(sums[2 * w], sums[2 * w + 1]) for w in range(4)])
                else:
                    store_words_at(totals + at, [float_bits(sums[w]) for w in range(4)])
        cute.arch.griddepcontrol_launch_dependents()
        if thread == 0:
            store_word_at(own + Uint64(layout.epoch + 4 * cta), epoch)


def region(peers, rank):
    """Rank `rank`'s region address, from its two words of the peer table."""
    return join_u64(peers[2 + 2 * rank], peers[3 + 2 * rank])
