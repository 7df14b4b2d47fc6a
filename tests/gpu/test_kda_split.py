"""KdaSplit on the GPU against the interpreter (lanec.interp.ops, fp32), two decode steps a case on
fresh random inputs (the seed is printed), outputs poisoned with NaN before every launch. After
each step: the output rows, every state slot a request writes (recurrent state to a tolerance,
conv state exactly: it only moves bf16 values), and every other slot bit-identical to before
(padding requests and unused slots are never written). Padding requests are mixed into every
batch of two or more.

The kernel rounds its f_b projection to bf16 before the gate (the seed's contract), so the
reference does too; f_a and F_B are drawn on grids (1/8, 1/64) that make the projection exact in
fp32 in any summation order, or a sum within an fp32 ulp of a bf16 rounding boundary would round
differently in the MMA and in numpy (one bf16 ulp of a gate: ~0.5% of a state column). The whole
`ops.kda` is checked as well, at the looser tolerance that rounding costs. Build the cases first
(CPU machine): `python tests/gpu/cases/kda_split.py --set quick`;
`LANEC_KDA_CASES=full` picks the full heads x batch x tokens grid (default: quick, cluster1, tuned);
`LANEC_KDA_SHARD=i/n` runs the i-th of n interleaved parts (the full grid takes about 9 minutes on
the H200, a GPU command at most 10)."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import shard  # tests/gpu/conftest.py: it validated LANEC_KDA_SHARD already

from lanec.interp import ops
from lanec.runtime import driver, tolerance
from lanec.runtime.artifact import load_artifact
from lanec.runtime.dtypes import from_bf16, round_bf16, to_bf16

OUT = Path(__file__).resolve().parents[2] / "build" / "gpu" / "kda_split"
CASES_FILE = OUT / "cases.json"
LOWER_BOUND, SCALE, EPS, L2_EPS = -5.0, 128 ** -0.5, 1e-5, 1e-6
STEPS = 2

TOLERANCE = tolerance.KDA  # (rtol, atol) by what is compared, numpy's meaning


def _specs() -> list[dict]:
    names = os.environ.get("LANEC_KDA_CASES", "quick,cluster1,tuned").split(",")
    if not CASES_FILE.is_file():
        return []
    listing = json.loads(CASES_FILE.read_text())
    index, count = shard(os.environ.get("LANEC_KDA_SHARD", "1/1"))
    chosen, seen = [], set()
    for spec in (spec for name in names for spec in listing.get(name, [])):
        if spec["stem"] not in seen:  # a case in two sets runs once
            seen.add(spec["stem"])
            chosen.append(spec)
    return chosen[index::count]


def _stem(spec: dict) -> str:
    return spec["stem"]


def slot_table(rng, batch: int, tokens: int, state_slots: int, padding: bool):
    """Slots ([B] or [B, T]) and accepted counts: active requests own distinct slots; a padding
    request's read slot is 0 or -1; speculative tables leave some token slots unwritten (<= 0)."""
    pool = list(rng.permutation(np.arange(1, state_slots)))
    pad = rng.random(batch) < 0.3 if padding and batch > 1 else np.zeros(batch, bool)
    if padding and batch > 1 and not pad.any():
        pad[rng.integers(batch)] = True
    if pad.all():  # at least one active request: an all-padding step checks too little
        pad[rng.integers(batch)] = False
    if tokens == 1:
        table = np.array([-int(rng.integers(2)) if pad[b] else int(pool.pop()) for b in range(batch)],
                         np.int32)
        return table, None
    table = np.zeros((batch, tokens), np.int32)
    accepted = rng.integers(1, tokens + 1, batch).astype(np.int32)
    for b in range(batch):
        if pad[b]:
            table[b] = -rng.integers(0, 2, tokens)
            continue
        for t in range(tokens):
            keep = t in (0, accepted[b] - 1) or rng.random() < 0.7
            table[b, t] = pool.pop() if keep else -int(rng.integers(2))
    return table, accepted


def make_step(rng, spec: dict, state_slots: int, padding: bool) -> dict:
    heads, batch, tokens = spec["heads"], spec["batch"], spec["tokens"]
    dim, rows = heads * 128, batch * tokens
    pitch = spec.get("x_pitch") or 3 * dim
    normal = rng.standard_normal
    slots, accepted = slot_table(rng, batch, tokens, state_slots, padding)
    step = {
        "x": to_bf16(normal((rows, pitch))),
        # multiples of 1/8 (|.| <= 2): with F_B's multiples of 1/64 every product and partial sum
        # is exact in fp32, so the kernel's MMA order and the reference's round to the same bf16
        "raw_gate": to_bf16(rng.integers(-16, 17, (rows, 128)) / 8.0),
        "beta": to_bf16(normal((rows, heads))),
        "slots": slots,
        "output_gate": to_bf16(normal((rows, dim))),
    }
    if spec.get("gate_rank"):  # the folded product's input, on the same exact grid as f_a's
        width = spec.get("gate_pitch") or spec["gate_rank"]
        step["output_gate"] = to_bf16(rng.integers(-16, 17, (rows, width)) / 8.0)
    if accepted is not None:
        step["accepted"] = accepted
    return step


