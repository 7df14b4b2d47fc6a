"""The meaning of every `form` op, one function an op (docs/semantics.md, exactly).

numpy only, so that the GPU machine can use it as the kernels' reference without xDSL. Arithmetic
is fp32 throughout; values are never rounded to bf16 (element types are storage hints for the
kernels). Activations are [rows, width] with rows = batch * tokens (request b's token t is row
b * tokens + t). States are numpy arrays updated in place through the slot table: slots <= 0 are
padding (zero output rows, never written). A quantized activation is held as the fp32 values its
int8 words stand for (`quantize`).

Bad input raises `InterpretError`, a `ValueError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from lanec.runtime.dtypes import Q8_0_BLOCK as BLOCK  # q8_0 weights and int8 activations scale 32 values

F32 = np.float32


class InterpretError(ValueError):
    """Input the interpreter cannot give a meaning to (a one-line message)."""


def fail(message: str) -> None:
    raise InterpretError(message)


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=F32)


def heads_of(width: int, heads: int, what: str) -> int:
    if heads < 1 or width % heads:
        fail(f"{what}: width {width} does not split into {heads} heads")
    return width // heads


# ----------------------------------------------------------------------------------------------
# Elementwise


def sigmoid(x) -> np.ndarray:
    x = f32(x)
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for very negative x: sigmoid 0
        return (F32(1) / (F32(1) + np.exp(-x))).astype(F32)


def silu(x) -> np.ndarray:
    x = f32(x)
    return x * sigmoid(x)


def softplus(x) -> np.ndarray:
    return np.logaddexp(F32(0), f32(x)).astype(F32)


def add(a, b) -> np.ndarray:
    return f32(a) + f32(b)


def mul(a, b) -> np.ndarray:
    return f32(a) * f32(b)


def swiglu(g, u) -> np.ndarray:
    return silu(g) * f32(u)


# ----------------------------------------------------------------------------------------------
# Products


def embed(tokens, table) -> np.ndarray:
    tokens = np.asarray(tokens)
    vocab = np.shape(table)[0]
    bad = (tokens < 0) | (tokens >= vocab)
    if bad.any():
        fail(f"embed: token id {int(tokens[bad][0])} is outside the vocabulary of {vocab}")
    return f32(table[tokens.astype(np.int64)])  # only the tokens' rows (of a lazy table too)


def product(x, w) -> np.ndarray:
    x, w = f32(x), f32(w)
    if x.shape[-1] != w.shape[-1]:
        fail(f"product: weight rows take {w.shape[-1]} inputs; the activation gives {x.shape[-1]}")
    if x.ndim == 2:  # the weight's rows walked in order: OpenBLAS takes this 1.3-3x faster at decode's rows
        return np.ascontiguousarray((w @ x.T).T)
    return x @ w.T


def head_parts(x, heads: int, unit: int, offset: int, length: int, what: str) -> np.ndarray:
    """[rows, heads, length]: each head's part of its unit."""
    x = f32(x)
    rows, width = x.shape
    if width != heads * unit:
        fail(f"{what}: width {width} is not heads x unit = {heads} x {unit}")
    if offset < 0 or length < 1 or offset + length > unit:
        fail(f"{what}: part [{offset}, {offset + length}) does not fit a unit of {unit}")
    return x.reshape(rows, heads, unit)[:, :, offset : offset + length]


def product_part(x, w, heads: int, unit: int, offset: int, length: int) -> np.ndarray:
    """Head h reads x[:, h*unit+offset : +length] with its own rows w[h*n : (h+1)*n]."""
    parts = head_parts(x, heads, unit, offset, length, "product")
    w = f32(w)
    n = heads_of(w.shape[0], heads, "product weight rows")
    y = np.einsum("rhl,hnl->rhn", parts, w.reshape(heads, n, length))
    return y.reshape(parts.shape[0], heads * n)


def part(x, heads: int, unit: int, offset: int, length: int) -> np.ndarray:
    parts = head_parts(x, heads, unit, offset, length, "part")
    return parts.reshape(parts.shape[0], heads * length).copy()


def gated_product(x, gate, up) -> np.ndarray:
    return swiglu(product(x, gate), product(x, up))


# ----------------------------------------------------------------------------------------------
# Norms


def rsqrt(x) -> np.ndarray:
    return (F32(1) / np.sqrt(f32(x))).astype(F32)


def rmsnorm(x, w, eps: float, residual=None):
    """y = h * rsqrt(mean(h^2) + eps) * w with h = x (+ residual); returns y, or (y, h)."""
    h = f32(x) if residual is None else f32(x) + f32(residual)
    y = h * rsqrt(np.mean(h * h, axis=-1, keepdims=True) + F32(eps)) * f32(w)
    return y if residual is None else (y, h)


def per_head(x, heads: int, what: str) -> np.ndarray:
    x = f32(x)
    rows, width = x.shape
    return x.reshape(rows, heads, heads_of(width, heads, what))


