"""`delta_rule`: the gated delta rule of a decode step (KDA's decay a key, or Gated DeltaNet's decay
a head), its fp32 state [slot, head, value, key] updated in place at the request's slot.

Every value row of a head is independent of the others: row v's update needs only the token's
keys, query, decay, beta and its own value v. So a CTA holds some value rows of one request's head
in registers (`split` CTAs a head, each value_rows / split rows), and a row's keys spread over a
group of lanes (four or eight keys a lane): its two dot products (S k and S q) are butterfly sums
over the group. Token by token, as the interpreter: S *= decay; u = beta (v - S k);
S += u k^T; o = S (scale q). The state rows are loaded before the PDL wait (see `DeltaRule`)."""

from __future__ import annotations

import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int64

from lanec.codegen.facts import DELTA_THREADS, SM_COUNT, WARP, DeltaRuleSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import load_f32x4, store_f32x4, warp_reduce, zeros

SPLITS = (1, 2, 4, 8, 16)  # CTAs a request's head, the fewest that fill the chip (and fit the registers)


def keys_a_lane(key: int) -> int:
    """Keys a lane holds of a state row: four (one 16-byte vector), eight for 256-key heads."""
    return 4 if key <= 4 * WARP else key // WARP


def default_split(batch: int, heads: int, key: int, value: int) -> int:
    """The fewest CTAs a head whose grid covers every SM (and whose rows fit the registers)."""
    fitting = [s for s in SPLITS if not DeltaRuleSpec(batch, 1, heads, 1, key, value, 2, split=s).problems()]
    if not fitting:
        return 1  # the spec then names what breaks
    for split in fitting:
        if batch * heads * split >= SM_COUNT:
            return split
    return fitting[-1]


