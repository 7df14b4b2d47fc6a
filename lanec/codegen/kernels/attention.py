"""Decode attention on tensor cores: `attention` (GQA over a paged KV cache) and
`latent_attention` (MLA, absorbed: every head attends over the shared latent cache row), and
`attention_combine`, the merge of their split-KV chunks.

Both write this step's rows into the cache at their positions (page `pages[b, pos // page_size]`,
offset `pos % page_size`), then query row r of request b attends to positions 0..positions[r] of
its request: fp32 softmax with a running max, bf16 out. A request's rows hold consecutive
positions p0..p0+tokens-1 (the runtime guarantees it), so keys at positions >= p0 are this
step's rows, read from the step's inputs, and only earlier positions come from the cache: the
CTA that writes the cache (chunk 0, row block 0) never races one that reads it.

One CTA a (chunk of the keys, KV head and row block, request). Its query rows (the KV head's
query heads x the request's tokens; for MLA every head) are the M side of `mma.m16n8k16`, padded
to whole 16-row tiles; every key and value the CTA reads serves all of them. Tiles of `tile`
keys stream through `stages` shared-memory buffers, filled by the schedule's load engine
(`CopyLoads`: every thread's 16-byte `cp.async`; `BulkLoads`: one `cp.async.bulk` a cache row
on the buffer's mbarrier); rows past the chunk are zero-filled. The cache rows of the first
tiles are requested before `griddepcontrol.wait` (they do not depend on the predecessor, only
the step's rows and the queries do). GQA stages its chunk's page-table entries in shared memory
there too (at most ATTENTION_STAGED_PAGES), so the later tiles' copies do not wait on a global
load for their pages. A tile:

1. S = Q K^T: warp w takes keys [w, w + 1) x tile / warps; K's rows are the MMA's B operand
   as stored (`ldmatrix`), Q's the A operand; scaled into base 2 and masked (past the chunk, or
   after the row's own position inside a speculative request).
2. The tile's row maxima meet in shared memory; every thread updates the running max of its
   rows (the same in every warp), turns its scores into probabilities (bf16, to shared memory)
   and rescales its accumulators and its partial row sums.
3. O += P V: warp w takes columns [w, w + 1) x value width / warps of every row, P from shared
   memory as the A operand, V's rows transposed by `ldmatrix.trans` as the B operand.

At the end the warps' partial row sums meet in shared memory. With one chunk the CTA writes
`out`; with several, each row's normalized `partial` and its log-sum-exp `lse` (natural log,
-inf where the chunk holds none of the row's keys), which `AttentionCombine` merges, or (combine
"cluster") the chunks' CTAs merge over DSMEM. That merge may write `out` in the quantized form a
q8_0 product reads (`quantize`, fuse-quant's epilogue): 8 lanes a 32-value block meet on its peak."""

from __future__ import annotations

import math

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from lanec.codegen.facts import (
    ATTENTION_CLUSTER_SPLITS,
    ATTENTION_STAGED_PAGES,
    LATENT_ENGINE,
    SHARED_LIMIT,
    VECTOR,
    WARP,
    AttentionCombineSpec,
    AttentionSchedule,
    AttentionSpec,
    LatentAttentionSpec,
    quantized_pitch,
)
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    LOG2E,
    alloc,
    at,
    copy_g2s,
    copy_g2s_zfill,
    float_bits,
    ldmatrix_x4,
    load_activation_bf16x8,
    load_dsmem_f32,
    load_dsmem_f32x4,
    load_f32x4,
    mma_into,
    pack_bf16,
    shared_bytes,
    store_global_words,
    store_shared_word,
    unpack_bf16,
    wait_stage,
    warp_reduce,
)
from lanec.codegen.kernels.quantize import int8_word, quantized_values
from lanec.runtime.dtypes import Q8_0_BLOCK

LN2 = math.log(2.0)
NEG_INF = float("-inf")
MMA_M = 16  # query rows of one MMA tile
MMA_N = 8  # keys (scores) or value columns (output) of one MMA tile
MMA_K = 16
COMBINE_THREADS = 128  # a combine CTA's threads: 128 / lanes 16-byte slices of the merged output
BLOCK_VECTORS = Q8_0_BLOCK // 4  # 4-value vectors a quantize block: consecutive lanes of the cluster merge
ACCUMULATOR_FLOATS = 64  # output floats a thread holds: tile rows x columns a warp / 32 lanes


