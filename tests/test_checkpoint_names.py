"""How the form's weight names bind a Hugging Face checkpoint's tensors (lanec/models/README.md's
convention): rows of a tensor (`name[a:b]`: the MLA kv_a projection's latent and rotated-key
parts), experts stacked (`experts.*.w1.weight`), and stored shapes with unit axes (a conv's
[C, 1, W], A_log's [1, 1, H, 1])."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from lanec.runtime.weights import Checkpoint, WeightError


@pytest.fixture
def checkpoint(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {
        "kv_a.weight": rng.standard_normal((576, 64)).astype(np.float32),
        "conv.weight": rng.standard_normal((32, 1, 4)).astype(np.float32),
        "A_log": rng.standard_normal((1, 1, 8, 1)).astype(np.float32),
        **{f"experts.{e}.w1.weight": rng.standard_normal((16, 64)).astype(np.float32) for e in range(4)},
    }
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    return Checkpoint(path), tensors


def test_row_ranges(checkpoint):
    ckpt, tensors = checkpoint
    assert ckpt.holds("kv_a.weight[0:512]") and ckpt.holds("kv_a.weight[512:576]")
    assert np.array_equal(ckpt.resolve("kv_a.weight[512:576]", (64, 64)), tensors["kv_a.weight"][512:576])
    with pytest.raises(WeightError, match=r"asks for rows \[512, 600\)"):
        ckpt.resolve("kv_a.weight[512:600]", (88, 64))


def test_stacked_experts(checkpoint):
    ckpt, tensors = checkpoint
    assert ckpt.holds("experts.*.w1.weight")
    stacked = ckpt.resolve("experts.*.w1.weight", (4, 16, 64))
    assert all(np.array_equal(stacked[e], tensors[f"experts.{e}.w1.weight"]) for e in range(4))
    with pytest.raises(WeightError, match="experts.4.w1.weight"):
        ckpt.resolve("experts.*.w1.weight", (5, 16, 64))


def test_unit_axes_are_read_as_the_forms_shape(checkpoint):
    ckpt, tensors = checkpoint
    assert np.array_equal(ckpt.resolve("conv.weight", (32, 4)), tensors["conv.weight"][:, 0, :])
    assert ckpt.resolve("A_log", (8,)).shape == (8,)
    with pytest.raises(WeightError, match=r"is \[32, 1, 4\]; the plan expects \[4, 32\]"):
        ckpt.resolve("conv.weight", (4, 32))


def test_missing_names(checkpoint):
    ckpt, _ = checkpoint
    assert not ckpt.holds("q_proj.weight") and not ckpt.holds("q_proj.weight[0:4]")
    assert not ckpt.holds("shared.*.w1.weight")
