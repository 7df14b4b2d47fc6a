"""What the GPU tests of the quantized form share (test_quantize.py, test_q8_gemv.py): the bytes a
quantized activation row holds on the device (lanec/codegen/kernels/quantize.py's layout), made in
numpy by the interpreter's own steps (`ops.quantize`), and q8_0 weight rows as the plan stores
them (llama.cpp's blocks) with the values they stand for."""

from __future__ import annotations

import numpy as np

from lanec.codegen.facts import quantized_pitch
from lanec.interp import ops
from lanec.runtime.dtypes import Q8_0_BLOCK
from lanec.runtime.weights import quantize_q8_0

F32 = np.float32


def quantized_rows(x: np.ndarray, words: int) -> np.ndarray:
    """int8 [rows, quantized_pitch] of fp32 rows `x`: the high words, (two words) the residual
    words, the fp32 block scales, zero padding; each step as ops.quantize computes it."""
    rows, width = x.shape
    xb = x.astype(F32).reshape(rows, width // Q8_0_BLOCK, Q8_0_BLOCK)
    s = np.max(np.abs(xb), axis=-1, keepdims=True) / F32(127)
    safe = np.where(s > 0, s, F32(1))
    q1 = np.rint(xb / safe)
    planes = [q1]
    if words == 2:
        planes.append(np.clip(np.rint((xb - q1 * s) / (safe / F32(254))), -127, 127))
    out = np.zeros((rows, quantized_pitch(width, words)), np.int8)
    for i, plane in enumerate(planes):
        out[:, i * width:(i + 1) * width] = plane.reshape(rows, width).astype(np.int8)
    scales = s.reshape(rows, -1).astype(F32)
    out[:, words * width:words * width + scales.shape[1] * 4] = scales.view(np.int8)
    return out


def quantized_values(stored: np.ndarray, width: int, words: int) -> np.ndarray:
    """The fp32 values the bytes of `quantized_rows` stand for (ops.quantize's, exactly)."""
    rows = stored.shape[0]
    blocks = width // Q8_0_BLOCK
    s = np.ascontiguousarray(stored[:, words * width:words * width + 4 * blocks]).view(F32).reshape(rows, blocks, 1)
    value = stored[:, :width].astype(F32).reshape(rows, blocks, Q8_0_BLOCK) * s
    if words == 2:
        value = value + stored[:, width:2 * width].astype(F32).reshape(rows, blocks, Q8_0_BLOCK) * (s / F32(254))
    return value.reshape(rows, width).astype(F32)


def activation(rng, rows: int, width: int) -> np.ndarray:
    """Random activation rows as bf16 values (fp32), a block of zeros and a block of exact ties
    (x / s = k + 1/2) in the first row, where the row has room."""
    from lanec.runtime.dtypes import round_bf16

    x = round_bf16(rng.standard_normal((rows, width), dtype=F32) * F32(3))
    if width >= 2 * Q8_0_BLOCK:
        x[0, :Q8_0_BLOCK] = 0  # an all-zero block stays zero
        ties = (np.arange(Q8_0_BLOCK) % 5 - 2).astype(F32) + F32(0.5)  # ..., -1.5, -0.5, 0.5, 1.5, 2.5
        ties[0] = 127  # s = 1: each other value is a tie rint breaks to even
        x[0, Q8_0_BLOCK:2 * Q8_0_BLOCK] = ties
    return x


def q8_0_rows(rng, rows: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(the values, the uint8 blocks as the plan stores them) of random q8_0 weight rows."""
    w = rng.standard_normal((rows, width), dtype=F32) / F32(np.sqrt(width))
    stored = quantize_q8_0(w)
    values = ops.q8_0(w)
    return values, stored
