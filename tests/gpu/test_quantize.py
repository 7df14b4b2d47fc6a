"""The quantize kernel on the GPU against the interpreter's `ops.quantize`, every case of
tests/gpu/cases/quantize.py (built by tests/gpu/build.py): fresh random rows each run (a block of
zeros and a block of exact ties among them), launched twice over differently poisoned outputs.
The int8 words and the fp32 scales must be numpy's bit for bit (every step is one fp32 operation
rounded to nearest), so the values they stand for are exactly ops.quantize's.

Then the quantize epilogues (the `quantize` cases of rmsnorm, elementwise, head_norm, gated_gemv
and gemv) against the op on the interpreter then ops.quantize. A norm's or an elementwise op's
fp32 values differ from numpy's by an ulp or so (a norm's sum's order, the sigmoid's), so a value
on a rounding boundary may land a word either side: each block's scale must be numpy's within
1e-5, each value the quantized form stands for within half a quantum (the scale, or with two words
the scale / 254) of the op's exact value, and a norm's residual sum h numpy's in bf16. The GEMVs
sum their fp32 products in another order than numpy's, further apart than an ulp: their quantized
rows are checked bit for bit against the values they staged, and those against the op's within
1e-5 of the largest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from linear_inputs import launch_case
from loader import load
from quantized_inputs import activation, quantized_rows, quantized_values

from lanec.codegen.facts import quantized_pitch
from lanec.interp import ops
from lanec.runtime.dtypes import from_bf16, round_bf16, to_bf16

HERE = Path(__file__).resolve().parent
CASES = load("lanec_gpu_cases_quantize", HERE / "cases" / "quantize.py").CASES
# the kernels with a quantize epilogue: their `quantize` cases
EPILOGUES = {kernel: {name: spec for name, spec in load(f"lanec_gpu_cases_{kernel}_q", HERE / "cases" / f"{kernel}.py")
                      .CASES.items() if spec.get("quantize")} for kernel in ("rmsnorm", "elementwise", "head_norm", "gated_gemv", "gemv")}


def width_of(spec: dict) -> int:
    """The values of an input row a case reads (a head_norm's: its heads x their size)."""
    return spec.get("width") or spec["heads"] * spec["size"]


def out_width_of(spec: dict) -> int:
    """The values of a row a case quantizes: a gated pair's hidden units, a product's outputs, else
    its input's."""
    return spec.get("hidden") or (sum(spec["parts"]) if "parts" in spec else width_of(spec))


def drawn(spec: dict):
    """(a fresh generator, the activation rows as wide as their pitch as the device holds them,
    the `width` values the kernel reads of each)."""
    rng = np.random.default_rng()
    wide = activation(rng, spec["rows"], spec.get("x_pitch") or width_of(spec))
    return rng, wide, wide[:, :width_of(spec)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantize_matches_interpreter(case, stream):
    spec = CASES[case]
    rows, width, words = spec["rows"], spec["width"], spec["words"]
    rng, wide, x = drawn(spec)
    want = quantized_rows(x, words)
    used = words * width + 4 * (width // 32)  # the row's padding after the scales is never written
    for poison in (0xFF, 0x00):
        q = np.full((rows, quantized_pitch(width, words)), poison, np.uint8).view(np.int8)
        got = launch_case("quantize", case, {"x": to_bf16(wide), "q": q}, stream)["q"]
        wrong = np.argwhere(got[:, :used] != want[:, :used])
        assert wrong.size == 0, (f"quantize/{case} (poison {poison:#x}): {len(wrong)} of {rows * used} bytes differ; "
                                 f"first at {wrong[0].tolist()}: got {got[tuple(wrong[0])]}, want {want[tuple(wrong[0])]}")
    assert np.array_equal(quantized_values(got, width, words), ops.quantize(x, words))


def epilogue_reference(kernel: str, spec: dict, rng, x: np.ndarray, wide: np.ndarray):
    """(the inputs as the device stores them, the op's fp32 result, the residual sum or None) of a
    quantize-epilogue case: rmsnorm of x (+ a residual), the elementwise op of x (and another), or
    head_norm's per-head norm of x (times its weight, and a gate's activation)."""
    if kernel == "elementwise":
        stored = {"a": to_bf16(wide)}
        operands = [x]
        if spec["op"] in ("add", "mul", "swiglu"):
            stored["b"] = to_bf16(rng.standard_normal(x.shape, dtype=np.float32))
            operands.append(from_bf16(stored["b"]))
        return stored, getattr(ops, spec["op"])(*operands), None
    if kernel == "gemv":
        stored = {"x": to_bf16(wide),
                  "w": to_bf16(rng.standard_normal((sum(spec["parts"]), x.shape[1]), dtype=np.float32) / np.float32(8))}
        return stored, ops.product(x, from_bf16(stored["w"])), None
    if kernel == "gated_gemv":
        hidden = spec["hidden"]
        stored = {"x": to_bf16(wide)}
        for name in ("gate", "up"):
            stored[name] = to_bf16(rng.standard_normal((hidden, x.shape[1]), dtype=np.float32) / np.float32(8))
        return stored, ops.gated_product(x, from_bf16(stored["gate"]), from_bf16(stored["up"])), None
    if kernel == "head_norm":
        heads, eps = spec["heads"], spec["eps"]
        stored = {"x": to_bf16(wide), "w": to_bf16(rng.uniform(0.5, 1.5, spec["size"]).astype(np.float32))}
        if not spec.get("gate"):
            return stored, ops.head_norm(x, from_bf16(stored["w"]), heads, eps), None
        stored["gate"] = to_bf16(rng.standard_normal(x.shape, dtype=np.float32))
        return stored, ops.norm_gated(x, from_bf16(stored["gate"]), from_bf16(stored["w"]), heads, eps,
                                      spec["gate"]), None
    stored = {"x": to_bf16(wide), "w": to_bf16(rng.standard_normal(spec["width"], dtype=np.float32))}
    if not spec.get("residual"):
        return stored, ops.rmsnorm(x, from_bf16(stored["w"]), spec["eps"]), None
    stored["residual"] = to_bf16(rng.standard_normal(x.shape, dtype=np.float32))
    y, h = ops.rmsnorm(x, from_bf16(stored["w"]), spec["eps"], residual=from_bf16(stored["residual"]))
    return stored, y, h


@pytest.mark.parametrize(("kernel", "case"), [(k, c) for k in sorted(EPILOGUES) for c in sorted(EPILOGUES[k])])
def test_quantize_epilogue_matches_interpreter(kernel, case, stream):
    spec = EPILOGUES[kernel][case]
    rows, width, words = spec["rows"], out_width_of(spec), spec["quantize"]
    rng, wide, x = drawn(spec)
    stored, y, h = epilogue_reference(kernel, spec, rng, x, wide)
    out = "out" if kernel in ("elementwise", "gated_gemv") else "y"
    blocks = width // 32
    want_scale = np.abs(y.reshape(rows, blocks, 32)).max(axis=-1) / np.float32(127)
    quantum = (want_scale if words == 1 else want_scale / np.float32(254))[:, :, None]
    for poison in (0xFF, 0x00):
        zeros = {out: np.zeros((rows, quantized_pitch(width, words)), np.int8)} if poison == 0x00 else {}
        got = launch_case(kernel, case, {**stored, **zeros}, stream)
        if kernel in ("gated_gemv", "gemv"):
            # its fp32 products are summed in another order than numpy's: the epilogue is checked
            # exactly against the values it staged, and those against the op's
            staged = got["staged"]
            scale = np.float32(np.abs(y).max())
            assert np.abs(staged - y).max() <= np.float32(1e-5) * scale, f"{kernel}/{case}: the staged SwiGLU"
            used = words * width + 4 * blocks
            np.testing.assert_array_equal(got[out][:, :used], quantized_rows(staged, words)[:, :used],
                                          err_msg=f"{kernel}/{case} (poison {poison:#x}): the quantized rows")
            continue
        scale = np.ascontiguousarray(got[out][:, words * width:words * width + 4 * blocks]).view(np.float32)
        assert np.isfinite(scale).all(), f"{kernel}/{case} (poison {poison:#x}): a block's scale never written"
        np.testing.assert_allclose(scale, want_scale, rtol=1e-5, atol=1e-30,
                                   err_msg=f"{kernel}/{case} (poison {poison:#x}): block scales")
        error = np.abs(quantized_values(got[out], width, words) - y).reshape(rows, blocks, 32)
        bound = quantum * np.float32(0.5 + 1e-3) + np.float32(1e-6) * np.abs(y).reshape(rows, blocks, 32)
        worst = np.unravel_index(int(np.argmax(error - bound)), error.shape)
        assert (error <= bound).all(), (f"{kernel}/{case} (poison {poison:#x}): {int((error > bound).sum())} of "
                                        f"{y.size} values past half a quantum; worst row {worst[0]} block "
                                        f"{worst[1]}: error {error[worst]:.3g}, bound {bound[worst]:.3g}")
        if h is not None:
            np.testing.assert_array_equal(got["h"], round_bf16(h), err_msg=f"{kernel}/{case}: the residual sum")