class DeltaRule:
    """Params: q, k [rows, key_heads * key] bf16, v [rows, heads * value] bf16, decay [rows,
    heads * key] (per key) or [rows, heads] f32, beta [rows, heads] bf16, slots [batch] or
    [batch, slot_columns] int32, (accepted [batch] int32 with tokens > 1), state [state_slots,
    heads, value, key] f32 (read and written), out [rows, heads * value] bf16. Value head h reads
    key head h // (heads / key_heads). A request whose read slot (slots[b, accepted - 1]) is <= 0
    is padding: zero rows, no state written. With tokens q > 1, token t's state goes to slots[b, t]
    where > 0; with one token, back to the read slot.

    The slot table and the state rows are read before the PDL wait: the table is the host's input
    and a state slot is written only by this layer's delta rule of an earlier step, which a graph
    or a non-PDL boundary orders before this launch (as KdaSplit's early loads)."""

    name = "delta_rule"

    def __init__(self, batch: int, tokens: int, heads: int, key_heads: int, key: int, value: int,
                 state_slots: int, scale: float, per_key: bool = True, split: int | None = None,
                 slot_columns: int = 0, q_pitch=None, k_pitch=None, v_pitch=None, beta_pitch=None):
        if split is None:
            split = default_split(batch, heads, key, value)
        DeltaRuleSpec(batch, tokens, heads, key_heads, key, value, state_slots, bool(per_key), split,
                      slot_columns).check()
        self.batch, self.tokens, self.heads, self.key_heads = batch, tokens, heads, key_heads
        self.key, self.value, self.state_slots, self.scale = key, value, state_slots, float(scale)
        self.per_key, self.split, self.slot_columns = bool(per_key), split, slot_columns
        self.pitches = {name: (width if pitch is None else int(pitch)) for name, pitch, width in (
            ("q", q_pitch, key_heads * key), ("k", k_pitch, key_heads * key), ("v", v_pitch, heads * value),
            ("beta", beta_pitch, heads))}
        self.keys_a_lane = keys_a_lane(key)
        self.lanes = key // self.keys_a_lane  # a row's lanes: a power of two up to a warp
        self.rows = value // split  # value rows a CTA
        self.threads = min(DELTA_THREADS, -(-self.rows * self.lanes // WARP) * WARP)
        self.rows_a_pass = self.threads // self.lanes
        self.passes = -(-self.rows // self.rows_a_pass)

    def params(self) -> list[TensorParam]:
        rows = self.batch * self.tokens
        slots = (self.batch,) if self.slot_columns == 0 else (self.batch, self.slot_columns)
        decay = self.heads * self.key if self.per_key else self.heads
        params = [
            TensorParam("q", (rows, self.key_heads * self.key), "bfloat16", (self.pitches["q"], 1)),
            TensorParam("k", (rows, self.key_heads * self.key), "bfloat16", (self.pitches["k"], 1)),
            TensorParam("v", (rows, self.heads * self.value), "bfloat16", (self.pitches["v"], 1)),
            TensorParam("decay", (rows, decay), "float32"),
            TensorParam("beta", (rows, self.heads), "bfloat16", (self.pitches["beta"], 1)),
            TensorParam("slots", slots, "int32"),
        ]
        if self.tokens > 1:
            params.append(TensorParam("accepted", (self.batch,), "int32"))
        params += [TensorParam("state", (self.state_slots, self.heads, self.value, self.key), "float32",
                               written=True),
                   TensorParam("out", (rows, self.heads * self.value), "bfloat16", written=True)]
        return params

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.split, self.heads, self.batch), block=(self.threads, 1, 1))

    def touched(self) -> dict[str, int]:
        """The state slots a step reads and writes: a request's, one a token at most."""
        return {"state": self.batch * self.tokens}

    @cute.jit
    def __call__(self, *, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, decay: cute.Tensor, beta: cute.Tensor,
                 slots: cute.Tensor, accepted: cute.Tensor = None, state: cute.Tensor, out: cute.Tensor):
        launch(self, q, k, v, decay, beta, slots, accepted, state, out)

    @cute.jit
    def slot_of(self, slots, request, column):
        if cutlass.const_expr(self.slot_columns == 0):
            return slots[request]
        return slots[request, column]

    @cute.jit
    def row_pointer(self, state, slot, head, row, key):
        """State row ``row`` of ``head`` in page ``slot`` from key ``key``: a 64-bit page base."""
        page = Int64(slot) * (self.heads * self.value * self.key)
        return state.iterator + page + ((head * self.value + row) * self.key + key)

    @cute.kernel
    def kernel(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, decay: cute.Tensor, beta: cute.Tensor,
               slots: cute.Tensor, accepted: cute.Tensor, state: cute.Tensor, out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, head, request = cute.arch.block_idx()
        T: cutlass.Constexpr = self.tokens
        KL: cutlass.Constexpr = self.keys_a_lane
        L: cutlass.Constexpr = self.lanes
        P: cutlass.Constexpr = self.passes
        group, first_key = thread // L, (thread % L) * KL
        first_row = block * self.rows
        key_head = head // (self.heads // self.key_heads)
        read = self.slot_of(slots, request, 0)
        if cutlass.const_expr(T > 1):
            read = slots[request, accepted[request] - 1]
        S = zeros((P, KL), Float32)  # [pass, key]: rows first_row + p * rows_a_pass + group
        if read > 0:
            for p in cutlass.range_constexpr(P):
                row = p * self.rows_a_pass + group
                if row < self.rows:
                    for c in cutlass.range_constexpr(KL // 4):
                        values = load_f32x4(self.row_pointer(state, read, head, first_row + row, first_key + 4 * c))
                        for e in cutlass.range_constexpr(4):
                            S[p, 4 * c + e] = values[e]
        cute.arch.griddepcontrol_wait()  # q, k, v, the decay and beta are predecessors' outputs
        if read <= 0:
            release_dependents(self)
            for p in cutlass.range_constexpr(P):
                row = p * self.rows_a_pass + group
                if row < self.rows and thread % L == 0:
                    for t in cutlass.range_constexpr(T):
                        out[request * T + t, head * self.value + first_row + row] = BFloat16(0.0)
        else:
            self.tokens_in_order(q, k, v, decay, beta, slots, state, out, S, head, key_head, request, group,
                                 first_key, first_row, read)

    @cute.jit
    def tokens_in_order(self, q, k, v, decay, beta, slots, state, out, S, head, key_head, request, group, first_key,
                        first_row, read):
        """An active request's tokens, one after the other, on the rows in registers."""
        T: cutlass.Constexpr = self.tokens
        KL: cutlass.Constexpr = self.keys_a_lane
        L: cutlass.Constexpr = self.lanes
        P: cutlass.Constexpr = self.passes
        lead = (cute.arch.thread_idx()[0] % L) == 0
        for t in cutlass.range_constexpr(T):
            r = request * T + t
            keys = cute.make_rmem_tensor(KL, Float32)
            query = cute.make_rmem_tensor(KL, Float32)
            decays = cute.make_rmem_tensor(KL, Float32)
            for e in cutlass.range_constexpr(KL):
                column = key_head * self.key + first_key + e
                keys[e] = k[r, column].to(Float32)
                query[e] = q[r, column].to(Float32) * Float32(self.scale)
                if cutlass.const_expr(self.per_key):
                    decays[e] = decay[r, head * self.key + first_key + e]
            if cutlass.const_expr(not self.per_key):
                shared_decay = decay[r, head]
                for e in cutlass.range_constexpr(KL):
                    decays[e] = shared_decay
            rate = beta[r, head].to(Float32)
            values = zeros(P, Float32)
            for p in cutlass.range_constexpr(P):
                row = p * self.rows_a_pass + group
                if row < self.rows:
                    values[p] = v[r, head * self.value + first_row + row].to(Float32)
            if cutlass.const_expr(t == T - 1):
                release_dependents(self)  # every input of this CTA is read
            for p in cutlass.range_constexpr(P):
                row = p * self.rows_a_pass + group
                projected = Float32(0.0)
                for e in cutlass.range_constexpr(KL):
                    S[p, e] = S[p, e] * decays[e]
                    projected += S[p, e] * keys[e]
                projected = warp_reduce(projected, operator.add, L)
                update = rate * (values[p] - projected)
                output = Float32(0.0)
                for e in cutlass.range_constexpr(KL):
                    S[p, e] = S[p, e] + update * keys[e]
                    output += S[p, e] * query[e]
                output = warp_reduce(output, operator.add, L)
                if lead & (row < self.rows):
                    out[r, head * self.value + first_row + row] = output.to(BFloat16)
            if cutlass.const_expr(T > 1):
                self.store(state, slots[request, t], head, group, first_key, first_row, S)
        if cutlass.const_expr(T == 1):
            self.store(state, read, head, group, first_key, first_row, S)

    @cute.jit
    def store(self, state, slot, head, group, first_key, first_row, S):
        """The rows in registers to page ``slot`` (skipped where the slot is <= 0)."""
        if slot > 0:
            for p in cutlass.range_constexpr(self.passes):
                row = p * self.rows_a_pass + group
                if row < self.rows:
                    for c in cutlass.range_constexpr(self.keys_a_lane // 4):
                        store_f32x4(self.row_pointer(state, slot, head, first_row + row, first_key + 4 * c),
                                    [S[p, 4 * c + e] for e in range(4)])
