"""The Kimi Linear and Llama importers and `lanec import`: op counts per layer kind, shapes,
checkpoint names, the speculative and KDA-only variants, one-line errors for bad configs, the
print / parse fixed point, and the tiny model's step on the interpreter."""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from xdsl.dialects.builtin import Float32Type, ModuleOp
from xdsl.parser import Parser

from lanec.cli import main
from lanec.dialects import form
from lanec.models.builder import context, module_text, printed
from lanec.models.config import ConfigError, Llama3Scaling, kimi_linear_config, llama_config
from lanec.models.dense import DenseShape, dense_step
from lanec.models.kimi_linear import StepOptions, kimi_linear_step
from lanec.models.llama import llama_step

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REAL = json.loads((EXAMPLES / "kimi-linear-48b-a3b.config.json").read_text())
LLAMA = json.loads((EXAMPLES / "llama-3.1-8b.config.json").read_text())
TINY = json.loads((EXAMPLES / "kimi-linear-tiny.config.json").read_text())


def step_of(module: ModuleOp) -> form.StepOp:
    (step,) = module.ops
    assert isinstance(step, form.StepOp)
    return step


def ops(module: ModuleOp) -> list:
    return list(step_of(module).body.block.ops)


def counts(module: ModuleOp) -> Counter:
    return Counter(op.name for op in ops(module))


def weights(module: ModuleOp) -> dict[str, tuple[int, ...]]:
    named = {op.weight_name.data: form.shape(op.result) for op in ops(module) if isinstance(op, form.WeightOp)}
    assert len(named) == counts(module)["form.weight"], "every weight has its own checkpoint name"
    return named


def states(module: ModuleOp) -> dict[str, form.StateOp]:
    return {op.state_name.data: op for op in ops(module) if isinstance(op, form.StateOp)}


def inputs(module: ModuleOp) -> dict[str, tuple[int, ...]]:
    return {op.role.data: form.shape(op.result) for op in ops(module) if isinstance(op, form.InputOp)}


def build(data: dict, **options) -> ModuleOp:
    module = kimi_linear_step(kimi_linear_config(data), StepOptions(**options))
    module.verify()
    return module


# ----------------------------------------------------------------------------------------------
# The real config, all 27 layers


def test_real_config_reads_the_published_numbers():
    c = kimi_linear_config(REAL)
    assert (c.hidden, c.layers, c.vocab, c.rms_eps) == (2304, 27, 163840, 1e-5)
    assert c.mla_layers == (4, 8, 12, 16, 20, 24, 27)
    assert len(c.kda_layers) == 20 and not set(c.kda_layers) & set(c.mla_layers)
    assert (c.kda_heads, c.kda_head_dim, c.conv_width) == (32, 128, 4)
    assert (c.mla_heads, c.nope, c.rope, c.lora, c.v_head_dim) == (32, 128, 64, 512, 128)
    assert (c.experts, c.top_k, c.expert_width, c.shared_experts) == (256, 8, 1024, 1)
    assert (c.scoring, c.renormalize, c.routed_scaling, c.first_dense, c.dense_width) == (
        "sigmoid", True, 2.446, 1, 9216)


def test_full_import_counts_ops_per_layer_kind_in_seconds():
    start = time.perf_counter()
    module = build(REAL)
    text = module_text(module)
    assert time.perf_counter() - start < 20, "the full import must stay fast"
    n = counts(module)
    kda, mla, mixtures = 20, 7, 26
    assert n["form.delta_rule"] == n["form.kda_gate"] == n["form.norm_gated"] == kda
    assert n["form.conv"] == 3 * kda and n["form.l2norm"] == 2 * kda and n["form.sigmoid"] == kda
    assert n["form.latent_attention"] == mla
    assert n["form.mixture"] == mixtures
    assert n["form.swiglu"] == 1 + mixtures  # layer 1's dense MLP, then every shared expert
    # per KDA layer q, k, v, f_a, b, g_a, f_b, g_b, o_proj; per MLA layer q, kv_a, o_proj; per
    # MLP gate, up, down (dense and shared expert alike); and the lm_head
    assert n["form.product"] == 9 * kda + 3 * mla + 3 * 27 + 1
    assert n["form.norm"] == 2 * 27 + mla + 1  # input and post-attention norms, the latent's, final
    assert n["form.add"] == 2 * 27 + mixtures  # residual adds, and the shared expert's add
    assert n["form.embed"] == n["form.argmax"] == n["form.return"] == 1
    assert n["form.state"] == 2 * kda + mla
    assert "form.rope" not in n, "Kimi Linear's MLA is NoPE"
    assert text.count("form.delta_rule") == kda


