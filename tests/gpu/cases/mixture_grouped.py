"""The grouped mixture shapes the GPU tests check (tests/gpu/test_mixture_grouped.py), each as its
four launches after the router: mixture_groups.py, mixture_grouped_gated.py,
mixture_grouped_down.py and mixture_sum.py build every shape's kernels under the shape's name.
Experts 8..256, top-k 1..8, widths 512..2048 (one x read in place from a wider row, one width and
one expert width that are not whole tiles), batch 7, 24, 64 and 256; the routing (the interpreter's,
as tests/gpu/test_mixture.py draws it) from sigmoid and softmax scores, grouped and flat top-k;
one expert chosen by every row ("same"), experts chosen by no row (most of 256 at batch 7), and
segments longer than a block (64 rows at 8 and 16 experts at batch 256; 16 rows elsewhere, and 32
rows with 4 stages at Kimi's routing); the shared expert folded
(with and without its gate row, narrower and wider than a routed expert) and apart; stages of 128 K
values and the compact grid (the chosen experts' CTAs first), alone and together; the stage rows swizzled (the
default) and padded; each block of a segment in its own CTA (`spread`)."""

SHAPES = {
    "b7_e8_k1_sigmoid_apart": dict(
        rows=7, width=512, hidden=2048, experts=8, top_k=1, scoring="sigmoid", renormalize=False,
        routed_scaling=1.0),
    "b7_e256_k8_g8_sigmoid_correction_shared": dict(
        rows=7, width=1024, hidden=768, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=768),
    "b64_e64_k4_softmax_shared_gate_row": dict(
        rows=64, width=512, hidden=512, experts=64, top_k=4, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=512, shared_gate=True),
    "b64_e128_k8_sigmoid_correction_same_shared": dict(
        rows=64, width=1024, hidden=512, experts=128, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=512, inputs="same"),
    "b64_e8_k2_sigmoid_odd_apart": dict(  # K's tail (520 = 8 stages + 8) and a last tile of 8 units
        rows=64, width=520, hidden=200, experts=8, top_k=2, scoring="sigmoid", renormalize=True,
        routed_scaling=1.0),
    "b256_e256_k8_g8_sigmoid_correction_shared": dict(  # DeepSeek-V3's routing at a serving batch
        rows=256, width=2048, hidden=512, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=256),
    "b256_e16_k2_softmax_pitched_wider_shared": dict(
        rows=256, width=1024, hidden=256, experts=16, top_k=2, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=1536, shared_gate=True, x_pitch=1280),
    "b64_e64_k4_softmax_shared_gate_row_g16": dict(  # blocks of 16 rows: segments of 1-3 blocks, the gated
        # pair's warp columns of 8 gate and 8 up units
        rows=64, width=512, hidden=512, experts=64, top_k=4, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=512, shared_gate=True, group_rows=16),
    "b256_e256_k8_sigmoid_correction_shared_g32_s4": dict(  # Kimi Linear's routing, blocks of 32, 4 stages
        rows=256, width=1032, hidden=200, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=264, group_rows=32, stages=4),
    "b24_e64_k4_sigmoid_shared_g16": dict(  # the shared expert's two blocks: rows 0-15 and a partial 16-23
        rows=24, width=776, hidden=392, experts=64, top_k=4, scoring="sigmoid", renormalize=True,
        routed_scaling=1.0, correction=True, shared_hidden=520),
    "b7_e8_k1_sigmoid_apart_g16": dict(
        rows=7, width=512, hidden=2048, experts=8, top_k=1, scoring="sigmoid", renormalize=False,
        routed_scaling=1.0, group_rows=16),
    "b256_e8_k8_softmax_apart": dict(  # every row chooses every expert: 4 blocks of 64 rows each
        rows=256, width=512, hidden=512, experts=8, top_k=8, scoring="softmax", renormalize=False,
        routed_scaling=1.0),
    # stages of 128 K values (`stage_k`) and the chosen experts' CTAs first (`compact`), three of them with padded
    # stage rows (swizzle=False: the layout before MIXTURE_GROUP_SWIZZLE):
    "b24_e256_k8_sigmoid_correction_shared_compact": dict(  # Kimi Linear's routing at 24 rows: most experts
        # unchosen, the shared expert's two blocks first
        rows=24, width=1032, hidden=200, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=264, compact=True, swizzle=False),
    "b7_e256_k8_g8_sigmoid_correction_shared_k128": dict(  # K's tail: 1032 = 8 stages of 128 + 8
        rows=7, width=1032, hidden=768, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=768, stage_k=128, stages=2,
        swizzle=False),
    "b64_e64_k4_softmax_shared_gate_row_g16_k64": dict(  # 64 K values a stage, grid order: the path before
        rows=64, width=512, hidden=512, experts=64, top_k=4, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=512, shared_gate=True, group_rows=16, stage_k=64, compact=False,
        swizzle=False),
    "b64_e8_k2_sigmoid_odd_apart_k128_compact": dict(  # every expert chosen; K tails 520 and 200
        rows=64, width=520, hidden=200, experts=8, top_k=2, scoring="sigmoid", renormalize=True,
        routed_scaling=1.0, stage_k=128, stages=3, compact=True),
    "b256_e16_k2_softmax_pitched_wider_shared_k128_compact": dict(  # segments of several 64-row blocks
        rows=256, width=1024, hidden=256, experts=16, top_k=2, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=1536, shared_gate=True, x_pitch=1280, stage_k=128, stages=2,
        compact=True),
    # stage rows swizzled (`swizzle`, MIXTURE_GROUP_SWIZZLE, the default since the thirty-second session: every case
    # without the key): no padding, a vector at v ^ (row % 8) of its 128 bytes
    "b24_e256_k8_sigmoid_correction_shared_swizzled": dict(  # 128 K values, 3 stages (K tail 1032)
        rows=24, width=1032, hidden=200, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=264, swizzle=True),
    "b64_e8_k2_sigmoid_odd_apart_k64_swizzled": dict(  # 64 K values, 6 stages; K tails 520 and 200
        rows=64, width=520, hidden=200, experts=8, top_k=2, scoring="sigmoid", renormalize=True,
        routed_scaling=1.0, stage_k=64, swizzle=True),
    # grouped down CTAs of 64 outputs (`tile_n`, MIXTURE_DOWN_TILE): a width not a whole number of tiles (1032 = 16 x 64 + 8)
    "b24_e256_k8_sigmoid_correction_shared_down64": dict(
        rows=24, width=1032, hidden=200, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=264, down_tile=64),
    "b256_e8_k8_softmax_apart_down64_swizzled": dict(  # 64-row blocks: 2 x 4 warps of 2 column tiles each
        rows=256, width=512, hidden=512, experts=8, top_k=8, scoring="softmax", renormalize=False,
        routed_scaling=1.0, down_tile=64, swizzle=True),
    "b256_e16_k2_softmax_pitched_wider_shared_swizzled": dict(  # blocks of 64 rows (2 x 4 warps), segments of several
        rows=256, width=1024, hidden=256, experts=16, top_k=2, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=1536, shared_gate=True, x_pitch=1280, swizzle=True),
    # each block of a segment in a CTA of its own (`spread`, MIXTURE_GROUP_SPREAD_ROWS), ranked as the compact grid's:
    "b64_e128_k8_sigmoid_correction_same_shared_spread": dict(  # every row the same 8 experts: 4 blocks of 16 each
        rows=64, width=1024, hidden=512, experts=128, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=512, inputs="same", group_rows=16, spread=True),
    "b256_e256_k8_sigmoid_correction_shared_spread": dict(  # Kimi Linear's routing at 256 rows, K tail 1032
        rows=256, width=1032, hidden=200, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=264, spread=True),
    "b256_e16_k2_softmax_pitched_wider_shared_spread_k128": dict(  # segments of 2-4 blocks of 16, 128 K values
        rows=256, width=1024, hidden=256, experts=16, top_k=2, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=1536, shared_gate=True, x_pitch=1280, group_rows=16, stage_k=128,
        spread=True),
    "b7_e8_k1_sigmoid_apart_spread_down64": dict(  # one block a segment; down CTAs of 64 outputs
        rows=7, width=520, hidden=200, experts=8, top_k=1, scoring="sigmoid", renormalize=False,
        routed_scaling=1.0, spread=True, down_tile=64),
}


def groups_spec(shape: dict) -> dict:
    return {k: shape[k] for k in ("rows", "experts", "top_k")}


def gated_spec(shape: dict) -> dict:
    return {k: shape[k] for k in ("rows", "width", "hidden", "experts", "top_k", "shared_hidden", "x_pitch",
                                  "group_rows", "stages", "stage_k", "compact", "swizzle", "spread") if k in shape}


def down_spec(shape: dict) -> dict:
    spec = {k: shape[k] for k in ("rows", "width", "hidden", "experts", "top_k", "shared_hidden", "group_rows",
                                  "stages", "stage_k", "compact", "swizzle", "spread") if k in shape}
    return {**spec, "tile_n": shape["down_tile"]} if "down_tile" in shape else spec


def sum_spec(shape: dict) -> dict:
    spec = {"rows": shape["rows"], "width": shape["width"], "top_k": shape["top_k"],
            "shared": bool(shape.get("shared_hidden")), "shared_gate": bool(shape.get("shared_gate"))}
    if shape.get("shared_gate") and shape.get("x_pitch"):
        spec["x_pitch"] = shape["x_pitch"]
    return spec
