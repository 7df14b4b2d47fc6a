"""`gemm_tc`: a batch's products on tensor cores, y[rows, N] = x[rows, K] @ w[N, K]^T, bf16 in,
fp32 accumulation, bf16 out (fp32 on the wgmma engine with `out_dtype="float32"`: a router's logits),
the weight read from memory once for all rows (gemv re-reads it for every 32 rows). `parts`: the
outputs of several products of one activation, their weight rows back to back in `w`, their outputs
side by side in `y` (to the kernel one product of sum(parts) outputs).

One CTA of 8 warps a (K split, row block, weight tile): `tile_n` weight rows (outputs) against a
block of at most 128 activation rows, padded inside the kernel to whole 16-row MMA tiles (rows past
the block are zero-filled copies: never stored, never read from memory). `mma.m16n8k16`: the
activation rows are its M side (A, `ldmatrix` from the rows as stored), the weight rows its N side
(B, `ldmatrix` of the weight rows as stored: K-major is what the B operand reads), so a thread's
accumulators are two adjacent outputs of a row and store as one word. Warps split the tile two ways
(rows x weight rows) where the rows make whole pairs of 2+ MMA tiles, else only over weight rows.

Stages of 64 K values (weight rows and activation rows of a stage in one shared buffer, rows padded
by 16 bytes so that ldmatrix's 8 rows fall in 8 bank groups) stream through `stages` buffers by
`cp.async` commit groups; the tail of K, the weight rows past N and the padding rows are zero-filled
by the same copies. PDL: the weights of the first stages - 1 stages are requested before
`griddepcontrol.wait` (weights never depend on the predecessor), the activation rows after it.

Split-K: where the tiles alone leave SMs idle, `splits` CTAs of one cluster take consecutive
ranges of K; each writes its fp32 partial tile into its own (now idle) stage buffers, and after a
cluster barrier rank r sums the r-th share of the tile's values over every rank's shared memory
(DSMEM, ranks in order: deterministic) and stores it as bf16: no workspace, no second launch.

A per-head product (`per_head` = heads, unit, offset: head h's outputs dot x[:, h unit + offset:][:K], the
latent attention's absorption and expansion; GEMM_PER_HEAD_FROM) runs on the wgmma engine with each weight
tile inside one head (a head's outputs whole tiles: the default tile that divides them, else 64), so a CTA's
activation loads start at its tile's head's part: thread copies, or row boxes where K is whole boxes. On the
H200 it took Kimi Linear's batch-256 step 135 us under its 32-row gemv blocks (bench/RESULTS.md).

Two engines share this class's params, grid, pipeline start and split-K epilogue: the wgmma
engine (gemm_wgmma.py, the default: Hopper's warpgroup MMA, measured 1.0-2.3x this one on every
bench/gemm.py shape, 2026-11-29) and this mma.sync one (`engine: "mma"` in a schedule)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from lanec.codegen.facts import (
    GEMM_BLOCK_ROWS,
    GEMM_HEAD_TILE,
    PAIR_TILE,
    SHARED_LIMIT,
    SM_COUNT,
    VECTOR,
    WARP,
    GemmSchedule,
    GemmSpec,
    per_head_x_width,
)
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    at,
    copy_g2s_zfill,
    ldmatrix_x4,
    load_dsmem_f32x4,
    load_f32x4,
    mma_into,
    pack_bf16,
    sigmoid,
    store_f32x4,
    store_global_words,
    wait_stage,
)

MMA_M, MMA_N, MMA_K = 16, 8, 16
TILE_K = 64  # K values a stage: 8 16-byte vectors of every row
PITCH = TILE_K + VECTOR  # a shared row's values: 16 bytes of padding keep ldmatrix free of bank conflicts
WARPS = 8
THREADS = WARPS * WARP
STAGE_BUDGET = 192 * 1024  # the default stages fill at most this much
MAX_STAGES = 6
SPLIT_MIN_TILES = 4  # K stages a split keeps at least: fewer would not cover the pipeline's fill


def blocks_of(count: int, limit: int) -> tuple[int, int]:
    """(blocks, per block): `count` split into the fewest blocks of at most `limit`, evenly."""
    blocks = -(-count // limit)
    return blocks, -(-count // blocks)


class GemmTc:
    """y[b, n] = sum_k x[b, k] w[n, k] for the concatenated parts' rows n; see the module
    docstring. Same constructor as `Gemv` (``per_head``: the wgmma engine's, each CTA's weight tile
    inside one head, whose part of the activation row its copies read); ``schedule``
    a `GemmSchedule` (or a mapping of its fields): what it leaves out the kernel picks."""

    name = "gemm_tc"
    engine = "mma"
    out_dtype = "bfloat16"  # y's; "float32" (the wgmma engine, `out_dtype`): the sums as they are
    per_head = None  # (heads, unit, offset) of a per-head read (the wgmma engine's), or none
    tiles = (128, 64)  # the weight tiles (outputs a CTA) the default grid picks from
    tile_choices = tiles  # ... and those a schedule may ask for
    block_limit = GEMM_BLOCK_ROWS  # activation rows a CTA: the MMA tiles' M side
    row_quantum = MMA_M  # a block's rows are padded to a multiple of this (whole MMA tiles)
    min_stages = 2
    stage_k = TILE_K  # K values a stage `multiply` takes (the grouped mixture's products may take 128)
    # a CTA's fixed cost (the pipeline's fill, the epilogue) in stages' time, for the grid's model
    fill_stages = 2

    def ahead(self) -> int:
        """K stages requested ahead of the one multiplied: every buffer but the one in use (the
        MMAs of a stage are done before the next stage's barrier)."""
        return self.stages - 1

    def __new__(cls, *args, schedule=None, **kwargs):
        """The schedule's engine picks the class: "mma" builds this mma.sync kernel, anything else
        (the default) a `GemmWgmma` (same params and launch interface, gemm_wgmma.py)."""
        if cls is GemmTc and GemmSchedule.of(schedule or {}).engine != "mma":
            from lanec.codegen.kernels.gemm_wgmma import GemmWgmma

            return super().__new__(GemmWgmma)
        return super().__new__(cls)

    def __init__(self, rows: int, width: int, parts, *, per_head=None, schedule=None, x_pitch=None, gated=False,
                 out_dtype: str = "bfloat16"):
        parts = tuple(int(p) for p in parts)
        GemmSpec(rows, width, parts, tuple(per_head) if per_head is not None else None, x_pitch, bool(gated),
                 out_dtype).check()
        schedule = GemmSchedule.of(schedule or {})
        if schedule.tile_n not in (None, *self.tile_choices):
            raise ValueError(f"gemm_tc {self.engine} tile_n {schedule.tile_n}: the engine takes "
                             f"{' or '.join(map(str, self.tile_choices))} weight rows a CTA")
        if schedule.loads in ("tma", "producer") and self.engine != "wgmma":
            raise ValueError(f"gemm_tc {self.engine} loads {schedule.loads!r}: only the wgmma engine fills its "
                             "stages by TMA")
        if gated and self.engine != "wgmma":
            raise ValueError(f"gemm_tc {self.engine} gated pair: only the wgmma engine's 128-row tile holds "
                             f"{PAIR_TILE} gate rows beside their {PAIR_TILE} up rows")
        if out_dtype == "float32" and self.engine != "wgmma":
            raise ValueError(f"gemm_tc {self.engine} float32 outputs: only the wgmma engine stores them (its "
                             "epilogue stages every tile in shared memory)")
        self.out_dtype = out_dtype
        self.per_head = tuple(int(v) for v in per_head) if per_head is not None else None
        if self.per_head is not None and self.engine != "wgmma":
            raise ValueError(f"gemm_tc {self.engine} per-head read: only the wgmma engine's copies read each head's "
                             "part of the activation row")
        self.x_width = per_head_x_width(self.per_head, width)
        self.rows, self.width, self.parts, self.outputs = rows, width, parts, sum(parts)
        self.gated = bool(gated)
        self.y_width = self.outputs // 2 if self.gated else self.outputs  # a gated pair stores silu(gate) * up
        self.x_pitch = x_pitch
        if (schedule.block_rows or 0) > self.block_limit:
            raise ValueError(f"gemm_tc {self.engine} block_rows {schedule.block_rows}: the engine multiplies at "
                             f"most {self.block_limit} activation rows a CTA")
        self.row_blocks, self.block_rows = blocks_of(rows, schedule.block_rows or self.block_limit)
        self.padded_rows = -(-self.block_rows // self.row_quantum) * self.row_quantum
        self.k_tiles = -(-width // TILE_K)
        tile_n, splits = self.default_grid()
        self.tile_n = schedule.tile_n or tile_n
        self.splits = schedule.splits or (splits if schedule.tile_n in (None, tile_n) else 1)
        if self.splits > self.k_tiles:
            raise ValueError(f"gemm_tc splits {self.splits}: K {width} has only {self.k_tiles} stages of {TILE_K} "
                             "to split")
        self.n_tiles = -(-self.outputs // self.tile_n)
        self.per_split = -(-self.k_tiles // self.splits)  # K stages a split (the last may have fewer)
        self.arrange_warps()
        self.stages = schedule.stages or max(self.min_stages, min(MAX_STAGES, STAGE_BUDGET // self.stage_bytes()))
        if self.stages < self.min_stages:
            raise ValueError(f"gemm_tc {self.engine} stages {self.stages}: the engine needs at least "
                             f"{self.min_stages} (its pipeline keeps {self.stages - self.ahead()} stages busy)")
        if self.shared_bytes() > SHARED_LIMIT:
            raise ValueError(f"gemm_tc: {self.stages} stages of {self.tile_n} weight rows and {self.padded_rows} "
                             f"activation rows take {self.shared_bytes()} bytes of shared memory, above the SM's "
                             f"{SHARED_LIMIT}")

    @property
    def threads(self) -> int:
        """The threads that copy, multiply and store a tile: the CTA's 8 warps."""
        return THREADS

    def arrange_warps(self) -> None:
        """The warps' share of the tile: two warp rows where the row tiles pair up (an A fragment
        then serves 4 weight tiles), else one."""
        self.row_tiles = self.padded_rows // MMA_M
        self.warps_m = 2 if self.row_tiles % 2 == 0 and self.row_tiles >= 4 else 1
        self.warps_n = WARPS // self.warps_m
        self.warp_row_tiles = self.row_tiles // self.warps_m
        self.warp_col_tiles = self.tile_n // MMA_N // self.warps_n

    def default_grid(self) -> tuple[int, int]:
        """(tile_n, splits) of the least modelled time: waves of one CTA an SM, each CTA's time its
        pipeline fill, its K stages and a split's reduce, a stage's cost its shared-memory bytes
        (weight and activation rows). Splits are powers of two (clusters that pack a GPC's SMs); a tie
        takes the later candidate: more splits, then the smaller tile (more SMs busy)."""
        best, choice = None, (128, 1)
        tiles = self.tiles
        if self.per_head is not None:  # a tile inside a head: the default tiles that divide its outputs, else 64
            head_rows = self.outputs // self.per_head[0]
            tiles = tuple(t for t in tiles if head_rows % t == 0) or (GEMM_HEAD_TILE,)
            choice = (tiles[0], 1)
        for tile_n in tiles:
            ctas = self.row_blocks * -(-self.outputs // tile_n)
            for splits in (1, 2, 4, 8):
                if splits > 1 and self.k_tiles < SPLIT_MIN_TILES * splits:
                    break
                waves = -(-ctas * splits // SM_COUNT)
                stages = self.fill_stages + -(-self.k_tiles // splits) + (splits > 1)  # a split's reduce: ~1 stage
                cost = waves * stages * (tile_n + self.padded_rows)
                if best is None or cost <= best:  # a tie: the grid with more CTAs (more SMs busy)
                    best, choice = cost, (tile_n, splits)
        return choice

    def stage_bytes(self) -> int:
        return 2 * (self.tile_n + self.padded_rows) * PITCH

    def partial_pitch(self) -> int:
        return self.tile_n + 4  # fp32 partial tile rows: 16 bytes of padding

    def shared_bytes(self) -> int:
        pipeline = self.stages * self.stage_bytes()
        if self.splits == 1:
            return pipeline
        return max(pipeline, 4 * self.padded_rows * self.partial_pitch())

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.splits, self.row_blocks, self.n_tiles), block=(self.threads, 1, 1),
                           cluster=(self.splits, 1, 1), shared_bytes=self.shared_bytes())

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (self.rows, self.x_width), "bfloat16", (self.x_pitch or self.x_width, 1)),
                TensorParam("w", (self.outputs, self.width), "bfloat16"),
                TensorParam("y", (self.rows, self.y_width), self.out_dtype, written=True)]

    @cute.jit
    def __call__(self, *, x: cute.Tensor, w: cute.Tensor, y: cute.Tensor):
        launch(self, x, w, y)

    @cute.kernel
    def kernel(self, x: cute.Tensor, w: cute.Tensor, y: cute.Tensor):
        release_dependents_at_entry(self)
        S: cutlass.Constexpr = self.stages
        smem = cutlass.memory.SmemAllocator()
        # a stage's buffer: the tile's weight rows, then the block's activation rows
        rows_a_stage: cutlass.Constexpr = self.tile_n + self.padded_rows
        layout = cute.make_layout((S, rows_a_stage, PITCH), stride=(rows_a_stage * PITCH, PITCH, 1))
        buffers = smem.allocate_tensor(BFloat16, layout, 128)
        self.stream(x, w, y, buffers, buffers)

    @cute.jit
    def stream(self, x, w, y, buffers, partial):
        """The CTA's whole product after its shared memory is laid out: the pipeline started
        (`start_pipeline`), each K stage of the split waited for, the stage `stages - 1` ahead
        requested and this one multiplied (`load_weights`, `load_rows`, `multiply` on `buffers`:
        whatever the subclass keeps there), then the tile stored, or split over the cluster and
        summed through `partial` (the shared memory the fp32 partial tile reuses). The CTA's
        (split, row block, weight tile) is its grid index."""
        tid, _, _ = cute.arch.thread_idx()
        split, block, n_tile = cute.arch.block_idx()
        warp, lane = tid // WARP, tid % WARP
        n0, first_row = n_tile * self.tile_n, block * self.block_rows
        S: cutlass.Constexpr = self.stages
        k_first, tiles = self.start_pipeline(w, x, buffers, buffers, n0, first_row, split, tid)
        acc = cute.make_rmem_tensor((self.warp_row_tiles, self.warp_col_tiles, 4), Float32)
        acc.fill(0.0)
        for tile in range(tiles):
            wait_stage(tile, S)  # this tile's copies (and the first group's) have landed
            cute.arch.sync_threads()  # every thread's copies visible; the previous stage's buffer free
            ahead = tile + S - 1
            if ahead < tiles:
                self.load_weights(w, buffers, n0, k_first + ahead, ahead % S, tid)
                self.load_rows(x, buffers, first_row, k_first + ahead, ahead % S, tid)
            cute.arch.cp_async_commit_group()
            self.multiply(buffers, acc, tile % S, warp, lane)
        cute.arch.cp_async_wait_group(0)
        if cutlass.const_expr(self.splits == 1):
            self.put_fragments(y, acc, n0, first_row, warp, lane)
        else:
            self.reduce(y, partial, acc, split, n0, first_row, tid, warp, lane)

    @cute.jit
    def split_stages(self, split: Int32):
        """The K stages of split `split`: (first, count; the last split may have fewer)."""
        k_first = split * self.per_split
        return k_first, cutlass.max(cutlass.min(Int32(self.k_tiles) - k_first, Int32(self.per_split)), Int32(0))

    @cute.jit
    def start_pipeline(self, w, x, weights, rows, n0: Int32, first_row: Int32, split: Int32, tid: Int32):
        """The split's K stages (first, count), and the first `ahead()` stages requested: their
        weights before the PDL wait (weights never depend on the predecessor: they fly while it
        finishes), one commit group a stage, then after the wait the activation rows, one group
        for all of them (`wait_stage`'s pipeline, `ahead() + 1` deep). Both engines start so."""
        A: cutlass.Constexpr = self.ahead()
        k_first, tiles = self.split_stages(split)
        for s in cutlass.range_constexpr(A):
            if s < tiles:
                self.load_weights(w, weights, n0, k_first + s, s, tid)
            cute.arch.cp_async_commit_group()
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents wait for this grid's end to read y
        for s in cutlass.range_constexpr(A):
            if s < tiles:
                self.load_rows(x, rows, first_row, k_first + s, s, tid)
        cute.arch.cp_async_commit_group()
        return k_first, tiles

    @cute.jit
    def load_weights(self, w, buffers, n0: Int32, k_tile: Int32, buffer, tid: Int32):
        """cp.async of weight rows n0 + [0, tile_n) at K stage `k_tile` into `buffer`; zeros past
        N and past K."""
        V: cutlass.Constexpr = TILE_K // VECTOR
        T: cutlass.Constexpr = self.threads
        for j in cutlass.range_constexpr(self.tile_n * V // T):
            c = tid + j * T
            r, v = c // V, c % V
            n = n0 + r
            col = k_tile * TILE_K + v * VECTOR
            keep = (n < self.outputs) & (col < self.width)
            source = at(w, cutlass.min(n, self.outputs - 1), cutlass.min(col, self.width - VECTOR))
            copy_g2s_zfill(self.weight_slot(buffers, buffer, r, v), source, keep)

    def weight_slot(self, buffers, buffer, row, chunk):
        """Where weight row `row`'s 16-byte chunk `chunk` of a stage lands in stage `buffer`: rows
        as stored, padded (wgmma's engine swizzles them instead)."""
        return at(buffers, buffer, row, chunk * VECTOR)

    @cute.jit
    def load_rows(self, x, buffers, first_row: Int32, k_tile: Int32, buffer, tid: Int32):
        """cp.async of the block's activation rows at K stage `k_tile` into `buffer` after the
        weight rows; zeros past K and in the padding rows."""
        V: cutlass.Constexpr = TILE_K // VECTOR
        copies: cutlass.Constexpr = self.padded_rows * V
        T: cutlass.Constexpr = self.threads
        for j in cutlass.range_constexpr(-(-copies // T)):
            c = tid + j * T
            i, v = c // V, c % V
            row = first_row + i
            col = k_tile * TILE_K + v * VECTOR
            if c < copies:
                keep = (i < self.block_rows) & (row < self.rows) & (col < self.width)
                source = at(x, cutlass.min(row, self.rows - 1), cutlass.min(col, self.width - VECTOR))
                copy_g2s_zfill(at(buffers, buffer, self.tile_n + i, v * VECTOR), source, keep)

    def stage_column(self, row, col):
        """Where K value `col` (a 16-byte vector's first) of a stage row whose index is `row` modulo 8
        sits in the row: here where it is (rows padded by 16 bytes); `GroupedProduct` may swizzle."""
        return col

    @cute.jit
    def multiply(self, buffers, acc, buffer: Int32, warp: Int32, lane: Int32):
        """acc += this warp's rows x weight rows over one stage's `stage_k` K values."""
        row0 = self.tile_n + (warp // self.warps_n) * self.warp_row_tiles * MMA_M
        col0 = (warp % self.warps_n) * self.warp_col_tiles * MMA_N
        for kk in cutlass.range_constexpr(self.stage_k // (2 * MMA_K)):
            # one x4 a weight tile: its 8 rows x 32 K values, the B words of both k halves
            b = [ldmatrix_x4(at(buffers, buffer, col0 + ct * MMA_N + lane % 8,
                                self.stage_column(lane % 8, kk * 2 * MMA_K + (lane // 8) * VECTOR)))
                 for ct in range(self.warp_col_tiles)]
            for half in cutlass.range_constexpr(2):
                for rt in cutlass.range_constexpr(self.warp_row_tiles):
                    a = ldmatrix_x4(at(buffers, buffer, row0 + rt * MMA_M + lane % 16,
                                       self.stage_column(lane % 16, (2 * kk + half) * MMA_K + (lane // 16) * VECTOR)))
                    for ct in cutlass.range_constexpr(self.warp_col_tiles):
                        mma_into(acc[rt, ct, None], a, (b[ct][2 * half], b[ct][2 * half + 1]))

    @cute.jit
    def put_fragments(self, target, acc, n0: Int32, first_row: Int32, warp: Int32, lane: Int32):
        """Each accumulator pair (outputs c and c + 1 of block row i): with one split, a real row's
        pair into `target` = y as one bf16 word; split, into `target` = the fp32 partial tile."""
        row0 = (warp // self.warps_n) * self.warp_row_tiles * MMA_M
        col0 = (warp % self.warps_n) * self.warp_col_tiles * MMA_N
        for rt in cutlass.range_constexpr(self.warp_row_tiles):
            for h in cutlass.range_constexpr(2):
                i = row0 + rt * MMA_M + h * 8 + lane // 4
                for ct in cutlass.range_constexpr(self.warp_col_tiles):
                    c = col0 + ct * MMA_N + 2 * (lane % 4)
                    low, high = acc[rt, ct, 2 * h], acc[rt, ct, 2 * h + 1]
                    if cutlass.const_expr(self.splits == 1):
                        row, col = first_row + i, n0 + c
                        if (i < self.block_rows) & (row < self.rows) & (col < self.outputs):
                            store_global_words(at(target, row, col), pack_bf16(low, high))
                    else:
                        target[i, c] = low
                        target[i, c + 1] = high

    @cute.jit
    def reduce(self, y, buffers, acc, split: Int32, n0: Int32, first_row: Int32, tid: Int32, warp: Int32,
               lane: Int32):
        """Split K: the partial tile into this CTA's shared memory, then rank `split` sums its share
        of the tile's 4-value vectors over the cluster's ranks (in rank order) and stores it."""
        P: cutlass.Constexpr = self.partial_pitch()
        partial = cute.make_tensor(cute.recast_ptr(buffers.iterator, dtype=Float32),
                                   cute.make_layout((self.padded_rows, P), stride=(P, 1)))
        cute.arch.sync_threads()  # every warp is done with the stage buffers the partial tile reuses
        self.put_fragments(partial, acc, n0, first_row, warp, lane)
        self.sum_partials(y, partial, split, n0, first_row, tid)

    @cute.jit
    def sum_partials(self, y, partial, split: Int32, n0: Int32, first_row: Int32, tid: Int32):
        """Every rank's fp32 partial tile (block row i, output c at `partial[i, c]`) is written:
        rank `split` sums its share of the tile's 4-value vectors over the cluster's ranks (in rank
        order: deterministic) and stores them as bf16. One split (the wgmma engine's staged
        epilogue): the CTA's own tile, stored as whole 8-byte words of y's rows. A gated pair's tile
        is 64 gate outputs then their 64 up outputs: a vector of 4 hidden values sums both and
        stores silu(gate) * up at hidden n0 / 2 + 4q (the [rows, 2 hidden] products never reach
        memory)."""
        if cutlass.const_expr(self.splits == 1):
            cute.arch.sync_threads()  # every warp's share of the tile is in shared memory
        else:
            cute.arch.cluster_arrive()  # release: every rank's partial tile is in its shared memory
            cute.arch.cluster_wait()
        Q: cutlass.Constexpr = (self.tile_n // 2 if self.gated else self.tile_n) // 4
        vectors: cutlass.Constexpr = self.block_rows * Q
        share: cutlass.Constexpr = -(-vectors // self.splits)
        T: cutlass.Constexpr = self.threads
        for j in cutlass.range_constexpr(-(-share // T)):
            local = tid + j * T
            v = split * share + local
            i, q = v // Q, v % Q
            row, col = first_row + i, (n0 // 2 if self.gated else n0) + 4 * q
            # (a producer warpgroup's threads, past the consumers, store nothing)
            if (local < share) & (v < vectors) & (row < self.rows) & (col < self.y_width) & (tid < T):
                sums = self.tile_vector(partial, i, 4 * q)
                if cutlass.const_expr(self.gated):
                    ups = self.tile_vector(partial, i, self.tile_n // 2 + 4 * q)
                    sums = [sums[e] * sigmoid(sums[e]) * ups[e] for e in range(4)]
                if cutlass.const_expr(self.out_dtype == "float32"):  # the sums as they are (a router's logits)
                    store_f32x4(at(y, row, col), sums)
                else:
                    store_global_words(at(y, row, col), (pack_bf16(sums[0], sums[1]), pack_bf16(sums[2], sums[3])))
        if cutlass.const_expr(self.splits > 1):
            cute.arch.cluster_arrive()  # no rank leaves while a peer still reads its partial tile
            cute.arch.cluster_wait()

    def tile_vector(self, partial, i, c):
        """The 4 fp32 values at `partial[i, c:c + 4]`: this CTA's own, or their sum over the
        cluster's ranks in rank order (DSMEM; deterministic). Plain Python, unrolled as traced."""
        if self.splits == 1:
            return load_f32x4(at(partial, i, c), shared=True)
        sums = [Float32(0.0)] * 4
        for rank in range(self.splits):
            values = load_dsmem_f32x4(at(partial, i, c), rank)
            sums = [sums[e] + values[e] for e in range(4)]
        return sums