def test_kda_layer_shapes_and_names():
    module = build(REAL, layers=1)
    w = weights(module)
    a = "model.layers.0.self_attn"
    for n in "qkv":
        assert w[f"{a}.{n}_proj.weight"] == (4096, 2304)
        assert w[f"{a}.{n}_conv1d.weight"] == (4096, 4)
    assert w[f"{a}.f_a_proj.weight"] == w[f"{a}.g_a_proj.weight"] == (128, 2304)
    assert w[f"{a}.f_b_proj.weight"] == w[f"{a}.g_b_proj.weight"] == (4096, 128)
    assert w[f"{a}.b_proj.weight"] == (32, 2304)
    assert (w[f"{a}.A_log"], w[f"{a}.dt_bias"], w[f"{a}.o_norm.weight"]) == ((32,), (4096,), (128,))
    assert w[f"{a}.o_proj.weight"] == (2304, 4096)
    assert w["model.layers.0.mlp.gate_proj.weight"] == (9216, 2304)
    assert w["model.layers.0.mlp.down_proj.weight"] == (2304, 9216)
    assert w["lm_head.weight"] == (163840, 2304)
    f32 = {op.weight_name.data for op in ops(module)
           if isinstance(op, form.WeightOp) and isinstance(form.element(op.result), Float32Type)}
    assert f32 == {f"{a}.A_log", f"{a}.dt_bias"}

    s = states(module)
    assert form.shape(s["model.layers.0.conv"].result) == (2, 3 * 4096, 3)
    assert s["model.layers.0.conv"].kind.data == "conv"
    assert form.shape(s["model.layers.0.recurrent"].result) == (2, 32, 128, 128)
    convs = [op for op in ops(module) if isinstance(op, form.ConvOp)]
    assert [op.offset.value.data for op in convs] == [0, 4096, 8192]
    assert {op.state for op in convs} == {s["model.layers.0.conv"].result}, "one conv state a layer"
    assert all(op.activation.data == "silu" and op.bias is None for op in convs)
    (gate,) = [op for op in ops(module) if isinstance(op, form.KdaGateOp)]
    assert gate.form.data == "softplus" and gate.lower_bound is None
    (rule,) = [op for op in ops(module) if isinstance(op, form.DeltaRuleOp)]
    assert (rule.heads.value.data, rule.key_heads.value.data) == (32, 32)
    assert rule.scale.value.data == pytest.approx(128**-0.5)
    assert rule.accepted is None
    assert [op.eps.value.data for op in ops(module) if isinstance(op, form.L2NormOp)] == [1e-6, 1e-6]
    (gated,) = [op for op in ops(module) if isinstance(op, form.NormGatedOp)]
    assert (gated.activation.data, gated.eps.value.data, gated.heads.value.data) == ("sigmoid", 1e-5, 32)
    assert inputs(module) == {"tokens": (1,), "slots": (1,)}