def make_weights(rng, spec: dict, state_slots: int) -> dict:
    heads, tokens = spec["heads"], spec["tokens"]
    dim = heads * 128
    normal = rng.standard_normal
    arrays = {
        "conv_weight": to_bf16(0.5 * normal((3, 4, dim))),
        "conv_state": to_bf16(normal((state_slots, 3 * dim, 2 + tokens))),
        "a_log": rng.uniform(-1.0, 0.5, heads).astype(np.float32),
        "dt_bias": (0.5 * normal(dim)).astype(np.float32),
        "state": (0.1 * normal((state_slots, heads, 128, 128))).astype(np.float32),
        "norm_weight": to_bf16(1.0 + 0.1 * normal(128)),
        "f_b_weight": to_bf16(rng.integers(-8, 9, (dim, 128)) / 64.0),
    }
    if spec.get("gate_rank"):
        arrays["gate_weight"] = to_bf16(rng.integers(-8, 9, (dim, spec["gate_rank"])) / 64.0)
    if spec["has_bias"]:
        arrays["conv_bias"] = to_bf16(0.5 * normal(3 * dim))
    return arrays


def reference(spec: dict, arrays: dict, conv_state: np.ndarray, state: np.ndarray, rounded: bool = True):
    """Output [rows, dim]; updates the f32 `conv_state` and `state` in place. `rounded`: the
    f_b projection rounded to bf16 before the gate, as the kernel does; otherwise `ops.kda`."""
    heads, tokens = spec["heads"], spec["tokens"]
    dim = heads * 128
    x = from_bf16(arrays["x"])
    q, k, v = x[:, :dim], x[:, dim:2 * dim], x[:, 2 * dim:3 * dim]
    w = from_bf16(arrays["conv_weight"])
    conv_q, conv_k, conv_v = w[0].T, w[1].T, w[2].T
    biases = ()
    if spec["has_bias"]:
        b = from_bf16(arrays["conv_bias"])
        biases = (b[:dim], b[dim:2 * dim], b[2 * dim:])
    f_a, f_b = from_bf16(arrays["raw_gate"]), from_bf16(arrays["f_b_weight"])
    beta, gate, nw = (from_bf16(arrays[n]) for n in ("beta", "output_gate", "norm_weight"))
    gate_b = None
    if spec.get("gate_rank"):  # the folded output gate: its product's input and weight
        gate, gate_b = gate[:, :spec["gate_rank"]], from_bf16(arrays["gate_weight"])
    slots, accepted = arrays["slots"], arrays.get("accepted")
    form = spec["gate_form"]
    lower = LOWER_BOUND if form == "lower_bound" else None
    if not rounded:
        return ops.kda(q, k, v, conv_q, conv_k, conv_v, conv_state, f_a, f_b, arrays["a_log"],
                       arrays["dt_bias"], beta, gate, nw, state, slots, heads, form, SCALE, L2_EPS, EPS,
                       lower_bound=lower, tokens=tokens, accepted=accepted, biases=biases, gate_b=gate_b)
    bias = list(biases) or [None] * 3
    common = dict(tokens=tokens, accepted=accepted, activation="silu")
    qc = ops.conv(q, conv_state, conv_q, slots, 0, bias=bias[0], norm_heads=heads, norm_eps=L2_EPS, **common)
    kc = ops.conv(k, conv_state, conv_k, slots, dim, bias=bias[1], norm_heads=heads, norm_eps=L2_EPS, **common)
    vc = ops.conv(v, conv_state, conv_v, slots, 2 * dim, bias=bias[2], **common)
    decay = ops.kda_gate(round_bf16(ops.product(f_a, f_b)), arrays["a_log"], arrays["dt_bias"], heads, form,
                         lower)
    o = ops.delta_rule(qc, kc, vc, decay, ops.sigmoid(beta), state, slots, heads, heads, SCALE, tokens,
                       accepted)
    if gate_b is not None:
        gate = round_bf16(ops.product(gate, gate_b))
    return ops.norm_gated(o, gate, nw, heads, EPS, "sigmoid")


@functools.cache
def fla_naive():
    """fla's own `naive_recurrent_kda` (torch, on the CPU) where fla and torch are importable (the
    GPU session installs the carried fla wheel), else None and the loop below stands in for it."""
    try:
        import torch  # noqa: F401
        from fla.ops.kda.naive import naive_recurrent_kda
    except Exception:  # fla not installed, or its Triton side cannot load here
        return None
    return naive_recurrent_kda


