"""KdaSplit: the KDA fold (conv of q, k, v + the f_b GEMV + the decay gate + the delta rule
+ the gated RMS norm) as one cluster launch. The class's docstring specifies what each stage
computes and each schedule knob does; the shared helpers live in primitives.py."""

from __future__ import annotations

import math
import operator
from functools import partial
from typing import NamedTuple

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32, Int64, Uint32

from lanec.codegen.facts import (
    KDA_GATE_WIDTH,
    KDA_HEAD,
    WARP,
    KdaSchedule,
    KdaSplitSpec,
    quantized_pitch,
    quantized_problems,
)
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import (
    advance,
    alloc,
    arrive,
    at,
    copy_g2s,
    dot,
    float_bits,
    fma,
    load_activation_bf16x4,
    load_activation_bf16x8,
    load_bf16x4,
    load_f32x4,
    load_staged,
    load_weight_bf16x8,
    mma_into,
    prefetch_l2,
    push_float,
    shared_bytes,
    sigmoid,
    sigmoids,
    smem_words,
    softplus,
    store_async_dsmem,
    store_evict_f32x4,
    store_f32x4,
    store_shared,
    tree_sum,
    unpack_bf16,
    wait,
    warp_reduce,
    warp_reduce_interleaved,
    zeros,
)
from lanec.codegen.kernels.quantize import store_warp_quantized

KEY = VALUE = KDA_HEAD  # one thread a key, a head's state [128 values, 128 keys]
THREADS = KDA_HEAD + WARP  # 128 main threads (a key / value channel each) and the gate warp


class KdaTensors(NamedTuple):
    """KdaSplit's tensors by name, in entry order (`params()`): the conv bias only with
    ``has_bias``, the accepted counts only with ``tokens`` > 1, the output gate's product weight
    only with ``gate_rank`` (None otherwise)."""

    x: object
    conv_weight: object
    conv_bias: object
    conv_state: object
    raw_gate: object
    beta: object
    a_log: object
    dt_bias: object
    slots: object
    state: object
    output: object
    output_gate: object
    norm_weight: object
    f_b_weight: object
    accepted: object
    gate_weight: object