def test_mla_layer_and_mixture_shapes_and_names():
    module = build(REAL, layers=4)
    w = weights(module)
    a = "model.layers.3.self_attn"
    assert w[f"{a}.q_proj.weight"] == (32 * 192, 2304)
    assert w[f"{a}.kv_a_proj_with_mqa.weight[0:512]"] == (512, 2304)
    assert w[f"{a}.kv_a_proj_with_mqa.weight[512:576]"] == (64, 2304)
    assert w[f"{a}.kv_a_layernorm.weight"] == (512,)
    latent_norm = next(op for op in ops(module) if isinstance(op, form.NormOp)
                       and op.weight.owner.weight_name.data == f"{a}.kv_a_layernorm.weight")
    assert latent_norm.eps.value.data == 1e-6
    assert w[f"{a}.kv_b_proj.weight"] == (32 * 256, 512)
    assert w[f"{a}.o_proj.weight"] == (2304, 32 * 128)
    (attention,) = [op for op in ops(module) if isinstance(op, form.LatentAttentionOp)]
    assert [attention.properties[k].value.data for k in ("heads", "nope", "rope", "lora", "v")] == [
        32, 128, 64, 512, 128]
    assert attention.scale.value.data == pytest.approx(192**-0.5)
    kv_a = attention.latent.owner.x.owner  # the latent comes normed from the kv_a product's first part
    assert isinstance(kv_a, form.ProductOp) and len(kv_a.weights) == 2
    assert attention.k_rope is kv_a.parts[1]
    latent = states(module)["model.layers.3.latent"]
    assert form.shape(latent.result) == (64, 64, 576) and latent.kind.data == "latent"
    assert inputs(module)["pages"] == (1, 64) and inputs(module)["positions"] == (1,)

    m = "model.layers.1.block_sparse_moe"
    assert w[f"{m}.gate.weight"] == (256, 2304)
    assert w[f"{m}.gate.e_score_correction_bias"] == (256,)
    assert w[f"{m}.experts.*.w1.weight"] == w[f"{m}.experts.*.w3.weight"] == (256, 1024, 2304)
    assert w[f"{m}.experts.*.w2.weight"] == (256, 2304, 1024)
    assert w[f"{m}.shared_experts.gate_proj.weight"] == (1024, 2304)
    assert w[f"{m}.shared_experts.down_proj.weight"] == (2304, 1024)
    mixture = next(op for op in ops(module) if isinstance(op, form.MixtureOp))
    assert (mixture.top_k.value.data, mixture.scoring.data, mixture.renormalize.value.data) == (8, "sigmoid", 1)
    assert mixture.routed_scaling.value.data == 2.446
    assert len(mixture.shared) == 0 and mixture.correction is not None and mixture.rows is None
    (use,) = mixture.result.uses
    assert isinstance(use.operation, form.AddOp), "the shared expert is added to the mixture, unfused"


def test_step_returns_next_tokens_then_logits():
    module = build(TINY, batch=2)
    ret = ops(module)[-1]
    assert isinstance(ret, form.ReturnOp)
    tokens, logits = ret.outputs
    assert isinstance(tokens.owner, form.ArgmaxOp) and form.shape(tokens) == (2,)
    assert form.shape(logits) == (2, 256)
    (only,) = ops(build(TINY, logits=False))[-1].outputs
    assert isinstance(only.owner, form.ArgmaxOp)


def test_residuals_are_plain_adds_and_norms_take_no_residual():
    module = build(TINY)
    norms = [op for op in ops(module) if isinstance(op, form.NormOp)]
    assert norms and all(op.residual is None for op in norms)
    assert counts(module)["form.gated_product"] == 0 and counts(module)["form.kda"] == 0


# ----------------------------------------------------------------------------------------------
# Variants


@pytest.mark.parametrize("tokens", [2, 4])
def test_speculative_step_has_accepted_counts_and_wider_conv_state(tokens):
    module = build(TINY, batch=3, tokens=tokens)
    assert inputs(module)["slots"] == (3, tokens) and inputs(module)["accepted"] == (3,)
    assert inputs(module)["tokens"] == (3 * tokens,) and inputs(module)["positions"] == (3 * tokens,)
    conv = states(module)["model.layers.0.conv"]
    assert form.shape(conv.result) == (3 * tokens + 1, 3 * 256, 3 + tokens - 1)
    for op in ops(module):
        if isinstance(op, form.ConvOp | form.DeltaRuleOp):
            assert op.accepted is not None
    assert step_of(module).tokens.value.data == tokens


def test_slots_option_sets_state_slots():
    module = build(TINY, batch=2, slots=9)
    assert form.shape(states(module)["model.layers.0.recurrent"].result)[0] == 9
    with pytest.raises(ConfigError, match="--slots"):
        build(TINY, batch=2, slots=2)


