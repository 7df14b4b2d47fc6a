"""The mixture shapes the GPU tests check (tests/gpu/test_mixture.py), each as its three launches:
mixture_router.py, mixture_gated.py and mixture_down.py build every shape's router, gated and
down kernels under the shape's name. Experts 8..512, top-k 1..10, widths 512..2048 (one x read in
place from a wider row), batch 1, 2, 7, 64 and 256, sigmoid and softmax scores, with and without the
correction bias, grouped and flat top-k, the router scoring 1, 2, 4 or 8 rows a cluster, the shared expert folded (with and without its sigmoid
gate row, narrower and wider than a routed expert) and apart (a routed-only mixture), mixture_down at 5, 6 and
32 units a warp (`down_schedule`), and both at other vectors a lane in flight (`gated_schedule`), down with its
first chunk of rows before its PDL wait (`early_weights`). `inputs`
says how the test draws the routing: "random"; "ties" (few distinct values, every logit exact
in fp32 and each router row repeated four times: equal scores at every boundary, broken by the
lowest index); "same" (one expert scores far above the rest for every row)."""

SHAPES = {
    "b1_e256_k8_sigmoid_correction_shared": dict(
        rows=1, width=2048, hidden=512, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=512),
    "b2_e64_k6_g8_softmax_apart": dict(
        rows=2, width=1024, hidden=512, experts=64, top_k=6, scoring="softmax", renormalize=False,
        routed_scaling=1.0, groups=8, topk_groups=3),
    "b7_e256_k8_g8_sigmoid_correction_shared": dict(
        rows=7, width=1024, hidden=768, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=768),
    "b64_e64_k4_softmax_shared_gate_row": dict(
        rows=64, width=512, hidden=512, experts=64, top_k=4, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=512, shared_gate=True),
    "b1_e512_k10_softmax_apart": dict(  # Qwen3-Next's router
        rows=1, width=1024, hidden=512, experts=512, top_k=10, scoring="softmax", renormalize=True,
        routed_scaling=1.0),
    "b1_e8_k1_sigmoid_apart": dict(
        rows=1, width=512, hidden=2048, experts=8, top_k=1, scoring="sigmoid", renormalize=False,
        routed_scaling=1.0),
    "b2_e16_k2_softmax_ties_shared": dict(
        rows=2, width=512, hidden=256, experts=16, top_k=2, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=256, inputs="ties"),
    "b7_e32_k8_g4_sigmoid_correction_ties_apart": dict(
        rows=7, width=768, hidden=384, experts=32, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=1.5, correction=True, groups=4, topk_groups=2, inputs="ties"),
    "b64_e128_k8_sigmoid_correction_same_shared": dict(
        rows=64, width=1024, hidden=512, experts=128, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=512, inputs="same"),
    "b2_e256_k8_sigmoid_one_cta_router_apart": dict(  # the router without a cluster: 8 rows a warp
        rows=2, width=1024, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, split=1),
    "b256_e256_k8_g8_sigmoid_correction_shared": dict(  # DeepSeek-V3's router at a serving batch
        rows=256, width=1024, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=256),
    "b13_e256_k8_g8_sigmoid_correction_shared_r4": dict(  # 4 rows a router cluster: 3 whole blocks and 1 row
        rows=13, width=1024, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=256, rows_a_cta=4),
    "b7_e32_k8_g4_sigmoid_correction_ties_apart_r8": dict(  # 8 rows a router CTA, the last one padding
        rows=7, width=768, hidden=384, experts=32, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=1.5, correction=True, groups=4, topk_groups=2, inputs="ties", rows_a_cta=8),
    "b2_e16_k2_softmax_ties_shared_r2": dict(
        rows=2, width=512, hidden=256, experts=16, top_k=2, scoring="softmax", renormalize=True,
        routed_scaling=1.0, shared_hidden=256, inputs="ties", rows_a_cta=2),
    "b256_e256_k8_sigmoid_correction_shared_r8": dict(  # Kimi Linear's router at 256 rows, 8 rows a cluster
        rows=256, width=2304, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=256, rows_a_cta=8),
    # the early down rows (MIXTURE_DOWN_EARLY_ROWS): gated evict-first, down prefetching its chosen rows
    "b1_e256_k8_sigmoid_correction_shared_early": dict(
        rows=1, width=2048, hidden=512, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=512, early=True),
    "b2_e64_k6_g8_softmax_apart_early": dict(
        rows=2, width=1024, hidden=512, experts=64, top_k=6, scoring="softmax", renormalize=False,
        routed_scaling=1.0, groups=8, topk_groups=3, early=True),
    # mixture_down's units a warp (MixtureSchedule, the schedule table's "mixture_down"): the table's 6 at Kimi
    # Linear's widths (fewer experts), 5 with a short last CTA, and the most a warp holds (32)
    "b1_e16_k8_sigmoid_correction_shared_w2304_u6": dict(
        rows=1, width=2304, hidden=1024, experts=16, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, down_schedule={"units": 6}),
    "b2_e64_k6_softmax_apart_u5": dict(
        rows=2, width=1024, hidden=512, experts=64, top_k=6, scoring="softmax", renormalize=False,
        routed_scaling=1.0, down_schedule={"units": 5}),
    "b1_e8_k1_sigmoid_apart_u32": dict(
        rows=1, width=512, hidden=2048, experts=8, top_k=1, scoring="sigmoid", renormalize=False,
        routed_scaling=1.0, down_schedule={"units": 32}),
    "b2_e256_k8_sigmoid_pitched_wider_shared": dict(
        rows=2, width=1024, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=1.0, correction=True, shared_hidden=1536, shared_gate=True, x_pitch=1280),
    # the vectors a lane has in flight a chunk (MixtureSchedule `vectors`, the table's "mixture_gated" and
    # "mixture_down" entries): Kimi Linear's widths at 8 (five chunks of a 2304-wide row, the last short), 36 (the
    # whole row in one chunk) and the table's 12 (three even chunks), two rows at 20 with a narrower hidden width,
    # and down at 8, 12 and 24
    "b1_e16_k8_sigmoid_correction_shared_w2304_v8": dict(
        rows=1, width=2304, hidden=1024, experts=16, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, gated_schedule={"vectors": 8},
        down_schedule={"units": 6, "vectors": 8}),
    "b1_e16_k8_sigmoid_correction_shared_w2304_v36": dict(
        rows=1, width=2304, hidden=1024, experts=16, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, gated_schedule={"vectors": 36},
        down_schedule={"units": 6, "vectors": 24}),
    "b1_e16_k8_sigmoid_correction_shared_w2304_v12": dict(  # the table's pair at Kimi Linear's batch 1
        rows=1, width=2304, hidden=1024, experts=16, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, gated_schedule={"vectors": 12},
        down_schedule={"units": 6}),
    # each warp's first chunk of down rows before the PDL wait (MIXTURE_DOWN_EARLY_WEIGHTS_ROWS: `early_weights`): the
    # table's batch-1 pair at Kimi Linear's widths, two rows with a short last CTA and no shared expert, and one
    # expert of 2048 units (a chunk of 4 of a lane's 8 vectors)
    "b1_e16_k8_sigmoid_correction_shared_w2304_v12_ew": dict(
        rows=1, width=2304, hidden=1024, experts=16, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, gated_schedule={"vectors": 12},
        down_schedule={"units": 6}, early_weights=True),
    # the same pair with more (or all) of a warp's row in its first chunk, for the step's sweep (session.sh ew-sweep):
    # 4 units (the whole 1024-wide row of each in one chunk), 6 at 24 vectors (the same), 8 and 3 at 12 vectors
    **{f"b1_e16_k8_sigmoid_correction_shared_w2304_{tag}_ew": dict(
        rows=1, width=2304, hidden=1024, experts=16, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, gated_schedule={"vectors": 12},
        down_schedule=down, early_weights=True)
       for tag, down in (("u4", {"units": 4}), ("u6v24", {"units": 6, "vectors": 24}), ("u8", {"units": 8}),
                         ("u3v12", {"units": 3, "vectors": 12}))},
    "b2_e64_k6_softmax_apart_u5_ew": dict(
        rows=2, width=1024, hidden=512, experts=64, top_k=6, scoring="softmax", renormalize=False,
        routed_scaling=1.0, down_schedule={"units": 5}, early_weights=True),
    "b1_e8_k1_sigmoid_apart_ew": dict(
        rows=1, width=512, hidden=2048, experts=8, top_k=1, scoring="sigmoid", renormalize=False,
        routed_scaling=1.0, early_weights=True),
    "b2_e64_k6_softmax_apart_v20": dict(
        rows=2, width=1000, hidden=200, experts=64, top_k=6, scoring="softmax", renormalize=False,
        routed_scaling=1.0, gated_schedule={"vectors": 20}, down_schedule={"units": 5, "vectors": 12}),
}