def recurrent_step(q, k, v, decay, beta, s):
    """One token of the KDA recurrence for one request, fla's orientation (s: [head, key, value]);
    q is already scaled. Through fla's naive_recurrent_kda where it is importable."""
    naive = fla_naive()
    if naive is not None:
        import torch

        def t(a):
            return torch.from_numpy(np.ascontiguousarray(a)).to(torch.float64)[None, None]

        o, final = naive(t(q), t(k), t(v), t(np.log(decay)), t(beta), scale=1.0,
                         initial_state=torch.from_numpy(s)[None], output_final_state=True)
        return o[0, 0].numpy(), final[0].numpy()
    o = np.zeros_like(v)
    for h in range(q.shape[0]):
        s[h] *= decay[h][:, None]
        s[h] += np.outer(k[h], beta[h] * (v[h] - k[h] @ s[h]))
        o[h] = q[h] @ s[h]
    return o, s


def naive_fla(spec: dict, arrays: dict, conv_state: np.ndarray, state: np.ndarray) -> np.ndarray:
    """fla's naive_recurrent_kda for one token a request (state [value, key] here), with the conv
    and the gated norm around it written out: an independent check of the default cases."""
    heads = spec["heads"]
    dim = heads * 128
    x = from_bf16(arrays["x"])[:, :3 * dim].astype(np.float64)
    w = from_bf16(arrays["conv_weight"]).astype(np.float64)
    bias = from_bf16(arrays["conv_bias"]).astype(np.float64) if spec["has_bias"] else np.zeros(3 * dim)
    out = np.zeros((x.shape[0], dim))
    for b, slot in enumerate(arrays["slots"]):
        if slot <= 0:
            continue
        taps = conv_state[slot].astype(np.float64)  # [3 dim, 3]
        window = np.concatenate([taps, x[b][:, None]], axis=1)
        y = np.einsum("cw,cw->c", window, np.concatenate([w[0].T, w[1].T, w[2].T])) + bias
        y = y / (1 + np.exp(-y))
        q, k, v = (y[i * dim:(i + 1) * dim].reshape(heads, 128) for i in range(3))
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + L2_EPS) * SCALE
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + L2_EPS)
        g = round_bf16(from_bf16(arrays["raw_gate"])[b] @ from_bf16(arrays["f_b_weight"]).T).astype(np.float64)
        raw = g.reshape(heads, 128) + arrays["dt_bias"].reshape(heads, 128)
        a = np.exp(arrays["a_log"].astype(np.float64))[:, None]
        if spec["gate_form"] == "softplus":
            decay = np.exp(-a * np.logaddexp(0, raw))
        else:
            decay = np.exp(LOWER_BOUND / (1 + np.exp(-a * raw)))
        beta = 1 / (1 + np.exp(-from_bf16(arrays["beta"])[b].astype(np.float64)))
        s = state[slot].astype(np.float64).transpose(0, 2, 1).copy()  # [head, key, value] as fla keeps it
        o, s = recurrent_step(q, k, v, decay, beta, s)
        gate = from_bf16(arrays["output_gate"])[b]
        if spec.get("gate_rank"):
            gate = round_bf16(gate[:spec["gate_rank"]] @ from_bf16(arrays["gate_weight"]).T)
        gate = gate.reshape(heads, 128)
        nw = from_bf16(arrays["norm_weight"])
        o = o / np.sqrt((o * o).mean(-1, keepdims=True) + EPS) * nw / (1 + np.exp(-gate))
        out[b] = o.reshape(dim)
        state[slot] = s.transpose(0, 2, 1)
        conv_state[slot] = window[:, 1:]
    return out


def written_slots(arrays: dict) -> tuple[set, set]:
    """(recurrent, conv) slots the active requests write."""
    slots, accepted = arrays["slots"], arrays.get("accepted")
    states, convs = set(), set()
    for b in range(slots.shape[0]):
        if accepted is None:
            if slots[b] > 0:
                states.add(int(slots[b]))
                convs.add(int(slots[b]))
            continue
        if slots[b, accepted[b] - 1] <= 0:
            continue
        states |= {int(s) for s in slots[b] if s > 0}
        convs.add(int(slots[b, 0]))
    return states, convs


