"""Every op of the interpreter against an independent computation written here (float64 loops,
complex rotations, explicit softmax), on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

from lanec.interp import ops


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.name)) % 2**32)


def normal(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def close(got, want, tol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    assert np.abs(want).max() > 0
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < tol, f"relative error {err}"


def sigmoid(x):
    return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


# ----------------------------------------------------------------------------------------------
# Elementwise, products, norms


def test_elementwise(rng):
    a, b = normal(rng, 3, 40), normal(rng, 3, 40)
    close(ops.add(a, b), a.astype(np.float64) + b)
    close(ops.mul(a, b), a.astype(np.float64) * b)
    close(ops.sigmoid(a), sigmoid(a))
    close(ops.silu(a), a * sigmoid(a))
    close(ops.swiglu(a, b), a * sigmoid(a) * b)
    assert ops.sigmoid(np.array([-200.0, 200.0])).tolist() == [0.0, 1.0]


def test_embed_and_argmax(rng):
    table = normal(rng, 10, 6)
    tokens = np.array([3, 0, 9, 3], np.int32)
    got = ops.embed(tokens, table)
    for r, t in enumerate(tokens):
        assert np.array_equal(got[r], table[t])
    with pytest.raises(ops.InterpretError, match="token id 10 is outside the vocabulary of 10"):
        ops.embed(np.array([1, 10]), table)
    x = np.array([[1.0, 5.0, 5.0, 2.0], [-3.0, -1.0, -2.0, -1.0]], np.float32)
    assert ops.argmax(x).tolist() == [1, 1]  # the first of equal largest values
    assert ops.argmax(x).dtype == np.int32


def test_products(rng):
    x, w, g = normal(rng, 3, 24), normal(rng, 10, 24), normal(rng, 10, 24)
    want = np.array([[sum(float(x[r, i]) * float(w[o, i]) for i in range(24)) for o in range(10)] for r in range(3)])
    close(ops.product(x, w), want)
    gate = np.array([[np.dot(x[r].astype(np.float64), g[o]) for o in range(10)] for r in range(3)])
    close(ops.gated_product(x, g, w), gate * sigmoid(gate) * want)


def test_per_head_part_product(rng):
    heads, unit, offset, length, n = 3, 12, 4, 6, 5
    x, w = normal(rng, 2, heads * unit), normal(rng, heads * n, length)
    want = np.zeros((2, heads * n))
    for r in range(2):
        for h in range(heads):
            piece = x[r, h * unit + offset : h * unit + offset + length].astype(np.float64)
            for j in range(n):
                want[r, h * n + j] = piece @ w[h * n + j]
    close(ops.product_part(x, w, heads, unit, offset, length), want)
    part = ops.part(x, heads, unit, offset, length)
    for h in range(heads):
        for j in range(length):
            assert np.array_equal(part[:, h * length + j], x[:, h * unit + offset + j])
    with pytest.raises(ops.InterpretError, match=r"part \[10, 16\) does not fit a unit of 12"):
        ops.part(x, heads, unit, 10, 6)


def test_rmsnorm(rng):
    x, res, w = normal(rng, 4, 32), normal(rng, 4, 32), normal(rng, 32, scale=0.1) + 1
    want = np.array([row / np.sqrt(np.mean(row.astype(np.float64) ** 2) + 1e-6) * w for row in x])
    close(ops.rmsnorm(x, w, 1e-6), want)
    y, h = ops.rmsnorm(x, w, 1e-6, residual=res)
    s = x.astype(np.float64) + res
    close(h, s)
    close(y, np.array([row / np.sqrt(np.mean(row**2) + 1e-6) * w for row in s]))


def test_l2norm_and_norm_gated(rng):
    heads, size = 3, 8
    x, gate, w = normal(rng, 2, heads * size), normal(rng, 2, heads * size), 1 + normal(rng, size, scale=0.1)
    l2 = np.zeros((2, heads * size))
    sig = np.zeros_like(l2)
    swish = np.zeros_like(l2)
    for r in range(2):
        for h in range(heads):
            c = slice(h * size, (h + 1) * size)
            xh = x[r, c].astype(np.float64)
            l2[r, c] = xh / np.sqrt((xh**2).sum() + 1e-6)
            rms = xh / np.sqrt((xh**2).mean() + 1e-5) * w
            sig[r, c] = rms * sigmoid(gate[r, c])
            swish[r, c] = rms * gate[r, c] * sigmoid(gate[r, c])
    close(ops.l2norm(x, heads, 1e-6), l2)
    close(ops.norm_gated(x, gate, w, heads, 1e-5, "sigmoid"), sig)
    close(ops.norm_gated(x, gate, w, heads, 1e-5, "swish"), swish)


def test_rope_is_a_complex_rotation(rng):
    heads, size, rotary, theta = 2, 16, 8, 10000.0
    x, positions = normal(rng, 3, heads * size), np.array([0, 7, 300], np.int32)
    got = ops.rope(x, positions, heads, rotary, theta)
    half = rotary // 2
    for r, pos in enumerate(positions):
        for h in range(heads):
            base = h * size
            z = x[r, base : base + half] + 1j * x[r, base + half : base + rotary].astype(np.float64)
            turned = z * np.exp(1j * pos * theta ** (-2 * np.arange(half) / rotary))
            np.testing.assert_allclose(got[r, base : base + half], turned.real, atol=2e-4)
            np.testing.assert_allclose(got[r, base + half : base + rotary], turned.imag, atol=2e-4)
            assert np.array_equal(got[r, base + rotary : base + size], x[r, base + rotary : base + size])
    assert np.array_equal(got[0], x[0])  # position 0 does not turn


# ----------------------------------------------------------------------------------------------
# Conv and gate


@pytest.mark.parametrize("tokens", [1, 3])
def test_conv_by_explicit_window(rng, tokens):
    channels, width, offset, slots_n = 8, 4, 8, 6
    rows = 3 * tokens
    x, w, bias = normal(rng, rows, channels), normal(rng, channels, width, scale=0.5), normal(rng, channels)
    taps = width - 2 + tokens
    state0 = normal(rng, slots_n, 24, taps)
    if tokens == 1:
        slots, accepted = np.array([2, -1, 5], np.int32), None
        plan = {0: (2, 1), 2: (5, 1)}  # request -> (conv slot, accepted)
    else:
        slots, accepted = np.array([[3, 1, 4], [0, -1, 2], [5, 0, -1]], np.int32), np.array([3, 2, 1], np.int32)
        plan = {0: (3, 3), 2: (5, 1)}
    state = state0.copy()
    got = ops.conv(x, state, w, slots, offset, tokens=tokens, accepted=accepted, bias=bias,
                   norm_heads=2, norm_eps=1e-6)
    want = np.zeros((rows, channels))
    want_state = state0.astype(np.float64).copy()
    for b, (slot, a) in plan.items():
        for c in range(channels):
            kept = [float(state0[slot, offset + c, a - 1 + i]) for i in range(width - 1)]
            inputs = [float(x[b * tokens + t, c]) for t in range(tokens)]
            for t in range(tokens):
                window = (kept + inputs[: t + 1])[-width:]
                acc = sum(float(w[c, i]) * window[i] for i in range(width)) + bias[c]
                want[b * tokens + t, c] = acc * sigmoid(acc)
            want_state[slot, offset + c] = kept[1:] + inputs
    for r in range(rows):
        for h in range(2):
            part = want[r, h * 4 : (h + 1) * 4]
            want[r, h * 4 : (h + 1) * 4] = part / np.sqrt((part**2).sum() + 1e-6)
    close(got, want)
    close(state, want_state)
    assert not got[tokens : 2 * tokens].any()  # request 1 is padding
    others = [s for s in range(slots_n) if s not in (slot for slot, _ in plan.values())]
    assert np.array_equal(state[others], state0[others])
    assert np.array_equal(state[:, :offset], state0[:, :offset])  # channels outside the op's own


@pytest.mark.parametrize("form", ["lower_bound", "softplus"])
def test_kda_gate(rng, form):
    heads, size = 3, 4
    g, a_log, dt = normal(rng, 2, heads * size), np.log(rng.uniform(1, 16, heads)), normal(rng, heads * size)
    got = ops.kda_gate(g, a_log, dt, heads, form, -5.0 if form == "lower_bound" else None)
    want = np.zeros((2, heads * size))
    for r in range(2):
        for col in range(heads * size):
            a, raw = np.exp(a_log[col // size]), float(g[r, col]) + float(dt[col])
            want[r, col] = (np.exp(-5.0 * sigmoid(a * raw)) if form == "lower_bound"
                            else np.exp(-a * np.log1p(np.exp(raw))))
    close(got, want)
    assert ((got > 0) & (got <= 1)).all() and got.min() < 0.5


# ----------------------------------------------------------------------------------------------
# Attention


def paged(rng, batch, page_size, pages_n, columns):
    order = rng.permutation(pages_n)[: batch * columns]
    return order.reshape(batch, columns).astype(np.int32)


@pytest.mark.parametrize("tokens", [1, 2])
def test_attention_by_explicit_softmax(rng, tokens):
    batch, heads, kv_heads, size, vsize, page_size = 2, 4, 2, 8, 6, 4
    rows = batch * tokens
    q, k, v = normal(rng, rows, heads * size), normal(rng, rows, kv_heads * size), normal(rng, rows, kv_heads * vsize)
    k_cache0, v_cache0 = normal(rng, 8, page_size, kv_heads, size), normal(rng, 8, page_size, kv_heads, vsize)
    pages = paged(rng, batch, page_size, 8, 3)
    positions = np.array([p for start in (5, 9) for p in range(start, start + tokens)], np.int32)
    k_cache, v_cache = k_cache0.copy(), v_cache0.copy()
    got = ops.attention(q, k, v, k_cache, v_cache, pages, positions, heads, kv_heads, 0.3, tokens=tokens)

    # the cache as a dictionary: (request, position) -> k, v; this step's rows first
    keys = {}
    for r in range(rows):
        keys[r // tokens, int(positions[r])] = (k[r].reshape(kv_heads, size), v[r].reshape(kv_heads, vsize))
    want = np.zeros((rows, heads * vsize))
    for r in range(rows):
        b = r // tokens
        for h in range(heads):
            kvh = h // (heads // kv_heads)
            scores, values = [], []
            for j in range(int(positions[r]) + 1):
                if (b, j) in keys:
                    kj, vj = keys[b, j]
                else:
                    page, at = pages[b, j // page_size], j % page_size
                    kj, vj = k_cache0[page, at], v_cache0[page, at]
                scores.append(0.3 * float(np.dot(q[r, h * size : (h + 1) * size].astype(np.float64), kj[kvh])))
                values.append(vj[kvh])
            p = np.exp(np.array(scores) - max(scores))
            want[r, h * vsize : (h + 1) * vsize] = (p / p.sum()) @ np.array(values, np.float64)
    close(got, want)
    for r in range(rows):
        b, pos = r // tokens, int(positions[r])
        page, at = pages[b, pos // page_size], pos % page_size
        assert np.array_equal(k_cache[page, at], k[r].reshape(kv_heads, size))
        assert np.array_equal(v_cache[page, at], v[r].reshape(kv_heads, vsize))
    with pytest.raises(ops.InterpretError, match="position 12 needs page column 3; the page table has 3"):
        ops.attention(q, k, v, k_cache, v_cache, pages, positions + 12 - positions.max(), heads, kv_heads,
                      0.3, tokens=tokens)


def test_latent_attention_by_expansion(rng):
    batch, heads, nope, rope, lora, v, page_size = 2, 2, 8, 4, 12, 6, 4
    qr, latent, k_rope = normal(rng, batch, heads * (nope + rope)), normal(rng, batch, lora), normal(rng, batch, rope)
    kv_b = normal(rng, heads * (nope + v), lora, scale=lora**-0.5)
    cache0 = normal(rng, 6, page_size, lora + rope)
    pages = paged(rng, batch, page_size, 6, 2)
    positions = np.array([6, 2], np.int32)
    cache = cache0.copy()
    got = ops.latent_attention(qr, latent, k_rope, cache, kv_b, pages, positions, heads, nope, rope, lora, v, 0.25)
    want = np.zeros((batch, heads * v))
    for b in range(batch):
        rows_c = []
        for j in range(int(positions[b]) + 1):
            rows_c.append(np.concatenate([latent[b], k_rope[b]]) if j == positions[b]
                          else cache0[pages[b, j // page_size], j % page_size])
        for h in range(heads):
            w = kv_b[h * (nope + v) : (h + 1) * (nope + v)].astype(np.float64)
            query = qr[b, h * (nope + rope) : (h + 1) * (nope + rope)]
            scores, values = [], []
            for row in rows_c:
                key = np.concatenate([w[:nope] @ row[:lora], row[lora:]])
                scores.append(0.25 * query @ key)
                values.append(w[nope:] @ row[:lora])
            p = np.exp(np.array(scores) - max(scores))
            want[b, h * v : (h + 1) * v] = (p / p.sum()) @ np.array(values)
        page, at = pages[b, positions[b] // page_size], positions[b] % page_size
        assert np.array_equal(cache[page, at], np.concatenate([latent[b], k_rope[b]]))
    close(got, want)


# ----------------------------------------------------------------------------------------------
# Mixture, quantize, q8_0


@pytest.mark.parametrize("scoring", ["sigmoid", "softmax"])
def test_mixture_by_loop(rng, scoring):
    rows, hidden, experts, width, top_k, shared_width = 3, 16, 6, 8, 2, 12
    x = normal(rng, rows, hidden)
    router = normal(rng, experts, hidden, scale=0.5)
    gate, up = normal(rng, experts, width, hidden, scale=0.25), normal(rng, experts, width, hidden, scale=0.25)
    down = normal(rng, experts, hidden, width, scale=0.35)
    correction = normal(rng, experts, scale=0.3)
    shared = [normal(rng, shared_width, hidden, scale=0.25), normal(rng, shared_width, hidden, scale=0.25),
              normal(rng, hidden, shared_width, scale=0.3), normal(rng, 1, hidden, scale=0.25)]
    renormalize = scoring == "sigmoid"
    got = ops.mixture(x, router, gate, up, down, top_k, scoring, renormalize, 2.5,
                      correction=correction if scoring == "sigmoid" else None, shared=shared)
    want = np.zeros((rows, hidden))
    for r in range(rows):
        xr = x[r].astype(np.float64)
        logits = router @ xr
        scores = sigmoid(logits) if scoring == "sigmoid" else np.exp(logits) / np.exp(logits).sum()
        ranking = scores + correction if scoring == "sigmoid" else scores
        chosen = []
        for _ in range(top_k):  # pick the best remaining, one at a time
            best = max((e for e in range(experts) if e not in chosen), key=lambda e: ranking[e])
            chosen.append(best)
        weights = np.array([scores[e] for e in chosen])
        if renormalize:
            weights = weights / weights.sum()
        for wk, e in zip(weights * 2.5, chosen, strict=True):
            g, u = gate[e] @ xr, up[e] @ xr
            want[r] += wk * (down[e] @ (g * sigmoid(g) * u))
        g, u = shared[0] @ xr, shared[1] @ xr
        want[r] += (shared[2] @ (g * sigmoid(g) * u)) * sigmoid(shared[3][0] @ xr)
    close(got, want)
    scattered = ops.mixture(x, router, gate, up, down, top_k, scoring, renormalize, 2.5,
                            correction=correction if scoring == "sigmoid" else None, shared=shared,
                            rows=np.array([2, -1, 0], np.int32))
    close(scattered[2], want[0])
    close(scattered[0], want[2])
    assert not scattered[1].any()


def test_quantize_error_bounds(rng):
    x = normal(rng, 4, 96, scale=3.0)
    x[1, 32:64] = 0  # an all-zero block
    one, two = ops.quantize(x, 1), ops.quantize(x, 2)
    assert one.dtype == two.dtype == np.float32
    for r in range(4):
        for blk in range(3):
            c = slice(32 * blk, 32 * (blk + 1))
            s = np.abs(x[r, c]).max() / 127
            if s == 0:
                assert not one[r, c].any() and not two[r, c].any()
                continue
            words = one[r, c] / np.float32(s)
            np.testing.assert_allclose(words, np.rint(words), atol=1e-3)  # whole words
            assert np.abs(words).max() <= 127 + 1e-3
            assert np.abs(x[r, c] - one[r, c]).max() <= s / 2 * (1 + 1e-5)
            assert np.abs(x[r, c] - two[r, c]).max() <= s / 254 / 2 * (1 + 1e-3) + 1e-7
    err1, err2 = np.abs(x - one).max(), np.abs(x - two).max()
    assert err2 < err1 / 50
    with pytest.raises(ops.InterpretError, match="width 40 is not whole 32-value blocks"):
        ops.quantize(normal(rng, 2, 40), 1)


def test_q8_0_reconstruction(rng):
    w = normal(rng, 6, 64, scale=0.02)
    w[2, :32] *= 1000  # blocks of very different scales
    got = ops.q8_0(w)
    for r in range(6):
        for blk in range(2):
            c = slice(32 * blk, 32 * (blk + 1))
            d = np.float16(np.abs(w[r, c]).max() / np.float32(127)).astype(np.float32)
            q = got[r, c] / d
            assert np.array_equal(q, np.rint(q)) and np.abs(q).max() <= 127  # exact int8 words
            assert np.abs(w[r, c] - got[r, c]).max() <= d * 0.5 * (1 + 1e-3) + d / 127 * 0.5
    assert np.array_equal(ops.q8_0(got), got)  # a checkpoint's values quantize to themselves
    assert not np.array_equal(got, w)


def test_a_mixture_follows_a_routing_hint_only_through_near_ties():
    from lanec.interp.ops import ROUTING_TIE

    rng = np.random.default_rng(3)
    rows, width, experts, hidden = 4, 16, 8, 8
    x = rng.standard_normal((rows, width)).astype(np.float32)
    router = rng.standard_normal((experts, width)).astype(np.float32)
    gate, up = (rng.standard_normal((experts, hidden, width)).astype(np.float32) for _ in range(2))
    down = rng.standard_normal((experts, width, hidden)).astype(np.float32)
    scores = 1 / (1 + np.exp(-(x @ router.T)))
    # row 0: a correction that ties experts 2 and 5 within the tolerance; the others far apart
    correction = np.zeros(experts, np.float32)
    order = np.argsort(-scores[0])
    correction[order[1]] = scores[0, order[0]] - scores[0, order[1]] + 0.5 * ROUTING_TIE
    own = ops.mixture(x, router, gate, up, down, 1, "sigmoid", 0, 1.0, correction=correction)
    choice = scores + correction
    best = np.argsort(-choice, axis=1, kind="stable")[:, :1]
    swapped = best.copy()
    swapped[0, 0] = order[0] if best[0, 0] == order[1] else order[1]  # row 0: the near-tied other expert
    swapped[1, 0] = np.argsort(choice[1])[0]  # row 1: the worst expert, far from a tie
    hinted = ops.mixture(x, router, gate, up, down, 1, "sigmoid", 0, 1.0, correction=correction, hint=swapped)
    expect_row0 = scores[0, swapped[0, 0]] * (ops.swiglu(x[:1] @ gate[swapped[0, 0]].T, x[:1] @ up[swapped[0, 0]].T)
                                               @ down[swapped[0, 0]].T)
    np.testing.assert_allclose(hinted[0], expect_row0[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(hinted[1:], own[1:])  # row 1's far hint is not taken
    # a Hint names its margin and collects the rows past it: at 1e-6 row 0's tie is past it too
    farther: list[int] = []
    tight = ops.mixture(x, router, gate, up, down, 1, "sigmoid", 0, 1.0, correction=correction,
                        hint=ops.Hint(swapped, 1e-6, farther))
    np.testing.assert_array_equal(tight, own)
    assert farther == [0, 1]
    # a margin wide enough for row 1's worst expert takes it
    farther = []
    wide = ops.mixture(x, router, gate, up, down, 1, "sigmoid", 0, 1.0, correction=correction,
                       hint=ops.Hint(swapped, 2.0, farther))
    np.testing.assert_allclose(wide[0], hinted[0], rtol=1e-6)
    assert farther == [] and not np.allclose(wide[1], own[1])


def test_routing_margin_is_the_last_chosen_experts_and_groups_lead():
    rng = np.random.default_rng()
    logits = rng.permutation(np.array([0.9, 0.5, -0.2, 0.1], np.float32))
    x, router = np.array([[1.0, 0.0]], np.float32), np.stack([logits, np.zeros(4, np.float32)], axis=1)
    scores = 1 / (1 + np.exp(-logits.astype(np.float64)))
    ranked = np.sort(scores)[::-1]
    assert ops.routing_margin(x, router, 1, "sigmoid") == pytest.approx((ranked[0] - ranked[1]) / ranked[0], rel=1e-5)
    assert ops.routing_margin(x, router, 2, "sigmoid") == pytest.approx((ranked[1] - ranked[2]) / ranked[0], rel=1e-5)
    # two groups of two, one kept: a group's rank is its two scores' sum
    groups = scores.reshape(2, 2).sum(axis=1)
    lead = abs(groups[0] - groups[1]) / ranked[0]
    kept = scores.reshape(2, 2)[np.argmax(groups)]
    within = abs(kept[0] - kept[1]) / ranked[0]
    assert ops.routing_margin(x, router, 1, "sigmoid", groups=2, topk_groups=1) == pytest.approx(min(lead, within),
                                                                                               rel=1e-5)