def blocks_of(count: int, limit: int) -> tuple[int, int]:
    """(blocks, per block): `count` split into the fewest blocks of at most `limit`, evenly."""
    blocks = -(-count // limit)
    return blocks, -(-count // blocks)


class TileAttention:
    """What `Attention` and `LatentAttention` share: the tile loop on tensor cores. A subclass
    sets `key_width` / `value_width` (the scores' K and the output's columns), `group` (query
    rows a KV head a token), `kv_heads`, `tokens`, `batch`, `page_size`, `splits`, `scale`, and
    gives `params`, its shared buffers (`buffer_bytes`, `alloc_buffers`, `key_buffer`,
    `value_buffer`), `load_queries`, `load_tile` and `write_cache`; `setup` plans the rest."""

    quantize = 0  # int8 words a value of `out` in the quantized form (fuse-quant's epilogue; Attention's)
    partials = "float32"  # the element of each chunk's normalized rows for attention_combine (LatentWgmma's knob)
    page_slots = 0  # page-table entries of a chunk staged in shared memory (Attention's `stage_pages`)

    def setup(self, schedule: AttentionSchedule) -> None:
        self.rows = self.batch * self.tokens
        if (schedule.engine or "mma") != "mma":
            raise ValueError(f"{self.name}: engine {schedule.engine!r} is latent_attention's (LatentWgmma); this "
                             "kernel multiplies on mma.sync")
        if (schedule.partials or "float32") != "float32":
            raise ValueError(f"{self.name}: partials {schedule.partials!r} are the wgmma latent attention's; this "
                             "kernel stores its chunks' rows in fp32")
        if schedule.block_rows is not None:
            raise ValueError(f"{self.name}: block_rows {schedule.block_rows} is the wgmma latent attention's; this "
                             "kernel sizes its own row blocks")
        self.loads = schedule.loads or "copy"
        if self.loads == "bulk" and not hasattr(self, "bulk_rows"):
            raise ValueError(f"{self.name}: loads 'bulk' is for a cache the step's rows are written into; this "
                             "kernel reads only a predecessor's rows: loads 'copy'")
        self.warps = schedule.warps or (8 if self.value_width >= 512 else 4)
        self.threads = self.warps * WARP
        self.tile = schedule.tile or 64
        if self.tile % (self.warps * MMA_N) or self.value_width % (self.warps * 2 * MMA_N):
            raise ValueError(f"{self.name}: {self.warps} warps take whole 8-key score tiles of a {self.tile}-key tile "
                             f"and whole pairs of 8-column output tiles of {self.value_width} values; they do not "
                             "divide")
        self.cols = self.value_width // self.warps  # output columns a warp
        self.key_tiles = self.tile // self.warps // MMA_N  # score tiles a warp (its keys / 8)
        self.col_tiles = self.cols // MMA_N
        most = max(MMA_M, ACCUMULATOR_FLOATS * WARP // self.cols // MMA_M * MMA_M)
        self.row_blocks, self.block_rows = blocks_of(self.group * self.tokens, min(64, most))
        self.padded_rows = -(-self.block_rows // MMA_M) * MMA_M
        self.row_tiles = self.padded_rows // MMA_M
        self.stages = schedule.stages or self.default_stages()
        needed = shared_bytes(self.shared_layout())
        if needed > SHARED_LIMIT:
            raise ValueError(f"{self.name}: {self.stages} buffers of {self.tile} keys take {needed} bytes of shared "
                             f"memory, above the SM's {SHARED_LIMIT}")
        self.clustered = (schedule.combine or "launch") == "cluster"
        if self.clustered:
            if not 2 <= self.splits <= ATTENTION_CLUSTER_SPLITS:
                raise ValueError(f"{self.name}: combine 'cluster' makes the {self.splits} chunks one cluster: 2 to "
                                 f"{ATTENTION_CLUSTER_SPLITS} chunks")
            ring = self.stages * self.buffer_bytes()[0]
            if self.staged_bytes() > ring:
                raise ValueError(f"{self.name}: combine 'cluster' leaves {self.padded_rows} rows of {self.value_width} "
                                 f"fp32 values in the key buffers ({self.staged_bytes()} bytes); they hold {ring}")

    def staged_bytes(self) -> int:
        """A cluster chunk's rows left for its peers (combine 'cluster'): each row's normalized
        values (fp32) and its lse (a 16-byte slot), in the key buffers the tile loop is done with."""
        return self.padded_rows * (self.value_width + 4) * 4

    def writes_out(self) -> bool:
        """Whether the launch writes `out` itself: one chunk, or chunks combined in the cluster."""
        return self.splits == 1 or self.clustered

    def default_stages(self) -> int:
        """Buffers of `tile` keys: three, or two where three would pass 160 KB with the queries."""
        three = shared_bytes(self.shared_layout(3))
        return 3 if three <= 160 * 1024 else 2

    def key_pitch(self) -> int:
        return self.key_width + VECTOR  # 16 bytes of padding: ldmatrix's 8 rows hit 8 bank groups

    def shared_layout(self, stages: int | None = None) -> list[tuple[int, int]]:
        """(bytes, alignment) of each shared allocation, in the kernel's order: the queries, the
        key / value buffers (`buffer_bytes`), the probabilities and the warps' row maxima / sums, the
        chunk's staged page-table entries (`page_slots`, GQA), then the load engine's own (`BulkLoads`:
        an mbarrier a buffer)."""
        stages = stages or self.stages
        rows = self.padded_rows
        return ([(2 * rows * self.key_pitch(), 16)] + [(stages * b, 16) for b in self.buffer_bytes()]
                + [(2 * rows * (self.tile + VECTOR), 16), (4 * 8 * rows, 16)]
                + [(4 * self.page_slots, 16)] * (self.page_slots > 0) + self.engine.shared_layout(stages))

    @property
    def engine(self):
        """The schedule's engine that fills the key / value buffers (`loads`): built when asked,
        so the kernel's attributes stay plain values (the compile cache hashes them)."""
        return BulkLoads(self) if self.loads == "bulk" else CopyLoads(self)

    def touched(self) -> dict[str, int]:
        """The cache pages a full page table reaches (the step reads its requests' positions)."""
        reached = min(self.cache_pages, self.batch * self.max_pages)
        return {name: reached for name in ("k_cache", "v_cache", "cache", "keys", "values")}  # whichever it has

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.splits, self.kv_heads * self.row_blocks, self.batch),
                           block=(self.threads, 1, 1), cluster=(self.splits if self.clustered else 1, 1, 1),
                           shared_bytes=shared_bytes(self.shared_layout()))

    def outputs(self, rows: int, width: int, heads: int) -> list[TensorParam]:
        """`out` [rows, heads x width] where the launch writes it (`writes_out`), else each
        chunk's `partial` and `lse` for attention_combine."""
        if self.quantize:
            return [TensorParam("out", (rows, quantized_pitch(heads * width, self.quantize)), "int8", written=True)]
        if self.writes_out():
            return [TensorParam("out", (rows, heads * width), "bfloat16", written=True)]
        return [TensorParam("partial", (self.splits, rows, heads, width), self.partials, written=True),
                TensorParam("lse", (self.splits, rows, heads), "float32", written=True)]

    @cute.jit
    def attend(self, views, positions, out, partial, lse):
        """The kernel body: the tile loop around the subclass's loads."""
        tid, _, _ = cute.arch.thread_idx()
        split, kv_block, request = cute.arch.block_idx()
        N: cutlass.Constexpr = self.tile
        S: cutlass.Constexpr = self.stages
        R: cutlass.Constexpr = self.padded_rows
        warp, lane = tid // WARP, tid % WARP
        g = kv_block // self.row_blocks
        first_row = (kv_block % self.row_blocks) * self.block_rows
        smem = cutlass.memory.SmemAllocator()
        q_s = alloc(smem, BFloat16, (R, self.key_pitch()))
        buffers = self.alloc_buffers(smem)
        p_s = alloc(smem, BFloat16, (R, N + VECTOR))
        red_s = alloc(smem, Float32, (8, R))
        page_s = alloc(smem, Int32, (self.page_slots,)) if cutlass.const_expr(self.page_slots > 0) else None
        ring = self.engine.start(smem, tid)

        p0, lo, hi = self.key_range(positions, request, split)
        tiles = (hi - lo + N - 1) // N
        # the first tiles' cache rows fly while the predecessor finishes
        for s in cutlass.range_constexpr(S - 1):
            if s < tiles:
                self.engine.load(views, buffers, ring, request, g, p0, lo, hi, Int32(s), tid, 1)
            cute.arch.cp_async_commit_group()
        if cutlass.const_expr(self.page_slots > 0):  # the chunk's page-table entries, for the later tiles' copies
            views = views + self.stage_pages(page_s, views, request, lo, tid)
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents wait for this grid's end to read its outputs
        if (split == 0) & (first_row == 0):  # one CTA a (request, KV head) writes the step's rows
            self.write_cache(views, request, g, p0, tid)
        self.load_queries(views, q_s, request, g, first_row, tid)
        for s in cutlass.range_constexpr(S - 1):  # the step's own rows of the first tiles
            if s < tiles:
                self.engine.load(views, buffers, ring, request, g, p0, lo, hi, Int32(s), tid, 2)
        cute.arch.cp_async_commit_group()

        o = cute.make_rmem_tensor((self.row_tiles, self.col_tiles, 4), Float32)
        o.fill(0.0)
        m_run = cute.make_rmem_tensor((self.row_tiles, 2), Float32)
        m_run.fill(NEG_INF)
        l_run = cute.make_rmem_tensor((self.row_tiles, 2), Float32)
        l_run.fill(0.0)
        for tile in range(tiles):
            wait_stage(tile, S)  # this tile's copies (and the first group's) have landed
            self.engine.wait(ring, tile)
            cute.arch.sync_threads()  # every thread's copies visible; the oldest buffer free
            if tile + S - 1 < tiles:
                self.engine.load(views, buffers, ring, request, g, p0, lo, hi, tile + S - 1, tid, 0)
            cute.arch.cp_async_commit_group()
            start = lo + tile * N
            count = cutlass.min(hi - start, N)
            s = self.scores(q_s, buffers, tile % S, warp, lane)
            self.softmax(s, o, m_run, l_run, p_s, red_s, start, count, p0, first_row, warp, lane)
            self.accumulate(p_s, buffers, o, tile % S, warp, lane)
        cute.arch.cp_async_wait_group(0)
        self.store(views, out, partial, lse, o, m_run, l_run, red_s, split, request, g, first_row, warp, lane,
                   buffers)
        if cutlass.const_expr(self.clustered):
            self.combine_in_cluster(out, buffers, split, request, g, first_row, tid)

    @cute.jit
    def key_range(self, positions, request: Int32, split: Int32):
        """(p0, lo, hi): the request's first position this step, and chunk `split`'s keys [lo, hi) of
        positions 0..p0 + tokens - 1 (the request's last row sees them all)."""
        p0 = positions[request * self.tokens]  # a step input, written before the step: no wait needed
        keys = p0 + self.tokens
        lo, hi = Int32(0), keys
        if cutlass.const_expr(self.splits > 1):
            chunk = (keys + self.splits - 1) // self.splits
            lo = cutlass.min(split * chunk, keys)
            hi = cutlass.min(lo + chunk, keys)
        return p0, lo, hi

    @cute.jit
    def scores(self, q_s, buffers, buffer: Int32, warp: Int32, lane: Int32):
        """This warp's keys' scores for every query row: (row tiles, key tiles, 4) floats in the
        MMA's C layout (rows lane / 4 and + 8, keys 2 (lane % 4) and + 1)."""
        k_s = self.key_buffer(buffers)
        key0 = warp * (self.tile // self.warps)
        s = cute.make_rmem_tensor((self.row_tiles, self.key_tiles, 4), Float32)
        s.fill(0.0)
        a_row = lane % 16
        a_col = (lane // 16) * VECTOR
        for kk in cutlass.range_constexpr(self.key_width // (2 * MMA_K)):
            for kt in cutlass.range_constexpr(self.key_tiles):
                b = ldmatrix_x4(at(k_s, buffer, key0 + kt * MMA_N + lane % 8, kk * 2 * MMA_K + (lane // 8) * VECTOR))
                for mt in cutlass.range_constexpr(self.row_tiles):
                    for half in cutlass.range_constexpr(2):
                        a = ldmatrix_x4(at(q_s, mt * MMA_M + a_row, (2 * kk + half) * MMA_K + a_col))
                        mma_into(s[mt, kt, None], a, (b[2 * half], b[2 * half + 1]))
        return s

    @cute.jit
    def softmax(self, s, o, m_run, l_run, p_s, red_s, start: Int32, count: Int32, p0: Int32, first_row: Int32,
                warp: Int32, lane: Int32):
        """The tile's scores made base-2 probabilities in p_s; the running max / sum of this
        thread's rows updated and its accumulators rescaled."""
        T: cutlass.Constexpr = self.tokens
        key0 = warp * (self.tile // self.warps)
        scale = Float32(self.scale * LOG2E)
        for mt in cutlass.range_constexpr(self.row_tiles):
            for h in cutlass.range_constexpr(2):
                row = mt * MMA_M + h * 8 + lane // 4
                limit = p0 + (first_row + row) % T  # the row's own position: it sees no later key
                top = Float32(NEG_INF)
                for kt in cutlass.range_constexpr(self.key_tiles):
                    for e in cutlass.range_constexpr(2):
                        n = key0 + kt * MMA_N + 2 * (lane % 4) + e
                        seen = (n < count) & (start + n <= limit)
                        value = cutlass.select_(seen, s[mt, kt, 2 * h + e] * scale, Float32(NEG_INF))
                        s[mt, kt, 2 * h + e] = value
                        top = cutlass.max(top, value)
                top = warp_reduce(top, cutlass.max, width=4)
                if lane % 4 == 0:
                    red_s[warp, row] = top
        cute.arch.sync_threads()
        for mt in cutlass.range_constexpr(self.row_tiles):
            for h in cutlass.range_constexpr(2):
                row = mt * MMA_M + h * 8 + lane // 4
                top = m_run[mt, h]
                for w in cutlass.range_constexpr(self.warps):
                    top = cutlass.max(top, red_s[w, row])
                base = cutlass.select_(top == Float32(NEG_INF), Float32(0.0), top)  # no key seen yet
                alpha = cute.math.exp2(m_run[mt, h] - base, fastmath=True)
                m_run[mt, h] = top
                total = Float32(0.0)
                for kt in cutlass.range_constexpr(self.key_tiles):
                    p = [cute.math.exp2(s[mt, kt, 2 * h + e] - base, fastmath=True) for e in range(2)]
                    total += p[0] + p[1]
                    store_shared_word(at(p_s, row, key0 + kt * MMA_N + 2 * (lane % 4)), pack_bf16(p[0], p[1]))
                l_run[mt, h] = l_run[mt, h] * alpha + total
                for ct in cutlass.range_constexpr(self.col_tiles):
                    o[mt, ct, 2 * h] = o[mt, ct, 2 * h] * alpha
                    o[mt, ct, 2 * h + 1] = o[mt, ct, 2 * h + 1] * alpha
        cute.arch.sync_threads()  # the probabilities are in p_s; red_s is free again

    @cute.jit
    def accumulate(self, p_s, buffers, o, buffer: Int32, warp: Int32, lane: Int32):
        """o (this warp's columns of every row) += P V over the tile's keys."""
        v_s, v0 = self.value_buffer(buffers)
        col0 = v0 + warp * self.cols
        row = (lane % 8) + 8 * ((lane // 8) % 2)
        col = (lane // 16) * VECTOR
        for ks in cutlass.range_constexpr(self.tile // MMA_K):
            a = [ldmatrix_x4(at(p_s, mt * MMA_M + row, ks * MMA_K + col)) for mt in range(self.row_tiles)]
            for cp in cutlass.range_constexpr(self.col_tiles // 2):
                b = ldmatrix_x4(at(v_s, buffer, ks * MMA_K + row, col0 + cp * 2 * MMA_N + col), trans=True)
                for mt in cutlass.range_constexpr(self.row_tiles):
                    mma_into(o[mt, 2 * cp, None], a[mt], (b[0], b[1]))
                    mma_into(o[mt, 2 * cp + 1, None], a[mt], (b[2], b[3]))

    @cute.jit
    def store(self, views, out, partial, lse, o, m_run, l_run, red_s, split: Int32, request: Int32, g: Int32,
              first_row: Int32, warp: Int32, lane: Int32, buffers=None):
        """out = o / sum (one chunk); or partial = o / sum and lse = ln(sum) + max (natural
        units), 0 and -inf for a row the chunk holds no key of: to global memory for
        attention_combine, or (combine 'cluster') to the CTA's `staging` for its peers."""
        T: cutlass.Constexpr = self.tokens
        DV: cutlass.Constexpr = self.value_width
        for mt in cutlass.range_constexpr(self.row_tiles):
            for h in cutlass.range_constexpr(2):
                total = warp_reduce(l_run[mt, h], lambda a, b: a + b, width=4)
                if lane % 4 == 0:
                    red_s[warp, mt * MMA_M + h * 8 + lane // 4] = total
        cute.arch.sync_threads()  # also: every warp is done with the key / value buffers
        staged = self.staging(buffers) if cutlass.const_expr(self.clustered) else None
        for mt in cutlass.range_constexpr(self.row_tiles):
            for h in cutlass.range_constexpr(2):
                i = mt * MMA_M + h * 8 + lane // 4
                total = Float32(0.0)
                for w in cutlass.range_constexpr(self.warps):
                    total += red_s[w, i]
                row = first_row + i
                if (i < self.block_rows) & (row < self.group * T):
                    head = g * self.group + row // T
                    r = request * T + row % T
                    seen = total > Float32(0.0)
                    inverse = cutlass.select_(seen, Float32(1.0) / total, Float32(0.0))
                    chunk_lse = cutlass.select_(
                        seen, (m_run[mt, h] + cute.math.log2(total, fastmath=True)) * Float32(LN2), Float32(NEG_INF))
                    for ct in cutlass.range_constexpr(self.col_tiles):
                        col = warp * self.cols + ct * MMA_N + 2 * (lane % 4)
                        x0, x1 = o[mt, ct, 2 * h] * inverse, o[mt, ct, 2 * h + 1] * inverse
                        if cutlass.const_expr(self.splits == 1):
                            store_global_words(at(out, r, head * DV + col), pack_bf16(x0, x1))
                        elif cutlass.const_expr(self.clustered):
                            staged[i, col] = x0
                            staged[i, col + 1] = x1
                        else:
                            store_global_words(at(partial, split, r, head, col),
                                               (float_bits(x0), float_bits(x1)))
                    if cutlass.const_expr(self.splits > 1):
                        if (warp == 0) & (lane % 4 == 0):
                            if cutlass.const_expr(self.clustered):
                                staged[i, DV] = chunk_lse
                            else:
                                lse[split, r, head] = chunk_lse

    def staging(self, buffers):
        """The chunk's rows for its peers (combine 'cluster'): [padded_rows, value_width + 4] fp32
        over the key buffers, each row's values then its lse (padded to a 16-byte slot: rows of
        16-byte multiples, whole vectors for the values' DSMEM loads)."""
        ring = self.key_buffer(buffers)
        pitch = self.value_width + 4
        return cute.make_tensor(cute.recast_ptr(ring.iterator, dtype=Float32),
                                cute.make_layout((self.padded_rows, pitch), stride=(pitch, 1)))

    @cute.jit
    def combine_in_cluster(self, out, buffers, split: Int32, request: Int32, g: Int32, first_row: Int32, tid: Int32):
        """combine 'cluster': every chunk's rows are in its CTA's `staging`; chunk `split` (the
        CTA's rank in the cluster) merges its share of the (row, 4-value vector) pairs over every
        chunk, in chunk order (deterministic, as attention_combine): out = sum_s w_s partial_s /
        sum_s w_s, w_s = exp(lse_s - max lse)."""
        T: cutlass.Constexpr = self.tokens
        Q: cutlass.Constexpr = self.value_width // 4
        staged = self.staging(buffers)

        def merge(v, inside):
            i, q = v // Q, v % Q
            row = first_row + i
            mine = inside & (row < self.group * T)
            if cutlass.const_expr(self.quantize):
                self.merge_quantized(out, staged, mine, i, q, request * T + row % T, g * self.group + row // T)
            elif mine:
                self.store_merged(out, staged, i, q, request, row, g * self.group)

        self.merge_in_cluster_share(self.block_rows * Q, split, tid, merge)

    def merge_in_cluster_share(self, vectors: int, split, tid, merge) -> None:
        """The cluster merge's frame (GQA's and the wgmma latent attention's): once every chunk's rows are
        staged, rank `split` calls merge(v, inside) for each of its threads' (staged row, 4-value vector)
        pairs v of its share (`merge_share`; `inside`: v is in the share and below `vectors`), then waits
        until no peer still reads its rows. Plain Python: traced inline into the kernel."""
        share = self.merge_share(vectors)
        cute.arch.cluster_arrive()  # release: every chunk's rows are in its shared memory
        cute.arch.cluster_wait()
        for j in range(-(-share // self.threads)):
            local = tid + j * self.threads
            v = split * share + local
            merge(v, (local < share) & (v < vectors))
        cute.arch.cluster_arrive()  # no chunk leaves while a peer still reads its rows
        cute.arch.cluster_wait()

    def merge_share(self, vectors: int) -> int:
        """The (row, 4-value vector) pairs a chunk merges: an even share, in whole 32-value blocks
        (BLOCK_VECTORS consecutive lanes) where it writes the quantized form."""
        share = -(-vectors // self.splits)
        return -(-share // BLOCK_VECTORS) * BLOCK_VECTORS if self.quantize else share

    @cute.jit
    def merged_vector(self, staged, i: Int32, q: Int32):
        """Row i's 4-value vector q over every chunk, in chunk order (deterministic, as
        attention_combine): (sum_s w_s partial_s, 1 / sum_s w_s), w_s = exp(lse_s - max lse)."""
        DV: cutlass.Constexpr = self.value_width
        lses = [load_dsmem_f32(at(staged, i, DV), c) for c in range(self.splits)]
        top = lses[0]
        for c in cutlass.range_constexpr(1, self.splits):
            top = cutlass.select_(lses[c] > top, lses[c], top)
        total = Float32(0.0)
        acc = [Float32(0.0)] * 4
        for c in cutlass.range_constexpr(self.splits):
            # a chunk without the row's keys has lse = -inf: weight 0, values 0
            weight = cute.math.exp2((lses[c] - top) * Float32(LOG2E), fastmath=True)
            total += weight
            values = load_dsmem_f32x4(at(staged, i, 4 * q), c)
            acc = [acc[e] + weight * values[e] for e in range(4)]
        return acc, Float32(1.0) / total

    @cute.jit
    def store_merged(self, out, staged, i: Int32, q: Int32, request: Int32, row: Int32, heads_before: Int32):
        """Staged row i's merged vector q (`merged_vector`) as bf16 to `out`: block row `row` is query head
        heads_before + row // tokens of request row request x tokens + row % tokens."""
        T: cutlass.Constexpr = self.tokens
        DV: cutlass.Constexpr = self.value_width
        acc, inverse = self.merged_vector(staged, i, q)
        head = heads_before + row // T
        r = request * T + row % T
        store_global_words(at(out, r, head * DV + 4 * q),
                           (pack_bf16(acc[0] * inverse, acc[1] * inverse),
                            pack_bf16(acc[2] * inverse, acc[3] * inverse)))

    @cute.jit
    def merge_quantized(self, out, staged, mine, i: Int32, q: Int32, r: Int32, head: Int32):
        """`quantize`: row r's merged vector q of `head` in the quantized form (quantize.py's layout), as
        ops.quantize computes it from the fp32 values. A block's 8 vectors are 8 consecutive lanes
        (`merge_share`), all of them mine or none; every lane takes the block's shuffles."""
        DV: cutlass.Constexpr = self.value_width
        width: cutlass.Constexpr = self.heads * DV
        merged = cute.make_rmem_tensor(4, Float32)
        merged.fill(0.0)
        if mine:
            acc, inverse = self.merged_vector(staged, i, q)
            for e in cutlass.range_constexpr(4):
                merged[e] = acc[e] * inverse
        planes, scale = quantized_values([merged[e] for e in range(4)], self.quantize, BLOCK_VECTORS)
        if mine:
            column = head * DV + 4 * q
            for plane in cutlass.range_constexpr(self.quantize):
                store_global_words(at(out, r, plane * width + column), int8_word(planes[plane]))
            if q % BLOCK_VECTORS == 0:
                store_global_words(at(out, r, self.quantize * width + 4 * (column // Q8_0_BLOCK)), float_bits(scale))


class CopyLoads:
    """The cp.async engine: every thread copies 16-byte slices of the tile's rows (the kernel's
    `load_tile`), tracked by the tile loop's commit groups; nothing of its own to set up or wait on."""

    def __init__(self, attention: TileAttention):
        self.attention = attention

    def shared_layout(self, stages: int) -> list[tuple[int, int]]:
        """No shared memory of its own."""
        return []

    @cute.jit
    def start(self, smem, tid: Int32):
        """Nothing to set up: no ring of barriers."""
        return None

    @cute.jit
    def load(self, views, buffers, ring, request: Int32, g: Int32, p0: Int32, lo: Int32, hi: Int32, tile: Int32,
             tid: Int32, part: cutlass.Constexpr):
        """The kernel's `load_tile`, every row by cp.async."""
        self.attention.load_tile(views, buffers, request, g, p0, lo, hi, tile, tid, part)

    @cute.jit
    def wait(self, ring, tile: Int32):
        """Nothing: the tile loop's `wait_stage` covers every copy."""


class BulkLoads:
    """The bulk-copy engine: the cache rows of a tile (positions before p0) come by one
    `cp.async.bulk` a row, completing on their buffer's mbarrier. A row, not a page: the GQA
    cache is [pages, page size, KV heads, head], so only one position's key (or value) of one KV
    head is contiguous, and the shared rows carry 16 bytes of padding for ldmatrix. Warp 0
    issues them (lane 0 arms the barrier with the tile's bytes, `bulk_bytes` a position; each
    lane copies every 32nd row). The step's own rows and the zeros past the chunk are few (the
    last tile of a request) and keep `load_tile`'s cp.async (part 2), tracked by the tile loop's
    commit groups as before.

    Buffer b's barrier completes a phase per tile it holds (tile t: phase t // stages); every
    thread waits on it before the tile loop's `sync_threads`, and the buffer is refilled only
    after that barrier, which every warp reaches after its last read of the previous tile."""

    def __init__(self, attention: TileAttention):
        self.attention = attention

    def shared_layout(self, stages: int) -> list[tuple[int, int]]:
        return [(8 * stages, 8)]

    @cute.jit
    def start(self, smem, tid: Int32):
        """The buffers' mbarriers (one arrival a phase: lane 0's), visible to the async proxy
        and to every thread before any copy or wait."""
        ring = smem.allocate_array(cutlass.Uint64, self.attention.stages, byte_alignment=8)
        if tid == 0:
            for s in cutlass.range_constexpr(self.attention.stages):
                cute.arch.mbarrier_init(ring + s, 1)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()
        return ring

    @cute.jit
    def load(self, views, buffers, ring, request: Int32, g: Int32, p0: Int32, lo: Int32, hi: Int32, tile: Int32,
             tid: Int32, part: cutlass.Constexpr):
        """Tile `tile` into buffer tile % stages: `part` 1 the cache rows (one arrival on the
        buffer's barrier, expecting their bytes), 2 the step's rows and the zeros, 0 both. Rows
        past the chunk but before p0 come from the cache, as `load_tile` reads them."""
        N: cutlass.Constexpr = self.attention.tile
        start = lo + tile * N
        buffer = tile % self.attention.stages
        if cutlass.const_expr(part != 2):
            rows = cutlass.max(cutlass.min(p0 - start, Int32(N)), Int32(0))
            if tid < WARP:
                barrier = ring + buffer
                if tid == 0:
                    cute.arch.mbarrier_arrive_and_expect_tx(barrier, rows * self.attention.bulk_bytes())
                cute.arch.sync_warp()
                for j in cutlass.range_constexpr(-(-N // WARP)):
                    n = tid + j * WARP
                    if n < rows:
                        self.attention.bulk_rows(views, buffers, barrier, buffer, request, g, n, start + n)
        if cutlass.const_expr(part != 1):
            if start + N > p0:
                self.attention.load_tile(views, buffers, request, g, p0, lo, hi, tile, tid, 2)

    @cute.jit
    def wait(self, ring, tile: Int32):
        """Until tile `tile`'s bulk copies have landed (its buffer's phase tile // stages)."""
        S: cutlass.Constexpr = self.attention.stages
        cute.arch.mbarrier_wait(ring + tile % S, (tile // S) % 2)


class Attention(TileAttention):
    """GQA over a paged cache for `batch` requests of `tokens` rows; see the module docstring.
    Params: q, k, v, positions, pages, k_cache, v_cache, then out (one split) or partial and lse."""

    name = "attention"

    def __init__(self, batch, tokens, heads, kv_heads, head, page_size, max_pages, cache_pages, splits=1,
                 q_pitch=None, k_pitch=None, v_pitch=None, scale=None, schedule=None, quantize=0):
        AttentionSpec(batch, tokens, heads, kv_heads, head, page_size, max_pages, cache_pages, splits,
                      q_pitch, k_pitch, v_pitch).check()
        self.batch, self.tokens, self.heads, self.kv_heads, self.head = batch, tokens, heads, kv_heads, head
        self.page_size, self.max_pages, self.cache_pages, self.splits = page_size, max_pages, cache_pages, splits
        self.q_pitch = heads * head if q_pitch is None else int(q_pitch)
        self.k_pitch = kv_heads * head if k_pitch is None else int(k_pitch)
        self.v_pitch = kv_heads * head if v_pitch is None else int(v_pitch)
        self.scale = head ** -0.5 if scale is None else float(scale)
        self.key_width = self.value_width = head
        self.group = heads // kv_heads
        self.setup(AttentionSchedule.of(schedule or {}))
        self.page_slots = self.chunk_pages()
        if quantize:
            self.quantize = int(quantize)
            if self.quantize not in (1, 2) or not self.clustered:
                raise ValueError(f"attention quantize {quantize}: one or two int8 words a value, written where the "
                                 "chunks merge in the launch's cluster (combine 'cluster')")

    def chunk_pages(self) -> int:
        """Page-table entries a chunk's tile loop can reach: its whole tiles of a chunk of at most
        ceil(max_pages x page size / splits) keys, starting anywhere in a page (a tile past the
        chunk's end reads the next chunk's cache rows, masked, as `load_tile` says), rounded up to
        whole 16-byte vectors (the allocations after them keep their offsets); 0 (look each up as it
        is copied) above ATTENTION_STAGED_PAGES or where they would pass the shared memory."""
        chunk = -(-self.max_pages * self.page_size // self.splits)
        reach = -(-chunk // self.tile) * self.tile  # keys from the chunk's first: whole tiles
        slots = -(-min(self.max_pages, (self.page_size - 1 + reach - 1) // self.page_size + 1) // 4) * 4
        if slots > ATTENTION_STAGED_PAGES or shared_bytes(self.shared_layout() + [(4 * slots, 16)]) > SHARED_LIMIT:
            return 0
        return slots

    @cute.jit
    def stage_pages(self, page_s, views, request: Int32, lo: Int32, tid: Int32):
        """Request `request`'s page-table entries from the chunk's first page on into `page_s` (a plain
        load and store a thread; visible to the copies after the tile loop's first barrier). Returns the
        views `page_at` reads them from: the staged entries and the first page's index."""
        first = lo // self.page_size
        pages = views[3]
        for j in cutlass.range_constexpr(-(-self.page_slots // self.threads)):
            i = tid + j * self.threads
            if (i < self.page_slots) & (first + i < self.max_pages):
                page_s[i] = pages[request, first + i]
        return (page_s, first)

    @cute.jit
    def page_at(self, views, request: Int32, position: Int32):
        """The cache page of the request's `position`: from the staged entries where the chunk's are
        in shared memory (`stage_pages`), else from the page table."""
        if cutlass.const_expr(len(views) > 6):
            return views[6][position // self.page_size - views[7]]
        return views[3][request, position // self.page_size]

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
        return params + self.outputs(rows, d, heads)

    def buffer_bytes(self) -> list[int]:
        one = 2 * self.tile * self.key_pitch()
        return [one, one]

    def alloc_buffers(self, smem):
        shape = (self.stages, self.tile, self.key_pitch())
        return alloc(smem, BFloat16, shape), alloc(smem, BFloat16, shape)

    def key_buffer(self, buffers):
        return buffers[0]

    def value_buffer(self, buffers):
        return buffers[1], 0

    @cute.jit
    def __call__(self, *, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, positions: cute.Tensor,
                 pages: cute.Tensor, k_cache: cute.Tensor, v_cache: cute.Tensor, out: cute.Tensor = None,
                 partial: cute.Tensor = None, lse: cute.Tensor = None):
        launch(self, q, k, v, positions, pages, k_cache, v_cache, out, partial, lse)

    @cute.kernel
    def kernel(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor,
               k_cache: cute.Tensor, v_cache: cute.Tensor, out: cute.Tensor, partial: cute.Tensor, lse: cute.Tensor):
        release_dependents_at_entry(self)
        self.attend((q, k, v, pages, k_cache, v_cache), positions, out, partial, lse)

    @cute.jit
    def write_cache(self, views, request: Int32, g: Int32, p0: Int32, tid: Int32):
        """The request's rows of KV head g into the cache at positions p0..p0+tokens-1."""
        _, k, v, pages, k_cache, v_cache = views[:6]
        DV: cutlass.Constexpr = self.head // VECTOR
        copies: cutlass.Constexpr = self.tokens * DV
        sources = (cute.zipped_divide(k, (1, VECTOR)), cute.zipped_divide(v, (1, VECTOR)))
        targets = (cute.zipped_divide(k_cache, (1, 1, 1, VECTOR)), cute.zipped_divide(v_cache, (1, 1, 1, VECTOR)))
        for j in cutlass.range_constexpr(-(-copies // self.threads)):
            c = tid + j * self.threads
            if c < copies:
                t, vec = c // DV, c % DV
                position = p0 + t
                page = pages[request, position // self.page_size]
                for which in cutlass.range_constexpr(2):
                    held = cute.make_rmem_tensor(VECTOR, BFloat16)
                    cute.autovec_copy(sources[which][None, (request * self.tokens + t, g * DV + vec)], held)
                    cute.autovec_copy(held, targets[which][None, (page, position % self.page_size, g, vec)])

    @cute.jit
    def load_queries(self, views, q_s, request: Int32, g: Int32, first_row: Int32, tid: Int32):
        """The block's query rows into shared memory by cp.async; padding rows are zeros."""
        q = views[0]
        DV: cutlass.Constexpr = self.head // VECTOR
        R: cutlass.Constexpr = self.padded_rows
        T: cutlass.Constexpr = self.tokens
        for j in cutlass.range_constexpr(-(-(R * DV) // self.threads)):
            c = tid + j * self.threads
            i, vec = c // DV, c % DV
            row = first_row + i
            if c < R * DV:
                real = (i < self.block_rows) & (row < self.group * T)
                head = g * self.group + cutlass.select_(real, row // T, Int32(0))
                copy_g2s_zfill(at(q_s, i, vec * VECTOR),
                               at(q, request * T + cutlass.select_(real, row % T, Int32(0)),
                                  head * self.head + vec * VECTOR), real)

    @cute.jit
    def load_tile(self, views, buffers, request: Int32, g: Int32, p0: Int32, lo: Int32, hi: Int32, tile: Int32,
                  tid: Int32, part: cutlass.Constexpr):
        """cp.async of the keys and values at positions lo + tile * N + [0, N) into buffer
        tile % stages: earlier positions than p0 from the cache, the step's from k / v, zeros past
        hi. `part` 1: only cache rows (before the wait); 2: only the others; 0: all."""
        _, k, v, _, k_cache, v_cache = views[:6]
        DV: cutlass.Constexpr = self.head // VECTOR
        N: cutlass.Constexpr = self.tile
        P: cutlass.Constexpr = self.page_size
        k_s, v_s = buffers
        buffer = tile % self.stages
        for j in cutlass.range_constexpr(-(-(N * DV) // self.threads)):
            c = tid + j * self.threads
            n, vec = c // DV, c % DV  # neighbouring threads copy neighbouring 16 bytes of one key
            position = lo + tile * N + n
            if c < N * DV:
                if position < p0:
                    if cutlass.const_expr(part != 2):
                        page = self.page_at(views, request, position)
                        copy_g2s(at(k_s, buffer, n, vec * VECTOR), at(k_cache, page, position % P, g, vec * VECTOR))
                        copy_g2s(at(v_s, buffer, n, vec * VECTOR), at(v_cache, page, position % P, g, vec * VECTOR))
                else:
                    if cutlass.const_expr(part != 1):
                        real = position < hi
                        row = request * self.tokens + cutlass.select_(real, position - p0, Int32(0))
                        copy_g2s_zfill(at(k_s, buffer, n, vec * VECTOR), at(k, row, g * self.head + vec * VECTOR), real)
                        copy_g2s_zfill(at(v_s, buffer, n, vec * VECTOR), at(v, row, g * self.head + vec * VECTOR), real)

    def bulk_bytes(self) -> int:
        """Bytes a cache position brings to `BulkLoads`: KV head g's key row and value row."""
        return 2 * 2 * self.head

    @cute.jit
    def bulk_rows(self, views, buffers, barrier, buffer: Int32, request: Int32, g: Int32, n: Int32, position: Int32):
        """Key and value rows n of buffer `buffer`: KV head g's at `position` in the cache, a bulk
        copy each (`head` x 2 bytes, 16-byte aligned at both ends) completing on `barrier`."""
        _, _, _, _, k_cache, v_cache = views[:6]
        k_s, v_s = buffers
        P: cutlass.Constexpr = self.page_size
        page = self.page_at(views, request, position)
        copy_g2s(at(k_s, buffer, n, 0), at(k_cache, page, position % P, g, 0), 2 * self.head, barrier)
        copy_g2s(at(v_s, buffer, n, 0), at(v_cache, page, position % P, g, 0), 2 * self.head, barrier)


class LatentAttention(TileAttention):
    """Absorbed MLA over a paged latent cache for `batch` requests of `tokens` rows. Cache row
    `lora + rope` wide: the latent, then the shared rotated key. Head h's query is q[:, h's
    `lora` absorbed values] then qr[:, h x unit + nope : + rope] (its rotated part in the query
    projection, read in place); its key at a position is the whole cache row, its value the
    latent part. Every head attends in one CTA's rows (a row block when they do not fit), so the
    cache row is read once for all of them. Params: q, qr (rope > 0), latent, k_rope (rope > 0),
    positions, pages, cache, then out [rows, heads x lora] or partial and lse."""

    name = "latent_attention"

    def __new__(cls, *args, schedule=None, **kwargs):
        """The schedule's engine picks the class: "wgmma" builds a `LatentWgmma` (same params and
        launch interface, latent_wgmma.py), "mma" this mma.sync kernel; none named, LATENT_ENGINE,
        unless the schedule asks for one of the mma engine's own knobs (tile, stages, warps, bulk
        loads, the cluster combine)."""
        knobs = AttentionSchedule.of(schedule or {})
        engine = knobs.engine or ("mma" if knobs.mma_knobs() else LATENT_ENGINE)
        if cls is LatentAttention and engine == "wgmma":
            from lanec.codegen.kernels.latent_wgmma import LatentWgmma

            return super().__new__(LatentWgmma)
        return super().__new__(cls)

    def __init__(self, batch, tokens, heads, lora, rope, page_size, max_pages, cache_pages, splits=1, nope=None,
                 qr_pitch=None, latent_pitch=None, k_rope_pitch=None, scale=None, schedule=None):
        LatentAttentionSpec(batch, tokens, heads, lora, rope, page_size, max_pages, cache_pages, splits,
                            nope, qr_pitch, latent_pitch, k_rope_pitch).check()
        self.batch, self.tokens, self.heads, self.lora, self.rope = batch, tokens, heads, lora, rope
        self.page_size, self.max_pages, self.cache_pages, self.splits = page_size, max_pages, cache_pages, splits
        self.nope = nope or 0
        self.unit = self.nope + rope
        self.qr_pitch = heads * self.unit if qr_pitch is None else int(qr_pitch)
        self.latent_pitch = lora if latent_pitch is None else int(latent_pitch)
        self.k_rope_pitch = rope if k_rope_pitch is None else int(k_rope_pitch)
        self.scale = ((self.nope + rope) or lora) ** -0.5 if scale is None else float(scale)
        self.key_width, self.value_width = lora + rope, lora
        self.kv_heads, self.group = 1, heads
        self.setup(AttentionSchedule.of(schedule or {}))

    def params(self) -> list[TensorParam]:
        rows, heads = self.rows, self.heads
        params = [TensorParam("q", (rows, heads * self.lora), "bfloat16")]
        if self.rope:
            params.append(TensorParam("qr", (rows, heads * self.unit), "bfloat16", (self.qr_pitch, 1)))
        params.append(TensorParam("latent", (rows, self.lora), "bfloat16", (self.latent_pitch, 1)))
        if self.rope:
            params.append(TensorParam("k_rope", (rows, self.rope), "bfloat16", (self.k_rope_pitch, 1)))
        params += [TensorParam("positions", (rows,), "int32"),
                   TensorParam("pages", (self.batch, self.max_pages), "int32"),
                   TensorParam("cache", (self.cache_pages, self.page_size, self.key_width), "bfloat16",
                               written=True)]
        return params + self.outputs(rows, self.lora, heads)

    def buffer_bytes(self) -> list[int]:
        return [2 * self.tile * self.key_pitch()]

    def alloc_buffers(self, smem):
        return alloc(smem, BFloat16, (self.stages, self.tile, self.key_pitch()))

    def key_buffer(self, buffers):
        return buffers

    def value_buffer(self, buffers):
        return buffers, 0  # the values are the row's first lora values: read in place

    @cute.jit
    def __call__(self, *, q: cute.Tensor, latent: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor,
                 cache: cute.Tensor, qr: cute.Tensor = None, k_rope: cute.Tensor = None, out: cute.Tensor = None,
                 partial: cute.Tensor = None, lse: cute.Tensor = None):
        launch(self, q, qr, latent, k_rope, positions, pages, cache, out, partial, lse)

    @cute.kernel
    def kernel(self, q: cute.Tensor, qr: cute.Tensor, latent: cute.Tensor, k_rope: cute.Tensor,
               positions: cute.Tensor, pages: cute.Tensor, cache: cute.Tensor, out: cute.Tensor,
               partial: cute.Tensor, lse: cute.Tensor):
        release_dependents_at_entry(self)
        self.attend((q, qr, latent, k_rope, pages, cache), positions, out, partial, lse)

    @cute.jit
    def write_cache(self, views, request: Int32, g: Int32, p0: Int32, tid: Int32):
        """The request's cache rows [latent, k_rope] at positions p0..p0+tokens-1."""
        _, _, latent, k_rope, pages, cache = views
        LV: cutlass.Constexpr = self.lora // VECTOR
        RV: cutlass.Constexpr = self.rope // VECTOR
        copies: cutlass.Constexpr = self.tokens * (LV + RV)
        target = cute.zipped_divide(cache, (1, 1, VECTOR))
        for j in cutlass.range_constexpr(-(-copies // self.threads)):
            c = tid + j * self.threads
            if c < copies:
                t, vec = c // (LV + RV), c % (LV + RV)
                position = p0 + t
                page = pages[request, position // self.page_size]
                held = cute.make_rmem_tensor(VECTOR, BFloat16)
                r = request * self.tokens + t
                if cutlass.const_expr(self.rope == 0):
                    cute.autovec_copy(cute.zipped_divide(latent, (1, VECTOR))[None, (r, vec)], held)
                elif vec < LV:
                    cute.autovec_copy(cute.zipped_divide(latent, (1, VECTOR))[None, (r, vec)], held)
                else:
                    cute.autovec_copy(cute.zipped_divide(k_rope, (1, VECTOR))[None, (r, vec - LV)], held)
                cute.autovec_copy(held, target[None, (page, position % self.page_size, vec)])

    @cute.jit
    def load_queries(self, views, q_s, request: Int32, g: Int32, first_row: Int32, tid: Int32):
        """Row i of the block: [q's absorbed values, qr's rotated part] of its head and token."""
        q, qr = views[0], views[1]
        LV: cutlass.Constexpr = self.lora // VECTOR
        RV: cutlass.Constexpr = self.rope // VECTOR
        R: cutlass.Constexpr = self.padded_rows
        T: cutlass.Constexpr = self.tokens
        per: cutlass.Constexpr = LV + RV
        for j in cutlass.range_constexpr(-(-(R * per) // self.threads)):
            c = tid + j * self.threads
            i, vec = c // per, c % per
            row = first_row + i
            if c < R * per:
                real = (i < self.block_rows) & (row < self.group * T)
                head = cutlass.select_(real, row // T, Int32(0))
                r = request * T + cutlass.select_(real, row % T, Int32(0))
                if cutlass.const_expr(self.rope == 0):
                    copy_g2s_zfill(at(q_s, i, vec * VECTOR), at(q, r, head * self.lora + vec * VECTOR), real)
                elif vec < LV:
                    copy_g2s_zfill(at(q_s, i, vec * VECTOR), at(q, r, head * self.lora + vec * VECTOR), real)
                else:
                    copy_g2s_zfill(at(q_s, i, vec * VECTOR),
                                   at(qr, r, head * self.unit + self.nope + (vec - LV) * VECTOR), real)

    @cute.jit
    def load_tile(self, views, buffers, request: Int32, g: Int32, p0: Int32, lo: Int32, hi: Int32, tile: Int32,
                  tid: Int32, part: cutlass.Constexpr):
        """cp.async of the cache rows at positions lo + tile * N + [0, N) into buffer tile %
        stages: earlier positions than p0 from the cache, the step's from latent / k_rope, zeros
        past hi. `part` as `Attention.load_tile`."""
        _, _, latent, k_rope, pages, cache = views
        LV: cutlass.Constexpr = self.lora // VECTOR
        per: cutlass.Constexpr = self.key_width // VECTOR
        N: cutlass.Constexpr = self.tile
        P: cutlass.Constexpr = self.page_size
        buffer = tile % self.stages
        for j in cutlass.range_constexpr(-(-(N * per) // self.threads)):
            c = tid + j * self.threads
            n, vec = c // per, c % per
            position = lo + tile * N + n
            if c < N * per:
                if position < p0:
                    if cutlass.const_expr(part != 2):
                        page = pages[request, position // P]
                        copy_g2s(at(buffers, buffer, n, vec * VECTOR), at(cache, page, position % P, vec * VECTOR))
                else:
                    if cutlass.const_expr(part != 1):
                        real = position < hi
                        r = request * self.tokens + cutlass.select_(real, position - p0, Int32(0))
                        if cutlass.const_expr(self.rope == 0):
                            copy_g2s_zfill(at(buffers, buffer, n, vec * VECTOR), at(latent, r, vec * VECTOR), real)
                        elif vec < LV:
                            copy_g2s_zfill(at(buffers, buffer, n, vec * VECTOR), at(latent, r, vec * VECTOR), real)
                        else:
                            copy_g2s_zfill(at(buffers, buffer, n, vec * VECTOR),
                                           at(k_rope, r, (vec - LV) * VECTOR), real)

    def bulk_bytes(self) -> int:
        """Bytes a cache position brings to `BulkLoads`: the whole latent row."""
        return 2 * self.key_width

    @cute.jit
    def bulk_rows(self, views, buffers, barrier, buffer: Int32, request: Int32, g: Int32, n: Int32, position: Int32):
        """Row n of buffer `buffer`: the latent cache row at `position`, one bulk copy
        ((lora + rope) x 2 bytes) completing on `barrier`."""
        _, _, _, _, pages, cache = views
        P: cutlass.Constexpr = self.page_size
        page = pages[request, position // P]
        copy_g2s(at(buffers, buffer, n, 0), at(cache, page, position % P, 0), 2 * self.key_width, barrier)


def combine_lanes(splits: int) -> tuple[int, int]:
    """attention_combine's lanes a slice (the splits rounded up to a power of two, at most a warp) and
    chunks a lane."""
    lanes = min(WARP, 1 << (splits - 1).bit_length())
    return lanes, -(-splits // lanes)


@cute.jit
def chunk_slice(partial, chunk, row, head, dv, partials: cutlass.Constexpr):
    """The 16-byte slice `dv` of head `head`, row `row`, of chunk `chunk`'s partial row (fp32 or bf16), as
    VECTOR floats."""
    if cutlass.const_expr(partials == "bfloat16"):  # the slice in one 16-byte load
        return sum((unpack_bf16(word) for word in load_activation_bf16x8(at(partial, chunk, row, head, dv * VECTOR))),
                   ())
    return load_f32x4(at(partial, chunk, row, head, dv * VECTOR)) + load_f32x4(at(partial, chunk, row, head,
                                                                                   dv * VECTOR + 4))


def weighted_sums(lses: list, slices: list, top) -> tuple:
    """One lane's part of a merge: its chunks' weights exp(lse - top) summed, then each of the slice's VECTOR
    values weighted and summed over its chunks, in chunk order (a chunk without keys has lse = -inf: exp2(-inf)
    = 0 and its partial is 0). Plain Python at trace time: attention_combine's and `merged_slice`'s."""
    weights = [cute.math.exp2((lse - top) * Float32(LOG2E), fastmath=True) for lse in lses]
    sums = [sum(weights[1:], weights[0])]
    for e in range(VECTOR):
        total = weights[0] * slices[0][e]
        for k in range(1, len(weights)):
            total = total + weights[k] * slices[k][e]
        sums.append(total)
    return tuple(sums)


def butterfly_first(leaves: list, level: int, lane: int) -> tuple:
    """`warp_reduce`'s sum (tuples, added part by part) at `lane` after `level` butterfly steps over
    len(leaves) lanes (a power of two) holding `leaves`: the same additions in the same order, in one
    thread (plain Python at trace time: only the lanes the result needs are added)."""
    if level == 0:
        return leaves[lane]
    offset = len(leaves) >> level
    own, partner = butterfly_first(leaves, level - 1, lane), butterfly_first(leaves, level - 1, lane ^ offset)
    return tuple(a + b for a, b in zip(own, partner, strict=True))


@cute.jit
def merged_slice(partial, lse, row, head, dv, splits: cutlass.Constexpr, partials: cutlass.Constexpr):
    """One thread's merge of the 16-byte slice `dv` of head `head`, row `row`, from the `splits` chunks'
    partial rows and log-sum-exps, as bf16 (a register tensor of VECTOR): the sums attention_combine's
    lane group makes, in the same order (its butterfly of lanes replayed in the thread), so the values
    are bitwise that kernel's. gemv's combine prologue (a latent attention's values merged where they
    are expanded) reads them so."""
    L, per_lane = combine_lanes(splits)
    top = Float32(NEG_INF)
    lses, slices = [], []
    for i in cutlass.range_constexpr(L):
        for k in cutlass.range_constexpr(per_lane):
            chunk = i + k * L
            value = Float32(NEG_INF)
            if cutlass.const_expr(chunk < splits):
                value = lse[chunk, row, head]
            lses.append(value)
            slices.append(chunk_slice(partial, min(chunk, splits - 1), row, head, dv, partials))
            top = cute.arch.fmax(top, value)
    leaves = [weighted_sums(lses[i * per_lane:(i + 1) * per_lane], slices[i * per_lane:(i + 1) * per_lane], top)
              for i in range(L)]
    sums = butterfly_first(leaves, L.bit_length() - 1, 0)
    merged = cute.make_rmem_tensor(VECTOR, BFloat16)
    inverse = Float32(1.0) / sums[0]
    for e in cutlass.range_constexpr(VECTOR):
        merged[e] = BFloat16(sums[1 + e] * inverse)
    return merged


class AttentionCombine:
    """out = sum_s exp(lse_s - max) partial_s / sum_s exp(lse_s - max) over `splits` chunks of
    `rows` x `heads` heads of `head` values (a chunk with lse = -inf adds nothing), the partial rows
    in fp32 or (`partials` "bfloat16") bf16. Params: partial, lse, out.

    A group of `lanes` lanes (the splits rounded up to a power of two, at most a warp) merges one
    16-byte slice of the output: lane i of the group reads chunks i, i + lanes, ... , every load of
    the merge issued before the first is used; the group's max, its weights' sum and the weighted
    slice meet by butterfly shuffles (a fixed order: deterministic), and the group's first lane
    stores the slice. A warp merges 32 / lanes slices. (A thread a slice walking the chunks waited
    for each chunk's loads in turn, a round trip to memory a chunk: ncu on the H200 timed 64 chunks at
    30.7 us.)"""

    name = "attention_combine"

    def __init__(self, rows, heads, head, splits, partials="float32"):
        AttentionCombineSpec(rows, heads, head, splits, partials).check()
        self.rows, self.heads, self.head, self.splits, self.partials = rows, heads, head, splits, partials
        self.slices = heads * head // VECTOR
        self.lanes, self.per_lane = combine_lanes(splits)  # a slice's lanes (one chunk each, or more), chunks a lane
        self.slices_a_block = COMBINE_THREADS // self.lanes

    def params(self) -> list[TensorParam]:
        return [TensorParam("partial", (self.splits, self.rows, self.heads, self.head), self.partials),
                TensorParam("lse", (self.splits, self.rows, self.heads), "float32"),
                TensorParam("out", (self.rows, self.heads * self.head), "bfloat16", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.rows, -(-self.slices // self.slices_a_block), 1),
                           block=(COMBINE_THREADS, 1, 1))

    @cute.jit
    def __call__(self, *, partial: cute.Tensor, lse: cute.Tensor, out: cute.Tensor):
        launch(self, partial, lse, out)

    @cute.kernel
    def kernel(self, partial: cute.Tensor, lse: cute.Tensor, out: cute.Tensor):
        release_dependents_at_entry(self)
        tid, _, _ = cute.arch.thread_idx()
        row, block, _ = cute.arch.block_idx()
        DV: cutlass.Constexpr = self.head // VECTOR
        L: cutlass.Constexpr = self.lanes
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents wait for this grid's end to read out
        index = block * self.slices_a_block + tid // L
        lane = tid % L
        # every lane takes part in the shuffles: a slice past the output reads slice 0 and stores nothing
        slice_ = cutlass.select_(index < self.slices, index, Int32(0))
        head, dv = slice_ // DV, slice_ % DV
        lses, slices = [], []
        for k in cutlass.range_constexpr(self.per_lane):
            chunk = lane + k * L
            read = cutlass.min(chunk, self.splits - 1)
            value = lse[read, row, head]
            if cutlass.const_expr((k + 1) * L > self.splits):  # lanes past the last chunk add nothing
                value = cutlass.select_(chunk < self.splits, value, Float32(NEG_INF))
            lses.append(value)
            slices.append(chunk_slice(partial, read, row, head, dv, self.partials))
        top = lses[0]
        for k in cutlass.range_constexpr(1, self.per_lane):
            top = cute.arch.fmax(top, lses[k])
        top = warp_reduce(top, cute.arch.fmax, width=L)
        sums = warp_reduce(weighted_sums(lses, slices, top), lambda a, b: tuple(x + y for x, y in zip(a, b)), width=L)
        if (lane == 0) & (index < self.slices):
            merged = cute.make_rmem_tensor(VECTOR, BFloat16)
            inverse = Float32(1.0) / sums[0]
            for e in cutlass.range_constexpr(VECTOR):
                merged[e] = BFloat16(sums[1 + e] * inverse)
            cute.autovec_copy(merged, cute.zipped_divide(out, (1, VECTOR))[None, (row, index)])
