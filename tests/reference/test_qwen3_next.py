"""Qwen3-Next against Hugging Face transformers, token for token: a tiny random
`Qwen3NextForCausalLM` (three Gated DeltaNet layers and one gated full-attention layer, value heads
sharing key heads two to one, partial rotary, a softmax-routed mixture with the sigmoid-gated shared
expert, one dense layer by `mlp_only_layers`, fp32) saved as safetensors, its config through
`lanec import`, its weights bound by checkpoint name, a prompt and 16 greedy tokens decoded on the
interpreter; the tokens equal transformers' greedy `generate`, and every step's logits are within
1e-3 of max |logit| of transformers' forward over the same tokens.

transformers runs Gated DeltaNet without fla through its torch fallbacks (`causal_conv1d_update` /
`causal_conv1d_fn`, `torch_recurrent_gated_delta_rule` for a decode step, `torch_chunk_gated_delta_rule`
for a prefill): both are the delta rule the interpreter runs a token at a time.

Qwen3-Next's RMS norms are zero-centred (`x * rms * (1 + w)`, weights initialised to zero): they
are set away from zero here, so a weight bound without its `+1` (or read as another's) would show;
the gated norm of the DeltaNet output is a plain one (`w`, initialised to one), set away from one.
transformers saves the experts per expert (`mlp.experts.N.gate_proj.weight`); a checkpoint of
transformers 5's packed `mlp.experts.gate_up_proj` / `down_proj` binds as well.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from compare import assert_same_decode, interpreted, pack_experts, reference, save_model  # noqa: E402


def adjust(name: str, tensor) -> None:
    if name.endswith("linear_attn.norm.weight"):  # the gated norm: w, initialised to one
        tensor.copy_(1 + 0.2 * torch.randn_like(tensor))
    elif name.endswith("norm.weight"):  # zero-centred norms: 1 + w, w initialised to zero
        tensor.copy_(0.2 * torch.randn_like(tensor))


def saved_model(folder: Path, **changes) -> Path:
    torch.manual_seed(0)
    config = transformers.Qwen3NextConfig(**{**CONFIG, **changes})
    return save_model(transformers.Qwen3NextForCausalLM(config), folder, adjust)

CONFIG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "rms_norm_eps": 1e-6,
    # gated full attention: 4 query heads over 2 KV heads of 16, a quarter of each head rotated
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    # Gated DeltaNet: 2 key heads of 16, 4 value heads of 8 (two value heads a key head)
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 4,
    # layers 0, 1, 3 linear, layer 2 full attention (0-indexed)
    "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention"],
    # 8 experts, top 2, renormalised, a shared expert of 48; layer 1 dense
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
    "norm_topk_prob": True, "mlp_only_layers": [1], "decoder_sparse_step": 1,
    "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "max_position_embeddings": 128,
    # weights wide enough that logits spread over several units (see test_llama.py)
    "initializer_range": 0.2,
}


@pytest.mark.parametrize("packed", [False, True], ids=["per-expert", "packed-experts"])
def test_greedy_decode_matches_transformers(tmp_path, packed):
    folder = saved_model(tmp_path / "model")
    want = reference(transformers.Qwen3NextForCausalLM, folder)
    if packed:
        pack_experts(folder / "model.safetensors", r"(.+)\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight",
                     ("gate_proj", "up_proj", "down_proj"), ".experts")
    got = interpreted(folder, tmp_path)
    assert_same_decode(got, want, CONFIG["vocab_size"])


def test_value_heads_one_to_one_and_full_attention_interval(tmp_path):
    """As many value heads as key heads, and the layer kinds from `full_attention_interval` (every
    second layer full attention) with no `layer_types` in the saved config."""
    folder = saved_model(tmp_path / "model", linear_num_value_heads=2, linear_value_head_dim=16, layer_types=None,
                         full_attention_interval=2, mlp_only_layers=[])
    import json

    config = json.loads((folder / "config.json").read_text())
    config.pop("layer_types")
    config["full_attention_interval"] = 2
    (folder / "config.json").write_text(json.dumps(config))
    want = reference(transformers.Qwen3NextForCausalLM, folder)
    got = interpreted(folder, tmp_path)
    assert_same_decode(got, want, CONFIG["vocab_size"])
