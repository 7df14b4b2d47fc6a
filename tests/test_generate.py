"""`lanec generate` on the CPU: a tiny random transformers Llama (saved as tests/reference/ saves
them; head size 64 and pages of 16, which the lane compiles) imported and compiled to a plan.
`--interpret` decodes transformers' greedy tokens; the GPU path, with a stand-in session that
runs the plan's program on the CPU (caches kept from step to step, a token and a position
written a step), decodes the interpreter's; bad input is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from forms import DENSE, skip_where_a_gpu_works

from lanec.cli import main
from lanec.interp.program import Program
from lanec.runtime import runner

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROMPT = [17, 200, 3, 99, 42]
NEW = 12
CONFIG = {
    "vocab_size": 256, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 128, "tie_word_embeddings": False, "initializer_range": 0.2,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("generate")
    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG)).to(torch.float32).eval()
    with torch.no_grad():
        for name, p in llama.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
    llama.save_pretrained(folder / "model", safe_serialization=True)
    with torch.no_grad():
        prompt = torch.tensor([PROMPT])
        out = llama.generate(prompt, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW,
                             attention_mask=torch.ones_like(prompt), pad_token_id=0)
    (folder / "want.txt").write_text(" ".join(map(str, out[0, len(PROMPT):].tolist())))
    result = invoke("import", folder / "model" / "config.json", "-o", folder / "model.mlir",
                    "--page-size", "16", "--context-pages", "4")
    assert result.exit_code == 0, result.output
    result = invoke("compile", folder / "model.mlir", "-o", folder / "model.plan")
    assert result.exit_code == 0, result.output
    return {"form": folder / "model.mlir", "plan": folder / "model.plan", "weights": folder / "model" / "model.safetensors",
            "want": folder / "want.txt", "folder": folder}


def tokens_of(output: str) -> list[int]:
    line = next(line for line in output.splitlines() if line.startswith("tokens:"))
    return [int(t) for t in line.split()[1:]]


def test_interpret_gives_transformers_tokens(model):
    want = [int(t) for t in model["want"].read_text().split()]
    for source in (model["form"], model["plan"]):
        result = invoke("generate", source, "--weights", model["weights"], "--prompt-ids", ",".join(map(str, PROMPT)),
                        "--max-new", NEW, "--interpret")
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[0] == "prompt: " + " ".join(map(str, PROMPT))
        assert tokens_of(result.output) == want
        assert f"{NEW} new tokens after {len(PROMPT)} prompt tokens on the CPU" in result.output
        assert "tokens/s" in result.output.splitlines()[-1]


def stand_in(log: list):
    """A Session computing the plan's program on the CPU, states kept between steps, inputs
    written between steps. It computes the interpreter's meaning (fp32, no bf16 stores): with
    bf16 stores this random model's greedy path leaves the fp32 one after some ten tokens, as a
    GPU's may; the tokens the kernels choose are judged on the GPU (tests/gpu)."""

    class Session:
        def __init__(self, plan, env, sources, pdl=True, seed=None):
            self.plan, self.env = plan, env.copy()
            self.program = Program.from_json(plan.program)
            self.stream = type("S", (), {"synchronize": lambda self: None})()
            self.values: dict[str, np.ndarray] = {}
            log.append(("start", {k: v.copy() for k, v in env.inputs.items()}))

        def write(self, inputs):
            log.append(("write", {k: np.asarray(v).copy() for k, v in inputs.items()}))
            self.env.inputs.update({k: np.asarray(v).copy() for k, v in inputs.items()})

        def step_function(self, graph):
            def step():
                runner.validate_inputs(self.program, self.env.inputs)
                outputs = self.program.run(self.env)
                for spec in self.plan.buffers:
                    if spec.role == "output":
                        self.values[spec.name] = np.asarray(outputs[spec.source])
            return step

        def read(self, name):
            return self.values[name].copy()

    return Session


