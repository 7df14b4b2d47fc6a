"""q8_gemv, q8_gated_gemv and q8_gemm_tc on the GPU against the interpreter (ops.product and
ops.gated_product of the values both sides stand for: ops.quantize's activation, ops.q8_0's
weights), every case of tests/gpu/cases/q8_gemv.py, q8_gated_gemv.py and q8_gemm_tc.py (built by
tests/gpu/build.py; q8_gemm_tc's weight rows as `q8_0_planes` reorders them): fresh random
activation rows quantized as the quantize kernel writes them, fresh q8_0 weight rows as the plan
stores them (llama.cpp's blocks), the output poisoned (NaN) first, the bf16 kernel tolerance. A
quantize epilogue's case: its staged fp32 values within that tolerance, its quantized rows those
of the staged values bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from linear_inputs import launch_case
from loader import load
from quantized_inputs import activation, q8_0_rows, quantized_rows, quantized_values

from lanec.interp import ops
from lanec.runtime.tolerance import KERNEL

HERE = Path(__file__).resolve().parent
GEMV = load("lanec_gpu_cases_q8_gemv", HERE / "cases" / "q8_gemv.py").CASES
GATED = load("lanec_gpu_cases_q8_gated_gemv", HERE / "cases" / "q8_gated_gemv.py").CASES
GEMM = load("lanec_gpu_cases_q8_gemm_tc", HERE / "cases" / "q8_gemm_tc.py").CASES


def check(what: str, got: np.ndarray, want: np.ndarray) -> None:
    assert not np.isnan(got).any(), f"{what}: {int(np.isnan(got).sum())} of {got.size} outputs never written"
    excess = KERNEL["bfloat16"].excess(got, want)
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (f"{what}: {int((excess > 0).sum())} of {got.size} outside tolerance; worst at "
                                     f"{np.unravel_index(worst, got.shape)}: got {got.flat[worst]}, "
                                     f"want {want.flat[worst]}")


def quantized_activation(rng, rows: int, width: int, words: int) -> tuple[np.ndarray, np.ndarray]:
    """(the values the interpreter reads, the bytes the device stores) of a quantized activation."""
    stored = quantized_rows(activation(rng, rows, width), words)
    return quantized_values(stored, width, words), stored


def check_quantized(what: str, got: dict, out: str, want: np.ndarray, words: int) -> None:
    """A quantize epilogue's output: the values it staged within the bf16 kernel tolerance of the
    interpreter's, and its quantized rows those of the staged values, bit for bit."""
    staged = got["staged"]
    check(f"{what} (staged)", staged, want)
    width = want.shape[1]
    used = words * width + 4 * (width // 32)
    np.testing.assert_array_equal(got[out][:, :used], quantized_rows(staged, words)[:, :used],
                                  err_msg=f"{what}: the quantized rows")


@pytest.mark.parametrize("case", sorted(GEMV))
def test_q8_gemv_matches_interpreter(case, stream):
    spec = GEMV[case]
    rng = np.random.default_rng()
    x, stored_x = quantized_activation(rng, spec["rows"], spec["width"], spec["words"])
    w, stored_w = q8_0_rows(rng, sum(spec["parts"]), spec["width"])
    got = launch_case("q8_gemv", case, {"x": stored_x, "w": stored_w}, stream)
    if spec.get("quantize"):
        check_quantized(f"q8_gemv/{case}", got, "y", ops.product(x, w), spec["quantize"])
    else:
        check(f"q8_gemv/{case}", got["y"], ops.product(x, w))


@pytest.mark.parametrize("case", sorted(GATED))
def test_q8_gated_gemv_matches_interpreter(case, stream):
    spec = GATED[case]
    rng = np.random.default_rng()
    x, stored_x = quantized_activation(rng, spec["rows"], spec["width"], spec["words"])
    gate, stored_gate = q8_0_rows(rng, spec["hidden"], spec["width"])
    up, stored_up = q8_0_rows(rng, spec["hidden"], spec["width"])
    got = launch_case("q8_gated_gemv", case, {"x": stored_x, "gate": stored_gate, "up": stored_up}, stream)
    if spec.get("quantize"):
        check_quantized(f"q8_gated_gemv/{case}", got, "out", ops.gated_product(x, gate, up), spec["quantize"])
    else:
        check(f"q8_gated_gemv/{case}", got["out"], ops.gated_product(x, gate, up))


@pytest.mark.parametrize("case", sorted(GEMM))
def test_q8_gemm_tc_matches_interpreter(case, stream):
    from lanec.runtime.weights import q8_0_planes

    spec = GEMM[case]
    rng = np.random.default_rng()
    x, stored_x = quantized_activation(rng, spec["rows"], spec["width"], spec["words"])
    w, stored_w = q8_0_rows(rng, sum(spec["parts"]), spec["width"])
    got = launch_case("q8_gemm_tc", case, {"x": stored_x, "w": q8_0_planes(stored_w)}, stream)
    check(f"q8_gemm_tc/{case}", got["y"], ops.product(x, w))
