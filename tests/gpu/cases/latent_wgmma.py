"""latent_attention on its wgmma engine (lanec/codegen/kernels/latent_wgmma.py, the default) the GPU tests
check (tests/gpu/test_attention.py): every plain shape of latent_attention.py, with the engine named.
They cover one warpgroup and two (blocks of more than 32 rows: DeepSeek-V3's 128 heads, 4 and 8
speculative tokens, 12 heads x 3 tokens split 18 + 18 padded to 24 rows), key widths of whole 64-value
chunks and not (288: 256 + 32, its ring capped at three tiles), one chunk and several (merged by the
attention_combine case of the same name), and split shapes again with their chunks merged in the launch's
own cluster (`combine` "cluster", `<case>_cluster`): 2 to 8 chunks, one warpgroup and two (DeepSeek-V3's 128
heads: 2 blocks of 64 rows), 4 and 8 tokens, a 288-wide key, and Kimi Linear's batch-1 step at 1k keys (8
chunks of one block: the shape LATENT_CLUSTER_COMBINE_CTAS was measured on, whole and in its cluster), and
three split shapes with their chunks' rows in bf16 (`partials`, `<case>_bf16`), and five shapes in blocks of
fewer query rows (`block_rows` 8 or 16, `<case>_r8`), Kimi Linear's real-size batch-1 step among them."""

from pathlib import Path

from loader import load  # tests/gpu/loader.py

from lanec.codegen.schedules import shape_of
from lanec.codegen.schedules import table as schedule_table

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

# the real-size Kimi Linear plan's latent attention at batch 1 and 1k keys (its 512 + 64 row, pages of 64, 8 chunks,
# bf16 partials), whole and in blocks of fewer query rows (`block_rows`: more CTAs reading the same chunks)
CASES["b1_t1_h32_l512_r64_p64_1k_s8_bf16"] = dict(batch=1, tokens=1, heads=32, lora=512, rope=64, page_size=64,
                                                  max_pages=16, cache_pages=20, splits=8, nope=128,
                                                  schedule={"engine": "wgmma", "partials": "bfloat16"})
# blocks of 8 and 16 rows: 32 heads in 4 blocks; 12 heads x 3 tokens (36 rows) in 3 blocks of 12 (padded to 16);
# 4 tokens of 32 heads in 16 blocks of 8, split; 128 heads in 8 blocks of 16, whole
BLOCK_ROWS = {"b1_t1_h32_l512_r64_p64_1k_s8_bf16": 8, "b3_t3_h12_l256_r32_p32_s2": 16,
              "b2_t4_h32_l512_nope_p16_s3": 8, "b1_t1_h128_l512_r64_p64_s8": 16, "b3_t1_h32_l512_r64_p64": 16}
CASES.update({f"{name}_r{rows}": dict(CASES[name], schedule={**CASES[name]["schedule"], "block_rows": rows})
              for name, rows in BLOCK_ROWS.items()})
# the cuts `latent_cut` gives the real-size step at 1k keys: batch 1 in 16 chunks of 8-row blocks, batch 8 (odd
# requests' pages) in 8 chunks of 16-row blocks
CASES["b1_t1_h32_l512_r64_p64_1k_s16_bf16_r8"] = dict(CASES["b1_t1_h32_l512_r64_p64_1k_s8_bf16"], splits=16,
                                                      schedule={"engine": "wgmma", "partials": "bfloat16",
                                                                "block_rows": 8})
CASES["b8_t1_h32_l512_r64_p64_1k_s8_bf16_r16"] = dict(CASES["b1_t1_h32_l512_r64_p64_1k_s8_bf16"], batch=8,
                                                      cache_pages=150,
                                                      schedule={"engine": "wgmma", "partials": "bfloat16",
                                                                "block_rows": 16})

# every latent_attention entry of the schedule table (lanec/codegen/schedules.json), at its shape in pages of 64 with
# its splits and knobs: an entry joins the table once these pass
for _key, _entry in schedule_table().get("latent_attention", {}).items():
    _shape = shape_of(_key)
    _pages = -(-_shape["context"] // 64)
    CASES[f"tuned_{_key.replace(',', '_').replace('=', '')}"] = dict(
        batch=_shape["batch"], tokens=_shape["tokens"], heads=_shape["heads"], lora=_shape["lora"], rope=_shape["rope"],
        page_size=64, max_pages=_pages, cache_pages=_shape["batch"] * _pages + 3, nope=128 if _shape["rope"] else None,
        splits=_entry.get("splits", 1), schedule={"engine": "wgmma", **_entry.get("schedule", {})})


def make(spec: dict):
    from lanec.codegen.kernels.attention import LatentAttention

    return LatentAttention(**spec)
