"""lanec's element types, once: each type's names, how the runtime stores it, its CuTe DSL type,
bf16 rounding, and the q8_0 block.

A type has two spellings: its numpy name ('bfloat16', as plans and `TensorParam`s write it) and
its MLIR name ('bf16', as form and lane types print it and the interpreter's program records it);
`canonical` takes either. bfloat16 has no numpy dtype, so its bits live in uint16 (round to
nearest even on the way in, exact widening on the way out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str  # numpy spelling: plans, kernel parameters
    mlir: str  # MLIR spelling: form and lane element types, the interpreter's program
    storage: np.dtype  # what holds an element on the host
    cute: str  # the CuTe DSL type, as `cutlass.<cute>`


DTYPES = {d.name: d for d in (
    DType("bfloat16", "bf16", np.dtype(np.uint16), "BFloat16"),
    DType("float32", "f32", np.dtype(np.float32), "Float32"),
    DType("float16", "f16", np.dtype(np.float16), "Float16"),
    DType("int32", "i32", np.dtype(np.int32), "Int32"),
    DType("int8", "i8", np.dtype(np.int8), "Int8"),
    DType("uint8", "ui8", np.dtype(np.uint8), "Uint8"),
)}
STORAGE = {name: d.storage for name, d in DTYPES.items()}
MLIR_NAMES = {d.mlir: name for name, d in DTYPES.items()}
FLOATS = frozenset({"bfloat16", "float32", "float16"})

# q8_0 (GGML's block_q8_0): every 32 values of a row share one fp16 scale, stored before their 32
# int8 words; the form's quantized activations scale the same 32-value blocks
Q8_0_BLOCK = 32


def canonical(name: str) -> str:
    """The numpy spelling of a dtype name (either spelling); ValueError names the types the
    runtime stores."""
    name = MLIR_NAMES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}: the runtime stores {', '.join(DTYPES)}")
    return name


def mlir_name(name: str) -> str:
    """The MLIR spelling of a dtype name (either spelling)."""
    return DTYPES[canonical(name)].mlir


def storage(name: str) -> np.dtype:
    return STORAGE[canonical(name)]


def cute_type(name: str):
    """The CuTe DSL type of a dtype name (imports cutlass: codegen only)."""
    import cutlass

    return getattr(cutlass, DTYPES[canonical(name)].cute)


def _bf16_high_bits(a) -> np.ndarray:
    """uint32 bits of `a` as float32, rounded to bfloat16 (to nearest even at bit 16, the low half
    zero), in `a`'s shape. A NaN becomes the quiet NaN of its sign (its payload is not kept);
    finite values past the largest bfloat16 round to infinity, infinities stay."""
    values = np.asarray(a, dtype=np.float32, order="C")
    bits = values.reshape(-1).view(np.uint32)
    rounded = bits >> 16
    rounded &= 1
    rounded += bits
    rounded += 0x7FFF  # a NaN's bits may carry past bit 31 here: NaNs are set below
    rounded &= 0xFFFF0000
    nan = np.isnan(values.reshape(-1))
    if nan.any():
        rounded[nan] = (bits[nan] & 0x80000000) | 0x7FC00000
    return rounded.reshape(values.shape)


def to_bf16(a) -> np.ndarray:
    """bfloat16 bits (uint16) of `a`, rounded to nearest even; NaN stays a (quiet) NaN."""
    return (_bf16_high_bits(a) >> 16).astype(np.uint16)


def from_bf16(bits) -> np.ndarray:
    """float32 values of bfloat16 bits (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(a) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16, ties to even, as a kernel stores them (a
    new array; NaN stays a quiet NaN, infinities stay)."""
    return _bf16_high_bits(a).view(np.float32)


def representable(values, name: str) -> np.ndarray:
    """float32 values rounded to what dtype `name` stores (integer types: as they are)."""
    name = canonical(name)
    if name == "bfloat16":
        return round_bf16(values)
    if name == "float16":
        return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)
    if name in FLOATS:
        return np.asarray(values, dtype=np.float32)
    return np.asarray(values)


def encode(values, name: str) -> np.ndarray:
    """Values as stored on the device under dtype `name`."""
    name = canonical(name)
    if name == "bfloat16":
        return to_bf16(values)
    return np.asarray(values).astype(STORAGE[name])


def decode(stored: np.ndarray, name: str) -> np.ndarray:
    """Stored values as numbers: floats as float32, integers as they are."""
    name = canonical(name)
    if name == "bfloat16":
        return from_bf16(stored)
    if name in FLOATS:
        return stored.astype(np.float32)
    return stored
