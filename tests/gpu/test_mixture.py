"""The mixture's three kernels on the GPU against the interpreter (lanec.interp.ops.mixture, fp32),
every shape of tests/gpu/cases/mixture.py (built by tests/gpu/build.py as its mixture_router,
mixture_gated and mixture_down cases). Every run draws fresh inputs (again where a row's choice
would hang on a difference below fp32 summation noise, which no two correct sums agree on; exact
ties stay: they must go to the lowest index) and poisons every output. The experts no row chose
hold NaN: a kernel that reads one fails. Each launch is checked on its own inputs (the router's
ids exactly, its weights, the hidden values of the chosen ids, the sum of the chosen experts from
the gated launch's hidden values), then the three as one mixture against `ops.mixture`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.interp import ops
from lanec.runtime import driver
from lanec.runtime.artifact import load_artifact
from lanec.runtime.dtypes import from_bf16, round_bf16, to_bf16
from lanec.runtime.tolerance import KERNEL, STEP

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "gpu"
F32 = np.float32
NEAR = 1e-5  # choice values closer than this (and not equal) may order either way in fp32
POISON = 0xFFFF  # a bf16 NaN: the unchosen experts' weights


SHAPES = load("lanec_gpu_cases_mixture", HERE / "cases" / "mixture.py").SHAPES
NORMED = {name: spec for name, spec in load("lanec_gpu_cases_mixture_router_normed",
                                            HERE / "cases" / "mixture_router.py").CASES.items()
          if spec.get("norm") and not spec.get("shared_hidden")}  # the shared ones: test_the_router_runs_the_shared_expert


def route(shape: dict, x, router, correction) -> tuple[np.ndarray, np.ndarray, bool]:
    """The interpreter's choice (ops.mixture's first half): ids [rows, top_k], weights, and whether
    a row's choice hangs on a near tie (of groups at the kept boundary, of experts at the boundary
    or in the chosen order)."""
    top_k = shape["top_k"]
    logits = ops.product(x, router)
    scores = ops.sigmoid(logits) if shape["scoring"] == "sigmoid" else ops.softmax(logits)
    choice = scores if correction is None else scores + correction
    near = False
    # an exact tie is safe only where every dot is exact ("ties" inputs); from random inputs the
    # interpreter's equal values may differ by an ulp on the device (another summation order)
    exact = shape.get("inputs") == "ties"
    if shape.get("groups"):
        groups, kept = shape["groups"], shape["topk_groups"]
        rank = np.sort(choice.reshape(len(x), groups, -1), axis=-1)[:, :, -2:].sum(axis=-1, dtype=F32)
        if kept < groups:
            ordered = -np.sort(-rank, axis=-1)
            gap = ordered[:, kept - 1] - ordered[:, kept]
            near |= bool((((gap > 0) | (not exact)) & (gap < NEAR)).any())
        choice = ops.grouped_choice(choice, groups, kept, top_k)
    ordered = -np.sort(-choice, axis=-1)[:, : top_k + 1]  # the chosen in order, and the first left out
    gaps = ordered[:, :-1] - ordered[:, 1:]
    near |= bool((((gaps > 0) | (not exact)) & (gaps < NEAR)).any())
    chosen = np.argsort(-choice, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(scores, chosen, axis=-1)
    if shape["renormalize"]:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return chosen.astype(np.int32), (weights * F32(shape["routed_scaling"])).astype(F32), near


def draw_routing(shape: dict, rng) -> dict:
    """x (as wide as its pitch), the router and the correction bias, as the device stores them."""
    rows, width, experts = shape["rows"], shape["width"], shape["experts"]
    pitch = shape.get("x_pitch") or width
    kind = shape.get("inputs", "random")
    if kind == "ties":  # integers and sixteenths: every dot exact in fp32, whatever the order
        x = rng.integers(-1, 2, size=(rows, pitch)).astype(F32)
        router = np.repeat(rng.integers(-2, 3, size=(experts // 4, width)) / F32(16), 4, axis=0).astype(F32)
        correction = np.repeat(rng.integers(-2, 3, size=experts // 4) / F32(8), 4).astype(F32)
    else:
        x = rng.standard_normal((rows, pitch), dtype=F32)
        router = rng.standard_normal((experts, width), dtype=F32) / F32(np.sqrt(width))
        correction = F32(0.1) * rng.standard_normal(experts, dtype=F32)
        if kind == "same":  # expert 5 far above every other for every row
            x = np.abs(x)
            router[5] = F32(4 / np.sqrt(width))
    drawn = {"x": to_bf16(x), "router": to_bf16(router)}
    if shape.get("correction"):
        drawn["correction"] = correction
    return drawn


def draw_experts(shape: dict, chosen: np.ndarray, rng) -> dict:
    """The experts' weights (NaN but for the chosen ones) and the shared expert's, as stored."""
    experts, hidden, width = shape["experts"], shape["hidden"], shape["width"]
    drawn = {}
    for name, rows, cols in (("gate", hidden, width), ("up", hidden, width), ("down", width, hidden)):
        stacked = np.full((experts, rows, cols), POISON, dtype=np.uint16)
        for e in np.unique(chosen):
            stacked[e] = to_bf16(rng.standard_normal((rows, cols), dtype=F32) / F32(np.sqrt(cols)))
        drawn[name] = stacked
    shared = shape.get("shared_hidden", 0)
    if shared:
        for name, rows, cols in (("shared_gate", shared, width), ("shared_up", shared, width),
                                 ("shared_down", width, shared)):
            drawn[name] = to_bf16(rng.standard_normal((rows, cols), dtype=F32) / F32(np.sqrt(cols)))
        if shape.get("shared_gate"):
            drawn["shared_gate_row"] = to_bf16(rng.standard_normal((1, width), dtype=F32) / F32(np.sqrt(width)))
    return drawn


def draw(shape: dict, rng, attempts: int = 50) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fresh inputs whose choice no near tie decides, the interpreter's ids and weights."""
    for _ in range(attempts):
        inputs = draw_routing(shape, rng)
        x = from_bf16(inputs["x"])[:, : shape["width"]]
        chosen, weights, near = route(shape, x, from_bf16(inputs["router"]), inputs.get("correction"))
        if not near:
            return {**inputs, **draw_experts(shape, chosen, rng)}, chosen, weights
    raise AssertionError(f"{attempts} draws of routing inputs each held a near tie")


