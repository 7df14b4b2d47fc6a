"""The expanded latent attention on the GPU against the interpreter's `latent_attention` (fp32,
keys and values expanded from the cache in fp32): `latent_expand` on fresh inputs (a random latent
cache, shuffled pages, the requests' contexts spread over the table as in test_attention.py,
outputs poisoned), its latent cache compared bit for bit with the interpreter's, then
`expanded_attention` on the keys and values it wrote (a split case merged by the attention_combine
case of the same name), held to `tolerance.ATTENTION`. Cases: tests/gpu/cases/latent_expanded.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.interp import ops
from lanec.runtime import tolerance, weights
from lanec.runtime.dtypes import from_bf16, to_bf16
from lanec.runtime.plan import Transform

HERE = Path(__file__).resolve().parent


_attention = load("lanec_gpu_attention_for_expanded", HERE / "test_attention.py")
Launched, attention_inputs, check_close = _attention.Launched, _attention.attention_inputs, _attention._check_close
_expand = load("lanec_gpu_cases_latent_expand_for_test", HERE / "cases" / "latent_expanded.py")
SHAPES, EXPAND = _expand.SHAPES, _expand.CASES
ATTEND = load("lanec_gpu_cases_expanded_attention_for_test", HERE / "cases" / "expanded_attention.py").CASES
COMBINE = load("lanec_gpu_cases_combine_for_expanded", HERE / "cases" / "attention_combine.py").CASES


def expanded_inputs(shape: dict, rng) -> dict:
    batch, tokens, heads, nope, rope, lora, v = (shape[k] for k in ("batch", "tokens", "heads", "nope", "rope",
                                                                    "lora", "v"))
    shared = attention_inputs(dict(shape, kv_heads=1, head=lora + rope), rng)
    rows = batch * tokens
    inputs = {"positions": shared["positions"], "pages": shared["pages"],
              "qr": to_bf16(rng.standard_normal((rows, heads * (nope + rope)), dtype=np.float32)),
              "latent": to_bf16(rng.standard_normal((rows, shape.get("latent_pitch") or lora), dtype=np.float32)),
              "cache": to_bf16(rng.standard_normal((shape["cache_pages"], shape["page_size"], lora + rope),
                                                   dtype=np.float32)),
              # kv_b at 1 / sqrt(lora): expanded keys and values of unit size, scores of a few units
              "kv_b": to_bf16(rng.standard_normal((heads * (nope + v), lora), dtype=np.float32) * lora ** -0.5)}
    if rope:
        inputs["k_rope"] = to_bf16(rng.standard_normal((rows, shape.get("k_rope_pitch") or rope), dtype=np.float32))
    return inputs


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_expanded_latent_attention_matches_interpreter(case, stream):
    shape = SHAPES[case]
    heads, nope, rope, lora, v, tokens = (shape[k] for k in ("heads", "nope", "rope", "lora", "v", "tokens"))
    inputs = expanded_inputs(shape, np.random.default_rng())
    rows = inputs["qr"].shape[0]
    latent = from_bf16(inputs["latent"])[:, :lora]
    k_rope = from_bf16(inputs["k_rope"])[:, :rope] if rope else np.zeros((rows, 0), np.float32)
    cache = from_bf16(inputs["cache"])
    want = ops.latent_attention(from_bf16(inputs["qr"]), latent, k_rope, cache, from_bf16(inputs["kv_b"]),
                                inputs["pages"], inputs["positions"], heads, nope, rope, lora, v,
                                (nope + rope) ** -0.5, tokens)
    # kv_b as the plan binds it for latent_expand: each head's rows transposed, [heads x lora, nope + v]
    w = inputs["kv_b"]
    for transform in (Transform("reshape", {"shape": [heads, nope + v, lora]}),
                      Transform("transpose", {"axes": [0, 2, 1]}),
                      Transform("reshape", {"shape": [heads * lora, nope + v]})):
        w = weights.apply(transform, [w])
    expand_inputs = {name: inputs[name] for name in ("latent", "k_rope", "positions", "pages", "cache")
                     if name in inputs}
    expand = Launched("latent_expand", case, EXPAND[case], {**expand_inputs, "w": w}, stream)
    attend = merged = None
    try:
        differ = np.flatnonzero(expand.read("cache").ravel() != to_bf16(cache).ravel())
        assert differ.size == 0, f"{case} cache: {differ.size} values differ from the interpreter's cache"
        attend = Launched("expanded_attention", case, ATTEND[case],
                          {"q": inputs["qr"], "positions": inputs["positions"], "pages": inputs["pages"],
                           "keys": expand.read("keys"), "values": expand.read("values")}, stream)
        if shape.get("splits", 1) == 1:
            check_close(f"{case} out", from_bf16(attend.read("out")), want, tolerance.ATTENTION["bfloat16"])
            return
        partial, lse = attend.read("partial"), attend.read("lse")
        assert not np.isnan(partial).any() and not np.isnan(lse).any(), f"{case}: partial or lse not all written"
        merged = Launched("attention_combine", case, COMBINE[case], {"partial": partial, "lse": lse}, stream)
        check_close(f"{case} combined out", from_bf16(merged.read("out")), want, tolerance.ATTENTION["bfloat16"])
    finally:
        for launched in (expand, attend, merged):
            if launched is not None:
                launched.free()
