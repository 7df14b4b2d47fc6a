"""The expanded path of a latent attention (MLA), for the forms whose absorbed path a held-back rule
refuses (the latent values not at an even place and pitch of the cache row, a head's nope part not
whole 32-value blocks of the query projection) and for wide chunks (`Latent.wide`). Two launches:

1. `latent_expand` writes the step's latent rows [latent, k_rope] into the latent cache (the cache
   stays the one every later step reads) and expands every cached latent c of a request, positions
   0..p0+tokens-1, into scratch caches paged as the latent cache: head h's key [W_k,h c, k_rope]
   (zeros after it to whole 32-value MMA steps) and its value W_v,h c. A CTA a (16 positions,
   head, request): the positions' latent rows in shared memory (fp32), a thread an output of the
   head's nope + v, reading kv_b transposed once at load ([heads x lora, nope + v]: neighbouring
   threads read neighbouring outputs of one latent value). CUDA cores: the expansion costs
   len x heads x lora x (nope + v) multiply-adds a request every step (`Latent.expanded_cost`),
   the price of a held-back form, against a tensor-core tile loop for the absorbed path.
2. `expanded_attention` is `TileAttention`'s tile loop with every head its own KV head (one CTA a
   (chunk, head, request)): queries are the heads' [nope, rope] units of the query projection as
   stored (zeros to the padded key width), keys and values the scratch caches' rows. Every row it
   reads was written by its predecessor this step, so none is requested before
   `griddepcontrol.wait`. Split-KV and the combine as `attention`.

The keys and values are stored as bf16 (the absorbed path rounds its absorbed query the same way);
the softmax and the sums are fp32."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32

from lanec.codegen.facts import EXPANDED_POSITIONS, VECTOR, AttentionSchedule, ExpandedLatentSpec
from lanec.codegen.kernels.attention import TileAttention
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import alloc, at, copy_g2s_zfill

EXPAND_THREADS = 256


class LatentExpand:
    """Params: latent, k_rope (rope > 0), positions, pages, w (kv_b per head transposed:
    [heads x lora, nope + v]), cache (written: the step's rows), keys [pages, page_size, heads,
    key_width] and values [pages, page_size, heads, v] (written). See the module docstring."""

    name = "latent_expand"

    def __init__(self, batch, tokens, heads, nope, rope, lora, v, page_size, max_pages, cache_pages,
                 latent_pitch=None, k_rope_pitch=None):
        spec = ExpandedLatentSpec(batch, tokens, heads, nope, rope, v, page_size, max_pages, cache_pages, lora=lora,
                                  latent_pitch=latent_pitch, k_rope_pitch=k_rope_pitch)
        spec.check()
        self.batch, self.tokens, self.heads, self.nope, self.rope = batch, tokens, heads, nope, rope
        self.lora, self.v, self.page_size, self.max_pages, self.cache_pages = lora, v, page_size, max_pages, cache_pages
        self.latent_pitch = lora if latent_pitch is None else int(latent_pitch)
        self.k_rope_pitch = rope if k_rope_pitch is None else int(k_rope_pitch)
        self.rows = batch * tokens
        self.key_width = spec.key_width
        self.outputs = nope + v  # a head's expanded values: its key half, then its value half
        self.width = lora + rope  # a latent cache row

    def params(self) -> list[TensorParam]:
        rows, heads = self.rows, self.heads
        params = [TensorParam("latent", (rows, self.lora), "bfloat16", (self.latent_pitch, 1))]
        if self.rope:
            params.append(TensorParam("k_rope", (rows, self.rope), "bfloat16", (self.k_rope_pitch, 1)))
        return params + [
            TensorParam("positions", (rows,), "int32"),
            TensorParam("pages", (self.batch, self.max_pages), "int32"),
            TensorParam("w", (heads * self.lora, self.outputs), "bfloat16"),
            TensorParam("cache", (self.cache_pages, self.page_size, self.width), "bfloat16", written=True),
            TensorParam("keys", (self.cache_pages, self.page_size, heads, self.key_width), "bfloat16", written=True),
            TensorParam("values", (self.cache_pages, self.page_size, heads, self.v), "bfloat16", written=True)]

    def touched(self) -> dict[str, int]:
        """The pages a full page table reaches: the latent cache read, the expanded rows written."""
        reached = min(self.cache_pages, self.batch * self.max_pages)
        return {name: reached for name in ("cache", "keys", "values")}

    def launch(self) -> LaunchShape:
        tiles = -(-self.max_pages * self.page_size // EXPANDED_POSITIONS)
        return LaunchShape(grid=(tiles, self.heads, self.batch), block=(EXPAND_THREADS, 1, 1),
                           shared_bytes=4 * EXPANDED_POSITIONS * self.width)

    @cute.jit
    def __call__(self, *, latent: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor, w: cute.Tensor,
                 cache: cute.Tensor, keys: cute.Tensor, values: cute.Tensor, k_rope: cute.Tensor = None):
        launch(self, latent, k_rope, positions, pages, w, cache, keys, values)

    @cute.kernel
    def kernel(self, latent: cute.Tensor, k_rope: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor,
               w: cute.Tensor, cache: cute.Tensor, keys: cute.Tensor, values: cute.Tensor):
        release_dependents_at_entry(self)
        tid, _, _ = cute.arch.thread_idx()
        tile, head, request = cute.arch.block_idx()
        T: cutlass.Constexpr = self.tokens
        N: cutlass.Constexpr = EXPANDED_POSITIONS
        W: cutlass.Constexpr = self.width
        L: cutlass.Constexpr = self.lora
        P: cutlass.Constexpr = self.page_size
        smem = cutlass.memory.SmemAllocator()
        c_s = alloc(smem, Float32, (N, W))
        cute.arch.griddepcontrol_wait()  # the step's latent rows come from the predecessor
        release_dependents(self)  # dependents wait for this grid's end to read its rows
        p0 = positions[request * T]
        count = p0 + T  # positions 0..p0+T-1 are the request's keys this step
        first = tile * N
        if first < count:
            for j in cutlass.range_constexpr(-(-(N * W) // EXPAND_THREADS)):
                e = tid + j * EXPAND_THREADS
                if e < N * W:
                    i, k = e // W, e % W
                    position = first + i
                    value = Float32(0.0)
                    if position < p0:  # written by an earlier step
                        value = cache[pages[request, position // P], position % P, k].to(Float32)
                    elif position < count:  # this step's row, from its inputs
                        r = request * T + position - p0
                        if cutlass.const_expr(self.rope == 0):
                            value = latent[r, k].to(Float32)
                        elif k < L:
                            value = latent[r, k].to(Float32)
                        else:
                            value = k_rope[r, k - L].to(Float32)
                        if head == 0:  # one CTA a position writes the latent cache's row
                            cache[pages[request, position // P], position % P, k] = value.to(BFloat16)
                    c_s[i, k] = value
            cute.arch.sync_threads()
            for jd in cutlass.range_constexpr(-(-self.outputs // EXPAND_THREADS)):
                d = tid + jd * EXPAND_THREADS
                if d < self.outputs:
                    acc = cute.make_rmem_tensor(N, Float32)
                    acc.fill(0.0)
                    for k in range(L):
                        weight = w[head * L + k, d].to(Float32)
                        for i in cutlass.range_constexpr(N):
                            acc[i] = acc[i] + c_s[i, k] * weight
                    for i in cutlass.range_constexpr(N):
                        position = first + i
                        if position < count:
                            page, at_row = pages[request, position // P], position % P
                            if d < self.nope:
                                keys[page, at_row, head, d] = acc[i].to(BFloat16)
                            else:
                                values[page, at_row, head, d - self.nope] = acc[i].to(BFloat16)
            # the key's shared rotated part, then zeros to the padded width
            tail: cutlass.Constexpr = self.key_width - self.nope
            if tid < tail:
                for i in cutlass.range_constexpr(N):
                    position = first + i
                    if position < count:
                        page, at_row = pages[request, position // P], position % P
                        value = Float32(0.0)
                        if tid < self.rope:
                            value = c_s[i, L + tid]
                        keys[page, at_row, head, self.nope + tid] = value.to(BFloat16)


class ExpandedLatentAttention(TileAttention):
    """Attention over `LatentExpand`'s per-head keys and values. Params: q (the query projection:
    each head's [nope, rope] unit, pitch `qr_pitch`), positions, pages, keys, values, then out
    [rows, heads x v] (one split, or the chunks combined in the cluster) or partial and lse. See the
    module docstring."""

    name = "expanded_attention"

    def __init__(self, batch, tokens, heads, nope, rope, v, page_size, max_pages, cache_pages, splits=1,
                 qr_pitch=None, scale=None, schedule=None):
        spec = ExpandedLatentSpec(batch, tokens, heads, nope, rope, v, page_size, max_pages, cache_pages, splits,
                                  qr_pitch=qr_pitch)
        spec.check()
        self.batch, self.tokens, self.heads, self.nope, self.rope, self.v = batch, tokens, heads, nope, rope, v
        self.page_size, self.max_pages, self.cache_pages, self.splits = page_size, max_pages, cache_pages, splits
        self.unit = nope + rope
        self.qr_pitch = heads * self.unit if qr_pitch is None else int(qr_pitch)
        self.scale = self.unit ** -0.5 if scale is None else float(scale)
        self.key_width, self.value_width = spec.key_width, v
        self.kv_heads, self.group = heads, 1
        self.setup(AttentionSchedule.of(schedule or {}))

    def params(self) -> list[TensorParam]:
        rows, heads = self.rows, self.heads
        params = [TensorParam("q", (rows, heads * self.unit), "bfloat16", (self.qr_pitch, 1)),
                  TensorParam("positions", (rows,), "int32"),
                  TensorParam("pages", (self.batch, self.max_pages), "int32"),
                  TensorParam("keys", (self.cache_pages, self.page_size, heads, self.key_width), "bfloat16"),
                  TensorParam("values", (self.cache_pages, self.page_size, heads, self.v), "bfloat16")]
        return params + self.outputs(rows, self.v, heads)

    def value_pitch(self) -> int:
        return self.v + VECTOR  # 16 bytes of padding, as the keys'

    def buffer_bytes(self) -> list[int]:
        return [2 * self.tile * self.key_pitch(), 2 * self.tile * self.value_pitch()]

    def alloc_buffers(self, smem):
        return (alloc(smem, BFloat16, (self.stages, self.tile, self.key_pitch())),
                alloc(smem, BFloat16, (self.stages, self.tile, self.value_pitch())))

    def key_buffer(self, buffers):
        return buffers[0]

    def value_buffer(self, buffers):
        return buffers[1], 0

    @cute.jit
    def __call__(self, *, q: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor, keys: cute.Tensor,
                 values: cute.Tensor, out: cute.Tensor = None, partial: cute.Tensor = None, lse: cute.Tensor = None):
        launch(self, q, positions, pages, keys, values, out, partial, lse)

    @cute.kernel
    def kernel(self, q: cute.Tensor, positions: cute.Tensor, pages: cute.Tensor, keys: cute.Tensor,
               values: cute.Tensor, out: cute.Tensor, partial: cute.Tensor, lse: cute.Tensor):
        release_dependents_at_entry(self)
        self.attend((q, pages, keys, values), positions, out, partial, lse)

    @cute.jit
    def write_cache(self, views, request: Int32, g: Int32, p0: Int32, tid: Int32):
        """Nothing: latent_expand wrote the step's rows (the latent cache's and the expanded ones)."""

    @cute.jit
    def load_queries(self, views, q_s, request: Int32, g: Int32, first_row: Int32, tid: Int32):
        """Head g's [nope, rope] query unit of each token into shared memory; zeros after the unit
        (the keys' padding) and in the padding rows."""
        q = views[0]
        DV: cutlass.Constexpr = self.key_width // VECTOR
        R: cutlass.Constexpr = self.padded_rows
        T: cutlass.Constexpr = self.tokens
        U: cutlass.Constexpr = self.unit
        for j in cutlass.range_constexpr(-(-(R * DV) // self.threads)):
            c = tid + j * self.threads
            i, vec = c // DV, c % DV
            row = first_row + i
            if c < R * DV:
                real = (i < self.block_rows) & (row < T) & (vec * VECTOR < U)
                r = request * T + cutlass.select_(real, row, Int32(0))
                copy_g2s_zfill(at(q_s, i, vec * VECTOR),
                               at(q, r, g * U + cutlass.min(vec * VECTOR, U - VECTOR)), real)

    @cute.jit
    def load_tile(self, views, buffers, request: Int32, g: Int32, p0: Int32, lo: Int32, hi: Int32, tile: Int32,
                  tid: Int32, part: cutlass.Constexpr):
        """cp.async of head g's keys and values at positions lo + tile * N + [0, N) into buffer
        tile % stages, zeros past hi. Every row is the predecessor's: `part` 1 (before the wait)
        requests nothing."""
        if cutlass.const_expr(part != 1):
            _, pages, keys, values = views
            N: cutlass.Constexpr = self.tile
            P: cutlass.Constexpr = self.page_size
            k_s, v_s = buffers
            buffer = tile % self.stages
            for which in cutlass.range_constexpr(2):
                V: cutlass.Constexpr = (self.key_width if which == 0 else self.v) // VECTOR
                source = keys if which == 0 else values
                target = k_s if which == 0 else v_s
                for j in cutlass.range_constexpr(-(-(N * V) // self.threads)):
                    c = tid + j * self.threads
                    n, vec = c // V, c % V
                    position = lo + tile * N + n
                    if c < N * V:
                        real = position < hi
                        place = cutlass.select_(real, position, Int32(0))
                        copy_g2s_zfill(at(target, buffer, n, vec * VECTOR),
                                       at(source, pages[request, place // P], place % P, g, vec * VECTOR), real)