def test_kda_only_variant_with_dense_mlps():
    module = build(REAL, layers=4, kda_only=True, dense_mlp=9216)
    n = counts(module)
    assert n["form.delta_rule"] == 3 and n["form.latent_attention"] == 0 and n["form.mixture"] == 0
    assert n["form.swiglu"] == 3
    w = weights(module)
    assert all(w[f"model.layers.{i}.mlp.up_proj.weight"] == (9216, 2304) for i in range(3))
    assert "model.layers.3.input_layernorm.weight" not in w
    assert set(inputs(module)) == {"tokens", "slots"}
    # dense MLPs alone, keeping the MLA layers
    module = build(REAL, layers=4, dense_mlp=512)
    assert counts(module)["form.latent_attention"] == 1 and counts(module)["form.mixture"] == 0
    assert weights(module)["model.layers.3.mlp.down_proj.weight"] == (2304, 512)


# ----------------------------------------------------------------------------------------------
# Bad configs and options: one line, naming the field


def broken(change) -> dict:
    data = copy.deepcopy(TINY)
    change(data)
    return data


BAD = [
    (lambda d: d.pop("hidden_size"), "hidden_size: missing"),
    (lambda d: d.update(hidden_size="64"), "hidden_size: expected an integer"),
    (lambda d: d.update(model_type="gpt2"), "model_type"),
    (lambda d: d.update(num_hidden_layers=5), "in neither kda_layers nor full_attn_layers"),
    (lambda d: d["linear_attn_config"].update(kda_layers=[1, 2, 3, 4]), "in both kda_layers and full_attn_layers"),
    (lambda d: d["linear_attn_config"].update(full_attn_layers=[9]), "linear_attn_config.full_attn_layers"),
    (lambda d: d["linear_attn_config"].pop("num_heads"), "linear_attn_config.num_heads: missing"),
    (lambda d: d.update(num_experts_per_token=9), "num_experts_per_token"),
    (lambda d: d.update(q_lora_rank=64), "q_lora_rank"),
    (lambda d: d.update(mla_use_nope=False), "mla_use_nope"),
    (lambda d: d.update(moe_router_activation_func="relu"), "moe_router_activation_func"),
    (lambda d: d.update(rms_norm_eps=0), "rms_norm_eps"),
    (lambda d: d.update(num_expert_group=4), "num_expert_group"),
]


@pytest.mark.parametrize("change, field", BAD)
def test_bad_configs_are_one_line_errors(tmp_path, change, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(broken(change)))
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out.mlir")])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and field in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out.mlir").exists()


@pytest.mark.parametrize("args, message", [
    (["--layers", "9"], "--layers"),
    (["--batch", "0"], "--batch"),
    (["--spec-tokens", "0"], "--spec-tokens"),
    (["--dense-mlp", "0"], "--dense-mlp"),
])
def test_bad_options_are_one_line_errors(tmp_path, args, message):
    out = tmp_path / "out.mlir"
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / "kimi-linear-tiny.config.json"), "-o", str(out), *args])
    assert result.exit_code == 1 and message in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("text, message", [("{not json", "not JSON"), ("[1, 2]", "model_type")])
def test_unreadable_configs_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out.mlir")])
    assert result.exit_code == 1 and message in result.output and len(result.output.strip().splitlines()) == 1


def test_kda_only_needs_a_kda_layer():
    mla_first = broken(lambda d: d["linear_attn_config"].update(kda_layers=[2, 3, 4], full_attn_layers=[1]))
    with pytest.raises(ConfigError, match="--kda-only"):
        build(mla_first, layers=1, kda_only=True)
    assert counts(build(mla_first, layers=2, kda_only=True))["form.delta_rule"] == 1


def test_output_folders_are_made(tmp_path):
    out = tmp_path / "build" / "models" / "out.mlir"
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / "kimi-linear-tiny.config.json"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("builtin.module")


def test_unwritable_output_is_a_one_line_error(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    out = tmp_path / "a-file" / "out.mlir"
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / "kimi-linear-tiny.config.json"), "-o", str(out)])
    assert result.exit_code == 1 and "cannot write it" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_tied_embeddings_read_the_embedding_table_as_lm_head():
    module = build(broken(lambda d: d.update(tie_word_embeddings=True)))
    assert "lm_head.weight" not in weights(module)
    head = ops(module)[-1].outputs[1].owner
    embed = next(op for op in ops(module) if isinstance(op, form.EmbedOp))
    assert head.weights[0] is embed.table


