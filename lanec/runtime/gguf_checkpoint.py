"""GGUF checkpoints (llama.cpp's files) as the weights of a plan, read with the `gguf` package's
`GGUFReader` (imported here only: the runtime needs it only where a .gguf file is given).

The form's weights carry Hugging Face names; llama.cpp renames them. `gguf.TensorNameMap` is
llama.cpp's own table from Hugging Face names to its names, per architecture (the file's
`general.architecture`): `model.layers.N.self_attn.q_proj.weight` is `blk.N.attn_q.weight`, the
stacked experts `model.layers.N.mlp.experts.*.gate_proj.weight` are `blk.N.ffn_gate_exps.weight`
[experts, width, hidden], and so on for Llama, Qwen3-Next, DeepSeek-V3 (`deepseek2`) and Kimi Linear.
What llama.cpp's converter changes besides the name is undone here where lanec knows it: Llama's
q and k rows, permuted for llama.cpp's rope (`LlamaModel.permute`); Qwen3-Next's zero-centred norms,
stored with their 1 added (the form's `name+1` is the stored tensor), and its A_log, stored as
A = -exp(A_log) (`ssm_a`). GGUF lists dimensions fastest first; the reader gives numpy's order, the
form's.

Types: F32, F16 and BF16 are values; Q8_0 blocks are dequantized (into a bf16 buffer they are
rounded to bf16; a q8_0 buffer gets the file's blocks: `tensor`). Any other type is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from lanec.runtime.weights import PLUS_ONE, Tensors, WeightError, quantize_q8_0

VALUE_TYPES = ("F32", "F16", "BF16", "Q8_0")  # the GGML types read; Q8_0 is also kept as blocks
# llama.cpp's converter permutes these rows of each head (for its rope's pairing of a head's halves)
# in the architectures whose HF model is `LlamaForCausalLM`-like; `(q|k)` picks the head count
PERMUTED = {"llama": re.compile(r"blk\.\d+\.attn_(q|k)\.(weight|bias)")}
# Qwen3-Next's converter adds the 1 to every `*norm.weight` but the gated delta net's
# `linear_attn.norm.weight` (which the form reads without `+1`), and stores -exp(A_log)
FOLDS_PLUS_ONE = {"qwen3next"}
STORES_A = {"qwen3next": re.compile(r"blk\.\d+\.ssm_a")}
# Hugging Face names the converter renames before its TensorNameMap lookup
RENAMED = [(re.compile(r"\.e_score_correction_bias$"), ".e_score_correction.bias"),
           (re.compile(r"\.dt_bias$"), ".dt_proj.bias")]


class GgufCheckpoint(Tensors):
    """A GGUF file: the form's (Hugging Face) weight names mapped to llama.cpp's tensor names."""

    def __init__(self, path: str | Path):
        try:
            import gguf
        except ImportError:
            raise WeightError(f"{path}: reading GGUF checkpoints needs the gguf package (pip install gguf)") from None
        self.path = Path(path)
        self._gguf = gguf
        try:
            self._reader = gguf.GGUFReader(self.path)
        except OSError as exc:
            raise WeightError(f"cannot read checkpoint {self.path}: {exc.strerror}") from None
        except (ValueError, KeyError, IndexError) as exc:
            raise WeightError(f"{self.path} is not a GGUF file gguf can read: {exc}") from None
        self._tensors = {t.name: t for t in self._reader.tensors}
        self.architecture = str(self._field("general.architecture"))
        arch = next((a for a, name in gguf.MODEL_ARCH_NAMES.items() if name == self.architecture), None)
        if arch is None:
            raise WeightError(f"{self.path}: GGUF architecture {self.architecture!r} is not one the gguf "
                              f"package names")
        blocks = int(self._field(f"{self.architecture}.block_count"))
        self._map = gguf.get_tensor_name_map(arch, blocks)

    def _field(self, key: str):
        field = self._reader.fields.get(key)
        if field is None:
            raise WeightError(f"{self.path}: GGUF metadata has no {key!r}")
        return field.contents()

    @property
    def names(self) -> list[str]:
        return list(self._tensors)

    def gguf_name(self, name: str) -> str | None:
        """llama.cpp's name of the form's weight `name` (a `*` in it: the experts stacked)."""
        plus_one = PLUS_ONE.fullmatch(name)
        if plus_one:
            return self.gguf_name(plus_one.group(1)) if self.architecture in FOLDS_PLUS_ONE else None
        key = name.replace(".*.", ".")
        for pattern, replacement in RENAMED:
            key = pattern.sub(replacement, key)
        return self._map.get_name(key, try_suffixes=(".weight", ".bias"))

    def held(self, name: str) -> str | None:
        """The file's name of the form's weight `name`, where it holds that tensor."""
        if name in self._tensors:
            return name
        other = self.gguf_name(name)
        return other if other in self._tensors else None

    def describe(self, name: str) -> str:
        gguf_name = self.held(name) or self.gguf_name(name)
        if gguf_name is None:
            return f"tensor for {name!r} (llama.cpp's {self.architecture} names none)"
        if gguf_name not in self._tensors:
            return f"tensor {gguf_name!r} (llama.cpp's name of {name!r})"
        return f"tensor {gguf_name!r} ({self._tensors[gguf_name].tensor_type.name}, llama.cpp's name of {name!r})"

    def tensor(self, name: str, q8_0: bool = False) -> np.ndarray:
        """The tensor `name` as float32 values in numpy's order (Llama's q and k rows un-permuted).
        `q8_0` (a q8_0 buffer): a Q8_0 tensor's values are its blocks' q * d, kept exact, and its
        blocks must be exactly what `quantize_q8_0` makes of them, so the buffer holds the file's
        blocks (llama.cpp writes d = max|w| / 127: true of every block it makes)."""
        if name not in self._tensors:
            raise WeightError(f"checkpoint {self.path} has no tensor {name!r}")
        entry = self._tensors[name]
        kind = entry.tensor_type.name
        shape = [int(n) for n in reversed(entry.shape.tolist())]
        if kind not in VALUE_TYPES:
            raise WeightError(f"checkpoint {self.path}: GGUF tensor {name!r} is {kind} {shape}; the plan needs "
                              f"{'q8_0 blocks' if q8_0 else 'bf16 values'} ({', '.join(VALUE_TYPES)})")
        raw = np.asarray(entry.data)
        values = self._gguf.quants.dequantize(raw, entry.tensor_type).astype(np.float32).reshape(shape)
        if kind == "Q8_0" and q8_0 and not np.array_equal(quantize_q8_0(values), raw.reshape(*shape[:-1], -1)):
            raise WeightError(f"checkpoint {self.path}: GGUF tensor {name!r} is Q8_0 {shape} with blocks whose "
                              f"scale is not max|w| / 127; the plan's q8_0 needs llama.cpp's blocks")
        negated = STORES_A.get(self.architecture)
        if negated and negated.fullmatch(name):
            values = np.log(-values)
        permuted = PERMUTED.get(self.architecture)
        match = permuted.fullmatch(name) if permuted else None
        if match:
            heads = int(self._field(f"{self.architecture}.attention.head_count"))
            if match.group(1) == "k":
                heads = int(self._field(f"{self.architecture}.attention.head_count_kv"))
            values = unpermute(values, heads)
        return values


def unpermute(rows: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of llama.cpp's `LlamaModel.permute` of q or k rows: within each head, the file's
    row 2i is the Hugging Face row i and its row 2i+1 the row i + head/2 (rope's pairs made adjacent)."""
    if rows.shape[0] % (2 * heads):
        raise WeightError(f"{rows.shape[0]} q/k rows are not whole heads of {heads} with even head size")
    return rows.reshape(heads, rows.shape[0] // heads // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