def decoded(shape: dict, inputs: dict) -> dict:
    """The inputs' values as the interpreter reads them (fp32; x without its pitch's tail)."""
    values = {name: from_bf16(stored) if stored.dtype == np.uint16 else stored for name, stored in inputs.items()}
    values["x"] = values["x"][:, : shape["width"]]
    return values


def hidden_reference(shape: dict, v: dict, ids: np.ndarray) -> np.ndarray:
    """[rows, top_k * hidden + shared_hidden]: each slot's SwiGLU of its chosen expert."""
    x, gate, up = v["x"], v["gate"], v["up"]
    slots = [np.stack([ops.swiglu(gate[e] @ x[r], up[e] @ x[r]) for e in row]).reshape(-1)
             for r, row in enumerate(ids)]
    hidden = np.stack(slots)
    if shape.get("shared_hidden"):
        shared = ops.swiglu(ops.product(x, v["shared_gate"]), ops.product(x, v["shared_up"]))
        hidden = np.concatenate([hidden, shared], axis=1)
    return hidden


def down_reference(shape: dict, v: dict, hidden: np.ndarray, ids: np.ndarray, weights: np.ndarray):
    """The weighted sum of the chosen experts' down products of `hidden` (+ the shared expert's)."""
    top_k, width, inner = shape["top_k"], shape["width"], shape["hidden"]
    down = v["down"]
    out = np.zeros((len(ids), width), F32)
    for r, row in enumerate(ids):
        for k, e in enumerate(row):
            out[r] += weights[r, k] * (down[e] @ hidden[r, k * inner:(k + 1) * inner])
    if shape.get("shared_hidden"):
        shared = ops.product(hidden[:, top_k * inner:], v["shared_down"])
        if shape.get("shared_gate"):
            shared = shared * ops.sigmoid(ops.product(v["x"], v["shared_gate_row"]))
        out = out + shared
    return out


def mixture_reference(shape: dict, v: dict) -> np.ndarray:
    shared = [v[n] for n in ("shared_gate", "shared_up", "shared_down", "shared_gate_row") if n in v]
    return ops.mixture(v["x"], v["router"], v["gate"], v["up"], v["down"], shape["top_k"], shape["scoring"],
                       shape["renormalize"], shape["routed_scaling"], v.get("correction"), shared,
                       groups=shape.get("groups"), topk_groups=shape.get("topk_groups"))


