"""DeepSeek-V3 against Hugging Face transformers, token for token: a tiny random
`DeepseekV3ForCausalLM` (MLA with q LoRA and interleaved rope, a dense first layer, two mixture
layers of 8 routed experts in 4 groups, the best 2 groups kept, top 2, one shared expert, a random
correction bias, fp32) saved as safetensors, its config through `lanec import`, its weights bound
by checkpoint name, a prompt and 16 greedy tokens decoded on the interpreter; the tokens equal
transformers' greedy `generate`, and every step's logits are within 1e-3 of max |logit| of
transformers' forward over the same tokens.

transformers saves the experts under their per-expert names (`mlp.experts.N.gate_proj.weight`, its
qwen2_moe conversion reverted on save); a checkpoint of transformers 5's packed experts
(`mlp.experts.gate_up_proj` [E, 2I, H], `mlp.experts.down_proj` [E, H, I]) binds as well. The rope
is the default one, or YaRN (the published config's scaling) at a small original context, so the
ramp between extrapolated and interpolated frequencies falls inside the rope's dimensions, with
mscale and mscale_all_dim apart so the attention factor on cos / sin and the softmax scale's
yarn_get_mscale(factor, mscale_all_dim)^2 both move the logits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from compare import assert_same_decode, interpreted, norms_and_correction, pack_experts, reference, save_model  # noqa: E402


def saved_model(folder: Path, config: dict) -> Path:
    torch.manual_seed(0)
    model = transformers.DeepseekV3ForCausalLM(transformers.DeepseekV3Config(**config))
    return save_model(model, folder, norms_and_correction)

CONFIG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "rms_norm_eps": 1e-5,
    # MLA with a q LoRA, rope on 8 of each head's 24 query values, a latent of 32
    "q_lora_rank": 48, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "rope_interleave": True, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    # the first layer dense; 8 experts in 4 groups, the best 2 groups kept, top 2, one shared expert
    "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2,
    "n_shared_experts": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
    "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "max_position_embeddings": 128,
    # weights wide enough that logits spread over several units (see test_llama.py)
    "initializer_range": 0.2,
}


@pytest.mark.parametrize("packed", [False, True], ids=["per-expert", "packed-experts"])
def test_greedy_decode_matches_transformers(tmp_path, packed):
    folder = saved_model(tmp_path / "model", CONFIG)
    want = reference(transformers.DeepseekV3ForCausalLM, folder)
    if packed:
        pack_experts(folder / "model.safetensors", r"(.+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight",
                     ("gate_proj", "up_proj", "down_proj"), ".mlp.experts")
    got = interpreted(folder, tmp_path)
    assert_same_decode(got, want, CONFIG["vocab_size"])


def test_rope_halves_match_transformers(tmp_path):
    """rope_interleave false (rotate-half pairs) decodes the same as transformers too."""
    folder = saved_model(tmp_path / "model", {**CONFIG, "rope_interleave": False})
    assert_same_decode(interpreted(folder, tmp_path), reference(transformers.DeepseekV3ForCausalLM, folder),
                       CONFIG["vocab_size"])


# YaRN at original context 64 (max_position_embeddings 256 = factor 4 x 64, as transformers checks):
# with qk_rope_head_dim 8 and theta 1e4, beta_fast 4 / beta_slow 1 give the correction range
# [0, 2] (truncated): dimension 0 extrapolated, 1 half and half, 2 and 3 interpolated; untruncated
# [0.41, 1.01]. mscale 1 over mscale_all_dim 0.5: cos and sin x 1.065, the softmax scale x 1.143.
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
        "beta_fast": 4.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.5}


@pytest.mark.parametrize("truncate", [True, False], ids=["yarn", "yarn-untruncated"])
def test_yarn_decode_matches_transformers(tmp_path, truncate):
    config = {**CONFIG, "max_position_embeddings": 256, "rope_parameters": {**YARN, "truncate": truncate}}
    folder = saved_model(tmp_path / "model", config)
    assert_same_decode(interpreted(folder, tmp_path), reference(transformers.DeepseekV3ForCausalLM, folder),
                       CONFIG["vocab_size"])


def test_yarn_frequencies_are_transformers():
    """The interpreter's YaRN frequencies are `_compute_yarn_parameters`'s bit for bit, at the
    published numbers (rope 64, theta 1e4, factor 40, 4096, beta 32 / 1) and at the test's."""
    import numpy as np
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from lanec.interp.ops import frequencies

    for rope, theta, factor, original, fast, slow in ((64, 1e4, 40.0, 4096, 32.0, 1.0), (8, 1e4, 4.0, 64, 4.0, 1.0)):
        for truncate in (True, False):
            config = transformers.DeepseekV3Config(
                qk_rope_head_dim=rope, max_position_embeddings=int(factor * original),
                rope_parameters={"rope_type": "yarn", "rope_theta": theta, "factor": factor, "beta_fast": fast,
                                 "beta_slow": slow, "original_max_position_embeddings": original,
                                 "truncate": truncate})
            want, _ = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
            got = frequencies(rope, theta, "yarn", factor, None, None, original, fast, slow, int(truncate))
            np.testing.assert_array_equal(got, want.numpy())
