"""attention_combine specializations: one for every split case of attention.py,
latent_attention.py, latent_wgmma.py and expanded_attention.py (named as it: tests/gpu/test_attention.py merges that case's partials with
it), and merges of random partials with chunks that hold no keys (lse = -inf), up to 64 chunks and 128 (the
split sweep's most): a lane a chunk (2, 13 in 16 lanes), one or two a lane (40, 64 in 32), four (128), and
slices past the output in the last block (5 heads x 64 values: 40 slices in 32-slice blocks of 4 lanes); two
of those merges again from bf16 partial rows (`partials`, `_bf16`)."""

from pathlib import Path

from loader import load  # tests/gpu/loader.py

KERNEL = "attention_combine"


def _cases(kernel: str) -> dict:
    return load(f"lanec_gpu_cases_{kernel}_for_combine", Path(__file__).with_name(f"{kernel}.py")).CASES


CASES = {
    "r7_h12_d128_s64": dict(rows=7, heads=12, head=128, splits=64),
    "r64_h8_d64_s2": dict(rows=64, heads=8, head=64, splits=2),
    "r3_h40_d256_s13": dict(rows=3, heads=40, head=256, splits=13),
    "r5_h32_d512_s40": dict(rows=5, heads=32, head=512, splits=40),
    "r2_h3_d64_s128": dict(rows=2, heads=3, head=64, splits=128),
    "r1_h5_d64_s3": dict(rows=1, heads=5, head=64, splits=3),
    "r5_h32_d512_s40_bf16": dict(rows=5, heads=32, head=512, splits=40, partials="bfloat16"),
    "r2_h3_d64_s128_bf16": dict(rows=2, heads=3, head=64, splits=128, partials="bfloat16"),
}
for _kernel in ("attention", "latent_attention", "latent_wgmma", "expanded_attention"):
    for _name, _case in _cases(_kernel).items():
        if _case.get("splits", 1) > 1 and _case.get("schedule", {}).get("combine") != "cluster":
            CASES[_name] = dict(rows=_case["batch"] * _case["tokens"], heads=_case["heads"],
                                head=_case.get("head", _case.get("lora", _case.get("v"))), splits=_case["splits"],
                                **{k: v for k, v in _case.get("schedule", {}).items() if k == "partials"})


def make(spec: dict):
    from lanec.codegen.kernels.attention import AttentionCombine

    return AttentionCombine(**spec)