def check_close(what: str, dtype: str, got: np.ndarray, want: np.ndarray, table=KERNEL) -> None:
    assert not np.isnan(got).any(), f"{what}: {int(np.isnan(got).sum())} of {got.size} never written (or NaN read)"
    excess = table[dtype].excess(got, want)
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (f"{what}: {int((excess > 0).sum())} of {got.size} outside tolerance; worst at "
                                     f"{np.unravel_index(worst, got.shape)}: got {got.flat[worst]}, "
                                     f"want {want.flat[worst]}")


class Launched:
    """One built case: its inputs uploaded, its outputs poisoned with 0xFF bytes (NaN, or -1 ids)."""

    def __init__(self, kernel: str, case: str, inputs: dict, stream):
        artifact = load_artifact(BUILD / kernel, case)
        assert artifact.params and artifact.launch, f"{kernel}/{case}: no artifact; run tests/gpu/build.py"
        self.params = {p.name: p for p in artifact.params}
        self.buffers = {}
        for param in artifact.params:
            if param.written:
                itemsize = 2 if param.dtype == "bfloat16" else 4
                self.buffers[param.name] = driver.Buffer.empty(int(np.prod(param.shape)) * itemsize)
                self.buffers[param.name].fill(0xFF)
            else:
                self.buffers[param.name] = driver.Buffer.from_array(np.ascontiguousarray(inputs[param.name]))
        self.function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
        self.artifact = artifact
        self.again(stream)

    def again(self, stream) -> None:
        """Launch once more on the same buffers (a next step: what a launch leaves, a ticket
        count, it finds)."""
        driver.launch(self.function, self.artifact.launch, [self.buffers[p.name].ptr for p in self.artifact.params],
                      stream)
        stream.synchronize()

    def read(self, name: str) -> np.ndarray:
        param = self.params[name]
        return self.buffers[name].to_array(np.uint16 if param.dtype == "bfloat16" else np.dtype(param.dtype),
                                           param.shape)

    def free(self) -> None:
        for buffer in self.buffers.values():
            buffer.free()


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_mixture_matches_interpreter(case, stream):
    shape = SHAPES[case]
    inputs, chosen, routing = draw(shape, np.random.default_rng())
    v = decoded(shape, inputs)
    launched = []
    try:
        router = Launched("mixture_router", case, inputs, stream)
        launched.append(router)
        ids, weights = router.read("ids"), router.read("weights")
        differ = np.flatnonzero((ids != chosen).any(axis=1))
        assert differ.size == 0, (f"{case} ids: rows {differ.tolist()} differ; first got {ids[differ[0]].tolist()}, "
                                  f"want {chosen[differ[0]].tolist()}")
        check_close(f"{case} routing weights", "float32", weights, routing)
        gated = Launched("mixture_gated", case, {**inputs, "ids": ids}, stream)
        launched.append(gated)
        hidden = gated.read("hidden")
        check_close(f"{case} hidden", "bfloat16", from_bf16(hidden), hidden_reference(shape, v, ids))
        down = Launched("mixture_down", case, {**inputs, "ids": ids, "weights": weights, "hidden": hidden}, stream)
        launched.append(down)
        out = from_bf16(down.read("out"))
        check_close(f"{case} out", "bfloat16", out, down_reference(shape, v, from_bf16(hidden), ids, weights))
        # the three launches as one mixture: the hidden values' bf16 store is the one difference
        check_close(f"{case} mixture", "bfloat16", out, mixture_reference(shape, v), table=STEP)
    finally:
        for done in launched:
            done.free()


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_the_router_chooses_from_given_logits(case, stream):
    """mixture_router with `logits` (ROUTER_GEMM_ROWS: gemm_tc wrote them): fed the interpreter's fp32
    logits of fresh inputs no near tie decides, it chooses the interpreter's ids and weights."""
    shape = SHAPES[case]
    inputs, chosen, routing = draw(shape, np.random.default_rng())
    x = from_bf16(inputs["x"])[:, : shape["width"]]
    logits = ops.product(x, from_bf16(inputs["router"])).astype(F32)
    given = {"logits": logits, **({"correction": inputs["correction"]} if "correction" in inputs else {})}
    router = Launched("mixture_router", f"{case}_logits", given, stream)
    try:
        ids, weights = router.read("ids"), router.read("weights")
    finally:
        router.free()
    differ = np.flatnonzero((ids != chosen).any(axis=1))
    assert differ.size == 0, (f"{case} ids: rows {differ.tolist()} differ; first got {ids[differ[0]].tolist()}, "
                              f"want {chosen[differ[0]].tolist()}")
    check_close(f"{case} routing weights", "float32", weights, routing)


