"""`gemv`: the decode step's products, y[rows, N] = x[rows, K] @ w[N, K]^T, bf16 weights and
activation, fp32 accumulation, bf16 out; weights in parts (several products of one activation,
their rows back to back in one buffer, their outputs side by side in one row); optionally a
per-head part read (head h reads x[:, h*unit + offset :][:K] with its own rows).

Memory-bound at a decode step's rows: a CTA owns a few weight rows and its warps split K; every
thread issues its first weight loads before the PDL wait (weights never depend on a predecessor),
so a CTA's weights are in flight while the previous kernel finishes. Two ways to multiply:

- CUDA cores (1-3 rows): each thread dots its 16-byte weight vectors with the activation rows
  (read after the wait, L1-resident); warps reduce their sums with one reduce-scatter.
- Tensor cores (4-32 rows): the weights are the B operand of `mma.m16n8k16` (8 weight rows a
  tile) and up to 16 activation rows the A operand, so an activation load serves 8 weight rows
  instead of 1-4. A lane's 16-byte loads of weight row g and activation row g at K offset
  32c + 8t hold the fragments of two MMAs (k halves 0 and 1): K is permuted identically in both
  operands, which leaves the sums unchanged.

With `quantize` (one part, no norm, argmax or per-head read) y leaves in the quantized form a
product by q8_0 rows reads, from the fp32 sums as ops.quantize does (`quantize_epilogue`): a
block is 32 output rows; CTAs of fewer rows stage their values (fp32, `staged`) and draw the
block's ticket (`block_tickets`, `atom.inc` modulo the block's CTAs), and the CTA drawing the last
quantizes the block for every activation row, a warp a row (a lane a value, the peak a whole-warp
butterfly); a CTA of whole blocks quantizes its own. gated_gemv and the q8 GEMVs share it. The
lane takes it only where a CTA owns whole blocks (lower.py's `row_products_out`): the ticket path
measured 28-76% slower than the same launch without it on the H200, more than the quantize launch
it would replace (bench/RESULTS.md, `QUANTIZE_EPILOGUE_SHARED_COST`).

With `norm` (CUDA cores only) the activation is a norm's input: every CTA reads the whole rows
(x, plus a residual where there is one) after the PDL wait and dots its weights with h * w (h =
x + residual in fp32, w the norm weight, held from before the wait) while it sums h's squares;
the squares join the products' one barrier, and each output is its sum times rsqrt(mean + eps).
The norm is linear in h up to that one scale a row, so nothing waits on the row's reduction
before the products, and h * w is not rounded to bf16 as the norm's stored output would be (the
difference is the rounding of one bf16 value a term). CTA 0 alone writes the sum x + residual
(the next layer's residual stream).

With `rider_width` a norm unrelated to the product rides in the launch (fold-norm-into-latent: an
absorbed latent attention's latent row beside its query's absorption): one CTA more a row, whose
first warp norms that row after the PDL wait and writes it, as rmsnorm would. With
`combine_splits` (CUDA cores, per head) the activation is a split latent attention's chunks: each
thread merges its head's slices as attention_combine would, the same bf16 values, before it dots
them (LATENT_COMBINE_IN_GEMV: the combine's launch gone).

With `preload` (a RowSchedule knob, CUDA cores) a CTA's weight rows are copied whole into shared
memory by bulk copies (`cp.async.bulk`, one a source, completing on one mbarrier) issued before
the PDL wait, in place of the few vectors a thread holds in registers. Its grid is one wave of
CTAs (by default `outputs / SM_COUNT` rows a CTA, where a warp's sums allow), each resident
beside a latency-bound predecessor, so the whole product's weights stream while that
predecessor's chain runs, and after the wait a CTA only reads the activation and dots it with
rows already on the SM (the lowering's GEMV_PRELOAD_AFTER). Rows past the end of an uneven last
CTA re-read its last row, as the register path does."""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Uint32, Uint64

from lanec.codegen.facts import (
    ARGMAX_GROUPS,
    ARGMAX_SLOT,
    GEMV_TENSOR_CORE_ROWS,
    GEMV_WARPS,
    SHARED_LIMIT,
    SM_COUNT,
    VECTOR,
    WARP,
    CombinePrologueSpec,
    RiderSpec,
    RowProductsSpec,
    RowSchedule,
    argmax_groups,
    quantized_pitch,
    quantized_problems,
)
from lanec.codegen.kernels.attention import merged_slice
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    alloc,
    argmax_key,
    at,
    bits_float,
    copy_g2s,
    load_activation_bf16x8,
    load_u64_acquire,
    load_weight_bf16x8,
    load_word_l2,
    min_u64,
    mma_into,
    norm_input,
    store_global_words,
    ticket,
    wait,
    warp_reduce,
    warp_reduce_scatter,
)
from lanec.codegen.kernels.quantize import store_warp_quantized
from lanec.codegen.kernels.rmsnorm import norm_weight_vectors, warp_normed_row

# Registers a thread may spend holding weight vectors (4 words each): 16 vectors = 64 registers.
MAX_VECTORS_IN_FLIGHT = 16
# A warp reduces at most 32 accumulators with one reduce-scatter (one lane each at the end).
MAX_VALUES = WARP
# Weight rows a CTA with a norm prologue takes by default (each CTA re-reads the activation rows):
# measured in Kimi Linear's real-size batch-1 step on the H200, where 2, 3, 6 and 8 were 63, 78-80, 31-37
# and 14-18 us slower than 4 (bench/RESULTS.md, twenty-fourth session).
NORM_ROWS_PER_CTA = 4
CHUNK = 32  # K values a lane's MMA loads cover: 8 of its own for each of the 4 lanes of a row
BLOCK = 32  # values of a quantized block: output rows here (the quantize epilogue)
TILE = 8  # weight rows of one MMA tile (its N)
PRELOAD_BARRIER_BYTES = 16  # the preload's mbarrier (8 bytes), the sums after it 16-byte aligned


def next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


