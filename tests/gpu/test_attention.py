"""attention, latent_attention and attention_combine on the GPU against the interpreter
(lanec.interp.ops.attention, fp32; the latent attention as GQA with one KV head whose key is the
cache row and whose value its latent part), cases from tests/gpu/cases/attention.py,
latent_attention.py (the mma.sync engine), latent_wgmma.py (the default, wgmma) and attention_combine.py
(built by tests/gpu/build.py). Every run draws
fresh inputs and caches, spreads the requests' contexts over the page table (one as long as it
reaches, one at position 0, the others anywhere), shuffles the pages they own (the table's other
columns are -1: never read) and poisons the outputs. The caches
must come back exactly as the interpreter writes them; a split case's partials are merged by the
combine case of the same name and the result checked as `out` (a `combine` "cluster" case merges
them in its own launch and writes `out` itself; a `quantize` case writes it in the quantized form, checked
by `_check_quantized`). The combine is also checked alone, on random partials where some chunks hold no
keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loader import load
from quantized_inputs import quantized_values

from lanec.interp import ops
from lanec.runtime import driver, tolerance
from lanec.runtime.artifact import load_artifact
from lanec.runtime.dtypes import from_bf16, to_bf16
from lanec.runtime.tolerance import KERNEL

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "gpu"


def _cases(kernel: str) -> dict:
    return load(f"lanec_gpu_cases_{kernel}", HERE / "cases" / f"{kernel}.py").CASES


ATTENTION, COMBINE = _cases("attention"), _cases("attention_combine")
LATENT = {"latent_attention": _cases("latent_attention"), "latent_wgmma": _cases("latent_wgmma")}  # by engine


def attention_inputs(spec: dict, rng) -> dict:
    """Fresh inputs of an attention case: bf16 values (q / k / v as wide as their pitch), each
    request's consecutive positions, a shuffled page table and random caches."""
    batch, tokens, heads, kv, d = (spec[k] for k in ("batch", "tokens", "heads", "kv_heads", "head"))
    page_size, max_pages, cache_pages = spec["page_size"], spec["max_pages"], spec["cache_pages"]
    rows = batch * tokens
    reach = max_pages * page_size - tokens  # the last first position the table holds
    first = rng.integers(0, reach + 1, size=batch)
    first[0] = reach
    if batch > 1:
        first[1] = 0
    owned = [-(-(p + tokens) // page_size) for p in first]
    shuffled = rng.permutation(cache_pages)[: sum(owned)]
    pages = np.full((batch, max_pages), -1, dtype=np.int32)
    for b, count in enumerate(owned):
        pages[b, :count] = shuffled[sum(owned[:b]): sum(owned[:b]) + count]
    inputs = {}
    for name, width, pitch in (("q", heads * d, spec.get("q_pitch")), ("k", kv * d, spec.get("k_pitch")),
                               ("v", kv * d, spec.get("v_pitch"))):
        inputs[name] = to_bf16(rng.standard_normal((rows, pitch or width), dtype=np.float32))
    inputs["positions"] = (np.repeat(first, tokens) + np.tile(np.arange(tokens), batch)).astype(np.int32)
    inputs["pages"] = pages
    for name in ("k_cache", "v_cache"):
        inputs[name] = to_bf16(rng.standard_normal((cache_pages, page_size, kv, d), dtype=np.float32))
    return inputs


def attention_reference(spec: dict, inputs: dict) -> dict:
    """{out, k_cache, v_cache} as the interpreter computes and writes them."""
    heads, kv, d = spec["heads"], spec["kv_heads"], spec["head"]
    q, k, v = (from_bf16(inputs[name]) for name in ("q", "k", "v"))
    caches = {name: from_bf16(inputs[name]) for name in ("k_cache", "v_cache")}
    out = ops.attention(q[:, : heads * d], k[:, : kv * d], v[:, : kv * d], caches["k_cache"], caches["v_cache"],
                        inputs["pages"], inputs["positions"], heads, kv, spec.get("scale", d ** -0.5),
                        spec["tokens"])
    return {"out": out, "k_cache": to_bf16(caches["k_cache"]), "v_cache": to_bf16(caches["v_cache"])}


def latent_inputs(spec: dict, rng) -> dict:
    """Fresh inputs of a latent_attention case: the absorbed queries, the query projection (its
    rotated parts read in place), the step's latent and rotated key rows (as wide as their
    pitch), positions and a shuffled page table as `attention_inputs`, a random latent cache."""
    batch, tokens, heads, lora, rope = (spec[k] for k in ("batch", "tokens", "heads", "lora", "rope"))
    unit = spec.get("nope", 0) + rope
    shared = attention_inputs(dict(spec, kv_heads=1, head=lora + rope), rng)
    rows = batch * tokens
    inputs = {"positions": shared["positions"], "pages": shared["pages"]}
    for name, width, pitch in (("q", heads * lora, None), ("qr", heads * unit, spec.get("qr_pitch")),
                               ("latent", lora, spec.get("latent_pitch")), ("k_rope", rope, spec.get("k_rope_pitch"))):
        if width:
            inputs[name] = to_bf16(rng.standard_normal((rows, pitch or width), dtype=np.float32))
    inputs["cache"] = to_bf16(rng.standard_normal((spec["cache_pages"], spec["page_size"], lora + rope),
                                                  dtype=np.float32))
    return inputs


def latent_reference(spec: dict, inputs: dict) -> dict:
    """{out, cache} by the interpreter's GQA attention with one KV head: head h's query [q_h,
    qr_h's rotated part], key the cache row, value its latent part."""
    heads, lora, rope, nope = spec["heads"], spec["lora"], spec["rope"], spec.get("nope", 0)
    unit = nope + rope
    q = from_bf16(inputs["q"]).reshape(-1, heads, lora)
    rows = q.shape[0]
    latent = from_bf16(inputs["latent"])[:, :lora]
    if rope:
        qr = from_bf16(inputs["qr"])[:, : heads * unit].reshape(rows, heads, unit)[:, :, nope:]
        q = np.concatenate([q, qr], axis=2)
        latent_row = np.concatenate([latent, from_bf16(inputs["k_rope"])[:, :rope]], axis=1)
    else:
        latent_row = latent
    cache = from_bf16(inputs["cache"])[:, :, None, :]
    values = np.ascontiguousarray(cache[..., :lora])
    scale = spec.get("scale", ((nope + rope) or lora) ** -0.5)
    out = ops.attention(q.reshape(rows, -1), latent_row, latent, cache, values, inputs["pages"],
                        inputs["positions"], heads, 1, scale, spec["tokens"])
    return {"out": out, "cache": to_bf16(cache[:, :, 0, :])}


def combine_reference(partial: np.ndarray, lse: np.ndarray) -> np.ndarray:
    top = lse.max(axis=0)
    weight = np.exp(lse - top)  # exp(-inf) = 0: a chunk without keys adds nothing
    merged = (weight[..., None] * partial).sum(axis=0) / weight.sum(axis=0)[..., None]
    return merged.reshape(partial.shape[1], -1)


def _check_close(what: str, got: np.ndarray, want: np.ndarray, tolerance=KERNEL["bfloat16"]) -> None:
    assert not np.isnan(got).any(), f"{what}: {int(np.isnan(got).sum())} of {got.size} never written"
    excess = tolerance.excess(got, want)
    worst = int(np.argmax(excess))
    assert excess.flat[worst] <= 0, (f"{what}: {int((excess > 0).sum())} of {got.size} outside tolerance; worst at "
                                     f"{np.unravel_index(worst, got.shape)}: got {got.flat[worst]}, "
                                     f"want {want.flat[worst]}")


def _check_quantized(what: str, stored: np.ndarray, want: np.ndarray, words: int) -> None:
    """`quantize`: the attention's rows in the quantized form (fuse-quant's epilogue). Its fp32 values
    differ from numpy's within the attention's tolerance, so each block's scale must be the interpreter's
    within it, and each value the form stands for within half a quantum (the scale, or with two words the
    scale / 254) plus that tolerance of the interpreter's."""
    rows, width = want.shape
    blocks = width // 32
    scale = np.ascontiguousarray(stored[:, words * width:words * width + 4 * blocks]).view(np.float32)
    assert np.isfinite(scale).all(), f"{what}: {int((~np.isfinite(scale)).sum())} block scales never written"
    want_scale = np.abs(want).reshape(rows, blocks, 32).max(axis=-1) / np.float32(127)
    _check_close(f"{what} block scales", scale, want_scale, tolerance.ATTENTION["bfloat16"])
    quantum = (want_scale if words == 1 else want_scale / np.float32(254))[:, :, None]
    bound = tolerance.ATTENTION["bfloat16"]
    error = np.abs(quantized_values(stored, width, words) - want).reshape(rows, blocks, 32)
    allowed = quantum * np.float32(0.5 + 1e-3) + (bound.rtol * np.abs(want) + bound.atol * np.abs(want).max()
                                                   ).reshape(rows, blocks, 32)
    worst = np.unravel_index(int(np.argmax(error - allowed)), error.shape)
    assert (error <= allowed).all(), (f"{what}: {int((error > allowed).sum())} of {want.size} values past half a "
                                      f"quantum and the attention's tolerance; worst row {worst[0]} block "
                                      f"{worst[1]}: error {error[worst]:.3g}, allowed {allowed[worst]:.3g}")


class Launched:
    """One built case: its buffers (inputs uploaded, outputs poisoned with 0xFF: NaN), launched."""

    def __init__(self, kernel: str, case: str, spec: dict, inputs: dict, stream):
        artifact = load_artifact(BUILD / kernel, case)
        assert artifact.params and artifact.launch, f"{kernel}/{case}: no artifact; run tests/gpu/build.py"
        self.params = {p.name: p for p in artifact.params}
        self.buffers = {}
        for param in artifact.params:
            if param.tensor_map is not None:  # encoded below, over the buffer of the param it maps
                continue
            if param.name in inputs:
                self.buffers[param.name] = driver.Buffer.from_array(np.ascontiguousarray(inputs[param.name]))
            else:  # the span a strided param reaches (gemm_tc's stream workspace: a slot a row)
                span = 1 + sum((n - 1) * s for n, s in zip(param.shape, param.element_strides, strict=True))
                nbytes = span * np.dtype(np.uint16 if param.dtype == "bfloat16" else param.dtype).itemsize
                self.buffers[param.name] = driver.Buffer.empty(nbytes)
                self.buffers[param.name].fill(0xFF)
        # a tensor-map param (gemm_tc's TMA loads) is the address of a map over its param's buffer,
        # as the runtime's Session encodes it
        self.maps = driver.TensorMaps(sum(p.tensor_map is not None for p in artifact.params))
        pointers = self.maps.pointers(artifact.params, {name: b.ptr for name, b in self.buffers.items()})
        self.maps.upload()
        self.function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
        self.shape, self.pointers = artifact.launch, pointers
        self.again(stream)

    def again(self, stream) -> None:
        """Launch once more on the same buffers (a next step: what the launch before left in a
        workspace, it finds)."""
        driver.launch(self.function, self.shape, self.pointers, stream)
        stream.synchronize()

    def read(self, name: str) -> np.ndarray:
        param = self.params[name]
        if param.dtype == "bfloat16":
            return self.buffers[name].to_array(np.uint16, param.shape)
        return self.buffers[name].to_array(np.dtype(param.dtype), param.shape)

    def free(self) -> None:
        for buffer in self.buffers.values():
            buffer.free()
        self.maps.free()


@pytest.mark.parametrize(("kernel", "case"), [("attention", c) for c in sorted(ATTENTION)]
                         + [(k, c) for k in sorted(LATENT) for c in sorted(LATENT[k])])
def test_attention_matches_interpreter(kernel, case, stream):
    latent = kernel in LATENT
    spec = LATENT[kernel][case] if latent else ATTENTION[case]
    inputs = (latent_inputs if latent else attention_inputs)(spec, np.random.default_rng())
    expected = (latent_reference if latent else attention_reference)(spec, inputs)
    launched = Launched(kernel, case, spec, inputs, stream)
    merged = None
    try:
        for name in ("cache",) if latent else ("k_cache", "v_cache"):
            differ = np.flatnonzero(launched.read(name).ravel() != expected[name].ravel())
            assert differ.size == 0, f"{case} {name}: {differ.size} values differ from the interpreter's cache"
        if spec.get("quantize"):
            _check_quantized(case, launched.read("out"), expected["out"], spec["quantize"])
            return
        if spec.get("splits", 1) == 1 or spec.get("schedule", {}).get("combine") == "cluster":
            _check_close(f"{case} out", from_bf16(launched.read("out")), expected["out"],
                         tolerance.ATTENTION["bfloat16"])
            return
        partial, lse = launched.read("partial"), launched.read("lse")  # bf16 partials as their bits
        values = from_bf16(partial) if partial.dtype == np.uint16 else partial
        assert not np.isnan(values).any() and not np.isnan(lse).any(), f"{case}: partial or lse not all written"
        merged = Launched("attention_combine", case, COMBINE[case], {"partial": partial, "lse": lse}, stream)
        _check_close(f"{case} combined out", from_bf16(merged.read("out")), expected["out"],
                         tolerance.ATTENTION["bfloat16"])
    finally:
        launched.free()
        if merged is not None:
            merged.free()


@pytest.mark.parametrize("case", sorted(COMBINE))
def test_combine_matches_reference(case, stream):
    spec = COMBINE[case]
    rng = np.random.default_rng()
    splits, rows, heads, d = spec["splits"], spec["rows"], spec["heads"], spec["head"]
    partial = rng.standard_normal((splits, rows, heads, d), dtype=np.float32)
    lse = rng.uniform(-20.0, 20.0, size=(splits, rows, heads)).astype(np.float32)
    empty = rng.random((splits, rows, heads)) < 0.3
    empty[0] = False  # chunk 0 always holds position 0
    lse[empty], partial[empty] = -np.inf, 0.0
    stored = partial
    if spec.get("partials") == "bfloat16":  # the rows as the attention stores them: bf16, the reference's too
        stored = to_bf16(partial)
        partial = from_bf16(stored)
    launched = Launched("attention_combine", case, spec, {"partial": stored, "lse": lse}, stream)
    try:
        _check_close(f"{case} out", from_bf16(launched.read("out")), combine_reference(partial, lse))
    finally:
        launched.free()
