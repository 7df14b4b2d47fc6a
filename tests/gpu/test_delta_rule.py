"""The delta_rule kernel on the GPU against the interpreter (lanec.interp.ops.delta_rule, fp32),
every case of tests/gpu/cases/delta_rule.py (built by tests/gpu/build.py): fresh random inputs,
states and slot tables every run (padding requests, speculative accepted counts and padding write
slots), the output poisoned first. Keys and queries are unit vectors a head and beta lies in
(0, 1), the decay in (0.3, 1], as a layer feeds the rule (l2-normed, sigmoid, the gate): the state
stays bounded over 16 tokens. The output must match within the kernel tolerance, every state slot
(owned or not) within `STATE` of the state's largest magnitude."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from linear_inputs import draw_slots, launch_case
from loader import load

from lanec.interp import ops
from lanec.runtime.dtypes import round_bf16, to_bf16
from lanec.runtime.tolerance import KERNEL, Tolerance

HERE = Path(__file__).resolve().parent
CASES = load("lanec_gpu_cases_delta_rule", HERE / "cases" / "delta_rule.py").CASES
F32 = np.float32
# fp32 against fp32: the row sums over the keys in another order, compounded over up to 16 tokens
STATE = Tolerance(1e-4, 1e-5)


def unit_heads(rng, rows: int, heads: int, size: int) -> np.ndarray:
    x = rng.standard_normal((rows, heads, size), dtype=F32)
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).reshape(rows, heads * size)


def pitched(rng, values: np.ndarray, pitch: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(the bf16 values, the stored rows: as wide as `pitch`, the tail random)."""
    rows, width = values.shape
    wide = rng.standard_normal((rows, pitch or width), dtype=F32)
    wide[:, :width] = values
    return round_bf16(values), to_bf16(wide)


def draw(spec: dict, rng) -> tuple[dict, dict]:
    """(the values the interpreter reads, the arrays the device stores) for one case."""
    batch, tokens, heads, key_heads = spec["batch"], spec["tokens"], spec["heads"], spec["key_heads"]
    key, value, rows = spec["key"], spec["value"], spec["batch"] * spec["tokens"]
    slots, accepted = draw_slots(rng, batch, tokens, spec.get("slot_columns", 0), spec["state_slots"])
    values, stored = {"slots": slots}, {"slots": slots}
    drawn = {"q": unit_heads(rng, rows, key_heads, key), "k": unit_heads(rng, rows, key_heads, key),
             "v": rng.standard_normal((rows, heads * value), dtype=F32),
             "beta": rng.uniform(0.0, 1.0, (rows, heads)).astype(F32)}
    for name, x in drawn.items():
        values[name], stored[name] = pitched(rng, x, spec.get(f"{name}_pitch"))
    decays = heads * key if spec.get("per_key", True) else heads
    values["decay"] = stored["decay"] = np.exp(-rng.uniform(0.0, 1.2, (rows, decays))).astype(F32)
    state = F32(0.3) * rng.standard_normal((spec["state_slots"], heads, value, key), dtype=F32)
    values["state"], stored["state"] = state.copy(), state
    if accepted is not None:
        values["accepted"] = stored["accepted"] = accepted
    return values, stored


@pytest.mark.parametrize("case", sorted(CASES))
def test_delta_rule_matches_interpreter(case, stream):
    spec = CASES[case]
    values, stored = draw(spec, np.random.default_rng())
    got = launch_case("delta_rule", case, stored, stream)
    want = ops.delta_rule(values["q"], values["k"], values["v"], values["decay"], values["beta"], values["state"],
                          values["slots"], spec["heads"], spec["key_heads"], spec["scale"], spec["tokens"],
                          values.get("accepted"))
    for name, tolerance, expected in (("out", KERNEL["bfloat16"], want), ("state", STATE, values["state"])):
        result = got[name]
        assert not np.isnan(result).any(), (f"delta_rule/{case} {name}: {int(np.isnan(result).sum())} of "
                                            f"{result.size} values never written")
        excess = tolerance.excess(result, expected)
        worst = int(np.argmax(excess))
        assert excess.flat[worst] <= 0, (
            f"delta_rule/{case} {name}: {int((excess > 0).sum())} of {result.size} outside tolerance; worst at "
            f"{np.unravel_index(worst, result.shape)}: got {result.flat[worst]}, want {expected.flat[worst]}")