def test_the_runtime_path_gives_the_interpreters_tokens(model, monkeypatch):
    ids = ",".join(map(str, PROMPT))
    interpreted = invoke("generate", model["plan"], "--weights", model["weights"], "--prompt-ids", ids,
                         "--max-new", NEW, "--interpret")
    assert interpreted.exit_code == 0, interpreted.output
    log: list = []
    monkeypatch.setattr(runner, "Session", stand_in(log))
    result = invoke("generate", model["plan"], "--weights", model["weights"], "--prompt-ids", ids, "--max-new", NEW)
    assert result.exit_code == 0, result.output
    assert tokens_of(result.output) == tokens_of(interpreted.output)
    assert f"{NEW} new tokens after {len(PROMPT)} prompt tokens on the GPU" in result.output
    # one session; the page table once (request 0 holds pages 0..3); a token and its position a step
    start, writes = log[0], log[1:]
    assert start[0] == "start" and start[1]["pages"].tolist() == [[0, 1, 2, 3]]
    assert len(writes) == len(PROMPT) + NEW - 1
    fed = PROMPT + tokens_of(result.output)
    for position, (kind, inputs) in enumerate(writes):
        assert kind == "write" and inputs["positions"].tolist() == [position]
        assert inputs["tokens"].tolist() == [fed[position]]


def test_a_tokenizer_encodes_the_prompt_and_decodes_the_text(model, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {f"w{i}": i for i in range(CONFIG["vocab_size"])}
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    path = model["folder"] / "tokenizer.json"
    words.save(str(path))
    text = " ".join(f"w{i}" for i in PROMPT)
    result = invoke("generate", model["form"], "--weights", model["weights"], "--prompt", text, "--tokenizer", path,
                    "--max-new", NEW, "--interpret")
    assert result.exit_code == 0, result.output
    want = [int(t) for t in model["want"].read_text().split()]
    assert tokens_of(result.output) == want
    assert "text: " + " ".join(f"w{i}" for i in want) in result.output
    monkeypatch.setattr(runner, "Session", stand_in([]))
    result = invoke("generate", model["plan"], "--weights", model["weights"], "--prompt", text, "--tokenizer", path,
                    "--max-new", 3)
    assert result.exit_code == 0, result.output
    assert tokens_of(result.output) == want[:3]


def one_line_error(result, *words: str) -> None:
    assert result.exit_code != 0, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    for word in words:
        assert word in result.output, result.output


def test_bad_input_is_one_line(model, tmp_path):
    plan, form, weights = model["plan"], model["form"], model["weights"]
    run = ("generate", plan, "--weights", weights, "--interpret")
    one_line_error(invoke(*run, "--prompt-ids", "1,x,3"), "'x' is not a token id")
    one_line_error(invoke(*run, "--prompt-ids", "1,-2"), "negative")
    one_line_error(invoke(*run, "--prompt", "hello"), "--tokenizer")
    one_line_error(invoke(*run), "--prompt-ids", "--prompt")
    one_line_error(invoke(*run, "--prompt-ids", "1,2", "--prompt", "hi"), "one of them")
    one_line_error(invoke(*run, "--prompt-ids", "1,256"), "outside the vocabulary (0..255)")
    one_line_error(invoke("generate", plan, "--weights", weights, "--prompt-ids", "1,256"), "outside the vocabulary")
    one_line_error(invoke(*run, "--prompt-ids", "1,2", "--max-new", 200), "the caches hold 64")
    one_line_error(invoke("generate", form, "--weights", weights, "--prompt-ids", "1"), "not a plan")
    (tmp_path / "bad.json").write_text("{}")
    one_line_error(invoke(*run, "--prompt", "hi", "--tokenizer", tmp_path / "bad.json"), "not a tokenizer.json")

    for flags, said in ((("--batch", "2"), "2 requests of 1 tokens"), (("--spec-tokens", "2"), "1 requests of 2 tokens")):
        result = invoke("import", model["folder"] / "model" / "config.json", "-o", tmp_path / "wide.mlir",
                        "--page-size", "16", "--context-pages", "4", *flags)
        assert result.exit_code == 0, result.output
        one_line_error(invoke("generate", tmp_path / "wide.mlir", "--weights", weights, "--prompt-ids", "1,2",
                              "--interpret"), said, "batch 1, tokens 1")

    (tmp_path / "dense.mlir").write_text(DENSE)  # a plan of three requests a step, on the runtime's path
    assert invoke("compile", tmp_path / "dense.mlir", "-o", tmp_path / "dense.plan").exit_code == 0
    one_line_error(invoke("generate", tmp_path / "dense.plan", "--weights", weights, "--prompt-ids", "1"),
                   "3 requests of 1 tokens", "batch 1, tokens 1")


def test_without_a_gpu_it_is_one_line(model):
    skip_where_a_gpu_works()
    result = invoke("generate", model["plan"], "--weights", model["weights"], "--prompt-ids", "1,2", "--max-new", 2)
    one_line_error(result, "driver" if "driver" in result.output else "GPU")
