"""Each family's tiny random transformers model (lanec/models/tiny.py: the families and how they
are saved), compiled to a batch-1 plan here (`build()`, needs torch and transformers: the `ref`
extra) for tests/gpu/test_generate_families.py, which decodes them on the GPU with `lanec generate`
and on the interpreter with `lanec generate --interpret`.

    python tests/gpu/tiny_models.py [FAMILY ...]     # here; writes build/tiny/

The prompt is chosen here so that greedy decoding is not a near tie: the interpreter decodes it
in fp32 and again rounding every value it stores to bf16 (as the kernels store them), and the prompt is kept only where both choose the same tokens with every
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

from lanec.models.tiny import FAMILIES, IMPORT, save

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
