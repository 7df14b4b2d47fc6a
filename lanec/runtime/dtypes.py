"""Element types as the runtime stores them: bfloat16 has no numpy dtype, so its bits live in
uint16 (round to nearest even on the way in, exact widening on the way out)."""

from __future__ import annotations

import numpy as np

# dtype name (numpy spelling, as TensorParam and the plan write it) -> numpy storage dtype
STORAGE = {
    "bfloat16": np.dtype(np.uint16),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "int32": np.dtype(np.int32),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
}

# the interpreter's short spellings of the same types
ALIASES = {"bf16": "bfloat16", "f32": "float32", "f16": "float16", "i32": "int32", "i8": "int8", "u8": "uint8"}

FLOATS = frozenset({"bfloat16", "float32", "float16"})


def canonical(name: str) -> str:
    """The numpy spelling of a dtype name; ValueError names the types the runtime stores."""
    name = ALIASES.get(name, name)
    if name not in STORAGE:
        raise ValueError(f"unknown dtype {name!r}: the runtime stores {', '.join(STORAGE)}")
    return name


def storage(name: str) -> np.dtype:
    return STORAGE[canonical(name)]


def _rounded_bits(values: np.ndarray) -> np.ndarray:
    """uint32 bits of float32 `values` rounded to nearest even at bit 16 (low half zeroed); a NaN's
    bits are undefined here, the callers restore them. Finite values cannot carry past bit 31."""
    bits = values.view(np.uint32)
    rounded = bits >> 16
    rounded &= 1
    rounded += bits
    rounded += 0x7FFF
    rounded &= 0xFFFF0000
    return rounded


def to_bf16(a) -> np.ndarray:
    """bfloat16 bits (uint16) of `a`, rounded to nearest even; NaN stays a (quiet) NaN."""
    values = np.ascontiguousarray(a, dtype=np.float32)
    rounded = _rounded_bits(values)
    rounded >>= 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def from_bf16(bits) -> np.ndarray:
    """float32 values of bfloat16 bits (exact)."""
    return (np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(a) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (a new array; NaN stays a quiet NaN)."""
    values = np.ascontiguousarray(a, dtype=np.float32)
    out = _rounded_bits(values).view(np.float32)
    nan = np.isnan(values)
    if nan.any():
        out[nan] = np.nan
    return out


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