def split_slots(owned: set, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(slots in `owned`, every other slot), as index arrays."""
    mask = np.zeros(count, bool)
    mask[list(owned)] = True
    return np.flatnonzero(mask), np.flatnonzero(~mask)


def first_failures(slots: np.ndarray, ok: np.ndarray, shown: int = 5) -> list[int]:
    """The first slots (of `slots`, in order) where `ok` [slot, ...] is not all true."""
    bad = ~ok.reshape(len(slots), -1).all(axis=1)
    return [int(s) for s in slots[bad][:shown]]


def run_case(spec: dict, stream, seed: int) -> None:
    art = load_artifact(OUT, _stem(spec))
    rng = np.random.default_rng(seed)
    state_slots = art.params[[p.name for p in art.params].index("state")].shape[0]
    arrays = make_weights(rng, spec, state_slots)
    ref_conv = from_bf16(arrays["conv_state"]).copy()
    ref_state = arrays["state"].copy()
    module = driver.Module(art.cubin)
    function = module.function(art.entry, art.launch)
    buffers = {}
    try:
        for step_index in range(STEPS):
            arrays.update(make_step(rng, spec, state_slots, padding=step_index == 0 or spec["batch"] > 1))
            for param in art.params:
                if param.name in ("state", "conv_state") and param.name in buffers:
                    continue  # the device's own state carries over from the previous step
                data = arrays[param.name] if param.name != "output" else None
                if data is None:
                    if param.name not in buffers:
                        buffers[param.name] = driver.Buffer.empty(int(np.prod(param.shape)) * 2)
                else:
                    shape = tuple(param.shape)
                    if param.strides and param.strides[0] != shape[-1]:  # rows wider than the tensor
                        shape = (shape[0], param.strides[0])
                    assert tuple(data.shape) == shape, (param.name, data.shape, shape)
                    if param.name in buffers:
                        buffers[param.name].free()
                    buffers[param.name] = driver.Buffer.from_array(np.ascontiguousarray(data))
            buffers["output"].fill(0xFF)
            before_state = buffers["state"].to_array(np.float32, ref_state.shape)
            before_conv = buffers["conv_state"].to_array(np.uint16, ref_conv.shape)
            if step_index == 0:
                oracle_conv, oracle_state = ref_conv.copy(), ref_state.copy()
                naive_conv, naive_state = ref_conv.astype(np.float64), ref_state.astype(np.float64)
            expected = reference(spec, arrays, ref_conv, ref_state)
            driver.launch(function, art.launch, [buffers[p.name].ptr for p in art.params], stream)
            stream.synchronize()
            rows, dim = expected.shape
            got = from_bf16(buffers["output"].to_array(np.uint16, (rows, dim)))
            where = f"{_stem(spec)} seed {seed} step {step_index}"
            assert not np.isnan(got).any(), f"{where}: output rows left unwritten (NaN poison)"
            np.testing.assert_allclose(got, expected, *TOLERANCE["output"], err_msg=f"{where}: output")
            if step_index == 0:  # the independent checks, once a case
                oracle = reference(spec, arrays, oracle_conv, oracle_state, rounded=False)
                np.testing.assert_allclose(got, oracle, *TOLERANCE["oracle_output"],
                                           err_msg=f"{where}: ops.kda")
            if step_index == 0 and spec["tokens"] == 1:
                naive = naive_fla(spec, arrays, naive_conv, naive_state)
                np.testing.assert_allclose(got, naive, *TOLERANCE["output"], err_msg=f"{where}: fla naive_recurrent_kda"
                                           if fla_naive() else f"{where}: naive loop")
            state = buffers["state"].to_array(np.float32, ref_state.shape)
            conv = buffers["conv_state"].to_array(np.uint16, ref_conv.shape)
            states, convs = written_slots(arrays)
            written, untouched = split_slots(states, state_slots)
            close = np.isclose(state[written], ref_state[written], *TOLERANCE["state"])
            assert close.all(), (f"{where}: state slots {first_failures(written, close)} differ from the "
                                 f"reference (first of {(~close).sum()} values off)")
            same = state[untouched].view(np.uint32) == before_state[untouched].view(np.uint32)
            assert same.all(), f"{where}: state slots {first_failures(untouched, same)} are no request's, yet changed"
            written, untouched = split_slots(convs, state_slots)
            same = from_bf16(conv[written]) == ref_conv[written]
            assert same.all(), f"{where}: conv state slots {first_failures(written, same)} differ from the reference"
            same = conv[untouched] == before_conv[untouched]
            assert same.all(), f"{where}: conv slots {first_failures(untouched, same)} are no request's, yet changed"
            ref_state[list(states)] = state[list(states)]  # carry the device's state: steps stay comparable
    finally:
        for buffer in buffers.values():
            buffer.free()
        module.unload()


SPECS = _specs()


@pytest.mark.parametrize("spec", SPECS or [None], ids=[_stem(s) for s in SPECS] or ["unbuilt"])
def test_kda_split(spec, stream):
    if spec is None:
        pytest.fail(f"{CASES_FILE} is missing: run `python tests/gpu/cases/kda_split.py` on the CPU "
                    "machine and carry build/", pytrace=False)
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}", file=sys.stderr)
    run_case(spec, stream, seed)
