"""The expanded latent attention (lanec/codegen/kernels/latent_expanded.py): its two launches
(latent_expand, this module's cases, then expanded_attention: expanded_attention.py builds one for
each shape here) the GPU tests check (tests/gpu/test_latent_expanded.py), one shape a case, named
alike in both: Kimi
Linear's MLA with a nope part of 80 (held back from the absorbed path: not whole 32-value blocks;
key 80 + 64 padded to 160), DeepSeek-V3's 16-head shard at rope 64 and nope 112, a NoPE row with
speculative verify (4 tokens) and several chunks, the step's latent and rotated key read in place
from wider rows, odd batches and page sizes 16, 32 and 64."""

KERNEL = "latent_expand"

SHAPES = {
    "b3_t1_h32_n80_r64_l512_v128_p64": dict(batch=3, tokens=1, heads=32, nope=80, rope=64, lora=512, v=128,
                                           page_size=64, max_pages=12, cache_pages=50),
    "b2_t4_h16_n112_r64_l512_v128_p16_s3": dict(batch=2, tokens=4, heads=16, nope=112, rope=64, lora=512, v=128,
                                               page_size=16, max_pages=40, cache_pages=100, splits=3,
                                               latent_pitch=576, k_rope_pitch=576),
    "b5_t2_h4_n40_r0_l256_v64_p32_s2": dict(batch=5, tokens=2, heads=4, nope=40, rope=0, lora=256, v=64,
                                           page_size=32, max_pages=10, cache_pages=60, splits=2),
}

CASES = {name: {k: v for k, v in shape.items() if k != "splits"} for name, shape in SHAPES.items()}


def make(spec: dict):
    from lanec.codegen.kernels.latent_expanded import LatentExpand

    return LatentExpand(**spec)
