"""gemm_tc's wgmma engine (`GemmSchedule(engine="wgmma")`): the same product, params and launch
interface as the mma.sync kernel (gemm_tc.py), multiplied by Hopper's warpgroup MMA from shared
memory instead of mma.sync from ldmatrix'd registers. The default engine (checked on the H200
against the interpreter and by compute-sanitizer; faster than mma.sync on every bench shape).

Operands swapped: the weight rows are wgmma's M side (A; a consumer warpgroup a 64 weight rows: two
make the default 128-row tile, one to four the `tile_n` of 64-256 a schedule may ask for), the
activation rows its N side (B; by default all of a launch's rows,
padded inside the kernel to a multiple of 8: one `wgmma.m64nNk16` with N = 8..256, so the weight is
read once for every row). A schedule's `block_rows` splits the rows into blocks, a CTA each (the
grid's middle axis): where one block leaves SMs idle (96 tiles of 128 weight rows on 132 SMs), more
CTAs of fewer rows fill them; a weight tile's blocks are adjacent CTAs, so all but its first read
come from L2. Both are K-major, as stored, in 128-byte-swizzled stages of 64 K values: the
layout wgmma's descriptors read without bank conflicts.

Loads, three ways (`GemmSchedule.loads`; by default a producer warpgroup for blocks of more than
GEMM_PRODUCER_ROWS rows, where it measured 14-16% faster, else the thread copies):
- "copies": `cp.async` of 16-byte vectors by every thread, each written to its
  swizzled place (chunk c of shared row r at chunk c ^ (r % 8)); K's tail, weight rows past N and
  the padding rows are zero-filled by the same copies. A `fence.proxy.async` makes the landed stage
  visible to wgmma (the async proxy).
- "tma": thread 0 fills a stage with two `cp.async.bulk.tensor` copies (the weight tile's box and
  the row block's box, 64 K values wide, in the 128-byte swizzle wgmma reads), completing on the
  stage's mbarrier, which every thread waits on. The tensor maps are the params `x_map` and
  `w_map`: the runtime encodes them over x's and w's windows at load and passes their addresses
  (`TensorParam.tensor_map`), so the ABI stays one 8-byte pointer a param. Out-of-bounds rows and
  K values land as zeros; a block's padding rows may hold the next block's rows, which only feed
  wgmma columns that are never stored.
- "producer": the same boxes, issued by a third warpgroup of its own (one thread of it), which
  refills a stage as soon as both consumer warpgroups hand it back on the stage's "empty" mbarrier
  (each arrives once its wgmma of the stage has retired); the consumers wait only on the stage's
  "full" mbarrier, never on a CTA barrier inside the loop, and all `stages` stages fly. The
  producer warpgroup keeps its registers (no setmaxnreg: it stays for the epilogue's barriers,
  storing nothing; 155 registers a thread at 256 rows, no local memory).
- "producer" with `multicast` M (2 or 4): the CTAs of M neighbouring weight tiles are one cluster
  (the grid's weight tiles rounded up to whole clusters: a tile past N loads zeros and stores
  nothing). Their row boxes are the same, so rank r loads rows r / M of it and multicasts them to
  all M CTAs, at the same shared offsets and completing on each CTA's own "full" barrier; a CTA
  refills a stage only once the consumers of all M CTAs have handed it back (each consumer
  warpgroup arrives on the stage's "empty" barrier of every CTA of the cluster). A cluster barrier
  after the barriers' start (no multicast lands before a peer's barriers exist) and before the
  exit (no arrival on a barrier of a CTA that has left).
PDL every way: the first weight stages before `griddepcontrol.wait`, the activation rows after it.
One stage's wgmma stays in flight while the next is issued (`wait_group(1)`), so the copies and the
one-thread TMA run `stages - 2` ahead (at least 3 stages); the producer keeps every stage in flight.

Epilogue: an accumulator is (output, row); the tile goes transposed, row-major by activation row,
into the idle stage buffers, and y's rows are stored from there. A plain product of one split stages
it as bf16 by `stmatrix` and stores 16-byte words (`store_packed`); a K split, a gated pair and fp32
outputs stage the fp32 tile and store 8-byte words (`GemmTc.sum_partials`).
Split-K as the mma engine: `splits` CTAs of one cluster take consecutive K ranges and the ranks sum
their tiles over DSMEM, in rank order, before the store. `occupancy` 2 compiles the kernel for two
CTAs an SM (half the registers and shared memory each).

Stream-K (`stream`: G CTAs, one an SM, producer loads): the (weight tile, row block, K stage)
units, K stage fastest, are dealt out evenly, CTA c taking [c U / G, (c + 1) U / G), at most one
tile's stages (so G is at least the tiles). The producer's stages flow on across a tile's end. A
run that starts inside a tile stores that tile's fp32 partial into the CTA's slot of the plan's
workspace (`partials`, thread-major 16-byte vectors) and raises its flag (a release at GPU
scope); the CTA whose run holds a tile's first stage acquires the flags of the CTAs after it, adds
their partials in CTA order (deterministic), lowers the flags for the next launch and stores the
tile as above. Every CTA must be resident at once (an owner spins on the CTAs after it): the launch
asks for more than half an SM's shared memory, and the runtime refuses a GPU of fewer SMs.
Measured on the H200 (bench/RESULTS.md, 2026-11-30): it fills the SMs but costs each CTA the
partial's exchange, so it wins only where K is long and tiles are few (llama down at 128 rows)."""

