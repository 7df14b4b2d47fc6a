"""DeepSeek-V3's importer (examples/deepseek-v3.config.json, the published config) and the grouped
top-k of `form.mixture` (interpreter and verifier)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.dialects import form
from lanec.interp import ops
from lanec.models.builder import StepOptions, module_text
from lanec.models.config import ConfigError, deepseek_v3_config
from lanec.models.deepseek_v3 import deepseek_v3_step

PUBLISHED = json.loads((Path(__file__).resolve().parent.parent / "examples" / "deepseek-v3.config.json").read_text())
DEFAULT_ROPE = {k: v for k, v in PUBLISHED.items() if k != "rope_scaling"}


def test_published_yarn_imports_as_transformers_resolves_it(tmp_path):
    """The published YaRN (factor 40, original 4096, beta 32 / 1, mscale = mscale_all_dim = 1):
    the rope's yarn properties with attention factor 1, and the latent attention's scale
    192^-0.5 * (0.1 ln 40 + 1)^2 (transformers' `yarn_apply_mscale`)."""
    import math

    config = deepseek_v3_config(PUBLISHED)
    s = config.scaling
    assert s is not None and (s.factor, s.original_context, s.beta_fast, s.beta_slow, s.truncate) == \
        (40.0, 4096, 32.0, 1.0, True)
    assert s.attention_factor == 1.0 and s.mscale_all_dim == 1.0
    module = deepseek_v3_step(config, StepOptions(layers=4))
    ropes = [op for op in module.walk() if isinstance(op, form.RopeOp)]
    assert len(ropes) == 8 and all(op.scaling.data == "yarn" and op.attention_factor.value.data == 1.0 and
                                   op.original_context.value.data == 4096 for op in ropes)
    m = 0.1 * math.log(40) + 1.0
    scales = {op.scale.value.data for op in module.walk() if isinstance(op, form.LatentAttentionOp)}
    assert scales == {(192 ** -0.5) * m * m}
    result = CliRunner().invoke(main, ["import", str(Path(__file__).resolve().parent.parent / "examples" /
                                                      "deepseek-v3.config.json"), "--layers", "4",
                                       "-o", str(tmp_path / "m.mlir")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m.mlir").read_text().count('scaling = "yarn"') == 8  # q and k, four layers


def test_yarn_attention_factor_and_scale_follow_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    for rope in ({"factor": 4.0, "mscale": 1.0, "mscale_all_dim": 0.5, "original_max_position_embeddings": 64},
                 {"factor": 8.0, "original_max_position_embeddings": 64, "beta_fast": 0, "truncate": False},
                 {"factor": 8.0, "attention_factor": 0.9, "mscale_all_dim": 2.0, "original_max_position_embeddings": 64},
                 {"factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}):
        parameters = {"rope_type": "yarn", "rope_theta": 10000.0, **rope}
        ours = deepseek_v3_config({**DEFAULT_ROPE, "rope_parameters": parameters})
        theirs = transformers.DeepseekV3Config(**{**DEFAULT_ROPE, "rope_parameters": dict(parameters)})
        _, attention_factor = ROPE_INIT_FUNCTIONS["yarn"](theirs, "cpu")
        assert ours.scaling.attention_factor == attention_factor
        assert ours.scaling.softmax_scale(192 ** -0.5) == yarn_apply_mscale(theirs.rope_parameters, 192 ** -0.5)


@pytest.mark.parametrize(("rope", "field"), [
    ({"type": "linear", "factor": 2.0}, "rope_scaling.type"),
    ({"type": "yarn", "original_max_position_embeddings": 4096}, "rope_scaling.factor"),
    ({"type": "yarn", "factor": 0.5}, "rope_scaling.factor"),
    ({"type": "yarn", "factor": 4.0, "beta_slow": -1}, "rope_scaling.beta_slow"),
])
def test_unimported_rope_scalings_are_one_line_errors(rope, field):
    with pytest.raises(ConfigError, match=rf"^{field}:") as error:
        deepseek_v3_config({**DEFAULT_ROPE, "rope_scaling": rope})
    assert "\n" not in str(error.value)


def test_yarn_rope_properties_verify():
    from xdsl.utils.exceptions import VerifyException

    from lanec.models.builder import StepBuilder

    b = StepBuilder(1, 1)
    x, positions = b.weight("x", [1, 32]), b.input("positions", [1])
    yarn = (40.0, 4096, 32.0, 1.0, True, 1.0)
    form.RopeOp(x, positions, 2, 16, 1e4, yarn=yarn).verify()
    op = form.RopeOp(x, positions, 2, 16, 1e4, yarn=yarn)
    del op.properties["beta_slow"]
    with pytest.raises(VerifyException, match="rope scaling yarn needs beta_slow"):
        op.verify()
    op = form.RopeOp(x, positions, 2, 16, 1e4, yarn=yarn)
    op.properties["low_freq_factor"] = form.float_prop(1.0)
    with pytest.raises(VerifyException, match="rope scaling yarn takes no low_freq_factor"):
        op.verify()
    with pytest.raises(VerifyException, match="attention_factor must be positive"):
        form.RopeOp(x, positions, 2, 16, 1e4, yarn=(40.0, 4096, 32.0, 1.0, True, 0.0)).verify()


def test_published_numbers_without_yarn_import():
    config = deepseek_v3_config(DEFAULT_ROPE)
    assert config.scaling is None
    assert (config.groups, config.topk_groups, config.top_k, config.experts, config.first_dense) == (8, 4, 8, 256, 3)
    assert config.q_lora == 1536 and config.interleaved and config.routed_scaling == 2.5
    text = module_text(deepseek_v3_step(config, StepOptions(layers=4)))
    assert "groups = 8" in text and "topk_groups = 4" in text and "interleaved = 1" in text
    assert "model.layers.3.mlp.experts.*.gate_proj.weight" in text
    assert "model.layers.2.mlp.gate_proj.weight" in text  # the third layer is dense
    assert "model.layers.0.self_attn.q_a_layernorm.weight" in text


@pytest.mark.parametrize(("change", "field"), [
    ({"n_group": 3}, "n_group"), ({"topk_group": 9}, "topk_group"), ({"scoring_func": "softmax"}, "scoring_func"),
    ({"num_key_value_heads": 1}, "num_key_value_heads"), ({"attention_bias": True}, "attention_bias"),
    ({"num_experts_per_tok": 300}, "num_experts_per_tok"),
])
def test_unsupported_fields_are_one_line_errors(change, field):
    with pytest.raises(ConfigError, match=rf"^{field}:"):
        deepseek_v3_config({**DEFAULT_ROPE, **change})


def test_grouped_top_k_keeps_the_best_groups_by_their_top_two_sum():
    x = np.eye(4, dtype=np.float32)[:1]  # one row; the router's column 0 gives the scores' logits
    logits = np.array([3.0, -9, 2, 2, 2.5, -9, 0, 0], np.float32)  # groups {0,1} {2,3} {4,5} {6,7}
    router = np.zeros((8, 4), np.float32)
    router[:, 0] = logits
    gate = np.zeros((8, 2, 4), np.float32)
    up, down = gate.copy(), np.zeros((8, 4, 2), np.float32)
    scores = ops.sigmoid(logits)
    choice = ops.grouped_choice(scores[None], groups=4, topk_groups=2, top_k=2)[0]
    # group sums: {0,1} ~0.95+0, {2,3} ~0.88+0.88, {4,5} ~0.92+0, {6,7} 0.5+0.5: groups 1 and 3 kept
    assert np.isinf(choice[[0, 1, 4, 5]]).all() and np.isfinite(choice[[2, 3, 6, 7]]).all()
    out = ops.mixture(x, router, gate, up, down, 2, "sigmoid", 1, 1.0, groups=4, topk_groups=2)
    assert out.shape == (1, 4)


def test_grouped_top_k_ties_go_to_the_lower_group_and_expert():
    choice = ops.grouped_choice(np.full((1, 8), 0.5, np.float32), groups=4, topk_groups=2, top_k=3)[0]
    assert np.isfinite(choice[:4]).all() and np.isinf(choice[4:]).all()
    assert list(np.argsort(-choice, kind="stable")[:3]) == [0, 1, 2]


def test_grouped_top_k_rejects_groups_of_one():
    with pytest.raises(ops.InterpretError):
        ops.grouped_choice(np.zeros((1, 4), np.float32), groups=4, topk_groups=2, top_k=1)


def test_the_verifier_refuses_bad_groups():
    from xdsl.utils.exceptions import VerifyException

    from lanec.dialects.form import MixtureOp
    from lanec.models.deepseek_v3 import DeepseekV3Step

    step = DeepseekV3Step(deepseek_v3_config({**DEFAULT_ROPE, "num_hidden_layers": 4}), StepOptions(layers=4))
    module = step.build()
    mixture = next(op for op in module.walk() if isinstance(op, MixtureOp))
    mixture.properties["topk_groups"] = mixture.properties["groups"].__class__(9, 64)
    with pytest.raises(VerifyException, match="topk_groups 9"):
        mixture.verify()
    del mixture.properties["topk_groups"]
    with pytest.raises(VerifyException, match="needs both groups and topk_groups"):
        mixture.verify()
