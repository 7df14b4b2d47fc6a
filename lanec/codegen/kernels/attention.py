"""`attention`: GQA decode over a paged KV cache, and `attention_combine`, the merge of its
split-KV chunks.

Attention writes every row's k and v into the cache at its position (page `pages[b, pos //
page_size]`, offset `pos % page_size`), then row r of request b attends to positions
0..positions[r] of its request: fp32 softmax with a running max, query head h reading KV head
h // (heads / kv_heads), bf16 out. A request's rows hold consecutive positions p0..p0+tokens-1
(the runtime guarantees it), so keys at positions >= p0 are this step's rows, read from the k / v
inputs, and only earlier positions come from the cache: the CTA that writes the cache (split 0)
never races one that reads it.

One CTA a (chunk of the keys, KV head and row block, request): the KV head's query rows (its
query heads x the request's tokens, at most 64 of them a CTA, 32 at head 256) share every key
the CTA reads. Keys and values come in tiles of `tile` positions by `cp.async` 16-byte copies
into two shared-memory buffers (the next tile lands while this one is used); per tile the
threads compute the scores (a thread a key, a few query rows each, query rows broadcast from
shared memory), then one thread a row updates its running max and sum and turns its scores into
probabilities, then each thread accumulates a 16-byte slice of the values for a few rows in
registers. With one chunk the CTA writes `out`; with several it writes each row's normalized
`partial` and its log-sum-exp `lse` (natural log, -inf where the chunk holds none of the row's
keys), which `AttentionCombine` merges."""

from __future__ import annotations

import math

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from lanec.codegen.facts import (
    VECTOR,
    AttentionCombineSpec,
    AttentionSchedule,
    AttentionSpec,
)
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch
from lanec.codegen.kernels.primitives import (
    LOG2E,
    alloc,
    at,
    copy_g2s,
    load_f32x4,
    shared_bytes,
    smem_words,
    store_f32x4,
    unpack_bf16,
)

THREADS = 128  # four warps a CTA
ACCUMULATOR = 64 * THREADS  # output floats of a CTA's rows held in registers (64 a thread)
LN2 = math.log(2.0)
NEG_INF = float("-inf")


