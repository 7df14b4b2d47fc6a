"""What the reference tests share: transformers' greedy tokens and logits for a saved model, the
interpreter's for the same checkpoint through `lanec import`, and the comparison (pytest puts
tests/reference/ on the path: `from compare import ...`).

Both sides compute in fp32: the checkpoint is fp32, and the interpreter computes fp32 without
rounding to the form's bf16 storage types (its meaning; `lanec run --check` rounds, this does not).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from click.testing import CliRunner

from lanec.cli import main
from lanec.interp.generate import checkpoint_weights, generate
from lanec.interp.lower import program_of
from lanec.models.builder import context

TOLERANCE = 1e-3  # of max |logit|, fp32
PROMPT = [17, 200, 3, 99, 42]
NEW = 16


def reference(model_class, folder: Path) -> tuple[list[int], np.ndarray]:
    """transformers' greedy tokens, and its logits at every position of prompt + tokens."""
    model = model_class.from_pretrained(folder, dtype=torch.float32).eval()
    prompt = torch.tensor([PROMPT])
    with torch.no_grad():
        out = model.generate(prompt, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW,
                             attention_mask=torch.ones_like(prompt), pad_token_id=0)
        tokens = out[0, len(PROMPT):].tolist()
        logits = model(out[:, :-1]).logits[0].numpy()
    return tokens, logits


def interpreted(folder: Path, tmp_path: Path) -> tuple[list[int], np.ndarray]:
    """The interpreter's greedy tokens and logits for the saved model, through `lanec import`."""
    form_path = tmp_path / "model.mlir"
    result = CliRunner().invoke(main, ["import", str(folder / "config.json"), "-o", str(form_path),
                                       "--page-size", "8", "--context-pages", "4"])
    assert result.exit_code == 0, result.output
    from xdsl.parser import Parser

    program = program_of(Parser(context(), form_path.read_text(), str(form_path)).parse_module())
    run = generate(program, checkpoint_weights(program, folder / "model.safetensors"), PROMPT, NEW)
    return run.tokens, run.logits


def first_difference(got: np.ndarray, want: np.ndarray) -> str | None:
    """The first step whose logits differ by more than the tolerance, and the largest difference."""
    bound = TOLERANCE * float(np.abs(want).max())
    diff = np.abs(got - want).max(axis=-1)
    bad = np.flatnonzero(diff > bound)
    if not len(bad):
        return None
    return (f"step {bad[0]} (of {len(diff)}) first differs: {diff[bad[0]]:.3g} > {bound:.3g}; "
            f"the largest difference {diff.max():.3g} at step {int(diff.argmax())}")


def assert_same_decode(got: tuple[list[int], np.ndarray], want: tuple[list[int], np.ndarray], vocab: int) -> None:
    """Every step's logits within the tolerance, then the same greedy tokens (naming the first that differs)."""
    (got_tokens, got_logits), (want_tokens, want_logits) = got, want
    assert got_logits.shape == want_logits.shape == (len(PROMPT) + NEW - 1, vocab)
    problem = first_difference(got_logits, want_logits)
    assert problem is None, problem
    assert got_tokens == want_tokens, (
        f"token {next(i for i, (a, b) in enumerate(zip(got_tokens, want_tokens)) if a != b)} differs: "
        f"{got_tokens} vs transformers' {want_tokens}")


def save_model(model, folder: Path, adjust=None) -> Path:
    """Save a tiny random transformers `model` (fp32) as safetensors after `adjust(name, tensor)`
    has moved parameters and buffers off their initial values (norms away from one, so a weight
    read as another's would show; a router's correction bias)."""
    model = model.to(torch.float32).eval()
    if adjust is not None:
        with torch.no_grad():
            for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
                adjust(name, tensor)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def norms_and_correction(name: str, tensor) -> None:
    """`save_model`'s adjustment for RMS norms of weight w (initialised to one) and a router's
    correction bias (initialised to zero)."""
    if name.endswith("norm.weight"):
        tensor.copy_(1 + 0.2 * torch.randn_like(tensor))
    elif name.endswith("e_score_correction_bias"):  # the correction chooses experts but does not weigh them
        tensor.copy_(0.1 * torch.randn_like(tensor))


def pack_experts(path: Path, pattern: str, projections: tuple[str, str, str], packed: str) -> None:
    """Rewrite a checkpoint's per-expert tensors as transformers 5's packed ones, in place.
    `pattern` matches a per-expert name (groups: the layer's prefix, the expert, the projection),
    `projections` names gate, up and down; the packed tensors are `{prefix}{packed}.gate_up_proj`
    [E, 2I, H] (gate rows then up rows) and `{prefix}{packed}.down_proj` [E, H, I]."""
    import re

    from safetensors.torch import load_file, save_file

    gate, up, down = projections
    tensors, experts = load_file(path), {}
    for name in list(tensors):
        found = re.fullmatch(pattern, name)
        if found:
            experts.setdefault(found.group(1), {})[(int(found.group(2)), found.group(3))] = tensors.pop(name)
    assert experts, "the saved checkpoint holds no per-expert tensors"
    for layer, parts in experts.items():
        count = 1 + max(e for e, _ in parts)
        tensors[f"{layer}{packed}.gate_up_proj"] = torch.stack(
            [torch.cat([parts[e, gate], parts[e, up]]) for e in range(count)])
        tensors[f"{layer}{packed}.down_proj"] = torch.stack([parts[e, down] for e in range(count)])
    save_file(tensors, path, metadata={"format": "pt"})