def l2norm(x, heads: int, eps: float) -> np.ndarray:
    xh = per_head(x, heads, "l2norm")
    y = xh * rsqrt(np.sum(xh * xh, axis=-1, keepdims=True) + F32(eps))
    return y.reshape(xh.shape[0], -1)


def head_norm(x, w, heads: int, eps: float) -> np.ndarray:
    """Per head: x_h * rsqrt(mean(x_h^2) + eps) * w (w one head's size)."""
    xh = per_head(x, heads, "head_norm")
    y = xh * rsqrt(np.mean(xh * xh, axis=-1, keepdims=True) + F32(eps)) * f32(w)
    return y.reshape(xh.shape[0], -1)


def norm_gated(x, gate, w, heads: int, eps: float, activation: str) -> np.ndarray:
    """Per head: x_h * rsqrt(mean(x_h^2) + eps) * w * act(gate_h), act sigmoid or swish."""
    if activation not in ("sigmoid", "swish"):
        fail(f"norm_gated activation '{activation}': sigmoid or swish")
    xh = per_head(x, heads, "norm_gated")
    g = per_head(gate, heads, "norm_gated gate")
    act = sigmoid(g) if activation == "sigmoid" else silu(g)
    y = xh * rsqrt(np.mean(xh * xh, axis=-1, keepdims=True) + F32(eps)) * f32(w) * act
    return y.reshape(xh.shape[0], -1)


def rope(x, positions, heads: int, rotary: int, theta: float, scaling: str | None = None,
         factor: float | None = None, low_freq_factor: float | None = None, high_freq_factor: float | None = None,
         original_context: int | None = None, offset: int = 0, interleaved: int = 0, beta_fast: float | None = None,
         beta_slow: float | None = None, truncate: int | None = None,
         attention_factor: float | None = None) -> np.ndarray:
    """Rotate-half on each head's `rotary` values from `offset` (0: the first): pairs
    (i, i + rotary/2), or (2i, 2i + 1) when `interleaved`, turn by pos * inv_freq[i] (`frequencies`);
    with scaling "yarn", cos and sin are multiplied by `attention_factor` in fp32, as transformers'
    rotary embedding multiplies them by its `attention_scaling`."""
    xh = per_head(x, heads, "rope")
    if rotary < 2 or rotary % 2 or offset < 0 or offset + rotary > xh.shape[2]:
        fail(f"rope: rotary {rotary} must be even and, from offset {offset}, fit the head size {xh.shape[2]}")
    half = rotary // 2
    inv_freq = frequencies(rotary, theta, scaling, factor, low_freq_factor, high_freq_factor, original_context,
                           beta_fast, beta_slow, truncate)
    angle = f32(positions)[:, None] * inv_freq[None, :]  # [rows, half]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    if scaling == "yarn":
        if attention_factor is None:
            fail("rope: scaling 'yarn' needs attention_factor")
        cos, sin = cos * F32(attention_factor), sin * F32(attention_factor)
    y = xh.copy()
    turned = np.arange(offset, offset + rotary)
    first, second = (turned[0::2], turned[1::2]) if interleaved else (turned[:half], turned[half:])
    lo, hi = xh[:, :, first], xh[:, :, second]
    y[:, :, first] = lo * cos - hi * sin
    y[:, :, second] = hi * cos + lo * sin
    return y.reshape(xh.shape[0], -1)


def frequencies(rotary: int, theta: float, scaling: str | None = None, factor: float | None = None,
                low_freq_factor: float | None = None, high_freq_factor: float | None = None,
                original_context: int | None = None, beta_fast: float | None = None, beta_slow: float | None = None,
                truncate: int | None = None) -> np.ndarray:
    """inv_freq[i] = theta^(-2i/rotary), fp32; with scaling "yarn", `yarn_frequencies`; with
    scaling "llama3", Llama 3.1's frequencies as
    transformers' `_compute_llama3_parameters` makes them (fp32, its order of operations): a
    wavelength 2 pi / inv_freq longer than original_context / low_freq_factor is slowed by
    `factor`, one shorter than original_context / high_freq_factor kept, and one between mixed
    by smooth = (original_context / wavelength - low) / (high - low):
    (1 - smooth) * inv_freq / factor + smooth * inv_freq."""
    # theta^(2i/rotary) correctly rounded to fp32 (through fp64): numpy's vectorised fp32 power
    # differs by an ulp between CPUs, which moves an angle at position 32k by 3e-3
    exponent = np.arange(0, rotary, 2, dtype=F32) / F32(rotary)
    pos_freqs = (np.float64(F32(theta)) ** exponent.astype(np.float64)).astype(F32)
    inv_freq = F32(1) / pos_freqs
    if scaling is None:
        return inv_freq
    if scaling == "yarn":
        if None in (factor, original_context, beta_fast, beta_slow, truncate):
            fail("rope: scaling 'yarn' needs factor, original_context, beta_fast, beta_slow and truncate")
        return yarn_frequencies(pos_freqs, rotary, theta, factor, original_context, beta_fast, beta_slow,
                                bool(truncate))
    if scaling != "llama3" or None in (factor, low_freq_factor, high_freq_factor, original_context):
        fail(f"rope: scaling {scaling!r} needs llama3's factor, low_freq_factor, high_freq_factor and "
             "original_context")
    low_wavelength = original_context / low_freq_factor
    high_wavelength = original_context / high_freq_factor
    wavelength = F32(2 * np.pi) / inv_freq
    slowed = np.where(wavelength > F32(low_wavelength), inv_freq / F32(factor), inv_freq)
    smooth = (F32(original_context) / wavelength - F32(low_freq_factor)) / F32(high_freq_factor - low_freq_factor)
    smoothed = (F32(1) - smooth) * slowed / F32(factor) + smooth * slowed
    medium = ~(wavelength < F32(high_wavelength)) & ~(wavelength > F32(low_wavelength))
    return np.where(medium, smoothed, slowed).astype(F32)