# ----------------------------------------------------------------------------------------------
# lanec import: round trip, examples


def test_import_round_trips(tmp_path):
    out = tmp_path / "tiny.mlir"
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / "kimi-linear-tiny.config.json"), "-o", str(out),
                                       "--batch", "2", "--spec-tokens", "2"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    module = Parser(context(), text).parse_module()
    module.verify()
    assert printed(module) == text
    assert step_of(module).batch.value.data == 2 and step_of(module).tokens.value.data == 2


@pytest.mark.parametrize("name, args", [
    ("kimi-linear-small.mlir", ["kimi-linear-48b-a3b.config.json", "--layers", "4", "--batch", "1"]),
    ("kimi-linear-kda.mlir", ["kimi-linear-48b-a3b.config.json", "--layers", "3", "--kda-only", "--dense-mlp",
                              "9216", "--batch", "1"]),
    ("kimi-linear-tiny.mlir", ["kimi-linear-tiny.config.json"]),
])
def test_examples_are_current(name, args):
    """The committed examples are what examples/regenerate.sh writes today."""
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / args[0]), "-o", "-", *args[1:]])
    assert result.exit_code == 0, result.output
    assert result.output == (EXAMPLES / name).read_text()


def test_dense_example():
    module = dense_step(DenseShape(), batch=1)
    text = module_text(module)
    assert text == (EXAMPLES / "dense-small.mlir").read_text()
    n = counts(module)
    # a layer: q, k, v, o and the MLP's three products; two ropes, one attention over two kv caches
    assert n["form.product"] == 7 * 2 + 1 and n["form.swiglu"] == 2 and n["form.norm"] == 5
    assert n["form.rope"] == 4 and n["form.attention"] == 2 and n["form.state"] == 4
    assert n["form.add"] == 4 and n["form.embed"] == n["form.argmax"] == 1
    w = weights(module)
    assert w["model.layers.1.mlp.gate_proj.weight"] == (8192, 2048) and w["lm_head.weight"] == (32000, 2048)
    assert w["model.layers.0.self_attn.k_proj.weight"] == (512, 2048)
    assert inputs(module) == {"tokens": (1,), "positions": (1,), "pages": (1, 128)}
    spec = inputs(dense_step(DenseShape(), batch=4, tokens=3))
    assert spec == {"tokens": (12,), "positions": (12,), "pages": (4, 128)}
    with pytest.raises(ValueError, match="--batch"):
        dense_step(DenseShape(), batch=0)
    with pytest.raises(ValueError, match="--spec-tokens"):
        dense_step(DenseShape(), tokens=0)
    with pytest.raises(ValueError, match="--heads 6 do not share --kv-heads 4"):
        dense_step(DenseShape(heads=6))


# ----------------------------------------------------------------------------------------------
# Llama 3.1


def test_llama_config_reads_the_published_numbers():
    c = llama_config(LLAMA)
    assert (c.hidden, c.width, c.vocab, c.layers, c.heads, c.kv_heads, c.head) == (4096, 14336, 128256, 32, 32, 8, 128)
    assert c.theta == 500000.0 and c.rms_eps == 1e-5 and not c.tied_embeddings
    assert c.scaling == Llama3Scaling(8.0, 1.0, 4.0, 8192)
    # transformers 5 writes rope_theta and the scaling as one rope_parameters object
    written = {k: v for k, v in LLAMA.items() if k not in ("rope_theta", "rope_scaling")}
    written["rope_parameters"] = {**LLAMA["rope_scaling"], "rope_theta": 500000.0}
    assert llama_config(written) == c
    unscaled = llama_config({**LLAMA, "rope_scaling": None})
    assert unscaled.scaling is None and unscaled.theta == 500000.0