def blocks_of(count: int, limit: int) -> tuple[int, int]:
    """(blocks, per block): `count` split into the fewest blocks of at most `limit`, evenly."""
    blocks = -(-count // limit)
    return blocks, -(-count // blocks)


class Attention:
    """GQA over a paged cache for `batch` requests of `tokens` rows; see the module docstring.
    Params: q, k, v, positions, pages, k_cache, v_cache, then out (one split) or partial and lse."""

    name = "attention"

    def __init__(self, batch, tokens, heads, kv_heads, head, page_size, max_pages, cache_pages, splits=1,
                 q_pitch=None, k_pitch=None, v_pitch=None, scale=None, schedule=None):
        AttentionSpec(batch, tokens, heads, kv_heads, head, page_size, max_pages, cache_pages, splits,
                      q_pitch, k_pitch, v_pitch).check()
        self.batch, self.tokens, self.heads, self.kv_heads, self.head = batch, tokens, heads, kv_heads, head
        self.page_size, self.max_pages, self.cache_pages, self.splits = page_size, max_pages, cache_pages, splits
        self.q_pitch = heads * head if q_pitch is None else int(q_pitch)
        self.k_pitch = kv_heads * head if k_pitch is None else int(k_pitch)
        self.v_pitch = kv_heads * head if v_pitch is None else int(v_pitch)
        self.scale = head ** -0.5 if scale is None else float(scale)
        schedule = AttentionSchedule.of(schedule or {})
        self.tile = schedule.tile or (32 if head == 256 else 64)
        self.rows = batch * tokens
        self.group = heads // kv_heads
        # the group's query rows (query head-major, token-minor) in row blocks that fit the registers
        self.row_blocks, self.block_rows = blocks_of(self.group * tokens, min(64, ACCUMULATOR // head))
        # rows padded to whole groups of every thread-to-row mapping (the accumulation's is the widest)
        groups = max(self.pv_rows, THREADS // self.tile)
        self.padded_rows = -(-self.block_rows // groups) * groups

    def params(self) -> list[TensorParam]:
        rows, heads, kv, d = self.rows, self.heads, self.kv_heads, self.head
        cache = (self.cache_pages, self.page_size, kv, d)
        params = [TensorParam("q", (rows, heads * d), "bfloat16", (self.q_pitch, 1)),
                  TensorParam("k", (rows, kv * d), "bfloat16", (self.k_pitch, 1)),
                  TensorParam("v", (rows, kv * d), "bfloat16", (self.v_pitch, 1)),
                  TensorParam("positions", (rows,), "int32"),
                  TensorParam("pages", (self.batch, self.max_pages), "int32"),
                  TensorParam("k_cache", cache, "bfloat16", written=True),
                  TensorParam("v_cache", cache, "bfloat16", written=True)]
        if self.splits == 1:
            return params + [TensorParam("out", (rows, heads * d), "bfloat16", written=True)]
        return params + [TensorParam("partial", (self.splits, rows, heads, d), "float32", written=True),
                         TensorParam("lse", (self.splits, rows, heads), "float32", written=True)]

    def shared_layout(self) -> list[tuple[int, int]]:
        """(bytes, alignment) of each shared allocation, in the kernel's order: the query rows, the
        key and value buffers (rows padded by 16 bytes: a thread a key reads without bank
        conflicts), the scores, and each row's rescale, running max and sum."""
        rows, n, d = self.padded_rows, self.tile, self.head
        return [(2 * rows * d, 16), (2 * 2 * n * (d + VECTOR), 16), (2 * 2 * n * (d + VECTOR), 16),
                (4 * rows * (n + 1), 16), (4 * rows, 16), (4 * rows, 16), (4 * rows, 16)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.splits, self.kv_heads * self.row_blocks, self.batch), block=(THREADS, 1, 1),
                           shared_bytes=shared_bytes(self.shared_layout()))

    @cute.jit
    def __call__(self, *, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, positions: cute.Tensor,
                 pages: cute.Tensor, k_cache: cute.Tensor, v_cache: cute.Tensor, out: cute.Tensor = None,
                 partial: cute.Tensor = None, lse: cute.Tensor = None):
        launch(self, q, k, v, positions, pages, k_cache, v_cache, out, partial, lse)

    @cute.kernel
    def kernel(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor,
               k_cache: cute.Tensor, v_cache: cute.Tensor, out: cute.Tensor, partial: cute.Tensor, lse: cute.Tensor):
        tid, _, _ = cute.arch.thread_idx()
        split, kv_block, request = cute.arch.block_idx()
        T: cutlass.Constexpr = self.tokens
        D: cutlass.Constexpr = self.head
        N: cutlass.Constexpr = self.tile
        R: cutlass.Constexpr = self.padded_rows
        g = kv_block // self.row_blocks
        first_row = (kv_block % self.row_blocks) * self.block_rows  # the block's first query row of the group
        smem = cutlass.memory.SmemAllocator()
        q_s = alloc(smem, BFloat16, (R, D))
        k_s = alloc(smem, BFloat16, (2, N, D + VECTOR))
        v_s = alloc(smem, BFloat16, (2, N, D + VECTOR))
        s_s = alloc(smem, Float32, (R, N + 1))
        alpha_s = alloc(smem, Float32, R)
        max_s = alloc(smem, Float32, R)
        sum_s = alloc(smem, Float32, R)

        # positions and pages are step inputs, written before the step: but k / v / q come from
        # predecessors, and every tile may hold this step's keys, so everything waits
        cute.arch.griddepcontrol_wait()
        cute.arch.griddepcontrol_launch_dependents()  # dependents wait for this grid's end to read its outputs
        p0 = positions[request * T]
        keys = p0 + T  # positions 0..p0+T-1: the request's last row sees them all
        lo, hi = Int32(0), keys
        if cutlass.const_expr(self.splits > 1):
            chunk = (keys + self.splits - 1) // self.splits
            lo = cutlass.min(split * chunk, keys)
            hi = cutlass.min(lo + chunk, keys)
        tiles = (hi - lo + N - 1) // N

        if tid < R:
            max_s[tid] = Float32(NEG_INF)
            sum_s[tid] = Float32(0.0)
        if (split == 0) & (first_row == 0):  # one CTA a (request, KV head) writes the step's rows
            self.write_cache(k, v, pages, k_cache, v_cache, request, g, p0, tid)
        self.load_queries(q, q_s, request, g, first_row, tid)
        self.load_tile(k, v, pages, k_cache, v_cache, k_s, v_s, request, g, p0, lo, hi, Int32(0), tid)
        cute.arch.cp_async_commit_group()
        acc = cute.make_rmem_tensor((R // self.pv_rows, VECTOR), Float32)
        acc.fill(0.0)
        for tile in range(tiles):
            if tile + 1 < tiles:  # the next tile flies while this one is used
                self.load_tile(k, v, pages, k_cache, v_cache, k_s, v_s, request, g, p0, lo, hi, tile + 1, tid)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(1)  # this tile's copies (and the queries) have landed
            cute.arch.sync_threads()
            start = lo + tile * N
            count = cutlass.min(hi - start, N)
            self.scores(q_s, k_s, s_s, tile % 2, start, count, p0, first_row, tid)
            cute.arch.sync_threads()
            self.softmax(s_s, alpha_s, max_s, sum_s, tid)
            cute.arch.sync_threads()
            self.accumulate(v_s, s_s, alpha_s, acc, tile % 2, count, tid)
            cute.arch.sync_threads()  # the buffer is free for the tile after next
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()  # an empty chunk ran no tile: its running max and sum are set above
        self.store(out, partial, lse, max_s, sum_s, acc, split, request, g, first_row, tid)

    @property
    def pv_rows(self) -> int:
        """Row groups of the accumulation: a thread a 16-byte slice of the head, THREADS / slices rows apart."""
        return THREADS // (self.head // VECTOR)

    @cute.jit
    def write_cache(self, k, v, pages, k_cache, v_cache, request: Int32, g: Int32, p0: Int32, tid: Int32):
        """The request's rows of KV head g into the cache at positions p0..p0+tokens-1."""
        DV: cutlass.Constexpr = self.head // VECTOR
        copies: cutlass.Constexpr = self.tokens * DV
        sources = (cute.zipped_divide(k, (1, VECTOR)), cute.zipped_divide(v, (1, VECTOR)))
        targets = (cute.zipped_divide(k_cache, (1, 1, 1, VECTOR)), cute.zipped_divide(v_cache, (1, 1, 1, VECTOR)))
        for j in cutlass.range_constexpr(-(-copies // THREADS)):
            c = tid + j * THREADS
            if c < copies:
                t, vec = c // DV, c % DV
                position = p0 + t
                page = pages[request, position // self.page_size]
                for which in cutlass.range_constexpr(2):
                    held = cute.make_rmem_tensor(VECTOR, BFloat16)
                    cute.autovec_copy(sources[which][None, (request * self.tokens + t, g * DV + vec)], held)
                    cute.autovec_copy(held, targets[which][None, (page, position % self.page_size, g, vec)])

    @cute.jit
    def load_queries(self, q, q_s, request: Int32, g: Int32, first_row: Int32, tid: Int32):
        """The block's query rows into shared memory by cp.async; rows past the group's are zeros."""
        DV: cutlass.Constexpr = self.head // VECTOR
        R: cutlass.Constexpr = self.padded_rows
        T: cutlass.Constexpr = self.tokens
        for j in cutlass.range_constexpr(-(-(R * DV) // THREADS)):
            c = tid + j * THREADS
            i, vec = c // DV, c % DV
            row = first_row + i
            if (c < R * DV) & (i < self.block_rows) & (row < self.group * T):
                head = g * self.group + row // T
                copy_g2s(at(q_s, i, vec * VECTOR), at(q, request * T + row % T, head * self.head + vec * VECTOR))
            elif c < R * DV:
                for e in cutlass.range_constexpr(VECTOR):
                    q_s[i, vec * VECTOR + e] = BFloat16(0.0)

    @cute.jit
    def load_tile(self, k, v, pages, k_cache, v_cache, k_s, v_s, request: Int32, g: Int32, p0: Int32, lo: Int32,
                  hi: Int32, tile: Int32, tid: Int32):
        """cp.async of the keys and values at positions lo + tile * N + [0, N) below hi into buffer
        tile % 2: this step's positions (>= p0) from the k / v rows, earlier ones from the cache."""
        DV: cutlass.Constexpr = self.head // VECTOR
        N: cutlass.Constexpr = self.tile
        P: cutlass.Constexpr = self.page_size
        buffer = tile % 2
        for j in cutlass.range_constexpr(N * DV // THREADS):
            c = tid + j * THREADS
            n, vec = c // DV, c % DV  # neighbouring threads copy neighbouring 16 bytes of one key
            position = lo + tile * N + n
            if position < p0:
                page = pages[request, position // P]
                if position < hi:
                    copy_g2s(at(k_s, buffer, n, vec * VECTOR), at(k_cache, page, position % P, g, vec * VECTOR))
                    copy_g2s(at(v_s, buffer, n, vec * VECTOR), at(v_cache, page, position % P, g, vec * VECTOR))
            elif position < hi:
                row = request * self.tokens + position - p0
                copy_g2s(at(k_s, buffer, n, vec * VECTOR), at(k, row, g * self.head + vec * VECTOR))
                copy_g2s(at(v_s, buffer, n, vec * VECTOR), at(v, row, g * self.head + vec * VECTOR))

    @cute.jit
    def scores(self, q_s, k_s, s_s, buffer: Int32, start: Int32, count: Int32, p0: Int32, first_row: Int32,
               tid: Int32):
        """s_s[i, n] = scale * log2(e) * q_i . k_n for the tile's keys a row may see (the first
        `count`, at most its own position), -inf for the others. A thread a key; a warp's lanes
        read one query row (a broadcast) and their own key rows."""
        DV: cutlass.Constexpr = self.head // VECTOR
        N: cutlass.Constexpr = self.tile
        groups: cutlass.Constexpr = THREADS // N
        per: cutlass.Constexpr = self.padded_rows // groups
        n, group = tid % N, tid // N
        dots = cute.make_rmem_tensor(per, Float32)
        dots.fill(0.0)
        for c in range(DV):
            key = [x for w in smem_words(at(k_s, buffer, n, c * VECTOR)) for x in unpack_bf16(w)]
            for j in cutlass.range_constexpr(per):
                query = [x for w in smem_words(at(q_s, group + j * groups, c * VECTOR)) for x in unpack_bf16(w)]
                total = dots[j]
                for e in cutlass.range_constexpr(VECTOR):
                    total += query[e] * key[e]
                dots[j] = total
        position = start + n
        for j in cutlass.range_constexpr(per):
            i = group + j * groups
            seen = (n < count) & (position <= p0 + (first_row + i) % self.tokens)
            s_s[i, n] = cutlass.select_(seen, dots[j] * Float32(self.scale * LOG2E), Float32(NEG_INF))

    @cute.jit
    def softmax(self, s_s, alpha_s, max_s, sum_s, tid: Int32):
        """One thread a row: the running max and sum over this tile, its scores made probabilities
        (base 2), and the factor the row's earlier accumulation is rescaled by."""
        N: cutlass.Constexpr = self.tile
        if tid < self.padded_rows:
            previous = max_s[tid]
            top = previous
            for n in range(N):
                top = cutlass.select_(s_s[tid, n] > top, s_s[tid, n], top)
            base = cutlass.select_(top == Float32(NEG_INF), Float32(0.0), top)  # no key seen yet: exp2(-inf) = 0
            total = Float32(0.0)
            for n in range(N):
                p = cute.math.exp2(s_s[tid, n] - base, fastmath=True)
                s_s[tid, n] = p
                total += p
            alpha = cute.math.exp2(previous - base, fastmath=True)
            alpha_s[tid] = alpha
            sum_s[tid] = sum_s[tid] * alpha + total
            max_s[tid] = top

    @cute.jit
    def accumulate(self, v_s, s_s, alpha_s, acc, buffer: Int32, count: Int32, tid: Int32):
        """acc (rows rg + j * pv_rows, slice dv of the head) rescaled, plus the tile's p . v."""
        DV: cutlass.Constexpr = self.head // VECTOR
        G: cutlass.Constexpr = self.pv_rows
        per: cutlass.Constexpr = self.padded_rows // G
        dv, rg = tid % DV, tid // DV
        for j in cutlass.range_constexpr(per):
            alpha = alpha_s[rg + j * G]
            for e in cutlass.range_constexpr(VECTOR):
                acc[j, e] = acc[j, e] * alpha
        for n in range(count):
            value = [x for w in smem_words(at(v_s, buffer, n, dv * VECTOR)) for x in unpack_bf16(w)]
            for j in cutlass.range_constexpr(per):
                p = s_s[rg + j * G, n]
                for e in cutlass.range_constexpr(VECTOR):
                    acc[j, e] = acc[j, e] + p * value[e]

    @cute.jit
    def store(self, out, partial, lse, max_s, sum_s, acc, split: Int32, request: Int32, g: Int32,
              first_row: Int32, tid: Int32):
        """out = acc / sum (one chunk); or partial = acc / sum and lse = ln(sum) + max (in natural
        units), 0 and -inf for a row the chunk holds no key of."""
        DV: cutlass.Constexpr = self.head // VECTOR
        G: cutlass.Constexpr = self.pv_rows
        T: cutlass.Constexpr = self.tokens
        dv, rg = tid % DV, tid // DV
        for j in cutlass.range_constexpr(self.padded_rows // G):
            i = rg + j * G
            row = first_row + i
            if (i < self.block_rows) & (row < self.group * T):
                head = g * self.group + row // T
                r = request * T + row % T
                total = sum_s[i]
                if cutlass.const_expr(self.splits == 1):
                    scale = Float32(1.0) / total  # every row sees position 0 of its request
                    held = cute.make_rmem_tensor(VECTOR, BFloat16)
                    held.store((acc[j, None].load() * scale).to(BFloat16))
                    cute.autovec_copy(held, cute.zipped_divide(out, (1, VECTOR))[None, (r, head * DV + dv)])
                else:
                    seen = total > Float32(0.0)
                    scale = cutlass.select_(seen, Float32(1.0) / total, Float32(0.0))
                    values = [acc[j, e] * scale for e in range(VECTOR)]
                    store_f32x4(at(partial, split, r, head, dv * VECTOR), values[:4])
                    store_f32x4(at(partial, split, r, head, dv * VECTOR + 4), values[4:])
                    if dv == 0:
                        lse[split, r, head] = cutlass.select_(
                            seen, (max_s[i] + cute.math.log2(total, fastmath=True)) * Float32(LN2), Float32(NEG_INF))


class AttentionCombine:
    """out = sum_s exp(lse_s - max) partial_s / sum_s exp(lse_s - max) over `splits` chunks of
    `rows` x `heads` heads of `head` values (a chunk with lse = -inf adds nothing). A thread a
    16-byte slice of the output. Params: partial, lse, out."""

    name = "attention_combine"

    def __init__(self, rows, heads, head, splits):
        AttentionCombineSpec(rows, heads, head, splits).check()
        self.rows, self.heads, self.head, self.splits = rows, heads, head, splits
        self.slices = heads * head // VECTOR

    def params(self) -> list[TensorParam]:
        return [TensorParam("partial", (self.splits, self.rows, self.heads, self.head), "float32"),
                TensorParam("lse", (self.splits, self.rows, self.heads), "float32"),
                TensorParam("out", (self.rows, self.heads * self.head), "bfloat16", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.rows, -(-self.slices // THREADS), 1), block=(THREADS, 1, 1))

    @cute.jit
    def __call__(self, *, partial: cute.Tensor, lse: cute.Tensor, out: cute.Tensor):
        launch(self, partial, lse, out)

    @cute.kernel
    def kernel(self, partial: cute.Tensor, lse: cute.Tensor, out: cute.Tensor):
        tid, _, _ = cute.arch.thread_idx()
        row, block, _ = cute.arch.block_idx()
        DV: cutlass.Constexpr = self.head // VECTOR
        cute.arch.griddepcontrol_wait()
        cute.arch.griddepcontrol_launch_dependents()  # dependents wait for this grid's end to read out
        index = block * THREADS + tid
        if index < self.slices:
            head, dv = index // DV, index % DV
            top = Float32(NEG_INF)
            for s in range(self.splits):
                top = cutlass.select_(lse[s, row, head] > top, lse[s, row, head], top)
            total = Float32(0.0)
            acc = cute.make_rmem_tensor(VECTOR, Float32)
            acc.fill(0.0)
            for s in range(self.splits):
                # a chunk without keys has lse = -inf: exp2(-inf) = 0 and its partial is 0
                weight = cute.math.exp2((lse[s, row, head] - top) * Float32(LOG2E), fastmath=True)
                total += weight
                values = load_f32x4(at(partial, s, row, head, dv * VECTOR)) + load_f32x4(
                    at(partial, s, row, head, dv * VECTOR + 4))
                for e in cutlass.range_constexpr(VECTOR):
                    acc[e] = acc[e] + weight * values[e]
            held = cute.make_rmem_tensor(VECTOR, BFloat16)
            held.store((acc.load() * (Float32(1.0) / total)).to(BFloat16))
            cute.autovec_copy(held, cute.zipped_divide(out, (1, VECTOR))[None, (row, index)])
