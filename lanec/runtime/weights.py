"""Weights: the source tensors a plan's weight buffers are made from (a safetensors checkpoint,
read with numpy alone, or a seeded initialiser), and the transforms that make the buffers, applied
once at load. The fp32 source values, by the form's weight names, are also what the interpreter
gets for `--check`, so both sides compute with the same numbers."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import numpy as np

from lanec.runtime import dtypes, seeded
from lanec.runtime.dtypes import Q8_0_BLOCK
from lanec.runtime.plan import Plan, Source, Transform, WeightBinding

Q8_0_BLOCK_BYTES = Q8_0_BLOCK + 2  # a block as llama.cpp stores it: its fp16 scale, then its int8 values


class WeightError(ValueError):
    """A checkpoint that cannot give the plan its weights (one line)."""


# safetensors dtype -> what it is read as: a dtype of lanec.runtime.dtypes, else (a type the
# runtime reads but never stores) a numpy dtype; safetensors data is little-endian
SAFETENSORS_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "I32": "int32", "I8": "int8",
                      "U8": "uint8", "F64": "<f8", "I16": "<i2", "I64": "<i8", "BOOL": "?"}


class Tensors:
    """What a checkpoint file gives the plan: the form's weight names resolved to its own tensors
    (renamings, row ranges, stacked experts, `name+1`). A file format says which tensors it holds
    (`names`, `held`) and reads one (`tensor`): safetensors (`Checkpoint`), GGUF (`GgufCheckpoint`)."""

    path: Path

    @property
    def names(self) -> list[str]:
        raise NotImplementedError

    def held(self, name: str) -> str | None:
        raise NotImplementedError

    def tensor(self, name: str, q8_0: bool = False) -> np.ndarray:
        """The stored tensor `name` as values; `q8_0`: the plan keeps it as q8_0 blocks, so a tensor
        stored as q8_0 blocks gives the values whose quantization is exactly those blocks."""
        raise NotImplementedError

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def packed_experts(self, name: str) -> tuple[str, int | None] | None:
        """transformers 5's stacked form of the per-expert `...experts.*.wN.weight`: the tensor holding
        every expert (`experts.gate_up_proj` [E, 2I, H] for w1 and w3, `experts.down_proj` [E, H, I] for
        w2), and which half of its second axis (0: w1, 1: w3; None: all of it); None where it has none."""
        packed = PER_EXPERT.fullmatch(name)
        if not packed:
            return None
        prefix, which = packed.group(1), packed.group(2)
        tensor, half = PACKED_EXPERTS[which]
        held = self.held(f"{prefix}.experts.{tensor}")
        return (held, half) if held else None

    def holds(self, name: str) -> bool:
        """Whether `resolve` can make `name`: a tensor of that name (or of a recorded renaming of it), a
        row range of one (`name[a:b]`), or experts stacked (`...experts.*.w1.weight`: experts 0, 1, ...
        in turn, or transformers 5's packed `experts.gate_up_proj` / `experts.down_proj`)."""
        if self.held(name):
            return True
        plus_one = PLUS_ONE.fullmatch(name)
        if plus_one:
            return self.holds(plus_one.group(1))
        sliced = ROW_RANGE.fullmatch(name)
        if sliced:
            return self.held(sliced.group(1)) is not None
        return "*" in name and (self.held(name.replace("*", "0", 1)) is not None
                                or self.packed_experts(name) is not None)

    def resolve(self, name: str, shape: tuple[int, ...], q8_0: bool = False) -> np.ndarray:
        """The form's weight `name` of `shape` from the checkpoint's tensors (see `holds`); a stored
        shape that differs only by unit axes (a conv's [C, 1, W], A_log's [1, 1, H, 1]) is read as
        the form's; `name+1` is `name`'s values plus one (PLUS_ONE); `q8_0`: the plan stores the weight
        as q8_0 blocks (see `tensor`)."""
        plus_one = PLUS_ONE.fullmatch(name)
        if plus_one and not self.held(name):
            return (self.resolve(plus_one.group(1), shape, q8_0).astype(np.float32) + np.float32(1)).astype(np.float32)
        sliced = ROW_RANGE.fullmatch(name)
        if self.held(name):
            values = self.tensor(self.held(name), q8_0)
        elif sliced:
            base, first, last = sliced.group(1), int(sliced.group(2)), int(sliced.group(3))
            values = self.tensor(self.held(base) or base, q8_0)
            if not 0 <= first < last <= values.shape[0]:
                raise WeightError(f"checkpoint tensor {base!r} has {values.shape[0]} rows; {name!r} asks for "
                                  f"rows [{first}, {last})")
            values = values[first:last]
        else:
            if not shape:
                raise WeightError(f"{name!r} names stacked experts but the form's weight has no expert axis")
            names = [name.replace("*", str(e), 1) for e in range(shape[0])]
            held = [self.held(n) for n in names]
            packed = self.packed_experts(name) if None in held else None
            if packed:
                values = self.tensor(packed[0], q8_0)
                if packed[1] is not None:
                    if values.ndim != 3 or values.shape[1] % 2:
                        raise WeightError(f"checkpoint tensor {packed[0]!r} is {list(values.shape)}; {name!r} "
                                          f"needs [experts, 2 x width, hidden] (gate rows, then up rows)")
                    width = values.shape[1] // 2
                    values = values[:, packed[1] * width:(packed[1] + 1) * width]
            elif None in held:
                missing = names[held.index(None)]
                raise WeightError(f"checkpoint {self.path} has no tensor {missing!r} (of the stacked {name!r})")
            else:
                values = np.stack([self.tensor(n, q8_0) for n in held])
        if tuple(values.shape) != tuple(shape):
            squeezed = tuple(n for n in values.shape if n != 1)
            if squeezed != tuple(n for n in shape if n != 1):
                raise WeightError(f"checkpoint {self.describe(name)} is {list(values.shape)}; the plan expects "
                                  f"{list(shape)}")
            values = values.reshape(shape)
        return values

    def describe(self, name: str) -> str:
        """How a one-line error names the tensor the form's weight `name` is read from."""
        return f"tensor {name!r}"


class Checkpoint(Tensors):
    """A safetensors file: an 8-byte little-endian header size, a JSON header (name -> dtype,
    shape, data_offsets), then the raw data. Tensors are read lazily from a memory map."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
            with self.path.open("rb") as file:
                prefix = file.read(8)
                if len(prefix) < 8:
                    raise WeightError(f"{self.path} is not a safetensors file: shorter than its 8-byte header size")
                (header_size,) = struct.unpack("<Q", prefix)
                if header_size > size - 8:
                    raise WeightError(f"{self.path} is not a safetensors file (or is truncated): its header "
                                      f"claims {header_size} bytes of a {size}-byte file")
                header = json.loads(file.read(header_size))
        except OSError as exc:
            raise WeightError(f"cannot read checkpoint {self.path}: {exc.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise WeightError(f"{self.path} is not a safetensors file: its header is not JSON") from None
        if not isinstance(header, dict):
            raise WeightError(f"{self.path} is not a safetensors file: its header is not a JSON object")
        header.pop("__metadata__", None)
        self._data_start = 8 + header_size
        self._data_size = size - self._data_start
        self._header = header
        self._check_extent()

    def _check_extent(self) -> None:
        """A file cut short (a shard whose download or copy stopped): the header places a tensor's
        bytes past the end of the data, named here at open, before any tensor is read."""
        ends = []
        for name, entry in self._header.items():
            try:
                ends.append((int(entry["data_offsets"][1]), name))
            except (KeyError, TypeError, ValueError, IndexError):
                raise WeightError(f"checkpoint {self.path}: tensor {name!r} has a malformed header entry") from None
        end, name = max(ends, default=(0, ""))
        if end > self._data_size:
            raise WeightError(f"checkpoint {self.path} is truncated: its header places tensor {name!r} up to byte "
                              f"{end} of the data, which holds {self._data_size} ({end - self._data_size} bytes "
                              "missing)")

    @property
    def names(self) -> list[str]:
        return list(self._header)

    def held(self, name: str) -> str | None:
        """The checkpoint's own name of the tensor `name` (no slice, no `*`): the name itself, else the
        first of its RENAMINGS the checkpoint holds; None where it holds none."""
        return held_in(name, self._header)

    def tensor(self, name: str, q8_0: bool = False) -> np.ndarray:
        """The stored tensor: bf16 as float32 values, other types as numpy reads them (`q8_0`, for a
        buffer of q8_0 blocks, changes nothing here: the values are quantized at load)."""
        if name not in self._header:
            raise WeightError(f"checkpoint {self.path} has no tensor {name!r}")
        entry = self._header[name]
        try:
            dtype_name, shape, (begin, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise WeightError(f"checkpoint {self.path}: tensor {name!r} has a malformed header entry") from None
        if dtype_name not in SAFETENSORS_DTYPES:
            raise WeightError(f"checkpoint {self.path}: tensor {name!r} is {dtype_name}, which the runtime does "
                              f"not read ({', '.join(SAFETENSORS_DTYPES)})")
        ours = SAFETENSORS_DTYPES[dtype_name]
        storage = (dtypes.storage(ours) if ours in dtypes.DTYPES else np.dtype(ours)).newbyteorder("<")
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * storage.itemsize or not 0 <= begin <= end <= self._data_size:
            raise WeightError(f"checkpoint {self.path}: tensor {name!r} ({dtype_name} {list(shape)}) has "
                              f"{end - begin} bytes at [{begin}, {end}) of {self._data_size}")
        raw = np.memmap(self.path, dtype=storage, mode="r", offset=self._data_start + begin, shape=(count,)) \
            if count else np.empty(0, storage)
        values = dtypes.decode(np.asarray(raw), ours) if ours in dtypes.FLOATS else np.array(raw)
        return values.reshape(shape)


ROW_RANGE = re.compile(r"(.+)\[(\d+):(\d+)\]")  # a form weight that is rows [a, b) of a checkpoint tensor

# Recorded renamings, tried in turn where a checkpoint lacks a form weight's own name (the published
# name). transformers 5 loads Kimi Linear's `.block_sparse_moe.` as `.mlp.` and reverts the renaming on
# save to every MLP, so a saved model holds the dense first layer's `mlp.gate_proj` as
# `block_sparse_moe.gate_proj`; the other way, a checkpoint saved without the reversion holds the
# mixture's tensors under `.mlp.`.
RENAMINGS = [(re.compile(r"\.mlp\."), ".block_sparse_moe."), (re.compile(r"\.block_sparse_moe\."), ".mlp.")]


def held_in(name: str, stored) -> str | None:
    """`name` where `stored` (a file's tensor names) holds it, else the first of its RENAMINGS it
    holds; None where it holds neither."""
    if name in stored:
        return name
    for pattern, replacement in RENAMINGS:
        other = pattern.sub(replacement, name)
        if other != name and other in stored:
            return other
    return None


# transformers 5's packed experts (`MergeModulelist` then `Concatenate(dim=1)` of w1 and w3 in its
# conversion mapping): per-expert `w1` (gate) / `w3` (up) are the first / second half of the rows of
# `experts.gate_up_proj` [E, 2I, H]; `w2` (down) is `experts.down_proj` [E, H, I]
# (the same for the per-expert names `gate_proj` / `up_proj` / `down_proj`, as Qwen3-Next saves them)
PER_EXPERT = re.compile(r"(.+)\.experts\.\*\.(w[123]|gate_proj|up_proj|down_proj)\.weight")
PACKED_EXPERTS = {"w1": ("gate_up_proj", 0), "w3": ("gate_up_proj", 1), "w2": ("down_proj", None),
                  "gate_proj": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", 1), "down_proj": ("down_proj", None)}
# a form weight `name+1`: the checkpoint tensor `name` plus one (a zero-centred norm's weight, stored as
# w and applied as 1 + w: Qwen3-Next's RMS norms), so the form's norm keeps its meaning, x * rms * w
PLUS_ONE = re.compile(r"(.+)\+1")


def random_source(source: Source, seed: int, threads: int | None = None) -> np.ndarray:
    """The source's seeded values (`lanec.runtime.seeded`): each a function of (seed, the source's
    name, its flat index), uniform of standard deviation `scale` about `center`, rounded to the
    source's dtype; so the GPU's generator, any thread count or a lazy view of some rows give the
    same numbers."""
    count = math.prod(source.shape)
    return seeded.values(source.name, seed, 0, count, source.scale, source.center, source.dtype,
                         threads).reshape(source.shape)


INDEX = "model.safetensors.index.json"  # a sharded checkpoint's map of tensor name -> shard file


class ShardedCheckpoint(Tensors):
    """A checkpoint in several safetensors files, as Hugging Face saves a large model: an index
    (`model.safetensors.index.json`: its `weight_map` names each tensor's shard), or a folder of
    `*.safetensors` files without one (each shard's header says what it holds). Shards are opened
    (their headers read) once; a tensor is read from its shard's memory map when asked for, so the
    model is never held whole in host memory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        folder = self.path if self.path.is_dir() else self.path.parent
        index = self.path / INDEX if self.path.is_dir() else self.path
        if index.is_file():
            try:
                mapping = json.loads(index.read_text())["weight_map"]
                if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
                    raise TypeError
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
                raise WeightError(f"{index} is not a safetensors index: no weight_map of tensor name -> "
                                  "shard file") from None
            files = sorted(set(mapping.values()))
        else:
            files = sorted(p.name for p in folder.glob("*.safetensors"))
            if not files:
                raise WeightError(f"{self.path}: no {INDEX} and no *.safetensors files")
            mapping = None
        self._shards: dict[str, Checkpoint] = {}
        for name in files:
            if not (folder / name).is_file():
                raise WeightError(f"{index}: shard {name} is missing from {folder}")
            self._shards[name] = Checkpoint(folder / name)
        self._where = {}
        for file, shard in self._shards.items():
            for tensor in shard.names:
                if mapping is not None and mapping.get(tensor) != file:
                    continue  # the index says another shard holds it (or nothing does)
                self._where.setdefault(tensor, file)
        if mapping is not None:
            absent = [t for t, f in mapping.items() if t not in self._where]
            if absent:
                raise WeightError(f"{index}: shard {mapping[absent[0]]} does not hold {absent[0]!r}, which the "
                                  f"index places there" + (f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""))

    @property
    def names(self) -> list[str]:
        return list(self._where)

    def held(self, name: str) -> str | None:
        return held_in(name, self._where)

    def tensor(self, name: str, q8_0: bool = False) -> np.ndarray:
        if name not in self._where:
            raise WeightError(f"checkpoint {self.path} has no tensor {name!r}")
        return self._shards[self._where[name]].tensor(name, q8_0)


def open_checkpoint(path: str | Path) -> Tensors:
    """The checkpoint at `path`: a GGUF file (`.gguf`, read with the `gguf` package, imported only
    here), a sharded safetensors checkpoint (a folder, or its `model.safetensors.index.json`), or
    one safetensors file."""
    path = Path(path)
    if path.suffix.lower() == ".gguf":
        from lanec.runtime.gguf_checkpoint import GgufCheckpoint

        return GgufCheckpoint(path)
    if path.is_dir() or path.suffix.lower() == ".json":
        return ShardedCheckpoint(path)
    return Checkpoint(path)


def sources(plan: Plan, seed: int, checkpoint: Tensors | None = None, lazy: bool = False) -> dict[str, np.ndarray]:
    """Every weight source of the plan by name: from the checkpoint where it holds the name,
    else seeded random; shapes are checked against the plan. A source of a q8_0 buffer keeps the
    checkpoint's values (a Q8_0 file's q * d are not bf16 values: rounding them would change the
    blocks); others are rounded to the source's dtype. `lazy`: seeded sources as views that make
    only the rows read (`lanec.interp.lazy.LazyWeight`: the interpreter's real-size check; numpy
    makes a view whole where it needs all of it)."""
    if lazy:
        from lanec.interp.lazy import LazyWeight
    values: dict[str, np.ndarray] = {}
    for binding in plan.weights:
        q8_0 = any(t.kind in ("quantize_q8_0", "q8_0_values") for t in binding.transforms)
        for source in binding.sources:
            if source.name in values:
                continue
            if checkpoint is not None:
                if not checkpoint.holds(source.name):
                    raise WeightError(f"checkpoint {checkpoint.path} has no {checkpoint.describe(source.name)} "
                                      f"(weight {binding.buffer!r} needs it)")
                tensor = checkpoint.resolve(source.name, source.shape, q8_0)
                if tensor.dtype.kind != "f" and dtypes.canonical(source.dtype) in dtypes.FLOATS:
                    raise WeightError(f"checkpoint {checkpoint.describe(source.name)} holds {tensor.dtype} values; "
                                      f"weight {binding.buffer!r} needs {source.dtype} (floating point)")
                tensor = tensor.astype(np.float32)
                values[source.name] = tensor if q8_0 else dtypes.representable(tensor, source.dtype)
            elif lazy:
                values[source.name] = LazyWeight.seeded(source.name, source.shape, seed, source.scale, source.center,
                                                        source.dtype)
            else:
                values[source.name] = random_source(source, seed)
    return values


def quantize_q8_0(values: np.ndarray) -> np.ndarray:
    """GGML's block_q8_0 along the last axis: per 32 values an fp16 scale d = max|w| / 127 and 32
    int8 words rint(w / d); uint8 [..., K / 32 * 34]."""
    if values.shape[-1] % Q8_0_BLOCK:
        raise WeightError(f"q8_0 needs rows of whole {Q8_0_BLOCK}-value blocks; the rows are {values.shape[-1]} wide")
    blocks = values.astype(np.float32).reshape(*values.shape[:-1], -1, Q8_0_BLOCK)
    scale = (np.abs(blocks).max(axis=-1, keepdims=True) / 127).astype(np.float16)
    divisor = scale.astype(np.float32)
    words = np.clip(np.rint(np.divide(blocks, divisor, out=np.zeros_like(blocks), where=divisor != 0)), -127, 127)
    packed = np.concatenate([scale.view(np.uint8), words.astype(np.int8).view(np.uint8)], axis=-1)
    return packed.reshape(*values.shape[:-1], -1)


def q8_0_values(values: np.ndarray) -> np.ndarray:
    """The fp32 values `quantize_q8_0`'s blocks stand for (q * d: the interpreter's `ops.q8_0`),
    q8_0 rows widened for a kernel that reads floating-point rows."""
    from lanec.interp import ops

    return ops.q8_0(values)


def q8_0_planes(blocks: np.ndarray) -> np.ndarray:
    """`quantize_q8_0`'s blocks (uint8 [..., K / 32 * 34]) as planes a row: its K int8 values back
    to back, then its K / 32 fp16 scales (the same bytes, reordered; q8_gemm_tc's weight rows)."""
    if blocks.dtype != np.uint8 or blocks.shape[-1] % Q8_0_BLOCK_BYTES:
        raise WeightError(f"q8_0_planes reorders q8_0 blocks (uint8 rows of whole {Q8_0_BLOCK_BYTES}-byte blocks); "
                          f"got {blocks.dtype} rows of {blocks.shape[-1]}")
    split = blocks.reshape(*blocks.shape[:-1], -1, Q8_0_BLOCK_BYTES)
    scales, values = split[..., :2], split[..., 2:]
    return np.concatenate([values.reshape(*blocks.shape[:-1], -1), scales.reshape(*blocks.shape[:-1], -1)], axis=-1)


def apply(transform: Transform, arrays: list[np.ndarray]) -> np.ndarray:
    """One transform step."""
    params = transform.params
    if transform.kind == "none":
        return arrays[0]
    if transform.kind == "concatenate":  # `align`: each array's place is whole multiples of it, zeros after
        axis, align = params.get("axis", 0), params.get("align", 1)
        padded = [np.pad(a, [(0, -a.shape[axis] % align if d == axis % a.ndim else 0) for d in range(a.ndim)])
                  for a in arrays]
        return np.concatenate(padded, axis=axis)
    if transform.kind == "stack":
        return np.stack(arrays, axis=params.get("axis", 0))
    if transform.kind == "transpose":
        return np.ascontiguousarray(np.transpose(arrays[0], params.get("axes")))
    if transform.kind == "reshape":
        return arrays[0].reshape(tuple(int(n) for n in params["shape"]))
    if transform.kind == "slice":
        axis = int(params["axis"])
        index = [slice(None)] * arrays[0].ndim
        index[axis] = slice(int(params["start"]), int(params["stop"]))
        return np.ascontiguousarray(arrays[0][tuple(index)])
    if transform.kind == "interleave":
        rows = int(params["rows"])
        if any(a.shape != arrays[0].shape for a in arrays) or arrays[0].shape[0] % rows:
            raise WeightError(f"interleave in tiles of {rows} rows needs equal shapes with whole tiles; "
                              f"got {[list(a.shape) for a in arrays]}")
        tiles = [a.reshape(-1, rows, *a.shape[1:]) for a in arrays]
        return np.stack(tiles, axis=1).reshape(-1, *arrays[0].shape[1:])
    if transform.kind == "quantize_q8_0":
        return quantize_q8_0(arrays[0])
    if transform.kind == "q8_0_values":
        return q8_0_values(arrays[0])
    if transform.kind == "q8_0_planes":
        return q8_0_planes(arrays[0])
    raise WeightError(f"unknown weight transform {transform.kind!r}")


def make(binding: WeightBinding, values: dict[str, np.ndarray], plan: Plan) -> np.ndarray:
    """The weight buffer's stored contents, checked against its declared shape."""
    arrays = [np.asarray(values[source.name]) for source in binding.sources]  # a lazy source made whole
    for transform in binding.transforms:
        arrays = [apply(transform, arrays)]
    buffer = plan.buffer(binding.buffer)
    result = arrays[0]
    if tuple(result.shape) != buffer.shape:
        raise WeightError(f"weight {buffer.name!r}: its sources and transforms give {list(result.shape)}; "
                          f"the buffer is {list(buffer.shape)}")
    return dtypes.encode(result, buffer.dtype)