class KdaSplit:
    """128 main threads and C value partitions. Conv state [slot, 3 * heads * 128, 2 + tokens]
    and recurrent state [slot, head, value, key] keep their strides; slots <= 0 are
    padding (never written) and active rows own distinct slots. Weights must be ready
    at launch; each run waits for prior cache restoration and slot publication.
    ``schedule`` is a `KdaSchedule` (facts.py): early loads, lanes per state row, minimum CTAs
    per SM (occupancy), CTAs per head (cluster), evict, fast math, and dependents released at
    entry; a mapping of some of its fields sets those over `KdaSchedule.for_shape`'s defaults for
    the heads and batch (all of them: none given). The limits are `KdaSplitSpec`'s. Two CTAs per
    head give each CTA 64 state rows and each gate lane two decays. Early issues every load the
    predecessor does not produce (slot, state and conv rows, conv / F_B / norm weights) before
    the PDL wait, converts operands at first use, and syncs the cluster only before each
    role's first DSMEM send. Safe because those loads read only weights and data a
    graph or non-PDL boundary orders before this launch (states and conv rows of this
    layer's previous call or a fresh prompt's non-PDL fill, the host's slot table),
    never same-step producer output, which is read after the wait; PDL-chained calls
    without such a boundary must not share state slots. Early 2 also bulk-copies
    the CTA's (contiguous) state rows to shared memory and updates four passes at a
    time, which frees the registers that held them across the input phase; early 3
    (two CTAs per head) also stages the gate warp's F_B rows. Lanes per state row set how a
    row's 128 keys spread over a thread group: 32 lanes (one 16-byte chunk a lane, four rows a
    pass) need 72 registers where the default 16 need 87, which lets five CTAs share an SM
    instead of four: the staged batch >= 128 schedule (early 2, lanes 32, occupancy 5) of
    bench/RESULTS.md.
    ``tokens`` q > 1 (speculative verify; ``batch`` counts requests, rows b * q + t)
    runs each request's q tokens in order with vLLM's spec cache semantics: slots
    [B, q] and accepted [B] (the last tensor, read early like the slots); the
    state comes from slot[b, accepted - 1] and token t's state goes to slot[b, t] if
    > 0; conv slot[b, 0] holds [dim, q + 2] with taps at accepted - 1 ..., rewritten to
    [c_accepted, c_accepted + 1, x_0, ..., x_q-1]. Token t's F_B row is MMA column t;
    CTA t % C normalizes token t.
    ``gate_form``: "lower_bound" (decay = exp(lb * sigmoid(exp(A_log) (f + dt_bias)))) or
    "softplus" (Kimi Linear: decay = exp(-exp(A_log) softplus(f + dt_bias))).
    One CTA a head (cluster 1) is a launch without a cluster, where DSMEM and cluster
    barriers are illegal: the CTA stores its decays and outputs itself and its barriers
    count arrivals (32 gate lanes, 128 rows a token) instead of bytes.
    ``lower_bound``, ``scale``, ``eps`` (output norm) and ``l2_eps`` (q, k norms) are
    compile-time constants; ``slots`` is the state pools' slot count, ``x_pitch`` the row
    pitch of x (its q, k, v columns may sit inside a wider row).
    ``gate_rank`` (fold-gate-product): the output gate is the product of its [rows, 128] input (row
    pitch ``gate_pitch``) by ``gate_weight`` [dim, 128], rounded to bf16 as the product's store would.
    With a cluster of at most 32 rows a CTA (4 CTAs a head or more) the gate warp does it, off the
    main threads' path: after the decays it multiplies its partition's rows (A fragments, read into
    registers before the PDL wait at 16 rows a CTA, after the decays otherwise) by the row's input
    (MMA columns: tokens) and sends each token's sigmoids to the token's output CTA with the dots (its
    output barrier counts 512 more bytes). Otherwise (one CTA a head, 64 rows a CTA) each main thread
    of a token's output CTA dots its channel's weight row with the row's input while it waits for
    the cluster's state dots; the head's 32 KB of rows are prefetched into L2 before the PDL wait.
    The lane's knob `fold_gate` decides (bench/RESULTS.md)."""

    name = "kda_split"

    def __init__(self, heads, batch, gate_mode=0, has_bias=False, schedule=None, tokens=1,
                 gate_form="lower_bound", *, slots=None, lower_bound=-5.0, scale=KEY ** -0.5,
                 eps=1e-5, l2_eps=1e-6, x_pitch=None, raw_gate_pitch=None, beta_pitch=None, quantize=0,
                 gate_rank=None, gate_pitch=None):
        if not isinstance(schedule, KdaSchedule):  # knobs by name over the shape's defaults
            schedule = KdaSchedule.for_shape(heads, batch, schedule)
        KdaSplitSpec(heads=heads, batch=batch, tokens=tokens, gate_form=gate_form, gate_mode=gate_mode,
                     schedule=schedule, x_pitch=x_pitch, raw_gate_pitch=raw_gate_pitch, beta_pitch=beta_pitch,
                     slots=slots, gate_rank=gate_rank, gate_pitch=gate_pitch).check()
        problems = quantized_problems(heads * KEY, quantize) if quantize else []
        if problems:
            raise ValueError("kda_split quantize epilogue: " + "; ".join(problems))
        self.quantize = int(quantize)  # words a value of the output's quantized form (0: bf16)
        self.heads, self.batch, self.gate_mode, self.has_bias = heads, batch, gate_mode, has_bias
        self.gate_form, self.tokens = gate_form, tokens
        self.lower_bound, self.scale, self.eps, self.l2_eps = (
            float(lower_bound), float(scale), float(eps), float(l2_eps))
        self.dim = heads * KEY
        self.x_pitch = 3 * self.dim if x_pitch is None else int(x_pitch)
        # f_a's output and the raw beta may be parts of the same product in parts as x (read in place)
        self.raw_gate_pitch = 128 if raw_gate_pitch is None else int(raw_gate_pitch)
        self.beta_pitch = heads if beta_pitch is None else int(beta_pitch)
        self.gate_folded = gate_rank is not None  # the output gate's product done here
        self.gate_pitch = (KDA_GATE_WIDTH if self.gate_folded else self.dim) if gate_pitch is None else int(gate_pitch)
        self.slots = batch * tokens + 1 if slots is None else int(slots)
        self.occupancy = schedule.occupancy
        self.early, self.staged = bool(schedule.early), schedule.early >= 2
        self.gate_staged = schedule.early == 3
        self.fast_math, self.trigger_at_entry = schedule.fast_math, schedule.release_at_entry
        self.cluster = schedule.cluster
        # One CTA a head is a launch without clusters: no DSMEM, the CTA signals itself.
        self.local = self.cluster == 1
        self.scope = "cta" if self.local else "cluster"
        self.lanes_per_row = schedule.lanes
        self.rows, self.groups = VALUE // self.cluster, KEY // self.lanes_per_row
        self.passes = (self.rows + self.groups - 1) // self.groups
        self.wave = min(4, self.passes) if self.staged else self.passes
        self.chunks = 32 // self.lanes_per_row
        # the folded gate in the gate warp (at most two row tiles a CTA), its rows read before the wait at one
        self.gate_in_warp = self.gate_folded and not self.local and self.rows <= 32
        self.gate_preloaded = self.gate_in_warp and self.rows <= 16 and gate_mode != 2
        self.evict = schedule.evict  # staged state traffic marked L2 evict-first

    # --- launch facts (plain Python: __call__ and the plan writer share them) ---------------

    def _allocations(self):
        """Shared memory in allocation order: (name, dtype, shape, alignment)."""
        T = self.tokens
        owned = -(-T // self.cluster)  # tokens a CTA normalizes: one output barrier each
        plan = [(name, Float32, size * T, 16) for name, size in (
            ("q", 128), ("k", 128), ("decay", 128), ("v", self.rows), ("o", 128), ("reductions", 8))]
        plan += [("barrier", cutlass.Uint64, owned, 8), ("gate_barrier", cutlass.Uint64, 1, 8)]
        if self.staged:
            plan += [("staged", Float32, (self.rows, 128), 128), ("state_barrier", cutlass.Uint64, 1, 8)]
        if self.gate_staged:  # [copy, lane] 16-byte slots
            plan += [("gate_rows", Uint32, (self.rows // 2, 32, 4), 128)]
        if self.gate_in_warp:  # each token's output gate, sent by the cluster's gate warps
            plan += [("gate", Float32, 128 * T, 16)]
        return plan

    def shared_bytes(self) -> int:
        sizes = []
        for _, dtype, shape, align in self._allocations():
            count = shape if isinstance(shape, int) else math.prod(shape)
            sizes.append((count * dtype.width // 8, align))
        return shared_bytes(sizes)

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.cluster, self.heads, self.batch), block=(THREADS, 1, 1),
                           cluster=(self.cluster, 1, 1), shared_bytes=self.shared_bytes(), pdl=True)

    def touched(self) -> dict[str, int]:
        """The slots of the step's rows (a token's own slot), of the table's slots."""
        return {"state": self.batch * self.tokens, "conv_state": self.batch * self.tokens}

    def params(self) -> list[TensorParam]:
        T, dim, rows = self.tokens, self.dim, self.batch * self.tokens
        taps = 3 + T - 1
        slots = (self.batch,) if T == 1 else (self.batch, T)
        params = [
            TensorParam("x", (rows, 3 * dim), "bfloat16", (self.x_pitch, 1)),
            TensorParam("conv_weight", (3, 4, dim), "bfloat16"),
        ]
        if self.has_bias:
            params.append(TensorParam("conv_bias", (3 * dim,), "bfloat16"))
        params += [
            TensorParam("conv_state", (self.slots, 3 * dim, taps), "bfloat16", written=True),
            TensorParam("raw_gate", (rows, 128), "bfloat16", (self.raw_gate_pitch, 1)),
            TensorParam("beta", (rows, self.heads), "bfloat16", (self.beta_pitch, 1)),
            TensorParam("a_log", (self.heads,), "float32"),
            TensorParam("dt_bias", (dim,), "float32"),
            TensorParam("slots", slots, "int32"),
            TensorParam("state", (self.slots, self.heads, VALUE, KEY), "float32", written=True),
            TensorParam("output", (rows, quantized_pitch(dim, self.quantize)), "int8", written=True) if self.quantize
            else TensorParam("output", (rows, dim), "bfloat16", written=True),
            TensorParam("output_gate", (rows, KDA_GATE_WIDTH if self.gate_folded else dim), "bfloat16",
                        (self.gate_pitch, 1)),
            TensorParam("norm_weight", (128,), "bfloat16"),
            TensorParam("f_b_weight", (dim, 128), "bfloat16"),
        ]
        if T > 1:
            params.append(TensorParam("accepted", (self.batch,), "int32"))
        if self.gate_folded:
            params.append(TensorParam("gate_weight", (dim, KDA_GATE_WIDTH), "bfloat16"))
        return params

    # --- device code --------------------------------------------------------------------------

    @cute.jit
    def __call__(self, *, x, conv_weight, conv_bias=None, conv_state, raw_gate, beta, a_log, dt_bias, slots, state,
                 output, output_gate, norm_weight, f_b_weight, accepted=None, gate_weight=None):
        launch(self, x, conv_weight, conv_bias, conv_state, raw_gate, beta, a_log, dt_bias, slots, state, output,
               output_gate, norm_weight, f_b_weight, accepted, gate_weight, min_blocks_per_mp=self.occupancy)

    @cute.kernel
    def kernel(self, x, conv_weight, conv_bias, conv_state, raw_gate, beta, a_log, dt_bias, slots, state, output,
               output_gate, norm_weight, f_b_weight, accepted, gate_weight):
        release_dependents_at_entry(self)
        tensors = KdaTensors(x, conv_weight, conv_bias, conv_state, raw_gate, beta, a_log, dt_bias, slots, state,
                             output, output_gate, norm_weight, f_b_weight, accepted, gate_weight)
        T: cutlass.Constexpr = self.tokens
        if cutlass.const_expr(not self.early):
            cute.arch.griddepcontrol_wait()
        thread, _, _ = cute.arch.thread_idx()
        partition, head, token = cute.arch.block_idx()
        request = token
        if cutlass.const_expr(T == 1):
            slot = slots[token]
            conv_slot, offset = slot, Int32(0)
        else:
            token = request * T
            offset = accepted[request] - 1
            slot, conv_slot = slots[request, offset], slots[request, 0]
        if slot <= 0:
            cute.arch.griddepcontrol_wait()
            if (partition == 0) & (thread < 128):
                for t in cutlass.range_constexpr(T):
                    self.write_output(output, advance(token, t), head * 128 + thread, Float32(0.0))
            release_dependents(self)
        else:
            self.active(tensors, thread, partition, head, request, token, slot, conv_slot, offset)

    @cute.jit
    def active(self, tensors, thread, partition, head, request, token, slot, conv_slot, offset):
        """A request's CTA: shared memory, barriers, then the gate warp or the main threads."""
        lane, value_base = thread % 32, partition * self.rows
        smem = cutlass.memory.SmemAllocator()
        space = {}
        for name, dtype, shape, align in self._allocations():
            if cutlass.const_expr(dtype is cutlass.Uint64):
                space[name] = smem.allocate_array(dtype, shape, byte_alignment=align)
            else:
                space[name] = alloc(smem, dtype, shape, align=align)
        shared_decay, barrier, gate_barrier = space["decay"], space["barrier"], space["gate_barrier"]
        gate_rows = space.get("gate_rows")
        if cutlass.const_expr(self.trigger_at_entry):
            release_dependents(self)
        if cutlass.const_expr(self.local):  # thread 0 arms the CTA's own barriers
            self.setup(barrier, gate_barrier, partition, thread)
            cute.arch.sync_threads()
        elif cutlass.const_expr(not self.early):
            self.setup(barrier, gate_barrier, partition, thread)
            cute.arch.cluster_wait()
        if thread >= 128:
            if cutlass.const_expr(self.early and not self.local):
                cute.arch.cluster_arrive_relaxed()
            coords = (head, token, value_base, lane)
            # the output gate's rows (weights): in registers before the wait, or into L2 and read after the decays
            if cutlass.const_expr(self.gate_preloaded):
                output_rows = self.load_gate_rows(tensors.gate_weight, head, value_base, lane)
            elif cutlass.const_expr(self.gate_in_warp):
                if lane == 0:
                    prefetch_l2(at(tensors.gate_weight, head * 128 + value_base, 0), self.rows * KDA_GATE_WIDTH * 2)
            self.gate_warp(tensors, shared_decay, gate_barrier, coords, gate_rows)
            if cutlass.const_expr(self.gate_in_warp):
                if cutlass.const_expr(not self.gate_preloaded):
                    output_rows = self.load_gate_rows(tensors.gate_weight, head, value_base, lane)
                self.push_gates(tensors, output_rows, space["gate"], barrier, coords)
        else:
            if cutlass.const_expr(self.early and not self.local):  # thread 0 arms; barrier 1 orders it
                self.setup(barrier, gate_barrier, partition, thread)
            self.main(tensors, space, thread, partition, head, request, token, slot, conv_slot, offset)

    @cute.jit
    def main(self, tensors, space, thread, partition, head, request, token, slot, conv_slot, offset):
        """The 128 main threads: conv, norms, the state rows' update, the output norm."""
        x, weights, conv_state = tensors.x, tensors.conv_weight, tensors.conv_state
        beta, slots = tensors.beta, tensors.slots
        state, output, gate, norm_weight = tensors.state, tensors.output, tensors.output_gate, tensors.norm_weight
        T: cutlass.Constexpr = self.tokens
        dim: cutlass.Constexpr = self.dim
        lane, warp = thread % 32, thread // 32
        group = thread // self.lanes_per_row
        group_lane = thread % self.lanes_per_row
        value_base, qk_channel = partition * self.rows, head * 128 + thread
        value_channel = head * 128 + value_base + thread
        shared_q, shared_k, shared_decay = space["q"], space["k"], space["decay"]
        shared_v, shared_o, reductions = space["v"], space["o"], space["reductions"]
        barrier, gate_barrier = space["barrier"], space["gate_barrier"]
        staged = space.get("staged")
        state_barrier = space.get("state_barrier")
        head_base = head * (VALUE * KEY) + value_base * KEY
        writes = [slot]
        if cutlass.const_expr(T > 1):
            writes = [slots[request, t] for t in range(T)]
        history = zeros((self.passes, self.chunks, 4), Float32)
        if cutlass.const_expr(self.staged):
            if thread == 0:
                cute.arch.mbarrier_init(state_barrier, 1)
                cute.arch.mbarrier_init_fence()
                size: cutlass.Constexpr = self.rows * 512
                cute.arch.mbarrier_arrive_and_expect_tx(state_barrier, size)
                copy_g2s(staged.iterator, self.row_pointer(state, slot, head_base, 0, 0), size, state_barrier,
                         evict_first=self.evict)
        for p in cutlass.range_constexpr(0 if self.staged else self.passes):
            row = p * self.groups + group
            if row < self.rows:
                for j in cutlass.range_constexpr(self.chunks):
                    column = 4 * (group_lane + self.lanes_per_row * j)
                    values = load_f32x4(self.row_pointer(state, slot, head_base, row, column))
                    for e in cutlass.range_constexpr(4):
                        history[p, j, e] = values[e]
        taps = zeros((3, 3), BFloat16)
        coeff = zeros((3, 4), weights.element_type if self.early else Float32)
        accum = zeros(3 * T, Float32)
        for s in cutlass.range_constexpr(2):
            self.conv_operands(tensors, taps, coeff, accum, s, qk_channel, conv_slot, offset)
        if thread < self.rows:
            self.conv_operands(tensors, taps, coeff, accum, 2, value_channel, conv_slot, offset)
        nw = norm_weight[thread].to(Float32)
        if cutlass.const_expr(self.gate_folded and not self.gate_in_warp):  # the head's gate rows into L2
            if (thread == 0) & (partition < T):
                prefetch_l2(at(tensors.gate_weight, head * 128, 0), 128 * KDA_GATE_WIDTH * 2)
        cute.arch.griddepcontrol_wait()
        inputs = zeros(3 * T, BFloat16)
        raw_betas = zeros(T, BFloat16)
        raw_gates = zeros(T, BFloat16)
        for t in cutlass.range_constexpr(T):
            row = advance(token, t)
            inputs[3 * t] = x[row, qk_channel]
            inputs[3 * t + 1] = x[row, dim + qk_channel]
            if thread < self.rows:
                inputs[3 * t + 2] = x[row, 2 * dim + value_channel]
            raw_betas[t] = beta[row, head]
            if cutlass.const_expr(not self.gate_folded):
                raw_gates[t] = gate[row, qk_channel]
        release_dependents(self)
        for t in cutlass.range_constexpr(T):  # window: 3 taps, then the inputs
            for s in cutlass.range_constexpr(3):
                for i in cutlass.range_constexpr(4):
                    w = t + i
                    term = taps[s, w] if w < 3 else inputs[3 * (w - 3) + s]
                    cf = coeff[s, i].to(Float32)
                    accum[3 * t + s] = fma(term.to(Float32), cf, accum[3 * t + s], ftz=self.fast_math)
        act = lambda i, value: sigmoid(value, self.fast_math)  # noqa: E731
        if cutlass.const_expr(T > 1 and not self.fast_math):
            raw = [accum[i] for i in range(3 * T)]
            raw += [raw_betas[t].to(Float32) for t in range(T)]
            if cutlass.const_expr(not self.gate_folded):
                raw += [raw_gates[t].to(Float32) for t in range(T)]
            act = partial(lambda batch, i, value: batch[i], sigmoids(raw))
        betas, gates, qks, vs = [], [], [], []
        for t in cutlass.range_constexpr(T):
            q = accum[3 * t] * act(3 * t, accum[3 * t])
            k = accum[3 * t + 1] * act(3 * t + 1, accum[3 * t + 1])
            vs.append(accum[3 * t + 2] * act(3 * t + 2, accum[3 * t + 2]))
            betas.append(act(3 * T + t, raw_betas[t].to(Float32)))
            if cutlass.const_expr(not self.gate_folded):
                gates.append(act(4 * T + t, raw_gates[t].to(Float32)))
            shared_q[advance(thread, 128 * t)] = q
            shared_k[advance(thread, 128 * t)] = k
            qks += [q, k]
        if thread < self.rows:
            for u in cutlass.range_constexpr(T):
                shared_v[advance(thread, self.rows * u)] = vs[u]
        squares = []
        for t in cutlass.range_constexpr(T):
            squares += [warp_reduce(qks[2 * t] * qks[2 * t], operator.add),
                        warp_reduce(qks[2 * t + 1] * qks[2 * t + 1], operator.add)]
        if lane == 0:
            for u in cutlass.range_constexpr(T):
                reductions[advance(warp, 8 * u)] = squares[2 * u]
                reductions[advance(warp + 4, 8 * u)] = squares[2 * u + 1]
        cute.arch.barrier(barrier_id=1, number_of_threads=128)

        def factors(t):
            r = lambda i: reductions[8 * t + i]  # noqa: E731
            qn = tree_sum([r(i) for i in range(4)])
            kn = tree_sum([r(4 + i) for i in range(4)])
            fq = cute.math.rsqrt(qn + self.l2_eps, fastmath=True) * self.scale
            return fq, cute.math.rsqrt(kn + self.l2_eps, fastmath=True)

        if cutlass.const_expr(T > 1):  # normalize each token's q, k once
            for t in cutlass.range_constexpr(T):
                fq, fk = factors(t)
                shared_q[128 * t + thread] = qks[2 * t] * fq
                shared_k[128 * t + thread] = qks[2 * t + 1] * fk
            cute.arch.barrier(barrier_id=1, number_of_threads=128)

        def operands(t):
            fq, fk = factors(t) if T == 1 else (None, None)
            qr = cute.make_rmem_tensor((self.chunks, 4), Float32)
            kr = cute.make_rmem_tensor((self.chunks, 4), Float32)
            for j in cutlass.range_constexpr(self.chunks):
                column = 4 * (group_lane + self.lanes_per_row * j)
                q4 = load_f32x4(shared_q.iterator + (128 * t + column), shared=True)
                k4 = load_f32x4(shared_k.iterator + (128 * t + column), shared=True)
                for e in cutlass.range_constexpr(4):
                    qr[j, e] = q4[e] * fq if T == 1 else q4[e]
                    kr[j, e] = k4[e] * fk if T == 1 else k4[e]
            if cutlass.const_expr(t == 0):
                wait(gate_barrier, scope=self.scope)
            decays = []
            for j in cutlass.range_constexpr(self.chunks):
                column = 4 * (group_lane + self.lanes_per_row * j)
                decays.append(load_f32x4(shared_decay.iterator + (128 * t + column), shared=True))
            return kr, qr, decays, self.rows * t, betas[t]

        lanes = (group, group_lane)
        ready = operands(0)
        for t in cutlass.range_constexpr(T):
            current = ready
            if cutlass.const_expr(t + 1 < T):
                ready = operands(t + 1)
            # Butterfly order: interleave rows per level, publish before state.
            dots = cute.make_rmem_tensor(self.passes, Float32)
            if cutlass.const_expr(self.staged):
                wait(state_barrier, scope="cta")
            owner, bar = t % self.cluster, barrier + t // self.cluster
            for start in cutlass.range_constexpr(0, self.passes, self.wave):
                stop = min(start + self.wave, self.passes)
                self.update(history, dots, current, shared_v, lanes, (start, stop), staged)
                if cutlass.const_expr(self.early and not self.local and start == 0 and t == 0):
                    cute.arch.cluster_wait()
                for p in cutlass.range_constexpr(start, stop):
                    row = p * self.groups + group
                    send = (row < self.rows) & (group_lane == 0)
                    position = self.output_position(value_base + row)
                    dst = shared_o.iterator + (128 * t + position)
                    if cutlass.const_expr(T > 1 and self.local):  # predicated: no branches
                        store_shared(dst, float_bits(dots[p]), send, barrier=bar)
                    elif cutlass.const_expr(T > 1):
                        push_float(dst, dots[p], bar, owner, send)
                    else:
                        if send:
                            if cutlass.const_expr(self.local):
                                store_shared(dst, float_bits(dots[p]), barrier=bar)
                            else:
                                store_async_dsmem(dst, float_bits(dots[p]), bar, owner)
                self.store_rows(history, (state, writes[t], head_base), (start, stop), lanes,
                                None if T == 1 else writes[t] > 0)
        if thread < self.rows:
            channel = 2 * dim + value_channel
            conv_state[conv_slot, channel, 0] = taps[2, 1]
            conv_state[conv_slot, channel, 1] = taps[2, 2]
            for u in cutlass.range_constexpr(T):
                conv_state[conv_slot, channel, 2 + u] = inputs[3 * u + 2]
        for t in cutlass.range_constexpr(T):
            if partition == t % self.cluster:
                if cutlass.const_expr(self.gate_in_warp):  # the gate warps' sigmoids came with the dots
                    wait(barrier + t // self.cluster, scope=self.scope)
                    gate_t = space["gate"][128 * t + thread]
                else:
                    if cutlass.const_expr(self.gate_folded):  # while the cluster's dots arrive
                        gate_t = sigmoid(self.gate_product(tensors, advance(token, t), head * 128 + thread),
                                         self.fast_math)
                    else:
                        gate_t = gates[t]
                    wait(barrier + t // self.cluster, scope=self.scope)
                raw_o = shared_o[128 * t + self.output_position(thread)]
                sums = cute.make_rmem_tensor(4, Float32)
                for g in cutlass.range_constexpr(4):
                    base = lane % 8 * 16 + g * 4
                    o4 = load_f32x4(shared_o.iterator + (128 * t + base), shared=True)
                    sums[g] = warp_reduce(tree_sum([o * o for o in o4]), operator.add, 8)
                sumsq = tree_sum([sums[g] for g in range(4)])
                rstd = cute.math.rsqrt(sumsq * (1.0 / 128) + self.eps, fastmath=True)
                result = raw_o * rstd * nw * gate_t
                self.write_output(output, advance(token, t), qk_channel, result)
                if cutlass.const_expr(t == 0):
                    for section in cutlass.range_constexpr(2):
                        channel = section * dim + qk_channel
                        conv_state[conv_slot, channel, 0] = taps[section, 1]
                        conv_state[conv_slot, channel, 1] = taps[section, 2]
                        for u in cutlass.range_constexpr(T):
                            conv_state[conv_slot, channel, 2 + u] = inputs[3 * u + section]

    def row_pointer(self, state, slot, head_base, row, column):
        """State row ``row`` (of the CTA's) of page ``slot``: a 64-bit page base (slot x page
        stride passes Int32), a 32-bit offset inside the page."""
        page = Int64(slot) * (self.heads * VALUE * KEY)
        return state.iterator + page + (head_base + row * KEY + column)

    @cute.jit
    def conv_operands(self, tensors, taps, coeff, accum, s, channel, conv_slot, offset):
        """Section ``s``'s (q, k or v) conv taps, weights and bias of one channel."""
        weights, bias, conv_state = tensors.conv_weight, tensors.conv_bias, tensors.conv_state
        for t in cutlass.range_constexpr(3):
            taps[s, t] = conv_state[conv_slot, s * self.dim + channel, offset + t]
        for t in cutlass.range_constexpr(4):
            coeff[s, t] = weights[s, t, channel].to(coeff.element_type)
        if cutlass.const_expr(self.has_bias):
            accum[s] = bias[s * self.dim + channel].to(Float32)
            for t in cutlass.range_constexpr(1, self.tokens):
                accum[3 * t + s] = accum[s]

    @cute.jit
    def store_rows(self, history, page, span, lanes, when=None):
        """Store the passes in ``span`` of the CTA's state rows (``when``: predicated
        on it, without branches)."""
        (start, stop), (group, group_lane) = span, lanes
        for p in cutlass.range_constexpr(start, stop):
            row = p * self.groups + group
            if cutlass.const_expr(when is not None):
                for j in cutlass.range_constexpr(self.chunks):
                    column = 4 * (group_lane + self.lanes_per_row * j)
                    values = [history[p, j, e] for e in range(4)]
                    pointer = self.row_pointer(*page, row % self.rows, column)
                    store_f32x4(pointer, values, when=when & (row < self.rows))
            else:
                if row < self.rows:
                    for j in cutlass.range_constexpr(self.chunks):
                        column = 4 * (group_lane + self.lanes_per_row * j)
                        pointer = self.row_pointer(*page, row, column)
                        row_values = [history[p, j, e] for e in range(4)]
                        if cutlass.const_expr(self.evict):
                            store_evict_f32x4(pointer, row_values)
                        else:
                            store_f32x4(pointer, row_values)

    @cute.jit
    def update(self, history, dots, operands, shared_v, lanes, span, staged):
        """Decay, delta-rule update and query dot of the passes in ``span``, whose rows
        ``staged`` (if given) first supplies from shared memory."""
        kr, qr, decays, v_offset, beta = operands
        (group, lane), (start, stop) = lanes, span
        if cutlass.const_expr(staged is not None):
            for p in cutlass.range_constexpr(start, stop):
                row = (p * self.groups + group) % self.rows
                for j in cutlass.range_constexpr(self.chunks):
                    column = 4 * (lane + self.lanes_per_row * j)
                    values = load_staged(staged.iterator + (row * 128 + column))
                    for e in cutlass.range_constexpr(4):
                        history[p, j, e] = values[e]
        for p in cutlass.range_constexpr(start, stop):
            for j in cutlass.range_constexpr(self.chunks):
                for e in cutlass.range_constexpr(4):
                    history[p, j, e] = history[p, j, e] * decays[j][e]
            dots[p] = self.row_dot(history, kr, p)
        warp_reduce_interleaved(dots, range(start, stop), operator.add, self.lanes_per_row)
        for p in cutlass.range_constexpr(start, stop):
            safe_row = (p * self.groups + group) % self.rows
            v_new = (shared_v[v_offset + safe_row] - dots[p]) * beta
            for j in cutlass.range_constexpr(self.chunks):
                for e in cutlass.range_constexpr(4):
                    history[p, j, e] = fma(kr[j, e], v_new, history[p, j, e], ftz=self.fast_math)
            dots[p] = self.row_dot(history, qr, p)
        warp_reduce_interleaved(dots, range(start, stop), operator.add, self.lanes_per_row)

    def decay(self, a, raw_g, dt):
        """The gate of one feature from its projection ``raw_g`` (bf16-rounded)."""
        if self.gate_form == "softplus":
            return cute.math.exp(-cute.math.exp(a) * softplus(raw_g + dt))
        gate = cute.math.exp(a, fastmath=True) * (raw_g + dt)
        gate = sigmoid(gate, self.fast_math)
        return cute.math.exp(self.lower_bound * gate, fastmath=True)

    @cute.jit
    def gate_warp(self, tensors, shared_decay, barrier, coords, staged_rows):
        """Project one value partition and multicast its decays to every CTA. Modes fix
        the F_B reduction order: 0 = one chain of eight MMAs, 1 = four chains of two,
        2 = sixteen 8-FMA partials summed in a butterfly. Projection math stays IEEE.
        ``staged_rows``: shared [copy, lane, 4] words; each lane cp.asyncs its own
        16-byte F_B operands there before the PDL wait and reads them back after it."""
        f_a, a_log, dt_bias, weight = tensors.raw_gate, tensors.a_log, tensors.dt_bias, tensors.f_b_weight
        head, token, value_base, lane = coords
        rows, mode = self.rows, self.gate_mode
        per: cutlass.Constexpr = max(1, rows // 32)  # decays per lane
        a = a_log[head]
        decay = []
        if cutlass.const_expr(mode == 2):
            feature = lane % rows
            row = head * 128 + value_base + feature
            # uint4 weights before the wait, two uint2 activation loads per 8-FMA
            # partial after it; keep that granularity and the low-then-high FMA order.
            wr = [load_weight_bf16x8(at(weight, row, 8 * i)) for i in range(16)]
            dt = dt_bias[row]
            cute.arch.griddepcontrol_wait()
            partials = cute.make_rmem_tensor(16, Float32)
            for i in cutlass.range_constexpr(16):
                a0 = load_activation_bf16x4(at(f_a, token, 8 * i))
                a1 = load_activation_bf16x4(at(f_a, token, 8 * i + 4))
                av = (*a0, *a1)
                acc = Float32(0.0)
                for e in cutlass.range_constexpr(4):
                    x0, x1 = unpack_bf16(av[e])
                    w0, w1 = unpack_bf16(wr[i][e])
                    acc = fma(x0, w0, acc)
                    acc = fma(x1, w1, acc)
                partials[i] = acc
            total = tree_sum([partials[i] for i in range(16)])
            decay.append(self.decay(a, total.to(BFloat16).to(Float32), dt))
            self.scatter(decay, shared_decay, barrier, value_base, lane)
        else:
            tiles: cutlass.Constexpr = max(1, rows // 16)
            high_row: cutlass.Constexpr = 8 if rows >= 16 else 0  # 8 rows: no second row group
            chains: cutlass.Constexpr = 4 if mode == 1 else 1
            group, quarter = lane >> 2, lane & 3
            feature = 16 * (quarter >> 1) + group + 8 * (quarter & 1)
            column_token = token
            if cutlass.const_expr(self.tokens > 1):  # token column, its features
                column_token = token + group % self.tokens
            features = [16 * (i // 2) + group + 8 * (i % 2) for i in range(rows // 8)]
            dt = zeros(max(per, len(features)), Float32)
            if cutlass.const_expr(self.tokens > 1):
                for i in cutlass.range_constexpr(len(features)):
                    dt[i] = dt_bias[head * 128 + value_base + features[i]]
            else:
                for r in cutlass.range_constexpr(per):
                    if feature + 32 * r < rows:
                        dt[r] = dt_bias[head * 128 + value_base + 32 * r + feature]
            # Two decays per lane load 16 bytes per row: chunk c then covers columns
            # 32 (c // 2) + 8 quarter + 4 (c % 2) + [0, 4) instead of 16 c + 4 quarter.
            wide: cutlass.Constexpr = per >= 2
            wr = cute.make_rmem_tensor((tiles, 8, 4), Uint32)
            if cutlass.const_expr(staged_rows is not None):
                for tile in cutlass.range_constexpr(tiles):
                    row = head * 128 + value_base + 16 * tile + group
                    for chunk in cutlass.range_constexpr(4):
                        col = 32 * chunk + 8 * quarter
                        for half in cutlass.range_constexpr(2):
                            copy = (tile * 4 + chunk) * 2 + half
                            destination = at(staged_rows, copy, lane, 0)
                            copy_g2s(destination, at(weight, row + high_row * half, col))
                cute.arch.cp_async_commit_group()
            else:
                for tile in cutlass.range_constexpr(tiles):
                    row = head * 128 + value_base + 16 * tile + group
                    for chunk in cutlass.range_constexpr(4 if wide else 8):
                        if cutlass.const_expr(wide):
                            col = 32 * chunk + 8 * quarter
                            low = load_weight_bf16x8(at(weight, row, col))
                            high = load_weight_bf16x8(at(weight, row + high_row, col))
                            self.split_pairs(wr, tile, chunk, low, high)
                        else:
                            self.narrow_rows(wr, tile, chunk, weight, row, quarter, high_row)
            cute.arch.griddepcontrol_wait()
            if cutlass.const_expr(wide):
                pairs = [load_activation_bf16x8(at(f_a, column_token, 32 * c + 8 * quarter))
                         for c in range(4)]
                ar = [pairs[c // 2][2 * (c % 2): 2 * (c % 2) + 2] for c in range(8)]
            else:
                ar = [load_activation_bf16x4(at(f_a, column_token, 16 * c + 4 * quarter))
                      for c in range(8)]
            if cutlass.const_expr(staged_rows is not None):
                cute.arch.cp_async_wait_group(0)
                for tile in cutlass.range_constexpr(tiles):
                    for chunk in cutlass.range_constexpr(4):
                        copy = (tile * 4 + chunk) * 2
                        low = smem_words(at(staged_rows, copy, lane, 0))
                        high = smem_words(at(staged_rows, copy + 1, lane, 0))
                        self.split_pairs(wr, tile, chunk, low, high)
            acc = zeros((chains, tiles, 4), Float32)
            for chunk in cutlass.range_constexpr(8):
                chain: cutlass.Constexpr = chunk // 2 if mode == 1 else 0
                for tile in cutlass.range_constexpr(tiles):
                    wa = tuple(wr[tile, chunk, e] for e in range(4))
                    mma_into(acc[chain, tile, None], wa, ar[chunk], bf16=True)
            if cutlass.const_expr(self.tokens > 1):
                self.multicast(acc, (a, dt, features), (shared_decay, barrier, value_base), lane)
            else:
                for r in cutlass.range_constexpr(per):
                    chosen = cute.make_rmem_tensor(chains, Float32)
                    for chain in cutlass.range_constexpr(chains):
                        selected = acc[chain, 2 * r, 0]
                        if (quarter & 1) != 0:
                            selected = acc[chain, 2 * r, 2]
                        if cutlass.const_expr(tiles > 2 * r + 1):
                            if (quarter >> 1) != 0:
                                selected = acc[chain, 2 * r + 1, 0]
                                if (quarter & 1) != 0:
                                    selected = acc[chain, 2 * r + 1, 2]
                        chosen[chain] = selected
                    value = chosen[0]
                    if cutlass.const_expr(mode == 1):
                        value = Float32(0.0) + (((value + chosen[1]) + chosen[2]) + chosen[3])
                    decay.append(self.decay(a, value.to(BFloat16).to(Float32), dt[r]))
                self.scatter(decay, shared_decay, barrier, value_base, lane)

    @cute.jit
    def scatter(self, decay, shared_decay, barrier, value_base, lane):
        """One token's decays of this partition: lane ``4 packet + e``'s feature goes, 16
        bytes a lane, to the CTA ``lane // packets``."""
        rows, per = self.rows, len(decay)
        packets: cutlass.Constexpr = rows // 4
        packet, destination = lane % packets, lane // packets
        values = cute.make_rmem_tensor(4, Float32)
        for e in cutlass.range_constexpr(4):
            source = 4 * packet + e
            if cutlass.const_expr(per >= 2):
                feature = source & 31
                source = (feature & 7) << 2 | (feature >> 4) << 1 | feature >> 3 & 1
                shuffled = [cute.arch.shuffle_sync(d, source) for d in decay]
                values[e] = shuffled[0]
                for r in cutlass.range_constexpr(1, per):
                    if packet >> 3 == r:
                        values[e] = shuffled[r]
            else:
                if cutlass.const_expr(self.gate_mode != 2):
                    source = (source & 7) << 2 | (source >> 4) << 1 | source >> 3 & 1
                values[e] = cute.arch.shuffle_sync(decay[0], source)
        pointer = shared_decay.iterator + (value_base + 4 * packet)
        words = tuple(float_bits(values[e]) for e in range(4))
        if cutlass.const_expr(self.local):
            store_shared(pointer, words, barrier=barrier)
        else:
            if cutlass.const_expr(self.early):
                cute.arch.cluster_wait()
            store_async_dsmem(pointer, words, barrier, destination)

    @cute.jit
    def multicast(self, acc, gates, targets, lane):
        """Decays (q > 1) of the lane's D fragments (feature rows, token columns 2
        quarter + {0, 1}) to every CTA's shared [token, 128] decays."""
        (a, dt, features), (shared_decay, barrier, value_base) = gates, targets
        quarter = lane & 3
        if cutlass.const_expr(self.early and not self.local):
            cute.arch.cluster_wait()
        for i in cutlass.range_constexpr(len(features)):
            tile, e = i // 2, (i % 2) * 2
            for column in cutlass.range_constexpr(2):
                value = acc[0, tile, e + column]
                if cutlass.const_expr(self.gate_mode == 1):
                    parts = [acc[c, tile, e + column] for c in range(4)]
                    value = Float32(0.0) + (((value + parts[1]) + parts[2]) + parts[3])
                decay = self.decay(a, value.to(BFloat16).to(Float32), dt[i])
                token = 2 * quarter + column
                pointer = shared_decay.iterator + (token * 128 + value_base + features[i])
                if cutlass.const_expr(self.local):
                    store_shared(pointer, float_bits(decay), token < self.tokens)
                else:
                    for rank in cutlass.range_constexpr(self.cluster):
                        push_float(pointer, decay, barrier, rank, token < self.tokens)
        if cutlass.const_expr(self.local):  # the lane's stores, then its one arrival
            arrive(barrier)

    @cute.jit
    def narrow_rows(self, wr, tile, chunk, weight, row, quarter, high_row):
        """A fragments of chunk ``chunk`` from 8 bytes of rows ``row`` and ``row + high_row``: the columns
        16 chunk + 4 quarter + [0, 4), the order the activations' B fragments read."""
        low = load_bf16x4(at(weight, row, 16 * chunk + 4 * quarter))
        high = load_bf16x4(at(weight, row + high_row, 16 * chunk + 4 * quarter))
        wr[tile, chunk, 0], wr[tile, chunk, 2] = low
        wr[tile, chunk, 1], wr[tile, chunk, 3] = high

    @cute.jit
    def load_gate_rows(self, weight, head, value_base, lane):
        """The gate warp's A fragments of its partition's output gate rows, 16 a tile (8 rows: the tile's
        second half repeats the first and is never sent)."""
        tiles: cutlass.Constexpr = max(1, self.rows // 16)
        high_row: cutlass.Constexpr = 8 if self.rows >= 16 else 0
        group, quarter = lane >> 2, lane & 3
        wr = cute.make_rmem_tensor((tiles, 8, 4), Uint32)
        for tile in cutlass.range_constexpr(tiles):
            row = head * 128 + value_base + 16 * tile + group
            for chunk in cutlass.range_constexpr(8):
                self.narrow_rows(wr, tile, chunk, weight, row, quarter, high_row)
        return wr

    @cute.jit
    def push_gates(self, tensors, wr, shared_gate, barrier, coords):
        """The output gate of the partition's channels: the rows in ``wr`` by the gate input's row (a token a
        MMA column), rounded to bf16 as the product's store would, each token's sigmoids sent to its output
        CTA's shared ``gate`` on the barrier its dots complete."""
        head, token, value_base, lane = coords
        T: cutlass.Constexpr = self.tokens
        tiles: cutlass.Constexpr = max(1, self.rows // 16)
        group, quarter = lane >> 2, lane & 3
        column_token = token
        if cutlass.const_expr(T > 1):
            column_token = token + group % T
        ar = [load_activation_bf16x4(at(tensors.output_gate, column_token, 16 * c + 4 * quarter)) for c in range(8)]
        acc = zeros((tiles, 4), Float32)
        for chunk in cutlass.range_constexpr(8):
            for tile in cutlass.range_constexpr(tiles):
                mma_into(acc[tile, None], tuple(wr[tile, chunk, e] for e in range(4)), ar[chunk], bf16=True)
        for tile in cutlass.range_constexpr(tiles):
            for e in cutlass.range_constexpr(4):  # D: rows group (+ 8), token columns 2 quarter + {0, 1}
                row = 16 * tile + group + 8 * (e // 2)
                value = sigmoid(acc[tile, e].to(BFloat16).to(Float32), self.fast_math)
                for t in cutlass.range_constexpr(T):
                    if cutlass.const_expr(t % 2 == e % 2):
                        pointer = shared_gate.iterator + (128 * t + value_base + row)
                        push_float(pointer, value, barrier + t // self.cluster, t % self.cluster,
                                   (quarter == t // 2) & (row < self.rows))

    @staticmethod
    def split_pairs(wr, tile, chunk, low, high):
        """16 bytes of rows r and r + 8 hold the A fragments of chunks 2c and 2c + 1."""
        for h in range(2):
            c = 2 * chunk + h
            wr[tile, c, 0], wr[tile, c, 2] = low[2 * h: 2 * h + 2]
            wr[tile, c, 1], wr[tile, c, 3] = high[2 * h: 2 * h + 2]

    @cute.jit
    def setup(self, barrier, gate_barrier, partition, thread):
        """Thread 0 arms the output (leader) and decay barriers; the CTA arrives on the
        cluster barrier peers wait on before their sends. Without a cluster the barriers
        count arrivals instead of bytes: one a state row, one a gate lane."""
        tokens, cluster = self.tokens, self.cluster
        if thread == 0:
            for k in cutlass.range_constexpr(-(-tokens // cluster)):  # token t: CTA t % cluster
                if partition + k * cluster < tokens:
                    if cutlass.const_expr(self.local):
                        cute.arch.mbarrier_init(barrier + k, VALUE)
                    else:  # the dots, and with the gate folded in the gate warps its sigmoids
                        cute.arch.mbarrier_init(barrier + k, 1)
                        cute.arch.mbarrier_arrive_and_expect_tx(barrier + k, 1024 if self.gate_in_warp else 512)
            if cutlass.const_expr(self.local):
                cute.arch.mbarrier_init(gate_barrier, 32)
            else:
                cute.arch.mbarrier_init(gate_barrier, 1)
                cute.arch.mbarrier_arrive_and_expect_tx(gate_barrier, 512 * tokens)
                cute.arch.mbarrier_init_fence()
        if cutlass.const_expr(not self.local):
            cute.arch.cluster_arrive_relaxed()

    @cute.jit
    def row_dot(self, history, vector, p):
        """The lane's part of state row pass ``p`` dotted with ``vector``: its chunks' dots, summed
        as a tree."""
        partials = cute.make_rmem_tensor(self.chunks, Float32)
        for j in cutlass.range_constexpr(self.chunks):
            row = [history[p, j, e] for e in range(4)]
            partials[j] = dot(row, [vector[j, e] for e in range(4)], ftz=self.fast_math)
        return tree_sum([partials[j] for j in range(self.chunks)])

    @cute.jit
    def gate_product(self, tensors, row, channel):
        """The output gate of one channel, folded: its weight row dotted with the row's gate input (four
        chains of FMAs, one a word of each 16-byte load, summed as a tree: few registers live, as the
        state update's staged schedules need), rounded to bf16 as the product would store it."""
        weight, source = tensors.gate_weight, tensors.output_gate
        chains = zeros(4, Float32)
        for i in cutlass.range_constexpr(KDA_GATE_WIDTH // 8):
            w = load_weight_bf16x8(at(weight, channel, 8 * i))
            a = load_activation_bf16x8(at(source, row, 8 * i))
            for e in cutlass.range_constexpr(4):
                x0, x1 = unpack_bf16(a[e])
                w0, w1 = unpack_bf16(w[e])
                chains[e] = fma(x1, w1, fma(x0, w0, chains[e]))
        return tree_sum([chains[e] for e in range(4)]).to(BFloat16).to(Float32)

    @cute.jit
    def write_output(self, output, row, channel, value):
        """One output value of a main thread (channel head * 128 + thread): bf16, or with `quantize`
        its byte of each plane of the quantized form, a warp's 32 channels one block (their peak
        a whole-warp butterfly; every lane of the warp calls it), lane 0 storing the block's scale."""
        if cutlass.const_expr(self.quantize):
            store_warp_quantized(output, row, channel, self.dim, self.quantize, value)
        else:
            output[row, channel] = value.to(BFloat16)

    @cute.jit
    def output_position(self, row: Int32):
        return ((row & 7) << 4) | ((row >> 5) << 2) | ((row & 31) >> 3)
