"""gemm_tc on the GPU against the interpreter's product (lanec.interp.ops.product, fp32 sums of the
bf16 inputs), on both engines: cases from tests/gpu/cases/gemm_tc.py (mma.sync) and gemm_wgmma.py
(built by `python tests/gpu/build.py --only gemm_tc gemm_wgmma`). Every run draws fresh inputs (the activation as wide as its pitch: the kernel must read
only its part), poisons y with 0xFF bytes (NaN: every output must be written) and holds y to the
kernel tolerance of bf16 (lanec/runtime/tolerance.py). A per-head case's reference is the interpreter's
product_part (head h's rows against its own part of the row). A gated pair's case draws gate and up,
binds them interleaved as the plan does (`weights.apply`) and compares with the interpreter's
gated product (fp32 SwiGLU of the fp32 sums)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.codegen.facts import PAIR_TILE
from lanec.interp import ops
from lanec.runtime import weights
from lanec.runtime.dtypes import from_bf16, to_bf16
from lanec.runtime.plan import Transform
from lanec.runtime.tolerance import KERNEL, Tolerance

HERE = Path(__file__).resolve().parent


CASES = {(kernel, case): spec for kernel in ("gemm_tc", "gemm_wgmma")
         for case, spec in load(f"lanec_gpu_cases_{kernel}", HERE / "cases" / f"{kernel}.py").CASES.items()}
Launched = load("lanec_gpu_attention_launched", HERE / "test_attention.py").Launched  # one helper for both


@pytest.mark.parametrize(("kernel", "case"), sorted(CASES))
def test_gemm_tc_matches_interpreter(kernel, case, stream):
    spec = CASES[kernel, case]
    rows, width, outputs = spec["rows"], spec["width"], sum(spec["parts"])
    rng = np.random.default_rng()
    per_head = spec.get("per_head")
    x_width = per_head[0] * per_head[1] if per_head else width  # a per-head read: every head's unit
    x = to_bf16(rng.standard_normal((rows, spec.get("x_pitch") or x_width), dtype=np.float32))
    if per_head:  # head h's outputs dot x[:, h * unit + offset:][:width]
        heads, unit, offset = per_head
        w = to_bf16(rng.standard_normal((outputs, width), dtype=np.float32))
        want = ops.product_part(from_bf16(x)[:, :x_width], from_bf16(w), heads, unit, offset, width)
    elif spec.get("gated"):  # the pair's weight as the plan binds it: gate and up interleaved in tiles
        gate, up = (to_bf16(rng.standard_normal((outputs // 2, width), dtype=np.float32)) for _ in range(2))
        w = weights.apply(Transform("interleave", {"rows": PAIR_TILE}), [gate, up])
        want = ops.gated_product(from_bf16(x)[:, :width], from_bf16(gate), from_bf16(up))
    else:
        w = to_bf16(rng.standard_normal((outputs, width), dtype=np.float32))
        want = ops.product(from_bf16(x)[:, :width], from_bf16(w))
    launched = Launched(kernel, case, spec, {"x": x, "w": w}, stream)
    float32 = spec.get("out_dtype") == "float32"  # the sums as they are: a router's logits
    try:
        got = launched.read("y") if float32 else from_bf16(launched.read("y"))
        if "stream" in spec.get("schedule", {}):
            _check(case, got, want)
            # every flag a CTA raised is lowered again, so a second launch finds the workspace as the
            # first did (poisoned flags read as not raised) and computes the same bits
            assert (launched.read("flags") <= 0).all(), f"{case}: flags left raised for the next launch"
            launched.buffers["y"].fill(0xFF)
            launched.again(stream)
            again = from_bf16(launched.read("y"))
            assert np.array_equal(again, got), f"{case}: a second launch differs (stream-K sums in a fixed order)"
    finally:
        launched.free()
    _check(case, got, want, FLOAT32_SUMS if float32 else KERNEL["bfloat16"])


# fp32 outputs: sums of K products in the tensor cores' order against numpy's; a sum of thousands of
# unit-scale terms that cancels to near zero carries an absolute error of a few 1e-4 at an output
# scale of about 300 (K 7168), so the bound's share of the largest magnitude is 2^-14, not 1e-6
FLOAT32_SUMS = Tolerance(1e-5, 2.0**-14)


def _check(case: str, got: np.ndarray, want: np.ndarray, bound: Tolerance = KERNEL["bfloat16"]) -> None:
    unwritten = np.isnan(got)
    assert not unwritten.any(), (f"{case}: {int(unwritten.sum())} of {got.size} outputs never written (first at "
                                 f"{np.argwhere(unwritten)[0].tolist()})")
    excess = bound.excess(got, want)
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (f"{case}: {int((excess > 0).sum())} of {got.size} outside tolerance; worst at "
                                     f"{np.unravel_index(worst, got.shape)}: got {got.flat[worst]}, "
                                     f"want {want.flat[worst]}")
