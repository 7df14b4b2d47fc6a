"""The linear-attention kernels that run where KdaSplit does not (conv, delta_rule, kda_gate,
head_norm, part) compile for sm_90a (CPU only): their PTX has the PDL pair, no local memory (a
register indexed at run time would spill there) and one pointer a param; their params and launches
follow the specialization; a bad specialization is one line naming the fact. And the lowering:
Qwen3-Next's Gated DeltaNet layer and Kimi Linear's KDA held back at head size 64 become these
launches (no `no lane kernel for`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from ptx import compiled_for_sm90a

from lanec.cli import main
from lanec.codegen.kernels.conv import Conv
from lanec.codegen.kernels.delta_rule import DeltaRule
from lanec.codegen.kernels.head_norm import HeadNorm
from lanec.codegen.kernels.kda_gate import KdaGate
from lanec.codegen.kernels.part import Part

ROOT = Path(__file__).resolve().parents[1]

KERNELS = {
    "conv_norm16_qwen": lambda: Conv(1, 1, 2048, 4, 2, 8192, offset=2048, norm_heads=16),
    "conv_t3_bias_pitched": lambda: Conv(7, 3, 1000, 3, 30, 3000, offset=1000, bias=True, slot_columns=4,
                                         x_pitch=3008),
    "conv_t16_none": lambda: Conv(2, 16, 192, 2, 40, 192, activation="none", slot_columns=16),
    "delta_rule_qwen_head": lambda: DeltaRule(1, 1, 32, 16, 128, 128, 2, 128 ** -0.5, per_key=False),
    "delta_rule_h64_key_t4": lambda: DeltaRule(3, 4, 5, 5, 64, 64, 13, 0.125, slot_columns=4),
    "delta_rule_k256_t16_pitched": lambda: DeltaRule(2, 16, 3, 3, 256, 256, 40, 0.0625, slot_columns=16,
                                                     q_pitch=1024, beta_pitch=8),
    "kda_gate_softplus_head": lambda: KdaGate(1, 32, 1),
    "kda_gate_lower_bound_key": lambda: KdaGate(5, 3, 64, "lower_bound", -5.0, g_pitch=200),
    "head_norm_l2": lambda: HeadNorm(1, 32, 64, 1e-6, mean=False, weight=False),
    "head_norm_rms_pitched": lambda: HeadNorm(3, 2, 256, 1e-6, x_pitch=9216),
    "head_norm_gated_swish": lambda: HeadNorm(5, 3, 200, 1e-6, gate="swish", x_pitch=608, gate_pitch=640),
    "part_vectors": lambda: Part(1, 16, 768, 256, 256, x_pitch=12352),
    "part_pairs": lambda: Part(64, 16, 4, 2, 2, x_pitch=12352),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_compiles_for_sm90a(case):
    compiled_for_sm90a(KERNELS[case]())


def test_state_moves_as_16_byte_vectors():
    ptx = compiled_for_sm90a(KERNELS["delta_rule_qwen_head"]()).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    assert "ld.global.v4.f32" in before  # the state rows, loaded before the PDL wait
    assert "st.global.v4.f32" in after and "shfl.sync.bfly" in after


def test_part_copies_whole_vectors_where_it_can():
    assert Part(1, 16, 768, 256, 256, x_pitch=12352).per_vector == 8
    assert Part(64, 16, 4, 2, 2, x_pitch=12352).per_vector == 2
    assert Part(5, 3, 20, 3, 7).per_vector == 1
    assert "ld.global.v4" in compiled_for_sm90a(KERNELS["part_vectors"]()).ptx


def test_params_and_launches_follow_the_specialization():
    conv = Conv(7, 3, 1000, 3, 30, 3000, offset=1000, bias=True, slot_columns=4, x_pitch=3008)
    assert [p.name for p in conv.params()] == ["x", "weight", "bias", "slots", "accepted", "state", "y"]
    assert conv.params()[5].shape == (30, 3000, 4) and conv.params()[0].strides == (3008, 1)
    assert conv.launch().grid == (8, 7, 1)
    normed = Conv(1, 1, 2048, 4, 2, 8192, norm_heads=16)
    assert [p.name for p in normed.params()] == ["x", "weight", "slots", "state", "y"]
    assert normed.launch().grid == (16, 1, 1) and normed.launch().block == (128, 1, 1)
    rule = DeltaRule(3, 4, 5, 5, 64, 64, 13, 0.125, per_key=False, slot_columns=4)
    assert [p.name for p in rule.params()] == ["q", "k", "v", "decay", "beta", "slots", "accepted", "state", "out"]
    assert rule.params()[3].shape == (12, 5) and rule.params()[5].shape == (3, 4)
    assert rule.launch().grid == (rule.split, 5, 3) and 64 % rule.split == 0
    one = DeltaRule(1, 1, 32, 16, 128, 128, 2, 0.088, split=1)
    assert one.launch().grid == (1, 32, 1) and one.passes * one.keys_a_lane <= 64
    assert [p.name for p in HeadNorm(1, 4, 64, 1e-6, gate="sigmoid").params()] == ["x", "gate", "w", "y"]
    assert [p.name for p in HeadNorm(1, 4, 64, 1e-6, mean=False, weight=False).params()] == ["x", "y"]
    assert KdaGate(1, 32, 1).params()[-1].dtype == "float32"


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Conv(1, 1, 2048, 4, 2, 8192, norm_heads=32 * 3), "do not split into 96 heads"),
    (lambda: Conv(1, 1, 480, 4, 2, 480, norm_heads=10), "head size 48 is not a whole number of warps"),
    (lambda: Conv(1, 1, 128, 9, 2, 128), "width 9: 2 to 8 taps"),
    (lambda: Conv(1, 3, 128, 4, 9, 128, slot_columns=2), "reads slots [batch, >= 3]"),
    (lambda: DeltaRule(1, 17, 4, 4, 128, 128, 40, 0.1, slot_columns=17), "supports 1-16 tokens"),
    (lambda: DeltaRule(1, 1, 4, 4, 96, 128, 2, 0.1), "key head size 96"),
    (lambda: DeltaRule(1, 1, 6, 4, 128, 128, 2, 0.1), "6 value heads do not share 4 key heads"),
    (lambda: DeltaRule(1, 1, 4, 4, 256, 256, 2, 0.1, split=1), "exceeds 64 registers"),
    (lambda: KdaGate(1, 4, 64, "lower_bound"), "needs lower_bound"),
    (lambda: HeadNorm(1, 4, 2048, 1e-6), "head size 2048"),
    (lambda: Part(1, 4, 64, 60, 8), "does not fit a unit of 64"),
])
def test_bad_specializations_are_one_line(make, message):
    with pytest.raises(ValueError, match=None) as error:
        make()
    assert message in str(error.value) and "\n" not in str(error.value)


def kimi_h64(tmp_path: Path) -> Path:
    config = json.loads((ROOT / "examples" / "kimi-linear-48b-a3b.config.json").read_text())
    config["linear_attn_config"]["head_dim"] = 64
    path = tmp_path / "kimi-h64.config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize(("model", "arguments", "kernels"), [
    ("qwen", ["--layers", "1"], {"part", "conv", "kda_gate", "delta_rule", "head_norm"}),
    ("kimi-h64", ["--kda-only", "--layers", "1", "--dense-mlp", "512", "--batch", "3", "--spec-tokens", "2"],
     {"part", "conv", "kda_gate", "delta_rule", "head_norm"}),
])
def test_held_back_linear_attention_compiles_to_these_launches(model, arguments, kernels, tmp_path):
    config = kimi_h64(tmp_path) if model == "kimi-h64" else ROOT / "examples" / "qwen3-next-80b-a3b.config.json"
    form, plan = tmp_path / "model.mlir", tmp_path / "model.plan"
    runner = CliRunner()
    imported = runner.invoke(main, ["import", str(config), *arguments, "-o", str(form)])
    assert imported.exit_code == 0, imported.output
    compiled = runner.invoke(main, ["compile", str(form), "-o", str(plan)])
    assert compiled.exit_code == 0, compiled.output
    shown = runner.invoke(main, ["show", str(plan)])
    assert shown.exit_code == 0, shown.output
    assert "kda_split" not in shown.output
    for kernel in kernels:
        assert kernel in shown.output, f"no {kernel} launch in the plan"
