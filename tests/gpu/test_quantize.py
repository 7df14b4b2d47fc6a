"""The quantize kernel on the GPU against the interpreter's `ops.quantize`, every case of
tests/gpu/cases/quantize.py (built by tests/gpu/build.py): fresh random rows each run (a block of
zeros and a block of exact ties among them), launched twice over differently poisoned outputs.
The int8 words and the fp32 scales must be numpy's bit for bit (every step is one fp32 operation
rounded to nearest), so the values they stand for are exactly ops.quantize's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from linear_inputs import launch_case
from loader import load
from quantized_inputs import activation, quantized_rows, quantized_values

from lanec.codegen.facts import quantized_pitch
from lanec.interp import ops
from lanec.runtime.dtypes import to_bf16

HERE = Path(__file__).resolve().parent
CASES = load("lanec_gpu_cases_quantize", HERE / "cases" / "quantize.py").CASES


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantize_matches_interpreter(case, stream):
    spec = CASES[case]
    rows, width, words = spec["rows"], spec["width"], spec["words"]
    pitch = spec.get("x_pitch") or width
    rng = np.random.default_rng()
    wide = activation(rng, rows, pitch)  # the device holds the whole pitch; the kernel reads the first width
    x = wide[:, :width]
    want = quantized_rows(x, words)
    used = words * width + 4 * (width // 32)  # the row's padding after the scales is never written
    for poison in (0xFF, 0x00):
        q = np.full((rows, quantized_pitch(width, words)), poison, np.uint8).view(np.int8)
        got = launch_case("quantize", case, {"x": to_bf16(wide), "q": q}, stream)["q"]
        wrong = np.argwhere(got[:, :used] != want[:, :used])
        assert wrong.size == 0, (f"quantize/{case} (poison {poison:#x}): {len(wrong)} of {rows * used} bytes differ; "
                                 f"first at {wrong[0].tolist()}: got {got[tuple(wrong[0])]}, want {want[tuple(wrong[0])]}")
    assert np.array_equal(quantized_values(got, width, words), ops.quantize(x, words))