@pytest.mark.parametrize("case", sorted(NORMED))
def test_the_router_norms_its_rows(case, stream):
    """mixture_router with `norm` (fold-norm-into-router): from a norm's input (read in place where
    pitched) and residual it writes the normed rows and the sum as ops.rmsnorm computes them, and
    chooses from the rows it normed (its own y, bf16) exactly as the interpreter chooses from them;
    with `prefetch_units` too, where every CTA of the cluster chooses (`prefetch_spread`) and the first
    stores."""
    spec = NORMED[case]
    base = case.removesuffix("_norm").removesuffix("_first").removesuffix("_spread").removesuffix("_r8")
    shape = {**SHAPES[base], **spec}
    rows, width = shape["rows"], shape["width"]
    rng = np.random.default_rng()
    for _ in range(50):  # no near tie in the choice from the interpreter's normed rows
        inputs = draw_routing(shape, rng)
        if spec.get("prefetch_units"):  # the chosen experts' rows it prefetches (read by no one here)
            matrix = (shape["experts"], spec["expert_hidden"], width)
            inputs["gate"], inputs["up"] = (to_bf16(rng.standard_normal(matrix, dtype=F32)) for _ in range(2))
        inputs["norm_w"] = to_bf16(F32(1) + F32(0.1) * rng.standard_normal(width, dtype=F32))
        if spec["residual"]:
            inputs["residual"] = to_bf16(rng.standard_normal((rows, width), dtype=F32))
        normed = ops.rmsnorm(from_bf16(inputs["x"])[:, :width], from_bf16(inputs["norm_w"]), spec["eps"],
                             from_bf16(inputs["residual"]) if spec["residual"] else None)
        y, h = normed if spec["residual"] else (normed, None)
        if not route(shape, round_bf16(y), from_bf16(inputs["router"]), inputs.get("correction"))[2]:
            break
    router = Launched("mixture_router", case, inputs, stream)
    try:
        got = {name: router.read(name) for name in ("ids", "weights", "y", *(["h"] if spec["residual"] else []))}
    finally:
        router.free()
    check_close(f"{case} normed rows", "bfloat16", from_bf16(got["y"]), y)
    if h is not None:
        check_close(f"{case} sum", "bfloat16", from_bf16(got["h"]), h)
    chosen, weights, _ = route(shape, from_bf16(got["y"]), from_bf16(inputs["router"]), inputs.get("correction"))
    differ = np.flatnonzero((got["ids"] != chosen).any(axis=1))
    assert differ.size == 0, (f"{case} ids: rows {differ.tolist()} differ; first got {got['ids'][differ[0]].tolist()}, "
                              f"want {chosen[differ[0]].tolist()}")
    check_close(f"{case} routing weights", "float32", got["weights"], weights)


SHARED = load("lanec_gpu_cases_mixture_shared", HERE / "cases" / "mixture.py").SHARED_SHAPES