def test_llama_step_shapes_names_and_rope_scaling(tmp_path):
    out = tmp_path / "llama.mlir"
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / "llama-3.1-8b.config.json"), "-o", str(out),
                                       "--layers", "2", "--batch", "2", "--page-size", "16"])
    assert result.exit_code == 0, result.output
    module = Parser(context(), out.read_text()).parse_module()
    n = counts(module)
    assert n["form.product"] == 7 * 2 + 1 and n["form.rope"] == 4 and n["form.attention"] == 2
    w = weights(module)
    assert w["model.embed_tokens.weight"] == (128256, 4096) and w["lm_head.weight"] == (128256, 4096)
    assert w["model.layers.1.self_attn.k_proj.weight"] == (1024, 4096)
    assert w["model.layers.0.mlp.down_proj.weight"] == (4096, 14336)
    assert states(module)["model.layers.1.value_cache"].kind.data == "kv"
    assert inputs(module) == {"tokens": (2,), "positions": (2,), "pages": (2, 64)}
    rope = next(op for op in ops(module) if isinstance(op, form.RopeOp))
    assert rope.scaling.data == "llama3" and rope.original_context.value.data == 8192
    tied = llama_config({**LLAMA, "tie_word_embeddings": True})
    assert "lm_head.weight" not in weights(llama_step(tied, StepOptions(layers=1)))


@pytest.mark.parametrize("change, message", [
    ({"model_type": "gpt2"}, "model_type: 'gpt2' is not one lanec imports (kimi_linear, llama"),  # more families follow
    ({"attention_bias": True}, "attention_bias: true"),
    ({"mlp_bias": True}, "mlp_bias: true"),
    ({"hidden_act": "gelu"}, "hidden_act: 'gelu'"),
    ({"num_key_value_heads": 5}, "num_key_value_heads: 5"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling.rope_type: 'yarn'"),
    ({"rope_scaling": {**LLAMA["rope_scaling"], "low_freq_factor": 4.0}}, "rope_scaling.low_freq_factor"),
])
def test_unsupported_llama_configs_are_one_line_errors(tmp_path, change, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **change}))
    result = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "out.mlir")])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output


@pytest.mark.parametrize("args", [["--kda-only"], ["--dense-mlp", "64"], ["--slots", "4"]])
def test_kimi_options_on_llama_are_one_line_errors(tmp_path, args):
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / "llama-3.1-8b.config.json"), "-o",
                                       str(tmp_path / "out.mlir"), *args])
    assert result.exit_code == 1 and args[0] in result.output and len(result.output.strip().splitlines()) == 1


def test_rope_scaling_properties_verify():
    from xdsl.utils.exceptions import VerifyException

    from lanec.models.builder import StepBuilder

    b = StepBuilder(1, 1)
    x, positions = b.weight("x", [1, 32]), b.input("positions", [1])
    form.RopeOp(x, positions, 2, 16, 5e5, (8.0, 1.0, 4.0, 64)).verify()
    with pytest.raises(VerifyException, match="below high_freq_factor"):
        form.RopeOp(x, positions, 2, 16, 5e5, (8.0, 4.0, 1.0, 64)).verify()
    op = form.RopeOp(x, positions, 2, 16, 5e5, (8.0, 1.0, 4.0, 64))
    del op.properties["factor"]
    with pytest.raises(VerifyException, match="needs factor"):
        op.verify()
    del op.properties["scaling"]
    with pytest.raises(VerifyException, match="without scaling"):
        op.verify()


# ----------------------------------------------------------------------------------------------
# The tiny model's step on the interpreter


def changed_slots(before: np.ndarray, after: np.ndarray) -> set[int]:
    return {s for s in range(before.shape[0]) if not np.array_equal(before[s], after[s])}


@pytest.mark.parametrize("batch, tokens, seed", [(4, 1, 0), (3, 1, 7), (3, 3, 1), (4, 2, 5)])
def test_tiny_step_on_the_interpreter(batch, tokens, seed):
    random_environment = pytest.importorskip("lanec.interp.environment").random_environment
    program_of = pytest.importorskip("lanec.interp.lower").program_of

    program = program_of(build(TINY, batch=batch, tokens=tokens))
    env = random_environment(program, seed=seed)
    before = {name: state.copy() for name, state in env.states.items()}
    next_tokens, logits = program.run(env)
    assert next_tokens.shape == (batch * tokens,) and logits.shape == (batch * tokens, 256)
    assert np.all((0 <= next_tokens) & (next_tokens < 256)) and np.isfinite(logits).all()

    slots = env.inputs["slots"].reshape(batch, -1)
    accepted = env.inputs["accepted"] if tokens > 1 else np.ones(batch, int)
    active = [b for b in range(batch) if slots[b, accepted[b] - 1] > 0]
    assert active, "the environment keeps a request active"
    conv_slots = {int(slots[b, 0]) for b in active}
    recurrent_slots = {int(s) for b in active for s in slots[b, :tokens] if s > 0}
    for layer in range(3):  # the KDA layers: written at the active requests' slots, nowhere else
        conv, recurrent = f"model.layers.{layer}.conv", f"model.layers.{layer}.recurrent"
        assert changed_slots(before[conv], env.states[conv]) == conv_slots
        assert changed_slots(before[recurrent], env.states[recurrent]) == recurrent_slots


