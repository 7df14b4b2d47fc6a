"""Programs: a `form` module in text, lowered with program_of, run on a random environment, and
checked against direct calls of the ops; JSON round trips; random environments; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser

from lanec.dialects.form import Form
from lanec.interp import interpret, ops
from lanec.interp.environment import Environment, random_environment
from lanec.interp.lower import program_of
from lanec.interp.program import Program

BF = "bf16"

# A dense step (batch 2): embed, norm, q/k/v in parts, rope, paged GQA attention, a q8_0 product,
# a norm with residual quantizing in its epilogue, a q8_0 gated pair, a mixture with correction and
# shared expert, a per-head part and per-head part product, elementwise ops, quantize, argmax.
DENSE = """
builtin.module {
  form.step batch 2 tokens 1 {
    %tok = form.input {role = "tokens"} : tensor<2xi32>
    %pos = form.input {role = "positions"} : tensor<2xi32>
    %pages = form.input {role = "pages"} : tensor<2x4xi32>
    %emb = form.weight {name = "embed", format = "bf16"} : tensor<50x64xbf16>
    %n1 = form.weight {name = "norm1", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "wq", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "wk", format = "bf16"} : tensor<16x64xbf16>
    %wv = form.weight {name = "wv", format = "bf16"} : tensor<16x64xbf16>
    %wo = form.weight {name = "wo", format = "q8_0"} : tensor<64x32xbf16>
    %n2 = form.weight {name = "norm2", format = "bf16"} : tensor<64xbf16>
    %gg = form.weight {name = "dense.gate", format = "q8_0"} : tensor<64x64xbf16>
    %gu = form.weight {name = "dense.up", format = "q8_0"} : tensor<64x64xbf16>
    %router = form.weight {name = "router", format = "bf16"} : tensor<4x64xbf16>
    %eg = form.weight {name = "experts.gate", format = "bf16"} : tensor<4x32x64xbf16>
    %eu = form.weight {name = "experts.up", format = "bf16"} : tensor<4x32x64xbf16>
    %ed = form.weight {name = "experts.down", format = "bf16"} : tensor<4x64x32xbf16>
    %corr = form.weight {name = "correction", format = "bf16"} : tensor<4xf32>
    %sg = form.weight {name = "shared.gate", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "shared.up", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "shared.down", format = "bf16"} : tensor<64x32xbf16>
    %wp = form.weight {name = "per_head", format = "bf16"} : tensor<24x8xbf16>
    %lm = form.weight {name = "lm_head", format = "bf16"} : tensor<50x64xbf16>
    %kc = form.state {name = "k_cache", kind = "kv"} : tensor<6x4x1x16xbf16>
    %vc = form.state {name = "v_cache", kind = "kv"} : tensor<6x4x1x16xbf16>
    %h = form.embed %tok, %emb : (tensor<2xi32>, tensor<50x64xbf16>) -> tensor<2x64xbf16>
    %x = form.norm %h, %n1 {eps = 1.0e-06 : f64} : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
    %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<2x64xbf16>, tensor<32x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<2x32xbf16>, tensor<2x16xbf16>, tensor<2x16xbf16>)
    %qr = form.rope %q, %pos {heads = 2 : i64, rotary = 8 : i64, theta = 10000.0 : f64} : (tensor<2x32xbf16>, tensor<2xi32>) -> tensor<2x32xbf16>
    %kr = form.rope %k, %pos {heads = 1 : i64, rotary = 8 : i64, theta = 10000.0 : f64} : (tensor<2x16xbf16>, tensor<2xi32>) -> tensor<2x16xbf16>
    %a = form.attention %qr, %kr, %v, %kc, %vc, %pages, %pos {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : (tensor<2x32xbf16>, tensor<2x16xbf16>, tensor<2x16xbf16>, tensor<6x4x1x16xbf16>, tensor<6x4x1x16xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> tensor<2x32xbf16>
    %o = form.product %a, %wo : (tensor<2x32xbf16>, tensor<64x32xbf16>) -> tensor<2x64xbf16>
    %y, %h2 = form.norm %o, %n2, %h {eps = 1.0e-06 : f64, quantize = 2 : i64} : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xbf16>) -> (tensor<2x64xi8>, tensor<2x64xbf16>)
    %d = form.gated_product %y, %gg, %gu {quantize = 1 : i64} : (tensor<2x64xi8>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<2x64xi8>
    %m = form.mixture %h2, %router, %eg, %eu, %ed correction %corr : tensor<4xf32> shared(%sg, %su, %sd : tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) {top_k = 2 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.5 : f64} : tensor<2x64xbf16>, tensor<4x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<2x64xbf16>
    %pp = form.part %qr {heads = 2 : i64, unit = 16 : i64, offset = 8 : i64, length = 8 : i64} : (tensor<2x32xbf16>) -> tensor<2x16xbf16>
    %ph = form.product %qr, %wp {heads = 2 : i64, unit = 16 : i64, offset = 8 : i64, length = 8 : i64} : (tensor<2x32xbf16>, tensor<24x8xbf16>) -> tensor<2x24xbf16>
    %s1 = form.add %m, %h2 : (tensor<2x64xbf16>, tensor<2x64xbf16>) -> tensor<2x64xbf16>
    %s2 = form.mul %s1, %d : (tensor<2x64xbf16>, tensor<2x64xi8>) -> tensor<2x64xbf16>
    %s3 = form.swiglu %s2, %s1 : (tensor<2x64xbf16>, tensor<2x64xbf16>) -> tensor<2x64xbf16>
    %s4 = form.silu %s3 : (tensor<2x64xbf16>) -> tensor<2x64xbf16>
    %s5 = form.sigmoid %s4 {quantize = 1 : i64} : (tensor<2x64xbf16>) -> tensor<2x64xi8>
    %q1 = form.quantize %s4 {words = 1 : i64} : (tensor<2x64xbf16>) -> tensor<2x64xi8>
    %logits = form.product %s4, %lm : (tensor<2x64xbf16>, tensor<50x64xbf16>) -> tensor<2x50xbf16>
    %next = form.argmax %logits : (tensor<2x50xbf16>) -> tensor<2xi32>
    form.return %next, %logits, %pp, %ph, %s5, %q1 : tensor<2xi32>, tensor<2x50xbf16>, tensor<2x16xbf16>, tensor<2x24xbf16>, tensor<2x64xi8>, tensor<2x64xi8>
  }
}
"""

# A linear-attention step of 2 speculative tokens (batch 3): the KDA chain op by op on one pair of
# states, the fused KDA op on another, and a latent attention.
LINEAR = """
builtin.module {
  form.step batch 3 tokens 2 {
    %tok = form.input {role = "tokens"} : tensor<6xi32>
    %pos = form.input {role = "positions"} : tensor<6xi32>
    %slots = form.input {role = "slots"} : tensor<3x3xi32>
    %acc = form.input {role = "accepted"} : tensor<3xi32>
    %pages = form.input {role = "pages"} : tensor<3x2xi32>
    %emb = form.weight {name = "embed", format = "bf16"} : tensor<40x64xbf16>
    %wq = form.weight {name = "wq", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "wk", format = "bf16"} : tensor<32x64xbf16>
    %wv = form.weight {name = "wv", format = "bf16"} : tensor<32x64xbf16>
    %wfa = form.weight {name = "f_a", format = "bf16"} : tensor<8x64xbf16>
    %wb = form.weight {name = "b", format = "bf16"} : tensor<2x64xbf16>
    %wg = form.weight {name = "g", format = "bf16"} : tensor<32x64xbf16>
    %wl = form.weight {name = "latent", format = "bf16"} : tensor<12x64xbf16>
    %wr = form.weight {name = "k_rope", format = "bf16"} : tensor<8x64xbf16>
    %cq = form.weight {name = "conv_q", format = "bf16"} : tensor<32x4xbf16>
    %ck = form.weight {name = "conv_k", format = "bf16"} : tensor<32x4xbf16>
    %cv = form.weight {name = "conv_v", format = "bf16"} : tensor<32x4xbf16>
    %cb1 = form.weight {name = "conv_bias_q", format = "bf16"} : tensor<32xbf16>
    %cb2 = form.weight {name = "conv_bias_k", format = "bf16"} : tensor<32xbf16>
    %cb3 = form.weight {name = "conv_bias_v", format = "bf16"} : tensor<32xbf16>
    %fb = form.weight {name = "f_b", format = "bf16"} : tensor<32x8xbf16>
    %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
    %dt = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
    %nw = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<32x12xbf16>
    %cs = form.state {name = "conv", kind = "conv"} : tensor<8x96x4xbf16>
    %st = form.state {name = "recurrent", kind = "recurrent"} : tensor<8x2x16x16xf32>
    %cs2 = form.state {name = "conv2", kind = "conv"} : tensor<8x96x4xbf16>
    %st2 = form.state {name = "recurrent2", kind = "recurrent"} : tensor<8x2x16x16xf32>
    %lc = form.state {name = "latent_cache", kind = "latent"} : tensor<8x4x20xbf16>
    %h = form.embed %tok, %emb : (tensor<6xi32>, tensor<40x64xbf16>) -> tensor<6x64xbf16>
    %q, %k, %v, %fa, %b, %g = form.product %h, %wq, %wk, %wv, %wfa, %wb, %wg : (tensor<6x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<8x64xbf16>, tensor<2x64xbf16>, tensor<32x64xbf16>) -> (tensor<6x32xbf16>, tensor<6x32xbf16>, tensor<6x32xbf16>, tensor<6x8xbf16>, tensor<6x2xbf16>, tensor<6x32xbf16>)
    %qc = form.conv %q, %cs, %cq, %slots accepted %acc : tensor<3xi32> bias %cb1 : tensor<32xbf16> {offset = 0 : i64, activation = "silu", norm_heads = 2 : i64, norm_eps = 1.0e-06 : f64} : tensor<6x32xbf16>, tensor<8x96x4xbf16>, tensor<32x4xbf16>, tensor<3x3xi32> -> tensor<6x32xbf16>
    %k0 = form.conv %k, %cs, %ck, %slots accepted %acc : tensor<3xi32> bias %cb2 : tensor<32xbf16> {offset = 32 : i64, activation = "silu"} : tensor<6x32xbf16>, tensor<8x96x4xbf16>, tensor<32x4xbf16>, tensor<3x3xi32> -> tensor<6x32xbf16>
    %kc = form.l2norm %k0 {heads = 2 : i64, eps = 1.0e-06 : f64} : (tensor<6x32xbf16>) -> tensor<6x32xbf16>
    %vc = form.conv %v, %cs, %cv, %slots accepted %acc : tensor<3xi32> bias %cb3 : tensor<32xbf16> {offset = 64 : i64, activation = "silu"} : tensor<6x32xbf16>, tensor<8x96x4xbf16>, tensor<32x4xbf16>, tensor<3x3xi32> -> tensor<6x32xbf16>
    %graw = form.product %fa, %fb : (tensor<6x8xbf16>, tensor<32x8xbf16>) -> tensor<6x32xbf16>
    %decay = form.kda_gate %graw, %alog, %dt {heads = 2 : i64, form = "softplus"} : (tensor<6x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<6x32xf32>
    %beta = form.sigmoid %b : (tensor<6x2xbf16>) -> tensor<6x2xbf16>
    %o = form.delta_rule %qc, %kc, %vc, %decay, %beta, %st, %slots accepted %acc {heads = 2 : i64, key_heads = 2 : i64, scale = 0.25 : f64} : (tensor<6x32xbf16>, tensor<6x32xbf16>, tensor<6x32xbf16>, tensor<6x32xf32>, tensor<6x2xbf16>, tensor<8x2x16x16xf32>, tensor<3x3xi32>, tensor<3xi32>) -> tensor<6x32xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 2 : i64, eps = 1.0e-05 : f64, activation = "sigmoid", quantize = 1 : i64} : (tensor<6x32xbf16>, tensor<6x32xbf16>, tensor<16xbf16>) -> tensor<6x32xi8>
    %z = form.kda qkv(%q, %k, %v) conv(%cq, %ck, %cv, %cs2) gate(%fa, %fb, %alog, %dt) beta %b out_gate %g norm %nw state %st2 slots %slots accepted %acc : tensor<3xi32> bias(%cb1, %cb2, %cb3 : tensor<32xbf16>, tensor<32xbf16>, tensor<32xbf16>) {heads = 2 : i64, form = "softplus", scale = 0.25 : f64, l2_eps = 1.0e-06 : f64, eps = 1.0e-05 : f64} : (tensor<6x32xbf16>, tensor<6x32xbf16>, tensor<6x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<8x96x4xbf16>) gate(tensor<6x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<6x2xbf16> out_gate tensor<6x32xbf16> norm tensor<16xbf16> state tensor<8x2x16x16xf32> slots tensor<3x3xi32> -> tensor<6x32xbf16>
    %lat, %krope = form.product %h, %wl, %wr : (tensor<6x64xbf16>, tensor<12x64xbf16>, tensor<8x64xbf16>) -> (tensor<6x12xbf16>, tensor<6x8xbf16>)
    %la = form.latent_attention %q, %lat, %krope, %lc, %kvb, %pages, %pos {heads = 2 : i64, nope = 8 : i64, rope = 8 : i64, lora = 12 : i64, v = 8 : i64, scale = 0.3 : f64, path = "absorbed"} : (tensor<6x32xbf16>, tensor<6x12xbf16>, tensor<6x8xbf16>, tensor<8x4x20xbf16>, tensor<32x12xbf16>, tensor<3x2xi32>, tensor<6xi32>) -> tensor<6x16xbf16>
    form.return %y, %z, %la, %qc : tensor<6x32xi8>, tensor<6x32xbf16>, tensor<6x16xbf16>, tensor<6x32xbf16>
  }
}
"""


def parse(text: str):
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Form)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


def dense_by_ops(env: Environment) -> list[np.ndarray]:
    i, w, s = env.inputs, env.weights, env.states
    h = ops.embed(i["tokens"], w["embed"])
    x = ops.rmsnorm(h, w["norm1"], 1e-6)
    q, k, v = (ops.product(x, w[n]) for n in ("wq", "wk", "wv"))
    qr = ops.rope(q, i["positions"], 2, 8, 10000.0)
    kr = ops.rope(k, i["positions"], 1, 8, 10000.0)
    a = ops.attention(qr, kr, v, s["k_cache"], s["v_cache"], i["pages"], i["positions"], 2, 1, 0.25)
    o = ops.product(a, ops.q8_0(w["wo"]))
    y, h2 = ops.rmsnorm(o, w["norm2"], 1e-6, residual=h)
    y = ops.quantize(y, 2)
    d = ops.quantize(ops.gated_product(y, ops.q8_0(w["dense.gate"]), ops.q8_0(w["dense.up"])), 1)
    m = ops.mixture(h2, w["router"], w["experts.gate"], w["experts.up"], w["experts.down"], 2, "sigmoid", 1, 2.5,
                    correction=w["correction"], shared=[w["shared.gate"], w["shared.up"], w["shared.down"]])
    pp = ops.part(qr, 2, 16, 8, 8)
    ph = ops.product_part(qr, w["per_head"], 2, 16, 8, 8)
    s1 = ops.add(m, h2)
    s4 = ops.silu(ops.swiglu(ops.mul(s1, d), s1))
    logits = ops.product(s4, w["lm_head"])
    return [ops.argmax(logits), logits, pp, ph, ops.quantize(ops.sigmoid(s4), 1), ops.quantize(s4, 1)]


def linear_by_ops(env: Environment) -> list[np.ndarray]:
    i, w, s = env.inputs, env.weights, env.states
    spec = dict(tokens=2, accepted=i["accepted"])
    h = ops.embed(i["tokens"], w["embed"])
    q, k, v, fa, b, g = (ops.product(h, w[n]) for n in ("wq", "wk", "wv", "f_a", "b", "g"))
    qc = ops.conv(q, s["conv"], w["conv_q"], i["slots"], 0, bias=w["conv_bias_q"], norm_heads=2, norm_eps=1e-6,
                  **spec)
    kc = ops.l2norm(ops.conv(k, s["conv"], w["conv_k"], i["slots"], 32, bias=w["conv_bias_k"], **spec), 2, 1e-6)
    vc = ops.conv(v, s["conv"], w["conv_v"], i["slots"], 64, bias=w["conv_bias_v"], **spec)
    decay = ops.kda_gate(ops.product(fa, w["f_b"]), w["A_log"], w["dt_bias"], 2, "softplus")
    o = ops.delta_rule(qc, kc, vc, decay, ops.sigmoid(b), s["recurrent"], i["slots"], 2, 2, 0.25, **spec)
    y = ops.quantize(ops.norm_gated(o, g, w["o_norm"], 2, 1e-5, "sigmoid"), 1)
    z = ops.kda(q, k, v, w["conv_q"], w["conv_k"], w["conv_v"], s["conv2"], fa, w["f_b"], w["A_log"], w["dt_bias"],
                b, g, w["o_norm"], s["recurrent2"], i["slots"], 2, "softplus", 0.25, 1e-6, 1e-5,
                biases=[w["conv_bias_q"], w["conv_bias_k"], w["conv_bias_v"]], **spec)
    la = ops.latent_attention(q, ops.product(h, w["latent"]), ops.product(h, w["k_rope"]), s["latent_cache"],
                              w["kv_b"], i["pages"], i["positions"], 2, 8, 8, 12, 8, 0.3, tokens=2)
    return [y, z, la, qc]


CASES = {"dense": (DENSE, dense_by_ops), "linear": (LINEAR, linear_by_ops)}


@pytest.mark.parametrize("case", list(CASES))
def test_program_matches_direct_ops(case):
    text, by_ops = CASES[case]
    program = program_of(parse(text))
    env = random_environment(program, seed=3, padding=0.4)
    direct, before = env.copy(), env.copy()
    got = program.run(env)
    want = by_ops(direct)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        assert np.abs(w).max() > 0
    for name in env.states:
        np.testing.assert_array_equal(env.states[name], direct.states[name])
        assert not np.array_equal(env.states[name], before.states[name]), f"{name} was never written"


@pytest.mark.parametrize("case", list(CASES))
def test_json_round_trip(case):
    program = program_of(parse(CASES[case][0]))
    text = program.to_json()
    again = Program.from_json(text)
    assert again == program and again.to_json() == text
    json.loads(text)  # plain JSON
    env = random_environment(program, seed=5)
    first, second = env.copy(), env.copy()
    for a, b in zip(program.run(first), again.run(second), strict=True):
        np.testing.assert_array_equal(a, b)
    for name in env.states:
        np.testing.assert_array_equal(first.states[name], second.states[name])


def test_interpret_lowers_and_runs():
    module = parse(DENSE)
    env = random_environment(program_of(module), seed=9)
    copy = env.copy()
    for a, b in zip(interpret(module, env), dense_by_ops(copy), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_quantize_epilogues_are_applied():
    program = program_of(parse(DENSE))
    norm = next(s for s in program.steps if s.op == "norm" and "residual" in s.operands)
    assert norm.properties["quantize"] == 2 and len(norm.results) == 2
    outputs = program.run(random_environment(program, seed=1))
    s5 = outputs[4]  # sigmoid with a one-word epilogue: whole int8 words of its block scales
    for block in s5.reshape(-1, 32):
        scale = np.abs(block).max() / 127
        np.testing.assert_allclose(block / scale, np.rint(block / scale), atol=1e-3)


def test_lower_names_the_op_it_cannot_interpret():
    text = DENSE.replace(
        "%s4 = form.silu %s3 : (tensor<2x64xbf16>) -> tensor<2x64xbf16>",
        "%s4 = builtin.unrealized_conversion_cast %s3 : tensor<2x64xbf16> to tensor<2x64xbf16>",
    )
    with pytest.raises(ops.InterpretError, match="no meaning for builtin.unrealized_conversion_cast"):
        program_of(parse(text))
    with pytest.raises(ops.InterpretError, match="holds exactly one form.step, got nothing"):
        program_of(parse("builtin.module {}"))


def test_run_rejects_a_mismatched_environment():
    program = program_of(parse(DENSE))
    env = random_environment(program, seed=2)
    del env.weights["wo"]
    with pytest.raises(ops.InterpretError, match="the environment has no weight 'wo'"):
        program.run(env)
    env = random_environment(program, seed=2)
    env.states["k_cache"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ops.InterpretError, match=r"the state 'k_cache' is \[2, 2\]; the program declares"):
        program.run(env)
    with pytest.raises(ops.InterpretError, match="not an interpreter program"):
        Program.from_json('{"batch": 1}')
    with pytest.raises(ops.InterpretError, match="not an interpreter program"):
        Program.from_json("[1, 2")


# ----------------------------------------------------------------------------------------------
# Random environments


def test_random_environment_for_a_speculative_step():
    program = program_of(parse(LINEAR))
    seen_padding = False
    for seed in range(20):
        env = random_environment(program, seed, padding=0.3)
        slots, accepted = env.inputs["slots"], env.inputs["accepted"]
        assert slots.dtype == accepted.dtype == np.int32
        assert ((accepted >= 1) & (accepted <= 2)).all()
        active = [b for b in range(3) if slots[b, accepted[b] - 1] > 0]
        assert active
        seen_padding |= len(active) < 3
        owned = [int(x) for b in active for x in slots[b] if x > 0]
        assert len(owned) == len(set(owned)) and max(owned) < 8
        for b in active:
            assert slots[b, 0] > 0
        positions = env.inputs["positions"].reshape(3, 2)
        assert (np.diff(positions, axis=1) == 1).all()
        pages = env.inputs["pages"]
        used = [int(pages[b, p // 4]) for b in range(3) for p in positions[b]]
        assert min(used) >= 0 and max(used) < 8
        assert len({int(p) for p in pages[pages >= 0]}) == int((pages >= 0).sum())  # distinct pages
        assert ((env.inputs["tokens"] >= 0) & (env.inputs["tokens"] < 40)).all()
    assert seen_padding


def test_random_environment_values():
    program = program_of(parse(LINEAR))
    env = random_environment(program, seed=4)
    for name, values in {**env.weights, **env.states}.items():
        assert values.dtype == np.float32 and np.isfinite(values).all()
        assert np.count_nonzero(values) == values.size, f"{name} holds zeros"
    decl = {w.name: w for w in program.weights}
    for name, values in env.weights.items():
        if decl[name].dtype == BF:  # exactly bf16 values
            assert not (values.view(np.uint32) & 0xFFFF).any()
    assert abs(env.weights["o_norm"].mean() - 1) < 0.1
    a = np.exp(env.weights["A_log"])
    assert ((a >= 1) & (a <= 16)).all()
    dt = np.logaddexp(0, env.weights["dt_bias"])
    assert ((dt > 5e-4) & (dt < 0.2)).all()
    assert np.abs(env.states["recurrent"]).max() < 1
    again = random_environment(program, seed=4)
    assert all(np.array_equal(env.weights[n], again.weights[n]) for n in env.weights)
    other = random_environment(program, seed=5)
    assert not np.array_equal(env.weights["wq"], other.weights["wq"])


def test_activations_stay_bounded_through_layers():
    """Weights scaled by fan-in: eight norm / product / residual layers keep values modest."""
    layer = """
    %n{i} = form.weight {{name = "norm{i}", format = "bf16"}} : tensor<256xbf16>
    %w{i} = form.weight {{name = "w{i}", format = "bf16"}} : tensor<256x256xbf16>
    %x{i} = form.norm %h{i}, %n{i} {{eps = 1.0e-06 : f64}} : (tensor<4x256xbf16>, tensor<256xbf16>) -> tensor<4x256xbf16>
    %p{i} = form.product %x{i}, %w{i} : (tensor<4x256xbf16>, tensor<256x256xbf16>) -> tensor<4x256xbf16>
    %h{j} = form.add %p{i}, %h{i} : (tensor<4x256xbf16>, tensor<4x256xbf16>) -> tensor<4x256xbf16>
    """
    body = "".join(layer.format(i=i, j=i + 1) for i in range(8))
    text = f"""builtin.module {{ form.step batch 4 tokens 1 {{
    %tok = form.input {{role = "tokens"}} : tensor<4xi32>
    %emb = form.weight {{name = "embed", format = "bf16"}} : tensor<100x256xbf16>
    %h0 = form.embed %tok, %emb : (tensor<4xi32>, tensor<100x256xbf16>) -> tensor<4x256xbf16>
    {body}
    form.return %h8 : tensor<4x256xbf16>
    }} }}"""
    program = program_of(parse(text))
    (out,) = program.run(random_environment(program, seed=0))
    rms = float(np.sqrt((out**2).mean()))
    assert 1 < rms < 8


def test_environment_copy_is_independent():
    program = program_of(parse(LINEAR))
    env = random_environment(program, seed=6)
    copy = env.copy()
    program.run(copy)
    assert not np.array_equal(copy.states["recurrent"], env.states["recurrent"])
    again = env.copy()
    program.run(again)
    np.testing.assert_array_equal(copy.states["recurrent"], again.states["recurrent"])


EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.mlir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_interpret(path):
    """Every example small enough for a CPU runs on fresh random values, outputs finite."""
    program = program_of(parse(path.read_text()))
    weight_bytes = 4 * sum(int(np.prod(w.shape)) for w in program.weights)
    if weight_bytes > 400e6:
        pytest.skip(f"{weight_bytes / 1e9:.1f} GB of fp32 weights: a model for the GPU machine")
    env = random_environment(program, seed=0)
    for out in program.run(env):
        assert np.isfinite(out).all()
    for values in env.states.values():
        assert np.isfinite(values).all()
