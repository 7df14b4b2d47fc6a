"""The conv kernel on the GPU against the interpreter (lanec.interp.ops.conv, fp32), every case of
tests/gpu/cases/conv.py (built by tests/gpu/build.py): fresh random inputs, states and slot tables
every run (padding requests, speculative accepted counts), the output poisoned first. The output
must match within the kernel tolerance; the conv state, which the kernel only moves, exactly
(every slot: the ones no request owns must stay as they were)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from linear_inputs import draw_slots, launch_case
from loader import load

from lanec.interp import ops
from lanec.runtime.dtypes import from_bf16, round_bf16, to_bf16
from lanec.runtime.tolerance import KERNEL

HERE = Path(__file__).resolve().parent
CASES = load("lanec_gpu_cases_conv", HERE / "cases" / "conv.py").CASES
F32 = np.float32


def draw(spec: dict, rng) -> tuple[dict, dict]:
    """(the values the interpreter reads, the arrays the device stores) for one case."""
    batch, tokens, channels, width = spec["batch"], spec["tokens"], spec["channels"], spec["width"]
    pitch = spec.get("x_pitch") or channels
    slots, accepted = draw_slots(rng, batch, tokens, spec.get("slot_columns", 0), spec["state_slots"])
    wide = rng.standard_normal((batch * tokens, pitch), dtype=F32)
    weight = rng.standard_normal((channels, width), dtype=F32) / F32(np.sqrt(width))
    state = rng.standard_normal((spec["state_slots"], spec["state_channels"], width - 2 + tokens), dtype=F32)
    stored = {"x": to_bf16(wide), "weight": to_bf16(weight), "slots": slots, "state": to_bf16(state)}
    values = {"x": round_bf16(wide[:, :channels]), "weight": round_bf16(weight), "slots": slots,
              "state": round_bf16(state)}
    if spec.get("bias"):
        bias = F32(0.5) * rng.standard_normal(channels, dtype=F32)
        stored["bias"], values["bias"] = to_bf16(bias), round_bf16(bias)
    if accepted is not None:
        stored["accepted"] = values["accepted"] = accepted
    return values, stored


@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_matches_interpreter(case, stream):
    spec = CASES[case]
    values, stored = draw(spec, np.random.default_rng())
    got = launch_case("conv", case, stored, stream)
    state = values["state"].copy()
    want = ops.conv(values["x"], state, values["weight"], values["slots"], spec.get("offset", 0), spec["tokens"],
                    values.get("accepted"), values.get("bias"), spec.get("activation", "silu"),
                    spec.get("norm_heads"), spec.get("norm_eps"))
    y = got["y"]
    assert not np.isnan(y).any(), f"conv/{case}: {int(np.isnan(y).sum())} of {y.size} outputs never written"
    excess = KERNEL["bfloat16"].excess(y, want)
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (f"conv/{case} y: {int((excess > 0).sum())} of {y.size} outside tolerance; worst "
                                     f"at {np.unravel_index(worst, y.shape)}: got {y.flat[worst]}, want {want.flat[worst]}")
    moved = from_bf16(to_bf16(state))  # the interpreter's state, as the bf16 buffer holds it
    wrong = np.argwhere(got["state"] != moved)
    assert wrong.size == 0, (f"conv/{case} state: {len(wrong)} values differ; first at {wrong[0].tolist()}: "
                             f"got {got['state'][tuple(wrong[0])]}, want {moved[tuple(wrong[0])]}")
