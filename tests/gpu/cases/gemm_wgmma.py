"""gemm_tc's wgmma engine (`lanec/codegen/kernels/gemm_wgmma.py`, the default) on every
hand-written gemm_tc shape (tests/gpu/cases/gemm_tc.py) and one unsplit 256-row product;
tests/gpu/test_gemm_tc.py checks them as it checks gemm_tc's. Its weight tile is 128 rows, so a
case's forced tile is dropped, and it needs 3 stages or more (a case's splits are kept, its stages
raised to 3); all of a case's rows are one block, padded to whole 8-row wgmma N steps, except in the
row-block cases (BLOCKS and a gated one: `block_rows`, a CTA a block of rows)."""

from pathlib import Path

from loader import load  # tests/gpu/loader.py

KERNEL = "gemm_wgmma"

CASES = {}
for _name, _spec in load("lanec_gpu_cases_gemm_tc_for_wgmma", Path(__file__).with_name("gemm_tc.py")).CASES.items():
    if not _name.startswith("tuned_"):
        _knobs = {k: v for k, v in _spec.get("schedule", {}).items() if k != "tile_n"}
        if "stages" in _knobs:
            _knobs["stages"] = max(3, _knobs["stages"])
        CASES[_name] = dict(_spec, schedule={**_knobs, "engine": "wgmma"})
CASES["r256_k4096_n2304_k1"] = dict(rows=256, width=4096, parts=[2304], schedule={"engine": "wgmma", "splits": 1})
# row blocks (block_rows): a CTA a block of rows, the rows split evenly (odd blocks padded to 8)
BLOCKS = {
    "blocks_r256_k2304_n4096_b64": dict(rows=256, width=2304, parts=[4096], schedule={"block_rows": 64}),
    "blocks_r100_k1000_n320_b32_k2": dict(rows=100, width=1000, parts=[320], schedule={"block_rows": 32, "splits": 2}),
    "blocks_r33_k4096_n2304_b32": dict(rows=33, width=4096, parts=[2304], schedule={"block_rows": 32}),
    "blocks_r200_k2304_merged_b128": dict(rows=200, width=2304, parts=[4096, 4096, 4096, 128, 32, 128],
                                          schedule={"block_rows": 128}),
}
for _name, _spec in BLOCKS.items():
    CASES[_name] = dict(_spec, schedule={**_spec["schedule"], "engine": "wgmma"})


def make(spec: dict):
    from lanec.codegen.kernels.gemm_tc import GemmTc

    return GemmTc(**spec)

# gated pairs: gate and up tiles side by side (64 + 64 weight rows a CTA), SwiGLU in the epilogue:
# Kimi Linear's dense MLP (9216 hidden) and an expert's (1024), Llama-3-8B's (14336 hidden over K
# 4096), a split K and an odd row count, and the fewest hidden values (one pair tile)
GATED = {
    "gated_r64_k2304_h9216": dict(rows=64, width=2304, parts=[2 * 9216]),
    "gated_r33_k2304_h1024": dict(rows=33, width=2304, parts=[2 * 1024]),
    "gated_r256_k4096_h14336": dict(rows=256, width=4096, parts=[2 * 14336]),
    "gated_r100_k1000_h192_k4": dict(rows=100, width=1000, parts=[2 * 192], schedule={"splits": 4}),
    "gated_r9_k128_h64_pitch": dict(rows=9, width=128, parts=[128], x_pitch=136),
    "gated_r200_k2048_h1024_b128": dict(rows=200, width=2048, parts=[2 * 1024], schedule={"block_rows": 128}),
}
for _name, _spec in GATED.items():
    CASES[_name] = dict(_spec, gated=True, schedule={**_spec.get("schedule", {}), "engine": "wgmma"})

