"""Qwen3-Next's importer (config reading, one-line errors, the step's shapes and names), the
`head_norm` op's meaning, and the `+1` weight binding; the token-for-token check against
transformers is tests/reference/test_qwen3_next.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.dialects import form
from lanec.interp import ops
from lanec.models import importer
from lanec.models.builder import StepOptions, module_text
from lanec.models.config import ConfigError, qwen3_next_config

PUBLISHED = Path(__file__).parent.parent / "examples" / "qwen3-next-80b-a3b.config.json"


def published() -> dict:
    return json.loads(PUBLISHED.read_text())


def test_published_config_reads_the_model_card_numbers():
    c = qwen3_next_config(published())
    assert (c.layers, c.hidden, c.vocab, c.experts, c.top_k, c.expert_width, c.shared_width) == \
        (48, 2048, 151936, 512, 10, 512, 512)
    assert (c.heads, c.kv_heads, c.head, c.rotary, c.theta) == (16, 2, 256, 64, 1e7)
    assert (c.key_heads, c.value_heads, c.key_dim, c.value_dim, c.conv_width) == (16, 32, 128, 128, 4)
    assert [n for n, linear in enumerate(c.linear) if not linear] == list(range(3, 48, 4))
    assert all(c.sparse) and c.renormalize


def ops_of(module):
    return list(module.ops.first.body.block.ops)


def test_step_shapes_and_names():
    module = importer(published())(published(), StepOptions(layers=4))
    module_text(module)
    weights = {op.weight_name.data: form.shape(op.result) for op in ops_of(module) if isinstance(op, form.WeightOp)}
    assert weights["model.layers.0.linear_attn.in_proj_qkvz.weight"] == (16 * (2 * 128 + 2 * 2 * 128), 2048)
    assert weights["model.layers.0.linear_attn.in_proj_ba.weight"] == (64, 2048)
    assert weights["model.layers.0.linear_attn.conv1d.weight[2048:4096]"] == (2048, 4)
    assert weights["model.layers.0.linear_attn.conv1d.weight[4096:8192]"] == (4096, 4)
    assert weights["model.layers.0.linear_attn.A_log"] == (32,)
    assert weights["model.layers.3.self_attn.q_proj.weight"] == (16 * 512, 2048)
    assert weights["model.layers.3.self_attn.q_norm.weight+1"] == (256,)
    assert weights["model.layers.3.mlp.experts.*.gate_proj.weight"] == (512, 512, 2048)
    assert weights["model.layers.3.mlp.shared_expert_gate.weight"] == (1, 2048)
    assert "model.norm.weight+1" in weights
    states = {op.state_name.data: form.shape(op.result) for op in ops_of(module) if isinstance(op, form.StateOp)}
    assert states["model.layers.0.conv"] == (2, 2 * 2048 + 4096, 3)
    assert states["model.layers.0.recurrent"] == (2, 32, 128, 128)
    rules = [op for op in ops_of(module) if isinstance(op, form.DeltaRuleOp)]
    assert [(op.heads.value.data, op.key_heads.value.data) for op in rules] == [(32, 16)] * 3


@pytest.mark.parametrize("change, field", [
    ({"attention_bias": True}, "attention_bias"),
    ({"use_sliding_window": True}, "use_sliding_window"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling.rope_type"),
    ({"linear_num_value_heads": 24}, "linear_num_value_heads"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
    ({"mlp_only_layers": [48]}, "mlp_only_layers"),
    ({"layer_types": ["linear_attention"] * 3}, "layer_types"),
    ({"num_experts_per_tok": 513}, "num_experts_per_tok"),
    ({"partial_rotary_factor": 0.001}, "partial_rotary_factor"),
])
def test_bad_configs_are_one_line_errors(tmp_path, change, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**published(), **change}))
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out.mlir")])
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1 and field in result.output, result.output
    with pytest.raises(ConfigError, match=field.split(".")[0]):
        qwen3_next_config({**published(), **change})


def test_head_norm_by_loop():
    rng = np.random.default_rng(0)
    heads, size = 3, 8
    x, w = rng.standard_normal((2, heads * size), dtype=np.float32), 1 + 0.1 * rng.standard_normal(size)
    want = np.zeros((2, heads * size))
    for r in range(2):
        for h in range(heads):
            xh = x[r, h * size:(h + 1) * size].astype(np.float64)
            want[r, h * size:(h + 1) * size] = xh / np.sqrt((xh**2).mean() + 1e-6) * w
    np.testing.assert_allclose(ops.head_norm(x, w, heads, 1e-6), want, rtol=1e-5, atol=1e-6)


def test_plus_one_weights_bind_the_checkpoint_tensor_plus_one(tmp_path):
    from safetensors.numpy import save_file

    from lanec.runtime.weights import Checkpoint

    w = np.array([0.5, -0.25, 0.0], np.float32)
    save_file({"model.norm.weight": w}, str(tmp_path / "model.safetensors"))
    checkpoint = Checkpoint(tmp_path / "model.safetensors")
    assert checkpoint.holds("model.norm.weight+1") and not checkpoint.holds("model.other.weight+1")
    np.testing.assert_array_equal(checkpoint.resolve("model.norm.weight+1", (3,)), w + 1)
