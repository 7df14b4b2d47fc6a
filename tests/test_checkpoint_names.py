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


def test_a_sharded_checkpoint_reads_each_tensor_from_its_shard(tmp_path, checkpoint):
    """A large model's checkpoint in several files (model-0000N-of-0000M.safetensors and the
    index Hugging Face writes beside them): opened by its folder or its index, stacked experts
    across two shards resolve as from one file; a missing shard or a tensor the index misplaces
    is one line."""
    import json

    from lanec.runtime.weights import INDEX, ShardedCheckpoint, open_checkpoint

    _, tensors = checkpoint
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:3], "model-00002-of-00002.safetensors": names[3:]}
    folder = tmp_path / "sharded"
    folder.mkdir()
    for file, held in shards.items():
        save_file({n: tensors[n] for n in held}, str(folder / file))
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {n: f for f, ns in shards.items()
                                                                             for n in ns}}))
    for opened in (open_checkpoint(folder), open_checkpoint(folder / INDEX)):
        assert isinstance(opened, ShardedCheckpoint) and sorted(opened.names) == names
        stacked = opened.resolve("experts.*.w1.weight", (4, 16, 64))
        assert np.array_equal(stacked, np.stack([tensors[f"experts.{e}.w1.weight"] for e in range(4)]))
        assert np.array_equal(opened.resolve("kv_a.weight[0:512]", (512, 64)), tensors["kv_a.weight"][:512])
    # a folder without an index: each shard's header says what it holds
    (folder / INDEX).unlink()
    assert sorted(open_checkpoint(folder).names) == names
    # the index names a shard that is not there
    (folder / INDEX).write_text(json.dumps({"weight_map": {names[0]: "model-00003-of-00003.safetensors"}}))
    with pytest.raises(WeightError, match="shard model-00003-of-00003.safetensors is missing") as raised:
        open_checkpoint(folder)
    assert "\n" not in str(raised.value)
    # the index places a tensor in a shard that does not hold it
    (folder / INDEX).write_text(json.dumps({"weight_map": {names[0]: "model-00002-of-00002.safetensors"}}))
    with pytest.raises(WeightError, match=f"does not hold '{names[0]}', which the index places there"):
        open_checkpoint(folder)
    # a truncated shard: its header claims more bytes than the file has
    (folder / INDEX).unlink()
    shard = folder / "model-00001-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:200])
    with pytest.raises(WeightError, match="truncated"):
        open_checkpoint(folder)
