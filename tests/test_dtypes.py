"""lanec.runtime.dtypes, the one vocabulary of element types: bf16 rounding against an independent
exact reference on fresh random bit patterns (every exponent, subnormals, ties, infinities and
NaNs), both spellings of every name, and the CuTe DSL type of each."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest

from lanec.runtime import dtypes

BF16_LARGEST = Fraction(2**8 - 1, 2**7) * Fraction(2) ** 127


def reference_bf16(bits: int) -> int:
    """bfloat16 bits of the float32 with `bits`, by exact arithmetic: the nearest multiple of the
    value's bfloat16 spacing (8 significant bits; subnormal spacing 2^-133), ties to the even
    multiple; past the largest bfloat16 it is infinity; a NaN is the quiet NaN of its sign."""
    sign = (bits >> 31) << 15
    if (bits >> 23) & 0xFF == 0xFF:
        return sign | (0x7FC0 if bits & 0x7FFFFF else 0x7F80)
    (value,) = struct.unpack("<f", struct.pack("<I", bits))
    magnitude = abs(Fraction(value))
    if magnitude == 0:
        return sign
    exponent = max(math.frexp(value)[1] - 1, -126)  # floor(log2 |value|), the normal range's floor
    spacing = Fraction(2) ** (exponent - 7)
    rounded = round(magnitude / spacing) * spacing  # Fraction rounds half to even
    if rounded > BF16_LARGEST:
        return sign | 0x7F80
    (encoded,) = struct.unpack("<I", struct.pack("<f", float(rounded)))
    assert encoded & 0xFFFF == 0, hex(bits)
    return sign | (encoded >> 16)


def fresh_bits() -> tuple[int, np.ndarray]:
    seed = int(np.random.SeedSequence().entropy % 2**63)
    rng = np.random.default_rng(seed)
    anything = rng.integers(0, 2**32, 20000, dtype=np.uint64)
    ties = (rng.integers(0, 2**16, 4000, dtype=np.uint64) << 16) | 0x8000
    low = rng.choice(np.array([0x7FFF, 0x8001], np.uint64), 4000)  # one below and one above a tie
    near_ties = (rng.integers(0, 2**16, 4000, dtype=np.uint64) << 16) | low
    small = rng.integers(0, 2**24, 2000, dtype=np.uint64)  # subnormals and the smallest normals
    special = np.array([0, 0x80000000, 1, 0x80008000, 0x00018000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                        0x7F7F8000, 0x7F7F7FFF, 0x7F7E8000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,
                        0x7FFFFFFF, 0xFFFFFFFF, 0x3F808000, 0x3F818000], dtype=np.uint64)
    bits = np.concatenate([anything, ties, near_ties, small, special]).astype(np.uint32)
    return seed, bits


def test_bf16_rounding_matches_an_exact_reference():
    seed, bits = fresh_bits()
    values = bits.view(np.float32)
    want = np.array([reference_bf16(int(b)) for b in bits], dtype=np.uint16)
    got = dtypes.to_bf16(values)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, (f"seed {seed}: {wrong.size} of {bits.size} differ; first {bits[wrong[0]]:#010x} -> "
                             f"{got[wrong[0]]:#06x}, want {want[wrong[0]]:#06x}")
    # the float32 view of the same rounding, the decode of it, and the store of the interpreter agree bit for bit
    rounded = dtypes.round_bf16(values).view(np.uint32)
    np.testing.assert_array_equal(rounded, want.astype(np.uint32) << 16, err_msg=f"seed {seed}")
    np.testing.assert_array_equal(dtypes.from_bf16(got).view(np.uint32), rounded, err_msg=f"seed {seed}")
    np.testing.assert_array_equal(dtypes.representable(values, "bf16").view(np.uint32), rounded)
    np.testing.assert_array_equal(dtypes.to_bf16(dtypes.from_bf16(got)), got)  # bf16 values stay as they are


def test_bf16_rounding_keeps_the_shape_and_quiets_nan():
    assert dtypes.round_bf16(np.float32(1 + 2**-8)).shape == ()
    grid = np.full((2, 3), np.nan, np.float32)[:, ::2]  # not contiguous
    assert dtypes.to_bf16(grid).tolist() == [[0x7FC0, 0x7FC0]] * 2
    assert dtypes.to_bf16(-np.float32(np.nan)) == 0xFFC0
    signalling = np.array([0x7F800001], np.uint32).view(np.float32)
    assert dtypes.to_bf16(signalling)[0] == 0x7FC0


def test_every_name_has_two_spellings_and_one_storage():
    for name, dtype in dtypes.DTYPES.items():
        assert dtypes.canonical(name) == dtypes.canonical(dtype.mlir) == name
        assert dtypes.mlir_name(name) == dtypes.mlir_name(dtype.mlir) == dtype.mlir
        assert dtypes.storage(dtype.mlir) == dtype.storage
    with pytest.raises(ValueError, match="unknown dtype 'i64'"):
        dtypes.canonical("i64")


def test_the_cute_dsl_type_of_every_name():
    cutlass = pytest.importorskip("cutlass")
    assert dtypes.cute_type("bf16") is cutlass.BFloat16
    for name in dtypes.DTYPES:
        element = dtypes.cute_type(name)
        assert element is getattr(cutlass, dtypes.DTYPES[name].cute)
        assert element.width == 8 * dtypes.storage(name).itemsize
