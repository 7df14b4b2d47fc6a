"""The KDA check: the interpreter's delta rule and fused KDA op against an independent per-token
loop written here in fla's `naive_recurrent_kda` orientation (state [key, value], float64), with
padding slots and speculative steps of q = 3 tokens (vLLM's cache semantics)."""

from __future__ import annotations

import numpy as np
import pytest

from lanec.interp import ops

HEADS, SIZE, WIDTH, RANK = 2, 16, 4, 8
DIM = HEADS * SIZE
SLOTS = 16
L2_EPS, EPS, SCALE, LOWER_BOUND = 1e-6, 1e-5, SIZE**-0.5, -5.0

# (slot table, accepted) per step kind. tokens 1: requests 1 and 3 are padding (0 and -1).
# tokens 3: request 0 accepts 3 and skips writing token 1 (slot -1); request 1 accepts 1;
# request 2 is padding (slots[2, 1] = 0 with accepted 2) yet names slot 9 in column 0, which must
# not be written; request 3 accepts 2; request 4 is padding with accepted 1.
TABLES = {
    1: (np.array([5, 0, 3, -1, 7], np.int32), None),
    3: (
        np.array([[4, -1, 11, -1], [6, 2, 13, -1], [9, 0, 14, -1], [8, 12, 3, -1], [-1, 10, 1, -1]], np.int32),
        np.array([3, 1, 2, 2, 1], np.int32),
    ),
}


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def request_slots(slots, accepted, tokens, b):
    """(accepted, the slot read, conv slot, the slots token t writes) or None for padding."""
    if tokens == 1:
        slot = int(slots[b])
        return None if slot <= 0 else (1, slot, slot, [slot])
    a = int(accepted[b])
    read = int(slots[b, a - 1])
    return None if read <= 0 else (a, read, int(slots[b, 0]), [int(s) for s in slots[b, :tokens]])


def naive_recurrent(q, k, v, decay, beta, state_vk, scale):
    """fla's naive_recurrent_kda for one request and head: S [key, value]; q, k, decay [T, key],
    v [T, value], beta [T]. Returns the outputs [T, value] and each token's state (as [value, key])."""
    s = state_vk.T.astype(np.float64).copy()
    outs, states = [], []
    for t in range(q.shape[0]):
        s = s * decay[t][:, None]
        s = s + np.outer(beta[t] * k[t], v[t] - (k[t][:, None] * s).sum(0))
        outs.append((q[t] * scale) @ s)
        states.append(s.T.copy())
    return np.array(outs), states


