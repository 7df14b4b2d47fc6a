"""Tiny random Hugging Face models of each family we import, saved as a checkpoint folder
(config.json, model.safetensors) that `lanec import` and `lanec generate` read as they read a
published model's. Needs torch and transformers (the `ref` extra).

    python3 -m lanec.models.tiny FAMILY FOLDER [--seed N]      # llama, deepseek_v3, kimi_linear, qwen3_next

Each family is sized for the lane's kernels (attention heads of 64 or more, KDA heads of 128,
16-byte vectors everywhere), with the published model's features: rope with its scaling, experts,
a dense first layer. Its weights are rounded to bf16 and saved as bf16, so the GPU's bf16 weights
are the checkpoint's values (and the interpreter reads the same values as fp32). The GPU tests
(tests/gpu/tiny_models.py) build these and choose prompts that stay clear of near ties."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import click

# every family's import: one request a token a step, 4 pages of 16 cache rows (64 positions)
IMPORT = ["--batch", "1", "--page-size", "16", "--context-pages", "4"]


class Family(NamedTuple):
    model: str  # the transformers class: ForCausalLM
    config: str  # its config class
    fields: dict  # the config
    compiles: bool = True  # False: the plan may not compile yet (its failure is recorded, not raised)


COMMON = {"vocab_size": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "pad_token_id": 0,
          "bos_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 256, "initializer_range": 0.1}

FAMILIES: dict[str, Family] = {
    # GQA over heads of 64, llama3 scaling at an original context of 64: every branch turns some pair
    "llama": Family("LlamaForCausalLM", "LlamaConfig", {
        **COMMON, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}),
    # MLA with q LoRA and YaRN on the interleaved rope part (mscale apart from mscale_all_dim), a dense
    # first layer, then 8 routed experts in 4 groups (2 kept, top 2) with a shared expert: one
    # mixture layer, as each router's choice must stay clear of near ties at every step (with two,
    # no prompt of 3 x 400 was)
    "deepseek_v3": Family("DeepseekV3ForCausalLM", "DeepseekV3Config", {
        **COMMON, "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 128, "kv_lora_rank": 256,
        "qk_nope_head_dim": 64, "qk_rope_head_dim": 64, "v_head_dim": 64, "rope_interleave": True,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                            "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
                            "mscale": 1.0, "mscale_all_dim": 0.5},
        "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4,
        "topk_group": 2, "n_shared_experts": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True}),
    # KDA layers of 2 heads of 128 (KdaSplit's head), an MLA layer (NoPE), the first three layers
    # dense: one mixture layer (with three, no prompt of 3 x 400 kept every router clear of ties)
    "kimi_linear": Family("KimiLinearForCausalLM", "KimiLinearConfig", {
        **COMMON, "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": None, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "linear_attn_config": {"kda_layers": [1, 2, 4], "full_attn_layers": [3], "head_dim": 128, "num_heads": 2,
                               "short_conv_kernel_size": 4},
        "num_experts": 8, "num_experts_per_token": 2, "num_shared_experts": 1, "first_k_dense_replace": 3,
        "routed_scaling_factor": 2.446}),
    # Gated DeltaNet and gated full attention with partial rotary, one mixture layer (with three, no
    # prompt of 3 x 400 kept every router clear of near ties) and 128 tokens (with 512, whose top two
    # logits lie closer, the best prompt's leads were 1.42x the bf16 drift, not 2)
    "qwen3_next": Family("Qwen3NextForCausalLM", "Qwen3NextConfig", {
        **COMMON, "vocab_size": 128, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention"],
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 128, "norm_topk_prob": True, "mlp_only_layers": [0, 1, 3],
        "decoder_sparse_step": 1}),
}


def save(name: str, family: Family, folder: Path, seed: int = 0) -> Path:
    """The family's tiny random model saved in `folder` (config.json, model.safetensors), every
    parameter rounded to bf16 (and saved so), norms and a correction bias moved off their initial values."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = getattr(transformers, family.config)(**family.fields)
    model = getattr(transformers, family.model)(config).to(torch.float32).eval()
    zero_centred = name == "qwen3_next"  # Qwen3-Next's RMS norms apply 1 + w
    with torch.no_grad():
        for key, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if key.endswith("norm.weight"):
                plain = not zero_centred or key.endswith("linear_attn.norm.weight")
                tensor.copy_((1 if plain else 0) + 0.2 * torch.randn_like(tensor))
            elif key.endswith("e_score_correction_bias"):
                tensor.copy_(0.1 * torch.randn_like(tensor))
            if tensor.is_floating_point():
                tensor.copy_(tensor.to(torch.bfloat16).to(torch.float32))
    model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)  # the same values, half the bytes
    return folder




@click.command()
@click.argument("family", type=click.Choice(sorted(FAMILIES)))
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True, help="torch's seed for the random weights")
def main(family: str, folder: Path, seed: int) -> None:
    """Save FAMILY's tiny random model in FOLDER (config.json, model.safetensors)."""
    try:
        save(family, FAMILIES[family], folder, seed)
    except ImportError as error:
        raise click.ClickException(f"the tiny models need torch and transformers (pip install -e \".[ref]\"): "
                                   f"{error}") from None
    click.echo(f"{family}: {folder / 'config.json'}, {folder / 'model.safetensors'}")


if __name__ == "__main__":
    main()