# the shared expert run in the router's launch (ROUTER_SHARED_ROWS: `MixtureRouter(shared_hidden=)`, then
# `MixtureGated(shared_in_router=True)`), with the router's norm and without: Kimi Linear's batch-1 form, two rows
# of a shared expert wider than a routed one (x read in place), and three rows whose 200 shared units leave the
# last CTA of each row part-filled (mixture_router.py's and mixture_gated.py's `_shared` cases;
# test_mixture.py's test_the_router_runs_the_shared_expert)
SHARED_SHAPES = {
    "b1_e256_k8_sigmoid_correction_shared": SHAPES["b1_e256_k8_sigmoid_correction_shared"],
    "b2_e256_k8_sigmoid_pitched_wider_shared": {
        k: v for k, v in SHAPES["b2_e256_k8_sigmoid_pitched_wider_shared"].items() if k != "shared_gate"},
    "b3_e256_k8_sigmoid_odd_shared": {**SHAPES["b1_e256_k8_sigmoid_correction_shared"], "rows": 3,
                                      "shared_hidden": 200},
}

# the shared warp's units before the PDL wait (MIXTURE_EARLY_SHARED_ROWS: `MixtureGated(early_shared=True)`): it
# norms the router's input row itself (norm_x + residual, norm_w) and dots its shared units from it. Kimi Linear's
# real batch-1 shape at 2 and 3 units a shared warp (3: the shared expert's units in the first 342 of 512 CTAs),
# two rows without a residual whose 200 shared units leave a part-filled last shared CTA (3 units a warp), a
# shared expert wider than a routed one, and two where only the first CTAs norm before the wait
# (test_mixture.py's test_the_shared_warp_norms_before_the_wait)
EARLY_SHARED_SHAPES = {
    "b1_e256_k8_w2304_shared_u2": dict(
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, shared_hidden=1024, residual=True, eps=1e-5,
        shared_units=2),
    "b1_e256_k8_w2304_shared_u3": dict(
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, shared_hidden=1024, residual=True, eps=1e-5,
        shared_units=3),
    "b2_e64_k6_w1000_odd_shared_u3": dict(
        rows=2, width=1000, hidden=256, experts=64, top_k=6, shared_hidden=200, residual=False, eps=1e-6,
        shared_units=3),
    "b3_e32_k4_w512_wider_shared": dict(
        rows=3, width=512, hidden=128, experts=32, top_k=4, shared_hidden=384, residual=True, eps=1e-6),
    # only the first CTAs norm before the wait (`early_ctas`); the later ones dot the router's rows after it
    "b1_e256_k8_w2304_shared_u2_first100": dict(
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, shared_hidden=1024, residual=True, eps=1e-5,
        shared_units=2, early_ctas=100),
    "b2_e64_k6_w1000_odd_shared_u3_first20": dict(
        rows=2, width=1000, hidden=256, experts=64, top_k=6, shared_hidden=200, residual=False, eps=1e-6,
        shared_units=3, early_ctas=20),
    # with the vectors a lane has in flight set (MixtureSchedule `vectors`): the shared warp's dots before the
    # wait take them too
    "b1_e256_k8_w2304_shared_u2_v8": dict(
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, shared_hidden=1024, residual=True, eps=1e-5,
        shared_units=2, schedule={"vectors": 8}),
    "b1_e256_k8_w2304_shared_u3_first248_v12": dict(  # the real-size batch-1 launch as the table makes it
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, shared_hidden=1024, residual=True, eps=1e-5,
        shared_units=3, early_ctas=248, schedule={"vectors": 12}),
    "b1_e256_k8_w2304_shared_u2_v36": dict(
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, shared_hidden=1024, residual=True, eps=1e-5,
        shared_units=2, schedule={"vectors": 36}),
}