# TMA loads (loads "tma": one thread's cp.async.bulk.tensor a box, the runtime's tensor maps): one
# block of 256 rows (the widest box), row blocks with a split K and an odd block (padded, its
# padding rows the next block's), a pitched activation, rows past the tensor and K past 64-value
# stages (zero fill), a gated pair in row blocks, and Kimi Linear's merged KDA product
TMA = {
    "tma_r256_k2304_merged": dict(rows=256, width=2304, parts=[4096, 4096, 4096, 128, 32, 128]),
    "tma_r100_k1000_n320_b32_k2": dict(rows=100, width=1000, parts=[320], schedule={"block_rows": 32, "splits": 2}),
    "tma_r33_k4096_n2304": dict(rows=33, width=4096, parts=[2304]),
    "tma_r9_k136_n72_pitch": dict(rows=9, width=136, parts=[72], x_pitch=144),
    "tma_r64_k2304_n12288_k2": dict(rows=64, width=2304, parts=[12288], schedule={"splits": 2}),
    "tma_gated_r200_k2048_h1024_b128": dict(rows=200, width=2048, parts=[2 * 1024], gated=True,
                                           schedule={"block_rows": 128}),
}
for _name, _spec in TMA.items():
    CASES[_name] = dict(_spec, schedule={**_spec.get("schedule", {}), "engine": "wgmma", "loads": "tma"})
    # the same boxes issued by a producer warpgroup (loads "producer"), the stages handed back on mbarriers
    CASES[_name.replace("tma_", "producer_")] = dict(_spec, schedule={**_spec.get("schedule", {}), "engine": "wgmma",
                                                                        "loads": "producer"})

# the row box multicast over a cluster of neighbouring weight tiles (producer loads, no K split): a
# whole 256-row box in halves, quarters of a 64-row box with the tiles rounded up to whole clusters,
# odd rows padded to whole slices in row blocks, and a gated pair
MULTICAST = {
    "multicast2_r256_k2304_n4096": dict(rows=256, width=2304, parts=[4096], schedule={"multicast": 2}),
    "multicast4_r64_k2304_n2304": dict(rows=64, width=2304, parts=[2304], schedule={"multicast": 4}),
    "multicast2_r100_k1000_n320_b32": dict(rows=100, width=1000, parts=[320],
                                           schedule={"multicast": 2, "block_rows": 32}),
    "multicast2_gated_r200_k2048_h1024_b128": dict(rows=200, width=2048, parts=[2 * 1024], gated=True,
                                                  schedule={"multicast": 2, "block_rows": 128}),
}
for _name, _spec in MULTICAST.items():
    CASES[_name] = dict(_spec, schedule={**_spec["schedule"], "engine": "wgmma", "loads": "producer"})


# stream-K (`stream`: that many CTAs deal out the (weight tile, row block, K stage) units; a tile cut
# between CTAs is summed through the workspace in CTA order): Kimi Linear's merged KDA product at 256
# rows (96 tiles on 132 CTAs) and its q proj at 64 (32 tiles, each cut over about 4 CTAs), one tile of
# 3 K stages over 3 CTAs with a pitched activation, row blocks of 32 with a K tail (12 tiles, a CTA
# one or two units), a gated pair in row blocks, 33 rows over K 4096 and 100 CTAs on 18 tiles at 4 stages
STREAM = {
    "stream_r256_k2304_merged": dict(rows=256, width=2304, parts=[4096, 4096, 4096, 128, 32, 128],
                                     schedule={"stream": 132}),
    "stream_r64_k2304_n4096": dict(rows=64, width=2304, parts=[4096], schedule={"stream": 132}),
    "stream_r9_k136_n72_pitch": dict(rows=9, width=136, parts=[72], x_pitch=144, schedule={"stream": 3}),
    "stream_r100_k1000_n320_b32": dict(rows=100, width=1000, parts=[320], schedule={"stream": 132, "block_rows": 32}),
    "stream_gated_r200_k2048_h1024_b128": dict(rows=200, width=2048, parts=[2 * 1024], gated=True,
                                               schedule={"stream": 132, "block_rows": 128}),
    "stream_r33_k4096_n2304": dict(rows=33, width=4096, parts=[2304], schedule={"stream": 132}),
    "stream_r31_k4096_n2304_g100_s4": dict(rows=31, width=4096, parts=[2304], schedule={"stream": 100, "stages": 4}),
}
for _name, _spec in STREAM.items():
    CASES[_name] = dict(_spec, schedule={**_spec["schedule"], "engine": "wgmma"})

# fp32 outputs (`out_dtype`: a router's logits, ROUTER_GEMM_ROWS): Kimi Linear's router at 64 rows (2
# tiles, K split over 8), DeepSeek-V3's at 256 rows, and 33 rows of a pitched activation
FLOAT32 = {
    "f32_r64_k2304_n256": dict(rows=64, width=2304, parts=[256]),
    "f32_r256_k7168_n256": dict(rows=256, width=7168, parts=[256]),
    "f32_r33_k1000_n320_pitch": dict(rows=33, width=1000, parts=[320], x_pitch=1008),
}
for _name, _spec in FLOAT32.items():
    CASES[_name] = dict(_spec, out_dtype="float32", schedule={"engine": "wgmma"})