from __future__ import annotations

from dataclasses import replace

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90
from cutlass import BFloat16, Float32, Int32
from cutlass.tensor_utils import LayoutEnum

from lanec.codegen.facts import (
    GEMM_MAX_ROWS,
    GEMM_PRODUCER_ROWS,
    GEMM_STREAM_SLOT,
    PAIR_TILE,
    SHARED_LIMIT,
    SM_RESERVED_SHARED,
    SM_SHARED,
    VECTOR,
    GemmSchedule,
)
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.gemm_tc import TILE_K, GemmTc, blocks_of
from lanec.codegen.kernels.primitives import (
    acquire_flag,
    acquire_tensor_map,
    at,
    copy_g2s_zfill,
    load_f32x4,
    load_tensor_box,
    multicast_tensor_box,
    pack_bf16,
    release_flag,
    smem_words,
    stmatrix_trans,
    store_f32x4,
    store_global_words,
    wait_stage,
)

WGMMA_M = 64  # weight rows a warpgroup's wgmma
WGMMA_K = 16
ROW_BYTES = 2 * TILE_K  # a stage's shared row: 64 K values, one 128-byte swizzle row
SWIZZLE_ROWS = 8  # rows of one 1024-byte swizzle atom (chunk c of row r sits at c ^ (r % 8))
ALIGN = 1024  # the swizzle atom: wgmma's 128-byte swizzle reads absolute address bits
WARPGROUP = 128  # threads of a warpgroup: wgmma's unit, and the producer's
PRODUCER_THREADS = WARPGROUP  # loads "producer": a warpgroup past the consumers issues the TMA copies
REGISTER_FILE = 64 * 1024  # 32-bit registers of an SM, shared by a CTA's threads
MAX_REGISTERS = 255  # a thread's most
ACCUMULATOR_SLACK = 32  # a consumer's registers beyond its accumulators (ptxas: 154 at 128 of them)


