"""The mixture of experts at a decode step's rows (form.mixture without its scatter) as three
launches, bf16 weights and activations, fp32 math; only the experts a row chose are read:

- `mixture_router`: a cluster of `split` CTAs a block of `rows_a_cta` rows (up to 8 CTAs: the
  router, 1.2 MB at Kimi Linear's shape, streams through 8 SMs rather than one). Their warps split
  the router rows (every lane dotting its 16-byte vectors with each row of the block: a router row
  is read once for the block), each CTA keeps its logits in its shared memory; after a cluster
  barrier the first CTA gathers them all (DSMEM), and its warp r scores row r
  (sigmoid, or a softmax over all experts), adds the correction bias for choosing only, keeps the
  best `topk_groups` groups (grouped top-k: a lane ranks a group by the sum of its two largest),
  and picks `top_k` experts one at a time by a warp argmax (the larger value, else the lower
  index: ties go as the interpreter's stable sort sends them). Writes the ids [rows, top_k] int32
  and the routing weights [rows, top_k] fp32: the chosen uncorrected scores, optionally
  renormalised, times routed_scaling.
- `mixture_gated`: one CTA a (block of hidden units, row), a block of kept experts, a warp each:
  the row's top_k routed experts, then the folded shared expert. Warp k dots expert ids[row, k]'s
  gate and up rows of the block's units with x[row] and writes their SwiGLU to
  hidden[row, k * I + unit] (bf16; the shared expert's units after the routed ones').
- `mixture_down`: one CTA a (block of outputs, row), the same block of warps: warp k dots expert
  k's down rows with its hidden values and multiplies by its routing weight (the shared expert's
  by sigmoid(x[row] . gate row), where it has one); the CTA sums its warps in slot order (fp32) and
  writes out[row] (bf16). The sum over experts is one pass: no partial results leave the CTA.

Which rows a CTA reads depends on the router's ids, a predecessor's output, so no weight load can
be issued before the PDL wait: the expert kernels wait first and release their dependents at
once. The shared expert's are known: mixture_gated can dot them before its wait from the router's
own input (`early_shared`). Every row is its own CTA, so one launch serves any row count; rows that chose the same
expert read it again (mostly from L2): above MIXTURE_GROUPED_ROWS rows the lowering takes
mixture_grouped.py's path instead, one read of an expert for all the rows that chose it."""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Int64, Uint32

from lanec.codegen.facts import (
    ROUTER_LOGIT_ROWS,
    ROUTER_SHARED_UNITS,
    VECTOR,
    WARP,
    MixtureExpertsSpec,
    MixtureGroupedSpec,
    MixtureRouterSpec,
    MixtureSchedule,
    router_rows_a_cta,
    router_split,
    router_warps,
)
from lanec.codegen.kernels.argmax import first_largest
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    alloc,
    at,
    evict_first_policy,
    load_activation_bf16x8,
    load_weight_bf16x8,
    match_any,
    ordered_key,
    prefetch_l2,
    push_float,
    release_flag,
    shared_bytes,
    sigmoid,
    ticket,
    unpack_bf16,
    wait,
    wait_flag,
    warp_inclusive_sum,
    warp_reduce,
    warp_reduce_interleaved,
)
from lanec.codegen.kernels.rmsnorm import norm_weight_vectors, normed_rows, warp_normed_row

UNITS_GATED = 2  # hidden units a warp of mixture_gated (a gate and an up row each)
UNITS_DOWN = 4  # outputs a warp of mixture_down where its schedule names none (MixtureSchedule)
# weight vectors a lane issues before it multiplies any (4 registers each), where the schedule table names none;
# Kimi Linear's one-row mixture_gated takes 12 (schedules.json: three even chunks of a 2304-wide row, 27-35 us faster
# a real-size batch-1 step; 20 and 36 were 100 us slower, bench/RESULTS.md 2026-12-03)
VECTORS_IN_FLIGHT = 16
NO_KEY = -(2**31)  # below every `ordered_key` of a number: a lane whose experts are all taken


def expert_rows(weights, expert, rows: int, width: int):
    """Expert `expert`'s [rows, width] matrix of a stacked [experts, rows, width] tensor (a 64-bit
    offset: a layer's experts hold more than 2^31 values)."""
    start = weights.iterator + Int64(expert) * (rows * width)
    return cute.make_tensor(start, cute.make_layout((rows, width), stride=(width, 1)))


@cute.jit
def row_dots(matrices, first: Int32, outputs: cutlass.Constexpr, units: cutlass.Constexpr, act, act_row: Int32,
             act_base: Int32, width: cutlass.Constexpr, lane: Int32, policy=None,
             in_flight: cutlass.Constexpr = VECTORS_IN_FLIGHT, preloaded=None):
    """A warp's sums[m * units + u] = matrices[m][first + u] . act[act_row, act_base:][:width], every
    lane holding them all (rows past `outputs` re-read the last: their sums are never used): `rows_dots`
    of one activation row (`preloaded`: its first chunk's weight words, `load_first_chunk`'s)."""
    return rows_dots(matrices, first, outputs, units, act, [act_row], act_base, width, lane, policy, in_flight,
                     preloaded)


