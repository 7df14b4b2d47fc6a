"""Tiny random transformers models of each family, sized for the lane's kernels, saved as safetensors
and compiled to batch-1 plans here (`build()`, needs torch and transformers: the `ref` extra) for
tests/gpu/test_generate_families.py, which decodes them on the GPU with `lanec generate` and on the
interpreter with `lanec generate --interpret`.

    python tests/gpu/tiny_models.py [FAMILY ...]     # here; writes build/tiny/

Each family's model is the reference tests' kind (tests/reference/: rope with its scaling, experts,
a dense first layer) at sizes the kernels take (attention heads of 64 or more, KDA heads of 128,
16-byte vectors everywhere). Its weights are rounded to bf16 and saved as bf16, so the GPU's bf16
weights are the checkpoint's values (and the interpreter reads the same values as fp32). The prompt is chosen here so that greedy decoding is not a
near tie: the interpreter decodes it in fp32 and again rounding every value it stores to bf16 (as
the kernels store them), and the prompt is kept only where both choose the same tokens with every
step's winning margin at least MARGIN times the largest logit difference between the two, and
every router's choice at least ROUTING_MARGIN from a tie (a routing flip changes a step wholesale). A
family whose plan does not compile (a `compiles=False` family: none today) is recorded with
the compiler's one-line error, which the GPU test reports as its skip reason; the others must
compile. build/tiny/manifest.json lists each family's plan, checkpoint, prompt and tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "tiny"
MANIFEST = OUT / "manifest.json"
NEW = 16  # greedy tokens a decode chooses
PROMPT_LENGTH = 5
MARGIN = 2.0  # a step's top-1 over top-2 logit gap against the fp32 / bf16-stored difference
# a router's least lead (ops.routing_margin) at every step: the share of scale the check treats
# as a near tie (ops.ROUTING_TIE, 1e-2). DeepSeek-V3's tiny model chose a prompt whose 14th step
# kept a group by a lead of 4.5e-3 and decoded another token there on the H200.
ROUTING_MARGIN = 1e-2
SEEDS = 400  # prompts tried on one model
MODEL_SEEDS = 3  # models (torch seeds) tried before a family's build gives up
HOPELESS = 50  # prompts after which a best margin ratio under MARGIN / 2 gives up early
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


def lanec(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lanec.cli", *args], cwd=ROOT, capture_output=True, text=True)


@contextmanager
def routing_margins(margins: list[float]):
    """While inside, every mixture the interpreter runs appends its router's margin from a tie
    (`ops.routing_margin`) to `margins`."""
    from lanec.interp import ops
    from lanec.interp.program import OPS

    def mixture(x, router, gate, up, down, top_k, scoring, renormalize, routed_scaling, correction=None,
                shared=(), rows=None, groups=None, topk_groups=None, hint=None):
        margins.append(ops.routing_margin(x, router, top_k, scoring, correction, groups, topk_groups))
        return ops.mixture(x, router, gate, up, down, top_k, scoring, renormalize, routed_scaling, correction,
                           shared, rows, groups, topk_groups, hint)

    OPS["mixture"] = mixture
    try:
        yield margins
    finally:
        OPS["mixture"] = ops.mixture


def decode(program, weights, prompt: list[int], storage: bool, margins: list[float] | None = None):
    """Greedy tokens and every step's logits on the interpreter (`storage`: values rounded to bf16
    where the kernels store them); each router's margin from a tie appended to `margins`."""
    import numpy as np

    from lanec.interp.environment import Environment
    from lanec.interp.generate import prepare, step_inputs

    inputs, states = prepare(program, prompt, NEW)
    env = Environment(inputs, weights, states)
    fed, chosen, logits = list(prompt), [], []
    with routing_margins([] if margins is None else margins):
        for position in range(len(prompt) + NEW - 1):
            env.inputs.update(step_inputs(fed[position], position))
            tokens, step_logits = program.run(env, storage=storage)[:2]
            if position >= len(prompt) - 1:
                chosen.append(int(tokens[0]))
                fed.append(chosen[-1])
                logits.append(np.asarray(step_logits, np.float32)[0])
    return chosen, np.stack(logits)


