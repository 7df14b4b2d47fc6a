"""latent_attention on its wgmma engine (lanec/codegen/kernels/latent_wgmma.py, the default) the GPU tests
check (tests/gpu/test_attention.py): every plain shape of latent_attention.py, with the engine named.
They cover one warpgroup and two (blocks of more than 32 rows: DeepSeek-V3's 128 heads, 4 and 8
speculative tokens, 12 heads x 3 tokens split 18 + 18 padded to 24 rows), key widths of whole 64-value
chunks and not (288: 256 + 32, its ring capped at three tiles), one chunk and several (merged by the
attention_combine case of the same name), and split shapes again with their chunks merged in the launch's
own cluster (`combine` "cluster", `<case>_cluster`): 2 to 8 chunks, one warpgroup and two (DeepSeek-V3's 128
heads: 2 blocks of 64 rows), 4 and 8 tokens, a 288-wide key, and Kimi Linear's batch-1 step at 1k keys (8
chunks of one block: the shape LATENT_CLUSTER_COMBINE_CTAS was measured on, whole and in its cluster), and
three split shapes with their chunks' rows in bf16 (`partials`, `<case>_bf16`)."""

from pathlib import Path

from loader import load  # tests/gpu/loader.py

KERNEL = "latent_wgmma"

_SHAPES = load("lanec_gpu_cases_latent_attention_shapes", Path(__file__).with_name("latent_attention.py")).SHAPES
CASES = {name: dict(shape, schedule={"engine": "wgmma"}) for name, shape in _SHAPES.items()}
CASES["b1_t1_h32_l512_nope_p16_1k_s8"] = dict(batch=1, tokens=1, heads=32, lora=512, rope=0, page_size=16,
                                              max_pages=64, cache_pages=80, splits=8, schedule={"engine": "wgmma"})
# 128 chunks of 256 keys (MAX_SPLITS since the combine's lanes): Kimi Linear's batch-1 step at 32k keys
CASES["b1_t1_h32_l512_nope_p16_32k_s128"] = dict(batch=1, tokens=1, heads=32, lora=512, rope=0, page_size=16,
                                                 max_pages=2048, cache_pages=2100, splits=128,
                                                 schedule={"engine": "wgmma"})
CLUSTER = ["b2_t4_h32_l512_nope_p16_s3", "b1_t1_h128_l512_r64_p64_s8", "b3_t3_h12_l256_r32_p32_s2",
           "b2_t8_h16_l512_r64_p16_s4", "b1_t1_h32_l512_nope_p16_1k_s8"]
CASES.update({f"{name}_cluster": dict(CASES[name], schedule={"engine": "wgmma", "combine": "cluster"})
              for name in CLUSTER})
# each chunk's rows stored bf16 for attention_combine (`partials`, LATENT_PARTIALS): Kimi Linear at 32k keys in
# 128 chunks, DeepSeek-V3's two blocks of 64 rows, and 12 heads x 3 tokens over a 288-wide key
PARTIALS = ["b1_t1_h32_l512_nope_p16_32k_s128", "b1_t1_h128_l512_r64_p64_s8", "b3_t3_h12_l256_r32_p32_s2"]
CASES.update({f"{name}_bf16": dict(CASES[name], schedule={"engine": "wgmma", "partials": "bfloat16"})
              for name in PARTIALS})


def make(spec: dict):
    from lanec.codegen.kernels.attention import LatentAttention

    return LatentAttention(**spec)
