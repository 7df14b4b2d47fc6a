"""`all_reduce_oneshot`: a decode step's small all-reduce (sum) over N GPUs in one kernel, every
rank reading the others' values through CUDA IPC over NVLink; the protocol and the memory are
lanec/runtime/peer.py's (`PeerLayout`). `source` holds this rank's partial sums, `target` gets the
total (the same buffer: in place).

CTA c owns chunk c of the values (16-byte vectors, `ONESHOT_THREADS` threads a CTA): it stages
its chunk into this rank's workspace half (the step's parity), raises flag (c, this rank) at every
rank, waits for flag (c, p) of every rank p, and sums the chunk of every rank's half in rank order
(fp32, then rounded once): the same bits on every rank. The values come after `griddepcontrol.wait`
(a predecessor's output); nothing is read before it. A decode step's all-reduce is a few KB to a
few hundred: one round trip over NVLink instead of NCCL's ring protocol and its launch.

`all_reduce_norm` is the same exchange with the rmsnorm that reads the total (fold-all-reduce-into-norm):
CTA r owns row r, sums it from every rank, rounds it to bf16 as the all-reduce's total is, adds the
residual and normalizes the row, as `rmsnorm` does from there. The total never reaches memory, and
the norm's own launch is gone."""

from __future__ import annotations

from dataclasses import replace

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint64

from lanec.codegen.facts import VECTOR
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    acquire_flag_sys,
    add_residual,
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
from lanec.codegen.kernels.rmsnorm import RmsNorm
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
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        cute.arch.griddepcontrol_wait()  # the partial sums are a predecessor's output
        first = cta * (self.per_thread * ONESHOT_THREADS) + thread
        exchange = Exchange(self.layout, peers, cta, thread)
        exchange.meet(Uint64(source.iterator.toint()), Uint64(0), first, ONESHOT_THREADS, self.per_thread,
                      self.layout.vectors)
        totals = Uint64(target.iterator.toint())
        bases, half = exchange.bases, exchange.half
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * ONESHOT_THREADS
            if vector < self.layout.vectors:
                at = Uint64(vector * VECTOR_BYTES)
                sums = rank_order_sum(bases, half, at, self.dtype)
                if cutlass.const_expr(self.dtype == "bfloat16"):
                    store_words_at(totals + at, [pack_bf16(sums[2 * w], sums[2 * w + 1]) for w in range(4)])
                else:
                    store_words_at(totals + at, [float_bits(sums[w]) for w in range(4)])
        release_dependents(self)
        exchange.done()


