"""Tensor parallel on the CPU (issue 16): every family we import, shrunk to a tiny config, sharded
over N ranks (`lanec/passes/shard.py`) and run rank by rank on the interpreter with a simulated
all-reduce (`lanec/interp/tp.py`), gives the unsharded step's next tokens and logits (fp32
tolerance) and leaves every rank's states equal to its slice of the unsharded step's. The weights
are the same seeded ones: each rank's are its named slices of them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from xdsl.utils.exceptions import VerifyException

from lanec.cli import main
from lanec.diagnostics import FormError, form_context
from lanec.dialects import form
from lanec.interp.environment import random_environment
from lanec.interp.lower import program_of
from lanec.interp.ops import InterpretError
from lanec.interp.tp import Shard, rank_environment, run_ranks
from lanec.models import importer
from lanec.models.builder import StepOptions, module_text
from lanec.passes.merge_products import MergeProductsRule
from lanec.passes.pair_gate_up import PairGateUpRule
from lanec.passes.shard import sharding_lines
from lanec.pipeline import fuse, shard

# The configs of tests/reference/ (which build these models in transformers), as config.json has them.
LLAMA = {
    "model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 128, "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
}
KIMI_LINEAR = {
    "model_type": "kimi_linear", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
    "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
    "rms_norm_eps": 1e-5, "q_lora_rank": None, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
    "v_head_dim": 16, "mla_use_nope": True,
    "linear_attn_config": {"kda_layers": [1, 2, 4], "full_attn_layers": [3], "head_dim": 16, "num_heads": 4,
                           "short_conv_kernel_size": 4},
    "num_experts": 8, "num_experts_per_token": 2, "num_shared_experts": 1, "first_k_dense_replace": 1,
    "routed_scaling_factor": 2.446, "tie_word_embeddings": False,
}
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
    "moe_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4,
    "rms_norm_eps": 1e-5, "q_lora_rank": 48, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
    "v_head_dim": 16, "rope_interleave": True, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2,
    "n_shared_experts": 1, "routed_scaling_factor": 2.5, "norm_topk_prob": True, "tie_word_embeddings": False,
    "max_position_embeddings": 128,
}
QWEN3_NEXT = {
    "model_type": "qwen3_next", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "rms_norm_eps": 1e-6, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
    "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention"],
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
    "norm_topk_prob": True, "mlp_only_layers": [1], "decoder_sparse_step": 1, "tie_word_embeddings": False,
    "max_position_embeddings": 128,
}
FAMILIES = {"llama": LLAMA, "kimi-linear": KIMI_LINEAR, "deepseek-v3": DEEPSEEK_V3, "qwen3-next": QWEN3_NEXT,
            # Gated DeltaNet's 2 key heads do not divide by 4: the same model with 4 (of 8 value heads)
            "qwen3-next-4-key-heads": {**QWEN3_NEXT, "linear_num_key_heads": 4, "linear_num_value_heads": 8}}


def build(config: dict, **options):
    options = {"batch": 3, "page_size": 4, "context_pages": 4, **options}
    return importer(config)(config, StepOptions(**options))


def rank_step(config: dict, ranks: int, rank: int, fused: bool = False, merged: bool = False, **options):
    """Rank `rank`'s step: sharded, then fused by the rules table where `fused`; where `merged`,
    sharded after merge-products and pair-gate-up made products in parts and gated pairs."""
    module = build(config, **options)
    if merged:
        for rule in (MergeProductsRule, PairGateUpRule):
            rule().apply(form_context(), module)
    shard(module, ranks, rank)
    if fused:
        fuse(module)
    return module


def assert_ranks_equal_the_whole(config: dict, ranks: int, seed: int, fused: bool = False, merged: bool = False,
                                 **options) -> None:
    whole = program_of(build(config, **options))
    env = random_environment(whole, seed)
    after = env.copy()
    want = whole.run(after)
    programs = [program_of(rank_step(config, ranks, r, fused, merged, **options)) for r in range(ranks)]
    envs = [rank_environment(env, p) for p in programs]
    got = run_ranks(programs, envs)

    tokens, logits = got
    scale = float(np.abs(want[1]).max())
    assert scale > 1e-2  # no test on zeros
    np.testing.assert_allclose(logits, want[1], rtol=0, atol=1e-5 * scale)
    np.testing.assert_array_equal(tokens, want[0])
    for program, rank_env in zip(programs, envs, strict=True):  # each rank's states, its slice of the whole's
        for state in program.states:
            expected = Shard.parse(state.shard).slice(after.states[state.name], state.name) if state.shard \
                else after.states[state.name]
            np.testing.assert_allclose(rank_env.states[state.name], expected, rtol=0,
                                       atol=1e-5 * max(1.0, float(np.abs(expected).max())))


CASES = [(family, ranks) for family in FAMILIES for ranks in (2, 4)
         if (family, ranks) not in (("qwen3-next", 4), ("qwen3-next-4-key-heads", 2))]


@pytest.mark.parametrize("family, ranks", CASES, ids=[f"{f}-tp{n}" for f, n in CASES])
def test_sharded_step_run_rank_by_rank_equals_the_whole_step(family, ranks):
    assert_ranks_equal_the_whole(FAMILIES[family], ranks, seed=ranks)


# TP 8 needs 8 heads of every kind a rank (the tiny models above have 2 to 4): the same models with 8 or more
EIGHT_HEADS = {
    "llama": {**LLAMA, "num_attention_heads": 16, "num_key_value_heads": 8},
    "kimi-linear": {**KIMI_LINEAR, "num_attention_heads": 8, "num_key_value_heads": 8,
                    "linear_attn_config": {**KIMI_LINEAR["linear_attn_config"], "num_heads": 8}},
    "deepseek-v3": {**DEEPSEEK_V3, "num_attention_heads": 8, "num_key_value_heads": 8},
    "qwen3-next": {**QWEN3_NEXT, "num_attention_heads": 8, "num_key_value_heads": 8, "linear_num_key_heads": 8,
                   "linear_num_value_heads": 8},
}


@pytest.mark.parametrize("family", sorted(EIGHT_HEADS))
def test_eight_ranks_run_rank_by_rank_equal_the_whole_step(family):
    assert_ranks_equal_the_whole(EIGHT_HEADS[family], 8, seed=8)


@pytest.mark.parametrize("family", ["kimi-linear", "qwen3-next"])
def test_speculative_steps_shard_their_conv_and_recurrent_states(family):
    assert_ranks_equal_the_whole(FAMILIES[family], 2, seed=7, batch=2, tokens=2)


@pytest.mark.parametrize("family", ["kimi-linear", "deepseek-v3"])
def test_the_rules_keep_the_meaning_of_a_sharded_step(family):
    """Each rank's step fused by the rules table (the all-reduces stay where they are)."""
    assert_ranks_equal_the_whole(FAMILIES[family], 2, seed=11, fused=True)


