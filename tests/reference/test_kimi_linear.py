"""Kimi Linear against Hugging Face transformers, token for token: a tiny random
`KimiLinearForCausalLM` (KDA and MLA layers, a dense first layer, a mixture with a shared expert,
fp32) saved as safetensors, its config through `lanec import`, its weights bound by checkpoint
name, a prompt and 16 greedy tokens decoded on the interpreter; the tokens equal transformers'
greedy `generate`, and every step's logits are within 1e-3 of max |logit| of transformers' forward
over the same tokens.

transformers runs KDA without fla through its torch fallbacks (`causal_conv1d_update` /
`causal_conv1d_fn`, `recurrent_kimi_delta_attention` for a decode step, `chunk_kimi_delta_attention`
for a prefill), so `generate`'s prefill and the full forward take the chunked form and the decode
steps the recurrent one: both are the delta rule the interpreter runs a token at a time.

transformers saves Kimi Linear under the published checkpoint's names (its conversion mapping
reverted on save: per-expert `block_sparse_moe.experts.N.w1/w2/w3`, `q_conv1d` / `k_conv1d` /
`v_conv1d`, `f_a_proj` and `A_log` on `self_attn`), and the same reverted renaming puts the dense
first layer's MLP under `block_sparse_moe.` too. A checkpoint of transformers 5's own names for the
experts (`mlp.experts.gate_up_proj` [E, 2I, H], `mlp.experts.down_proj` [E, H, I]) binds as well.

`tie_word_embeddings` is not compared: transformers' `KimiLinearForCausalLM` declares no tied
weights (`_tied_weights_keys = {}`), so its lm_head stays its own even when the config says tied,
while lanec (as vLLM) reads the embedding table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from compare import assert_same_decode, interpreted, norms_and_correction, pack_experts, reference, save_model  # noqa: E402


def saved_model(folder: Path) -> Path:
    torch.manual_seed(0)
    return save_model(transformers.KimiLinearForCausalLM(transformers.KimiLinearConfig(**CONFIG)), folder, norms_and_correction)

CONFIG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "rms_norm_eps": 1e-5,
    # MLA: no q LoRA, NoPE (the shared key part is not turned), a latent of 32
    "q_lora_rank": None, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    # KDA layers 1, 2, 4 and MLA layer 3 (1-indexed, as linear_attn_config lists them)
    "linear_attn_config": {"kda_layers": [1, 2, 4], "full_attn_layers": [3], "head_dim": 16, "num_heads": 4,
                           "short_conv_kernel_size": 4},
    # 8 experts, top 2, one shared expert, the first layer dense: transformers' defaults for the last
    # three, written out anyway (the config.json it saves writes them too)
    "num_experts": 8, "num_experts_per_token": 2, "num_shared_experts": 1, "first_k_dense_replace": 1,
    "routed_scaling_factor": 2.446,
    "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    # weights wide enough that logits spread over several units (see test_llama.py)
    "initializer_range": 0.2,
}


@pytest.mark.parametrize("packed", [False, True], ids=["per-expert", "packed-experts"])
def test_greedy_decode_matches_transformers(tmp_path, packed):
    folder = saved_model(tmp_path / "model")
    want = reference(transformers.KimiLinearForCausalLM, folder)
    if packed:
        pack_experts(folder / "model.safetensors", r"(.+)\.block_sparse_moe\.experts\.(\d+)\.(w[123])\.weight",
                     ("w1", "w3", "w2"), ".mlp.experts")
    got = interpreted(folder, tmp_path)
    assert_same_decode(got, want, CONFIG["vocab_size"])