ROUTER = ("rows", "width", "experts", "top_k", "scoring", "renormalize", "routed_scaling", "correction", "groups",
          "topk_groups", "x_pitch", "split", "rows_a_cta")
EXPERTS = ("rows", "width", "hidden", "experts", "top_k", "shared_hidden", "x_pitch", "early")


def router_spec(shape: dict) -> dict:
    return {k: shape[k] for k in ROUTER if k in shape}


def experts_spec(shape: dict) -> dict:
    return {k: shape[k] for k in EXPERTS if k in shape}


def gated_spec(shape: dict) -> dict:
    return {**experts_spec(shape), **({"schedule": shape["gated_schedule"]} if "gated_schedule" in shape else {})}


def shared_router_spec(shape: dict, norm: bool) -> dict:
    """The router of a SHARED_SHAPES shape running its shared expert too (with the norm folded: a residual)."""
    spec = {**router_spec(shape), "shared_hidden": shape["shared_hidden"], "expert_hidden": shape["hidden"]}
    return {**spec, "norm": True, "eps": 1e-5, "residual": True} if norm else spec


def down_spec(shape: dict) -> dict:
    return {**experts_spec(shape), **({"shared_gate": True} if shape.get("shared_gate") else {}),
            **({"schedule": shape["down_schedule"]} if "down_schedule" in shape else {}),
            **({"early_weights": True} if shape.get("early_weights") else {})}