def test_merged_products_and_gated_pairs_shard_part_by_part():
    """KDA's merged product (q, k, v, b column-parallel; f_a and g_a whole in the same product) and
    the gated pairs of the MLPs."""
    module = rank_step(KIMI_LINEAR, 2, 0, merged=True)
    assert any(isinstance(op, form.GatedProductOp) for op in module.walk())
    assert "column-parallel: 32 of 64, 32 of 64, 32 of 64, all 16, 2 of 4, all 16 outputs a rank" in " ".join(
        sharding_lines(module))
    assert_ranks_equal_the_whole(KIMI_LINEAR, 2, seed=5, merged=True)


def weights(module) -> dict[str, form.WeightOp | form.StateOp]:
    step = next(iter(module.ops))
    return {op.properties["name"].data: op for op in step.body.block.ops if isinstance(op, form.WeightOp | form.StateOp)}


def shard_of(op) -> str | None:
    return None if op.shard is None else op.shard.data


def test_rank_weights_are_named_slices_of_the_checkpoint():
    got = weights(rank_step(KIMI_LINEAR, 2, 1))
    p = "model.layers.0.self_attn"
    assert shard_of(got[f"{p}.q_proj.weight"]) == "dim 0 part 1 of 2"  # column-parallel
    assert shard_of(got[f"{p}.o_proj.weight"]) == "dim 1 part 1 of 2"  # row-parallel
    assert shard_of(got[f"{p}.f_a_proj.weight"]) is None  # the LoRA product stays whole
    assert shard_of(got["model.layers.0.conv"]) == "dim 1 part 1 of 2 in 64+64+64"  # q, k, v channels
    assert form.shape(got["model.layers.0.conv"].result)[1] == 96
    assert shard_of(got["model.layers.2.latent"]) is None  # the latent cache replicated
    assert shard_of(got["model.layers.2.self_attn.kv_b_proj.weight"]) == "dim 0 part 1 of 2"
    assert shard_of(got["model.layers.1.block_sparse_moe.experts.*.w1.weight"]) == "dim 1 part 1 of 2"
    assert shard_of(got["model.layers.1.block_sparse_moe.experts.*.w2.weight"]) == "dim 2 part 1 of 2"
    assert shard_of(got["model.layers.1.block_sparse_moe.gate.weight"]) is None  # the router
    assert shard_of(got["model.embed_tokens.weight"]) is None and shard_of(got["lm_head.weight"]) is None