class AllReduceNorm(RmsNorm):
    """The all-reduce of a norm's input fused with the norm (fold-all-reduce-into-norm): `rows` of
    `width` bf16 partial sums in `source`, their total over the ranks + `residual` normalized into y
    (and the sum into h, the new residual stream), as rmsnorm's launch on the all-reduce's total
    would. One CTA a row (rmsnorm's shape), the row's exchange protocol that of the one-shot
    (PeerLayout with `rows`). Params: source, (residual), w, y, (h), peers."""

    name = "all_reduce_norm"

    def __init__(self, rows: int, width: int, eps: float, ranks: int, residual: bool = False):
        super().__init__(rows, width, eps, residual)
        self.layout = PeerLayout(rows * width, "bfloat16", int(ranks), rows=rows)
        check_layout(self.layout)
        self.ranks = self.layout.ranks

    def params(self) -> list[TensorParam]:
        norm = super().params()
        return [replace(norm[0], name="source"), *norm[1:],
                TensorParam("peers", (2 * (self.ranks + 1),), "int32")]

    @cute.jit
    def __call__(self, *, source: cute.Tensor, residual: cute.Tensor = None, w: cute.Tensor, y: cute.Tensor,
                 h: cute.Tensor = None, peers: cute.Tensor):
        launch(self, source, residual, w, y, h, peers)

    @cute.kernel
    def kernel(self, source: cute.Tensor, residual: cute.Tensor, w: cute.Tensor, y: cute.Tensor,
               h_out: cute.Tensor, peers: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        row, _, _ = cute.arch.block_idx()
        threads: cutlass.Constexpr = 32 * self.warps
        vectors: cutlass.Constexpr = self.width // VECTOR
        scale = self.weights(w, thread)  # the norm weights are ready at launch
        cute.arch.griddepcontrol_wait()  # the partial sums and the residual are predecessors' outputs
        exchange = Exchange(self.layout, peers, row, thread)
        row_at = Uint64(row) * Uint64(self.width * 2)
        exchange.meet(Uint64(source.iterator.toint()), row_at, thread, threads, self.steps, vectors)
        bases, half = exchange.bases, exchange.half
        values = cute.make_rmem_tensor((VECTOR, self.steps), Float32)
        values.fill(0.0)
        squares = Float32(0.0)
        total = cute.make_rmem_tensor(VECTOR, Float32)
        for s in cutlass.range_constexpr(self.steps):
            vector = thread + s * threads
            if vector < vectors:
                sums = rank_order_sum(bases, half, row_at + Uint64(vector * VECTOR_BYTES), "bfloat16")
                for e in cutlass.range_constexpr(VECTOR):
                    total[e] = sums[e]
                x = total.load().to(cutlass.BFloat16).to(Float32)  # the all-reduce's total, as stored
                h = add_residual(x, residual if cutlass.const_expr(self.residual) else None, h_out, row, vector, True)
                values[None, s].store(h)
                squares += (h * h).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
        release_dependents(self)  # every input of this CTA is read
        exchange.done()
        self.normalize(values, squares, scale, y, row, thread)


class Exchange:
    """One CTA's part of a step of the one-shot protocol (lanec/runtime/peer.py): CTA `cta` of this
    rank stages its vectors into its workspace half, meets every rank at its flags, sums every
    rank's half in rank order, and ends by recording its epoch."""

    def __init__(self, layout: PeerLayout, peers, cta, thread):
        self.layout, self.cta, self.thread = layout, cta, thread
        self.me = Int32(peers[0])
        self.peers = peers
        self.bases = [region(peers, p) for p in range(layout.ranks)]
        self.own = region(peers, self.me)
        self.epoch = Int32(load_word_l2(self.own + Uint64(layout.epoch + 4 * cta))) + 1
        self.half = Uint64(layout.bytes) * Uint64(self.epoch & 1)

    @cute.jit
    def meet(self, values, start, first, stride: cutlass.Constexpr, steps: cutlass.Constexpr, count: cutlass.Constexpr):
        """Stage this thread's vectors (`steps` of them, `stride` apart from `first`; those below
        `count`, from byte `start` of `values`), then wait for every rank's CTA `cta` to have staged
        its own."""
        layout, ranks = self.layout, self.layout.ranks
        for i in cutlass.range_constexpr(steps):
            vector = first + i * stride
            if vector < count:
                at = start + Uint64(vector * VECTOR_BYTES)
                store_words_at(self.own + self.half + at, load_words_l2(values + at))
        cute.arch.sync_threads()
        if self.thread < ranks:
            at = 4 * (self.cta * ranks + self.me)
            release_flag_sys(region(self.peers, self.thread) + Uint64(layout.flags + at), self.epoch)
            acquire_flag_sys(self.own + Uint64(layout.flags + 4 * (self.cta * ranks + self.thread)), self.epoch)
        cute.arch.sync_threads()

    @cute.jit
    def done(self):
        """This CTA's epoch, for its next step (read by no peer)."""
        if self.thread == 0:
            store_word_at(self.own + Uint64(self.layout.epoch + 4 * self.cta), self.epoch)


def rank_order_sum(bases, half, at, dtype: str):
    """The fp32 sums, in rank order, of the 16 bytes at byte `at` of every rank's workspace half
    (`bases`: the ranks' regions, `half`: the step's half)."""
    sums = [Float32(0.0)] * (8 if dtype == "bfloat16" else 4)
    for base in bases:  # unrolled: a helper the DSL does not preprocess
        words = load_words_l2(base + half + at)
        for w in range(4):
            if dtype == "bfloat16":
                low, high = unpack_bf16(words[w])
                sums[2 * w] = sums[2 * w] + low
                sums[2 * w + 1] = sums[2 * w + 1] + high
            else:
                sums[w] = sums[w] + bits_float(words[w])
    return sums


def region(peers, rank):
    """Rank `rank`'s region address, from its two words of the peer table."""
    return join_u64(peers[2 + 2 * rank], peers[3 + 2 * rank])
