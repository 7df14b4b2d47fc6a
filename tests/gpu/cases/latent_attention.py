"""latent_attention (absorbed MLA) specializations on the mma.sync engine the GPU tests check
(tests/gpu/test_attention.py): Kimi Linear's 32 heads with a NoPE row (lora 512, rope 0) and
with a rotated part (512 + 64), DeepSeek-V3's 128 heads (four row blocks) and its 16-head shard,
an odd shape (12 heads, lora 256 + rope 32, 3 requests), speculative verify (4 and 8 tokens), one
chunk and several (merged by the attention_combine case of the same name), and the query's
rotated part and the step's latent read in place from wider rows. Kimi Linear's (512 + 0) and
DeepSeek-V3's (512 + 64) rows again with the bulk-copy load engine (`loads` "bulk", named
`<case>_bulk`), one and four tokens, split and whole. Split cases again with their chunks merged in
the launch's own cluster (`combine` "cluster", `<case>_cluster`). The default engine, wgmma, has the
same shapes in latent_wgmma.py; here the engine is named ("mma")."""

KERNEL = "latent_attention"

CASES = {
    "b3_t1_h32_l512_r64_p64": dict(batch=3, tokens=1, heads=32, lora=512, rope=64, page_size=64, max_pages=48,
                                   cache_pages=200, nope=128),
    "b2_t4_h32_l512_nope_p16_s3": dict(batch=2, tokens=4, heads=32, lora=512, rope=0, page_size=16, max_pages=160,
                                       cache_pages=400, splits=3, latent_pitch=2304),
    "b1_t1_h128_l512_r64_p64_s8": dict(batch=1, tokens=1, heads=128, lora=512, rope=64, page_size=64,
                                       max_pages=64, cache_pages=80, splits=8, nope=128),
    "b5_t2_h16_l512_r64_p32": dict(batch=5, tokens=2, heads=16, lora=512, rope=64, page_size=32, max_pages=40,
                                   cache_pages=300, nope=128, qr_pitch=16 * 192 + 64, k_rope_pitch=576,
                                   latent_pitch=576),
    "b2_t1_h32_l512_nope_p64_32k_s64": dict(batch=2, tokens=1, heads=32, lora=512, rope=0, page_size=64,
                                            max_pages=512, cache_pages=1100, splits=64),
    "b3_t3_h12_l256_r32_p32_s2": dict(batch=3, tokens=3, heads=12, lora=256, rope=32, page_size=32, max_pages=64,
                                      cache_pages=250, splits=2, nope=64, scale=0.05),
    "b2_t8_h16_l512_r64_p16_s4": dict(batch=2, tokens=8, heads=16, lora=512, rope=64, page_size=16, max_pages=128,
                                      cache_pages=300, splits=4, nope=128),
}

SHAPES = dict(CASES)  # the plain shapes (latent_wgmma.py runs them on the wgmma engine)

BULK = ["b3_t1_h32_l512_r64_p64", "b2_t4_h32_l512_nope_p16_s3", "b1_t1_h128_l512_r64_p64_s8",
        "b2_t1_h32_l512_nope_p64_32k_s64", "b5_t2_h16_l512_r64_p32"]
CASES.update({f"{name}_bulk": dict(CASES[name], schedule={"loads": "bulk"}) for name in BULK})

# split cases merged in the launch's own cluster (`combine` "cluster", `<case>_cluster`): the 512-wide
# rows of a chunk left in its key buffers for its peers
CLUSTER = ["b2_t4_h32_l512_nope_p16_s3", "b3_t3_h12_l256_r32_p32_s2", "b2_t8_h16_l512_r64_p16_s4",
           "b2_t4_h32_l512_nope_p16_s3_bulk"]
CASES.update({f"{name}_cluster": dict(CASES[name], schedule={**CASES[name].get("schedule", {}), "combine": "cluster"})
              for name in CLUSTER})

for _name, _spec in CASES.items():  # the mma.sync kernel's (wgmma is the default where none is named)
    if "schedule" not in _spec:
        CASES[_name] = dict(_spec, schedule={"engine": "mma"})


def make(spec: dict):
    from lanec.codegen.kernels.attention import LatentAttention

    return LatentAttention(**spec)