def reference_kda(x, conv_w, conv_b, conv_state, f_a, f_b, a_log, dt_bias, beta_raw, gate, norm_w,
                  state, slots, accepted, tokens, form):
    """The whole KDA decode, request by request, token by token, in float64."""
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    conv_state, state = f64(conv_state).copy(), f64(state).copy()
    rows = x.shape[0]
    out = np.zeros((rows, DIM))
    for b in range(rows // tokens):
        plan = request_slots(slots, accepted, tokens, b)
        if plan is None:
            continue
        a, read, conv_slot, writes = plan
        r0 = b * tokens
        mixed = []
        for s in range(3):  # q, k, v sections of one conv state
            taps = f64(conv_state[conv_slot, s * DIM : (s + 1) * DIM])
            xs = f64(x[r0 : r0 + tokens, s * DIM : (s + 1) * DIM])
            sequence = [taps[:, a - 1 + i] for i in range(WIDTH - 1)] + list(xs)
            ys = []
            for t in range(tokens):
                acc = sum(f64(conv_w[s])[:, i] * sequence[t + i] for i in range(WIDTH))
                if conv_b is not None:
                    acc = acc + f64(conv_b[s])
                ys.append(silu(acc))
            mixed.append(np.array(ys))
            # the rewritten window: [state[a], state[a + 1], x_0 .. x_{q-1}] (width 4)
            conv_state[conv_slot, s * DIM : (s + 1) * DIM] = np.stack(sequence[1:], axis=1)
        qc, kc, vc = mixed
        for h in range(HEADS):
            cols = slice(h * SIZE, (h + 1) * SIZE)
            qh = np.array([qc[t, cols] / np.sqrt((qc[t, cols] ** 2).sum() + L2_EPS) for t in range(tokens)])
            kh = np.array([kc[t, cols] / np.sqrt((kc[t, cols] ** 2).sum() + L2_EPS) for t in range(tokens)])
            raw = f64(f_a[r0 : r0 + tokens]) @ f64(f_b).T[:, cols] + f64(dt_bias[cols])
            if form == "lower_bound":
                decay = np.exp(LOWER_BOUND * sigmoid(np.exp(a_log[h]) * raw))
            else:
                decay = np.exp(-np.exp(a_log[h]) * np.logaddexp(0, raw))
            beta = sigmoid(f64(beta_raw[r0 : r0 + tokens, h]))
            o, states = naive_recurrent(qh, kh, vc[:, cols], decay, beta, state[read, h], SCALE)
            if tokens == 1:
                state[read, h] = states[0]
            else:
                for t, slot in enumerate(writes):
                    if slot > 0:
                        state[slot, h] = states[t]
            g = sigmoid(f64(gate[r0 : r0 + tokens, cols]))
            rms = np.sqrt((o**2).mean(axis=1, keepdims=True) + EPS)
            out[r0 : r0 + tokens, cols] = o / rms * f64(norm_w) * g
    return out, conv_state, state


def random_inputs(rng, tokens):
    rows = 5 * tokens
    bf16ish = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return dict(
        x=bf16ish(rows, 3 * DIM),
        conv_w=0.5 * bf16ish(3, DIM, WIDTH),
        conv_b=0.1 * bf16ish(3, DIM),
        conv_state=bf16ish(SLOTS, 3 * DIM, WIDTH - 2 + tokens),
        f_a=bf16ish(rows, RANK),
        f_b=bf16ish(DIM, RANK) / np.sqrt(RANK),
        a_log=np.log(rng.uniform(1, 16, HEADS)).astype(np.float32),
        dt_bias=rng.uniform(-4, 0, DIM).astype(np.float32),
        beta_raw=bf16ish(rows, HEADS),
        gate=bf16ish(rows, DIM),
        norm_w=(1 + 0.1 * bf16ish(SIZE)).astype(np.float32),
        state=0.1 * bf16ish(SLOTS, HEADS, SIZE, SIZE),
    )


def relative(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


def written_slots(slots, accepted, tokens):
    """Slots a step may change: those an active request writes (conv: slots[b, 0] too)."""
    out = set()
    for b in range(slots.shape[0]):
        plan = request_slots(slots, accepted, tokens, b)
        if plan is not None:
            out |= {plan[2], *(s for s in plan[3] if s > 0)}
    return out


def padding_rows(slots, accepted, tokens):
    return [b * tokens + t for b in range(slots.shape[0]) for t in range(tokens)
            if request_slots(slots, accepted, tokens, b) is None]


@pytest.mark.parametrize("tokens", [1, 3])
@pytest.mark.parametrize("form", ["lower_bound", "softplus"])
@pytest.mark.parametrize("bias", [True, False])
def test_kda_against_naive_recurrent(tokens, form, bias):
    rng = np.random.default_rng(100 * tokens + (form == "softplus") * 10 + bias)
    inp = random_inputs(rng, tokens)
    slots, accepted = TABLES[tokens]
    conv_b = inp["conv_b"] if bias else None
    want, want_conv, want_state = reference_kda(
        inp["x"], inp["conv_w"], conv_b, inp["conv_state"], inp["f_a"], inp["f_b"], inp["a_log"],
        inp["dt_bias"], inp["beta_raw"], inp["gate"], inp["norm_w"], inp["state"], slots, accepted, tokens, form)

    conv_state, state = inp["conv_state"].copy(), inp["state"].copy()
    x = inp["x"]
    got = ops.kda(
        x[:, :DIM], x[:, DIM : 2 * DIM], x[:, 2 * DIM :], *inp["conv_w"], conv_state, inp["f_a"], inp["f_b"],
        inp["a_log"], inp["dt_bias"], inp["beta_raw"], inp["gate"], inp["norm_w"], state, slots, HEADS, form,
        SCALE, L2_EPS, EPS, lower_bound=LOWER_BOUND if form == "lower_bound" else None, tokens=tokens,
        accepted=accepted, biases=list(conv_b) if bias else ())

    assert got.dtype == np.float32
    assert relative(got, want) < 1e-5
    assert relative(state, want_state) < 1e-5
    assert relative(conv_state, want_conv) < 1e-5
    pad = padding_rows(slots, accepted, tokens)
    assert pad and not got[pad].any()
    active = [r for r in range(got.shape[0]) if r not in pad]
    assert np.abs(got[active]).min(axis=1).max() > 0
    written = written_slots(slots, accepted, tokens)
    untouched = [s for s in range(SLOTS) if s not in written]
    # slots no active request writes (padding ones included) are bit-identical
    assert np.array_equal(state[untouched], inp["state"][untouched])
    assert np.array_equal(conv_state[untouched], inp["conv_state"][untouched])
    assert not np.array_equal(state[sorted(written)], inp["state"][sorted(written)])


def test_speculative_slots_cover_the_semantics():
    """The table above exercises what it claims: a skipped write, a padding request naming a
    real slot in column 0, and reads from accepted - 1 != 0."""
    slots, accepted = TABLES[3]
    assert slots[0, 1] == -1 and accepted[0] == 3
    assert request_slots(slots, accepted, 3, 2) is None and slots[2, 0] > 0
    assert 9 not in written_slots(slots, accepted, 3)
    assert any(accepted[b] > 1 and request_slots(slots, accepted, 3, b) for b in range(5))


def test_speculative_state_read_from_accepted_minus_one():
    """Token t's state is written to slots[b, t]; the step starts from slots[b, accepted - 1]:
    reading another slot's state changes the result."""
    rng = np.random.default_rng(7)
    inp = random_inputs(rng, 3)
    slots = np.array([[1, 2, 3]], np.int32)
    rows = 3
    q = ops.l2norm(rng.standard_normal((rows, DIM)).astype(np.float32), HEADS, 1e-6)
    k = ops.l2norm(rng.standard_normal((rows, DIM)).astype(np.float32), HEADS, 1e-6)
    v = rng.standard_normal((rows, DIM)).astype(np.float32)
    decay = rng.uniform(0.5, 1, (rows, DIM)).astype(np.float32)
    beta = rng.uniform(0, 1, (rows, HEADS)).astype(np.float32)
    outs = []
    for a in (1, 2, 3):
        state = inp["state"].copy()
        out = ops.delta_rule(q, k, v, decay, beta, state, slots, HEADS, HEADS, SCALE, tokens=3,
                             accepted=np.array([a], np.int32))
        want = [naive_recurrent(q[:, h * SIZE : (h + 1) * SIZE], k[:, h * SIZE : (h + 1) * SIZE],
                                v[:, h * SIZE : (h + 1) * SIZE], decay[:, h * SIZE : (h + 1) * SIZE],
                                beta[:, h], inp["state"][a, h], SCALE) for h in range(HEADS)]
        assert relative(out, np.concatenate([o for o, _ in want], axis=1)) < 1e-5
        for t in range(3):
            assert relative(state[slots[0, t], :], np.stack([s[t] for _, s in want])) < 1e-5
        outs.append(out)
    assert not np.allclose(outs[0], outs[1]) and not np.allclose(outs[1], outs[2])


@pytest.mark.parametrize("per_key", [True, False])
def test_delta_rule_shared_key_heads(per_key):
    """Gated DeltaNet shape: 4 value heads over 2 key heads, per-head (scalar) or per-key decay."""
    rng = np.random.default_rng(11 + per_key)
    heads, key_heads, key, value, rows = 4, 2, 8, 12, 3
    q = rng.standard_normal((rows, key_heads * key)).astype(np.float32)
    k = ops.l2norm(rng.standard_normal((rows, key_heads * key)).astype(np.float32), key_heads, 1e-6)
    v = rng.standard_normal((rows, heads * value)).astype(np.float32)
    decay = rng.uniform(0.3, 1, (rows, heads * key if per_key else heads)).astype(np.float32)
    beta = rng.uniform(0, 1, (rows, heads)).astype(np.float32)
    state0 = rng.standard_normal((6, heads, value, key)).astype(np.float32)
    slots = np.array([4, -1, 2], np.int32)
    state = state0.copy()
    got = ops.delta_rule(q, k, v, decay, beta, state, slots, heads, key_heads, 0.3)
    want = np.zeros((rows, heads * value))
    for r, slot in enumerate(slots):
        if slot <= 0:
            continue
        for h in range(heads):
            kh = h // (heads // key_heads)
            d = decay[r, h * key : (h + 1) * key] if per_key else np.full(key, decay[r, h])
            o, states = naive_recurrent(q[r : r + 1, kh * key : (kh + 1) * key], k[r : r + 1, kh * key : (kh + 1) * key],
                                        v[r : r + 1, h * value : (h + 1) * value], d[None], beta[r : r + 1, h],
                                        state0[slot, h], 0.3)
            want[r, h * value : (h + 1) * value] = o[0]
            assert relative(state[slot, h], states[0]) < 1e-5
    assert relative(got, want) < 1e-5
    assert not got[1].any()
    assert np.array_equal(state[[0, 1, 3, 5]], state0[[0, 1, 3, 5]])


@pytest.mark.parametrize("tokens", [1, 3])
def test_kda_equals_its_chain(tokens):
    """The fused op is exactly conv / l2norm / product(f_b) / kda_gate / sigmoid / delta_rule /
    norm_gated on the same inputs."""
    rng = np.random.default_rng(21 + tokens)
    inp = random_inputs(rng, tokens)
    slots, accepted = TABLES[tokens]
    x = inp["x"]
    fused_conv, fused_state = inp["conv_state"].copy(), inp["state"].copy()
    fused = ops.kda(x[:, :DIM], x[:, DIM : 2 * DIM], x[:, 2 * DIM :], *inp["conv_w"], fused_conv, inp["f_a"],
                    inp["f_b"], inp["a_log"], inp["dt_bias"], inp["beta_raw"], inp["gate"], inp["norm_w"],
                    fused_state, slots, HEADS, "softplus", SCALE, L2_EPS, EPS, tokens=tokens, accepted=accepted,
                    biases=list(inp["conv_b"]))

    conv_state, state = inp["conv_state"].copy(), inp["state"].copy()
    spec = dict(tokens=tokens, accepted=accepted)
    qc = ops.l2norm(ops.conv(x[:, :DIM], conv_state, inp["conv_w"][0], slots, 0, bias=inp["conv_b"][0], **spec),
                    HEADS, L2_EPS)
    kc = ops.conv(x[:, DIM : 2 * DIM], conv_state, inp["conv_w"][1], slots, DIM, bias=inp["conv_b"][1],
                  norm_heads=HEADS, norm_eps=L2_EPS, **spec)
    vc = ops.conv(x[:, 2 * DIM :], conv_state, inp["conv_w"][2], slots, 2 * DIM, bias=inp["conv_b"][2], **spec)
    decay = ops.kda_gate(ops.product(inp["f_a"], inp["f_b"]), inp["a_log"], inp["dt_bias"], HEADS, "softplus")
    o = ops.delta_rule(qc, kc, vc, decay, ops.sigmoid(inp["beta_raw"]), state, slots, HEADS, HEADS, SCALE, **spec)
    chain = ops.norm_gated(o, inp["gate"], inp["norm_w"], HEADS, EPS, "sigmoid")

    np.testing.assert_allclose(fused, chain, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fused_state, state, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(fused_conv, conv_state)
    assert np.abs(fused).max() > 0.1


@pytest.mark.parametrize(
    ("slots", "accepted", "message"),
    [
        (np.array([[1, 2, 3], [4, 5, 6]]), None, "needs accepted counts"),
        (np.array([[1, 2, 3], [4, 5, 6]]), np.array([1, 4]), "accepted count 4 is outside 1..3"),
        (np.array([[1, 2, 3], [4, 2, 6]]), np.array([1, 2]), "requests 0 and 1 share slot 2"),
        (np.array([[1, 2, 30], [4, 5, 6]]), np.array([3, 1]), "slot 30 of request 0 is outside"),
        (np.array([[-1, 2, 3], [4, 5, 6]]), np.array([2, 1]), "conv slot slots[0, 0] is -1"),
        (np.array([[1, 2], [4, 5]]), np.array([1, 1]), "needs [batch, >= 3] slots"),
    ],
)
def test_bad_slot_tables_are_one_line_errors(slots, accepted, message):
    x = np.ones((6, 8), np.float32)
    state = np.ones((16, 8, 5), np.float32)
    with pytest.raises(ops.InterpretError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        ops.conv(x, state, np.ones((8, 4), np.float32), slots, 0, tokens=3, accepted=accepted)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("seed", range(6))
def test_kda_on_random_slot_tables(seed):
    """Slot tables as random_environment draws them (padding, skipped token writes, accepted
    counts), 1 to 3 tokens: the fused op still matches the independent loop."""
    from lanec.interp.environment import slot_table

    rng = np.random.default_rng(1000 + seed)
    tokens = 1 + seed % 3
    inp = random_inputs(rng, tokens)
    active = rng.random(5) >= 0.4
    active[seed % 5] = True
    accepted = rng.integers(1, tokens + 1, 5)
    shape = [5] if tokens == 1 else [5, tokens + 1]
    slots = slot_table(rng, shape, tokens, active, accepted, SLOTS, 0.4)
    accepted = accepted.astype(np.int32) if tokens > 1 else None
    want, want_conv, want_state = reference_kda(
        inp["x"], inp["conv_w"], None, inp["conv_state"], inp["f_a"], inp["f_b"], inp["a_log"], inp["dt_bias"],
        inp["beta_raw"], inp["gate"], inp["norm_w"], inp["state"], slots, accepted, tokens, "softplus")
    conv_state, state = inp["conv_state"].copy(), inp["state"].copy()
    x = inp["x"]
    got = ops.kda(x[:, :DIM], x[:, DIM : 2 * DIM], x[:, 2 * DIM :], *inp["conv_w"], conv_state, inp["f_a"],
                  inp["f_b"], inp["a_log"], inp["dt_bias"], inp["beta_raw"], inp["gate"], inp["norm_w"], state,
                  slots, HEADS, "softplus", SCALE, L2_EPS, EPS, tokens=tokens, accepted=accepted)
    assert relative(got, want) < 1e-5
    assert relative(state, want_state) < 1e-5
    assert relative(conv_state, want_conv) < 1e-5
    untouched = [s for s in range(SLOTS) if s not in written_slots(slots, accepted, tokens)]
    assert np.array_equal(state[untouched], inp["state"][untouched])
    assert np.array_equal(conv_state[untouched], inp["conv_state"][untouched])
    assert not got[padding_rows(slots, accepted, tokens)].any()