# weight tiles of other widths (`tile_n`: a consumer warpgroup a 64 weight rows): 192 rows on Kimi
# Linear's merged KDA product at 256 rows in blocks of 128 (66 x 2 CTAs, the last tile past N), on 100
# odd rows over a K tail with thread copies, with a pitched activation by TMA, in a stream-K launch and
# multicast over a cluster; 256 rows in blocks of 64; 64 rows (one consumer) with a split K
WIDE = {
    "wide192_r256_k2304_merged_b128": dict(rows=256, width=2304, parts=[4096, 4096, 4096, 128, 32, 128],
                                           schedule={"tile_n": 192, "block_rows": 128, "loads": "producer",
                                                     "stages": 4}),
    "wide192_r100_k1000_n320": dict(rows=100, width=1000, parts=[320], schedule={"tile_n": 192}),
    "wide192_r9_k136_n200_pitch_tma": dict(rows=9, width=136, parts=[200], x_pitch=144,
                                           schedule={"tile_n": 192, "loads": "tma"}),
    "wide192_stream_r128_k2304_n4096": dict(rows=128, width=2304, parts=[4096], schedule={"tile_n": 192,
                                                                                          "stream": 132}),
    "wide192_multicast2_r256_k2304_n4096_b128": dict(rows=256, width=2304, parts=[4096],
                                                     schedule={"tile_n": 192, "block_rows": 128,
                                                               "loads": "producer", "multicast": 2}),
    "wide256_r256_k4096_n2304_b64": dict(rows=256, width=4096, parts=[2304],
                                         schedule={"tile_n": 256, "block_rows": 64, "loads": "producer"}),
    "wide64_r33_k4096_n2304_k2": dict(rows=33, width=4096, parts=[2304], schedule={"tile_n": 64, "splits": 2}),
}
for _name, _spec in WIDE.items():
    CASES[_name] = dict(_spec, schedule={**_spec["schedule"], "engine": "wgmma"})

# two CTAs an SM (`occupancy` 2: each compiled for half the registers, its stages in half the shared memory):
# a producer warpgroup's 192-row tiles in blocks of 64 rows, thread copies with a split K and odd rows
OCCUPANCY = {
    "wide_occ2_r256_k2304_n4096_t192_b64": dict(rows=256, width=2304, parts=[4096],
                                                schedule={"tile_n": 192, "block_rows": 64, "stages": 3,
                                                          "loads": "producer", "occupancy": 2}),
    "wide_occ2_r61_k2304_n4096_t64_k3": dict(rows=61, width=2304, parts=[4096],
                                             schedule={"tile_n": 64, "splits": 3, "stages": 4, "occupancy": 2}),
}
for _name, _spec in OCCUPANCY.items():
    CASES[_name] = dict(_spec, schedule={**_spec["schedule"], "engine": "wgmma"})

# per-head reads (`per_head` = heads, unit, offset: each CTA's weight tile inside one head, its activation loads that
# head's part of the row; GEMM_PER_HEAD_FROM): Kimi Linear's absorbed query at 256 rows (a producer's row boxes over
# the pitched q row) and at 64 (thread copies), its value expansion at 256 (K split over a cluster), odd rows over a
# K tail at an offset inside the head (copies), row boxes at an offset, and 64-row heads in 64-row tiles
PER_HEAD = {
    "per_head_r256_kimi_absorb": dict(rows=256, width=128, parts=[32 * 512], per_head=[32, 192, 0], x_pitch=6720),
    "per_head_r64_kimi_absorb": dict(rows=64, width=128, parts=[32 * 512], per_head=[32, 192, 0], x_pitch=6720),
    "per_head_r256_kimi_expand": dict(rows=256, width=512, parts=[32 * 128], per_head=[32, 512, 0]),
    "per_head_r100_k200_h3_off16": dict(rows=100, width=200, parts=[3 * 128], per_head=[3, 232, 16]),
    "per_head_r37_k128_h5_off32_tma": dict(rows=37, width=128, parts=[5 * 128], per_head=[5, 160, 32],
                                           schedule={"loads": "tma"}),
    "per_head_r200_k256_h6_t64": dict(rows=200, width=256, parts=[6 * 64], per_head=[6, 256, 0],
                                      schedule={"tile_n": 64}),
}
for _name, _spec in PER_HEAD.items():
    CASES[_name] = dict(_spec, schedule={**_spec.get("schedule", {}), "engine": "wgmma"})