class NearTies(Exception):
    """No prompt tried decodes clear of bf16 near ties (the message says how near the best came)."""


def robust_prompt(plan: Path, checkpoint: Path, vocab: int) -> tuple[list[int], list[int], float]:
    """A prompt whose greedy decode is the same in fp32 and bf16-stored, by a margin (see the
    module's docstring): (prompt, tokens, the smallest margin ratio)."""
    import numpy as np

    from lanec.interp.generate import checkpoint_weights
    from lanec.interp.program import Program
    from lanec.runtime.plan import Plan

    program = Program.from_json(Plan.read(plan).program)
    weights = checkpoint_weights(program, checkpoint)
    best = None
    for seed in range(SEEDS):
        prompt = np.random.default_rng(seed).integers(3, vocab, PROMPT_LENGTH).tolist()
        margins: list[float] = []
        exact, exact_logits = decode(program, weights, prompt, storage=False, margins=margins)
        stored, stored_logits = decode(program, weights, prompt, storage=True)
        if exact != stored or min(margins, default=1.0) < ROUTING_MARGIN:
            continue  # a routing near tie: the GPU's router may choose the other expert or group
        top = np.sort(exact_logits, axis=-1)
        gaps = top[:, -1] - top[:, -2]
        drift = np.abs(exact_logits - stored_logits).max(axis=-1)
        ratio = float((gaps / np.maximum(drift, 1e-6)).min())
        if best is None or ratio > best[2]:
            best = (prompt, exact, ratio)
        if ratio >= MARGIN:
            return best
        if seed >= HOPELESS and best is not None and best[2] < MARGIN / 2:
            break  # far from the margin after as many prompts: more will not get there
    raise NearTies(f"no prompt of {SEEDS} decodes clear of bf16 near ties (best margin ratio "
                   f"{best[2] if best else 0:.2f}, want {MARGIN})")


def build(names: list[str] | None = None) -> list[Path]:
    """Save, import and compile each family's tiny model into build/tiny/<family>/; record the
    manifest. A family that must compile and does not stops the build with the compiler's error."""
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    built = []
    for name in names or list(FAMILIES):
        family = FAMILIES[name]
        folder = OUT / name
        for seed in range(MODEL_SEEDS):  # another draw of the model where no prompt is clear of ties
            save(name, family, folder, seed)
            source, plan = folder / "step.mlir", folder / "step.plan"
            for command in (["import", str(folder / "config.json"), *IMPORT, "-o", str(source)],
                            ["compile", str(source), "-o", str(plan)]):
                result = lanec(*command)
                if result.returncode:
                    error = (result.stderr or result.stdout).strip().splitlines()[-1]
                    if family.compiles:
                        raise SystemExit(f"{name}: lanec {command[0]} failed: {error}")
                    manifest[name] = {"compiled": False, "error": error}
                    plan.unlink(missing_ok=True)
                    (folder / "model.safetensors").unlink()  # nothing to carry
                    break
            else:
                try:
                    prompt, tokens, ratio = robust_prompt(plan, folder / "model.safetensors",
                                                          family.fields["vocab_size"])
                except NearTies as error:
                    if family.compiles and seed == MODEL_SEEDS - 1:
                        raise SystemExit(f"{name}: {MODEL_SEEDS} models: {error}") from None
                    manifest[name] = {"compiled": False, "error": f"compiled, but {error}"}
                    plan.unlink()
                    (folder / "model.safetensors").unlink()
                    continue
                manifest[name] = {"compiled": True, "plan": str(plan.relative_to(ROOT)),
                                  "weights": str((folder / "model.safetensors").relative_to(ROOT)),
                                  "model_seed": seed, "prompt": prompt, "new": NEW, "tokens": tokens,
                                  "margin_ratio": round(ratio, 2)}
                built.append(plan)
            break
        print(f"{name}: {json.dumps(manifest[name])}")
        MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")  # each family as it is done
    return built


if __name__ == "__main__":
    build(sys.argv[1:] or None)