# the router's flag a row in place of mixture_gated's PDL wait (MIXTURE_READY_FLAG: `ready` on both launches):
# the real-size batch-1 pair as the lowering makes it (the norm folded into the router, the early shared warp in
# the first 248 CTAs at 3 units, 12 vectors), two rows without a norm (both launches read x), 7 rows at 4 a
# router cluster (several flags a CTA, the last block part-filled), and every CTA choosing to prefetch
# (`prefetch_spread`: only the first stores and raises); test_mixture.py's test_the_gated_launch_acquires_the_flag
READY_SHAPES = {
    "b1_e256_k8_w2304_norm_first248_v12": dict(
        rows=1, width=2304, hidden=1024, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=1024, norm=True, residual=True, eps=1e-5,
        early_shared={"shared_units": 3, "early_ctas": 248}, gated_schedule={"vectors": 12}),
    "b2_e64_k6_softmax_shared": dict(
        rows=2, width=1024, hidden=512, experts=64, top_k=6, scoring="softmax", renormalize=False,
        routed_scaling=1.0, shared_hidden=512),
    "b7_e256_k8_g8_norm_r4": dict(
        rows=7, width=1024, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.5, correction=True, groups=8, topk_groups=4, shared_hidden=256, rows_a_cta=4, norm=True,
        residual=False, eps=1e-6),
    "b1_e256_k8_norm_spread": dict(
        rows=1, width=1024, hidden=256, experts=256, top_k=8, scoring="sigmoid", renormalize=True,
        routed_scaling=2.446, correction=True, shared_hidden=256, norm=True, residual=True, eps=1e-5,
        prefetch=True, early_shared={"shared_units": 2}),
}


def ready_router_spec(shape: dict) -> dict:
    """A READY_SHAPES shape's router: its norm folded in where `norm`, its chosen rows prefetched by every CTA
    where `prefetch`, and its flags."""
    spec = {**router_spec(shape), "ready": True}
    if shape.get("norm"):
        spec.update(norm=True, eps=shape["eps"], residual=shape["residual"])
    if shape.get("prefetch"):
        spec.update(prefetch_units=16, expert_hidden=shape["hidden"], prefetch_spread=True)
    return spec


def ready_gated_spec(shape: dict) -> dict:
    """A READY_SHAPES shape's gated launch acquiring the router's flags (its shared warp early where `early_shared`)."""
    spec = {**gated_spec(shape), "ready": True}
    if shape.get("early_shared"):
        spec.update(early_shared=True, residual=shape["residual"], eps=shape["eps"], **shape["early_shared"])
    return spec
