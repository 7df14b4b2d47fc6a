"""A tiny Llama-style model as llama.cpp's GGUF converter writes it, made with the gguf package:
the Hugging Face config, random tensors under transformers' names, llama.cpp's names for them and
its q / k row permutation (for its rope). tests/test_gguf_checkpoint.py reads it on the CPU;
tests/gpu/gguf_model.py builds it and its plans for `lanec run --weights model.gguf --check` on the GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LAYERS, HIDDEN, WIDTH, VOCAB, HEADS, KV_HEADS, HEAD = 2, 128, 256, 256, 2, 1, 64
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": WIDTH, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 128, "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}
# llama.cpp's names of transformers' LlamaForCausalLM tensors (its TensorNameMap, written out here)
LAYER_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight",
         **{f"model.layers.{n}.{hf}.weight": f"blk.{n}.{ours}.weight" for n in range(LAYERS)
            for hf, ours in LAYER_NAMES.items()}}


def hf_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    shapes = {"self_attn.q_proj": (HEADS * HEAD, HIDDEN), "self_attn.k_proj": (KV_HEADS * HEAD, HIDDEN),
              "self_attn.v_proj": (KV_HEADS * HEAD, HIDDEN), "self_attn.o_proj": (HIDDEN, HEADS * HEAD),
              "mlp.gate_proj": (WIDTH, HIDDEN), "mlp.up_proj": (WIDTH, HIDDEN), "mlp.down_proj": (HIDDEN, WIDTH)}
    tensors = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, HIDDEN)),
               "model.norm.weight": 1 + 0.2 * rng.standard_normal(HIDDEN),
               "lm_head.weight": 0.2 * rng.standard_normal((VOCAB, HIDDEN))}
    for n in range(LAYERS):
        for name, shape in shapes.items():
            tensors[f"model.layers.{n}.{name}.weight"] = 0.2 * rng.standard_normal(shape)
        for name in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"model.layers.{n}.{name}.weight"] = 1 + 0.2 * rng.standard_normal(HIDDEN)
    return {name: values.astype(np.float32) for name, values in tensors.items()}


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py `LlamaModel.permute` of q / k rows (for its rope)."""
    return rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def write_gguf(path: Path, tensors: dict[str, np.ndarray], types: dict[str, str] | None = None,
               raw: dict[str, tuple[np.ndarray, str]] | None = None) -> Path:
    """`tensors` (Hugging Face names) as llama.cpp's converter writes them: its names, q and k
    permuted, `types[hf name]` (F32 by default: F16, BF16, Q8_0) quantized by the gguf package;
    `raw`: gguf name -> (bytes as the writer takes them, type name), written as they are."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(LAYERS)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_context_length(128)
    writer.add_embedding_length(HIDDEN)
    for name, values in tensors.items():
        if ".q_proj." in name:
            values = permute(values, HEADS)
        elif ".k_proj." in name:
            values = permute(values, KV_HEADS)
        kind = gguf.GGMLQuantizationType[(types or {}).get(name, "F32")]
        writer.add_tensor(NAMES[name], gguf.quants.quantize(values, kind), raw_dtype=kind)
    for name, (data, kind) in (raw or {}).items():
        writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
