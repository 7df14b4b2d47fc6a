"""The grouped mixture's four kernels on the GPU against the interpreter, every shape of
tests/gpu/cases/mixture_grouped.py (built by tests/gpu/build.py as its mixture_groups,
mixture_grouped_gated, mixture_grouped_down and mixture_sum cases). Each run draws fresh inputs
and the interpreter's routing (tests/gpu/test_mixture.py's `draw`: the experts no row chose hold
NaN, so a kernel that reads one fails) and poisons every output. Each launch is checked on its own
inputs: the segments exactly (starts the experts' exclusive prefix sum, order the pairs sorted by
expert, stably), the hidden values of each place's pair, each slot's weighted down product, the
sum; then the four as one mixture against `ops.mixture`, and a second run of the chain bitwise
equal to the first (no atomics)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.interp import ops
from lanec.runtime.dtypes import from_bf16
from lanec.runtime.tolerance import STEP

HERE = Path(__file__).resolve().parent
SHAPES = load("lanec_gpu_cases_mixture_grouped", HERE / "cases" / "mixture_grouped.py").SHAPES
flat = load("lanec_gpu_test_mixture_helpers", HERE / "test_mixture.py")  # draw, references, Launched


def segments(ids: np.ndarray, experts: int) -> tuple[np.ndarray, np.ndarray]:
    """starts [experts + 1] (the exclusive prefix sum of each expert's pairs) and order (the pair
    indices sorted by expert, ascending within an expert)."""
    counts = np.bincount(ids.reshape(-1), minlength=experts)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return starts, np.argsort(ids.reshape(-1), kind="stable").astype(np.int32)


def hidden_reference(shape: dict, v: dict, ids: np.ndarray, order: np.ndarray) -> np.ndarray:
    """[pairs, hidden]: place p holds the SwiGLU of pair order[p]'s expert at its row."""
    top_k = shape["top_k"]
    rows = order // top_k
    experts = ids.reshape(-1)[order]
    return np.stack([ops.swiglu(v["gate"][e] @ v["x"][r], v["up"][e] @ v["x"][r]) for r, e in zip(rows, experts,
                                                                                                      strict=True)])


def partial_reference(shape: dict, v: dict, ids, weights, order, hidden, shared) -> np.ndarray:
    """[rows * slots, width]: slot k of row r its k-th expert's down product times weights[r, k];
    the shared expert's (unscaled) the last slot."""
    rows, top_k, width = shape["rows"], shape["top_k"], shape["width"]
    slots = top_k + (1 if shape.get("shared_hidden") else 0)
    out = np.zeros((rows * slots, width), np.float32)
    for place, pair in enumerate(order):
        r, k = divmod(int(pair), top_k)
        out[r * slots + k] = weights[r, k] * (v["down"][ids[r, k]] @ hidden[place])
    if shape.get("shared_hidden"):
        out[top_k::slots] = ops.product(shared, v["shared_down"])
    return out


def sum_reference(shape: dict, v: dict, partial: np.ndarray) -> np.ndarray:
    top_k = shape["top_k"]
    slots = top_k + (1 if shape.get("shared_hidden") else 0)
    routed = partial.reshape(shape["rows"], slots, -1)
    out = routed[:, :top_k].sum(axis=1, dtype=np.float32)
    if shape.get("shared_hidden"):
        scale = ops.sigmoid(ops.product(v["x"], v["shared_gate_row"])) if shape.get("shared_gate") else 1.0
        out = out + routed[:, top_k] * scale
    return out


def chain(case: str, inputs: dict, ids, weights, stream, launched: list) -> dict:
    """The four launches, each on its predecessors' device outputs; their outputs read back."""
    groups = flat.Launched("mixture_groups", case, {"ids": ids}, stream)
    launched.append(groups)
    got = {"starts": groups.read("starts"), "order": groups.read("order")}
    gated = flat.Launched("mixture_grouped_gated", case, {**inputs, **got}, stream)
    launched.append(gated)
    got["hidden"] = gated.read("hidden")
    if "shared" in gated.params:
        got["shared"] = gated.read("shared")
    down = flat.Launched("mixture_grouped_down", case, {**inputs, **got, "weights": weights}, stream)
    launched.append(down)
    got["partial"] = down.read("partial")
    summed = flat.Launched("mixture_sum", case, {**inputs, **got}, stream)
    launched.append(summed)
    got["out"] = summed.read("out")
    return got


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_mixture_grouped_matches_interpreter(case, stream):
    shape = SHAPES[case]
    inputs, ids, weights = flat.draw(shape, np.random.default_rng())
    v = flat.decoded(shape, inputs)
    launched: list = []
    try:
        got = chain(case, inputs, ids, weights, stream, launched)
        starts, order = segments(ids, shape["experts"])
        assert np.array_equal(got["starts"], starts), f"{case} starts: got {got['starts'].tolist()}"
        differ = np.flatnonzero(got["order"] != order)
        assert differ.size == 0, (f"{case} order: {differ.size} places differ; first {differ[0]}: got "
                                  f"{got['order'][differ[0]]}, want {order[differ[0]]}")
        hidden = from_bf16(got["hidden"])
        flat.check_close(f"{case} hidden", "bfloat16", hidden, hidden_reference(shape, v, ids, order))
        shared = None
        if shape.get("shared_hidden"):
            shared = from_bf16(got["shared"])
            want = ops.swiglu(ops.product(v["x"], v["shared_gate"]), ops.product(v["x"], v["shared_up"]))
            flat.check_close(f"{case} shared hidden", "bfloat16", shared, want)
        # fp32 sums in the MMA's order against numpy's: STEP's fp32 bound (a wrong row or expert is far off)
        flat.check_close(f"{case} partial", "float32", got["partial"],
                         partial_reference(shape, v, ids, weights, order, hidden, shared), table=STEP)
        out = from_bf16(got["out"])
        flat.check_close(f"{case} out", "bfloat16", out, sum_reference(shape, v, got["partial"]))
        # the four launches as one mixture: the hidden values' bf16 store is the one difference
        flat.check_close(f"{case} mixture", "bfloat16", out, flat.mixture_reference(shape, v), table=STEP)
        again = chain(case, inputs, ids, weights, stream, launched)
        for name in ("order", "hidden", "partial", "out"):
            assert np.array_equal(again[name], got[name]), f"{case} {name}: a second run differs (bitwise)"
    finally:
        for done in launched:
            done.free()


ROUTER_CASES = load("lanec_gpu_cases_mixture_router_for_grouped", HERE / "cases" / "mixture_router.py").CASES


@pytest.mark.parametrize("case", sorted(c for c in SHAPES if f"{c}_segments" in ROUTER_CASES))
def test_the_router_writes_the_segments(case, stream):
    """mixture_router with `segments`: its ids and weights as the interpreter's, and the starts and
    order mixture_groups would write from them, over three launches on the same buffers (the
    ticket's count wraps each step: from the poisoned start, then from what the last step left)."""
    shape = SHAPES[case]
    inputs, ids, weights = flat.draw(shape, np.random.default_rng())
    router = flat.Launched("mixture_router", f"{case}_segments", inputs, stream)
    try:
        for step in range(3):
            if step:
                router.again(stream)
            got = router.read("ids")
            assert np.array_equal(got, ids), f"{case} step {step}: ids differ"
            flat.check_close(f"{case} routing weights", "float32", router.read("weights"), weights)
            starts, order = segments(got, shape["experts"])
            assert np.array_equal(router.read("starts"), starts), f"{case} step {step}: starts differ"
            assert np.array_equal(router.read("order"), order), f"{case} step {step}: order differs"
    finally:
        router.free()
