"""Llama-3 against Hugging Face transformers, token for token: a tiny random `LlamaForCausalLM`
(GQA, llama3 rope scaling, fp32) saved as safetensors, its config through `lanec import`, its
weights bound by checkpoint name, a prompt and 16 greedy tokens decoded on the interpreter; the
tokens equal transformers' greedy `generate`, and every step's logits are within 1e-3 of
max |logit| of transformers' forward over the same tokens.

Both sides compute in fp32: the checkpoint is fp32, and the interpreter computes fp32 without
rounding to the form's bf16 storage types (its meaning; `lanec run --check` rounds, this does not).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from compare import assert_same_decode, interpreted, reference  # noqa: E402

CONFIG = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 128, "tie_word_embeddings": False,
    # weights wide enough that logits spread over several units: at the default 0.02 they stay
    # within 0.6 and rope without its scaling would still pass 1e-3 of max |logit| on most steps
    "initializer_range": 0.2,
    # llama3 scaling at a small original context, so every branch (kept, slowed, smoothed) turns
    # some pair of the 16-value heads
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
}


def saved_model(folder: Path, **changes) -> Path:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**{**CONFIG, **changes})
    model = transformers.LlamaForCausalLM(config).to(torch.float32).eval()
    with torch.no_grad():  # norms away from one, so a weight read as another's would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
    model.save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.mark.parametrize("changes", [{}, {"tie_word_embeddings": True},
                                     {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}],
                         ids=["llama3-scaling", "tied", "unscaled"])
def test_greedy_decode_matches_transformers(tmp_path, changes):
    folder = saved_model(tmp_path / "model", **changes)
    want = reference(transformers.LlamaForCausalLM, folder)
    got = interpreted(folder, tmp_path)
    assert_same_decode(got, want, CONFIG["vocab_size"])


def test_llama3_frequencies_are_transformers():
    """The interpreter's rope frequencies are `_compute_llama3_parameters`'s, at the published
    numbers (head 128, theta 500000, factor 8, 1, 4, 8192) and at the test's."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from lanec.interp.ops import frequencies

    for head, theta, original in ((128, 500000.0, 8192), (16, 500000.0, 64)):
        config = transformers.LlamaConfig(hidden_size=head * 4, num_attention_heads=4, head_dim=head,
                                          rope_parameters={"rope_type": "llama3", "rope_theta": theta, "factor": 8.0,
                                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                           "original_max_position_embeddings": original})
        want, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
        got = frequencies(head, theta, "llama3", 8.0, 1.0, 4.0, original)
        np.testing.assert_allclose(got, want.numpy(), rtol=2e-7)
