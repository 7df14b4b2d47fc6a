"""The tiny saved models of lanec/models/tiny.py (README's main job decodes one; the GPU tests decode
all four): each family's checkpoint, as `python3 -m lanec.models.tiny` saves it (bf16 values), decodes
through `lanec import` and the interpreter to transformers' greedy tokens, every step's logits
within the reference tolerance."""

from __future__ import annotations

import compare
import pytest
import transformers
from click.testing import CliRunner
from compare import assert_same_decode, interpreted, reference

from lanec.models.tiny import FAMILIES, main


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_tiny_saved_model_decodes_as_transformers_does(name, tmp_path, monkeypatch):
    vocab = FAMILIES[name].fields["vocab_size"]
    monkeypatch.setattr(compare, "PROMPT", [token % vocab for token in compare.PROMPT])  # Qwen3-Next's has 128
    folder = tmp_path / name
    result = CliRunner().invoke(main, [name, str(folder)])
    assert result.exit_code == 0, result.output
    assert (folder / "model.safetensors").is_file()
    family = FAMILIES[name]
    assert_same_decode(interpreted(folder, tmp_path), reference(getattr(transformers, family.model), folder), vocab)


def test_an_unknown_family_is_refused_by_name(tmp_path):
    result = CliRunner().invoke(main, ["gpt2", str(tmp_path / "x")])
    assert result.exit_code != 0 and "gpt2" in result.output
