"""GGUF checkpoints: a tiny Llama (test_generate's config: head size 64, pages of 16) written with
the gguf package's writer under llama.cpp's names and layout (q and k rows permuted for its rope,
as its converter does) reads back through `GgufCheckpoint` as the Hugging Face tensors, and the
interpreter decodes from it exactly what it decodes from the same safetensors checkpoint. F16,
BF16 and Q8_0 tensors are values (Q8_0 kept as its own blocks for a q8_0 buffer); another quant
type, a wrong shape and a missing tensor are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors import numpy as safetensors_numpy

from lanec.cli import main
from lanec.runtime import dtypes, weights
from lanec.runtime.plan import Buffer, Plan, Source, Transform, WeightBinding

gguf = pytest.importorskip("gguf")

from gguf_llama import (  # noqa: E402
    CONFIG,
    HEADS,
    HIDDEN,
    KV_HEADS,
    NAMES,
    WIDTH,
    hf_tensors,
    permute,
    write_gguf,
)

from lanec.runtime.gguf_checkpoint import GgufCheckpoint  # noqa: E402  (needs gguf)

PROMPT = [17, 200, 3, 99, 42]
NEW = 6


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("gguf")
    (folder / "config.json").write_text(json.dumps(CONFIG))
    tensors = hf_tensors()
    safetensors_numpy.save_file(tensors, str(folder / "model.safetensors"))
    write_gguf(folder / "model.gguf", tensors)
    result = invoke("import", folder / "config.json", "-o", folder / "model.mlir", "--page-size", "16",
                    "--context-pages", "4")
    assert result.exit_code == 0, result.output
    result = invoke("compile", folder / "model.mlir", "-o", folder / "model.plan")
    assert result.exit_code == 0, result.output
    return {"folder": folder, "tensors": tensors, "plan": folder / "model.plan", "form": folder / "model.mlir"}


def test_names_and_qk_permutation_round_trip(model):
    reader = GgufCheckpoint(model["folder"] / "model.gguf")
    assert sorted(reader.names) == sorted(NAMES.values())
    stored = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(model["folder"] / "model.gguf").tensors}
    for name, values in model["tensors"].items():
        assert reader.held(name) == NAMES[name] and reader.holds(name)
        # GGUF lists dimensions fastest first; the reader gives them in the Hugging Face order
        np.testing.assert_array_equal(reader.resolve(name, values.shape), values)
    q, k = "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"
    assert not np.array_equal(stored[NAMES[q]], model["tensors"][q])  # the file holds llama.cpp's rows
    np.testing.assert_array_equal(stored[NAMES[q]], permute(model["tensors"][q], HEADS))
    np.testing.assert_array_equal(stored[NAMES[k]], permute(model["tensors"][k], KV_HEADS))


def test_interpreter_decodes_the_safetensors_tokens_and_logits(model):
    from lanec.interp.generate import checkpoint_weights, generate
    from lanec.interp.program import Program

    program = Program.from_json(Plan.read(model["plan"]).program)
    runs = [generate(program, checkpoint_weights(program, model["folder"] / f"model.{kind}"), PROMPT, NEW)
            for kind in ("safetensors", "gguf")]
    assert runs[0].tokens == runs[1].tokens
    np.testing.assert_array_equal(runs[0].logits, runs[1].logits)
    outputs = []
    for kind in ("safetensors", "gguf"):
        result = invoke("generate", model["plan"], "--weights", model["folder"] / f"model.{kind}",
                        "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new", NEW, "--interpret")
        assert result.exit_code == 0, result.output
        outputs.append(next(line for line in result.output.splitlines() if line.startswith("tokens:")))
    assert outputs[0] == outputs[1] == "tokens: " + " ".join(map(str, runs[0].tokens))
    # `lanec run --interpret --weights`: the plan's weight sources, bound from either file, are the same
    from lanec.runtime.runner import Options, load_plan

    bound = [load_plan(model["plan"], Options(weights=model["folder"] / f"model.{kind}"))[2]
             for kind in ("safetensors", "gguf")]
    assert sorted(bound[0]) == sorted(bound[1]) == sorted(NAMES)
    for name in NAMES:
        np.testing.assert_array_equal(bound[0][name], bound[1][name])
    result = invoke("run", model["plan"], "--interpret", "--steps", "2", "--weights", model["folder"] / "model.gguf")
    assert result.exit_code == 0, result.output

def test_half_precision_and_q8_0_tensors_are_values(tmp_path, model):
    tensors = model["tensors"]
    down, up, gate = (f"model.layers.0.mlp.{n}.weight" for n in ("down_proj", "up_proj", "gate_proj"))
    path = write_gguf(tmp_path / "typed.gguf", tensors, {down: "F16", up: "BF16", gate: "Q8_0"})
    reader = GgufCheckpoint(path)
    np.testing.assert_array_equal(reader.resolve(down, tensors[down].shape), tensors[down].astype(np.float16))
    np.testing.assert_array_equal(reader.resolve(up, tensors[up].shape), dtypes.round_bf16(tensors[up]))
    # Q8_0: q * d per block, within half a step (and the fp16 rounding of d, 127 / 2^11 of a step) of the values
    values = reader.resolve(gate, tensors[gate].shape)
    steps = np.abs(tensors[gate]).reshape(-1, 32).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(values - tensors[gate]).reshape(-1, 32) <= steps * (0.5 + 127 / 2**11))
    # a bf16 buffer gets them rounded to bf16; a q8_0 buffer the file's blocks, byte for byte
    blocks = np.asarray(next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.0.ffn_gate.weight").data)
    shape = tensors[gate].shape
    source = Source(gate, shape)
    plan = Plan(buffers=[Buffer("w.bf16", shape, "bfloat16", "weight"),
                         Buffer("w.q8_0", (shape[0], shape[1] // 32 * 34), "uint8", "weight")],
                weights=[WeightBinding("w.bf16", (source,)),
                         WeightBinding("w.q8_0", (source,), (Transform("quantize_q8_0"),))])
    bound = weights.sources(Plan(buffers=plan.buffers, weights=plan.weights[:1]), 0, reader)
    np.testing.assert_array_equal(bound[gate], dtypes.round_bf16(values))
    bound = weights.sources(Plan(buffers=plan.buffers, weights=plan.weights[1:]), 0, reader)
    np.testing.assert_array_equal(bound[gate], values)
    np.testing.assert_array_equal(weights.make(plan.weights[1], bound, plan), blocks)
    # blocks whose scale is not max|w| / 127 (halved words): values for bf16, refused for q8_0 rows
    halved = blocks.reshape(-1, 34).copy()
    halved[:, 2:] = (halved[:, 2:].view(np.int8) // 2).view(np.uint8)
    path = write_gguf(tmp_path / "halved.gguf", {}, raw={"blk.0.ffn_gate.weight": (halved.reshape(blocks.shape), "Q8_0")})
    reader = GgufCheckpoint(path)
    np.testing.assert_array_equal(reader.resolve(gate, shape), gguf.quants.dequantize(halved, gguf.GGMLQuantizationType.Q8_0).reshape(shape))
    with pytest.raises(weights.WeightError, match=r"'blk.0.ffn_gate.weight' is Q8_0 \[256, 128\] with blocks whose "
                                                  r"scale is not max\|w\| / 127"):
        reader.resolve(gate, shape, q8_0=True)


def refusal(model, path: Path) -> str:
    result = invoke("run", model["plan"], "--interpret", "--weights", path)
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1, result.output
    return result.output.strip()


def test_refusals_are_one_line(tmp_path, model):
    tensors = model["tensors"]
    down = "model.layers.1.mlp.down_proj.weight"  # [128, 256]: rows of whole 256-value Q4_K super-blocks
    q4_k = np.zeros((HIDDEN, WIDTH // 256 * 144), np.uint8)
    path = write_gguf(tmp_path / "q4_k.gguf", {n: v for n, v in tensors.items() if n != down},
                      raw={"blk.1.ffn_down.weight": (q4_k, "Q4_K")})
    line = refusal(model, path)
    assert "'blk.1.ffn_down.weight' is Q4_K [128, 256]; the plan needs bf16 values (F32, F16, BF16, Q8_0)" in line

    up = "model.layers.1.mlp.up_proj.weight"
    path = write_gguf(tmp_path / "shape.gguf", {**tensors, up: tensors[up][:128]})
    line = refusal(model, path)
    assert ("tensor 'blk.1.ffn_up.weight' (F32, llama.cpp's name of 'model.layers.1.mlp.up_proj.weight') is [128, 128]; "
            "the plan expects [256, 128]") in line

    path = write_gguf(tmp_path / "missing.gguf", {n: v for n, v in tensors.items() if n != up})
    line = refusal(model, path)
    assert "has no tensor 'blk.1.ffn_up.weight' (llama.cpp's name of 'model.layers.1.mlp.up_proj.weight')" in line


def family_file(path: Path, architecture: str, tensors: dict[str, np.ndarray]) -> GgufCheckpoint:
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(2)
    for name, values in tensors.items():
        writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return GgufCheckpoint(path)


def test_other_families_names(tmp_path):
    rng = np.random.default_rng(5)
    experts = rng.standard_normal((4, 64, 32)).astype(np.float32)  # [experts, width, hidden], numpy's order
    norm = (1 + 0.1 * rng.standard_normal(64)).astype(np.float32)
    a_log = rng.standard_normal(8).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    # Qwen3-Next: the converter's +1 on the norms and -exp(A_log) are the stored tensors
    qwen = family_file(tmp_path / "qwen3next.gguf", "qwen3next", {
        "blk.1.ffn_gate_exps.weight": experts, "blk.1.attn_q_norm.weight": norm, "blk.0.ssm_a": -np.exp(a_log),
        "blk.0.ssm_dt.bias": bias, "blk.0.ssm_norm.weight": norm})
    np.testing.assert_array_equal(qwen.resolve("model.layers.1.mlp.experts.*.gate_proj.weight", experts.shape), experts)
    np.testing.assert_array_equal(qwen.resolve("model.layers.1.self_attn.q_norm.weight+1", norm.shape), norm)
    np.testing.assert_allclose(qwen.resolve("model.layers.0.linear_attn.A_log", a_log.shape), a_log, atol=1e-6)
    np.testing.assert_array_equal(qwen.resolve("model.layers.0.linear_attn.dt_bias", bias.shape), bias)
    np.testing.assert_array_equal(qwen.resolve("model.layers.0.linear_attn.norm.weight", norm.shape), norm)
    # DeepSeek-V3 (llama.cpp's deepseek2) and Kimi Linear: the parts they share with the others
    deepseek = family_file(tmp_path / "deepseek2.gguf", "deepseek2", {
        "blk.1.ffn_up_exps.weight": experts, "blk.1.exp_probs_b.bias": bias, "blk.0.attn_kv_a_mqa.weight": experts[0]})
    assert deepseek.held("model.layers.1.mlp.experts.*.up_proj.weight") == "blk.1.ffn_up_exps.weight"
    assert deepseek.held("model.layers.1.mlp.gate.e_score_correction_bias") == "blk.1.exp_probs_b.bias"
    assert deepseek.held("model.layers.0.self_attn.kv_a_proj_with_mqa.weight") == "blk.0.attn_kv_a_mqa.weight"
    kimi = family_file(tmp_path / "kimi.gguf", "kimi-linear", {
        "blk.1.ffn_down_exps.weight": experts, "blk.1.ffn_gate_inp.weight": experts[0], "blk.0.attn_norm.weight": norm})
    assert kimi.held("model.layers.1.block_sparse_moe.experts.*.w2.weight") == "blk.1.ffn_down_exps.weight"
    assert kimi.held("model.layers.1.block_sparse_moe.gate.weight") == "blk.1.ffn_gate_inp.weight"
    # Kimi's norms are not zero-centred: `name+1` adds the 1 (as from a safetensors checkpoint)
    np.testing.assert_array_equal(kimi.resolve("model.layers.0.input_layernorm.weight+1", norm.shape), norm + 1)
