"""The mixture's experts at larger batches, rows grouped by expert on the device so that one read of
an expert's weights serves every row that chose it (mixture.py's kernels read a row's experts
apart: at batch 64 most experts are read by several rows). Four launches after mixture_router:

- `mixture_groups` (mixture.py, beside the router, which can do its work instead: `segments`):
  one CTA turns the router's ids [rows, top_k] into each expert's segment of the
  (row, k) pairs: per-expert counts, their exclusive prefix sum `starts` [experts + 1] and `order`
  [pairs] (the pair index row * top_k + k at each place of its expert's segment). Each warp walks a
  run of consecutive pairs 32 at a time; a lane ranks its pair among the step's lanes with the same
  expert (shuffles), the warps' counts are summed in warp order and the experts' in expert order:
  a segment lists its pairs in ascending order, the same every run (no atomics).
- `mixture_grouped_gated`: one CTA an (expert, tile of 64 hidden units): the expert's rows in
  blocks of `group_rows` (16, 32 or 64: `mixture_group_rows` picks from the mean segment's length),
  their activations gathered by `order` (a block's tail padded inside the kernel: zero-filled
  copies, never stored), the tile's 64 gate rows beside its 64 up
  rows on tensor cores (gemm_tc's mma.sync machinery: its stage buffers, warps and `multiply`),
  SwiGLU in registers, the hidden values [pairs, hidden] written in segment order. The folded
  shared expert's segment is every row, in row order: its blocks are the last grid rows, one a
  CTA.
- `mixture_grouped_down`: one CTA an (expert, tile of 128 outputs, or 64): the expert's hidden rows (its
  segment, contiguous) times its down rows, times the pair's routing weight, to the pair's fp32
  row of `partial` [rows * slots, width] (slot k of a row: its k-th chosen expert; the last slot
  the shared expert's, unscaled).
- `mixture_sum`: out[row] = the row's routed slots summed in k order, plus the shared slot (times
  sigmoid(x . gate row) where it has one), stored as bf16. Every sum has a fixed order: two runs
  are bitwise equal.

The two grouped products stream their weight tiles by cp.async in stages of `stage_k` K values: 128 (256
bytes of each row a copy) in blocks below 64 rows at fewer than 256 rows, else 64 (facts:
MIXTURE_GROUP_STAGE_K). A stage row is swizzled (`swizzle`: its 16-byte vector v at v ^ (row % 8) of its
128 bytes, no padding), which leaves room for 3 stages of 128 K values (or 6 of 64) beside a second CTA
on the SM (MIXTURE_GROUP_SWIZZLE; padded rows, the option off, hold 2 or 4). From 64 rows their grid is
`compact`: a CTA ranks the chosen experts from the starts and takes the one its grid row names, so the
CTAs of experts no row chose come last (MIXTURE_GROUP_COMPACT_ROWS). From 256 rows each block of a segment
has a CTA of its own (`spread`, MIXTURE_GROUP_SPREAD_ROWS): the blocks are ranked as the compact grid ranks
experts, so a long segment's blocks read their weight tile side by side (once from DRAM, then L2) where
one CTA's passes, one after another, each read it from DRAM. Down CTAs of 64 outputs (`tile_n`) measured
even with 128 and stay an option.

Which expert's rows a CTA multiplies depends on the router's ids, so every launch waits for its
predecessor (PDL) before its first load and releases its dependents at once. A CTA whose expert no
row chose loops zero times. The grid covers every expert: at small batches most CTAs exit at once
(the per-row kernels stay the path there; `lower_mixture` picks)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from lanec.codegen.facts import (
    MIXTURE_DOWN_TILE,
    MIXTURE_GROUP_SWIZZLE,
    VECTOR,
    WARP,
    MixtureGroupedSpec,
    mixture_group_compact,
    mixture_group_rows,
    mixture_group_spread,
    mixture_group_stage_k,
    mixture_group_stages,
)
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.gemm_tc import MAX_STAGES, MMA_M, MMA_N, STAGE_BUDGET, THREADS, GemmTc
from lanec.codegen.kernels.mixture import expert_rows, row_dots
from lanec.codegen.kernels.primitives import (
    alloc,
    at,
    copy_g2s_zfill,
    load_f32x4,
    pack_bf16,
    shared_bytes,
    sigmoid,
    store_global_words,
    wait_stage,
    warp_inclusive_sum,
)

PAIR_UNITS = 64  # hidden units a grouped gated CTA: their 64 gate rows beside their 64 up rows
DOWN_TILES = (64, 128)  # outputs a grouped down CTA may take (MIXTURE_DOWN_TILE by default)
SUM_THREADS = 128  # mixture_sum: a thread sums 4 outputs of a row


class GroupedProduct(GemmTc):
    """What the grouped gated and down kernels share: gemm_tc's mma.sync machinery (stage buffers
    of `tile_n` weight rows then a block of `group_rows` activation rows, its warps' arrangement and
    `multiply`, the `wait_stage` pipeline) over blocks of one expert's rows, and the tables a block
    keeps in shared memory: each block row's source row (-1: padding), target row and scale.
    Not gemm_tc's constructor: a subclass sets its shape and calls `arrange` with its tile."""

    engine = "mma"

    def arrange(self, tile_n: int, group_rows: int, stages: int | None, stage_k: int | None = None,
                compact: bool | None = None, swizzle: bool | None = None, spread: bool | None = None) -> None:
        """The tile, the block (`group_rows` of an expert's rows a pass over its weight tile: the
        spec's, by default `mixture_group_rows`' choice for the shape), the K values a stage
        (`stage_k`, 64 or 128: by default `mixture_group_stage_k`'s for the block and rows), the grid's order
        (`compact`, see `expert_of`: by default `mixture_group_compact`'s for the rows), the stage
        rows' layout (`swizzle`, see `stage_column`: MIXTURE_GROUP_SWIZZLE) and the stages (by default
        `mixture_group_stages`' for the block, stage_k and layout, else as many as STAGE_BUDGET holds,
        at most MAX_STAGES); `spread` (see `work_rows`: by default `mixture_group_spread`'s for the rows),
        which ranks its blocks as the compact grid ranks experts, so it makes the grid compact."""
        self.stage_k = mixture_group_stage_k(group_rows, self.rows) if stage_k is None else int(stage_k)
        if self.stage_k not in (64, 128):
            raise ValueError(f"{self.name} stage_k {self.stage_k}: 64 or 128 K values a stage")
        self.spread = mixture_group_spread(self.rows) if spread is None else bool(spread)
        if self.spread and compact is False:
            raise ValueError(f"{self.name} spread without compact: a segment's blocks are ranked as the compact grid "
                             "ranks the chosen experts")
        self.compact = self.spread or (mixture_group_compact(self.rows) if compact is None else bool(compact))
        self.swizzle = MIXTURE_GROUP_SWIZZLE if swizzle is None else bool(swizzle)
        self.tile_n, self.padded_rows = tile_n, group_rows
        self.splits = 1
        self.arrange_warps()
        fit = STAGE_BUDGET // self.stage_bytes()
        if stages is not None and not self.min_stages <= stages <= min(MAX_STAGES, fit):
            raise ValueError(f"{self.name} stages {stages}: {self.min_stages} to {min(MAX_STAGES, fit)}")
        self.stages = stages or mixture_group_stages(group_rows, self.stage_k, self.swizzle) or max(
            self.min_stages, min(MAX_STAGES, fit))

    def pitch(self) -> int:
        """A stage row's values: its K values, and 16 bytes of padding unless swizzled."""
        return self.stage_k + (0 if self.swizzle else VECTOR)

    def stage_bytes(self) -> int:
        return 2 * (self.tile_n + self.padded_rows) * self.pitch()

    def stage_column(self, row, col):
        """Where K value `col` (a 16-byte vector's first) of stage row `row` sits: padded rows keep it in
        place; with `swizzle` (rows of 128 or 256 bytes, no padding) its vector moves to vector
        (v ^ (row % 8)) of its 128 bytes, so ldmatrix's 8 rows at one vector still fall in 8 bank groups."""
        if not self.swizzle:
            return col
        vector = col // VECTOR
        return ((vector // 8) * 8 + ((vector % 8) ^ (row % 8))) * VECTOR

    def shared_bytes(self) -> int:
        return shared_bytes([(self.stages * self.stage_bytes(), 128)] + [(4 * self.padded_rows, 16)] * 3
                            + ([(4 * self.found_words(), 16)] if self.compact else []))

    def found_words(self) -> int:
        """The words `active_expert` leaves for the CTA: the expert, and with `spread` its block."""
        return 2 if self.spread else 1

    def work_rows(self) -> int:
        """The grid rows of the routed experts: one an expert, or with `spread` one a block of a segment, as many
        as any routing can fill: a split of the pairs into segments has at most min(experts, pairs) non-empty
        ones, and its blocks beyond each one's first hold `padded_rows` pairs each."""
        if not self.spread:
            return self.experts
        return min(self.experts, self.pairs) + self.pairs // self.padded_rows

    def shared_blocks(self) -> int:
        """The grid rows of a folded shared expert: one a block of its segment (every row), so its
        blocks run side by side rather than one after another in one CTA."""
        return -(-self.rows // self.padded_rows) if self.shared_hidden else 0

    @cute.jit
    def shared_block(self, expert: Int32):
        """The shared expert's block that grid row `expert` (past the routed experts) multiplies:
        (its first row, its rows)."""
        first = (expert - self.experts) * self.padded_rows
        return first, cutlass.min(Int32(self.padded_rows), self.rows - first)

    @cute.jit
    def expert_of(self, starts, slot: Int32, found, tid: Int32) -> Int32:
        """The expert grid row `slot` multiplies: `experts` and past it the folded shared expert's
        blocks, `experts + shared_blocks()` none. In grid order, or with `compact` the shared
        expert's blocks first and then the chosen experts in expert order (`active_expert`): the
        CTAs of experts no row chose are the grid's last, after the work, where in grid order they
        sit between the chosen ones. With `spread` the grid rows after the shared blocks are the
        blocks of the segments in expert order, and `segment` says which of its expert's."""
        expert = slot
        if cutlass.const_expr(self.compact):
            SB: cutlass.Constexpr = self.shared_blocks()
            chosen = self.active_expert(starts, cutlass.max(slot - SB, Int32(0)), found, tid)
            routed = cutlass.select_(chosen < self.experts, chosen, Int32(self.experts + SB))
            expert = cutlass.select_(slot < SB, slot + self.experts, routed)
        return expert

    @cute.jit
    def segment(self, starts, expert: Int32, found):
        """The places this CTA multiplies of routed `expert`'s segment: (its first, its count): the whole
        segment, or with `spread` the block of it that the CTA's grid row names (found[1], `active_expert`'s)."""
        first = starts[expert]
        count = starts[expert + 1] - first
        if cutlass.const_expr(self.spread):
            skip = found[1] * self.padded_rows
            first, count = first + skip, cutlass.min(count - skip, Int32(self.padded_rows))
        return first, count

    @cute.jit
    def active_expert(self, starts, rank_wanted: Int32, found, tid: Int32) -> Int32:
        """The `rank_wanted`-th expert in expert order whose segment is not empty, or `experts`
        where fewer are: the first warp reads the segments' starts (lane l holds experts l * held
        ..), ranks the non-empty ones by a shuffle scan, and the lane holding it leaves it in
        found[0] for the CTA. With `spread` an expert counts once a block of its segment, and the
        holder leaves the block's rank within its expert in found[1]."""
        E: cutlass.Constexpr = self.experts
        G: cutlass.Constexpr = self.padded_rows
        held: cutlass.Constexpr = -(-E // WARP)
        if tid < WARP:
            marks = cute.make_rmem_tensor(held, Int32)
            total = Int32(0)
            previous = starts[cutlass.min(tid * held, Int32(E))]
            for j in cutlass.range_constexpr(held):
                e = tid * held + j
                following = starts[cutlass.min(e + 1, Int32(E))]
                if cutlass.const_expr(self.spread):
                    marks[j] = cutlass.select_(e < E, (following - previous + G - 1) // G, Int32(0))
                else:
                    marks[j] = cutlass.select_((e < E) & (following > previous), Int32(1), Int32(0))
                previous = following
                total = total + marks[j]
            inclusive = warp_inclusive_sum(total, tid)
            if tid == 0:
                found[0] = Int32(E)
            cute.arch.sync_warp()  # the default is stored before the holder's expert
            rank = inclusive - total
            for j in cutlass.range_constexpr(held):
                if cutlass.const_expr(self.spread):
                    if (rank <= rank_wanted) & (rank_wanted < rank + marks[j]):
                        found[0] = tid * held + j
                        found[1] = rank_wanted - rank
                else:
                    if (marks[j] == 1) & (rank == rank_wanted):
                        found[0] = tid * held + j
                rank = rank + marks[j]
        cute.arch.sync_threads()
        return found[0]

    def launch(self) -> LaunchShape:
        """A CTA an (output tile, expert) pair, or with `spread` an (output tile, block of a segment) pair
        (`work_rows`); a folded shared expert's blocks are more grid rows."""
        return LaunchShape(grid=(self.n_tiles, self.work_rows() + self.shared_blocks(), 1),
                           block=(THREADS, 1, 1), shared_bytes=self.shared_bytes())

    def tables(self, smem):
        """The stage buffers and the block's tables (sources, targets, scales)."""
        rows_a_stage: cutlass.Constexpr = self.tile_n + self.padded_rows
        P: cutlass.Constexpr = self.pitch()
        layout = cute.make_layout((self.stages, rows_a_stage, P), stride=(rows_a_stage * P, P, 1))
        buffers = smem.allocate_tensor(cutlass.BFloat16, layout, 128)
        sources, targets = alloc(smem, Int32, self.padded_rows), alloc(smem, Int32, self.padded_rows)
        scales = alloc(smem, Float32, self.padded_rows)
        return buffers, sources, targets, scales, alloc(smem, Int32, self.found_words()) if self.compact else None

    @cute.jit
    def accumulate(self, act, weights, sources, buffers, acc, n0: Int32, inner: cutlass.Constexpr,
                   outputs: cutlass.Constexpr, tid: Int32, warp: Int32, lane: Int32):
        """acc = the block's rows (act rows `sources[i]`) x the tile's weight rows, over `inner` K
        values: the copies of `stages - 1` stages ahead of the one multiplied (the first stages'
        weights one group each, their rows one group, then a group a stage: `wait_stage`)."""
        S: cutlass.Constexpr = self.stages
        tiles: cutlass.Constexpr = -(-inner // self.stage_k)
        acc.fill(0.0)
        for s in cutlass.range_constexpr(S - 1):
            if cutlass.const_expr(s < tiles):
                self.load_tile(weights, buffers, s, n0, s, outputs, inner, tid)
            cute.arch.cp_async_commit_group()
        for s in cutlass.range_constexpr(S - 1):
            if cutlass.const_expr(s < tiles):
                self.load_block(act, sources, buffers, s, s, inner, tid)
        cute.arch.cp_async_commit_group()
        for tile in range(tiles):
            wait_stage(tile, S)  # this stage's copies have landed
            cute.arch.sync_threads()  # every thread's copies visible; the previous stage's buffer free
            ahead = tile + S - 1
            if ahead < tiles:
                self.load_tile(weights, buffers, ahead % S, n0, ahead, outputs, inner, tid)
                self.load_block(act, sources, buffers, ahead % S, ahead, inner, tid)
            cute.arch.cp_async_commit_group()
            self.multiply(buffers, acc, tile % S, warp, lane)
        cute.arch.cp_async_wait_group(0)

    @cute.jit
    def load_tile(self, weights, buffers, buffer, n0: Int32, k_tile, outputs: cutlass.Constexpr,
                  inner: cutlass.Constexpr, tid: Int32):
        """cp.async of the tile's weight rows at K stage `k_tile`; zeros past `outputs` and past K.
        One matrix: its rows n0.. in order. A gated pair (gate, up): warp column j's 2 h shared rows
        (h = half its weight rows: 16, or 8 in blocks of fewer than 64 rows) are gate units n0 + h j..
        then the same up units, so a warp's accumulators hold both."""
        V: cutlass.Constexpr = self.stage_k // VECTOR
        col = k_tile * self.stage_k
        if cutlass.const_expr(len(weights) == 1):
            for j in cutlass.range_constexpr(self.tile_n * V // THREADS):
                c = tid + j * THREADS
                r, v = c // V, c % V
                n = n0 + r
                keep = (n < outputs) & (col + v * VECTOR < inner)
                source = at(weights[0], cutlass.min(n, outputs - 1), cutlass.min(col + v * VECTOR, inner - VECTOR))
                copy_g2s_zfill(at(buffers, buffer, r, self.stage_column(r, v * VECTOR)), source, keep)
        else:
            per: cutlass.Constexpr = PAIR_UNITS * V // THREADS  # copies a thread of one matrix
            h: cutlass.Constexpr = self.warp_col_tiles * MMA_N // 2  # units a warp column
            for j in cutlass.range_constexpr(2 * per):
                which: cutlass.Constexpr = j // per
                c = tid + (j % per) * THREADS
                u, v = c // V, c % V
                n = n0 + u
                keep = (n < outputs) & (col + v * VECTOR < inner)
                source = at(weights[which], cutlass.min(n, outputs - 1),
                            cutlass.min(col + v * VECTOR, inner - VECTOR))
                row = (u // h) * 2 * h + which * h + u % h
                copy_g2s_zfill(at(buffers, buffer, row, self.stage_column(row, v * VECTOR)), source, keep)

    @cute.jit
    def load_block(self, act, sources, buffers, buffer, k_tile, inner: cutlass.Constexpr, tid: Int32):
        """cp.async of the block's rows (act row `sources[i]`) at K stage `k_tile`, after the
        weight rows; zeros past K and in the padding rows (source -1)."""
        V: cutlass.Constexpr = self.stage_k // VECTOR
        copies: cutlass.Constexpr = self.padded_rows * V
        for j in cutlass.range_constexpr(-(-copies // THREADS)):
            c = tid + j * THREADS
            i, v = c // V, c % V
            if c < copies:
                row = sources[i]
                col = k_tile * self.stage_k + v * VECTOR
                keep = (row >= 0) & (col < inner)
                source = at(act, cutlass.max(row, Int32(0)), cutlass.min(col, inner - VECTOR))
                copy_g2s_zfill(at(buffers, buffer, self.tile_n + i, self.stage_column(i, v * VECTOR)), source, keep)


class MixtureGroupedGated(GroupedProduct):
    """Params: x [rows, width] (rows `x_pitch` apart), starts [experts + 1] and order [rows *
    top_k] int32 (mixture_groups'), gate and up [experts, hidden, width], shared_gate and shared_up
    [shared_hidden, width] (where folded), hidden [rows * top_k, hidden] bf16 (segment order),
    shared [rows, shared_hidden] bf16 (the shared expert's hidden values, where folded)."""

    name = "mixture_grouped_gated"

    def __init__(self, rows: int, width: int, hidden: int, experts: int, top_k: int, shared_hidden: int = 0,
                 x_pitch: int | None = None, group_rows: int | None = None, stages: int | None = None,
                 stage_k: int | None = None, compact: bool | None = None, swizzle: bool | None = None,
                 spread: bool | None = None):
        group_rows = mixture_group_rows(rows, top_k, experts) if group_rows is None else group_rows
        MixtureGroupedSpec(self.name, rows, experts, top_k, width, hidden, shared_hidden, x_pitch, group_rows).check()
        self.rows, self.width, self.hidden, self.experts, self.top_k = rows, width, hidden, experts, top_k
        self.shared_hidden, self.x_pitch, self.pairs = shared_hidden, x_pitch, rows * top_k
        self.arrange(2 * PAIR_UNITS, group_rows, stages, stage_k, compact, swizzle, spread)
        self.n_tiles = -(-max(hidden, shared_hidden) // PAIR_UNITS)

    def params(self) -> list[TensorParam]:
        stacked = (self.experts, self.hidden, self.width)
        params = [TensorParam("x", (self.rows, self.width), "bfloat16", (self.x_pitch or self.width, 1)),
                  TensorParam("starts", (self.experts + 1,), "int32"), TensorParam("order", (self.pairs,), "int32"),
                  TensorParam("gate", stacked, "bfloat16"), TensorParam("up", stacked, "bfloat16")]
        if self.shared_hidden:
            params += [TensorParam(name, (self.shared_hidden, self.width), "bfloat16")
                       for name in ("shared_gate", "shared_up")]
        params.append(TensorParam("hidden", (self.pairs, self.hidden), "bfloat16", written=True))
        if self.shared_hidden:
            params.append(TensorParam("shared", (self.rows, self.shared_hidden), "bfloat16", written=True))
        return params

    def touched(self) -> dict[str, int]:
        return {"gate": min(self.experts, self.pairs), "up": min(self.experts, self.pairs)}

    @cute.jit
    def __call__(self, *, x: cute.Tensor, starts: cute.Tensor, order: cute.Tensor, gate: cute.Tensor,
                 up: cute.Tensor, shared_gate=None, shared_up=None, hidden: cute.Tensor, shared=None):
        launch(self, x, starts, order, gate, up, shared_gate, shared_up, hidden, shared)

    @cute.kernel
    def kernel(self, x: cute.Tensor, starts: cute.Tensor, order: cute.Tensor, gate: cute.Tensor, up: cute.Tensor,
               shared_gate, shared_up, hidden: cute.Tensor, shared):
        release_dependents_at_entry(self)
        tid, _, _ = cute.arch.thread_idx()
        n_tile, slot, _ = cute.arch.block_idx()
        warp, lane = tid // WARP, tid % WARP
        smem = cutlass.memory.SmemAllocator()
        buffers, sources, targets, _, found = self.tables(smem)
        acc = cute.make_rmem_tensor((self.warp_row_tiles, self.warp_col_tiles, 4), Float32)
        n0 = n_tile * PAIR_UNITS
        cute.arch.griddepcontrol_wait()  # the segments are mixture_groups'
        release_dependents(self)
        expert = self.expert_of(starts, slot, found, tid)
        if expert < self.experts:
            if n0 < self.hidden:
                pair = [expert_rows(w, expert, self.hidden, self.width) for w in (gate, up)]
                first, count = self.segment(starts, expert, found)
                self.blocks(x, pair, order, hidden, first, count, True, self.hidden, buffers, sources, targets, acc,
                            n0, tid, warp, lane)
        else:
            if cutlass.const_expr(self.shared_hidden > 0):
                if (n0 < self.shared_hidden) & (expert < self.experts + self.shared_blocks()):
                    first, count = self.shared_block(expert)
                    self.blocks(x, [shared_gate, shared_up], order, shared, first, count, False, self.shared_hidden,
                                buffers, sources, targets, acc, n0, tid, warp, lane)

    @cute.jit
    def blocks(self, x, pair, order, out, first: Int32, count: Int32, routed: cutlass.Constexpr,
               units: cutlass.Constexpr, buffers, sources, targets, acc, n0: Int32, tid: Int32, warp: Int32,
               lane: Int32):
        """The segment's `count` rows from place `first`, `padded_rows` a block: routed, block row i is
        x row order[place] // top_k and writes hidden row `place`; the shared expert's is a block of
        its rows (every row: `shared_blocks`) from row `first`, row r writing shared row r."""
        G: cutlass.Constexpr = self.padded_rows
        for b in range((count + G - 1) // G):
            cute.arch.sync_threads()  # the previous block's tables are read
            if tid < G:
                i = b * G + tid
                inside = i < count
                if cutlass.const_expr(routed):
                    place = first + i
                    sources[tid] = cutlass.select_(inside, order[cutlass.min(place, self.pairs - 1)] // self.top_k,
                                                   Int32(-1))
                    targets[tid] = cutlass.select_(inside, place, Int32(-1))
                else:
                    sources[tid] = cutlass.select_(inside, first + i, Int32(-1))
                    targets[tid] = cutlass.select_(inside, first + i, Int32(-1))
            cute.arch.sync_threads()
            self.accumulate(x, pair, sources, buffers, acc, n0, self.width, units, tid, warp, lane)
            self.store_swiglu(out, acc, targets, n0, units, warp, lane)

    @cute.jit
    def store_swiglu(self, out, acc, targets, n0: Int32, units: cutlass.Constexpr, warp: Int32, lane: Int32):
        """silu(gate) * up of each accumulator pair (a warp's first half of column tiles are gate
        units, the second half the same up units) as one bf16 word of row targets[i]."""
        half: cutlass.Constexpr = self.warp_col_tiles // 2
        row0 = (warp // self.warps_n) * self.warp_row_tiles * MMA_M
        unit0 = n0 + (warp % self.warps_n) * half * MMA_N
        for rt in cutlass.range_constexpr(self.warp_row_tiles):
            for h in cutlass.range_constexpr(2):
                target = targets[row0 + rt * MMA_M + h * 8 + lane // 4]
                for ct in cutlass.range_constexpr(half):
                    unit = unit0 + ct * MMA_N + 2 * (lane % 4)
                    g0, g1 = acc[rt, ct, 2 * h], acc[rt, ct, 2 * h + 1]
                    u0, u1 = acc[rt, ct + half, 2 * h], acc[rt, ct + half, 2 * h + 1]
                    if (target >= 0) & (unit < units):
                        store_global_words(at(out, target, unit),
                                           pack_bf16(g0 * sigmoid(g0) * u0, g1 * sigmoid(g1) * u1))


class MixtureGroupedDown(GroupedProduct):
    """Params: hidden [rows * top_k, hidden] bf16 (segment order), starts and order (mixture_groups'),
    weights [rows, top_k] fp32 (the routing weights), down [experts, width, hidden], shared [rows,
    shared_hidden] and shared_down [width, shared_hidden] (where folded), partial [rows * slots,
    width] fp32 (written: a row's slots, the shared expert's last)."""

    name = "mixture_grouped_down"

    def __init__(self, rows: int, width: int, hidden: int, experts: int, top_k: int, shared_hidden: int = 0,
                 group_rows: int | None = None, stages: int | None = None, stage_k: int | None = None,
                 compact: bool | None = None, swizzle: bool | None = None, tile_n: int | None = None,
                 spread: bool | None = None):
        group_rows = mixture_group_rows(rows, top_k, experts) if group_rows is None else group_rows
        MixtureGroupedSpec(self.name, rows, experts, top_k, width, hidden, shared_hidden, group_rows=group_rows).check()
        tile_n = MIXTURE_DOWN_TILE if tile_n is None else int(tile_n)
        if tile_n not in DOWN_TILES:
            raise ValueError(f"{self.name} tile_n {tile_n}: {' or '.join(map(str, DOWN_TILES))} outputs a CTA")
        self.rows, self.width, self.hidden, self.experts, self.top_k = rows, width, hidden, experts, top_k
        self.shared_hidden, self.pairs = shared_hidden, rows * top_k
        self.slots = top_k + (1 if shared_hidden else 0)
        self.arrange(tile_n, group_rows, stages, stage_k, compact, swizzle, spread)
        self.n_tiles = -(-width // tile_n)

    def params(self) -> list[TensorParam]:
        params = [TensorParam("hidden", (self.pairs, self.hidden), "bfloat16"),
                  TensorParam("starts", (self.experts + 1,), "int32"), TensorParam("order", (self.pairs,), "int32"),
                  TensorParam("weights", (self.rows, self.top_k), "float32"),
                  TensorParam("down", (self.experts, self.width, self.hidden), "bfloat16")]
        if self.shared_hidden:
            params += [TensorParam("shared", (self.rows, self.shared_hidden), "bfloat16"),
                       TensorParam("shared_down", (self.width, self.shared_hidden), "bfloat16")]
        return params + [TensorParam("partial", (self.rows * self.slots, self.width), "float32", written=True)]

    def touched(self) -> dict[str, int]:
        return {"down": min(self.experts, self.pairs)}

    @cute.jit
    def __call__(self, *, hidden: cute.Tensor, starts: cute.Tensor, order: cute.Tensor, weights: cute.Tensor,
                 down: cute.Tensor, shared=None, shared_down=None, partial: cute.Tensor):
        launch(self, hidden, starts, order, weights, down, shared, shared_down, partial)

    @cute.kernel
    def kernel(self, hidden: cute.Tensor, starts: cute.Tensor, order: cute.Tensor, weights: cute.Tensor,
               down: cute.Tensor, shared, shared_down, partial: cute.Tensor):
        release_dependents_at_entry(self)
        tid, _, _ = cute.arch.thread_idx()
        n_tile, slot, _ = cute.arch.block_idx()
        warp, lane = tid // WARP, tid % WARP
        smem = cutlass.memory.SmemAllocator()
        buffers, sources, targets, scales, found = self.tables(smem)
        acc = cute.make_rmem_tensor((self.warp_row_tiles, self.warp_col_tiles, 4), Float32)
        n0 = n_tile * self.tile_n
        cute.arch.griddepcontrol_wait()  # the hidden values, segments and routing weights are predecessors'
        release_dependents(self)
        expert = self.expert_of(starts, slot, found, tid)
        if expert < self.experts:
            rows = expert_rows(down, expert, self.width, self.hidden)
            first, count = self.segment(starts, expert, found)
            self.blocks(hidden, rows, order, weights, partial, first, count, True, self.hidden, buffers, sources,
                        targets, scales, acc, n0, tid, warp, lane)
        else:
            if cutlass.const_expr(self.shared_hidden > 0):
                if expert < self.experts + self.shared_blocks():
                    first, count = self.shared_block(expert)
                    self.blocks(shared, shared_down, order, weights, partial, first, count, False,
                                self.shared_hidden, buffers, sources, targets, scales, acc, n0, tid, warp, lane)

    @cute.jit
    def blocks(self, act, rows, order, weights, partial, first: Int32, count: Int32, routed: cutlass.Constexpr,
               inner: cutlass.Constexpr, buffers, sources, targets, scales, acc, n0: Int32, tid: Int32,
               warp: Int32, lane: Int32):
        """The segment's rows `padded_rows` a block: routed, block row i is hidden row `place` (the
        segment is contiguous), pair order[place] = r * top_k + k, written to partial row
        r * slots + k times weights[r, k]; the shared expert's block from row `first`, row r to
        partial row r * slots + top_k, unscaled."""
        G: cutlass.Constexpr = self.padded_rows
        for b in range((count + G - 1) // G):
            cute.arch.sync_threads()  # the previous block's tables are read
            if tid < G:
                i = b * G + tid
                inside = i < count
                if cutlass.const_expr(routed):
                    place = first + i
                    pair = order[cutlass.min(place, self.pairs - 1)]
                    row, k = pair // self.top_k, pair % self.top_k
                    sources[tid] = cutlass.select_(inside, place, Int32(-1))
                    targets[tid] = cutlass.select_(inside, row * self.slots + k, Int32(-1))
                    scales[tid] = weights[cutlass.min(row, self.rows - 1), k]
                else:
                    sources[tid] = cutlass.select_(inside, first + i, Int32(-1))
                    targets[tid] = cutlass.select_(inside, (first + i) * self.slots + self.top_k, Int32(-1))
                    scales[tid] = Float32(1.0)
            cute.arch.sync_threads()
            self.accumulate(act, [rows], sources, buffers, acc, n0, inner, self.width, tid, warp, lane)
            self.store_scaled(partial, acc, targets, scales, n0, warp, lane)

    @cute.jit
    def store_scaled(self, partial, acc, targets, scales, n0: Int32, warp: Int32, lane: Int32):
        """Each accumulator pair (outputs c, c + 1 of block row i) times scales[i] to partial row
        targets[i] (fp32)."""
        row0 = (warp // self.warps_n) * self.warp_row_tiles * MMA_M
        col0 = n0 + (warp % self.warps_n) * self.warp_col_tiles * MMA_N
        for rt in cutlass.range_constexpr(self.warp_row_tiles):
            for h in cutlass.range_constexpr(2):
                i = row0 + rt * MMA_M + h * 8 + lane // 4
                target, scale = targets[i], scales[i]
                for ct in cutlass.range_constexpr(self.warp_col_tiles):
                    c = col0 + ct * MMA_N + 2 * (lane % 4)
                    if (target >= 0) & (c < self.width):
                        partial[target, c] = acc[rt, ct, 2 * h] * scale
                        partial[target, c + 1] = acc[rt, ct, 2 * h + 1] * scale


class MixtureSum:
    """Params: x [rows, width] (only with the shared expert's gate row; rows `x_pitch` apart),
    partial [rows * slots, width] fp32 (mixture_grouped_down's), shared_gate_row [1, width] (where
    `shared_gate`), out [rows, width] bf16. `shared`: the last slot of a row is the shared
    expert's."""

    name = "mixture_sum"

    def __init__(self, rows: int, width: int, top_k: int, shared: bool = False, shared_gate: bool = False,
                 x_pitch: int | None = None):
        MixtureGroupedSpec(self.name, rows, max(top_k, 1), top_k, width, x_pitch=x_pitch).check()
        if shared_gate and not shared:
            raise ValueError("mixture_sum shared_gate: the gate row scales a shared expert; there is none")
        self.rows, self.width, self.top_k, self.shared, self.shared_gate = rows, width, top_k, shared, shared_gate
        self.x_pitch = x_pitch
        self.slots = top_k + (1 if shared else 0)

    def params(self) -> list[TensorParam]:
        params = [TensorParam("x", (self.rows, self.width), "bfloat16", (self.x_pitch or self.width, 1))] \
            if self.shared_gate else []
        params.append(TensorParam("partial", (self.rows * self.slots, self.width), "float32"))
        if self.shared_gate:
            params.append(TensorParam("shared_gate_row", (1, self.width), "bfloat16"))
        return params + [TensorParam("out", (self.rows, self.width), "bfloat16", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(-(-self.width // (4 * SUM_THREADS)), self.rows, 1), block=(SUM_THREADS, 1, 1))

    @cute.jit
    def __call__(self, *, x=None, partial: cute.Tensor, shared_gate_row=None, out: cute.Tensor):
        launch(self, x, partial, shared_gate_row, out)

    @cute.kernel
    def kernel(self, x, partial: cute.Tensor, shared_gate_row, out: cute.Tensor):
        release_dependents_at_entry(self)
        tid, _, _ = cute.arch.thread_idx()
        block, row, _ = cute.arch.block_idx()
        cute.arch.griddepcontrol_wait()  # the partial sums are mixture_grouped_down's
        release_dependents(self)
        scale = Float32(1.0)
        if cutlass.const_expr(self.shared_gate):  # every warp dots the gate row itself: no barrier
            gate = row_dots([shared_gate_row], Int32(0), 1, 1, x, row, Int32(0), self.width, tid % WARP)
            scale = sigmoid(gate[0])
        c = (block * SUM_THREADS + tid) * 4
        if c < self.width:
            total = [Float32(0.0)] * 4
            for k in cutlass.range_constexpr(self.slots):  # slot order: the same sum every run
                values = load_f32x4(at(partial, row * self.slots + k, c))
                if cutlass.const_expr(self.shared and k == self.top_k):
                    values = [v * scale for v in values]
                total = [total[e] + values[e] for e in range(4)]
            store_global_words(at(out, row, c), (pack_bf16(total[0], total[1]), pack_bf16(total[2], total[3])))
