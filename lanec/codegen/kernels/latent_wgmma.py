"""latent_attention's wgmma engine (`AttentionSchedule(engine="wgmma")`): the same absorbed MLA,
params and launch interface as the mma.sync kernel (attention.py's `LatentAttention`), multiplied by
one or two warpgroups' wgmma from shared memory.

Measured on the H200 (bench/RESULTS.md, 2026-11-30): 0.96-2.24x the mma.sync kernel on the 21 MLA rows
of bench/attention.py (1.5x at Kimi Linear 32k batch 64, 74% of the roofline; 2.24x at DeepSeek-V3's
128 heads), the default engine (LATENT_ENGINE).

Why: the mma.sync kernel's eight warps each ldmatrix every query row for their 8 keys of a tile, so a
64-key tile reads about 420 KB of shared memory for 64 KB of cache, and its 2 buffers of 64 keys (all
that fit beside the queries) leave one tile in flight: on the H200 it reads Kimi Linear's latent cache
at 42-49% of the copy bandwidth at batch 8-64 (bench/RESULTS.md).

Here the operands are swapped so that any head count fits: the keys are wgmma's M side and the
query rows its N side (a warpgroup's share of at most 32 rows, padded to whole 8-row steps). A block
of more than 32 rows (DeepSeek-V3's 128 heads, Kimi Linear's speculative rows) runs on
LATENT_WARPGROUPS warpgroups of up to 32 rows each: they read the same chunks, so the cache is read
once for 64 rows; each has its own queries, P^T and softmax state, and all sync at the CTA barriers.

1. S^T = K Q^T: A is the tile's 64 cache rows, K-major as stored, B the block's query rows, both in
   128-byte-swizzled chunks of 64 values (a chunk of a tile is 64 keys x 64 values, 8 KB); a row past
   the key width (lora + rope not a multiple of 64) is zeros in both.
2. Softmax over the keys: a column (query row) of S^T is spread over its warpgroup's four warps (16
   keys each) and over lanes of equal `lane % 4`: its tile maximum meets in shared memory; the
   running max and sum are a thread's per column, its accumulators rescaled in registers. P^T (bf16) goes to shared
   memory in wgmma's B layout (row, key; K-major).
3. O^T += V^T P^T, one wgmma chain a 64-value chunk of the latent: A is V^T, read M-major from the
   same swizzled chunks the scores read K-major (the value is the row's latent part), B is P^T. The
   accumulators are (value, row): `value_width x rows / 128` floats a thread (128 at 512 x 32).

With the schedule's `block_rows` (8 or 16; shim.py's `latent_cut` names it where a short context leaves SMs idle) a
block holds at most that many rows on one warpgroup (wgmma's N 8 or 16), and more blocks read the same chunks: at
Kimi Linear's 1k keys and batch 1, 16 chunks of 4 blocks of 8 rows take 6.7 us where 8 chunks of one 32-row block took
11.8 (bench/RESULTS.md, 2026-12-02): a CTA's fixed part (the queries' load, the epilogue's staged rows) and its
tiles' softmax shrink with its rows, while its cache reads, shared by the blocks in L2, barely cost more.

The cache streams through a ring of `slots` chunk slots, as many as the shared memory holds beside the
queries, up to three tiles (23 of 8 KB at Kimi Linear's 512-wide row and 32 rows: 2.9 tiles), not
whole tiles: chunk g of the CTA (tile g // KC, chunk g % KC) lives in slot g % slots. At the top of
tile t, once tile t - 1's P V has retired, every chunk below t KC + slots can be copied: the rest of
tile t + 1 and the first `spare` (slots - 2 KC) chunks of tile t + 2, committed as two cp.async
groups so that tile t + 1 waits only for its own (`cp.async.wait_group 1`). So about two tiles stay
in flight while one is multiplied. The cache chunks of the first tile and a half go out before
`griddepcontrol.wait`; the step's own rows (positions from p0 on, read from `latent` / `k_rope`),
the cache write and the queries after it.

The tile loop issues instructions, not bytes, at one warpgroup an SM: ncu on the H200 (Kimi Linear, 32k keys,
one chunk) counted 1750 warp instructions a tile and one issued every 2.6 cycles, 2.65 us a tile. So a
tile whose keys are all cache rows inside the chunk (`whole`) takes an unchecked path: its copies skip the
position tests and the step-row branch, its scores skip the mask, and the accumulators are rescaled only
where a warp's running max moved (one vote a tile). The max is `fmax` (no NaN test) and a chunk's slot
is wrapped by one compare, not a division. The path costs code, so it is compiled only where a chunk of the
longest context spans LATENT_UNCHECKED_TILES tiles (facts.py, `unchecked`).

What did not help, measured on the H200 (bench/RESULTS.md, 2026-12-01). At batch 8 a warp-tile of the
unchecked path is about 1330 SASS instructions, at 3.35 cycles each, and these did not move it by more
than 3%:
- TMA fills of the whole tiles: 12% fewer instructions, the same time (commit 1ba5ff1 keeps the code);
- Kimi Linear's 32 rows on two warpgroups of 16: 10-14% slower;
- moving a running max only past a slack: +1-3%, and -3% at DeepSeek-V3's batch 64.
Nor did two warpgroups on alternate tiles, each copying its own into a private ring (branch wip/latent-producer:
0.97-1.30x the time, the private rings halving the copies in flight), and a producer warpgroup's 384 threads
spill here (bench/RESULTS.md).

A warp copies four whole 128-byte chunk rows at a time (thread tid: vector tid % 8 of keys tid / 8 +
(threads / 8) x), so every 32-byte sector asked of L2 is whole. (A key a thread, 16 bytes of each
sector, doubled the L2's requests and held the kernel at 86% of L2 throughput for 44% of DRAM's: ncu
on the H200.) Its keys' pages in the next two tiles are read at the top of a tile, in flight during
the wait, and the copies go out while the scores' wgmma runs. The epilogue stages the normalized
rows (fp32) in the slots and stores whole vectors: `out` (one chunk) or each chunk's `partial` and
`lse` for attention_combine. One chunk of the keys a CTA (split-KV), as the mma engine. With combine
"cluster" (the schedule names engine "wgmma" too: alone it picks the mma engine) the chunks' CTAs are
one cluster and merge the staged rows over DSMEM into `out`, as the mma engine's cluster combine does;
the bulk loads are the mma engine's."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90
from cutlass import BFloat16, Float32, Int32
from cutlass.tensor_utils import LayoutEnum

from lanec.codegen.facts import (
    ATTENTION_CLUSTER_SPLITS,
    LATENT_TILE_KEYS,
    SHARED_LIMIT,
    VECTOR,
    WARP,
    AttentionSchedule,
    latent_unchecked,
    latent_wgmma_blocks,
)
from lanec.codegen.kernels.attention import LN2, NEG_INF, LatentAttention
from lanec.codegen.kernels.base import LaunchShape, release_dependents
from lanec.codegen.kernels.gemm_wgmma import ALIGN, SWIZZLE_ROWS, WARPGROUP, WGMMA_K, swizzled
from lanec.codegen.kernels.primitives import (
    LOG2E,
    alloc,
    at,
    copy_g2s,
    copy_g2s_zfill,
    load_f32x4,
    pack_bf16,
    store_f32x4,
    store_global_words,
)

KEYS = LATENT_TILE_KEYS  # keys a tile: the scores' M side
CHUNK = 64  # values a chunk: one 128-byte swizzle row
CHUNK_BYTES = 2 * KEYS * CHUNK
WARPS = WARPGROUP // WARP
VECTORS = CHUNK // VECTOR  # 16-byte vectors a chunk row
REDUCE_SHIFTS = (4, 8, 16)  # lanes of equal lane % 4: the keys of one column in a warp


class LatentWgmma(LatentAttention):
    """Absorbed MLA on wgmma; see the module docstring. `LatentAttention(...)` builds it when the
    schedule's engine is "wgmma", or names none and asks for no mma-only knob (LATENT_ENGINE)."""

    engine = "wgmma"

    def setup(self, schedule: AttentionSchedule) -> None:
        self.rows = self.batch * self.tokens
        named = schedule.mma_knobs()
        if named and named[0] in ("tile", "stages", "warps"):
            raise ValueError(f"{self.name}: engine 'wgmma' sizes its own ring of 64-key chunks; `{named[0]}` is the "
                             "mma engine's knob")
        if [knob for knob in named if knob != "combine"]:
            raise ValueError(f"{self.name}: engine 'wgmma' loads by cp.async (loads 'copy')")
        if self.value_width % CHUNK:
            raise ValueError(f"{self.name}: engine 'wgmma' takes whole 64-value chunks of the latent; got "
                             f"{self.value_width}")
        self.loads, self.clustered = "copy", schedule.combine == "cluster"
        self.partials = schedule.partials or "float32"
        if self.partials != "float32" and (self.clustered or self.splits == 1):
            raise ValueError(f"{self.name}: partials {self.partials!r} are the rows of chunks attention_combine "
                             "merges (splits above 1, combine 'launch')")
        if self.clustered and not 2 <= self.splits <= ATTENTION_CLUSTER_SPLITS:
            raise ValueError(f"{self.name}: combine 'cluster' makes the {self.splits} chunks one cluster: 2 to "
                             f"{ATTENTION_CLUSTER_SPLITS} chunks")
        # a warpgroup a 32-row share of the block: two where the rows pass 32 (the cache read once for 64)
        self.groups, self.row_blocks, self.block_rows = latent_wgmma_blocks(self.group * self.tokens,
                                                                            schedule.block_rows)
        self.threads, self.warps, self.tile = WARPGROUP * self.groups, WARPS * self.groups, KEYS
        self.key_chunks = -(-self.key_width // CHUNK)
        self.value_chunks = self.value_width // CHUNK
        self.share = -(-self.block_rows // self.groups)  # block rows a warpgroup
        self.padded_rows = -(-self.share // SWIZZLE_ROWS) * SWIZZLE_ROWS  # wgmma's N: a warpgroup's rows
        fixed = self.queries_bytes() + self.probabilities_bytes() + ALIGN + self.reduce_bytes()
        # at most three tiles: the copies run at most two tiles ahead (a narrower row would fit more)
        self.slots = min((SHARED_LIMIT - fixed) // CHUNK_BYTES, 3 * self.key_chunks)
        if self.slots < 2 * self.key_chunks:
            raise ValueError(f"{self.name}: two tiles of {self.key_chunks} chunks do not fit beside the queries "
                             f"({self.slots} slots)")
        if 4 * self.groups * self.padded_rows * self.staged_pitch() > self.slots * CHUNK_BYTES:
            raise ValueError(f"{self.name}: the block's normalized rows do not fit the {self.slots} chunk slots")
        self.spare = self.slots - 2 * self.key_chunks  # chunks of tile t + 2 in flight while tile t multiplies
        # the unchecked path of whole cache tiles, compiled where a chunk of the longest context spans enough
        # tiles to pay for its code
        self.unchecked = latent_unchecked(self.max_pages * self.page_size, self.splits)

    def queries_bytes(self) -> int:
        return 2 * self.groups * self.key_chunks * self.padded_rows * CHUNK

    def probabilities_bytes(self) -> int:
        return 2 * self.groups * self.padded_rows * KEYS

    def reduce_bytes(self) -> int:
        return 4 * 2 * self.groups * WARPS * self.padded_rows

    def region_bytes(self) -> int:
        return self.slots * CHUNK_BYTES + self.queries_bytes() + self.probabilities_bytes()

    def staged_pitch(self) -> int:
        """fp32 values a staged output row: the latent and 4 more (rows 4 banks apart)."""
        return self.value_width + 4

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.splits, self.row_blocks, self.batch), block=(self.threads, 1, 1),
                           cluster=(self.splits if self.clustered else 1, 1, 1),
                           shared_bytes=self.region_bytes() + ALIGN + self.reduce_bytes())

    @cute.jit
    def attend(self, views, positions, out, partial, lse):
        tid, _, _ = cute.arch.thread_idx()
        split, block, request = cute.arch.block_idx()
        R: cutlass.Constexpr = self.padded_rows
        KC: cutlass.Constexpr = self.key_chunks
        VC: cutlass.Constexpr = self.value_chunks
        C: cutlass.Constexpr = self.slots
        G: cutlass.Constexpr = self.groups
        spare: cutlass.Constexpr = self.spare
        wg, thread = tid // WARPGROUP, tid % WARPGROUP  # the warpgroup, and the thread in it
        warp, lane = thread // WARP, tid % WARP
        first_row = block * self.block_rows
        own_row = first_row + wg * self.share  # the warpgroup's first row
        smem = cutlass.memory.SmemAllocator()
        region = smem.allocate(self.region_bytes(), ALIGN)
        slots = cute.recast_ptr(region, dtype=BFloat16)
        queries = slots + C * KEYS * CHUNK
        probabilities = queries + G * KC * R * CHUNK
        red = alloc(smem, Float32, (G, 2, WARPS, R))
        own_queries = queries + wg * (KC * R * CHUNK)
        own_probabilities = probabilities + wg * (R * KEYS)

        tiler = (KEYS, R, CHUNK)
        keys_layout = sm90.make_smem_layout_a(LayoutEnum.ROW_MAJOR, tiler, BFloat16, C)
        values_layout = sm90.make_smem_layout_a(LayoutEnum.COL_MAJOR, tiler, BFloat16, C)
        queries_layout = sm90.make_smem_layout_b(LayoutEnum.ROW_MAJOR, tiler, BFloat16, KC)
        probabilities_layout = sm90.make_smem_layout_b(LayoutEnum.ROW_MAJOR, tiler, BFloat16, 1)
        sk = cute.make_tensor(cute.recast_ptr(slots, keys_layout.inner, dtype=BFloat16), keys_layout.outer)
        sv = cute.make_tensor(cute.recast_ptr(slots, values_layout.inner, dtype=BFloat16), values_layout.outer)
        sq = cute.make_tensor(cute.recast_ptr(own_queries, queries_layout.inner, dtype=BFloat16),
                              queries_layout.outer)
        sp = cute.make_tensor(cute.recast_ptr(own_probabilities, probabilities_layout.inner, dtype=BFloat16),
                              probabilities_layout.outer)
        k_major, m_major = cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.MN
        score_mma = sm90.make_trivial_tiled_mma(BFloat16, BFloat16, k_major, k_major, Float32, (1, 1, 1), (KEYS, R))
        value_mma = sm90.make_trivial_tiled_mma(BFloat16, BFloat16, m_major, k_major, Float32, (1, 1, 1), (CHUNK, R))
        score_thread, value_thread = score_mma.get_slice(thread), value_mma.get_slice(thread)
        fragment_k = score_mma.make_fragment_A(score_thread.partition_A(sk))
        fragment_q = score_mma.make_fragment_B(score_thread.partition_B(sq))
        fragment_v = value_mma.make_fragment_A(value_thread.partition_A(sv))
        fragment_p = value_mma.make_fragment_B(value_thread.partition_B(sp))
        # (key, row) of each score; the same (value, row) pattern in each chunk's output accumulators
        coords = score_thread.partition_C(cute.make_identity_tensor((KEYS, R)))
        s = cute.make_rmem_tensor(coords.shape, Float32)
        o = [cute.make_rmem_tensor(coords.shape, Float32) for _ in range(VC)]
        score_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        value_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)

        p0, lo, hi = self.key_range(positions, request, split)
        total = (hi - lo + KEYS - 1) // KEYS * KC  # chunks of the CTA's tiles
        # tile 0 and the first `spare` chunks of tile 1: their cache rows fly while the predecessor ends
        first_pages = [self.pages_of(views, request, lo, Int32(tile), tid) for tile in range(2)]
        self.load_chunks(views, slots, request, p0, lo, hi, Int32(0), KC, total, tid, 1, first_pages[0])
        cute.arch.cp_async_commit_group()
        self.load_chunks(views, slots, request, p0, lo, hi, Int32(KC), spare, total, tid, 1, first_pages[1])
        cute.arch.cp_async_commit_group()
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents wait for this grid's end to read its outputs
        if (split == 0) & (first_row == 0):  # one CTA a request writes the step's rows
            self.write_cache(views, request, 0, p0, tid)
        self.load_block_queries(views, queries, request, first_row, tid)
        self.load_chunks(views, slots, request, p0, lo, hi, Int32(0), KC + spare, total, tid, 2, None)
        cute.arch.cp_async_commit_group()

        m_run = cute.make_rmem_tensor(R // 4, Float32)
        m_run.fill(NEG_INF)
        l_run = cute.make_rmem_tensor(R // 4, Float32)
        l_run.fill(0.0)
        for c in cutlass.range_constexpr(VC):
            o[c].fill(0.0)
        # tiles whose keys are all cache rows (before p0) and inside the chunk: copied and scored unchecked
        whole = (cutlass.min(p0, hi) - lo) // KEYS
        for tile in range((hi - lo + KEYS - 1) // KEYS):
            # the pages of this thread's key in the tiles whose chunks go out below: in flight during the wait
            next_pages = self.pages_of(views, request, lo, tile + 1, tid)
            after_pages = self.pages_of(views, request, lo, tile + 2, tid)
            if tile == 0:
                cute.arch.cp_async_wait_group(0)  # with the queries and the step's rows
            else:
                cute.arch.cp_async_wait_group(1)  # all but tile t + 1's first chunks
            cute.arch.fence_proxy("async.shared", space="cta")  # this thread's copies visible to wgmma
            cute.nvgpu.warpgroup.wait_group(0)  # tile t - 1's P V has retired: its slots and P^T are free
            cute.arch.sync_threads()

            s.fill(0.0)
            cute.nvgpu.warpgroup.fence()
            tile_slot = (tile * KC) % C
            for c in cutlass.range_constexpr(KC):
                slot = self.wrapped(tile_slot + c)
                for kb in cutlass.range_constexpr(CHUNK // WGMMA_K):
                    cute.gemm(score_mma, s, fragment_k[None, None, kb, slot], fragment_q[None, None, kb, c], s)
            cute.nvgpu.warpgroup.commit_group()
            # the next chunks' copies go out while the scores multiply
            ahead = (tile + 1) * KC + spare
            self.load_ahead(views, slots, request, p0, lo, hi, ahead, KC - spare, total, tid, next_pages,
                            tile + 2 <= whole)
            cute.arch.cp_async_commit_group()
            self.load_ahead(views, slots, request, p0, lo, hi, (tile + 2) * KC, spare, total, tid, after_pages,
                            tile + 3 <= whole)
            cute.arch.cp_async_commit_group()
            cute.nvgpu.warpgroup.wait_group(0)

            self.score_tile(s, o, coords, m_run, l_run, red, own_probabilities, lo + tile * KEYS,
                            cutlass.min(hi - lo - tile * KEYS, Int32(KEYS)), p0, own_row, wg, warp, lane,
                            tile + 1 <= whole)
            cute.arch.fence_proxy("async.shared", space="cta")  # P^T visible to wgmma
            cute.arch.sync_threads()
            cute.nvgpu.warpgroup.fence()
            for c in cutlass.range_constexpr(VC):
                slot = self.wrapped(tile_slot + c)
                for kb in cutlass.range_constexpr(KEYS // WGMMA_K):
                    cute.gemm(value_mma, o[c], fragment_v[None, None, kb, slot], fragment_p[None, None, kb, 0], o[c])
            cute.nvgpu.warpgroup.commit_group()
        cute.arch.cp_async_wait_group(0)
        cute.nvgpu.warpgroup.wait_group(0)
        self.store_block(views, out, partial, lse, o, coords, m_run, l_run, red, slots, split, request, first_row,
                         wg, warp, lane, tid)

    @cute.jit
    def score_tile(self, s, o, coords, m_run, l_run, red, probabilities, start: Int32, count: Int32, p0: Int32,
                   first_row: Int32, wg: Int32, warp: Int32, lane: Int32, whole_tile):
        """The tile loop's `softmax`: unmasked where `whole_tile` says its keys are all cache rows inside
        the chunk and the kernel has that path (`unchecked`), else masked."""
        if cutlass.const_expr(self.unchecked):
            if whole_tile:
                self.softmax(s, o, coords, m_run, l_run, red, probabilities, start, Int32(KEYS), p0, first_row, wg,
                             warp, lane, False)
            else:
                self.softmax(s, o, coords, m_run, l_run, red, probabilities, start, count, p0, first_row, wg, warp,
                             lane, True)
        else:
            self.softmax(s, o, coords, m_run, l_run, red, probabilities, start, count, p0, first_row, wg, warp, lane,
                         True)

    @cute.jit
    def softmax(self, s, o, coords, m_run, l_run, red, probabilities, start: Int32, count: Int32, p0: Int32,
                first_row: Int32, wg: Int32, warp: Int32, lane: Int32, masked: cutlass.Constexpr):
        """Warpgroup wg's share of the tile (its rows from `first_row`): the scores (base 2, masked
        past the chunk and after a row's own position where `masked`: a tile of cache rows inside the
        chunk needs no mask) made probabilities in its P^T; each column's running max and sum
        updated, and the output rescaled (with `unchecked`, only where a max of the warp's columns
        moved: a tile that moves none, most of a long context's, leaves the accumulators). Score e of a thread:
        row 8 (e // 4) + 2 (lane % 4) + e % 2, key 16 warp + lane / 4 + 8 ((e // 2) % 2)."""
        T: cutlass.Constexpr = self.tokens
        R: cutlass.Constexpr = self.padded_rows
        scale = Float32(self.scale * LOG2E)
        for j in cutlass.range_constexpr(R // 8):
            for v in cutlass.range_constexpr(2):
                top = Float32(NEG_INF)
                for i in cutlass.range_constexpr(2):
                    e = 4 * j + 2 * i + v
                    value = s[e] * scale
                    if cutlass.const_expr(masked):
                        key, row = coords[e]
                        limit = p0 + (first_row + row) % T  # the row's own position: it sees no later key
                        value = cutlass.select_((key < count) & (start + key <= limit), value, Float32(NEG_INF))
                    s[e] = value
                    top = cute.arch.fmax(top, value)
                for shift in cutlass.range_constexpr(len(REDUCE_SHIFTS)):
                    top = cute.arch.fmax(top, cute.arch.shuffle_sync_bfly(top, offset=REDUCE_SHIFTS[shift]))
                if lane < 4:
                    red[wg, 0, warp, coords[4 * j + v][1]] = top
        cute.arch.sync_threads()
        flat = cute.make_tensor(probabilities, cute.make_layout(R * KEYS))
        alphas = cute.make_rmem_tensor(R // 4, Float32)
        moved = Int32(0)
        for j in cutlass.range_constexpr(R // 8):
            for v in cutlass.range_constexpr(2):
                column = 2 * j + v
                row = coords[4 * j + v][1]
                top = m_run[column]
                for w in cutlass.range_constexpr(WARPS):
                    top = cute.arch.fmax(top, red[wg, 0, w, row])
                base = cutlass.select_(top == Float32(NEG_INF), Float32(0.0), top)  # no key seen yet
                alpha = cute.math.exp2(m_run[column] - base, fastmath=True)
                moved = moved | Int32(top != m_run[column])
                alphas[column] = alpha
                m_run[column] = top
                total = Float32(0.0)
                for i in cutlass.range_constexpr(2):
                    e = 4 * j + 2 * i + v
                    key = coords[e][0]
                    p = cute.math.exp2(s[e] - base, fastmath=True)
                    total += p
                    # P^T's (row, key) in its 128-byte-swizzled K-major rows
                    flat[row * KEYS + ((key // VECTOR) ^ (row % SWIZZLE_ROWS)) * VECTOR + key % VECTOR] = BFloat16(p)
                l_run[column] = l_run[column] * alpha + total
        if cutlass.const_expr(self.unchecked):
            if cute.arch.vote_any_sync(moved != 0):  # one branch a warp: alpha is 1 wherever no max moved
                self.rescale(o, alphas)
        else:
            self.rescale(o, alphas)

    def rescale(self, o, alphas):
        """The output accumulators of column 2 j + v (a thread's) times that column's alpha."""
        for j in range(self.padded_rows // 8):
            for v in range(2):
                for c in range(len(o)):
                    for i in range(2):
                        o[c][4 * j + 2 * i + v] = o[c][4 * j + 2 * i + v] * alphas[2 * j + v]

    @cute.jit
    def load_ahead(self, views, slots, request: Int32, p0: Int32, lo: Int32, hi: Int32, first: Int32,
                   count: cutlass.Constexpr, total: Int32, tid: Int32, pages, whole_tile):
        """The tile loop's `load_chunks` of chunks first .. first + count - 1 (of one tile): unchecked
        (part 3) where `whole_tile` says its keys are all cache rows inside the chunk and the kernel
        has that path (`unchecked`), else checked."""
        if cutlass.const_expr(self.unchecked):
            if whole_tile:
                self.load_chunks(views, slots, request, p0, lo, hi, first, count, total, tid, 3, pages)
            else:
                self.load_chunks(views, slots, request, p0, lo, hi, first, count, total, tid, 0, pages)
        else:
            self.load_chunks(views, slots, request, p0, lo, hi, first, count, total, tid, 0, pages)

    @cute.jit
    def pages_of(self, views, request: Int32, lo: Int32, tile: Int32, tid: Int32):
        """The cache pages of thread tid's keys (`keys_of`) in tile `tile` of the chunk from `lo`
        (clamped into the page table: a key past the cache rows reads no page)."""
        pages = views[4]
        return [pages[request, cutlass.min((lo + tile * KEYS + n) // self.page_size, self.max_pages - 1)]
                for n in self.keys_of(tid)]

    def keys_of(self, tid):
        """The keys of a chunk thread tid copies, its vector tid % 8 of each: a warp copies four whole
        128-byte chunk rows (every 32-byte sector it asks L2 for is whole)."""
        step = self.threads // VECTORS
        return [tid // VECTORS + x * step for x in range(KEYS // step)]

    @cute.jit
    def load_chunks(self, views, slots, request: Int32, p0: Int32, lo: Int32, hi: Int32, first: Int32,
                    count: cutlass.Constexpr, total: Int32, tid: Int32, part: cutlass.Constexpr, pages):
        """cp.async of chunks first .. first + count - 1 (those below `total`, all of one tile, whose
        keys' cache pages are `pages`: `pages_of`) into their slots: thread tid copies vector tid % 8
        of its keys (`keys_of`); cache rows before p0, the step's rows from latent / k_rope, zeros past
        hi and past the key width. `part` as `LatentAttention.load_tile` (2: `pages` is not read), or 3:
        every key of these chunks is a cache row before p0 and inside the chunk (`whole` tiles: nothing
        to check)."""
        _, _, latent, k_rope, _, cache = views
        KC: cutlass.Constexpr = self.key_chunks
        P: cutlass.Constexpr = self.page_size
        vec = tid % VECTORS
        keys = self.keys_of(tid)
        first_slot = first % self.slots
        for j in cutlass.range_constexpr(count):
            g = first + j
            if (g < total) if cutlass.const_expr(part != 3) else True:
                col = (g % KC) * CHUNK + vec * VECTOR
                slot = self.wrapped(first_slot + j)
                for x in cutlass.range_constexpr(len(keys)):
                    n = keys[x]
                    position = lo + (g // KC) * KEYS + n
                    destination = swizzled(slots, slot * KEYS + n, vec)
                    if cutlass.const_expr(part == 3):
                        self.copy_cache_row(destination, cache, pages[x], position % P, col)
                    elif position < p0:
                        if cutlass.const_expr(part != 2):
                            self.copy_cache_row(destination, cache, pages[x], position % P, col)
                    else:
                        if cutlass.const_expr(part != 1):
                            real = position < hi
                            r = request * self.tokens + cutlass.select_(real, position - p0, Int32(0))
                            if cutlass.const_expr(self.rope == 0):
                                copy_g2s_zfill(destination, at(latent, r, col), real)
                            elif col < self.lora:
                                copy_g2s_zfill(destination, at(latent, r, col), real)
                            else:
                                copy_g2s_zfill(destination, at(k_rope, r, cutlass.min(col - self.lora,
                                                                                      self.rope - VECTOR)),
                                               real & (col < self.key_width))

    def copy_cache_row(self, destination, cache, page, row, col):
        """cp.async of a cache row's 16 bytes at `col` (zeros past the key width)."""
        if self.key_width % CHUNK == 0:
            copy_g2s(destination, at(cache, page, row, col))
        else:
            copy_g2s_zfill(destination, at(cache, page, row, cutlass.min(col, self.key_width - VECTOR)),
                           col < self.key_width)

    def wrapped(self, slot):
        """A slot index below twice the ring's size brought into the ring (one compare, no division)."""
        return cutlass.select_(slot >= self.slots, slot - self.slots, slot)

    @cute.jit
    def load_block_queries(self, views, queries, request: Int32, first_row: Int32, tid: Int32):
        """Row n of warpgroup w's share (block row w share + n), [q's absorbed values, qr's rotated
        part] of its head and token, into the warpgroup's swizzled query chunks (chunk c of row n at
        row c R + n); zeros past the key width and in the padding rows."""
        q, qr = views[0], views[1]
        LV: cutlass.Constexpr = self.lora // VECTOR
        R: cutlass.Constexpr = self.padded_rows
        T: cutlass.Constexpr = self.tokens
        KC: cutlass.Constexpr = self.key_chunks
        per: cutlass.Constexpr = KC * VECTORS
        rows: cutlass.Constexpr = self.groups * R
        for j in cutlass.range_constexpr(-(-(rows * per) // self.threads)):
            k = tid + j * self.threads
            i, vec = k // per, k % per
            w, n = i // R, i % R
            at_block = w * self.share + n
            row = first_row + at_block
            if k < rows * per:
                real = (n < self.share) & (at_block < self.block_rows) & (row < self.group * T)
                head = cutlass.select_(real, row // T, Int32(0))
                r = request * T + cutlass.select_(real, row % T, Int32(0))
                destination = swizzled(queries, (w * KC + vec // VECTORS) * R + n, vec % VECTORS)
                if cutlass.const_expr(self.rope == 0):
                    copy_g2s_zfill(destination, at(q, r, head * self.lora + cutlass.min(vec, LV - 1) * VECTOR),
                                   real & (vec < LV))
                elif vec < LV:
                    copy_g2s_zfill(destination, at(q, r, head * self.lora + vec * VECTOR), real)
                else:
                    rotated = cutlass.min(vec - LV, self.rope // VECTOR - 1)
                    copy_g2s_zfill(destination, at(qr, r, head * self.unit + self.nope + rotated * VECTOR),
                                   real & (vec < LV + self.rope // VECTOR))

    @cute.jit
    def store_block(self, views, out, partial, lse, o, coords, m_run, l_run, red, slots, split: Int32,
                    request: Int32, first_row: Int32, wg: Int32, warp: Int32, lane: Int32, tid: Int32):
        """Each row's sum over its warpgroup's warps; the normalized rows (fp32; warpgroup w's row n
        at staged row w R + n) staged in the slots, then stored as whole vectors: out (one chunk,
        bf16) or partial (fp32, or bf16 by `partials`) and lse (natural log of the sum times e^max,
        -inf where the chunk holds none of the row's keys)."""
        T: cutlass.Constexpr = self.tokens
        R: cutlass.Constexpr = self.padded_rows
        DV: cutlass.Constexpr = self.value_width
        pitch: cutlass.Constexpr = self.staged_pitch()
        for column in cutlass.range_constexpr(R // 4):
            total = l_run[column]
            for shift in cutlass.range_constexpr(len(REDUCE_SHIFTS)):
                total = total + cute.arch.shuffle_sync_bfly(total, offset=REDUCE_SHIFTS[shift])
            if lane < 4:
                red[wg, 1, warp, coords[4 * (column // 2) + column % 2][1]] = total
        cute.arch.sync_threads()  # also: every copy and wgmma is done with the slots
        staged = cute.make_tensor(cute.recast_ptr(slots, dtype=Float32),
                                  cute.make_layout((self.groups * R, pitch), stride=(pitch, 1)))
        for column in cutlass.range_constexpr(R // 4):
            j, v = column // 2, column % 2
            row = coords[4 * j + v][1]
            total = Float32(0.0)
            for w in cutlass.range_constexpr(WARPS):
                total += red[wg, 1, w, row]
            seen = total > Float32(0.0)
            inverse = cutlass.select_(seen, Float32(1.0) / total, Float32(0.0))
            for c in cutlass.range_constexpr(len(o)):
                for i in cutlass.range_constexpr(2):
                    e = 4 * j + 2 * i + v
                    staged[wg * R + row, c * CHUNK + coords[e][0]] = o[c][e] * inverse
            if cutlass.const_expr(self.splits > 1):
                at_block = wg * self.share + row
                if (warp == 0) & (lane < 4) & (row < self.share) & (at_block < self.block_rows) \
                        & (first_row + at_block < self.group * T):
                    chunk_lse = cutlass.select_(
                        seen, (m_run[column] + cute.math.log2(total, fastmath=True)) * Float32(LN2), Float32(NEG_INF))
                    if cutlass.const_expr(self.clustered):  # for the peers, in the row's padding
                        staged[wg * R + row, DV] = chunk_lse
                    else:
                        lse[split, request * T + (first_row + at_block) % T, (first_row + at_block) // T] = chunk_lse
        cute.arch.sync_threads()
        if cutlass.const_expr(self.clustered):
            self.merge_in_cluster(out, staged, split, request, first_row, tid)
            return
        # values a thread stores at a time: 4 (a 16-byte fp32 vector, or 8 bytes of bf16 out), or 8 for bf16
        # partial rows (one 16-byte vector)
        unit: cutlass.Constexpr = 8 if self.splits > 1 and self.partials == "bfloat16" else 4
        units: cutlass.Constexpr = DV // unit
        rows: cutlass.Constexpr = self.groups * R
        for k in cutlass.range_constexpr(-(-(rows * units) // self.threads)):
            index = tid + k * self.threads
            i, q = index // units, index % units
            at_block = (i // R) * self.share + i % R
            row = first_row + at_block
            if (index < rows * units) & (i % R < self.share) & (at_block < self.block_rows) & (row < self.group * T):
                head = row // T
                r = request * T + row % T
                values = load_f32x4(at(staged, i, unit * q), shared=True)
                if cutlass.const_expr(self.splits == 1):
                    store_global_words(at(out, r, head * DV + 4 * q),
                                       (pack_bf16(values[0], values[1]), pack_bf16(values[2], values[3])))
                elif cutlass.const_expr(unit == 8):
                    values = values + load_f32x4(at(staged, i, unit * q + 4), shared=True)
                    store_global_words(at(partial, split, r, head, unit * q),
                                       tuple(pack_bf16(values[2 * e], values[2 * e + 1]) for e in range(4)))
                else:
                    store_f32x4(at(partial, split, r, head, 4 * q), values)

    @cute.jit
    def merge_in_cluster(self, out, staged, split: Int32, request: Int32, first_row: Int32, tid: Int32):
        """combine 'cluster': every chunk's normalized rows and their lse are staged in its CTA's slots
        (warpgroup w's row n at staged row w R + n, the lse in column `value_width`); chunk `split`
        (the CTA's rank in the cluster) merges an even share of the (staged row, 4-value vector) pairs
        over every chunk, in chunk order, over DSMEM (`merged_vector`, as attention_combine), and
        stores them bf16 to `out`."""
        T: cutlass.Constexpr = self.tokens
        R: cutlass.Constexpr = self.padded_rows
        quads: cutlass.Constexpr = self.value_width // 4

        def merge(index, inside):
            i, q = index // quads, index % quads
            at_block = (i // R) * self.share + i % R
            row = first_row + at_block
            if inside & (i % R < self.share) & (at_block < self.block_rows) & (row < self.group * T):
                self.store_merged(out, staged, i, q, request, row, Int32(0))  # every head in the block

        self.merge_in_cluster_share(self.groups * R * quads, split, tid, merge)

