"""attention specializations the GPU tests check (tests/gpu/test_attention.py): odd shapes (3
requests of 3 tokens, 12 query heads over 4 KV heads) and round ones (Llama-3-8B's 32 / 8 x 128
and its 8 / 2 tensor-parallel shard), every head size and page size, groups of 1, 2, 4 and 16
query heads, 1 to 32 KV heads and 4 to 128 query heads, query rows past one CTA's (16 heads x 8
tokens), one chunk and several (their partials merged by the attention_combine case of the same
name), and q / k / v read in place from wider rows. Every case's page table reaches a few
thousand positions, two reach 32k; the test spreads the requests' contexts over it. Some of
them again with the bulk-copy load engine (`loads` "bulk", named `<case>_bulk`): one and four
tokens, odd and round shapes, every page size and head size, split and whole, to 32k. Split cases
again with their chunks merged in the launch's own cluster (`combine` "cluster", `<case>_cluster`), and some
of those writing their result in the quantized form (fuse-quant's epilogue, `quantize` 1 or 2 words,
`<case>_cluster_q<words>`): the dense q8_0 example's, head sizes 64 and 256, a chunk share that is not
whole 32-value blocks (3 chunks), four tokens. Three shapes again on the two schedules that fit 3 CTAs an SM
(`<case>_tile32`, `<case>_stages2`)."""

KERNEL = "attention"

CASES = {
    "b3_t3_h12_kv4_d128_p16": dict(batch=3, tokens=3, heads=12, kv_heads=4, head=128, page_size=16,
                                   max_pages=192, cache_pages=600),
    "b3_t3_h12_kv4_d128_p16_s4": dict(batch=3, tokens=3, heads=12, kv_heads=4, head=128, page_size=16,
                                      max_pages=192, cache_pages=600, splits=4),
    "b1_t1_h32_kv8_d128_p16_s8": dict(batch=1, tokens=1, heads=32, kv_heads=8, head=128, page_size=16,
                                      max_pages=256, cache_pages=300, splits=8),
    "b8_t1_h32_kv8_d128_p64": dict(batch=8, tokens=1, heads=32, kv_heads=8, head=128, page_size=64,
                                   max_pages=48, cache_pages=400),
    "b4_t4_h8_kv2_d128_p32_s3": dict(batch=4, tokens=4, heads=8, kv_heads=2, head=128, page_size=32,
                                     max_pages=96, cache_pages=400, splits=3),
    "b2_t4_h16_kv16_d64_p16_pitched": dict(batch=2, tokens=4, heads=16, kv_heads=16, head=64, page_size=16,
                                           max_pages=128, cache_pages=300, q_pitch=3072, k_pitch=3072,
                                           v_pitch=1032),
    "b2_t1_h4_kv1_d256_p64_s2": dict(batch=2, tokens=1, heads=4, kv_heads=1, head=256, page_size=64,
                                     max_pages=40, cache_pages=100, splits=2),
    "b2_t8_h32_kv2_d128_p16_s2": dict(batch=2, tokens=8, heads=32, kv_heads=2, head=128, page_size=16,
                                      max_pages=128, cache_pages=300, splits=2),
    "b3_t2_h32_kv2_d256_p32": dict(batch=3, tokens=2, heads=32, kv_heads=2, head=256, page_size=32,
                                   max_pages=64, cache_pages=250, scale=0.1),
    # contexts to 32k positions; 32 KV heads; 128 query heads (16 a KV head, 2 tokens: two row blocks)
    "b2_t1_h64_kv32_d64_p64_32k_s16": dict(batch=2, tokens=1, heads=64, kv_heads=32, head=64, page_size=64,
                                           max_pages=512, cache_pages=1100, splits=16),
    "b1_t2_h128_kv8_d128_p32_32k_s32": dict(batch=1, tokens=2, heads=128, kv_heads=8, head=128, page_size=32,
                                            max_pages=1024, cache_pages=1100, splits=32),
    "b5_t1_h8_kv8_d64_p64_s5": dict(batch=5, tokens=1, heads=8, kv_heads=8, head=64, page_size=64,
                                    max_pages=40, cache_pages=256, splits=5),
}