def yarn_frequencies(pos_freqs: np.ndarray, rotary: int, theta: float, factor: float, original_context: int,
                     beta_fast: float, beta_slow: float, truncate: bool) -> np.ndarray:
    """YaRN's frequencies as transformers' `_compute_yarn_parameters` makes them, step by step:
    from `pos_freqs` = theta^(2i/rotary) (fp32), 1 / pos_freqs is the extrapolated frequency and
    1 / (factor * pos_freqs) the interpolated one (fp32); the correction range [low, high]
    is the dimensions at which a wavelength turns beta_fast and beta_slow times over
    original_context (fp64: rotary ln(original_context / (2 pi beta)) / (2 ln theta), floored
    and ceiled where `truncate`, clipped to [0, rotary - 1]); ramp_i = clamp((i - low) /
    (high - low), 0, 1) (high + 0.001 where they meet), fp32; extrapolation weight e = 1 - ramp;
    result interpolated * (1 - e) + extrapolated * e, fp32."""
    def correction_dim(rotations: float) -> float:
        return (rotary * math.log(original_context / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    extrapolation = F32(1) / pos_freqs
    interpolation = F32(1) / (F32(factor) * pos_freqs)
    ramp = np.clip((np.arange(rotary // 2, dtype=F32) - F32(low)) / F32(high - low), F32(0), F32(1))
    extrapolation_weight = F32(1) - ramp
    return (interpolation * (F32(1) - extrapolation_weight) + extrapolation * extrapolation_weight).astype(F32)


# ----------------------------------------------------------------------------------------------
# Slots: which state a request reads and where it writes


class Request(NamedTuple):
    index: int  # b
    accepted: int  # a: 1 for a plain decode step
    read: int  # the recurrent state comes from this slot
    writes: tuple[int, ...]  # token t's state goes to writes[t] where > 0
    conv: int  # the conv state's slot (slots[b, 0])


def requests(slots, tokens: int, accepted, rows: int, state_slots: int, what: str) -> list[Request | None]:
    """One entry a request (None: padding), validated: accepted in 1..tokens, slots inside the
    state, active requests owning distinct slots."""
    slots = np.asarray(slots)
    if tokens < 1 or rows % tokens:
        fail(f"{what}: {rows} rows are not whole requests of {tokens} tokens")
    batch = rows // tokens
    if slots.ndim not in (1, 2) or slots.shape[0] != batch:
        fail(f"{what}: the slot table must be [{batch}] or [{batch}, n], got {list(slots.shape)}")
    table = slots.reshape(batch, -1).astype(np.int64)
    if tokens > 1:
        if table.shape[1] < tokens:
            fail(f"{what}: a step of {tokens} tokens needs [batch, >= {tokens}] slots, "
                 f"got {list(slots.shape)}")
        if accepted is None:
            fail(f"{what}: a speculative step ({tokens} tokens) needs accepted counts")
        counts = np.asarray(accepted).astype(np.int64).reshape(-1)
        if counts.shape != (batch,):
            fail(f"{what}: accepted counts must be [{batch}], got {list(np.shape(accepted))}")
        outside = (counts < 1) | (counts > tokens)
        if outside.any():
            fail(f"{what}: accepted count {int(counts[outside][0])} is outside 1..{tokens}")
    owner: dict[int, int] = {}
    plan: list[Request | None] = []
    for b in range(batch):
        a = 1 if tokens == 1 else int(counts[b])
        read = int(table[b, a - 1])
        if read <= 0:
            plan.append(None)
            continue
        writes = (read,) if tokens == 1 else tuple(int(s) for s in table[b, :tokens])
        conv = read if tokens == 1 else int(table[b, 0])
        if conv <= 0:
            fail(f"{what}: request {b} is active (slot {read}) but its conv slot slots[{b}, 0] is {conv}")
        for s in {read, conv, *writes}:
            if s >= state_slots:
                fail(f"{what}: slot {s} of request {b} is outside the state's {state_slots} slots")
            if s > 0 and owner.setdefault(s, b) != b:
                fail(f"{what}: requests {owner[s]} and {b} share slot {s}")
        plan.append(Request(b, a, read, writes, conv))
    return plan


# ----------------------------------------------------------------------------------------------
# Linear attention: conv, gate, delta rule, the fused KDA op


def conv(x, state, w, slots, offset: int, tokens: int = 1, accepted=None, bias=None,
         activation: str = "silu", norm_heads: int | None = None,
         norm_eps: float | None = None) -> np.ndarray:
    """Short causal conv of channels [offset, offset + C) of `state` [slot, channels, W-2+tokens].
    Token t's window is the last W values of taps ++ x_0..x_t, taps = state[c, a-1 : a-1+W-1];
    afterwards the state is taps[1:] ++ x_0..x_{q-1}."""
    x, w = f32(x), f32(w)
    rows, channels = x.shape
    if w.ndim != 2 or w.shape[0] != channels:
        fail(f"conv: the weight must be [{channels}, width], got {list(w.shape)}")
    width = w.shape[1]
    taps = width - 1 + tokens - 1
    if state.ndim != 3 or offset < 0 or offset + channels > state.shape[1] or state.shape[2] != taps:
        fail(f"conv: the state must be [slot, >= {offset + channels}, {taps}], got {list(state.shape)}")
    if activation not in ("silu", "none"):
        fail(f"conv activation '{activation}': silu or none")
    y = np.zeros((rows, channels), F32)
    span = slice(offset, offset + channels)
    for req in requests(slots, tokens, accepted, rows, state.shape[0], "conv"):
        if req is None:
            continue
        first = req.index * tokens
        kept = f32(state[req.conv, span, :])[:, req.accepted - 1 : req.accepted - 1 + width - 1]
        sequence = np.concatenate([kept, x[first : first + tokens].T], axis=1)  # [C, W-1+q]
        for t in range(tokens):
            y[first + t] = np.sum(w * sequence[:, t : t + width], axis=1)
        if bias is not None:
            y[first : first + tokens] += f32(bias)
        if activation == "silu":
            y[first : first + tokens] = silu(y[first : first + tokens])
        state[req.conv, span, :] = sequence[:, 1:]
    if norm_heads is not None:
        if norm_eps is None:
            fail("conv: the L2 norm epilogue needs norm_eps")
        y = l2norm(y, norm_heads, norm_eps)
    return y


def kda_gate(g, a_log, dt_bias, heads: int, form: str, lower_bound: float | None = None) -> np.ndarray:
    """The decay: lower_bound: exp(lb * sigmoid(exp(A_log[h]) * (g + dt_bias)));
    softplus: exp(-exp(A_log[h]) * softplus(g + dt_bias)); h = the column's head."""
    g = f32(g)
    size = heads_of(g.shape[1], heads, "kda_gate")
    a = np.repeat(np.exp(f32(a_log)), size)
    raw = g + f32(dt_bias)
    if form == "lower_bound":
        if lower_bound is None:
            fail("kda_gate: the lower_bound form needs lower_bound")
        return np.exp(F32(lower_bound) * sigmoid(a * raw))
    if form == "softplus":
        return np.exp(-a * softplus(raw))
    fail(f"kda_gate form '{form}': lower_bound or softplus")


def delta_rule(q, k, v, decay, beta, state, slots, heads: int, key_heads: int, scale: float,
               tokens: int = 1, accepted=None) -> np.ndarray:
    """The gated delta rule per value head (state [slot, head, value, key], f32), token by token:
    S *= decay; S += outer(beta * (v - S k), k); o = S (scale * q)."""
    q, k, v, decay, beta = f32(q), f32(k), f32(v), f32(decay), f32(beta)
    rows = q.shape[0]
    if key_heads < 1 or heads % key_heads:
        fail(f"delta_rule: {heads} value heads do not share {key_heads} key heads evenly")
    key = heads_of(q.shape[1], key_heads, "delta_rule q")
    value = heads_of(v.shape[1], heads, "delta_rule v")
    if state.ndim != 4 or state.shape[1:] != (heads, value, key):
        fail(f"delta_rule: the state must be [slot, {heads}, {value}, {key}], got {list(state.shape)}")
    share = np.arange(heads) // (heads // key_heads)  # value head -> key head
    qh = q.reshape(rows, key_heads, key)[:, share] * F32(scale)
    kh = k.reshape(rows, key_heads, key)[:, share]
    vh = v.reshape(rows, heads, value)
    if decay.shape[1] == heads * key:
        dh = decay.reshape(rows, heads, 1, key)
    elif decay.shape[1] == heads:
        dh = decay.reshape(rows, heads, 1, 1)
    else:
        fail(f"delta_rule: the decay is per key [{rows}, {heads * key}] or per head [{rows}, {heads}]")
    out = np.zeros((rows, heads, value), F32)
    for req in requests(slots, tokens, accepted, rows, state.shape[0], "delta_rule"):
        if req is None:
            continue
        s = f32(state[req.read]).copy()  # [head, value, key]
        for t in range(tokens):
            r = req.index * tokens + t
            s *= dh[r]
            u = beta[r][:, None] * (vh[r] - np.einsum("hvk,hk->hv", s, kh[r]))
            s += u[:, :, None] * kh[r][:, None, :]
            out[r] = np.einsum("hvk,hk->hv", s, qh[r])
            if tokens > 1 and req.writes[t] > 0:
                state[req.writes[t]] = s
        if tokens == 1:
            state[req.read] = s
    return out.reshape(rows, heads * value)


def kda(q, k, v, conv_q, conv_k, conv_v, conv_state, f_a, f_b, a_log, dt_bias, beta_raw, gate,
        norm_weight, state, slots, heads: int, form: str, scale: float, l2_eps: float, eps: float,
        lower_bound: float | None = None, tokens: int = 1, accepted=None,
        biases: Sequence | None = None, gate_b=None) -> np.ndarray:
    """KDA decode whole: conv of q, k, v (channels 0, dim, 2 dim of one conv state, SiLU, biases
    if given); l2norm of q and k; decay = kda_gate(f_a @ f_b^T); beta = sigmoid(beta_raw); the
    delta rule; the sigmoid-gated per-head RMS norm, its gate `gate` or, with `gate_b`, the
    product of `gate` by `gate_b`."""
    dim = f32(q).shape[1]
    bias = list(biases or ()) or [None] * 3
    if len(bias) != 3:
        fail(f"kda: conv biases are none or one each for q, k and v, got {len(bias)}")
    common = dict(tokens=tokens, accepted=accepted, activation="silu")
    qc = conv(q, conv_state, conv_q, slots, 0, bias=bias[0], norm_heads=heads, norm_eps=l2_eps, **common)
    kc = conv(k, conv_state, conv_k, slots, dim, bias=bias[1], norm_heads=heads, norm_eps=l2_eps, **common)
    vc = conv(v, conv_state, conv_v, slots, 2 * dim, bias=bias[2], **common)
    decay = kda_gate(product(f_a, f_b), a_log, dt_bias, heads, form, lower_bound)
    o = delta_rule(qc, kc, vc, decay, sigmoid(beta_raw), state, slots, heads, heads, scale, tokens, accepted)
    if gate_b is not None:  # fold-gate-product's: fp32 math, as f_b's projection (a kernel rounds both)
        gate = product(gate, gate_b)
    return norm_gated(o, gate, norm_weight, heads, eps, "sigmoid")


# ----------------------------------------------------------------------------------------------
# Attention over paged caches


def cache_places(pages, positions, tokens: int, page_size: int, cache_pages: int, what: str):
    """(request of each row, page and offset of every cached position 0..max, validated)."""
    pages = np.asarray(pages).astype(np.int64)
    positions = np.asarray(positions).astype(np.int64)
    rows = positions.shape[0]
    if tokens < 1 or rows % tokens:
        fail(f"{what}: {rows} rows are not whole requests of {tokens} tokens")
    batch = rows // tokens
    if pages.ndim != 2 or pages.shape[0] != batch:
        fail(f"{what}: pages must be [{batch}, n], got {list(pages.shape)}")
    if (positions < 0).any():
        fail(f"{what}: position {int(positions[positions < 0][0])} is negative")
    request = np.arange(rows) // tokens
    reach = positions.max() if rows else 0
    span = np.arange(reach + 1)

    def places(b: int, upto: int) -> tuple[np.ndarray, np.ndarray]:
        column = span[: upto + 1] // page_size
        if column[-1] >= pages.shape[1]:
            fail(f"{what}: request {b} position {upto} needs page column {column[-1]}; "
                 f"the page table has {pages.shape[1]}")
        page = pages[b, column]
        if ((page < 0) | (page >= cache_pages)).any():
            bad = int(page[(page < 0) | (page >= cache_pages)][0])
            fail(f"{what}: request {b} uses page {bad}, outside the cache's {cache_pages} pages")
        return page, span[: upto + 1] % page_size

    return request, places


def attention(q, k, v, k_cache, v_cache, pages, positions, heads: int, kv_heads: int, scale: float,
              tokens: int = 1) -> np.ndarray:
    """GQA over a paged cache: every row's k, v written at its position first; then row r attends
    to positions 0..pos[r] of its request, query head h reading KV head h // (heads / kv_heads)."""
    q, k, v = f32(q), f32(k), f32(v)
    rows = q.shape[0]
    if kv_heads < 1 or heads % kv_heads:
        fail(f"attention: {heads} query heads do not share {kv_heads} KV heads evenly")
    size = heads_of(q.shape[1], heads, "attention q")
    vsize = heads_of(v.shape[1], kv_heads, "attention v")
    page_size = k_cache.shape[1]
    request, places = cache_places(pages, positions, tokens, page_size, k_cache.shape[0], "attention")
    positions = np.asarray(positions).astype(np.int64)
    for r in range(rows):
        page, at = places(request[r], positions[r])
        k_cache[page[-1], at[-1]] = k[r].reshape(kv_heads, size)
        v_cache[page[-1], at[-1]] = v[r].reshape(kv_heads, vsize)
    share = np.arange(heads) // (heads // kv_heads)
    out = np.zeros((rows, heads, vsize), F32)
    for r in range(rows):
        page, at = places(request[r], positions[r])
        keys = f32(k_cache[page, at])[:, share]  # [n, heads, size]
        values = f32(v_cache[page, at])[:, share]
        scores = F32(scale) * np.einsum("hd,nhd->hn", q[r].reshape(heads, size), keys)
        out[r] = np.einsum("hn,nhd->hd", softmax(scores), values)
    return out.reshape(rows, heads * vsize)


def softmax(x) -> np.ndarray:
    x = f32(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def latent_attention(qr, latent, k_rope, cache, kv_b, pages, positions, heads: int, nope: int, rope: int,
                     lora: int, v: int, scale: float, tokens: int = 1) -> np.ndarray:
    """MLA: each row's cache row [latent, k_rope] written first; head h's key of position j is
    [W_k,h c_j, kr_j] and its value W_v,h c_j (kv_b's rows for head h: nope key rows, v value rows);
    the query is head h's [nope, rope] unit of qr."""
    qr, latent, k_rope, kv_b = f32(qr), f32(latent), f32(k_rope), f32(kv_b)
    rows = qr.shape[0]
    if qr.shape[1] != heads * (nope + rope) or kv_b.shape != (heads * (nope + v), lora):
        fail(f"latent_attention: qr must be [rows, {heads * (nope + rope)}] and kv_b "
             f"[{heads * (nope + v)}, {lora}], got {list(qr.shape)} and {list(kv_b.shape)}")
    if cache.shape[2] != lora + rope:
        fail(f"latent_attention: cache rows are {lora} + {rope} wide, got {cache.shape[2]}")
    expand = kv_b.reshape(heads, nope + v, lora)
    w_key, w_value = expand[:, :nope], expand[:, nope:]
    request, places = cache_places(pages, positions, tokens, cache.shape[1], cache.shape[0],
                                   "latent_attention")
    positions = np.asarray(positions).astype(np.int64)
    for r in range(rows):
        page, at = places(request[r], positions[r])
        cache[page[-1], at[-1]] = np.concatenate([latent[r], k_rope[r]])
    out = np.zeros((rows, heads, v), F32)
    for r in range(rows):
        page, at = places(request[r], positions[r])
        held = f32(cache[page, at])  # [n, lora + rope]
        c, kr = held[:, :lora], held[:, lora:]
        query = qr[r].reshape(heads, nope + rope)
        # q . (W_k c_j) = (W_k^T q) . c_j and sum_j p_j W_v c_j = W_v (sum_j p_j c_j): the same
        # products in another order (equal up to fp32 rounding), heads x lora a position rather
        # than heads x nope x lora, on BLAS: a real-size check's 16k-position caches in seconds
        absorbed = np.matmul(query[:, None, :nope], w_key)[:, 0]  # [heads, lora]
        scores = absorbed @ c.T + query[:, nope:] @ kr.T  # [heads, n]
        mixed = softmax(F32(scale) * scores) @ c  # [heads, lora]
        out[r] = np.matmul(w_value, mixed[:, :, None])[:, :, 0]
    return out.reshape(rows, heads * v)


# ----------------------------------------------------------------------------------------------
# Mixture, quantize, argmax


def mixture(x, router, gate, up, down, top_k: int, scoring: str, renormalize, routed_scaling: float,
            correction=None, shared: Sequence | None = (), rows=None, groups: int | None = None,
            topk_groups: int | None = None, hint=None) -> np.ndarray:
    """Router scores, top-k of scores (+ correction), weights the chosen scores (renormalized,
    times routed_scaling), each expert down @ swiglu(gate @ x, up @ x); plus a shared expert
    (times sigmoid(x . gate_row) if given). With `rows`: result r lands at row rows[r]
    (rows[r] < 0 drops it), other rows zero. With `groups` (grouped top-k): the experts in
    `groups` equal groups ranked by the sum of their top-2 scores (+ correction), only the best
    `topk_groups` groups' experts chosen from. Ties: the lower group, the lower expert."""
    x = f32(x)  # gate, up and down are indexed by expert: a lazy weight makes only the chosen
    shared = list(shared or ())
    n, experts = x.shape[0], np.shape(gate)[0]
    if not 1 <= top_k <= experts:
        fail(f"mixture: top_k {top_k} is outside 1..{experts} experts")
    scores, choice = routing_choice(x, router, top_k, scoring, correction, groups, topk_groups)
    chosen = np.argsort(-choice, axis=-1, kind="stable")[:, :top_k]  # ties: the lower expert
    if hint is not None:
        chosen = near_ties(choice, chosen, hint)
    weights = np.take_along_axis(scores, chosen, axis=-1)
    if renormalize:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    weights = weights * F32(routed_scaling)
    out = np.zeros_like(x)

    def expert(e: int) -> tuple[np.ndarray, np.ndarray]:
        at, which = np.nonzero(chosen == e)
        hidden = swiglu(product(x[at], gate[e]), product(x[at], up[e]))
        return at, weights[at, which][:, None] * product(hidden, down[e])

    # each chosen expert's rows on a thread of its own (a real-size check makes 3 x 2.4M seeded
    # values an expert: numpy releases the GIL), summed in expert order as one thread would. BLAS
    # runs one thread a call meanwhile: 16 expert threads each calling a 16-thread OpenBLAS took
    # the H200 machine's batch-64 check past 400 s, against 167 s with OPENBLAS_NUM_THREADS=1.
    with one_blas_thread(), ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as pool:
        for at, part in pool.map(expert, np.unique(chosen).tolist()):
            out[at] += part
    if len(shared) not in (0, 3, 4):
        fail(f"mixture: a shared expert is gate, up, down (and a gate row), got {len(shared)} weights")
    if shared:
        expert = swiglu(product(x, shared[0]), product(x, shared[1])) @ f32(shared[2]).T
        if len(shared) == 4:
            expert = expert * sigmoid(product(x, shared[3]))
        out = out + expert
    if rows is None:
        return out
    rows = np.asarray(rows).astype(np.int64)
    if rows.shape != (n,) or (rows >= n).any():
        fail(f"mixture: scatter rows must be [{n}] below {n}, got {rows.tolist()}")
    scattered = np.zeros_like(out)
    keep = rows >= 0
    scattered[rows[keep]] = out[keep]
    return scattered


def one_blas_thread():
    """A context in which BLAS runs one thread a call (threadpoolctl, a dependency). Where it is
    not installed (a GPU machine given only the wheels it was carried) BLAS keeps its threads:
    the same values, only slower on many cores."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def routing_choice(x, router, top_k: int, scoring: str, correction=None, groups: int | None = None,
                   topk_groups: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A mixture's router: the scores (which weigh the chosen experts) and what the experts are
    chosen by (the scores + correction, -inf outside the kept groups with `groups`)."""
    logits = product(f32(x), router)
    if scoring == "sigmoid":
        scores = sigmoid(logits)
    elif scoring == "softmax":
        scores = softmax(logits)
    else:
        fail(f"mixture scoring '{scoring}': sigmoid or softmax")
    choice = scores if correction is None else scores + f32(correction)
    if groups is not None:
        choice = grouped_choice(choice, groups, topk_groups or 0, top_k)
    return scores, choice


def routing_margin(x, router, top_k: int, scoring: str, correction=None, groups: int | None = None,
                   topk_groups: int | None = None) -> float:
    """How far a router's choice is from a tie, the smallest over its rows, as a share of the row's
    largest |score + correction| (`near_ties`' scale): the k-th chosen expert's lead over the best
    one left out, and with `groups` the last kept group's lead over the best group left out."""
    scores, kept = routing_choice(x, router, top_k, scoring, correction, groups, topk_groups)
    choice = scores if correction is None else scores + f32(correction)
    scale = np.maximum(np.abs(choice).max(axis=-1), F32(1e-30))
    ranked = -np.sort(-kept, axis=-1)
    margin = np.full(len(scale), np.inf)
    if top_k < kept.shape[-1]:
        margin = (ranked[:, top_k - 1] - ranked[:, top_k]) / scale
    if groups is not None and topk_groups is not None and topk_groups < groups:
        rank = -np.sort(-np.sort(choice.reshape(len(choice), groups, -1), axis=-1)[:, :, -2:].sum(axis=-1), axis=-1)
        margin = np.minimum(margin, (rank[:, topk_groups - 1] - rank[:, topk_groups]) / scale)
    return float(margin.min()) if margin.size else float("inf")


# A router's choice from another computation of the same step (the GPU's) is a near tie of this
# one where each of its experts scores within this share of the row's largest |score| of the
# k-th best: inputs that differ by bf16 rounding flips move scores by about 1e-3 of their scale.
ROUTING_TIE = 1e-2


class Hint(NamedTuple):
    """Another computation's router choice that a mixture follows through near ties (`near_ties`):
    expert ids [rows, top_k]; `tie`, the margin, a share of each row's largest |score|; `farther`,
    when given, receives the rows whose hint was past it (those keep the mixture's own choice)."""

    ids: np.ndarray
    tie: float = ROUTING_TIE
    farther: list | None = None


def near_ties(choice: np.ndarray, chosen: np.ndarray, hint) -> np.ndarray:
    """`chosen`, with each row replaced by `hint`'s where the hinted experts are distinct and
    each scores (in `choice`) within the hint's tie (ROUTING_TIE for bare ids) of the row's k-th
    best: the same choice up to near ties. Rows whose hint is farther keep their own choice (and
    a check then differs)."""
    hint = hint if isinstance(hint, Hint) else Hint(np.asarray(hint), ROUTING_TIE)
    ids = np.asarray(hint.ids)
    if ids.shape != chosen.shape:
        return chosen
    experts = choice.shape[1]
    out = chosen.copy()
    kth = np.take_along_axis(choice, chosen[:, -1:], axis=1)[:, 0]
    scale = np.abs(np.where(np.isfinite(choice), choice, 0)).max(axis=1)
    for r in range(chosen.shape[0]):
        row = ids[r].astype(np.int64)
        if row.min() < 0 or row.max() >= experts or len(set(row.tolist())) != len(row):
            continue
        if np.all(choice[r, row] >= kth[r] - hint.tie * scale[r]):
            out[r] = row
        elif hint.farther is not None:
            hint.farther.append(r)
    return out


def grouped_choice(choice: np.ndarray, groups: int, topk_groups: int, top_k: int) -> np.ndarray:
    """`choice` with every expert outside the best `topk_groups` groups at -inf: a group's rank is
    the sum of its two largest values (ties: the lower group)."""
    n, experts = choice.shape
    if groups < 1 or experts % groups or experts // groups < 2 or not 1 <= topk_groups <= groups \
            or top_k > topk_groups * (experts // groups):
        fail(f"mixture: grouped top-k of {experts} experts in {groups} groups, the best {topk_groups} kept, "
             f"cannot choose {top_k}: groups of at least 2 experts, 1..groups kept, top_k within the kept")
    grouped = choice.reshape(n, groups, experts // groups)
    rank = np.sort(grouped, axis=-1)[:, :, -2:].sum(axis=-1, dtype=F32)  # [n, groups]
    kept = np.argsort(-rank, axis=-1, kind="stable")[:, :topk_groups]
    mask = np.zeros((n, groups), bool)
    np.put_along_axis(mask, kept, True, axis=-1)
    return np.where(np.repeat(mask, experts // groups, axis=-1), choice, F32(-np.inf)).astype(F32)


def blocks(x, what: str) -> np.ndarray:
    x = f32(x)
    if x.shape[-1] % BLOCK:
        fail(f"{what}: width {x.shape[-1]} is not whole {BLOCK}-value blocks")
    return x.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)


def quantize(x, words: int) -> np.ndarray:
    """The fp32 values of an int8 activation: per block s = max|x| / 127, q1 = rint(x / s); two
    words add q2 = clip(rint((x - q1 s) / (s / 254)), -127, 127) times s / 254."""
    if words not in (1, 2):
        fail(f"quantize to {words} words: one or two int8 words a value")
    xb = blocks(x, "quantize")
    s = np.max(np.abs(xb), axis=-1, keepdims=True) / F32(127)
    safe = np.where(s > 0, s, F32(1))  # an all-zero block stays zero
    q1 = np.rint(xb / safe)
    value = q1 * s
    if words == 2:
        s2 = s / F32(254)
        q2 = np.clip(np.rint((xb - value) / (safe / F32(254))), -127, 127)
        value = value + q2 * s2
    return value.reshape(np.shape(x)).astype(F32)


def q8_0(w) -> np.ndarray:
    """The values a Q8_0 checkpoint holds: per block d = fp16(max|w| / 127),
    q = clip(rint(w / d), -127, 127), value q * d."""
    wb = blocks(w, "q8_0")
    d = (np.max(np.abs(wb), axis=-1, keepdims=True) / F32(127)).astype(np.float16).astype(F32)
    if not np.isfinite(d).all():
        fail("q8_0: a block's scale overflows fp16")
    safe = np.where(d > 0, d, F32(1))
    q = np.clip(np.rint(wb / safe), -127, 127)
    return (q * d).reshape(np.shape(w)).astype(F32)


def all_reduce(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The sum of a tensor over the ranks of a sharded step, in rank order (fp32)."""
    shapes = {np.shape(p) for p in parts}
    if len(shapes) != 1:
        fail(f"all_reduce: the ranks' tensors disagree on shape ({', '.join(str(list(s)) for s in shapes)})")
    total = f32(parts[0]).copy()
    for part in parts[1:]:
        total += f32(part)
    return total


def argmax(x) -> np.ndarray:
    return np.argmax(f32(x), axis=-1).astype(np.int32)