class RowProducts:
    """What gemv and gated_gemv share: `sources` weight buffers of `outputs` rows each (the sum of
    `parts`), read in blocks of `rows_per_cta` rows a CTA, every row dotted with every activation
    row. Subclasses give `name`, `params`, the `@cute.jit __call__` and the kernel's epilogue,
    which reads sums through `total`. Their limits are `RowProductsSpec`'s (facts.py);
    ``schedule`` is a `RowSchedule` (or a mapping of its fields): what it leaves out the kernel
    picks for its shape. ``norm``: x is a norm's input, normed in the prologue (the module's
    docstring), with ``eps`` and, with ``residual``, a residual added first and the sum written."""

    sources = 1
    preload = False  # the CTA's weight rows in shared memory by bulk copies before the wait (`preload_rows`)
    combine_splits = 0  # gemv's combine prologue (`Gemv`): the activation merged from a split attention's chunks

    def __init__(self, rows: int, width: int, parts, *, per_head=None, schedule=None, x_pitch=None,
                 norm=False, eps=1e-6, residual=False, argmax=False, quantize=0):
        parts = tuple(int(p) for p in parts)
        per_head = tuple(per_head) if per_head is not None else None
        self.quantize = int(quantize)
        schedule = RowSchedule.of(schedule or {})
        self.norm, self.eps, self.residual, self.argmax = bool(norm), float(eps), bool(residual), bool(argmax)
        if self.residual and not self.norm:
            raise ValueError(f"{self.name}: a residual is added only by a norm prologue (norm=True)")
        if self.norm and not self.eps > 0:
            raise ValueError(f"{self.name} norm prologue: eps must be positive; got {eps}")
        self.spec = RowProductsSpec(self.name, rows, width, parts, per_head, x_pitch, self.norm,
                                    schedule.warps or GEMV_WARPS, self.argmax)
        self.spec.check()
        self.rows, self.width, self.outputs = rows, width, sum(parts)
        self.per_head = per_head
        self.x_pitch = x_pitch
        head_rows = self.outputs if per_head is None else self.outputs // per_head[0]
        # tensor-core tiles are 8 weight rows, so per-head rows must come in whole tiles
        by_rows = rows >= GEMV_TENSOR_CORE_ROWS and self.splits(head_rows, TILE)
        self.tensor_cores = by_rows if schedule.tensor_cores is None else schedule.tensor_cores
        if self.argmax and self.tensor_cores:
            raise ValueError(f"{self.name} argmax epilogue: only on the CUDA cores")
        if self.norm and self.tensor_cores:
            raise ValueError(f"{self.name} norm prologue: only on the CUDA cores (the tensor cores load the "
                             "activation as packed fragments)")
        self.preload = bool(schedule.preload)
        if self.preload and self.tensor_cores:
            raise ValueError(f"{self.name} preload: on the CUDA cores only (tensor_cores false)")
        if self.tensor_cores:
            self._plan_tiles(schedule, head_rows)
        else:
            self._plan_vectors(schedule, head_rows)
        if not self.splits(head_rows, self.rows_per_cta):
            raise ValueError(f"{self.name} per-head read: a CTA's {self.rows_per_cta} rows must not straddle "
                             f"heads of {head_rows} rows")
        problems = self.quantize_problems()
        if problems:
            raise ValueError(f"{self.name} quantize epilogue: " + "; ".join(problems))

    def splits(self, head_rows: int, rows_per_cta: int) -> bool:
        """Whether CTAs of `rows_per_cta` rows keep within heads (always, without a per-head read)."""
        return self.per_head is None or head_rows % rows_per_cta == 0

    def _plan_vectors(self, schedule: RowSchedule, head_rows: int) -> None:
        """CUDA cores: a thread's vectors are K positions thread + i * threads of each row."""
        slots = MAX_VALUES // (self.sources * next_power_of_two(self.rows))
        if slots < 1:
            raise ValueError(f"{self.name} on CUDA cores: {self.rows} rows x {self.sources} weights exceed "
                             f"the {MAX_VALUES} sums a warp reduces; use the tensor-core path")
        # preloading, no more warps than a row's vectors need (each thread reads its vectors of every row)
        warps = min(GEMV_WARPS, -(-(self.width // VECTOR) // 32)) if self.preload else GEMV_WARPS
        self.warps = schedule.warps or warps
        self.steps = -(-(self.width // VECTOR) // (32 * self.warps))
        # two rows a CTA measured best at one row (bench/RESULTS.md), where registers allow
        fits = self.sources * 2 * self.steps <= MAX_VECTORS_IN_FLIGHT
        pair = slots >= 2 and fits and self.splits(head_rows, 2)
        # a norm prologue reads the whole activation rows in every CTA: more rows a CTA, fewer
        # reads (NORM_ROWS_PER_CTA where the sums and registers allow; measured)
        wide = (self.norm and slots >= NORM_ROWS_PER_CTA
                and self.sources * NORM_ROWS_PER_CTA * self.steps <= 2 * MAX_VECTORS_IN_FLIGHT)
        default = NORM_ROWS_PER_CTA if wide else 2 if pair else 1
        if self.preload:  # one wave of CTAs (where the sums allow): every CTA resident, its rows streaming
            default = min(-(-self.outputs // SM_COUNT), slots)
        self.rows_per_cta = schedule.rows_per_cta or default
        if self.rows_per_cta > slots:
            raise ValueError(f"{self.name} schedule: {self.rows_per_cta} rows a CTA x {self.rows} activation "
                             f"rows x {self.sources} weights exceeds the {MAX_VALUES} sums a warp reduces")
        self.values = next_power_of_two(self.sources * self.rows_per_cta * self.rows)
        if self.preload:
            room = SHARED_LIMIT - self.reduction_bytes() - PRELOAD_BARRIER_BYTES - 64
            if self.preload_bytes() > room:
                raise ValueError(f"{self.name} preload: {self.sources} x {self.rows_per_cta} rows of {self.width} "
                                 f"bf16 values take {self.preload_bytes()} bytes of shared memory; a CTA has "
                                 f"{room} beside its sums: fewer rows a CTA")
        elif self.sources * self.rows_per_cta * self.steps > 2 * MAX_VECTORS_IN_FLIGHT:
            raise ValueError(f"{self.name}: width {self.width} over {self.warps} warps needs {self.steps} "
                             f"vectors a row per thread; x {self.rows_per_cta} rows that exceeds the "
                             "registers: use more warps")

    def _plan_tiles(self, schedule: RowSchedule, head_rows: int) -> None:
        """Tensor cores: warp w takes the K chunks w, w + warps, ... of the CTA's tiles."""
        self.chunks = -(-self.width // CHUNK)
        self.warps = schedule.warps or min(32, max(4, -(-self.chunks // 8)))
        # Two tiles a CTA halve the activation loads a weight byte costs: measured worth it (one
        # weight; a pair already loads two rows a tile) wherever the grid gives every SM two CTAs,
        # and above 8 rows or from K = 4096 wherever it still covers every SM (bench/RESULTS.md).
        ctas = self.outputs // (2 * TILE)
        busy = self.rows > 8 or self.width >= 4096
        wide = (self.sources == 1 and self.splits(head_rows, 2 * TILE)
                and (ctas >= 2 * SM_COUNT or (busy and ctas >= SM_COUNT)))
        self.rows_per_cta = schedule.rows_per_cta or (2 * TILE if wide else TILE)
        if self.rows_per_cta % TILE or self.rows_per_cta > 4 * TILE:
            raise ValueError(f"{self.name} on tensor cores: {self.rows_per_cta} rows a CTA must be 8, 16, 24 "
                             "or 32 (whole MMA tiles of 8 weight rows)")
        self.tiles = self.rows_per_cta // TILE
        self.row_tiles = -(-self.rows // 16)  # activation rows: 16 a tile, the A operand's M
        self.per_warp = -(-self.chunks // self.warps)
        # chunks whose weight loads (and activation fragments, 2 an activation tile) are issued
        # together; the first group's weights before the PDL wait
        self.group = max(1, min(self.per_warp, 8 // (self.sources * self.tiles), 8 // self.row_tiles))

    def x_strides(self) -> tuple[int, int]:
        """An activation row's pitch: its width, or wider where x is one part of a wider row (a
        product in parts' output read in place)."""
        return (self.x_pitch or self.x_width, 1)

    @property
    def x_width(self) -> int:
        """Values in one activation row (the spec's: the heads' whole units where it reads a part)."""
        return self.spec.x_width

    def shared_bytes(self) -> int:
        last = 16 if self.quantize else 0  # the quantize epilogue's last-CTA flag
        if self.tensor_cores:
            return 4 * self.warps * self.sources * 16 * self.row_tiles * self.rows_per_cta + last
        preloaded = self.preload_bytes() + PRELOAD_BARRIER_BYTES if self.preload else 0
        return preloaded + self.reduction_bytes() + last

    def reduction_bytes(self) -> int:
        """The CUDA cores' partial sums a warp (and the norm prologue's sums of squares, a row and
        warp, 16-byte aligned before them)."""
        squares = -(-4 * self.rows * self.warps // 16) * 16 if self.norm else 0
        return squares + 4 * self.warps * self.values

    def preload_bytes(self) -> int:
        """The shared memory `preload` copies a CTA's weight rows into: [sources * rows_per_cta, width] bf16."""
        return self.sources * self.rows_per_cta * self.width * 2

    # --- the quantize epilogue -----------------------------------------------------------------

    def quantize_problems(self) -> list[str]:
        """Why this launch cannot quantize its output in its epilogue (none without `quantize`)."""
        if not self.quantize:
            return []
        found = quantized_problems(self.outputs, self.quantize)
        R = self.rows_per_cta
        if BLOCK % R and R % BLOCK:
            found.append(f"a CTA's {R} output rows neither divide a {BLOCK}-value block nor are whole blocks")
        if self.argmax or self.norm or self.per_head is not None or len(self.spec.parts) > 1:
            found.append("no argmax, norm prologue, per-head read or parts beside it")
        return found

    def out_params(self, name: str) -> list[TensorParam]:
        """The output `name` (bf16, or int8 rows of the quantized form with the epilogue's scratch:
        staged fp32 values and a ticket a block)."""
        if not self.quantize:
            return [TensorParam(name, (self.rows, self.outputs), "bfloat16", written=True)]
        return [TensorParam(name, (self.rows, quantized_pitch(self.outputs, self.quantize)), "int8", written=True),
                TensorParam("staged", (self.rows, self.outputs), "float32", written=True),
                TensorParam("block_tickets", (max(2, self.outputs // BLOCK),), "int32", written=True)]

    @cute.jit
    def quantize_epilogue(self, staged, tickets, out, first: Int32, thread: Int32):
        """The blocks this CTA completes, quantized for every row (the quantize epilogue: CTAs of
        fewer outputs than a block stage theirs and draw the block's ticket, `atom.inc` modulo the
        block's CTAs; the CTA drawing the last quantizes it, a warp a row; a CTA of whole blocks
        quantizes its own)."""
        R: cutlass.Constexpr = self.rows_per_cta
        warps: cutlass.Constexpr = self.warps
        warp, lane = thread // 32, thread % 32
        cute.arch.sync_threads()  # every thread's staged values are written
        if cutlass.const_expr(R % BLOCK == 0):  # whole blocks: this CTA's own
            jobs: cutlass.Constexpr = (R // BLOCK) * self.rows
            for start in cutlass.range_constexpr(0, jobs, warps):
                job = start + warp
                unit = first // BLOCK + job % (R // BLOCK)
                if (job < jobs) & (unit * BLOCK < self.outputs):
                    self.quantize_block(staged, out, job // (R // BLOCK), unit, lane)
        else:
            sharing: cutlass.Constexpr = BLOCK // R  # CTAs a block
            last = cutlass.memory.SmemAllocator().allocate_tensor(Int32, cute.make_layout(2), 16)
            if thread == 0:
                # modulo the block's CTAs (wrapping past sharing - 1): from a poisoned start or the
                # count the last step left, the block's last CTA draws sharing - 2
                drawn = ticket(at(tickets, first // BLOCK), Uint32(sharing - 1))
                last[0] = Int32(cutlass.select_(drawn == Uint32((sharing - 2) % (1 << 32)), 1, 0))
            cute.arch.sync_threads()
            if last[0] == 1:
                cute.arch.fence_acq_rel_gpu()  # every sharing CTA's staged values are seen
                for start in cutlass.range_constexpr(0, self.rows, warps):
                    b = start + warp
                    if b < self.rows:
                        self.quantize_block(staged, out, b, first // BLOCK, lane)

    @cute.jit
    def quantize_block(self, staged, out, b, unit, lane):
        """Block `unit` of row `b`: lane l quantizes its value l (read through L2: other CTAs
        staged it); lane 0 stores the scale."""
        column = unit * BLOCK + lane
        value = bits_float(load_word_l2(Uint64(at(staged, b, column).toint())))
        store_warp_quantized(out, b, column, self.outputs, self.quantize, value)

    def norm_params(self) -> tuple[list[TensorParam], list[TensorParam]]:
        """The norm prologue's tensors: those read before the weights (the residual, the norm
        weight `norm_w`) and the sum written after the outputs (`h`); none without a norm."""
        if not self.norm:
            return [], []
        row = (self.rows, self.width)
        before = [TensorParam("residual", row, "bfloat16")] if self.residual else []
        after = [TensorParam("h", row, "bfloat16", written=True)] if self.residual else []
        return before + [TensorParam("norm_w", (self.width,), "bfloat16")], after

    def launch(self) -> LaunchShape:
        blocks = -(-self.outputs // self.rows_per_cta)
        return LaunchShape(grid=(blocks, 1, 1), block=(32 * self.warps, 1, 1),
                           shared_bytes=self.shared_bytes())

    @cute.jit
    def activation_base(self, first: Int32):
        """The activation column this CTA's rows start at (their head's part, if per head)."""
        base = Int32(0)
        if cutlass.const_expr(self.per_head is not None):
            heads, unit, offset = self.per_head
            head_rows: cutlass.Constexpr = self.outputs // heads
            base = (first // head_rows) * unit + offset
        return base

    @cute.jit
    def products(self, x, weights, first: Int32, thread: Int32, norm=None):
        """Every sum of the CTA's rows, in shared memory (read them with `total` after the
        barrier this ends with). Waits for the predecessor (PDL) after issuing weight loads.
        ``norm``: the prologue's (residual, norm weight, sum) tensors, where it has one."""
        lane, warp = thread % 32, thread // 32
        if cutlass.const_expr(self.tensor_cores):
            return self.products_mma(x, weights, first, lane, warp)
        if cutlass.const_expr(self.preload):
            held = self.preload_rows(weights, first, thread)
        else:
            held = self.load_vectors(weights, first, thread)
        scales = None
        if cutlass.const_expr(self.norm):
            scales = self.load_norm_weight(norm[1], thread)  # a weight: ready at launch
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents may prefetch their weights now
        if cutlass.const_expr(self.preload):
            wait(held[1], scope="cta")  # the rows' bytes have landed
        squares = cute.make_rmem_tensor(self.rows, Float32)  # the norm's sums of h^2, a row
        squares.fill(0.0)
        normed = (x, norm[0], scales, norm[2], first == 0, squares) if cutlass.const_expr(self.norm) else None
        sums = self.accumulate(x, held, first, thread, normed)
        smem = cutlass.memory.SmemAllocator()
        # the norm's squares sit after the partial sums: index values + b, reduced with them
        extra: cutlass.Constexpr = self.rows if self.norm else 0
        partial = smem.allocate_tensor(Float32, cute.make_layout((self.values + extra, self.warps)), 16)
        warp_reduce_scatter(sums, self.values, lane)
        spread: cutlass.Constexpr = 32 // self.values  # lanes that end up holding the same sum
        if lane % spread == 0:
            partial[lane // spread, warp] = sums[0]
        if cutlass.const_expr(self.norm):
            for b in cutlass.range_constexpr(self.rows):
                total = warp_reduce(squares[b], operator.add)
                if lane == 0:
                    partial[self.values + b, warp] = total
        cute.arch.sync_threads()
        return partial

    @cute.jit
    def total(self, partial, source: cutlass.Constexpr, r: Int32, b: Int32):
        """The CTA's sum for weight row first + r of `source` and activation row b."""
        value = Float32(0.0)
        for v in cutlass.range_constexpr(self.warps):
            if cutlass.const_expr(self.tensor_cores):
                value += partial[v, source, b, r]
            else:
                value += partial[(source * self.rows_per_cta + r) * self.rows + b, v]
        if cutlass.const_expr(self.norm):  # the norm's one scale of row b (the module's docstring)
            squares = Float32(0.0)
            for v in cutlass.range_constexpr(self.warps):
                squares += partial[self.values + b, v]
            value = value * cute.math.rsqrt(squares * Float32(1.0 / self.width) + Float32(self.eps))
        return value

    # --- the norm prologue (CUDA cores) -----------------------------------------------------

    @cute.jit
    def load_norm_weight(self, norm_w, thread: Int32):
        """The norm weight's vectors at this thread's K positions: [8, steps] (zero past the row)."""
        return norm_weight_vectors(norm_w, self.width, 32 * self.warps, self.steps, thread)

    # --- CUDA cores -------------------------------------------------------------------------

    @cute.jit
    def preload_rows(self, weights, first: Int32, thread: Int32):
        """Copy the CTA's weight rows into shared memory (`preload`): thread 0 arms one mbarrier for
        their bytes and issues one bulk copy a source of the rows the CTA has (its last rows past
        the outputs are not copied); every thread then sees the barrier armed. Returns (rows
        [sources * rows_per_cta, width], barrier, the rows copied)."""
        R: cutlass.Constexpr = self.rows_per_cta
        smem = cutlass.memory.SmemAllocator()
        rows = alloc(smem, BFloat16, (self.sources * R, self.width))
        barrier = smem.allocate_array(Uint64, 1, byte_alignment=PRELOAD_BARRIER_BYTES)
        valid = cutlass.min(Int32(R), Int32(self.outputs) - first)
        if thread == 0:
            cute.arch.mbarrier_init(barrier, 1)
            cute.arch.mbarrier_init_fence()
            size = valid * Int32(2 * self.width)
            cute.arch.mbarrier_arrive_and_expect_tx(barrier, size * Int32(self.sources))
            for src in cutlass.range_constexpr(self.sources):
                copy_g2s(at(rows, src * R, 0), at(weights[src], first, 0), size, barrier)
        cute.arch.sync_threads()
        return rows, barrier, valid

    @cute.jit
    def load_vectors(self, weights, first: Int32, thread: Int32):
        """Issue every weight vector this thread needs: [8, source * rows_per_cta * steps]."""
        R, S, threads = self.rows_per_cta, self.steps, 32 * self.warps
        vectors: cutlass.Constexpr = self.width // VECTOR
        held = cute.make_rmem_tensor((VECTOR, self.sources * R * S), BFloat16)
        held.fill(0)
        for src in cutlass.range_constexpr(self.sources):
            tiles = cute.zipped_divide(weights[src], (1, VECTOR))
            for r in cutlass.range_constexpr(R):
                # rows past the end (the last CTA of an uneven split) re-read the last row
                row = cutlass.min(first + r, self.outputs - 1)
                for s in cutlass.range_constexpr(S):
                    vector = thread + s * threads
                    slot = held[None, (src * R + r) * S + s]
                    if cutlass.const_expr((s + 1) * threads <= vectors):
                        cute.autovec_copy(tiles[None, (row, vector)], slot)
                    else:  # the last step may run past the row
                        if vector < vectors:  # noqa: SIM102
                            cute.autovec_copy(tiles[None, (row, vector)], slot)
        return held

    @cute.jit
    def accumulate(self, x, held, first: Int32, thread: Int32, normed=None):
        """Dot every held weight vector with the activation rows: [values] fp32 partial sums, index
        (source * rows_per_cta + r) * rows + b. With the norm prologue (`normed`: the norm's input and
        residual, the norm weight's vectors, h's output, whether this CTA writes it, and the squares a
        row, added to) the rows are h * w."""
        S, threads = self.steps, 32 * self.warps
        vectors: cutlass.Constexpr = self.width // VECTOR
        base = self.activation_base(first) // VECTOR
        sums = cute.make_rmem_tensor(self.values, Float32)
        sums.fill(0.0)
        tiles = x if cutlass.const_expr(self.combine_splits) else cute.zipped_divide(x, (1, VECTOR))
        for s in cutlass.range_constexpr(S):
            vector = thread + s * threads
            if cutlass.const_expr((s + 1) * threads <= vectors):
                self.accumulate_step(tiles, held, sums, base + vector, s, normed, vector)
            else:
                if vector < vectors:  # noqa: SIM102
                    self.accumulate_step(tiles, held, sums, base + vector, s, normed, vector)
        return sums

    @cute.jit
    def accumulate_step(self, tiles, held, sums, vector: Int32, s: cutlass.Constexpr, normed=None, column=None):
        """Step s of the dots: activation vector `vector` of every row by every held row's weight
        vector of the step (`preload`: read from the shared rows at `column`, vector less the per-head
        base, one at a time, after the step's activations)."""
        R, S, B = self.rows_per_cta, self.steps, self.rows
        weights = [] if self.preload else [held[None, i * S + s].load().to(Float32) for i in range(self.sources * R)]
        activations = []
        for b in cutlass.range_constexpr(B):
            if cutlass.const_expr(self.norm):
                x, residual, scales, h_out, writes_sum, squares = normed
                h = norm_input(x, residual if cutlass.const_expr(self.residual) else None, h_out, b, vector,
                               writes_sum)
                squares[b] = squares[b] + (h * h).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
                values = h * scales[None, s].load().to(Float32)
            elif cutlass.const_expr(self.combine_splits):  # (partial, lse): the head's slice merged here
                per_head: cutlass.Constexpr = self.width // VECTOR
                merged = merged_slice(tiles[0], tiles[1], b, vector // per_head, vector % per_head,
                                      self.combine_splits, self.combine_partials)
                values = merged.load().to(Float32)
            else:
                activation = cute.make_rmem_tensor(VECTOR, BFloat16)
                cute.autovec_copy(tiles[None, (b, vector)], activation)
                values = activation.load().to(Float32)
            if cutlass.const_expr(self.preload):
                activations.append(values)
            else:
                for i in cutlass.range_constexpr(self.sources * R):
                    sums[i * B + b] += (weights[i] * values).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
        if cutlass.const_expr(self.preload):
            for i in cutlass.range_constexpr(self.sources * R):
                weight = self.preloaded_vector(held, i, column).load().to(Float32)
                for b in cutlass.range_constexpr(B):
                    sums[i * B + b] += (weight * activations[b]).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)

    @cute.jit
    def preloaded_vector(self, held, i: cutlass.Constexpr, column: Int32):
        """Preloaded row i's weight vector at `column`, read from the shared rows (past the rows
        copied, the last copied row's)."""
        rows, _, valid = held
        R: cutlass.Constexpr = self.rows_per_cta
        row = (i // R) * R + cutlass.min(Int32(i % R), valid - 1)
        vector = cute.make_rmem_tensor(VECTOR, BFloat16)
        cute.autovec_copy(cute.zipped_divide(rows, (1, VECTOR))[None, (row, column)], vector)
        return vector

    # --- tensor cores -----------------------------------------------------------------------

    @cute.jit
    def products_mma(self, x, weights, first: Int32, lane: Int32, warp: Int32):
        g, t = lane // 4, lane % 4
        count = self.sources * self.tiles  # weight vectors a lane loads per chunk
        acc = cute.make_rmem_tensor((4, count * self.row_tiles), Float32)
        acc.fill(0.0)
        groups: cutlass.Constexpr = -(-self.per_warp // self.group)
        held = self.load_tiles(weights, first, warp, g, t, 0)
        cute.arch.griddepcontrol_wait()
        release_dependents(self)  # dependents may prefetch their weights now
        base = self.activation_base(first)
        for j in cutlass.range_constexpr(groups):
            # this group's activation fragments first (their loads overlap), then the next group's
            # weights, which fly during this group's MMAs
            rows = self.load_rows(x, base, warp, g, t, j)
            following = held
            if cutlass.const_expr(j + 1 < groups):
                following = self.load_tiles(weights, first, warp, g, t, j + 1)
            for i in cutlass.range_constexpr(min(self.group, self.per_warp - j * self.group)):
                chunk = warp + (j * self.group + i) * self.warps
                if chunk < self.chunks:  # warp-uniform: mma.sync needs the whole warp
                    self.mma_chunk(held, rows, acc, i)
            held = following
        smem = cutlass.memory.SmemAllocator()
        partial = alloc(smem, Float32, (self.warps, self.sources, 16 * self.row_tiles, self.rows_per_cta))
        for src in cutlass.range_constexpr(self.sources):
            for tile in cutlass.range_constexpr(self.tiles):
                for m in cutlass.range_constexpr(self.row_tiles):
                    d = acc[None, (src * self.tiles + tile) * self.row_tiles + m]
                    row, column = 16 * m + g, TILE * tile + 2 * t  # D: activation rows x weight rows
                    partial[warp, src, row, column] = d[0]
                    partial[warp, src, row, column + 1] = d[1]
                    partial[warp, src, row + 8, column] = d[2]
                    partial[warp, src, row + 8, column + 1] = d[3]
        cute.arch.sync_threads()
        return partial

    @cute.jit
    def load_tiles(self, weights, first: Int32, warp: Int32, g: Int32, t: Int32, j: cutlass.Constexpr):
        """Group j's weight vectors of this lane: [4 words, chunk * count + source * tiles + tile]."""
        count: cutlass.Constexpr = self.sources * self.tiles
        held = cute.make_rmem_tensor((4, self.group * count), Uint32)
        held.fill(0)
        for i in cutlass.range_constexpr(min(self.group, self.per_warp - j * self.group)):
            chunk = warp + (j * self.group + i) * self.warps
            column = chunk * CHUNK + 8 * t
            if column < self.width:  # past K (the last chunk, or a warp with one chunk fewer)
                for src in cutlass.range_constexpr(self.sources):
                    for tile in cutlass.range_constexpr(self.tiles):
                        row = cutlass.min(first + TILE * tile + g, self.outputs - 1)
                        words = load_weight_bf16x8(at(weights[src], row, column))
                        for e in cutlass.range_constexpr(4):
                            held[e, i * count + src * self.tiles + tile] = words[e]
        return held

    @cute.jit
    def load_rows(self, x, base: Int32, warp: Int32, g: Int32, t: Int32, j: cutlass.Constexpr):
        """Group j's activation fragments of this lane: [4 words, chunk * 2 * row_tiles + 2 * tile
        + half], rows 16 tile + 8 half + g; zero past K and in tile halves past the rows."""
        halves: cutlass.Constexpr = 2 * self.row_tiles
        rows = cute.make_rmem_tensor((4, self.group * halves), Uint32)
        rows.fill(0)
        for i in cutlass.range_constexpr(min(self.group, self.per_warp - j * self.group)):
            column = (warp + (j * self.group + i) * self.warps) * CHUNK + 8 * t
            if column < self.width:
                for half in cutlass.range_constexpr(halves):
                    if cutlass.const_expr(8 * half < self.rows):
                        # lanes past the last row re-read it: their D rows are never read
                        row = cutlass.min(8 * half + g, self.rows - 1)
                        words = load_activation_bf16x8(at(x, row, base + column))
                        for e in cutlass.range_constexpr(4):
                            rows[e, i * halves + half] = words[e]
        return rows

    @cute.jit
    def mma_chunk(self, held, rows, acc, i: cutlass.Constexpr):
        """Chunk i of the group: 2 MMAs (k halves) per weight tile and activation tile."""
        count: cutlass.Constexpr = self.sources * self.tiles
        halves: cutlass.Constexpr = 2 * self.row_tiles
        for h in cutlass.range_constexpr(2):
            for m in cutlass.range_constexpr(self.row_tiles):
                low, high = i * halves + 2 * m, i * halves + 2 * m + 1  # rows g and g + 8 of the tile
                a = (rows[2 * h, low], rows[2 * h, high], rows[2 * h + 1, low], rows[2 * h + 1, high])
                for k in cutlass.range_constexpr(count):
                    b = (held[2 * h, i * count + k], held[2 * h + 1, i * count + k])
                    mma_into(acc[None, k * self.row_tiles + m], a, b)


class Gemv(RowProducts):
    """y[b, n] = sum_k x[b, k] w[n, k] over the concatenated parts' rows n.

    ``parts``: each product's output count (their weight rows back to back in ``w``, their outputs
    side by side in ``y``). ``per_head`` = (heads, unit, offset): head h's rows (outputs / heads of
    them) read the activation values [h*unit + offset, h*unit + offset + width) of an x row that
    is heads*unit wide (only with one part). ``schedule``, ``norm``, ``eps``, ``residual``: see
    `RowProducts`; with a norm the params are x, (residual), norm_w, w, y, (h). ``argmax``: each
    row's argmax in the epilogue (`argmax_epilogue`), params best, tickets and chosen after them.
    ``rider_width`` (fold-norm-into-latent): a norm of that width rides in the launch, a CTA more a
    row (`ride`). ``combine_splits`` (LATENT_COMBINE_IN_GEMV): x is a split latent attention's chunks,
    params partial [splits, rows, heads, width] (``combine_partials``) and lse [splits, rows, heads] in
    x's place, each thread merging its head's slices as attention_combine would (`merged_slice`, the
    same bf16 values) before it dots them; per head (heads, width, 0), on the CUDA cores.
    ``row_blocks`` (GEMV_ROW_BLOCKS_FROM): x and y hold that many blocks of ``rows`` rows, one a grid x index
    (the fastest, so the blocks of an output tile run side by side and read its weight rows from L2 but once
    from memory), the output tiles grid y: one launch where a product of more rows than a gemv's would take
    a launch a block (a plain product; no prologue or epilogue)."""

    name = "gemv"

    def __init__(self, rows: int, width: int, parts, *, per_head=None, schedule=None, x_pitch=None,
                 norm=False, eps=1e-6, residual=False, argmax=False, quantize=0, rider_width=0, rider_eps=1e-6,
                 rider_x_pitch=None, combine_splits=0, combine_partials="float32", row_blocks=1):
        super().__init__(rows, width, parts, per_head=per_head, schedule=schedule, x_pitch=x_pitch,
                         norm=norm, eps=eps, residual=residual, argmax=argmax, quantize=quantize)
        self.row_blocks = int(row_blocks)
        if self.row_blocks < 1:
            raise ValueError(f"gemv row_blocks: a count of blocks of rows, at least 1; got {row_blocks}")
        if self.row_blocks > 1:
            others = [name for name, on in (("a norm prologue", norm), ("an argmax epilogue", argmax),
                                            ("a quantize epilogue", quantize), ("a rider", rider_width),
                                            ("a combine prologue", combine_splits), ("preload", self.preload)) if on]
            if others:
                raise ValueError(f"gemv row_blocks: blocks of rows in one launch are a plain product's; this one has "
                                 f"{', '.join(others)}")
        self.parts = tuple(int(p) for p in parts)
        RiderSpec(rows, rider_width, rider_eps, rider_x_pitch).check()
        self.rider_width, self.rider_eps, self.rider_x_pitch = int(rider_width), float(rider_eps), rider_x_pitch
        self.combine_splits, self.combine_partials = int(combine_splits), combine_partials
        if self.combine_splits:
            others = self.norm or self.argmax or bool(self.quantize)
            problems = CombinePrologueSpec(self.combine_splits, combine_partials, width, per_head, x_pitch, others,
                                           self.tensor_cores).problems()
            if problems:
                raise ValueError("gemv combine prologue: " + "; ".join(problems))

    def params(self) -> list[TensorParam]:
        before, after = self.norm_params()
        chosen = [TensorParam("best", (ARGMAX_GROUPS + 1, ARGMAX_SLOT), "int32", written=True),
                  TensorParam("tickets", (ARGMAX_GROUPS + 1, ARGMAX_SLOT), "int32", written=True),
                  TensorParam("chosen", (self.rows,), "int32", written=True)] if self.argmax else []
        rider = []
        if self.rider_width:  # the norm riding in the launch (fold-norm-into-latent): its input, weight, result
            row = (self.rows, self.rider_width)
            rider = [TensorParam("rider_x", row, "bfloat16", (self.rider_x_pitch or self.rider_width, 1)),
                     TensorParam("rider_w", (self.rider_width,), "bfloat16"),
                     TensorParam("rider_y", row, "bfloat16", written=True)]
        x = [TensorParam("x", (self.rows * self.row_blocks, self.x_width), "bfloat16", self.x_strides())]
        if self.combine_splits:  # the split attention's chunks in x's place
            heads = self.per_head[0]
            x = [TensorParam("partial", (self.combine_splits, self.rows, heads, self.width), self.combine_partials),
                 TensorParam("lse", (self.combine_splits, self.rows, heads), "float32")]
        y = self.out_params("y")
        if self.row_blocks > 1:
            y = [TensorParam("y", (self.rows * self.row_blocks, self.outputs), "bfloat16", written=True)]
        return [*x, *before, TensorParam("w", (self.outputs, self.width), "bfloat16"), *y, *after, *chosen, *rider]

    def launch(self) -> LaunchShape:
        shape = super().launch()
        if self.row_blocks > 1:  # the blocks of rows fastest, the output tiles in y
            return LaunchShape(grid=(self.row_blocks, shape.grid[0], 1), block=shape.block,
                               shared_bytes=shape.shared_bytes)
        if not self.rider_width:
            return shape
        blocks, _, _ = shape.grid  # a CTA more a row: the rider's
        return LaunchShape(grid=(blocks + self.rows, 1, 1), block=shape.block, shared_bytes=shape.shared_bytes)

    def shared_bytes(self) -> int:
        # the argmax epilogue's keys (one 8-byte word an activation row) and its last-CTA flag, each
        # 16-byte aligned after the partial sums
        return super().shared_bytes() + (-(-8 * max(self.rows, 2) // 16) * 16 + 16 if self.argmax else 0)

    @cute.jit
    def __call__(self, *, x: cute.Tensor = None, residual: cute.Tensor = None, norm_w: cute.Tensor = None,
                 w: cute.Tensor, y: cute.Tensor, h: cute.Tensor = None, best: cute.Tensor = None,
                 tickets: cute.Tensor = None, chosen: cute.Tensor = None, staged: cute.Tensor = None,
                 block_tickets: cute.Tensor = None, rider_x: cute.Tensor = None, rider_w: cute.Tensor = None,
                 rider_y: cute.Tensor = None, partial: cute.Tensor = None, lse: cute.Tensor = None):
        if cutlass.const_expr(self.combine_splits):  # the chunks come in x's and the (unused) residual's places
            x, residual = partial, lse
        launch(self, x, residual, norm_w, w, y, h, best, tickets, chosen, staged, block_tickets, rider_x, rider_w,
               rider_y)

    @cute.kernel
    def kernel(self, x: cute.Tensor, residual: cute.Tensor, norm_w: cute.Tensor, w: cute.Tensor, y: cute.Tensor,
               h: cute.Tensor, best: cute.Tensor, tickets: cute.Tensor, chosen: cute.Tensor, staged: cute.Tensor,
               block_tickets: cute.Tensor, rider_x, rider_w, rider_y):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, tile, _ = cute.arch.block_idx()
        if cutlass.const_expr(self.row_blocks > 1):  # block: the rows' block; tile: the output tile
            pitch: cutlass.Constexpr = self.x_strides()[0]
            x_block = cute.make_tensor(x.iterator + block * (self.rows * pitch),
                                       cute.make_layout((self.rows, self.x_width), stride=(pitch, 1)))
            y_block = cute.make_tensor(y.iterator + block * (self.rows * self.outputs),
                                       cute.make_layout((self.rows, self.outputs), stride=(self.outputs, 1)))
            self.body(x_block, residual, norm_w, w, y_block, h, best, tickets, chosen, staged, block_tickets, tile,
                      thread)
        elif cutlass.const_expr(self.rider_width):
            blocks: cutlass.Constexpr = -(-self.outputs // self.rows_per_cta)
            if block < blocks:
                self.body(x, residual, norm_w, w, y, h, best, tickets, chosen, staged, block_tickets, block, thread)
            else:
                self.ride(rider_x, rider_w, rider_y, block - blocks, thread)
        else:
            self.body(x, residual, norm_w, w, y, h, best, tickets, chosen, staged, block_tickets, block, thread)

    @cute.jit
    def ride(self, rider_x, rider_w, rider_y, row: Int32, thread: Int32):
        """A rider CTA's: after the PDL wait its first warp norms row `row` of rider_x into rider_y (bf16, as
        rmsnorm writes it; `warp_normed_row`, h in registers)."""
        cute.arch.griddepcontrol_wait()  # the norm's input is a predecessor's output
        release_dependents(self)
        if thread < WARP:
            warp_normed_row(rider_x, None, rider_w, None, rider_y, row, row, self.rider_width, self.rider_eps, thread)

    @cute.jit
    def body(self, x, residual, norm_w, w, y, h, best, tickets, chosen, staged, block_tickets, block: Int32,
             thread: Int32):
        """A product CTA's: its rows' sums, stored (and the epilogues')."""
        first = block * self.rows_per_cta
        if cutlass.const_expr(self.combine_splits):
            partial = self.products((x, residual), [w], first, thread)  # (partial, lse)
        else:
            partial = self.products(x, [w], first, thread, (residual, norm_w, h))
        keys = None
        if cutlass.const_expr(self.argmax):
            keys = self.argmax_keys(thread)
        count: cutlass.Constexpr = self.rows_per_cta * self.rows
        for start in cutlass.range_constexpr(0, count, 32 * self.warps):
            index = start + thread  # weight row fastest: neighbouring threads store neighbours
            r, b = index % self.rows_per_cta, index // self.rows_per_cta
            if (index < count) & (first + r < self.outputs):
                if cutlass.const_expr(self.quantize):
                    staged[b, first + r] = self.total(partial, 0, r, b)
                else:
                    value = BFloat16(self.total(partial, 0, r, b))
                    y[b, first + r] = value
                    if cutlass.const_expr(self.argmax):  # the value as stored: the argmax kernel's candidate
                        min_u64(keys.iterator + b, argmax_key(Float32(value), first + r))
        if cutlass.const_expr(self.argmax):
            self.argmax_epilogue(keys, best, tickets, chosen, block, thread)
        if cutlass.const_expr(self.quantize):
            self.quantize_epilogue(staged, block_tickets, y, first, thread)

    # --- the argmax epilogue (CUDA cores) ---------------------------------------------------

    @cute.jit
    def argmax_keys(self, thread: Int32):
        """The CTA's best key a row (`primitives.argmax_key`), in shared memory, set to the
        identity (all ones) before any thread offers its outputs."""
        # at least two keys: CuTe indexes no layout of one element by a coordinate
        keys = cutlass.memory.SmemAllocator().allocate_tensor(Uint64, cute.make_layout(max(self.rows, 2)), 16)
        for b in cutlass.range_constexpr(self.rows):
            if thread == b:
                keys[b] = Uint64(0xFFFFFFFFFFFFFFFF)
        cute.arch.sync_threads()
        return keys

    @cute.jit
    def argmax_epilogue(self, keys, best, tickets, chosen, block: Int32, thread: Int32):
        """Each CTA's best a row into the grid's in two levels (facts.ARGMAX_GROUPS): a 64-bit
        atomic minimum into its group's slot of `best` (row 1 + block % groups), then its group's
        ticket; the group's last CTA moves the group's keys into the grid's slot (row 0) and draws
        the grid's ticket; the grid's last writes each row's index to `chosen`. Every slot it read
        is set back to the identity for the next step. A ticket counts modulo its draws (`atom.inc`
        wrapping past members - 1), so from a poisoned start (all ones, as a session leaves an
        activation) or the count the last step left (members - 1), the last draws members - 2."""
        ctas: cutlass.Constexpr = -(-self.outputs // self.rows_per_cta)
        groups: cutlass.Constexpr = argmax_groups(ctas)
        group = block % groups
        cute.arch.sync_threads()
        for b in cutlass.range_constexpr(self.rows):
            if thread == b:
                min_u64(at(best, 1 + group, 2 * b), keys[b])
        last = cutlass.memory.SmemAllocator().allocate_tensor(Int32, cute.make_layout(2), 16)
        members = (ctas - 1 - group) // groups + 1  # the CTAs of this CTA's group
        self.draw_last(at(tickets, 1 + group, 0), members, last, thread)
        if last[0] == 1:  # the group's last CTA: its keys into the grid's
            for b in cutlass.range_constexpr(self.rows):
                if thread == b:
                    min_u64(at(best, 0, 2 * b), self.take_key(at(best, 1 + group, 2 * b)))
            self.draw_last(at(tickets, 0, 0), Int32(groups), last, thread)
            for b in cutlass.range_constexpr(self.rows):
                if (last[0] == 1) & (thread == b):
                    chosen[b] = Int32(Uint32(self.take_key(at(best, 0, 2 * b)) & Uint64(0xFFFFFFFF)))

    @cute.jit
    def draw_last(self, counter, members: Int32, last, thread: Int32):
        """Thread 0 draws a ticket of `counter` (between fences: this CTA's keys before, every
        earlier drawer's after) among `members` CTAs; last[0] = 1 for the CTA that drew the last,
        seen by the whole CTA."""
        cute.arch.sync_threads()
        if thread == 0:
            drawn = ticket(counter, Uint32(members - 1))
            last[0] = Int32(cutlass.select_((members == 1) | (drawn == Uint32(members - 2)), 1, 0))
        cute.arch.sync_threads()

    @cute.jit
    def take_key(self, slot):
        """The 64-bit key at `slot` (read through L2 after a fence), the slot set back to the
        identity (all ones)."""
        key = load_u64_acquire(slot)
        store_global_words(slot, (Uint32(0xFFFFFFFF), Uint32(0xFFFFFFFF)))
        return key