def test_kv_heads_fewer_than_ranks_are_held_one_a_rank():
    """Llama's 2 kv heads over 4 ranks: ranks 0 and 1 hold kv head 0, ranks 2 and 3 kv head 1."""
    for rank, head in ((1, 0), (2, 1)):
        module = rank_step(LLAMA, 4, rank)
        got = weights(module)
        assert shard_of(got["model.layers.0.self_attn.k_proj.weight"]) == f"dim 0 part {head} of 2"
        assert shard_of(got["model.layers.0.self_attn.q_proj.weight"]) == f"dim 0 part {rank} of 4"
        attention = next(op for op in module.walk() if isinstance(op, form.AttentionOp))
        assert (attention.heads.value.data, attention.kv_heads.value.data) == (1, 1)


def test_one_all_reduce_where_partial_sums_meet():
    """A layer's mixer and its MLP each end in one all-reduce; a mixture and its shared expert add
    their partial sums first and reduce once."""
    module = rank_step(KIMI_LINEAR, 2, 0)
    reduces = [op for op in module.walk() if isinstance(op, form.AllReduceOp)]
    assert len(reduces) == 2 * KIMI_LINEAR["num_hidden_layers"]
    mixture = next(op for op in module.walk() if isinstance(op, form.MixtureOp))
    add = next(iter(mixture.result.uses)).operation
    assert isinstance(add, form.AddOp) and isinstance(next(iter(add.result.uses)).operation, form.AllReduceOp)
    module_text(module)  # prints and parses back


@pytest.mark.parametrize("family, ranks, message", [
    ("llama", 3, "product (self_attn.q_proj) in layer 0: 64 outputs do not divide by 3 (and 13 more ops)"),
    ("qwen3-next", 4, "part (of linear_attn.in_proj_qkvz) in layer 0: 2 heads do not divide by 4"),
    ("kimi-linear", 8, "product (self_attn.b_proj) in layer 0: 4 outputs do not divide by 8"),
])
def test_a_model_that_does_not_divide_is_a_one_line_error(family, ranks, message):
    with pytest.raises(FormError) as error:
        shard(build(FAMILIES[family]), ranks, 0)
    text = str(error.value)
    assert "\n" not in text and f"--tp {ranks}: " in text and message in text


def test_all_reduce_verifies_and_runs_only_with_its_ranks():
    x = form.InputOp("tokens", form.tensor([4], form.i32)).result
    with pytest.raises(VerifyException, match="an all_reduce's input must be a"):
        form.AllReduceOp(x, 2).verify()
    table = form.WeightOp("embed", form.tensor([8, 4]))
    with pytest.raises(VerifyException, match="at least 2"):
        form.AllReduceOp(form.EmbedOp(x, table.result).result, 1).verify()
    whole = program_of(rank_step(LLAMA, 2, 0))
    with pytest.raises(InterpretError, match="run the rank programs together"):
        whole.run(random_environment(whole, 0))


def test_shard_slices_segments_alike():
    array = np.arange(12).reshape(1, 12)
    assert Shard.parse("dim 1 part 1 of 2 in 4+4+4").slice(array, "a").tolist() == [[2, 3, 6, 7, 10, 11]]
    assert Shard.parse("dim 0 part 0 of 1").slice(array, "a").shape == (1, 12)
    with pytest.raises(InterpretError, match="does not divide into 5 parts"):
        Shard.parse("dim 1 part 0 of 5").slice(array, "a")
    weight = form.WeightOp("w", form.tensor([4, 4]))
    weight.shard = form.StringAttr("rows 1/2")
    with pytest.raises(VerifyException, match="expected 'dim D part P of N'"):
        weight.verify()


@pytest.fixture
def tiny_form(tmp_path) -> Path:
    path = tmp_path / "tiny.mlir"
    path.write_text(module_text(build(KIMI_LINEAR)))
    return path


def test_explain_tp_shows_each_op_and_every_all_reduce(tiny_form):
    result = CliRunner().invoke(main, ["explain", "--tp", "2", str(tiny_form)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "shard (--tp 2; the rules below ran on rank 0's step):" in lines
    assert sum(" all_reduce " in line for line in lines) == 2 * KIMI_LINEAR["num_hidden_layers"]
    assert any("self_attn.o_proj): row-parallel: 32 of 64 inputs a rank, then all_reduce" in line for line in lines)
    assert any("latent_attention (self_attn.kv_b_proj): heads split: 2 of 4 a rank; the latent cache replicated"
               in line for line in lines)
    data = json.loads(CliRunner().invoke(main, ["explain", "--tp", "2", "--json", str(tiny_form)]).output)
    assert data["sharding"]["ranks"] == 2
    assert sum(line.split()[2:3] == ["all_reduce"] for line in data["sharding"]["ops"]) == 8


def test_compile_tp_refuses_a_model_that_does_not_divide_in_one_line(tiny_form, tmp_path):
    """(A plan for N ranks compiled and read back: tests/test_tp_runtime.py.)"""
    bad = CliRunner().invoke(main, ["compile", "--tp", "3", str(tiny_form), "-o", str(tmp_path / "plan.bin")])
    assert bad.exit_code == 1 and "do not divide by 3" in bad.output and bad.output.strip().count("\n") == 0