# ----------------------------------------------------------------------------------------------
# transformers' KimiLinearConfig: its defaults, layer_types and mlp_layer_types


def test_left_out_fields_take_transformers_defaults():
    data = copy.deepcopy(TINY)
    for key in ("first_k_dense_replace", "num_shared_experts", "routed_scaling_factor", "mla_use_nope"):
        data.pop(key)
    c = kimi_linear_config(data)
    assert (c.first_dense, c.shared_experts, c.routed_scaling) == (1, 1, 2.446)


def test_layer_types_are_preferred_over_linear_attn_config():
    data = copy.deepcopy(TINY)
    data["layer_types"] = ["linear_attention", "full_attention", "linear_attention", "linear_attention"]
    data["mlp_layer_types"] = ["dense", "dense", "sparse", "sparse"]
    c = kimi_linear_config(data)
    assert (c.kda_layers, c.mla_layers, c.first_dense) == ((1, 3, 4), (2,), 2)


def test_without_linear_attn_config_transformers_fields_and_pattern():
    data = copy.deepcopy(TINY)
    linear = data.pop("linear_attn_config")
    data.update(num_hidden_layers=6, linear_num_heads=linear["num_heads"], linear_head_dim=linear["head_dim"])
    c = kimi_linear_config(data)
    assert (c.kda_heads, c.kda_head_dim, c.conv_width) == (2, 128, 4)
    assert (c.kda_layers, c.mla_layers) == ((1, 2, 3, 4, 6), (5,))  # full attention at layer index 4


@pytest.mark.parametrize("key, value, field", [
    ("layer_types", ["linear_attention"] * 3, "layer_types"),
    ("layer_types", ["linear_attention", "mamba", "linear_attention", "full_attention"], "layer_types"),
    ("mlp_layer_types", ["sparse", "dense", "sparse", "sparse"], "mlp_layer_types"),
])
def test_bad_layer_types_name_the_field(key, value, field):
    data = copy.deepcopy(TINY)
    data[key] = value
    with pytest.raises(ConfigError, match=field):
        kimi_linear_config(data)


def test_checkpoint_binds_transformers_names(tmp_path):
    """A saved transformers model's dense MLP under `block_sparse_moe.`, and transformers 5's packed
    experts, bind the published names."""
    from lanec.runtime.weights import Checkpoint

    rng = np.random.default_rng(0)
    gate_up, down = rng.standard_normal((4, 6, 5), np.float32), rng.standard_normal((4, 5, 3), np.float32)
    dense = rng.standard_normal((7, 5), np.float32)
    tensors = {"model.layers.0.block_sparse_moe.gate_proj.weight": dense,
               "model.layers.1.mlp.experts.gate_up_proj": gate_up, "model.layers.1.mlp.experts.down_proj": down}
    header, data = {}, b""
    for name, value in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [len(data), len(data) + value.nbytes]}
        data += value.tobytes()
    text = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    checkpoint = Checkpoint(path)
    assert np.array_equal(checkpoint.resolve("model.layers.0.mlp.gate_proj.weight", (7, 5)), dense)
    p = "model.layers.1.block_sparse_moe.experts.*"
    assert all(checkpoint.holds(f"{p}.{w}.weight") for w in ("w1", "w2", "w3"))
    assert np.array_equal(checkpoint.resolve(f"{p}.w1.weight", (4, 3, 5)), gate_up[:, :3])
    assert np.array_equal(checkpoint.resolve(f"{p}.w3.weight", (4, 3, 5)), gate_up[:, 3:])
    assert np.array_equal(checkpoint.resolve(f"{p}.w2.weight", (4, 5, 3)), down)
