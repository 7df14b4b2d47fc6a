"""Every kernel case of tests/gpu/cases/ on the GPU against the reference interpreter
(lanec.interp.ops, fp32): fresh random inputs for every case, outputs poisoned with 0xFF bytes
first (NaN in bf16 / f32, -1 in int32) so that an element the kernel never writes fails, and a
tolerance by output dtype. The cubins come from `python tests/gpu/build.py` on the CPU machine."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from lanec.codegen.facts import ARGMAX_GROUPS, ARGMAX_SLOT, argmax_groups
from lanec.interp import ops
from lanec.runtime import driver
from lanec.runtime.artifact import load_artifact
from lanec.runtime.dtypes import from_bf16, round_bf16, storage, to_bf16
from lanec.runtime.tolerance import KERNEL

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "gpu"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"lanec_gpu_cases_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slot_sums(partial: np.ndarray, rows: int, slots: int) -> np.ndarray:
    """A grouped mixture's result from its partial rows: a row's slots summed in slot order in fp32,
    rounded to bf16 (mixture_sum's, which `slots` folds into rmsnorm)."""
    parts = partial.astype(np.float32).reshape(rows, slots, -1)
    total = np.zeros_like(parts[:, 0])
    for k in range(slots):
        total = total + parts[:, k]
    return round_bf16(total)


def _reference_rmsnorm(spec, inputs):
    if spec.get("slots"):  # mixture_sum folded in: the slots summed, then the norm of that (plus the residual)
        x = slot_sums(inputs["x"], spec["rows"], spec["slots"])
        result = ops.rmsnorm(x, inputs["w"], spec["eps"], residual=inputs.get("residual"))
        return {"y": result[0], "h": result[1]} if spec.get("residual") else {"y": result}
    if spec.get("gather"):  # the embed folded in: the table's rows at the tokens, written to h as they are
        rows = ops.embed(inputs["tokens"], inputs["x"])
        return {"y": ops.rmsnorm(rows, inputs["w"], spec["eps"]), "h": rows}
    result = ops.rmsnorm(inputs["x"], inputs["w"], spec["eps"], residual=inputs.get("residual"))
    return {"y": result[0], "h": result[1]} if spec.get("residual") else {"y": result}


def _reference_gemv(spec, inputs):
    if spec.get("rider_width"):  # the norm riding in the launch: rmsnorm's result beside the product's
        rest = {k: v for k, v in spec.items() if not k.startswith("rider_")}
        return {**_reference_gemv(rest, inputs), "rider_y": ops.rmsnorm(inputs["rider_x"], inputs["rider_w"],
                                                                         spec["rider_eps"])}
    if spec.get("combine_splits"):  # the chunks merged as attention_combine stores them (bf16), then the product
        lse, partial = inputs["lse"], inputs["partial"]
        weight = np.exp(lse - lse.max(axis=0))  # exp(-inf) = 0: a chunk without keys adds nothing
        merged = (weight[..., None] * partial).sum(axis=0) / weight.sum(axis=0)[..., None]
        rows, heads, width = merged.shape
        x = round_bf16(merged.reshape(rows, heads * width).astype(np.float32))
        return {"y": ops.product_part(x, inputs["w"], heads, width, 0, width)}
    if spec.get("norm"):  # rmsnorm, then the product of its output as the prologue holds it: in fp32, unrounded
        if spec.get("residual"):
            normed, h = ops.rmsnorm(inputs["x"], inputs["norm_w"], spec["eps"], residual=inputs["residual"])
            return {"y": ops.product(normed, inputs["w"]), "h": h}
        return {"y": ops.product(ops.rmsnorm(inputs["x"], inputs["norm_w"], spec["eps"]), inputs["w"])}
    if spec.get("per_head"):
        heads, unit, offset = spec["per_head"]
        return {"y": ops.product_part(inputs["x"], inputs["w"], heads, unit, offset, spec["width"])}
    return {"y": ops.product(inputs["x"], inputs["w"])}


def _reference_elementwise(spec, inputs):
    function = getattr(ops, spec["op"])
    operands = [inputs[name] for name in ("a", "b") if name in inputs]
    return {"out": function(*operands)}


def _reference_rope(spec, inputs):
    """The kernel's specialization as the form's rope: its scaling dict's kind and properties."""
    scaling = dict(spec.get("scaling") or {})
    kind = scaling.pop("kind", None)
    return ops.rope(inputs["x"], inputs["positions"], spec["heads"], spec["rotary"], spec["theta"], kind,
                    offset=spec.get("offset", 0), interleaved=int(spec.get("interleaved", False)), **scaling)


def _reference_head_norm(spec, inputs):
    """head_norm serves l2norm (no mean, no weight), head_norm (a weight) and norm_gated (and a gate)."""
    x, heads, eps = inputs["x"], spec["heads"], spec["eps"]
    if not spec.get("mean", True):
        return {"y": ops.l2norm(x, heads, eps)}
    if spec.get("gate"):
        return {"y": ops.norm_gated(x, inputs["gate"], inputs["w"], heads, eps, spec["gate"])}
    return {"y": ops.head_norm(x, inputs["w"], heads, eps)}


REFERENCES = {
    "gemv": _reference_gemv,
    "gated_gemv": lambda spec, inputs: {"out": ops.gated_product(inputs["x"], inputs["gate"], inputs["up"])},
    "rmsnorm": _reference_rmsnorm,
    "elementwise": _reference_elementwise,
    "embed": lambda spec, inputs: {"out": ops.embed(inputs["tokens"], inputs["table"])},
    "argmax": lambda spec, inputs: {"out": ops.argmax(inputs["x"])},
    "head_norm": _reference_head_norm,
    "kda_gate": lambda spec, inputs: {"decay": ops.kda_gate(inputs["g"], inputs["a_log"], inputs["dt_bias"],
                                                           spec["heads"], spec.get("form", "softplus"),
                                                           spec.get("lower_bound"))},
    "part": lambda spec, inputs: {"y": ops.part(inputs["x"], spec["heads"], spec["unit"], spec["offset"],
                                                spec["length"])},
    "rope": lambda spec, inputs: {"out": _reference_rope(spec, inputs)},
}


def _cases():
    cases = []
    for path in sorted((HERE / "cases").glob("*.py")):
        module = _load(path)
        if getattr(module, "KERNEL", None) in REFERENCES:
            cases += [pytest.param(module.KERNEL, name, spec, id=f"{module.KERNEL}-{name}")
                      for name, spec in module.CASES.items()
                      if not spec.get("quantize")]  # the quantized epilogues: test_quantize.py
    return cases


def _random_input(param, spec, rng) -> tuple[np.ndarray, np.ndarray]:
    """(values as the reference sees them, bytes as the device stores them)."""
    if param.name == "tokens":
        tokens = rng.integers(0, spec.get("vocab", spec.get("gather")), size=param.shape, dtype=np.int32)
        return tokens, tokens
    if param.name == "lse" and spec.get("combine_splits"):  # chunks without keys (-inf) among them, never chunk 0
        lse = rng.uniform(-20.0, 20.0, size=param.shape).astype(np.float32)
        empty = rng.random(param.shape) < 0.25
        empty[0] = False
        lse[empty] = -np.inf
        return lse, lse
    if param.name == "positions":  # spread over a long context: angles of tens of thousands of radians
        positions = rng.integers(0, 32768, size=param.shape, dtype=np.int32)
        return positions, positions
    if len(param.shape) == 2 and param.strides and param.strides[0] != param.shape[1]:
        # rows read in place from a wider row: the device holds the whole pitch, the kernel the part
        wide = rng.standard_normal((param.shape[0], param.strides[0]), dtype=np.float32)
        return round_bf16(wide[:, : param.shape[1]]), to_bf16(wide)
    values = rng.standard_normal(param.shape, dtype=np.float32)
    if param.dtype == "bfloat16":
        return round_bf16(values), to_bf16(values)
    if param.dtype == "float32":
        return values, values
    raise AssertionError(f"no random input for {param.name}: {param.dtype}")


def _read(buffer, param) -> np.ndarray:
    if param.dtype == "bfloat16":
        return from_bf16(buffer.to_array(np.uint16, param.shape))
    return buffer.to_array(np.dtype(param.dtype), param.shape)


def _compare(what: str, dtype: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if dtype == "int32":
        bad = np.flatnonzero(got.ravel() != want.ravel())
        assert bad.size == 0, (f"{what}: {bad.size} of {got.size} differ; first at {bad[0]}: got "
                               f"{got.ravel()[bad[0]]}, want {want.ravel()[bad[0]]}")
        return
    unwritten = np.isnan(got)
    assert not unwritten.any(), (f"{what}: {int(unwritten.sum())} of {got.size} elements never written "
                                 f"(first at {np.argwhere(unwritten)[0].tolist()})")
    excess = KERNEL[dtype].excess(got, want)  # the tolerance by output dtype, shared with `lanec run --check`
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (f"{what}: {int((excess > 0).sum())} of {got.size} outside tolerance; "
                                     f"worst at {np.unravel_index(worst, got.shape)}: got {got.flat[worst]}, "
                                     f"want {want.flat[worst]}")


@pytest.fixture(scope="module")
def manifest():
    path = BUILD / "manifest.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python tests/gpu/build.py` on the CPU machine and carry build/",
                    pytrace=False)
    return {entry["stem"]: entry for entry in json.loads(path.read_text())["cases"]}


def argmax_scratch(ctas: int) -> dict:
    """The argmax epilogue's scratch after its launches: every key slot back at the identity (all
    ones); the grid's ticket (row 0) and each group's (row 1 + g) at its draws less one, the count
    the last draw leaves; the rest of each 128-byte slot as poisoned."""
    groups = argmax_groups(ctas)
    tickets = np.full((ARGMAX_GROUPS + 1, ARGMAX_SLOT), -1, np.int32)
    tickets[0, 0] = groups - 1
    for group in range(groups):
        tickets[1 + group, 0] = len(range(group, ctas, groups)) - 1
    return {"best": np.full((ARGMAX_GROUPS + 1, ARGMAX_SLOT), -1, np.int32), "tickets": tickets}


@pytest.mark.parametrize(("kernel", "case", "spec"), _cases())
def test_kernel_matches_interpreter(kernel, case, spec, manifest, stream):
    stem = f"{kernel}/{case}"
    assert stem in manifest and manifest[stem]["spec"] == spec, (
        f"{stem}: build/gpu is stale for this case; rebuild with python tests/gpu/build.py")
    artifact = load_artifact(BUILD / kernel, case)
    function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
    rng = np.random.default_rng()  # fresh inputs every run
    inputs, buffers = {}, []
    for param in artifact.params:
        if param.written:
            buffer = driver.Buffer.empty(int(np.prod(param.shape)) * storage(param.dtype).itemsize)
            buffer.fill(0xFF)
        else:
            inputs[param.name], stored = _random_input(param, spec, rng)
            buffer = driver.Buffer.from_array(stored)
        buffers.append(buffer)
    try:
        # an argmax epilogue three times: from the poisoned scratch, then from what each launch left
        for _ in range(3 if spec.get("argmax") else 1):
            driver.launch(function, artifact.launch, [b.ptr for b in buffers], stream)
        stream.synchronize()
        expected = REFERENCES[kernel](spec, inputs)
        outputs = [(p, b) for p, b in zip(artifact.params, buffers) if p.written]
        if spec.get("argmax"):  # the stored y's argmax (ties by the GPU's own rounding), the scratch at its start
            y = next(_read(b, p) for p, b in outputs if p.name == "y")
            expected.update(chosen=ops.argmax(y), **argmax_scratch(artifact.launch.grid[0]))
        assert sorted(p.name for p, _ in outputs) == sorted(expected)
        for param, buffer in outputs:
            want = np.asarray(expected[param.name])
            _compare(f"{stem} {param.name}", param.dtype, _read(buffer, param), want)
    finally:
        for buffer in buffers:
            buffer.free()