def dot_chunks(count: int, rows: int, width: int, in_flight: int) -> tuple[int, int]:
    """(vectors a lane takes a chunk of `rows_dots`, chunks) for `count` weight rows against `rows`
    activation rows of `width` values, `in_flight` vectors a lane a chunk."""
    vectors = width // VECTOR
    # never more vectors a chunk than a lane has: a place past them all would add 0 * 0 (a dependent FADD each)
    per_chunk = max(1, min(in_flight // (count + rows - 1), -(-vectors // WARP)))
    return per_chunk, -(-vectors // (WARP * per_chunk))


def first_chunk_words(count: int, width: int, in_flight: int):
    """The registers `load_first_chunk` fills: a lane's weight words of a one-row `rows_dots`'s first chunk."""
    per_chunk, _ = dot_chunks(count, 1, width, in_flight)
    return cute.make_rmem_tensor((4, per_chunk * count), Uint32)


@cute.jit
def load_first_chunk(ws, matrices, first: Int32, outputs: cutlass.Constexpr, units: cutlass.Constexpr,
                     width: cutlass.Constexpr, lane: Int32, policy=None,
                     in_flight: cutlass.Constexpr = VECTORS_IN_FLIGHT):
    """Issue the weight loads of a one-row `rows_dots`'s first chunk into `ws` (`first_chunk_words`):
    weights only, so it may run before the PDL wait; `rows_dots(..., preloaded=ws)` takes them."""
    count: cutlass.Constexpr = len(matrices) * units
    per_chunk, _ = dot_chunks(count, 1, width, in_flight)
    ws.fill(0)
    for s in cutlass.range_constexpr(per_chunk):
        vector = s * WARP + lane
        if vector < width // VECTOR:
            load_vector_weights(ws, matrices, first, outputs, units, vector, s, policy)


@cute.jit
def load_vector_weights(ws, matrices, first: Int32, outputs: cutlass.Constexpr, units: cutlass.Constexpr,
                        vector: Int32, s: cutlass.Constexpr, policy):
    """A lane's 16-byte vector `vector` of each of its rows (matrices x units), into chunk place `s` of `ws`."""
    count: cutlass.Constexpr = len(matrices) * units
    for m in cutlass.range_constexpr(len(matrices)):
        for u in cutlass.range_constexpr(units):
            row = cutlass.min(first + u, outputs - 1)
            words = load_weight_bf16x8(at(matrices[m], row, vector * VECTOR), policy)
            for e in cutlass.range_constexpr(4):
                ws[e, s * count + m * units + u] = words[e]


@cute.jit
def multiply_chunk(sums, xs, ws, per_chunk: cutlass.Constexpr, count: cutlass.Constexpr, R: cutlass.Constexpr):
    """A chunk's multiplies: each sum adds its vectors in ascending order (the same for every row count)."""
    for s in cutlass.range_constexpr(per_chunk):
        for e in cutlass.range_constexpr(4):
            for i in cutlass.range_constexpr(count):
                w_low, w_high = unpack_bf16(ws[e, s * count + i])
                for r in cutlass.range_constexpr(R):
                    x_low, x_high = unpack_bf16(xs[e, s * R + r])
                    sums[r * count + i] = sums[r * count + i] + w_low * x_low + w_high * x_high


@cute.jit
def dot_first_chunk(sums, preloaded, act, act_row: Int32, act_base: Int32, per_chunk: cutlass.Constexpr,
                    count: cutlass.Constexpr, vectors: cutlass.Constexpr, lane: Int32):
    """`rows_dots`'s first chunk on weight words already loaded (`load_first_chunk`): its activation
    vectors, then the same multiplies in the same order as the loop's."""
    xs = cute.make_rmem_tensor((4, per_chunk), Uint32)
    xs.fill(0)
    for s in cutlass.range_constexpr(per_chunk):
        vector = s * WARP + lane
        if vector < vectors:
            words = load_activation_bf16x8(at(act, act_row, act_base + vector * VECTOR))
            for e in cutlass.range_constexpr(4):
                xs[e, s] = words[e]
    multiply_chunk(sums, xs, preloaded, per_chunk, count, 1)


@cute.jit
def rows_dots(matrices, first: Int32, outputs: cutlass.Constexpr, units: cutlass.Constexpr, act, act_rows,
              act_base: Int32, width: cutlass.Constexpr, lane: Int32, policy=None,
              in_flight: cutlass.Constexpr = VECTORS_IN_FLIGHT, preloaded=None):
    """A warp's sums[r * count + m * units + u] = matrices[m][first + u] . act[act_rows[r], act_base:][:width]
    (count = len(matrices) * units), every lane holding them all: each weight vector is read once for
    all of `act_rows`. Lane l takes the 16-byte vectors l, l + 32, ...; a chunk's vectors are all
    issued before the first multiply; every sum adds its vectors in ascending order, whatever the
    row count (a row's sums are bitwise those of one row alone). `policy`: the weights' L2 policy
    (`evict_first_policy`), None for the default. `in_flight`: the vectors (weights and activations) a lane
    issues a chunk, VECTORS_IN_FLIGHT by default; a schedule's `vectors` (MixtureSchedule) sets it.
    `preloaded` (one activation row): the first chunk's weight words, issued by `load_first_chunk` (before
    the PDL wait); that chunk then reads only its activations, and the sums are bitwise the same."""
    count: cutlass.Constexpr = len(matrices) * units
    R: cutlass.Constexpr = len(act_rows)
    vectors: cutlass.Constexpr = width // VECTOR
    per_chunk, chunks = dot_chunks(count, R, width, in_flight)
    sums = cute.make_rmem_tensor(R * count, Float32)
    sums.fill(0.0)
    start: cutlass.Constexpr = 0 if preloaded is None else 1
    if cutlass.const_expr(preloaded is not None):
        dot_first_chunk(sums, preloaded, act, act_rows[0], act_base, per_chunk, count, vectors, lane)
    for c in cutlass.range(start, chunks):
        xs = cute.make_rmem_tensor((4, per_chunk * R), Uint32)
        ws = cute.make_rmem_tensor((4, per_chunk * count), Uint32)
        xs.fill(0)  # past the row: zero words add nothing
        ws.fill(0)
        for s in cutlass.range_constexpr(per_chunk):
            vector = (c * per_chunk + s) * WARP + lane
            if vector < vectors:
                for r in cutlass.range_constexpr(R):
                    words = load_activation_bf16x8(at(act, act_rows[r], act_base + vector * VECTOR))
                    for e in cutlass.range_constexpr(4):
                        xs[e, s * R + r] = words[e]
                load_vector_weights(ws, matrices, first, outputs, units, vector, s, policy)
        multiply_chunk(sums, xs, ws, per_chunk, count, R)
    warp_reduce_interleaved(sums, range(R * count), operator.add)
    return sums


@cute.jit
def swiglu_units(x, row: Int32, pair, first: Int32, outputs: cutlass.Constexpr, units: cutlass.Constexpr,
                 width: cutlass.Constexpr, base: Int32, lane: Int32, hidden, policy=None, out_row=None,
                 in_flight: cutlass.Constexpr = VECTORS_IN_FLIGHT):
    """A warp's `units` hidden units first.. of one expert (`pair`: its gate and up rows, `outputs` of them):
    silu(x[row] . gate) * (x[row] . up) to hidden[out_row, base + unit] (bf16; `out_row` None: `row`);
    `policy`: the rows' L2 policy; `in_flight` as `rows_dots`'s."""
    if cutlass.const_expr(out_row is None):
        out_row = row
    if first < outputs:  # the routed and the shared expert may have different widths
        sums = row_dots(pair, first, outputs, units, x, row, Int32(0), width, lane, policy, in_flight)
        if lane == 0:
            for u in cutlass.range_constexpr(units):
                if first + u < outputs:
                    g = sums[u]
                    hidden[out_row, base + first + u] = BFloat16(g * sigmoid(g) * sums[units + u])


GROUP_WARPS = 32  # mixture_groups: at most one CTA of 32 warps


def sorting_network(n: int) -> list[tuple[int, int]]:
    """Batcher's odd-even merge sort on n places: the (lower, higher) place pairs to compare, in
    order (each pair's first place takes the larger). Pairs reaching past n are dropped: the places
    past n would hold the smallest values, which no such pair moves."""
    size = 1 << max(0, (n - 1).bit_length())
    pairs = []
    p = 1
    while p < size:
        k = p
        while k >= 1:
            for j in range(k % p, size - k, 2 * k):
                for i in range(min(k, size - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return [(a, b) for a, b in pairs if b < n]


class MixtureGroups:
    """Params: ids [rows, top_k] int32 (the router's), starts [experts + 1] int32 and order
    [rows * top_k] int32 (both written); see the module docstring."""

    name = "mixture_groups"

    def __init__(self, rows: int, experts: int, top_k: int):
        MixtureGroupedSpec(self.name, rows, experts, top_k).check()
        self.rows, self.experts, self.top_k = rows, experts, top_k
        self.pairs = rows * top_k
        self.warps = min(GROUP_WARPS, -(-self.pairs // WARP))
        self.steps = -(-self.pairs // (WARP * self.warps))  # 32-pair steps a warp walks
        self.held = -(-experts // WARP)  # experts a lane of the scanning warp holds: lane * held + i

    def params(self) -> list[TensorParam]:
        return [TensorParam("ids", (self.rows, self.top_k), "int32"),
                TensorParam("starts", (self.experts + 1,), "int32", written=True),
                TensorParam("order", (self.pairs,), "int32", written=True)]

    def shared_bytes(self) -> int:
        return shared_bytes([(4 * self.warps * self.experts, 16), (4 * self.experts, 16)])

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(1, 1, 1), block=(WARP * self.warps, 1, 1), shared_bytes=self.shared_bytes())

    @cute.jit
    def __call__(self, *, ids: cute.Tensor, starts: cute.Tensor, order: cute.Tensor):
        launch(self, ids, starts, order)

    def tables(self, smem):
        """Its shared tables: counts [warps, experts] (a warp's pairs an expert, then its offset)
        and firsts [experts] (an expert's pairs, then its segment's start)."""
        return alloc(smem, Int32, (self.warps, self.experts)), alloc(smem, Int32, self.experts)

    @cute.kernel
    def kernel(self, ids: cute.Tensor, starts: cute.Tensor, order: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        counts, firsts = self.tables(cutlass.memory.SmemAllocator())
        cute.arch.griddepcontrol_wait()  # the ids are the router's
        release_dependents(self)
        self.segment(ids, starts, order, counts, firsts, thread, False)

    @staticmethod
    def mine(condition, thread: Int32, threads: int, wider: bool):
        """`condition`, for a thread of the walking warps only where the CTA has more (`wider`)."""
        return condition & (thread < threads) if wider else condition

    @cute.jit
    def segment(self, ids, starts, order, counts, firsts, thread: Int32, wider: cutlass.Constexpr):
        """starts and order from ids, by the CTA's first `warps` warps; `wider`: the CTA has more
        (the router's that writes the segments), which only meet its barriers."""
        lane, warp = thread % WARP, thread // WARP
        threads: cutlass.Constexpr = WARP * self.warps
        cells: cutlass.Constexpr = self.warps * self.experts
        for i in cutlass.range_constexpr(-(-cells // threads)):
            c = thread + i * threads
            if self.mine(c < cells, thread, threads, wider):
                counts[c // self.experts, c % self.experts] = Int32(0)
        cute.arch.sync_threads()
        self.walk_of(ids, counts, firsts, order, warp, lane, False, wider)
        cute.arch.sync_threads()
        for i in cutlass.range_constexpr(-(-self.experts // threads)):
            e = thread + i * threads
            if self.mine(e < self.experts, thread, threads, wider):  # each warp's offset in the expert's segment
                running = Int32(0)
                for w in cutlass.range_constexpr(self.warps):
                    mine = counts[w, e]
                    counts[w, e] = running
                    running = running + mine
                firsts[e] = running
        cute.arch.sync_threads()
        if warp == 0:
            self.scan(firsts, starts, lane)
        cute.arch.sync_threads()
        self.walk_of(ids, counts, firsts, order, warp, lane, True, wider)

    @cute.jit
    def walk_of(self, ids, counts, firsts, order, warp: Int32, lane: Int32, place: cutlass.Constexpr,
                wider: cutlass.Constexpr):
        """`walk` by the walking warps (a wider CTA's others skip it)."""
        if cutlass.const_expr(wider):
            if warp < self.warps:
                self.walk(ids, counts, firsts, order, warp, lane, place)
        else:
            self.walk(ids, counts, firsts, order, warp, lane, place)

    @cute.jit
    def walk(self, ids, counts, firsts, order, warp: Int32, lane: Int32, place: cutlass.Constexpr):
        """Warp `warp`'s pairs in order, 32 a step: a lane's rank among the step's lanes with its
        expert (those below it) and their number, from one `match.any` (the lanes holding its expert;
        an invalid pair's -1 matches only the step's other invalid ones). First walk (`place` False):
        counts[warp, e] sums them. Second: the pair goes to order[start of e + the warp's offset + rank],
        and the offset moves past the step's pairs of e. One leader a step an expert writes its count."""
        for s in cutlass.range(self.steps):
            p = (warp * self.steps + s) * WARP + lane
            q = cutlass.min(p, self.pairs - 1)
            expert = ids[q // self.top_k, q % self.top_k]
            valid = (p < self.pairs) & (expert >= 0) & (expert < self.experts)
            expert = cutlass.select_(valid, expert, Int32(-1))
            mask = match_any(expert)
            same = Int32(cute.arch.popc(mask))
            rank = Int32(cute.arch.popc(mask & cute.arch.lanemask_lt()))
            before = counts[warp, cutlass.max(expert, Int32(0))]
            cute.arch.sync_warp()  # every lane has read the offset before its leader moves it
            if valid:
                if cutlass.const_expr(place):
                    order[firsts[expert] + before + rank] = p
                if rank == 0:
                    counts[warp, expert] = before + same
            cute.arch.sync_warp()

    @cute.jit
    def scan(self, firsts, starts, lane: Int32):
        """The first warp: the experts' exclusive prefix sum in expert order (lane l sums its
        `held` experts, then a shuffle scan over the lanes), into firsts and starts; starts[experts]
        the pairs in all."""
        E: cutlass.Constexpr = self.experts
        held = cute.make_rmem_tensor(self.held, Int32)
        total = Int32(0)
        for j in cutlass.range_constexpr(self.held):
            e = lane * self.held + j
            held[j] = cutlass.select_(e < E, firsts[cutlass.min(e, E - 1)], Int32(0))
            total = total + held[j]
        inclusive = total
        inclusive = warp_inclusive_sum(inclusive, lane)
        base = inclusive - total
        cute.arch.sync_warp()  # every lane has read its counts before any start replaces them
        for j in cutlass.range_constexpr(self.held):
            e = lane * self.held + j
            if e < E:
                firsts[e] = base
                starts[e] = base
            base = base + held[j]
        if lane == WARP - 1:
            starts[E] = inclusive


class MixtureRouter:
    """Params: x [rows, width] (rows `x_pitch` apart), router [experts, width], correction
    [experts] fp32 (where `correction`), ids [rows, top_k] int32, weights [rows, top_k] fp32.
    ``split``: the CTAs (a cluster) that share a row's router rows; None: `router_split(experts)`, halved
    while its CTAs have fewer warps than the segments' (`segments`) walk takes. Over a cluster (`pushes`),
    each dotting lane sends its score to the first CTA's `scores` with `st.async`, completing its bytes on
    that CTA's barrier, which the choosing warps wait on: no cluster barrier after the PDL wait, and the
    other CTAs leave once they have sent.
    ``rows_a_cta``: the rows a cluster scores (1, 2, 4 or 8; None: `router_rows_a_cta(rows)`): each
    warp reads its router rows once for all of them (`rows_dots`), and warp r chooses row r.
    ``segments``: the router also writes mixture_groups' starts [experts + 1] and order [pairs]
    (the grouped path's first launch folded in): each cluster's first CTA draws a ticket once its
    rows' ids are stored (`tickets` [1], `atom.inc` modulo the clusters, from the runtime's
    poisoned start or the count the last step left), and the one drawing the last computes the
    segments from every row's ids with `MixtureGroups.segment` (its warps among the CTA's).
    ``logits``: the logits are given (`logits` [rows, experts] fp32, a gemm_tc launch's: the
    router rows read once for every row, ROUTER_GEMM_ROWS), in place of x and the router: a CTA
    of `rows_a_cta` warps (ROUTER_LOGIT_ROWS by default) loads its rows' logits and chooses, a warp
    a row, as the fused router's first CTA does.
    ``norm`` (fold-norm-into-router): x is a norm's input (h = x + `residual` where `residual`),
    and each CTA norms its block's rows itself after the PDL wait (`normed_rows`, as rmsnorm
    does), into its shared memory, where its warps read them; the first CTA also writes the
    normed rows to `y` (the experts' input) and h to `h` (the new residual stream). The params
    are then x, (residual), norm_w, router, ..., weights, y, (h).
    ``shared_hidden`` (ROUTER_SHARED_ROWS; `expert_hidden` the routed experts' units): the launch also
    runs the shared expert's gated pair, in clusters of its own after the router's (grid y): each of
    their CTAs takes a row's block of `warps` x ROUTER_SHARED_UNITS units, reads (or norms) the row as
    the router's CTAs do, and writes the SwiGLU to hidden[row, top_k * expert_hidden + unit], the
    columns mixture_gated (`shared_in_router`) then leaves alone. Params shared_gate, shared_up
    [shared_hidden, width] and hidden [rows, top_k * expert_hidden + shared_hidden] come last.
    ``prefetch_units`` (ROUTER_PREFETCH_ROWS, its count from ROUTER_PREFETCH_BYTES; `expert_hidden` the
    experts' units): once a row's experts are chosen, the first `prefetch_units` rows of each chosen expert's
    gate and up matrices (params gate, up [experts, expert_hidden, width], mixture_gated's, last) are brought
    into L2 by bulk prefetches, while the launch ends and mixture_gated passes its PDL wait and reads the ids:
    the rows its first CTAs read first. A CTA's end waits for its prefetches. By the first CTA's choosing
    lanes, or with ``prefetch_spread`` (a router over a cluster) every CTA receives every score, chooses as
    the first does (the same values: the same code on the same floats) and prefetches its share of the (row,
    expert, matrix) triples; the first CTA alone stores the choice.
    ``ready`` (MIXTURE_READY_FLAG; the fused router): a flag a row (`ready` [rows] int32, last param),
    lowered to 0 by the first CTA before the launch releases its dependents and raised to 1 (a release at
    GPU scope) by the warp choosing the row once its ids and weights are stored: mixture_gated
    (`ready`) acquires it in place of waiting for this grid's end."""

    name = "mixture_router"

    def __init__(self, rows: int, width: int, experts: int, top_k: int, *, scoring: str = "sigmoid",
                 renormalize: bool = True, routed_scaling: float = 1.0, correction: bool = False,
                 groups: int | None = None, topk_groups: int | None = None, x_pitch: int | None = None,
                 split: int | None = None, rows_a_cta: int | None = None, segments: bool = False,
                 logits: bool = False, norm: bool = False, eps: float = 1e-6, residual: bool = False,
                 shared_hidden: int = 0, expert_hidden: int = 0, prefetch_units: int = 0,
                 prefetch_spread: bool = False, ready: bool = False):
        self.logits = bool(logits)
        self.norm, self.eps, self.residual = bool(norm), float(eps), bool(norm) and bool(residual)
        if self.logits:  # a warp a row chooses from the given logits
            split = 1 if split is None else split
            rows_a_cta = ROUTER_LOGIT_ROWS if rows_a_cta is None else rows_a_cta
            per_cta, per_warp, warps = experts, 0, rows_a_cta
        else:
            if split is None:
                split = router_split(experts)
                # writing the segments, a CTA's warps also walk mixture_groups' pairs: fewer CTAs of more warps
                least = MixtureGroups(rows, experts, top_k).warps if segments else 0
                while split > 1 and router_warps(experts, split)[2] < least:
                    split //= 2
            per_cta, per_warp, warps = router_warps(experts, split)  # router rows a CTA dots, a warp; its warps
            rows_a_cta = router_rows_a_cta(rows, warps) if rows_a_cta is None else rows_a_cta
        MixtureRouterSpec(rows, width, experts, top_k, scoring, groups, topk_groups, x_pitch, split,
                          rows_a_cta, self.logits, self.norm, shared_hidden).check()
        self.rows, self.width, self.experts, self.top_k = rows, width, experts, top_k
        self.scoring, self.renormalize, self.routed_scaling = scoring, bool(renormalize), float(routed_scaling)
        self.correction, self.groups, self.topk_groups, self.x_pitch = correction, groups, topk_groups, x_pitch
        self.split, self.per_cta, self.per_warp, self.warps = split, per_cta, per_warp, warps
        self.held = -(-experts // WARP)  # experts a lane of the choosing warp holds: lane + 32 i
        self.rows_a_cta = rows_a_cta
        if rows_a_cta > self.warps:
            raise ValueError(f"mixture_router rows_a_cta {rows_a_cta}: a warp chooses a row, and a CTA has "
                             f"{self.warps} warps ({self.per_cta} router rows)")
        self.norm_steps = -(-(width // VECTOR) // (WARP * self.warps))  # a thread's vectors of a normed row
        self.segments = bool(segments)
        self.shared_hidden, self.expert_hidden = int(shared_hidden), int(expert_hidden)
        if self.shared_hidden and (self.segments or self.expert_hidden < 1):
            raise ValueError("mixture_router shared_hidden: the shared expert's clusters need the routed experts' "
                             "units (expert_hidden) and no segments (the per-row path's router)")
        self.shared_units = ROUTER_SHARED_UNITS
        # the shared expert's CTAs a row (a block of warps x units each), and the clusters they take after the router's
        self.shared_blocks = -(-self.shared_hidden // (self.warps * self.shared_units)) if self.shared_hidden else 0
        self.shared_clusters = -(-self.shared_blocks * rows // split)
        self.prefetch_units = int(prefetch_units)
        self.spread = bool(prefetch_spread) and self.prefetch_units > 0
        if self.prefetch_units and (self.logits or self.segments or self.shared_hidden
                                    or not 1 <= self.prefetch_units <= self.expert_hidden):
            raise ValueError(f"mixture_router prefetch_units {self.prefetch_units}: the fused per-row router (no "
                             f"given logits, segments or shared expert) and 1 to expert_hidden ({self.expert_hidden}) "
                             "rows of each chosen expert")
        if self.spread and not self.pushes():
            raise ValueError("mixture_router prefetch_spread: every CTA of a cluster chooses; this router is one CTA")
        self.ready = bool(ready)
        if self.ready and (self.logits or self.segments or self.shared_hidden):
            raise ValueError("mixture_router ready: the fused per-row router's flags (no given logits, segments or "
                             "shared expert's clusters)")
        if self.segments and self.grouper().warps > self.warps:
            raise ValueError(f"mixture_router segments: the {rows * top_k} pairs take {self.grouper().warps} warps "
                             f"of mixture_groups, and a router CTA has {self.warps}")

    def early_scores(self) -> bool:
        """Sigmoid scores are each one logit's own: the thread that stores a logit stores its sigmoid
        (a dotting warp's lane 0, or the lane loading given logits), so the choosing warp starts from
        the scores (the same float: the same function of the same logit, in another thread)."""
        return self.scoring == "sigmoid"

    def pushes(self) -> bool:
        """The dotting lanes send their scores to the cluster's first CTA (`st.async` on its barrier): a
        router split over a cluster."""
        return self.split > 1 and not self.logits

    def grouper(self) -> MixtureGroups:
        """mixture_groups at this router's shape: the segments it writes (`segments`)."""
        return MixtureGroups(self.rows, self.experts, self.top_k)

    def clusters(self) -> int:
        """The router's clusters: a block of `rows_a_cta` rows each."""
        return -(-self.rows // self.rows_a_cta)

    def params(self) -> list[TensorParam]:
        if self.logits:
            params = [TensorParam("logits", (self.rows, self.experts), "float32")]
        else:
            row = (self.rows, self.width)
            params = [TensorParam("x", row, "bfloat16", (self.x_pitch or self.width, 1))]
            if self.norm:
                params += [TensorParam("residual", row, "bfloat16")] if self.residual else []
                params.append(TensorParam("norm_w", (self.width,), "bfloat16"))
            params.append(TensorParam("router", (self.experts, self.width), "bfloat16"))
        if self.correction:
            params.append(TensorParam("correction", (self.experts,), "float32"))
        params += [TensorParam("ids", (self.rows, self.top_k), "int32", written=True),
                   TensorParam("weights", (self.rows, self.top_k), "float32", written=True)]
        if self.norm:
            params.append(TensorParam("y", (self.rows, self.width), "bfloat16", written=True))
            params += [TensorParam("h", (self.rows, self.width), "bfloat16", written=True)] if self.residual else []
        if self.segments:
            params += self.grouper().params()[1:] + [TensorParam("tickets", (1,), "int32", written=True)]
        if self.shared_hidden:
            params += [TensorParam(name, (self.shared_hidden, self.width), "bfloat16")
                       for name in ("shared_gate", "shared_up")]
            params.append(TensorParam("hidden", (self.rows, self.top_k * self.expert_hidden + self.shared_hidden),
                                      "bfloat16", written=True))
        if self.prefetch_units:
            params += [TensorParam(name, (self.experts, self.expert_hidden, self.width), "bfloat16")
                       for name in ("gate", "up")]
        if self.ready:
            params.append(TensorParam("ready", (self.rows,), "int32", written=True))
        return params

    def shared_bytes(self) -> int:
        R = self.rows_a_cta
        router = shared_bytes([(4 * R * self.experts, 16), (4 * R * self.experts, 16), (4 * R * WARP, 16)]
                              + ([(16, 16)] if self.pushes() else []))
        # the normed rows (bf16) and the norm's sums of squares, a warp's a row
        normed = shared_bytes([(2 * R * self.width, 16), (4 * R * self.warps, 16)]) if self.norm else 0
        return router + normed + (self.grouper().shared_bytes() + 16 if self.segments else 0)

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.split, self.clusters() + self.shared_clusters, 1),
                           block=(WARP * self.warps, 1, 1), cluster=(self.split, 1, 1),
                           shared_bytes=self.shared_bytes())

    @cute.jit
    def __call__(self, *, logits=None, x=None, residual=None, norm_w=None, router=None, correction=None,
                 ids: cute.Tensor, weights: cute.Tensor, y=None, h=None, starts=None, order=None, tickets=None,
                 shared_gate=None, shared_up=None, hidden=None, gate=None, up=None, ready=None):
        launch(self, logits, x, residual, norm_w, router, correction, ids, weights, y, h, starts, order, tickets,
               shared_gate, shared_up, hidden, gate, up, ready)

    @cute.kernel
    def kernel(self, logits, x, residual, norm_w, router, correction, ids: cute.Tensor, weights: cute.Tensor, y,
               h, starts, order, tickets, shared_gate, shared_up, hidden, gate, up, ready):
        thread, _, _ = cute.arch.thread_idx()
        rank, block, _ = cute.arch.block_idx()  # a block of rows' CTAs are one cluster: rank in it
        if cutlass.const_expr(self.ready):
            self.lower_flags(ready, rank, block, thread)
        release_dependents_at_entry(self)
        lane, warp = thread % WARP, thread // WARP
        E: cutlass.Constexpr = self.experts
        R: cutlass.Constexpr = self.rows_a_cta
        smem = cutlass.memory.SmemAllocator()
        scores = alloc(smem, Float32, R * E)  # a row's logits (each CTA its own), then its scores
        choice = alloc(smem, Float32, R * E)  # a row's corrected scores, for ranking groups
        kept = alloc(smem, Int32, R * WARP)  # whether group g is kept, a row's
        arrived = None  # `pushes`: the first CTA's barrier for the cluster's scores (every CTA's: `spread`)
        if cutlass.const_expr(self.pushes()):
            arrived = alloc(smem, cutlass.Uint64, 2, 16)  # 16 bytes: what follows stays 16-aligned
            self.arm(arrived, rank, thread)  # before the PDL wait: the cluster barrier it takes is off the path
        tables = None
        if cutlass.const_expr(self.segments):
            tables = (*self.grouper().tables(smem), alloc(smem, Int32, 4))  # counts, firsts, the last flag
        corrections = self.corrected(correction, lane)  # a weight: read before the PDL wait
        if cutlass.const_expr(self.logits):
            self.load_logits(logits, scores, block, warp, lane)
        elif cutlass.const_expr(self.shared_hidden > 0):
            self.score(x, (residual, norm_w, y, h), router, scores, rank, block, warp, lane, thread,
                       (shared_gate, shared_up, hidden), arrived)
        else:
            self.score(x, (residual, norm_w, y, h), router, scores, rank, block, warp, lane, thread,
                       arrived=arrived)
        chooser = (rank == 0) & (warp < R)
        if cutlass.const_expr(self.spread):
            chooser = warp < R  # every CTA chooses (its scores are all in); the first stores
        if cutlass.const_expr(self.shared_hidden > 0):
            chooser = chooser & (block < self.clusters())  # a router cluster's first CTA
        if chooser:
            if block * R + warp < self.rows:  # warp r chooses row r of the block
                if cutlass.const_expr(self.pushes()):
                    wait(arrived.iterator, 0, "cluster")  # every CTA's scores are in
                self.choose(cute.make_tensor(scores.iterator + warp * E, cute.make_layout(E)),
                            cute.make_tensor(choice.iterator + warp * E, cute.make_layout(E)),
                            cute.make_tensor(kept.iterator + warp * WARP, cute.make_layout(WARP)), corrections,
                            ids, weights, block * R + warp, lane,
                            prefetch=(gate, up, rank, warp) if cutlass.const_expr(self.prefetch_units) else None)
                if cutlass.const_expr(self.ready):
                    cute.arch.sync_warp()  # every lane's ids and weights are stored
                    if (lane == 0) & (rank == 0):  # the CTA that stored them (`spread`: every CTA chose)
                        release_flag(at(ready, block * R + warp), 1)
        if cutlass.const_expr(self.segments):
            if rank == 0:  # a cluster's choosing CTA
                self.segment_last(ids, starts, order, tickets, tables, thread)

    @cute.jit
    def lower_flags(self, ready, rank: Int32, block: Int32, thread: Int32):
        """`ready`: the first CTA's thread 0 lowers its block's row flags to 0, fenced before the launch
        releases its dependents (which acquire them), so a flag left raised by the last step, or the
        buffer's first contents, is never taken for this step's."""
        if (rank == 0) & (thread == 0):
            for r in cutlass.range_constexpr(self.rows_a_cta):
                if block * self.rows_a_cta + r < self.rows:
                    ready[block * self.rows_a_cta + r] = Int32(0)
            cute.arch.fence_acq_rel_gpu()

    @cute.jit
    def arm(self, arrived, rank: Int32, thread: Int32):
        """`pushes`: the first CTA's thread 0 (every CTA's, `spread`) arms `arrived` for the block's R x
        experts scores (4 bytes each, every CTA's `st.async`), and every CTA arrives on the cluster barrier
        that orders the arming before any send (its wait is in `dot_logits`, after the products)."""
        arms = (rank == 0) & (thread == 0)
        if cutlass.const_expr(self.spread):
            arms = thread == 0
        if arms:
            cute.arch.mbarrier_init(arrived.iterator, 1)
            cute.arch.mbarrier_init_fence()
        # the CTA barrier orders the arming after the init for every tool (the init runs on the uniform path)
        cute.arch.sync_threads()
        if arms:
            cute.arch.mbarrier_arrive_and_expect_tx(arrived.iterator, 4 * self.rows_a_cta * self.experts)
        cute.arch.cluster_arrive_relaxed()

    @cute.jit
    def corrected(self, correction, lane: Int32):
        """The correction of the experts a lane of a choosing warp holds (lane + 32 i; past the
        experts, the last one's), or None without one. Every thread loads them (1 KB a warp, from
        L2) at the kernel's start, so the choosing warps never wait on it after the scores."""
        if cutlass.const_expr(correction is None):
            return None
        held = cute.make_rmem_tensor(self.held, Float32)
        for i in cutlass.range_constexpr(self.held):
            held[i] = correction[cutlass.min(lane + WARP * i, self.experts - 1)]
        return held

    @cute.jit
    def score(self, x, norm, router, scores, rank: Int32, block: Int32, warp: Int32, lane: Int32, thread: Int32,
              shared=None, arrived=None):
        """The block's logits into the first CTA's `scores`: each CTA's warps dot their router rows
        with the block's rows (the rows read once for all of them; with `norm`, (residual, norm_w,
        y, h), the rows this CTA normed into its shared memory); across a cluster each CTA sends its
        scores to the first one (`pushes`, on its barrier `arrived`). With `shared` (shared_gate,
        shared_up, hidden), the CTAs past the router's clusters run the shared expert's units of their
        row instead (`shared_pair`)."""
        R: cutlass.Constexpr = self.rows_a_cta
        rows = [cutlass.min(block * R + r, self.rows - 1) for r in range(R)]  # past the rows: the last, unwritten
        place = (block - self.clusters()) * self.split + rank  # a shared expert CTA's: its row's block of units
        if cutlass.const_expr(shared is None):
            self.prefetch_router(router, rank, thread)
        else:
            if block < self.clusters():
                self.prefetch_router(router, rank, thread)
            else:
                rows = [cutlass.min(place // self.shared_blocks, self.rows - 1)]
                self.prefetch_shared(shared, place, thread)
        scales = None
        if cutlass.const_expr(self.norm):  # a weight: ready at launch
            scales = norm_weight_vectors(norm[1], self.width, WARP * self.warps, self.norm_steps, thread)
        cute.arch.griddepcontrol_wait()  # x is the predecessor's output
        release_dependents(self)
        act, act_rows = x, rows
        if cutlass.const_expr(self.norm):
            act, act_rows = self.norm_block(x, norm, scales, rows, rank, block, thread), list(range(R))
        if cutlass.const_expr(shared is None):
            self.dot_logits(act, act_rows, router, scores, rank, warp, lane, thread, arrived)
        else:
            if block < self.clusters():
                self.dot_logits(act, act_rows, router, scores, rank, warp, lane, thread, arrived)
            else:
                if cutlass.const_expr(self.pushes()):
                    cute.arch.cluster_wait()  # the cluster barrier `arm` arrived on (nothing to send)
                self.shared_pair(act, act_rows[0], shared, place, warp, lane)

    @cute.jit
    def prefetch_router(self, router, rank: Int32, thread: Int32):
        """This CTA's router rows into L2 (a weight: before the PDL wait)."""
        if (thread == 0) & (rank * self.per_cta < self.experts):
            prefetch_l2(at(router, rank * self.per_cta, 0),
                        cutlass.min(self.per_cta, self.experts - rank * self.per_cta) * (2 * self.width))

    @cute.jit
    def prefetch_shared(self, shared, place: Int32, thread: Int32):
        """A shared expert CTA's gate and up rows into L2 (weights: before the PDL wait)."""
        first = (place % self.shared_blocks) * (self.warps * self.shared_units)
        if (thread == 0) & (first < self.shared_hidden):
            nbytes = cutlass.min(self.warps * self.shared_units, self.shared_hidden - first) * (2 * self.width)
            for matrix in cutlass.range_constexpr(2):
                prefetch_l2(at(shared[matrix], first, 0), nbytes)

    @cute.jit
    def dot_logits(self, act, act_rows, router, scores, rank: Int32, warp: Int32, lane: Int32, thread: Int32,
                   arrived=None):
        """A router CTA's warps dot their router rows with the block's rows into the first CTA's `scores`
        (sigmoids where `early_scores`): sent there by `st.async` on its barrier `arrived` where `pushes`,
        else stored in place (one CTA)."""
        E: cutlass.Constexpr = self.experts
        R: cutlass.Constexpr = self.rows_a_cta
        first = rank * self.per_cta + warp * self.per_warp
        sums = rows_dots([router], first, self.experts, self.per_warp, act, act_rows, Int32(0), self.width, lane)
        if cutlass.const_expr(self.pushes()):
            cute.arch.cluster_wait()  # the first CTA's barrier is armed (`arm`)
        for r in cutlass.range_constexpr(R):
            for j in cutlass.range_constexpr(self.per_warp):
                logit = sums[r * self.per_warp + j]
                if cutlass.const_expr(self.early_scores()):
                    logit = sigmoid(logit)  # the score itself (`early_scores`)
                mine = (lane == 0) & (warp * self.per_warp + j < self.per_cta)
                to = Int32(0)
                if cutlass.const_expr(self.spread):  # lane d sends to CTA d (every lane holds the sums)
                    mine, to = (lane < self.split) & (warp * self.per_warp + j < self.per_cta), lane
                if cutlass.const_expr(self.pushes()):
                    push_float(scores.iterator + r * E + first + j, logit, arrived.iterator, to,
                               cutlass.select_(mine, Int32(1), Int32(0)))
                else:
                    if mine:
                        scores[r * E + first + j] = logit
        if cutlass.const_expr(not self.pushes()):
            cute.arch.sync_threads()

    @cute.jit
    def shared_pair(self, act, act_row, shared, place: Int32, warp: Int32, lane: Int32):
        """A shared expert CTA (`shared_hidden`): its warps' units of its row's block (`place`), the
        SwiGLU of the row (`act` row `act_row`: x's, or the tile normed here where `norm`) with the shared
        gate and up rows, into the row's shared columns of hidden (`swiglu_units`, as mixture_gated's
        shared warp computes them)."""
        shared_gate, shared_up, hidden = shared
        row = place // self.shared_blocks
        if row < self.rows:
            first = (place % self.shared_blocks) * (self.warps * self.shared_units) + warp * self.shared_units
            swiglu_units(act, act_row, [shared_gate, shared_up], first, self.shared_hidden, self.shared_units,
                         self.width, Int32(self.top_k * self.expert_hidden), lane, hidden, out_row=row)

    @cute.jit
    def norm_block(self, x, norm, scales, rows, rank: Int32, block: Int32, thread: Int32):
        """`norm`: the block's rows normed (`normed_rows`) into a [rows_a_cta, width] bf16 tile of
        this CTA's shared memory, returned once every thread's vectors are in it. The first CTA
        writes them to y and the sums to h (rows past the step's, and a shared expert CTA's: neither)."""
        residual, _, y, h_out = norm
        R: cutlass.Constexpr = self.rows_a_cta
        S: cutlass.Constexpr = self.norm_steps
        vectors: cutlass.Constexpr = self.width // VECTOR
        threads: cutlass.Constexpr = WARP * self.warps
        # the first CTA writes the sums (a past-the-rows row repeats the last one's, the same values)
        writer = rank == 0
        if cutlass.const_expr(self.shared_hidden > 0):
            writer = (rank == 0) & (block < self.clusters())  # a router cluster's first CTA
        normed = normed_rows(x, residual if cutlass.const_expr(self.residual) else None, scales, h_out, rows,
                             self.width, self.warps, S, self.eps, writer, thread)
        tile = alloc(cutlass.memory.SmemAllocator(), BFloat16, (R, self.width))
        tiles = cute.zipped_divide(tile, (1, VECTOR))
        for r in cutlass.range_constexpr(R):
            for s in cutlass.range_constexpr(S):
                vector = thread + s * threads
                if vector < vectors:
                    cute.autovec_copy(normed[None, r * S + s], tiles[None, (r, vector)])
                    if (rank == 0) & (block * R + r < self.rows):
                        cute.autovec_copy(normed[None, r * S + s],
                                          cute.zipped_divide(y, (1, VECTOR))[None, (block * R + r, vector)])
        cute.arch.sync_threads()
        return tile

    @cute.jit
    def load_logits(self, logits, scores, block: Int32, warp: Int32, lane: Int32):
        """`logits`: warp r stores row r of the block's given logits into `scores` (past the rows:
        the last row's, never chosen from)."""
        E: cutlass.Constexpr = self.experts
        cute.arch.griddepcontrol_wait()  # the logits are the predecessor's output
        release_dependents(self)
        row = cutlass.min(block * self.rows_a_cta + warp, self.rows - 1)
        for i in cutlass.range_constexpr(self.held):
            e = lane + WARP * i
            if e < E:
                logit = logits[row, e]
                if cutlass.const_expr(self.early_scores()):
                    logit = sigmoid(logit)
                scores[warp * E + e] = logit
        cute.arch.sync_warp()  # the warp chooses from what its lanes stored

    @cute.jit
    def segment_last(self, ids, starts, order, tickets, tables, thread: Int32):
        """`segments`: this cluster's ids are stored; the cluster drawing the last ticket computes
        the segments from every cluster's (the ticket's fences order their stores before it)."""
        counts, firsts, last = tables
        clusters: cutlass.Constexpr = self.clusters()
        cute.arch.sync_threads()  # the choosing warps' ids are stored
        if thread == 0:
            if cutlass.const_expr(clusters == 1):
                last[0] = Int32(1)
            else:
                drawn = ticket(at(tickets, 0), Uint32(clusters - 1))
                last[0] = Int32(cutlass.select_(drawn == Uint32((clusters - 2) % (1 << 32)), 1, 0))
        cute.arch.sync_threads()
        if last[0] == 1:
            cute.arch.fence_acq_rel_gpu()  # every cluster's ids are seen
            self.grouper().segment(ids, starts, order, counts, firsts, thread, True)

    @cute.jit
    def choose(self, scores, choice, kept, corrections, ids, weights, row: Int32, lane: Int32, prefetch=None):
        """Warp r of the first CTA (of every CTA: `spread`), for row r of the block (`scores`, `choice`
        and `kept` its row's; `corrections` the lane's experts' correction, `corrected`): scores, the
        choice values, the kept groups, the top_k, the weights; with `prefetch` (gate, up, the CTA's rank,
        the block's row r) the chosen experts' first rows into L2 (`prefetch_chosen`)."""
        E: cutlass.Constexpr = self.experts
        value = cute.make_rmem_tensor(self.held, Float32)
        taken = cute.make_rmem_tensor(self.held, Int32)  # 1: chosen already, or no expert
        for i in cutlass.range_constexpr(self.held):
            e = lane + WARP * i
            taken[i] = cutlass.select_(e < E, Int32(0), Int32(1))
            value[i] = scores[cutlass.min(e, E - 1)]
        if cutlass.const_expr(not self.early_scores()):  # else `scores` holds the scores already
            self.scored(value, taken)
            cute.arch.sync_warp()  # every lane has read its logits (lanes past E read expert E - 1's)
            for i in cutlass.range_constexpr(self.held):
                e = lane + WARP * i
                if e < E:
                    scores[e] = value[i]  # the weights are the uncorrected scores
        if cutlass.const_expr(corrections is not None):
            for i in cutlass.range_constexpr(self.held):
                value[i] = value[i] + corrections[i]
        if cutlass.const_expr(self.groups is not None):
            self.keep_groups(value, choice, kept, lane)
        chosen = self.top_k_of(value, taken, lane)
        cute.arch.sync_warp()  # every lane's scores are in shared memory
        # every lane sums the chosen scores in order (the same total) and keeps choice `lane`'s: lane k
        # writes choice k, one division a lane
        total, weight, expert = Float32(0.0), Float32(0.0), Int32(0)
        for k in cutlass.range_constexpr(self.top_k):
            picked = scores[chosen[k]]
            total += picked
            weight = cutlass.select_(lane == k, picked, weight)
            expert = cutlass.select_(lane == k, chosen[k], expert)
        if lane < self.top_k:
            stores = True
            if cutlass.const_expr(self.spread):
                stores = prefetch[2] == 0  # the first CTA stores; the others chose only to prefetch
            if stores:
                if cutlass.const_expr(self.renormalize):
                    weight = weight / total
                ids[row, lane] = expert
                weights[row, lane] = weight * Float32(self.routed_scaling)
            if cutlass.const_expr(prefetch is not None):
                self.prefetch_chosen(prefetch, expert, lane)

    @cute.jit
    def prefetch_chosen(self, prefetch, expert: Int32, lane: Int32):
        """Choice `lane`'s expert's first `prefetch_units` gate and up rows into L2 (weights: a hint, read
        again by mixture_gated after its wait): triple (r, lane, m) is (r * top_k + lane) * 2 + m, and
        with `spread` CTA c takes the triples c, c + split, ... (else the first CTA takes them all)."""
        gate, up, rank, r = prefetch
        nbytes: cutlass.Constexpr = self.prefetch_units * self.width * 2
        for m in cutlass.range_constexpr(2):
            matrix = (gate, up)[m]
            mine = True
            if cutlass.const_expr(self.spread):
                mine = ((r * self.top_k + lane) * 2 + m) % self.split == rank
            if mine:
                prefetch_l2(at(expert_rows(matrix, expert, self.expert_hidden, self.width), 0, 0), nbytes)

    @cute.jit
    def scored(self, value, taken):
        """A choosing lane's logits made scores in place: the softmax over the row (the warp's lanes),
        or each one's sigmoid."""
        if cutlass.const_expr(self.scoring == "softmax"):
            top = -Float32.inf
            for i in cutlass.range_constexpr(self.held):
                top = cutlass.select_(taken[i] == 0, cutlass.max(top, value[i]), top)
            top = warp_reduce(top, lambda a, b: cutlass.max(a, b))
            spread = Float32(0.0)
            for i in cutlass.range_constexpr(self.held):
                value[i] = cute.math.exp(value[i] - top)
                spread += cutlass.select_(taken[i] == 0, value[i], Float32(0.0))
            spread = warp_reduce(spread, operator.add)
            for i in cutlass.range_constexpr(self.held):
                value[i] = value[i] / spread
        else:
            for i in cutlass.range_constexpr(self.held):
                value[i] = sigmoid(value[i])

    @cute.jit
    def sorted_keys(self, value, taken, lane: Int32):
        """A lane's experts (lane + 32 i) and their `ordered_key`s, sorted by key, then the lower
        expert, with Batcher's network (`sorting_network`); places without an expert last (NO_KEY)."""
        keys = cute.make_rmem_tensor(self.held, Int32)
        held = cute.make_rmem_tensor(self.held, Int32)
        for i in cutlass.range_constexpr(self.held):
            keys[i] = cutlass.select_(taken[i] == 0, ordered_key(value[i]), Int32(NO_KEY))
            held[i] = lane + WARP * i
        for a, b in sorting_network(self.held):
            swap = (keys[b] > keys[a]) | ((keys[b] == keys[a]) & (held[b] < held[a]))
            ka, kb, ha, hb = keys[a], keys[b], held[a], held[b]
            keys[a], keys[b] = cutlass.select_(swap, kb, ka), cutlass.select_(swap, ka, kb)
            held[a], held[b] = cutlass.select_(swap, hb, ha), cutlass.select_(swap, ha, hb)
        return keys, held

    @cute.jit
    def top_k_of(self, value, taken, lane: Int32):
        """The row's top_k experts, largest value first (the lower expert among equal values), every
        lane holding them all (`taken`: 1 where a lane's place holds no expert)."""
        E: cutlass.Constexpr = self.experts
        # the top_k in rounds over the lanes' sorted lists (`sorted_keys`): a round's largest value is one
        # integer `redux.sync` over the lanes' first keys, its expert (the lowest of equal values) a second,
        # and the lane holding it shifts its list
        keys, held = self.sorted_keys(value, taken, lane)
        chosen = cute.make_rmem_tensor(self.top_k, Int32)
        for k in cutlass.range_constexpr(self.top_k):
            top = cute.arch.warp_redux_sync(keys[0], "max")
            where = cute.arch.warp_redux_sync(cutlass.select_(keys[0] == top, held[0], Int32(E)), "min")
            self.pop_first(keys, held, held[0] == where)
            chosen[k] = where
        return chosen

    @cute.jit
    def pop_first(self, keys, held, won):
        """Where `won`, the lane's sorted list without its first expert (NO_KEY at its end)."""
        for i in cutlass.range_constexpr(self.held - 1):
            keys[i] = cutlass.select_(won, keys[i + 1], keys[i])
            held[i] = cutlass.select_(won, held[i + 1], held[i])
        keys[self.held - 1] = cutlass.select_(won, Int32(NO_KEY), keys[self.held - 1])

    @cute.jit
    def keep_groups(self, value, choice, kept, lane: Int32):
        """Grouped top-k: lane g ranks group g by the sum of its two largest choice values
        (equal values count twice, as a sort keeps them); the best topk_groups groups are kept
        (among equal ranks the lower group), every other expert's value becomes -inf."""
        E: cutlass.Constexpr = self.experts
        G: cutlass.Constexpr = self.groups
        size: cutlass.Constexpr = E // G
        for i in cutlass.range_constexpr(self.held):
            e = lane + WARP * i
            if e < E:
                choice[e] = value[i]
        cute.arch.sync_warp()
        group = cutlass.min(lane, G - 1)  # lanes past the groups rank a copy, then drop it
        largest, second = -Float32.inf, -Float32.inf
        for j in cutlass.range(size):
            v = choice[group * size + j]
            second = cutlass.select_(v > largest, largest, cutlass.max(second, v))
            largest = cutlass.max(largest, v)
        rank = second + largest
        done = cutlass.select_(lane < G, Int32(0), Int32(1))  # 1: kept already, or no group
        for _ in cutlass.range_constexpr(self.topk_groups):
            best = cutlass.select_(done == 0, rank, -Float32.inf)
            where = cutlass.select_(done == 0, lane, Int32(WARP))
            best, where = warp_reduce((best, where), first_largest)
            done = cutlass.select_(lane == where, Int32(1), done)
        kept[lane] = cutlass.select_(lane < G, done, Int32(0))
        cute.arch.sync_warp()
        for i in cutlass.range_constexpr(self.held):
            owner = cutlass.min(lane + WARP * i, E - 1) // size
            value[i] = cutlass.select_(kept[owner] != 0, value[i], -Float32.inf)


class KeptExperts:
    """What mixture_gated and mixture_down share: `rows` of `width` values, `experts` of `hidden`
    units, `top_k` a row and the folded shared expert of `shared_hidden` units (0: none), as one
    block of warps a CTA, a warp a kept expert (`slots`), each CTA a block of `units` a warp for
    one row. ``schedule`` (`MixtureSchedule`, the schedule table's entry where it has the shape): the
    `units` a warp and the `vectors` a lane has in flight a chunk of its dots. The hidden values of a
    row are every slot's side by side: [rows, top_k * hidden + shared_hidden]. ``early``
    (MIXTURE_DOWN_EARLY_ROWS): mixture_down brings its share of the chosen experts' down rows into L2
    before its PDL wait, while mixture_gated runs, and mixture_gated reads its routed rows evict-first,
    so that its stream does not push them out."""

    name: str
    units: int

    def __init__(self, rows: int, width: int, hidden: int, experts: int, top_k: int, shared_hidden: int = 0,
                 x_pitch: int | None = None, early: bool = False, schedule=None):
        MixtureExpertsSpec(self.name, rows, width, hidden, experts, top_k, shared_hidden, x_pitch).check()
        self.early = bool(early)
        chosen = MixtureSchedule.of(schedule or {})
        if chosen.units is not None:  # a schedule's units a warp (a schedule naming none keeps the default's kernel)
            self.units = chosen.units
        self.vectors = chosen.vectors or VECTORS_IN_FLIGHT  # vectors a lane issues a chunk (`rows_dots`)
        self.rows, self.width, self.hidden, self.experts, self.top_k = rows, width, hidden, experts, top_k
        self.shared_hidden, self.x_pitch = shared_hidden, x_pitch
        self.slots = top_k + (1 if shared_hidden else 0)
        self.hidden_width = top_k * hidden + shared_hidden

    def x_param(self) -> TensorParam:
        return TensorParam("x", (self.rows, self.width), "bfloat16", (self.x_pitch or self.width, 1))

    def hidden_param(self, written: bool) -> TensorParam:
        return TensorParam("hidden", (self.rows, self.hidden_width), "bfloat16", written=written)

    def blocks(self, outputs: int) -> int:
        return -(-outputs // self.units)


class MixtureGated(KeptExperts):
    """Params: x [rows, width], ids [rows, top_k] int32, gate and up [experts, hidden, width],
    shared_gate and shared_up [shared_hidden, width] (where folded), hidden [rows, top_k * hidden
    + shared_hidden] bf16. ``shared_in_router``: the router's launch wrote the shared expert's
    columns of hidden (`MixtureRouter` with shared_hidden): a warp a routed expert only, no shared
    params. ``early_shared`` (MIXTURE_EARLY_SHARED_ROWS): the shared warp of the first ``early_ctas``
    CTAs (None: all) norms the router's input itself (params norm_x, residual where ``residual``,
    norm_w, with ``eps``) and dots its ``shared_units`` units (default: the routed warps' 2) before the
    PDL wait (`shared_before_wait`). ``ready`` (MIXTURE_READY_FLAG): the router raises a flag a row once
    its ids are stored (`MixtureRouter` ready; param ready [rows] int32, after hidden): thread 0
    acquires its row's, and a barrier of the warps that dot after the wait passes it on, in place of
    the PDL wait for the router's end (the early shared warp keeps that wait before its stores)."""

    name = "mixture_gated"
    units = UNITS_GATED

    def __init__(self, *args, shared_in_router: bool = False, early_shared: bool = False, residual: bool = False,
                 eps: float = 1e-6, shared_units: int | None = None, early_ctas: int | None = None,
                 ready: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.ready = bool(ready)
        self.shared_in_router = bool(shared_in_router) and self.shared_hidden > 0
        self.own_shared = 0 if self.shared_in_router else self.shared_hidden  # the shared units this launch writes
        if self.shared_in_router:
            self.slots = self.top_k
        if early_shared and not self.own_shared:
            raise ValueError("mixture_gated early_shared: the shared warp norms its row for a shared expert this "
                             "launch runs; it runs none")
        if shared_units is not None and not 1 <= shared_units <= 8:
            raise ValueError(f"mixture_gated shared_units {shared_units}: 1 to 8 hidden units a warp")
        if early_ctas is not None and early_ctas < 1:
            raise ValueError(f"mixture_gated early_ctas {early_ctas}: at least one CTA")
        self.early_shared, self.residual, self.eps = bool(early_shared), bool(residual), float(eps)
        self.shared_units = shared_units or self.units  # the shared warp's hidden units (the routed warps': units)
        self.early_ctas = early_ctas  # the CTAs whose shared warp norms its row before the wait (None: every one)

    def params(self) -> list[TensorParam]:
        stacked = (self.experts, self.hidden, self.width)
        params = [self.x_param(), TensorParam("ids", (self.rows, self.top_k), "int32"),
                  TensorParam("gate", stacked, "bfloat16"), TensorParam("up", stacked, "bfloat16")]
        if self.own_shared:
            params += [TensorParam(name, (self.shared_hidden, self.width), "bfloat16")
                       for name in ("shared_gate", "shared_up")]
        if self.early_shared:  # the router's norm input: the shared warp norms its row itself
            row = (self.rows, self.width)
            params += [TensorParam("norm_x", row, "bfloat16"),
                       *([TensorParam("residual", row, "bfloat16")] if self.residual else []),
                       TensorParam("norm_w", (self.width,), "bfloat16")]
        return params + [self.hidden_param(written=True)] + (
            [TensorParam("ready", (self.rows,), "int32")] if self.ready else [])

    def flag_in_place_of_wait(self) -> bool:
        """Whether no thread takes the PDL wait (`ready` without the early shared warp, which keeps it)."""
        return self.ready and not self.early_shared

    def touched(self) -> dict[str, int]:
        return {"gate": min(self.experts, self.rows * self.top_k), "up": min(self.experts, self.rows * self.top_k)}

    def launch(self) -> LaunchShape:
        shared_blocks = -(-self.own_shared // self.shared_units)
        staged = 6 * self.width if self.early_shared else 0  # the shared warp's h (fp32) and normed row (bf16)
        return LaunchShape(grid=(max(self.blocks(self.hidden), shared_blocks), self.rows, 1),
                           block=(WARP * self.slots, 1, 1), shared_bytes=staged)

    @cute.jit
    def __call__(self, *, x: cute.Tensor, ids: cute.Tensor, gate: cute.Tensor, up: cute.Tensor, shared_gate=None,
                 shared_up=None, norm_x=None, residual=None, norm_w=None, hidden: cute.Tensor, ready=None):
        launch(self, x, ids, gate, up, shared_gate, shared_up, norm_x, residual, norm_w, hidden, ready)

    @cute.kernel
    def kernel(self, x: cute.Tensor, ids: cute.Tensor, gate: cute.Tensor, up: cute.Tensor, shared_gate, shared_up,
               norm_x, residual, norm_w, hidden: cute.Tensor, ready):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, row, _ = cute.arch.block_idx()
        lane, slot = thread % WARP, thread // WARP
        first = block * self.units
        shared_first = block * self.shared_units
        if cutlass.const_expr(self.early_shared):
            early = slot == self.top_k
            if cutlass.const_expr(self.early_ctas is not None):
                early = early & (block < self.early_ctas)
            if early:
                self.shared_before_wait(norm_x, residual, norm_w, shared_gate, shared_up, row, shared_first, lane,
                                        hidden)
            else:
                after = self.slots
                if cutlass.const_expr(self.ready):  # the warps past the early one's, where this CTA has it
                    after = self.slots - 1
                    if cutlass.const_expr(self.early_ctas is not None):
                        after = cutlass.select_(block < self.early_ctas, Int32(self.slots - 1), Int32(self.slots))
                self.after_wait(x, ids, gate, up, shared_gate, shared_up, row, slot, first, shared_first, lane,
                                hidden, (ready, thread, after))
        else:
            self.after_wait(x, ids, gate, up, shared_gate, shared_up, row, slot, first, shared_first, lane, hidden,
                            (ready, thread, self.slots))

    @cute.jit
    def after_wait(self, x, ids, gate, up, shared_gate, shared_up, row: Int32, slot: Int32, first: Int32,
                   shared_first: Int32, lane: Int32, hidden, flag):
        """A warp that dots after the PDL wait from the router's normed rows x: a routed slot's (`routed`),
        or the shared warp's (its rows brought into L2 first: weights, known before the router ends).
        `flag` (ready, the thread, the warps that take this path): with `ready`, the row's flag in place of
        the wait (`wait_ready`)."""
        if cutlass.const_expr(self.own_shared > 0):
            if (slot == self.top_k) & (lane == 0) & (shared_first < self.shared_hidden):
                nbytes = cutlass.min(self.shared_units, self.shared_hidden - shared_first) * (2 * self.width)
                prefetch_l2(at(shared_gate, shared_first, 0), nbytes)
                prefetch_l2(at(shared_up, shared_first, 0), nbytes)
        if cutlass.const_expr(self.ready):
            self.wait_ready(*flag, row)
        else:
            cute.arch.griddepcontrol_wait()  # every routed weight row read depends on the router's ids
        release_dependents(self)
        if slot < self.top_k:
            self.routed(x, ids, gate, up, row, slot, first, lane, hidden)
        else:
            if cutlass.const_expr(self.own_shared > 0):
                swiglu_units(x, row, [shared_gate, shared_up], shared_first, self.shared_hidden, self.shared_units,
                             self.width, self.top_k * self.hidden, lane, hidden, in_flight=self.vectors)

    @cute.jit
    def wait_ready(self, ready, thread: Int32, warps, row: Int32):
        """`ready`: thread 0 spins on the row's flag (`wait_flag`, an acquire at GPU scope: the router's ids,
        weights and normed rows, and every read of its CTAs before them); a barrier of the `warps` after-wait
        warps (the first of them hold thread 0) passes it on. One poller a CTA keeps the flag's L2 line cool."""
        if thread == 0:
            wait_flag(at(ready, row), 1)
        cute.arch.barrier(barrier_id=1, number_of_threads=WARP * warps)

    @cute.jit
    def routed(self, x, ids, gate, up, row: Int32, slot: Int32, first: Int32, lane: Int32, hidden):
        """Routed slot `slot`'s warp: its units of expert ids[row, slot] (after the PDL wait)."""
        expert = ids[row, slot]
        pair = [expert_rows(w, expert, self.hidden, self.width) for w in (gate, up)]
        policy = evict_first_policy() if cutlass.const_expr(self.early) else None
        self.swiglu(x, row, pair, first, self.hidden, slot * self.hidden, lane, hidden, policy)

    @cute.jit
    def shared_before_wait(self, norm_x, residual, norm_w, shared_gate, shared_up, row: Int32, first: Int32,
                           lane: Int32, hidden):
        """`early_shared`: the shared warp's units first.. dotted before the PDL wait. Its activation is
        the router's normed row, which the router (this launch's predecessor) writes; so the warp norms
        the router's own input in this CTA's shared memory, as the router does (`warp_normed_row`). That
        input was complete when the router's CTAs passed their PDL wait, and the router releases this
        launch only after it (the lowering's `place_releases`), so these reads precede no write. The
        SwiGLU is stored after the wait: what the hidden values' buffer held is the predecessors'."""
        smem = cutlass.memory.SmemAllocator()
        staged = alloc(smem, Float32, (1, self.width))
        normed = alloc(smem, BFloat16, (1, self.width))
        if first < self.shared_hidden:
            if lane == 0:  # the rows into L2 while the warp norms
                nbytes = cutlass.min(self.shared_units, self.shared_hidden - first) * (2 * self.width)
                prefetch_l2(at(shared_gate, first, 0), nbytes)
                prefetch_l2(at(shared_up, first, 0), nbytes)
            warp_normed_row(norm_x, residual if cutlass.const_expr(self.residual) else None, norm_w, staged, normed,
                            row, Int32(0), self.width, self.eps, lane)
            cute.arch.sync_warp()
            sums = row_dots([shared_gate, shared_up], first, self.shared_hidden, self.shared_units, normed, Int32(0),
                            Int32(0), self.width, lane, None, self.vectors)
            cute.arch.griddepcontrol_wait()
            release_dependents(self)
            if lane == 0:
                for u in cutlass.range_constexpr(self.shared_units):
                    if first + u < self.shared_hidden:
                        g = sums[u]
                        hidden[row, self.top_k * self.hidden + first + u] = BFloat16(
                            g * sigmoid(g) * sums[self.shared_units + u])
        else:
            cute.arch.griddepcontrol_wait()
            release_dependents(self)

    @cute.jit
    def swiglu(self, x, row: Int32, pair, first: Int32, outputs: cutlass.Constexpr, base: Int32, lane: Int32,
               hidden, policy=None):
        """This warp's units first.. of one expert (`swiglu_units`)."""
        swiglu_units(x, row, pair, first, outputs, self.units, self.width, base, lane, hidden, policy,
                     in_flight=self.vectors)


class MixtureDown(KeptExperts):
    """Params: x [rows, width] (only with the shared expert's gate row), hidden [rows, top_k *
    hidden + shared_hidden], ids [rows, top_k] int32, weights [rows, top_k] fp32, down [experts,
    width, hidden], shared_down [width, shared_hidden] (where folded), shared_gate_row [1, width]
    (where `shared_gate`), out [rows, width] bf16. ``schedule`` (`MixtureSchedule`): the `units`
    (outputs) a warp, the CTA's share of the row; the schedule table's, where it has the shape.
    ``early_weights`` (MIXTURE_DOWN_EARLY_WEIGHTS_ROWS): each warp reads its expert's id and issues its
    first chunk of down rows into registers before the PDL wait (`load_first_chunk`), so a CTA resident
    under mixture_gated's tail streams then; only the hidden values wait. The ids are the router's: the
    lowering has mixture_gated release this launch only after its own wait, when the router has ended."""

    name = "mixture_down"
    units = UNITS_DOWN

    def __init__(self, rows: int, width: int, hidden: int, experts: int, top_k: int, shared_hidden: int = 0,
                 shared_gate: bool = False, x_pitch: int | None = None, early: bool = False, schedule=None,
                 early_weights: bool = False):
        super().__init__(rows, width, hidden, experts, top_k, shared_hidden, x_pitch, early, schedule)
        if shared_gate and not shared_hidden:
            raise ValueError("mixture_down shared_gate: the gate row scales a shared expert; there is none")
        self.shared_gate = shared_gate
        self.early_weights = bool(early_weights)
        if self.early_weights and early:
            raise ValueError("mixture_down early_weights: each warp's first chunk of rows is loaded before the PDL "
                             "wait, so the L2 prefetch (early) is not taken with it")
        if self.early_weights and shared_hidden not in (0, hidden):
            raise ValueError("mixture_down early_weights: a shared expert must be as wide as a routed one (one chunk "
                             f"shape a warp): {shared_hidden} against {hidden}")

    def params(self) -> list[TensorParam]:
        params = [self.x_param()] if self.shared_gate else []
        params += [self.hidden_param(written=False), TensorParam("ids", (self.rows, self.top_k), "int32"),
                   TensorParam("weights", (self.rows, self.top_k), "float32"),
                   TensorParam("down", (self.experts, self.width, self.hidden), "bfloat16")]
        if self.shared_hidden:
            params.append(TensorParam("shared_down", (self.width, self.shared_hidden), "bfloat16"))
        if self.shared_gate:
            params.append(TensorParam("shared_gate_row", (1, self.width), "bfloat16"))
        return params + [TensorParam("out", (self.rows, self.width), "bfloat16", written=True)]

    def touched(self) -> dict[str, int]:
        return {"down": min(self.experts, self.rows * self.top_k)}  # the chosen experts (at most)

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.blocks(self.width), self.rows, 1), block=(WARP * self.slots, 1, 1),
                           shared_bytes=4 * self.slots * self.units)

    @cute.jit
    def __call__(self, *, x=None, hidden: cute.Tensor, ids: cute.Tensor, weights: cute.Tensor, down: cute.Tensor,
                 shared_down=None, shared_gate_row=None, out: cute.Tensor):
        launch(self, x, hidden, ids, weights, down, shared_down, shared_gate_row, out)

    @cute.kernel
    def kernel(self, x, hidden: cute.Tensor, ids: cute.Tensor, weights: cute.Tensor, down: cute.Tensor, shared_down,
               shared_gate_row, out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, row, _ = cute.arch.block_idx()
        lane, slot = thread % WARP, thread // WARP
        first = block * self.units
        smem = cutlass.memory.SmemAllocator()
        partial = alloc(smem, Float32, (self.slots, self.units))
        if cutlass.const_expr(self.shared_hidden > 0):  # the shared expert's down rows: weights, ready at launch
            if (slot == self.top_k) & (lane == 0) & (first < self.width):
                prefetch_l2(at(shared_down, first, 0), cutlass.min(self.units, self.width - first) *
                            (2 * self.shared_hidden))
        if cutlass.const_expr(self.early):  # the chosen experts' rows while mixture_gated runs
            if (slot < self.top_k) & (lane == 0) & (first < self.width):
                # the router finished before mixture_gated's wait let this launch start, so its ids are
                # stored; a hint only (the ids are read again after the wait), clamped to an expert
                expert = cutlass.max(cutlass.min(ids[row, slot], self.experts - 1), 0)
                prefetch_l2(at(expert_rows(down, expert, self.width, self.hidden), first, 0),
                            cutlass.min(self.units, self.width - first) * (2 * self.hidden))
        preloaded = None
        expert = Int32(0)
        if cutlass.const_expr(self.early_weights):  # each warp's first chunk of rows, before the wait
            # mixture_gated (this launch's predecessor) releases it only after its own PDL wait, so the router
            # that wrote the ids has ended and they are this step's: the lowering sees to it (place_releases)
            preloaded = first_chunk_words(self.units, self.hidden, self.vectors)
            if slot < self.top_k:
                expert = ids[row, slot]
                load_first_chunk(preloaded, [expert_rows(down, expert, self.width, self.hidden)], first, self.width,
                                 self.units, self.hidden, lane, None, self.vectors)
            else:
                if cutlass.const_expr(self.shared_hidden > 0):
                    load_first_chunk(preloaded, [shared_down], first, self.width, self.units, self.hidden, lane,
                                     None, self.vectors)
        cute.arch.griddepcontrol_wait()  # the hidden values, ids and weights are predecessors' outputs
        release_dependents(self)
        if slot < self.top_k:
            if cutlass.const_expr(not self.early_weights):
                expert = ids[row, slot]
            rows = expert_rows(down, expert, self.width, self.hidden)
            sums = row_dots([rows], first, self.width, self.units, hidden, row, slot * self.hidden, self.hidden, lane,
                            None, self.vectors, preloaded)
            self.keep(partial, slot, sums, weights[row, slot], lane)
        else:
            if cutlass.const_expr(self.shared_hidden > 0):
                sums = row_dots([shared_down], first, self.width, self.units, hidden, row, self.top_k * self.hidden,
                                self.shared_hidden, lane, None, self.vectors, preloaded)
                scale = Float32(1.0)
                if cutlass.const_expr(self.shared_gate):
                    gate = row_dots([shared_gate_row], Int32(0), 1, 1, x, row, Int32(0), self.width, lane)
                    scale = sigmoid(gate[0])
                self.keep(partial, slot, sums, scale, lane)
        cute.arch.sync_threads()
        if thread < self.units:
            column = first + thread
            if column < self.width:
                total = Float32(0.0)
                for s in cutlass.range_constexpr(self.slots):  # slot order: the same sum every run
                    total += partial[s, thread]
                out[row, column] = BFloat16(total)

    @cute.jit
    def keep(self, partial, slot: Int32, sums, scale: Float32, lane: Int32):
        if lane == 0:
            for u in cutlass.range_constexpr(self.units):
                partial[slot, u] = sums[u] * scale