class GemmWgmma(GemmTc):
    """y[b, n] = sum_k x[b, k] w[n, k] on wgmma; see the module docstring. `GemmTc(...)` builds
    it when the schedule's engine is "wgmma" (GemmTc's constructor, with this engine's tile, row
    block and padding); its knobs are the schedule's (`GemmSchedule`)."""

    engine = "wgmma"
    tiles = (128,)  # the default grid's: two consumer warpgroups of 64 weight rows
    tile_choices = (64, 128, 192, 256)  # a schedule's: a consumer warpgroup a 64 weight rows
    block_limit = GEMM_MAX_ROWS  # one block of every row: wgmma's N side takes up to 256, the weight streams once
    row_quantum = SWIZZLE_ROWS  # wgmma's N steps by 8: rows padded to whole swizzle atoms
    min_stages = 3
    # a stage's wgmma takes a fraction of mma.sync's time, so a CTA's fixed cost weighs more: 6
    # stages' time picks bench/gemm.py's fastest split on 43 of its 65 shapes (2026-11-29)
    fill_stages = 6

    def __init__(self, rows, *args, schedule=None, **kwargs):
        knobs = GemmSchedule.of(schedule or {})
        _, block_rows = blocks_of(rows, knobs.block_rows or self.block_limit)
        self.stream_ctas = knobs.stream or 0
        default_loads = "producer" if block_rows > GEMM_PRODUCER_ROWS or self.stream_ctas else "copies"
        self.loads = knobs.loads or default_loads
        self.multicast = knobs.multicast or 1
        self.occupancy = knobs.occupancy or 1
        if (self.multicast > 1 or self.stream_ctas) and knobs.splits is None:  # no K split over a cluster
            schedule = knobs.updated({"splits": 1})
        # multicast: a block's rows padded to M whole 8-row slices, one a CTA of the cluster
        self.row_quantum = SWIZZLE_ROWS * self.multicast
        super().__init__(rows, *args, schedule=schedule, **kwargs)
        problems = self.tile_problems()
        if problems:
            raise ValueError(f"gemm_tc wgmma tile_n {self.tile_n}: " + "; ".join(problems))
        problems = self.multicast_problems()
        if problems:
            raise ValueError(f"gemm_tc multicast {self.multicast}: " + "; ".join(problems))
        problems = self.per_head_problems()
        if problems:
            raise ValueError("gemm_tc wgmma per-head read: " + "; ".join(problems))
        self.work_tiles = self.n_tiles * self.row_blocks
        self.units = self.work_tiles * self.k_tiles  # stream-K's (weight tile, row block, K stage) units
        problems = self.stream_problems()
        if problems:
            raise ValueError(f"gemm_tc stream {self.stream_ctas}: " + "; ".join(problems))

    @property
    def threads(self) -> int:
        """The consumer threads: a warpgroup a 64 weight rows of the tile (a producer warpgroup's
        are past them)."""
        return self.tile_n // WGMMA_M * WARPGROUP

    def tile_problems(self) -> list[str]:
        """Why the consumers of a `tile_n`-row tile cannot hold the block's accumulators (none:
        they can). A consumer thread holds 64 weight rows x the padded rows / 128 fp32 sums; the
        CTA's threads share the SM's 64K registers (ptxas caps each at 64K / threads, whole 8s),
        and the rest of the loop takes about ACCUMULATOR_SLACK more. A gated pair's tile is its 64
        gate rows beside their 64 up rows."""
        found = []
        if self.gated and self.tile_n != 2 * PAIR_TILE:
            found.append(f"a gated pair's tile is {PAIR_TILE} gate rows beside their {PAIR_TILE} up rows")
        threads = self.threads + (PRODUCER_THREADS if self.loads == "producer" else 0)
        cap = min(MAX_REGISTERS, REGISTER_FILE // (threads * self.occupancy) // 8 * 8)
        held = WGMMA_M * self.padded_rows // WARPGROUP
        if held + ACCUMULATOR_SLACK > cap:
            found.append(f"{threads * self.occupancy} threads get {cap} registers each, and a consumer's {held} "
                         f"accumulators ({self.padded_rows} rows) need {held + ACCUMULATOR_SLACK}: fewer block_rows")
        if self.occupancy * (self.shared_bytes() + SM_RESERVED_SHARED) > SM_SHARED:
            found.append(f"{self.occupancy} CTAs of {self.shared_bytes()} bytes of shared memory (and "
                         f"{SM_RESERVED_SHARED} reserved each) exceed the SM's {SM_SHARED}: fewer stages")
        return found

    def stream_problems(self) -> list[str]:
        """Why `stream` CTAs cannot deal out this product's units (none: they can). Each CTA takes
        a run of at most one tile's K stages (no CTA finishes a tile in its middle), so there are no
        fewer CTAs than tiles, and no more than units."""
        if not self.stream_ctas:
            return []
        found = []
        if self.loads != "producer":
            found.append(f"only a producer warpgroup loads a stream's stages (loads 'producer'; got {self.loads!r})")
        if self.splits > 1 or self.multicast > 1:
            found.append(f"its CTAs are one a run of units, not a cluster's ({self.splits} splits, "
                         f"multicast {self.multicast})")
        if self.tile_n * self.padded_rows > GEMM_STREAM_SLOT:
            found.append(f"a tile of {self.tile_n} x {self.padded_rows} sums is larger than a workspace slot "
                         f"({GEMM_STREAM_SLOT})")
        if not self.work_tiles <= self.stream_ctas <= self.units:
            found.append(f"{self.work_tiles} tiles of {self.k_tiles} K stages take {self.work_tiles}-{self.units} "
                         "CTAs (each a run of at most one tile's stages)")
        return found

    def stream_start(self, cta: int) -> int:
        """The first unit of CTA `cta`'s run (plain integers, as the kernel computes them)."""
        return cta * self.units // self.stream_ctas

    def touched(self) -> dict[str, int]:
        """A stream's workspace slots written: one a CTA whose run starts inside a tile."""
        if not self.stream_ctas:
            return {}
        return {"partials": sum(self.stream_start(c) % self.k_tiles != 0 for c in range(self.stream_ctas))}

    def multicast_problems(self) -> list[str]:
        """Why the CTAs of `multicast` weight tiles cannot share their row boxes (none: they can)."""
        if self.multicast == 1:
            return []
        found = []
        if self.loads != "producer":
            found.append(f"only a producer warpgroup multicasts (loads 'producer'; got {self.loads!r})")
        if self.splits > 1:
            found.append(f"its cluster is the weight tiles', not a K split's ({self.splits} splits)")
        return found

    def per_head_problems(self) -> list[str]:
        """Why this launch cannot read a per-head part (none: it can, or reads none). A CTA's weight tile
        keeps inside one head, so its activation loads read that head's part: its copies, or its row
        boxes where the head's width is whole boxes (zeros past it would be the next head's values)."""
        if self.per_head is None:
            return []
        found = []
        head_rows = self.outputs // self.per_head[0]
        if head_rows % self.tile_n:
            found.append(f"a head's {head_rows} outputs are not whole tiles of {self.tile_n} weight rows")
        if self.stream_ctas or self.multicast > 1:
            found.append(f"a CTA reads its own tile's head part (no stream or multicast; got stream "
                         f"{self.stream_ctas}, multicast {self.multicast})")
        if self.loads != "copies" and self.width % TILE_K:
            found.append(f"a row box of {TILE_K} values would read past the head's {self.width} into the next "
                         f"head's part: loads 'copies' (got {self.loads!r})")
        return found

    @cute.jit
    def x_column(self):
        """A per-head read's first activation column for this CTA: its weight tile's head's part (head h's
        at h * unit + offset)."""
        heads, unit, offset = self.per_head
        _, _, n_tile = cute.arch.block_idx()
        return n_tile * self.tile_n // (self.outputs // heads) * unit + offset

    def ahead(self) -> int:
        """One stage fewer than the mma engine: a stage's wgmma stays in flight while the next is
        issued, so the buffer refilled at stage t is the one stage t - 2 read."""
        return self.stages - 2

    def params(self) -> list[TensorParam]:
        """gemm_tc's x, w and y; with TMA loads the tensor maps over x (a block of rows a box) and
        w (a weight tile a box) after them."""
        params = super().params()
        if self.stream_ctas:  # the plan's one workspace: a CTA's fp32 partial tile and its flag
            params += [TensorParam("partials", (self.stream_ctas, self.tile_n * self.padded_rows), "float32",
                                   (GEMM_STREAM_SLOT, 1), written=True),
                       TensorParam("flags", (self.stream_ctas,), "int32", written=True)]
        if self.loads != "copies":  # a multicasting CTA loads its slice of the row box
            params += [TensorParam.map_of("x_map", "x", (TILE_K, self.padded_rows // self.multicast), ROW_BYTES),
                       TensorParam.map_of("w_map", "w", (TILE_K, self.tile_n), ROW_BYTES)]
        return params

    @cute.jit
    def __call__(self, *, x: cute.Tensor, w: cute.Tensor, y: cute.Tensor, partials: cute.Tensor = None,
                 flags: cute.Tensor = None, x_map: cute.Tensor = None, w_map: cute.Tensor = None):
        occupancy = self.occupancy if self.occupancy > 1 else 0  # none asked: ptxas's own registers
        launch(self, x, w, y, partials, flags, x_map, w_map, min_blocks_per_mp=occupancy)

    def arrange_warps(self) -> None:
        """Nothing to arrange: the tiled MMA gives each warpgroup its 64 weight rows (kernel)."""

    def stage_bytes(self) -> int:
        return (self.tile_n + self.padded_rows) * ROW_BYTES  # swizzled rows need no padding

    def region_bytes(self) -> int:
        """The stages, or the fp32 tile the epilogue stages through them when that is larger (it
        always goes through shared memory here, split or not)."""
        return max(self.stages * self.stage_bytes(), 4 * self.padded_rows * self.partial_pitch())

    def shared_bytes(self) -> int:
        """The region, room to align it to the swizzle atom, and with TMA loads a stage's mbarrier
        each (two with a producer warpgroup: full and empty)."""
        barriers = {"copies": 0, "tma": 1, "producer": 2}[self.loads]
        return self.region_bytes() + ALIGN + 8 * barriers * self.stages

    def launch(self) -> LaunchShape:
        """gemm_tc's grid; a producer warpgroup adds 128 threads to the consumer warpgroups."""
        shape = super().launch()
        if self.loads == "producer":
            shape = replace(shape, block=(self.threads + PRODUCER_THREADS, 1, 1))
        if self.stream_ctas:  # one CTA a run of units, one an SM (asking for more than half its shared memory)
            shape = replace(shape, grid=(self.stream_ctas, 1, 1), cluster=(1, 1, 1),
                            shared_bytes=max(shape.shared_bytes, SHARED_LIMIT // 2 + ALIGN))
        if self.multicast > 1:  # whole clusters of weight tiles
            M = self.multicast
            shape = replace(shape, grid=(shape.grid[0], shape.grid[1], -(-shape.grid[2] // M) * M), cluster=(1, 1, M))
        return shape

    @cute.kernel
    def kernel(self, x: cute.Tensor, w: cute.Tensor, y: cute.Tensor, partials: cute.Tensor, flags: cute.Tensor,
               x_map: cute.Tensor, w_map: cute.Tensor):
        release_dependents_at_entry(self)
        tid, _, _ = cute.arch.thread_idx()
        split, block, n_tile = cute.arch.block_idx()
        S: cutlass.Constexpr = self.stages
        R: cutlass.Constexpr = self.padded_rows
        smem = cutlass.memory.SmemAllocator()
        # one region: the weight stages, then the activation stages (later the split's partial tile)
        region = smem.allocate(self.region_bytes(), ALIGN)
        weights_base = cute.recast_ptr(region, dtype=BFloat16)
        rows_base = weights_base + S * self.tile_n * TILE_K
        tiler = (self.tile_n, R, TILE_K)
        a_layout = sm90.make_smem_layout_a(LayoutEnum.ROW_MAJOR, tiler, BFloat16, S)
        b_layout = sm90.make_smem_layout_b(LayoutEnum.ROW_MAJOR, tiler, BFloat16, S)
        sa = cute.make_tensor(cute.recast_ptr(weights_base, a_layout.inner, dtype=BFloat16), a_layout.outer)
        sb = cute.make_tensor(cute.recast_ptr(rows_base, b_layout.inner, dtype=BFloat16), b_layout.outer)

        mma = sm90.make_trivial_tiled_mma(BFloat16, BFloat16, cute.nvgpu.OperandMajorMode.K,
                                          cute.nvgpu.OperandMajorMode.K, Float32,
                                          (self.tile_n // WGMMA_M, 1, 1), (WGMMA_M, R))
        thread_mma = mma.get_slice(tid)
        fragment_a = mma.make_fragment_A(thread_mma.partition_A(sa))
        fragment_b = mma.make_fragment_B(thread_mma.partition_B(sb))
        tile_coords = thread_mma.partition_C(cute.make_identity_tensor((self.tile_n, R)))
        acc = cute.make_rmem_tensor(tile_coords.shape, Float32)
        acc.fill(0.0)
        mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)

        if cutlass.const_expr(self.stream_ctas > 0):
            self.stream_units(x_map, w_map, y, partials, flags, smem, region, weights_base, rows_base, mma, acc,
                              fragment_a, fragment_b, tile_coords, split, tid)
        else:
            n0 = n_tile * self.tile_n
            first_row = block * self.block_rows
            if cutlass.const_expr(self.loads == "producer"):
                full = smem.allocate_array(cutlass.Uint64, S, byte_alignment=8)
                empty = smem.allocate_array(cutlass.Uint64, S, byte_alignment=8)
                k_first, tiles = self.split_stages(split)
                self.produce_and_multiply(x_map, w_map, full, empty, weights_base, rows_base, mma, acc, fragment_a,
                                          fragment_b, tiles, lambda s: (n0, first_row, k_first + s), tid)
            else:
                self.multiply_stages(x, w, x_map, w_map, smem, weights_base, rows_base, mma, acc, fragment_a,
                                     fragment_b, n0, first_row, split, tid)
            self.store_tile(y, region, acc, tile_coords, split, n0, first_row, tid)
        if cutlass.const_expr(self.multicast > 1):
            cute.arch.cluster_arrive()  # no CTA leaves while a peer may still arrive on its barriers
            cute.arch.cluster_wait()

    def packed_epilogue(self) -> bool:
        """Whether the tile is staged as bf16 by `stmatrix` (one split, a plain product's bf16 y),
        not as the fp32 tile a K split's ranks sum, a gated pair's SwiGLU reads or fp32 y stores."""
        return self.splits == 1 and not self.gated and self.out_dtype == "bfloat16"

    @cute.jit
    def store_tile(self, y, region, acc, tile_coords, split: Int32, n0: Int32, first_row: Int32, tid: Int32):
        """The tile (row-major by activation row) through the idle stage buffers: y's rows are then
        stored as whole words; split, the cluster sums the ranks' fp32 tiles over DSMEM first. A
        plain product of one split stages bf16 (`packed_epilogue`, `store_packed`)."""
        if cutlass.const_expr(self.packed_epilogue()):
            self.store_packed(y, region, acc, n0, first_row, tid)
        else:
            P: cutlass.Constexpr = self.partial_pitch()
            R: cutlass.Constexpr = self.padded_rows
            partial = cute.make_tensor(cute.recast_ptr(region, dtype=Float32),
                                       cute.make_layout((R, P), stride=(P, 1)))
            cute.arch.sync_threads()  # every warpgroup is done with the stage buffers the tile reuses
            if tid < self.threads:  # the consumers' accumulators (not a producer warpgroup's)
                for e in cutlass.range(cute.size(acc), unroll_full=True):
                    out, row = tile_coords[e]
                    partial[row, out] = acc[e]
            self.sum_partials(y, partial, split, n0, first_row, tid)

    @cute.jit
    def store_packed(self, y, region, acc, n0: Int32, first_row: Int32, tid: Int32):
        """The tile rounded to bf16 and staged transposed by `stmatrix` (row-major by activation
        row, rows padded by 16 bytes: the 8 rows of a matrix in 8 different bank groups), then y's
        rows stored as 16-byte words. A consumer thread's accumulators follow wgmma's C fragment:
        value c + 2 h + 4 j is weight row 16 (warp % 4) + lane / 4 + 8 h (of its warpgroup's 64) and
        activation row 8 j + 2 (lane % 4) + c, so the pair (c = 0, 1) is one word of an 8x8
        matrix's fragment; four matrices a `stmatrix.x4` (h = 0, 1 of two row blocks j), lanes 8q to
        8q + 7 giving the rows of matrix q (a 2-matrix store for an odd last block)."""
        R: cutlass.Constexpr = self.padded_rows
        PB: cutlass.Constexpr = self.tile_n + VECTOR  # bf16 pitch: 16 bytes of padding
        staged = cute.make_tensor(cute.recast_ptr(region, dtype=BFloat16), cute.make_layout((R, PB), stride=(PB, 1)))
        cute.arch.sync_threads()  # every warpgroup is done with the stage buffers the tile reuses
        if tid < self.threads:  # the consumers' accumulators (not a producer warpgroup's)
            lane = tid % 32
            quad = lane // 8
            first_out = (tid // WARPGROUP) * WGMMA_M + ((tid % WARPGROUP) // 32) * 16 + (quad % 2) * 8
            for jj in cutlass.range_constexpr(R // 16):
                j = 2 * jj + quad // 2
                words = tuple(pack_bf16(acc[4 * (2 * jj + b) + 2 * h], acc[4 * (2 * jj + b) + 2 * h + 1])
                              for b in range(2) for h in range(2))
                stmatrix_trans(at(staged, 8 * j + lane % 8, first_out), words)
            if cutlass.const_expr(R % 16):
                j = R // 8 - 1
                words = tuple(pack_bf16(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]) for h in range(2))
                stmatrix_trans(at(staged, 8 * j + lane % 8, first_out), words)
        cute.arch.sync_threads()  # the whole tile is staged
        V: cutlass.Constexpr = self.tile_n // VECTOR  # 16-byte vectors of a row
        vectors: cutlass.Constexpr = self.block_rows * V
        T: cutlass.Constexpr = self.threads
        for k in cutlass.range_constexpr(-(-vectors // T)):
            v = tid + k * T
            i, q = v // V, v % V
            row, col = first_row + i, n0 + VECTOR * q
            if (v < vectors) & (row < self.rows) & (col < self.y_width) & (tid < T):
                store_global_words(at(y, row, col), tuple(smem_words(at(staged, i, VECTOR * q))))

    @cute.jit
    def stream_units(self, x_map, w_map, y, partials, flags, smem, region, weights_base, rows_base, mma, acc,
                     fragment_a, fragment_b, tile_coords, cta: Int32, tid: Int32):
        """Stream-K: CTA `cta` multiplies units [start, end) of the (weight tile, row block, K stage)
        units, tile by tile, on the producer's pipeline (the stages flow on across a tile's end). A
        run that starts inside a tile ends that tile early: its fp32 partial goes to the CTA's
        workspace slot and its flag is raised. The run's last tile is stored by this CTA where the
        run holds its first stage (after adding, in CTA order, the partials of the CTAs after it
        that hold the rest), else it is a partial too. Deterministic: the runs are fixed."""
        S: cutlass.Constexpr = self.stages
        K: cutlass.Constexpr = self.k_tiles
        G: cutlass.Constexpr = self.stream_ctas
        U: cutlass.Constexpr = self.units
        full = smem.allocate_array(cutlass.Uint64, S, byte_alignment=8)
        empty = smem.allocate_array(cutlass.Uint64, S, byte_alignment=8)
        start = cta * U // G
        end = (cta + 1) * U // G
        last = (end - 1) // K  # the run's last tile, and its first unit
        head = last * K
        self.produce_and_multiply(x_map, w_map, full, empty, weights_base, rows_base, mma, acc, fragment_a,
                                  fragment_b, end - start, lambda i: self.unit_place(start + i), tid,
                                  lambda i: self.first_tile_ends(partials, flags, acc, start + i, end, cta, tid))
        if head < start:  # the whole run inside one tile, after its first stage
            self.put_partial(partials, flags, acc, cta, tid)
        else:
            self.gather_partials(partials, flags, acc, cta + 1, ((head + K) * G - 1) // U, tid)
            n0, first_row, _ = self.unit_place(head)
            self.store_tile(y, region, acc, tile_coords, Int32(0), n0, first_row, tid)

    @cute.jit
    def first_tile_ends(self, partials, flags, acc, unit: Int32, end: Int32, cta: Int32, tid: Int32):
        """After the consumers issued `unit`: where the tile the run started inside ends before the
        run does (only that one can), its partial goes to the workspace and the sums start over."""
        K: cutlass.Constexpr = self.k_tiles
        if (unit % K == K - 1) & (unit < end - 1):
            cute.nvgpu.warpgroup.wait_group(0)
            self.put_partial(partials, flags, acc, cta, tid)
            acc.fill(0.0)

    def unit_place(self, unit):
        """Stream-K unit `unit`'s (first weight row, first activation row, K stage): the units run
        K stage fastest, then row block (a weight tile's blocks adjacent), then weight tile."""
        tile, k_tile = unit // self.k_tiles, unit % self.k_tiles
        return (tile // self.row_blocks) * self.tile_n, (tile % self.row_blocks) * self.block_rows, k_tile

    @cute.jit
    def put_partial(self, partials, flags, acc, cta: Int32, tid: Int32):
        """The consumers' accumulators into CTA `cta`'s workspace slot (element e of thread t at
        4 (e / 4 * T + t) + e % 4, T the consumer threads: 16-byte stores side by side), then its
        flag raised."""
        T: cutlass.Constexpr = self.threads
        if tid < T:
            for q in cutlass.range_constexpr(cute.size(acc) // 4):
                store_f32x4(at(partials, cta, 4 * (q * T + tid)), [acc[4 * q + e] for e in range(4)])
            cute.arch.fence_acq_rel_gpu()
            cute.arch.barrier(barrier_id=1, number_of_threads=T)  # every consumer's share is stored
            if tid == 0:
                release_flag(at(flags, cta), 1)

    @cute.jit
    def gather_partials(self, partials, flags, acc, first: Int32, last: Int32, tid: Int32):
        """acc += the partial tiles of CTAs first..last, in order, each once its flag is raised;
        then the flags are lowered (every consumer has read them) for the next launch."""
        T: cutlass.Constexpr = self.threads
        if tid < T:
            for cta in range(first, last + 1):
                acquire_flag(at(flags, cta), 1)
                for q in cutlass.range_constexpr(cute.size(acc) // 4):
                    values = load_f32x4(at(partials, cta, 4 * (q * T + tid)), l2_only=True)
                    for e in cutlass.range_constexpr(4):
                        acc[4 * q + e] = acc[4 * q + e] + values[e]
        cute.arch.sync_threads()
        if tid == 0:
            for cta in range(first, last + 1):
                flags[cta] = Int32(0)

    @cute.jit
    def multiply_stages(self, x, w, x_map, w_map, smem, weights_base, rows_base, mma, acc, fragment_a, fragment_b,
                        n0: Int32, first_row: Int32, split: Int32, tid: Int32):
        """The K stages on the copies' or one thread's TMA pipeline: every thread waits for a
        stage, a CTA barrier frees the buffer stage - 2 read, and the loads of stage + S - 2 go out
        before this stage's wgmma."""
        S: cutlass.Constexpr = self.stages
        tma: cutlass.Constexpr = self.loads == "tma"
        ring = None
        if cutlass.const_expr(tma):
            ring = smem.allocate_array(cutlass.Uint64, S, byte_alignment=8)
            k_first, tiles = self.start_tma(x_map, w_map, ring, weights_base, rows_base, n0, first_row, split, tid)
        else:
            k_first, tiles = self.start_pipeline(w, x, weights_base, rows_base, n0, first_row, split, tid)

        for tile in range(tiles):
            if cutlass.const_expr(tma):
                cute.arch.mbarrier_wait(ring + tile % S, (tile // S) % 2)  # the stage's two boxes have landed
            else:
                wait_stage(tile, S - 1)  # this thread's copies of the stage have landed (S - 2 ahead)
                cute.arch.fence_proxy("async.shared", space="cta")  # ... and are visible to wgmma's reads
            # every thread's copies have landed, and every warpgroup's wgmma of stage tile - 2 is done
            # (each waited for it below, one stage ago): its buffer is the one refilled now
            cute.arch.sync_threads()
            ahead = tile + S - 2
            if cutlass.const_expr(tma):
                if (tid == 0) & (ahead < tiles):
                    self.load_stage(x_map, w_map, ring, weights_base, rows_base, n0, first_row, k_first + ahead,
                                    ahead % S, True)
            else:
                if ahead < tiles:
                    self.load_weights(w, weights_base, n0, k_first + ahead, ahead % S, tid)
                    self.load_rows(x, rows_base, first_row, k_first + ahead, ahead % S, tid)
                cute.arch.cp_async_commit_group()
            self.multiply_stage(mma, acc, fragment_a, fragment_b, tile % S)
        cute.nvgpu.warpgroup.wait_group(0)
        if cutlass.const_expr(not tma):
            cute.arch.cp_async_wait_group(0)

    @cute.jit
    def multiply_stage(self, mma, acc, fragment_a, fragment_b, buffer):
        """acc += stage `buffer`'s weight tile x row block, one warpgroup MMA a 16-value K step;
        this stage's wgmma flies while the next is issued (`wait_group(1)`)."""
        cute.nvgpu.warpgroup.fence()
        for kb in cutlass.range_constexpr(TILE_K // WGMMA_K):
            cute.gemm(mma, acc, fragment_a[None, None, kb, buffer], fragment_b[None, None, kb, buffer], acc)
        cute.nvgpu.warpgroup.commit_group()
        cute.nvgpu.warpgroup.wait_group(1)

    @cute.jit
    def produce_and_multiply(self, x_map, w_map, full, empty, weights_base, rows_base, mma, acc, fragment_a,
                             fragment_b, tiles: Int32, place, tid: Int32, ends=None):
        """`tiles` stages with a producer warpgroup (the threads past the consumers; its first issues
        the boxes; stage s is `place(s)`: first weight row, first activation row, K stage): stage
        t's buffer is refilled with stage t + S once every consumer warpgroup has arrived on its
        `empty` barrier (each after its wgmma of the stage retired); the consumers wait on `full`
        alone, and call `ends(t)` after stage t's wgmma is issued (a stream's tile ends)."""
        S: cutlass.Constexpr = self.stages
        M: cutlass.Constexpr = self.multicast
        T: cutlass.Constexpr = self.threads
        if tid == 0:
            for s in cutlass.range_constexpr(S):
                cute.arch.mbarrier_init(full + s, 1)
                cute.arch.mbarrier_init(empty + s, M * (T // WARPGROUP))  # every consumer of the cluster
            cute.arch.mbarrier_init_fence()
        if cutlass.const_expr(M > 1):
            cute.arch.cluster_arrive()  # every CTA's barriers exist before a peer's multicast lands on them
            cute.arch.cluster_wait()
        else:
            cute.arch.sync_threads()  # the barriers are initialised before any thread uses them
        # every stage flies at first: the producer refills one only once it is handed back
        self.start_boxes(x_map, w_map, full, weights_base, rows_base, place, tiles, S, tid == T)
        if tid == T:
            for tile in range(S, tiles):
                buffer = tile % S
                # every consumer (of every CTA of the cluster) handed it back
                cute.arch.mbarrier_wait(empty + buffer, (tile // S - 1) % 2)
                n0, first_row, k_tile = place(tile)
                self.load_stage(x_map, w_map, full, weights_base, rows_base, n0, first_row, k_tile, buffer, True)
        if tid < T:
            for tile in range(tiles):
                cute.arch.mbarrier_wait(full + tile % S, (tile // S) % 2)  # the stage's boxes have landed
                self.multiply_stage(mma, acc, fragment_a, fragment_b, tile % S)
                # wait_group(1): this warpgroup's wgmma of the previous stage has retired, so its
                # buffer goes back to the producers (one arrival a warpgroup on each CTA's barrier)
                if (tile > 0) & (tid % WARPGROUP == 0):
                    if cutlass.const_expr(M > 1):
                        for rank in cutlass.range_constexpr(M):
                            cute.arch.mbarrier_arrive(empty + (tile - 1) % S, rank)
                    else:
                        cute.arch.mbarrier_arrive(empty + (tile - 1) % S)
                if cutlass.const_expr(ends is not None):
                    ends(tile)
            cute.nvgpu.warpgroup.wait_group(0)

    @cute.jit
    def start_tma(self, x_map, w_map, ring, weights_base, rows_base, n0: Int32, first_row: Int32, split: Int32,
                  tid: Int32):
        """TMA's pipeline start: the stages' mbarriers (one arrival a phase: thread 0's, with the
        stage's bytes), then thread 0's first `ahead()` stages (`start_boxes`). Returns the split's
        K stages (first, count)."""
        k_first, tiles = self.split_stages(split)
        if tid == 0:
            for s in cutlass.range_constexpr(self.stages):
                cute.arch.mbarrier_init(ring + s, 1)
            cute.arch.mbarrier_init_fence()
        self.start_boxes(x_map, w_map, ring, weights_base, rows_base, lambda s: (n0, first_row, k_first + s), tiles,
                         self.ahead(), tid == 0)
        cute.arch.sync_threads()  # the barriers are initialised before any thread waits on them
        return k_first, tiles

    @cute.jit
    def start_boxes(self, x_map, w_map, full, weights_base, rows_base, place, tiles: Int32, count: cutlass.Constexpr,
                    issuer):
        """The `issuer` thread acquires the maps and sends the first `count` of the `tiles` stages'
        weight boxes (stage s at `place(s)`) before the PDL wait (weights never depend on the
        predecessor), their row boxes after it; every thread waits for the predecessor and lets
        dependents launch."""
        if issuer:
            acquire_tensor_map(w_map.iterator)
            acquire_tensor_map(x_map.iterator)
            for s in cutlass.range_constexpr(count):
                if s < tiles:
                    n0, first_row, k_tile = place(s)
                    self.load_stage(x_map, w_map, full, weights_base, rows_base, n0, first_row, k_tile, s, False)
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents wait for this grid's end to read y
        if issuer:
            for s in cutlass.range_constexpr(count):
                if s < tiles:
                    _, first_row, k_tile = place(s)
                    self.load_rows_box(x_map, full, rows_base, first_row, k_tile, s)

    @cute.jit
    def load_stage(self, x_map, w_map, ring, weights_base, rows_base, n0: Int32, first_row: Int32, k_tile: Int32,
                   buffer, rows: cutlass.Constexpr):
        """Thread 0: K stage `k_tile`'s weight box (and, with `rows`, its row box) into `buffer`,
        on the buffer's mbarrier, which expects the whole stage's bytes."""
        barrier = ring + buffer
        cute.arch.mbarrier_arrive_and_expect_tx(barrier, self.stage_bytes())
        load_tensor_box(weights_base + buffer * self.tile_n * TILE_K, w_map.iterator, k_tile * TILE_K, n0, barrier)
        if cutlass.const_expr(rows):
            self.load_rows_box(x_map, ring, rows_base, first_row, k_tile, buffer)

    @cute.jit
    def load_rows_box(self, x_map, ring, rows_base, first_row: Int32, k_tile: Int32, buffer):
        """K stage `k_tile`'s row box into `buffer` on the buffer's barrier; multicast, this CTA's
        slice of it (rank r: rows r / M) into every CTA of the cluster."""
        M: cutlass.Constexpr = self.multicast
        destination = rows_base + buffer * self.padded_rows * TILE_K
        if cutlass.const_expr(M > 1):
            slice_rows: cutlass.Constexpr = self.padded_rows // M
            _, _, n_tile = cute.arch.block_idx()
            rank = n_tile % M  # the cluster runs along the weight tiles
            multicast_tensor_box(destination + rank * slice_rows * TILE_K, x_map.iterator, k_tile * TILE_K,
                                 first_row + rank * slice_rows, ring + buffer, (1 << M) - 1)
        else:
            column = k_tile * TILE_K
            if cutlass.const_expr(self.per_head is not None):
                column = column + self.x_column()  # the tile's head's part of the row
            load_tensor_box(destination, x_map.iterator, column, first_row, ring + buffer)

    def weight_slot(self, base, buffer, row, chunk):
        """A stage's weight row `row`, chunk `chunk`: swizzled, as wgmma reads its A operand."""
        return swizzled(base, buffer * self.tile_n + row, chunk)

    @cute.jit
    def load_rows(self, x, base, first_row: Int32, k_tile: Int32, buffer, tid: Int32):
        """cp.async of the block's activation rows (from `first_row`) at K stage `k_tile` into stage
        `buffer`, swizzled; zeros past K and in the padding rows."""
        V: cutlass.Constexpr = TILE_K // VECTOR
        copies: cutlass.Constexpr = self.padded_rows * V
        T: cutlass.Constexpr = self.threads
        per_head: cutlass.Constexpr = self.per_head is not None
        column = self.x_column() if per_head else None  # the tile's head's part of the row
        for j in cutlass.range_constexpr(-(-copies // T)):
            c = tid + j * T
            i, v = c // V, c % V
            row = first_row + i
            col = k_tile * TILE_K + v * VECTOR
            if c < copies:
                keep = (i < self.block_rows) & (row < self.rows) & (col < self.width)
                read = cutlass.min(col, self.width - VECTOR)
                if cutlass.const_expr(per_head):
                    read = column + read
                source = at(x, cutlass.min(row, self.rows - 1), read)
                copy_g2s_zfill(swizzled(base, buffer * self.padded_rows + i, v), source, keep)


def swizzled(base, row, chunk):
    """Shared row `row`'s 16-byte chunk `chunk` in 128-byte-swizzled rows from `base` (1024-byte
    aligned): the chunk's place XORed with the row's place in its 8-row atom, as wgmma reads it."""
    return base + (row * TILE_K + (chunk ^ (row % SWIZZLE_ROWS)) * VECTOR)