@pytest.mark.parametrize("norm", [False, True], ids=["x", "norm"])
@pytest.mark.parametrize("case", sorted(SHARED))
def test_the_router_runs_the_shared_expert(case, norm, stream):
    """mixture_router with `shared_hidden` (ROUTER_SHARED_ROWS): beside its choice it writes the shared
    expert's SwiGLU of the row (x, or the rows it normed) into the shared columns of hidden and nothing
    into the routed ones; mixture_gated with `shared_in_router` then writes the routed columns only. The
    two launches' columns together are the interpreter's hidden values."""
    shape = SHARED[case]
    rows, width, top_k, inner = shape["rows"], shape["width"], shape["top_k"], shape["hidden"]
    rng = np.random.default_rng()
    inputs, chosen, routing = draw(shape, rng)
    if norm:
        for _ in range(50):  # the choice from the normed rows hangs on no near tie
            inputs["norm_w"] = to_bf16(F32(1) + F32(0.1) * rng.standard_normal(width, dtype=F32))
            inputs["residual"] = to_bf16(rng.standard_normal((rows, width), dtype=F32))
            y, _ = ops.rmsnorm(from_bf16(inputs["x"])[:, :width], from_bf16(inputs["norm_w"]), 1e-5,
                               from_bf16(inputs["residual"]))
            chosen, routing, near = route(shape, round_bf16(y), from_bf16(inputs["router"]), inputs.get("correction"))
            if not near:
                break
        inputs.update(draw_experts(shape, chosen, rng))
    router = Launched("mixture_router", f"{case}_{'norm_' if norm else ''}shared", inputs, stream)
    try:
        got = {name: router.read(name) for name in ("ids", "weights", "hidden", *(["y"] if norm else []))}
    finally:
        router.free()
    v = decoded(shape, inputs)
    if norm:
        check_close(f"{case} normed rows", "bfloat16", from_bf16(got["y"]), y)
        v["x"] = from_bf16(got["y"])  # the experts read the rows the router normed
        chosen, routing, _ = route(shape, v["x"], v["router"], inputs.get("correction"))
    differ = np.flatnonzero((got["ids"] != chosen).any(axis=1))
    assert differ.size == 0, f"{case} ids: rows {differ.tolist()} differ"
    check_close(f"{case} routing weights", "float32", got["weights"], routing)
    want = hidden_reference(shape, v, got["ids"])
    from_router = from_bf16(got["hidden"])
    assert np.isnan(from_router[:, : top_k * inner]).all(), f"{case}: the router wrote routed columns of hidden"
    check_close(f"{case} shared hidden", "bfloat16", from_router[:, top_k * inner:], want[:, top_k * inner:])
    x = inputs["x"].copy()
    if norm:  # the normed rows in x's place (its pitch kept)
        x[:, :width] = to_bf16(v["x"])
    gated = Launched("mixture_gated", f"{case}_shared_in_router", {**inputs, "x": x, "ids": got["ids"]}, stream)
    try:
        from_gated = from_bf16(gated.read("hidden"))
    finally:
        gated.free()
    assert np.isnan(from_gated[:, top_k * inner:]).all(), f"{case}: mixture_gated wrote the shared columns"
    check_close(f"{case} routed hidden", "bfloat16", from_gated[:, : top_k * inner], want[:, : top_k * inner])


EARLY_SHARED = load("lanec_gpu_cases_mixture_early", HERE / "cases" / "mixture.py").EARLY_SHARED_SHAPES


@pytest.mark.parametrize("case", sorted(EARLY_SHARED))
def test_the_shared_warp_norms_before_the_wait(case, stream):
    """mixture_gated with `early_shared` (MIXTURE_EARLY_SHARED_ROWS): its shared warp norms the router's input
    (norm_x + residual, norm_w) itself and dots its shared units before the PDL wait, while the routed warps read
    the normed rows the router wrote (x). Every column of hidden is the interpreter's SwiGLU of the rows
    ops.rmsnorm gives, on fresh inputs with the outputs poisoned and the unchosen experts NaN."""
    shape = EARLY_SHARED[case]
    rows, width = shape["rows"], shape["width"]
    rng = np.random.default_rng()
    chosen = np.stack([rng.choice(shape["experts"], shape["top_k"], replace=False) for _ in range(rows)])
    inputs = {"norm_x": to_bf16(rng.standard_normal((rows, width), dtype=F32)),
              "norm_w": to_bf16(F32(1) + F32(0.1) * rng.standard_normal(width, dtype=F32)),
              "ids": chosen.astype(np.int32), **draw_experts(shape, chosen, rng)}
    residual = None
    if shape["residual"]:
        inputs["residual"] = to_bf16(rng.standard_normal((rows, width), dtype=F32))
        residual = from_bf16(inputs["residual"])
    normed = ops.rmsnorm(from_bf16(inputs["norm_x"]), from_bf16(inputs["norm_w"]), shape["eps"], residual)
    y = round_bf16(normed[0] if residual is not None else normed)
    inputs["x"] = to_bf16(y)  # the rows the router normed: the routed warps' activation
    gated = Launched("mixture_gated", f"{case}_early_shared", inputs, stream)
    try:
        hidden = from_bf16(gated.read("hidden"))
    finally:
        gated.free()
    v = decoded(shape, inputs)
    check_close(f"{case} hidden", "bfloat16", hidden, hidden_reference(shape, v, chosen))


READY = load("lanec_gpu_cases_mixture_ready", HERE / "cases" / "mixture.py").READY_SHAPES
STEPS = 3