BULK = ["b8_t1_h32_kv8_d128_p64", "b4_t4_h8_kv2_d128_p32_s3", "b3_t3_h12_kv4_d128_p16", "b2_t1_h4_kv1_d256_p64_s2",
        "b2_t1_h64_kv32_d64_p64_32k_s16", "b1_t1_h32_kv8_d128_p16_s8"]
CASES.update({f"{name}_bulk": dict(CASES[name], schedule={"loads": "bulk"}) for name in BULK})

# a chunk reaching more page-table entries than shared memory stages (ATTENTION_STAGED_PAGES): each looked up
# as it is copied; the other cases stage theirs
CASES["b2_t1_h8_kv2_d128_p16_pages600"] = dict(batch=2, tokens=1, heads=8, kv_heads=2, head=128, page_size=16,
                                               max_pages=600, cache_pages=1300)

# chunks that are not whole tiles, whose last tile reads the next chunk's cache rows (masked) through the staged
# page-table entries: 33 chunks of 32k keys (993 a chunk: 264 CTAs, two an SM; it read one entry past the staged
# ones, an illegal address, until chunk_pages counted whole tiles) and 13 chunks of 1600 (124 a chunk)
CASES["b1_t1_h32_kv8_d128_p16_32k_s33"] = dict(batch=1, tokens=1, heads=32, kv_heads=8, head=128, page_size=16,
                                               max_pages=2048, cache_pages=2100, splits=33)
CASES["b2_t1_h8_kv2_d128_p16_s13"] = dict(batch=2, tokens=1, heads=8, kv_heads=2, head=128, page_size=16,
                                          max_pages=100, cache_pages=260, splits=13)

# the dense example's attention as the lane launches it at batch 1 (CLUSTER_COMBINE_CTAS: 4 blocks x 8 chunks,
# q and k read from the paired rope's rows at pitch 2560, v in place at 3072)
CASES["b1_t1_h16_kv4_d128_p16_s8_pitched"] = dict(batch=1, tokens=1, heads=16, kv_heads=4, head=128, page_size=16,
                                                  max_pages=128, cache_pages=128, splits=8, q_pitch=2560,
                                                  k_pitch=2560, v_pitch=3072)

# shapes again on the schedules that fit 3 CTAs an SM (session.sh pending-gqa-tiles): 4 stages of 32 keys
# (`<case>_tile32`) and 2 stages of 64 (`<case>_stages2`): 32k keys in 32 chunks, odd rows, head size 256
TILES = ["b1_t2_h128_kv8_d128_p32_32k_s32", "b3_t3_h12_kv4_d128_p16_s4", "b2_t1_h4_kv1_d256_p64_s2"]
CASES.update({f"{name}_tile32": dict(CASES[name], schedule={"tile": 32, "stages": 4}) for name in TILES})
CASES.update({f"{name}_stages2": dict(CASES[name], schedule={"tile": 64, "stages": 2}) for name in TILES})

# split cases again with their chunks combined inside the launch (`combine` "cluster", named
# `<case>_cluster`): 2 to 8 chunks, head sizes 64, 128 and 256, one and four tokens, and with bulk loads
CLUSTER = ["b4_t4_h8_kv2_d128_p32_s3", "b1_t1_h32_kv8_d128_p16_s8", "b3_t3_h12_kv4_d128_p16_s4",
           "b1_t1_h16_kv4_d128_p16_s8_pitched",
           "b2_t1_h4_kv1_d256_p64_s2", "b5_t1_h8_kv8_d64_p64_s5", "b4_t4_h8_kv2_d128_p32_s3_bulk"]
CASES.update({f"{name}_cluster": dict(CASES[name], schedule={**CASES[name].get("schedule", {}), "combine": "cluster"})
              for name in CLUSTER})


def make(spec: dict):
    from lanec.codegen.kernels.attention import Attention

    return Attention(**spec)

# the cluster's merge writing the quantized form a q8_0 product reads (`quantize`, words 1 or 2)
QUANTIZED = [("b1_t1_h16_kv4_d128_p16_s8_pitched", 1), ("b1_t1_h16_kv4_d128_p16_s8_pitched", 2),
             ("b4_t4_h8_kv2_d128_p32_s3", 2), ("b5_t1_h8_kv8_d64_p64_s5", 1), ("b2_t1_h4_kv1_d256_p64_s2", 1)]
CASES.update({f"{name}_cluster_q{words}": dict(CASES[f"{name}_cluster"], quantize=words) for name, words in QUANTIZED})