def ready_inputs(shape: dict, rng) -> tuple[dict, np.ndarray, np.ndarray]:
    """Fresh inputs of a READY_SHAPES pair, drawn until the interpreter's choice from the rows the router dots
    (its x, or the rows it norms) hangs on no near tie; with the chosen experts' weights (NaN elsewhere) and the
    rows the experts read (bf16, as stored)."""
    rows, width = shape["rows"], shape["width"]
    for _ in range(50):
        inputs = draw_routing(shape, rng)
        rows_in = from_bf16(inputs["x"])[:, :width]
        if shape.get("norm"):
            inputs["norm_w"] = to_bf16(F32(1) + F32(0.1) * rng.standard_normal(width, dtype=F32))
            residual = None
            if shape["residual"]:
                inputs["residual"] = to_bf16(rng.standard_normal((rows, width), dtype=F32))
                residual = from_bf16(inputs["residual"])
            normed = ops.rmsnorm(rows_in, from_bf16(inputs["norm_w"]), shape["eps"], residual)
            rows_in = round_bf16(normed[0] if residual is not None else normed)
        chosen, _, near = route(shape, rows_in, from_bf16(inputs["router"]), inputs.get("correction"))
        if not near:
            return {**inputs, **draw_experts(shape, chosen, rng)}, chosen, rows_in
    raise AssertionError("50 draws of routing inputs each held a near tie")


@pytest.mark.parametrize("case", sorted(READY))
def test_the_gated_launch_acquires_the_flag(case, stream):
    """MIXTURE_READY_FLAG: mixture_router with `ready` raises a flag a row once that row's ids are stored, and
    mixture_gated with `ready` acquires it in place of the PDL wait for the router's end. Both are enqueued back to
    back (the gated launch under PDL: its CTAs start while the router runs) on shared buffers, for STEPS steps:
    before every step the ids, weights, normed rows and hidden values are poisoned, and the flags are left as the
    last step raised them (before the first: raised, 1), so a flag the router did not lower first would let
    mixture_gated read poisoned ids. Every step's ids are the interpreter's choice and its hidden values the
    interpreter's SwiGLU of the chosen experts of the rows the router wrote."""
    shape = READY[case]
    rows = shape["rows"]
    inputs, chosen, rows_in = ready_inputs(shape, np.random.default_rng())
    router_art = load_artifact(BUILD / "mixture_router", f"{case}_ready")
    gated_art = load_artifact(BUILD / "mixture_gated", f"{case}_ready")
    assert router_art.params and gated_art.params, f"{case}: no artifact; run tests/gpu/build.py"
    buffers, poisoned = {}, []

    def written(name: str, param) -> None:
        itemsize = 2 if param.dtype == "bfloat16" else 4
        buffers[name] = driver.Buffer.empty(int(np.prod(param.shape)) * itemsize)
        poisoned.append(name)

    try:
        for param in router_art.params:
            if param.name == "ready":
                buffers["ready"] = driver.Buffer.from_array(np.ones(rows, np.int32))  # raised, as a stale step's
            elif param.written:
                written(param.name, param)
            else:
                buffers[param.name] = driver.Buffer.from_array(np.ascontiguousarray(inputs[param.name]))
        # the gated launch reads the router's outputs, and (its early shared warp) the router's own input
        gated_names = {"x": "y" if shape.get("norm") else "x", "norm_x": "x"}
        for param in gated_art.params:
            name = gated_names.get(param.name, param.name)
            if name in buffers:
                continue
            if param.written:
                written(name, param)
            else:
                buffers[name] = driver.Buffer.from_array(np.ascontiguousarray(inputs[name]))
        functions = [(driver.Module(art.cubin).function(art.entry, art.launch), art, names)
                     for art, names in ((router_art, {}), (gated_art, gated_names))]
        v = decoded(shape, inputs)
        v["x"] = rows_in  # the rows the experts read: the router's normed rows where it norms
        want = hidden_reference(shape, v, chosen)
        for step in range(STEPS):
            for name in poisoned:
                buffers[name].fill(0xFF)
            for function, art, names in functions:
                driver.launch(function, art.launch, [buffers[names.get(p.name, p.name)].ptr for p in art.params],
                              stream)
            stream.synchronize()
            ids = buffers["ids"].to_array(np.int32, (rows, shape["top_k"]))
            differ = np.flatnonzero((ids != chosen).any(axis=1))
            assert differ.size == 0, f"{case} step {step} ids: rows {differ.tolist()} differ"
            hidden = from_bf16(buffers["hidden"].to_array(np.uint16, want.shape))
            check_close(f"{case} step {step} hidden", "bfloat16", hidden, want)
            flags = buffers["ready"].to_array(np.int32, (rows,))
            assert (flags == 1).all(), f"{case} step {step}: flags {flags.tolist()} after the step, want all 1"
    finally:
        for buffer in buffers.values():
            buffer.free()
