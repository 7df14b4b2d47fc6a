"""The mixture's kernels (mixture_router, mixture_gated, mixture_down) compile for sm_90a (CPU
only): their PTX has the PDL pair, no local memory (a register indexed at run time would spill
there) and the expert offset computed in 64 bits; their params and launches follow the
specialization; bad specializations raise one line naming the fact. And the lowering: a mixture
is the three launches, the folded shared expert a warp of their block, the ids and routing
weights plan buffers; a scatter stays refused; a form with a mixture compiles to a plan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.kernels import kernel_class
from lanec.codegen.kernels.mixture import MixtureDown, MixtureGated, MixtureRouter

ROOT = Path(__file__).resolve().parents[1]

KERNELS = {
    "router_e256_k8_sigmoid_correction": lambda: MixtureRouter(2, 2304, 256, 8, correction=True, routed_scaling=2.446),
    "router_e256_k8_g8_softmax": lambda: MixtureRouter(1, 1024, 256, 8, scoring="softmax", groups=8, topk_groups=4,
                                                       renormalize=False),
    "router_e8_k1_pitched": lambda: MixtureRouter(3, 512, 8, 1, x_pitch=1024),
    "router_e256_k8_one_cta": lambda: MixtureRouter(2, 2304, 256, 8, correction=True, split=1),
    "router_e72_k6_g24": lambda: MixtureRouter(7, 768, 72, 6, groups=24, topk_groups=3, correction=True),
    "router_e512_k10_softmax": lambda: MixtureRouter(1, 2048, 512, 10, scoring="softmax"),  # Qwen3-Next
    "router_e256_k8_rows8": lambda: MixtureRouter(256, 2304, 256, 8, correction=True, rows_a_cta=8),
    "router_e32_k8_g4_rows8_one_cta": lambda: MixtureRouter(7, 768, 32, 8, groups=4, topk_groups=2, correction=True,
                                                            rows_a_cta=8),
    # a norm in the prologue (fold-norm-into-router): Kimi Linear's, with its residual; 4 rows a cluster
    "router_e256_k8_norm_residual": lambda: MixtureRouter(1, 2304, 256, 8, correction=True, routed_scaling=2.446,
                                                          norm=True, eps=1e-5, residual=True),
    "router_e256_k8_rows4_norm_pitched": lambda: MixtureRouter(13, 1024, 256, 8, rows_a_cta=4, x_pitch=1280,
                                                               norm=True),
    # the shared expert in the router's launch (ROUTER_SHARED_ROWS), then mixture_gated without it
    "router_e256_k8_norm_shared": lambda: MixtureRouter(1, 2304, 256, 8, correction=True, norm=True, residual=True,
                                                        shared_hidden=1024, expert_hidden=1024),
    "gated_k8_shared_in_router": lambda: MixtureGated(1, 2304, 1024, 256, 8, shared_hidden=1024,
                                                      shared_in_router=True),
    "gated_k8_shared": lambda: MixtureGated(2, 2304, 1024, 256, 8, shared_hidden=1024),
    "gated_k2_apart": lambda: MixtureGated(7, 512, 520, 16, 2),
    "gated_k31_shared_wider": lambda: MixtureGated(1, 1024, 256, 64, 31, shared_hidden=512),
    "down_k8_shared_gate_row": lambda: MixtureDown(2, 2304, 1024, 256, 8, shared_hidden=1024, shared_gate=True),
    "down_k1_apart": lambda: MixtureDown(64, 2048, 512, 8, 1),
    "down_k4_shared_narrower": lambda: MixtureDown(3, 1000, 768, 32, 4, shared_hidden=256),
    # the early down rows (MIXTURE_DOWN_EARLY_ROWS): gated's routed rows evict-first, down's prefetched
    "gated_k8_shared_early": lambda: MixtureGated(1, 2304, 1024, 256, 8, shared_hidden=1024, early=True),
    "down_k8_shared_early": lambda: MixtureDown(1, 2304, 1024, 256, 8, shared_hidden=1024, early=True),
    "down_k2_apart_early": lambda: MixtureDown(2, 512, 520, 16, 2, early=True),
    # each warp's first chunk of down rows before the wait (MIXTURE_DOWN_EARLY_WEIGHTS_ROWS)
    "down_k8_shared_early_weights": lambda: MixtureDown(1, 2304, 1024, 256, 8, shared_hidden=1024,
                                                        schedule={"units": 6}, early_weights=True),
    "down_k2_apart_early_weights": lambda: MixtureDown(2, 512, 520, 16, 2, early_weights=True),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_compiles_for_sm90a(case):
    kernel = KERNELS[case]()
    compiled = compiled_for_sm90a(kernel)
    ptx = compiled.ptx
    assert "ld.global.nc.L1::no_allocate.v4.b32" in ptx  # weights as 16-byte vectors, read-only path
    split = getattr(kernel, "split", 1)  # a router's cluster: its CTAs send their scores to the first one's
    assert ("barrier.cluster.wait" in ptx) == ("st.async.shared::cluster" in ptx) == (split > 1)
    # ... on its barrier, which its choosing warps wait on (no DSMEM reads, no cluster barrier after the products)
    assert ("mbarrier.try_wait.parity.acquire.cluster" in ptx) == (split > 1) and "ld.shared::cluster" not in ptx
    if split > 1:
        assert ptx.index("barrier.cluster.arrive.relaxed") < ptx.index("griddepcontrol.wait")
    if not isinstance(kernel, MixtureRouter):  # the chosen expert's rows: id x expert bytes, 64-bit
        assert "mul.wide.s32" in ptx and str(kernel.hidden * kernel.width * 2) in ptx
        # the shared expert's rows (weights, known at launch) prefetched into L2 before the PDL wait:
        # its gate and up rows, or its down rows; nothing for a mixture without one
        before = ptx.split("griddepcontrol.wait")[0]
        wanted = (2 if isinstance(kernel, MixtureGated) else 1) if kernel.shared_hidden else 0
        if getattr(kernel, "shared_in_router", False):  # the router's launch ran the shared expert
            wanted = 0
        # early: down also prefetches its chosen experts' rows (one bulk prefetch a warp), gated reads its
        # routed rows under an evict-first L2 policy
        early_down = kernel.early and isinstance(kernel, MixtureDown)
        assert before.count("cp.async.bulk.prefetch.L2.global") == wanted + early_down == ptx.count(
            "cp.async.bulk.prefetch")
        early_gated = kernel.early and isinstance(kernel, MixtureGated)
        assert ("createpolicy.fractional.L2::evict_first" in ptx) == ("L2::cache_hint" in ptx) == early_gated
    else:  # the router's rows of this CTA: weights, prefetched into L2 before the wait for x
        # (and, running the shared expert, its CTAs' gate and up rows)
        wanted = 3 if kernel.shared_hidden else 1
        assert ptx.split("griddepcontrol.wait")[0].count("cp.async.bulk.prefetch.L2.global") == wanted


def weight_loads_between_multiplies(ptx: str) -> list[int]:
    """The weight vectors loaded in each run between floating-point multiplies of a PTX body."""
    runs, count = [], 0
    for line in ptx.splitlines():
        if "ld.global.nc.L1::no_allocate.v4.b32" in line:
            count += 1
        elif count and ("fma.rn.f32" in line or "mul.rn.f32" in line or "mul.f32" in line):
            runs.append(count)
            count = 0
    return runs


@pytest.mark.parametrize("vectors, chunk", [(8, 2), (12, 3), (20, 5)])
def test_vectors_set_the_loads_a_lane_has_in_flight(vectors, chunk):
    """MixtureSchedule `vectors` (the table's mixture_gated and mixture_down entries): a lane issues that many
    16-byte vectors (weights and its activation) before it multiplies any, so a warp of 2 units (4 rows) reads a
    2304-wide row in chunks of vectors // 4 of its 9 vectors, where the default 16 reads 4, 4, then 1. The default's
    PTX is the kernel without a schedule's, byte for byte."""
    shape = (1, 2304, 1024, 256, 8)
    default = compiled_for_sm90a(MixtureGated(*shape, shared_hidden=1024)).ptx
    assert compiled_for_sm90a(MixtureGated(*shape, shared_hidden=1024, schedule={"vectors": 16})).ptx == default
    assert compiled_for_sm90a(MixtureDown(*shape, shared_hidden=1024, schedule={"units": 6, "vectors": 16})).ptx \
        == compiled_for_sm90a(MixtureDown(*shape, shared_hidden=1024, schedule={"units": 6})).ptx
    ptx = compiled_for_sm90a(MixtureGated(*shape, shared_hidden=1024, schedule={"vectors": vectors})).ptx
    assert ptx != default and "ld.local" not in ptx and "st.local" not in ptx
    kernel = MixtureGated(*shape, shared_hidden=1024, schedule={"vectors": vectors})
    assert kernel.vectors == vectors and kernel.units == 2
    runs = weight_loads_between_multiplies(ptx)
    assert max(runs) == 4 * chunk  # a chunk: its vectors of each of the 4 rows, issued before any multiply
    assert max(weight_loads_between_multiplies(default)) == 16


def test_a_mixture_schedule_refuses_vectors_past_its_registers():
    with pytest.raises(ValueError, match="MixtureSchedule vectors is 1-48") as raised:
        MixtureGated(1, 2304, 1024, 256, 8, schedule={"vectors": 49})
    assert "\n" not in str(raised.value)


def test_the_shared_warp_dots_before_the_wait():
    """mixture_gated with `early_shared` (MIXTURE_EARLY_SHARED_ROWS): the router's input, residual and norm weight
    come in after the shared rows; the shared warp of the first `early_ctas` CTAs norms the row in its shared memory
    (h in fp32, the normed row in bf16) reading x and the residual through L2 only (`ld.global.cg`, before any PDL
    wait), the others read the router's normed rows after theirs; no local memory. Refused without a shared expert
    or at more units a warp than 8."""
    kernel = MixtureGated(1, 2304, 1024, 256, 8, shared_hidden=1024, early_shared=True, residual=True, eps=1e-5,
                          shared_units=3, early_ctas=248)
    assert [p.name for p in kernel.params()] == ["x", "ids", "gate", "up", "shared_gate", "shared_up", "norm_x",
                                                 "residual", "norm_w", "hidden"]
    assert kernel.launch().grid == (512, 1, 1) and kernel.launch().shared_bytes == 6 * 2304
    assert MixtureGated(1, 2304, 1024, 256, 8, shared_hidden=1024, early_shared=True, shared_units=1).launch().grid \
        == (1024, 1, 1)  # a CTA for every shared unit: its routed warps past the expert's units do nothing
    ptx = compiled_for_sm90a(kernel).ptx
    assert ptx.count("ld.global.cg.v4.b32") == 2 * 9  # x and the residual, 9 vectors a lane of 2304
    assert ptx.count("cp.async.bulk.prefetch.L2.global") == 4  # the shared rows: early, or after the wait
    # the early shared warp's, its twin's past the shared units (nothing to dot), and every other warp's
    assert ptx.count("griddepcontrol.wait;") == 3
    assert "st.shared.v4" in ptx and ".local" not in ptx
    with pytest.raises(ValueError, match="the shared warp norms its row for a shared expert this launch runs"):
        MixtureGated(1, 512, 256, 16, 4, early_shared=True)
    with pytest.raises(ValueError, match="shared_units 9: 1 to 8 hidden units a warp"):
        MixtureGated(1, 512, 256, 16, 4, shared_hidden=256, early_shared=True, shared_units=9)


@pytest.mark.parametrize("spread", [False, True], ids=["first", "spread"])
def test_the_router_prefetches_its_chosen_rows(spread):
    """mixture_router with `prefetch_units` (ROUTER_PREFETCH_ROWS): mixture_gated's gate and up come last; after the
    PDL wait two bulk L2 prefetches of the chosen expert's first rows (its gate's and its up's, 128 x 2304 bf16),
    beside the router rows' one before it (tests/gpu/test_mixture.py checks the choice, stored once, where every CTA
    chooses: `prefetch_spread`). Refused on given logits, past the experts' units and spread over one CTA."""
    kernel = MixtureRouter(1, 2304, 256, 8, correction=True, routed_scaling=2.446, norm=True, eps=1e-5, residual=True,
                           prefetch_units=128, expert_hidden=1024, prefetch_spread=spread)
    assert [p.name for p in kernel.params()][-2:] == ["gate", "up"] and kernel.params()[-1].shape == (256, 1024, 2304)
    ptx = compiled_for_sm90a(kernel).ptx
    before, after = ptx.split("griddepcontrol.wait")
    assert before.count("cp.async.bulk.prefetch.L2.global") == 1 and after.count("cp.async.bulk.prefetch.L2.global") == 2
    assert ".local" not in ptx and "ld.shared::cluster" not in ptx
    assert ptx.count("st.async.shared::cluster") == 1  # a score's send (to the first CTA, or to lane d's CTA d)
    with pytest.raises(ValueError, match="prefetch_units 2048: the fused per-row router"):
        MixtureRouter(1, 2304, 256, 8, prefetch_units=2048, expert_hidden=1024)
    with pytest.raises(ValueError, match="prefetch_units 16: the fused per-row router"):
        MixtureRouter(1, 2304, 256, 8, logits=True, prefetch_units=16, expert_hidden=1024)
    with pytest.raises(ValueError, match="prefetch_spread: every CTA of a cluster chooses; this router is one CTA"):
        MixtureRouter(1, 2304, 256, 8, split=1, prefetch_units=16, expert_hidden=1024, prefetch_spread=True)


def test_params_follow_the_specialization():
    router = MixtureRouter(3, 512, 64, 4, correction=True, x_pitch=1024)
    assert [p.name for p in router.params()] == ["x", "router", "correction", "ids", "weights"]
    assert router.params()[0].strides == (1024, 1)
    assert [(p.name, p.dtype) for p in router.params() if p.written] == [("ids", "int32"), ("weights", "float32")]
    assert [p.name for p in MixtureRouter(3, 512, 64, 4).params()] == ["x", "router", "ids", "weights"]
    gated = MixtureGated(2, 512, 256, 16, 3, shared_hidden=128)
    assert [p.name for p in gated.params()] == ["x", "ids", "gate", "up", "shared_gate", "shared_up", "hidden"]
    assert gated.params()[2].shape == (16, 256, 512) and gated.params()[-1].shape == (2, 3 * 256 + 128)
    assert [p.name for p in MixtureGated(2, 512, 256, 16, 3).params()] == ["x", "ids", "gate", "up", "hidden"]
    down = MixtureDown(2, 512, 256, 16, 3, shared_hidden=128, shared_gate=True)
    assert [p.name for p in down.params()] == ["x", "hidden", "ids", "weights", "down", "shared_down",
                                               "shared_gate_row", "out"]
    assert down.params()[4].shape == (16, 512, 256) and down.params()[5].shape == (512, 128)
    assert [p.name for p in MixtureDown(2, 512, 256, 16, 3).params()] == ["hidden", "ids", "weights", "down", "out"]
    for name, cls in (("mixture_router", MixtureRouter), ("mixture_gated", MixtureGated),
                      ("mixture_down", MixtureDown)):
        assert kernel_class(name) is cls


def test_the_router_norms_its_rows_in_its_prologue():
    """fold-norm-into-router's kernel: the norm's input (and residual) and weight in, the normed
    rows and the sum out; the norm weight loaded before the PDL wait, the rows after it; each CTA's
    warps dot its router rows with the rows it normed into its shared memory (a 16-byte shared load
    a vector), not with x; no local memory. Refused where the logits are given or the rows'
    vectors pass a thread's registers."""
    from lanec.codegen.facts import NORM_HELD_VECTORS

    router = MixtureRouter(1, 2304, 256, 8, correction=True, norm=True, eps=1e-5, residual=True)
    assert [p.name for p in router.params()] == ["x", "residual", "norm_w", "router", "correction", "ids", "weights",
                                                 "y", "h"]
    assert [p.name for p in router.params() if p.written] == ["ids", "weights", "y", "h"]
    plain = MixtureRouter(1, 2304, 256, 8, correction=True)
    assert router.launch().shared_bytes == plain.launch().shared_bytes + 2 * 2304 + 4 * router.warps  # row, sums
    assert [p.name for p in MixtureRouter(4, 512, 64, 4, norm=True).params()] == [
        "x", "norm_w", "router", "ids", "weights", "y"]
    ptx = compiled_for_sm90a(router).ptx
    before, after = ptx.split("griddepcontrol.wait")
    assert "ld.global" in before and ".local" not in ptx
    # after the wait: x and the residual (a vector each), then the dots' activations from shared memory
    assert after.count("ld.global.v4.b32") == 2 and after.count("ld.shared.v4.b32") >= 9
    assert "ld.shared.v4.b32" not in compiled_for_sm90a(plain).ptx  # the plain router dots x from global
    with pytest.raises(ValueError, match="norm prologue: the logits are a gemm_tc launch's"):
        MixtureRouter(100, 2304, 256, 8, logits=True, norm=True)
    with pytest.raises(ValueError, match=f"4 rows of 7168 hold 16 vectors a thread, above the {NORM_HELD_VECTORS}"):
        MixtureRouter(16, 7168, 8, 2, rows_a_cta=4, norm=True)  # 8 warps: 4 rows x 4 vectors a thread
    with pytest.raises(ValueError, match="8 normed rows of 7168 pass the 64 KiB of shared memory"):
        MixtureRouter(16, 7168, 64, 8, rows_a_cta=8, norm=True, split=2)  # 32 warps: 7 vectors a thread


@pytest.mark.parametrize("n", range(1, 17))
def test_the_sorting_network_sorts_every_input_of_zeros_and_ones(n):
    """A comparator network sorts everything iff it sorts every 0/1 input (the 0-1 principle)."""
    import itertools

    from lanec.codegen.kernels.mixture import sorting_network

    pairs = sorting_network(n)
    assert all(0 <= a < b < n for a, b in pairs)
    for bits in itertools.product((0, 1), repeat=n):
        placed = list(bits)
        for a, b in pairs:
            if placed[b] > placed[a]:
                placed[a], placed[b] = placed[b], placed[a]
        assert placed == sorted(bits, reverse=True), (n, bits)


def test_the_router_chooses_by_integer_reductions_with_its_correction_read_before_the_wait():
    """The top-k rounds: two `redux.sync` a round (the largest key, then its lowest expert) and no
    shuffles outside the dots' sums; the correction's loads (8 a lane at 256 experts) sit before the
    PDL wait with the norm weight's."""
    router = MixtureRouter(1, 2304, 256, 8, correction=True, norm=True, eps=1e-5, residual=True)
    ptx = compiled_for_sm90a(router).ptx
    before, after = ptx.split("griddepcontrol.wait")
    assert after.count("redux.sync.max.s32") == 8 and after.count("redux.sync.min.s32") == 8
    assert before.count("ld.global.b32") == 8 and "ld.global.b32" not in after
    assert after.count("shfl.sync") == 2 * 5  # the norm's and the dot's sums: 5 butterfly steps each


@pytest.mark.parametrize(("make", "grid", "block"), [
    # a cluster of CTAs a row, each dotting a share of the router rows, a warp a row (or two)
    (lambda: MixtureRouter(5, 2304, 256, 8), (16, 5, 1), 512),  # 16 CTAs (not portable) of 16 rows
    (lambda: MixtureRouter(1, 2048, 512, 10), (16, 1, 1), 1024),
    (lambda: MixtureRouter(1, 2304, 72, 8), (4, 1, 1), 576),
    (lambda: MixtureRouter(1, 2304, 8, 2), (1, 1, 1), 256),
    (lambda: MixtureRouter(3, 2304, 256, 8, split=1), (1, 3, 1), 1024),  # one CTA: 8 rows a warp
    (lambda: MixtureRouter(13, 2304, 256, 8, rows_a_cta=4), (16, 4, 1), 512),  # 4 rows a cluster, the last 1
    (lambda: MixtureRouter(256, 2304, 256, 8, rows_a_cta=8), (16, 32, 1), 512),
    (lambda: MixtureRouter(5, 2304, 256, 8, split=8), (8, 5, 1), 1024),  # a portable cluster of 8
    # a block of kept experts a warp each (the folded shared expert the last), 2 units / 4 outputs a warp
    (lambda: MixtureGated(7, 2304, 1024, 256, 8, shared_hidden=1024), (512, 7, 1), 288),
    (lambda: MixtureGated(1, 2304, 1024, 256, 8, shared_hidden=2048), (1024, 1, 1), 288),
    (lambda: MixtureGated(64, 2304, 1024, 256, 8), (512, 64, 1), 256),
    (lambda: MixtureDown(2, 2304, 1024, 256, 8, shared_hidden=1024), (576, 2, 1), 288),
    (lambda: MixtureDown(1, 1000, 1024, 256, 31, shared_hidden=1024), (250, 1, 1), 1024),
])
def test_launch_is_a_block_of_kept_experts_a_row(make, grid, block):
    kernel = make()
    shape = kernel.launch()
    assert shape.grid == grid and shape.block == (block, 1, 1) and shape.pdl
    assert shape.cluster == ((grid[0], 1, 1) if isinstance(kernel, MixtureRouter) else (1, 1, 1))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: MixtureRouter(1, 512, 1024, 8), "mixture_router experts 1024: 1-512"),
    (lambda: MixtureRouter(1, 512, 64, 33), "top_k 33: 1 to the experts, at most 32"),
    (lambda: MixtureRouter(1, 500, 64, 4), "width 500 must be a positive multiple of 8"),
    (lambda: MixtureRouter(1, 512, 64, 4, scoring="relu"), "scoring 'relu': sigmoid or softmax"),
    (lambda: MixtureRouter(1, 512, 128, 4, groups=64, topk_groups=4), "groups 64: 1-32 (a lane ranks a group)"),
    (lambda: MixtureRouter(1, 512, 64, 9, groups=8, topk_groups=1), "topk_groups 1: 1-8 groups, holding the top_k 9"),
    (lambda: MixtureRouter(1, 512, 64, 8, groups=8), "grouped top-k needs both groups and topk_groups"),
    (lambda: MixtureRouter(1, 512, 72, 8, split=16), "split 16: 1, 2, 4, 8 or 16 CTAs (a cluster; 16 is not "
     "portable) sharing the 72 router rows evenly"),
    (lambda: MixtureRouter(1, 512, 256, 8, split=32), "split 32: 1, 2, 4, 8 or 16 CTAs"),
    (lambda: MixtureRouter(9, 512, 64, 4, rows_a_cta=3), "rows_a_cta 3: 1, 2, 4, 8 rows a cluster"),
    (lambda: MixtureRouter(9, 512, 4, 1, rows_a_cta=8), "rows_a_cta 8: a warp chooses a row, and a CTA has 4 warps"),
    (lambda: MixtureGated(1, 512, 256, 64, 32, shared_hidden=256),
     "mixture_gated a block of 33 kept experts (32 routed + 1 shared, a warp each) is above 32 warps"),
    (lambda: MixtureDown(1, 512, 256, 64, 40), "a block of 40 kept experts (40 routed, a warp each)"),
    (lambda: MixtureGated(1, 512, 260, 64, 4), "expert width 260 must be a positive multiple of 8"),
    (lambda: MixtureDown(1, 512, 256, 64, 4, shared_hidden=100), "shared expert width 100 must be"),
    (lambda: MixtureDown(1, 512, 256, 64, 4, shared_gate=True), "the gate row scales a shared expert; there is none"),
    (lambda: MixtureGated(1, 512, 256, 64, 4, x_pitch=500), "x pitch 500: at least the row's 512 values"),
])
def test_invalid_specializations_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


# -- lowering ----------------------------------------------------------------------------------

MIXTURE = """
builtin.module {
  form.step batch 3 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<3xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x256xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<16x256xbf16>
    %bias = form.weight {name = "model.layers.1.moe.gate.e_score_correction_bias", format = "bf16"} : tensor<16xf32>
    %eg = form.weight {name = "model.layers.1.moe.experts.*.w1.weight", format = "bf16"} : tensor<16x128x256xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.*.w3.weight", format = "bf16"} : tensor<16x128x256xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.*.w2.weight", format = "bf16"} : tensor<16x256x128xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<64x256xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<64x256xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<256x64xbf16>
    %x = form.embed %t, %e : (tensor<3xi32>, tensor<32x256xbf16>) -> tensor<3x256xbf16>
    %m = form.mixture %x, %router, %eg, %eu, %ed correction %bias : tensor<16xf32> {top_k = TOP_K : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.5 : f64, groups = 4 : i64, topk_groups = 2 : i64} : tensor<3x256xbf16>, tensor<16x256xbf16>, tensor<16x128x256xbf16>, tensor<16x128x256xbf16>, tensor<16x256x128xbf16> -> tensor<3x256xbf16>
    %g = form.product %x, %sg : (tensor<3x256xbf16>, tensor<64x256xbf16>) -> tensor<3x64xbf16>
    %u = form.product %x, %su : (tensor<3x256xbf16>, tensor<64x256xbf16>) -> tensor<3x64xbf16>
    %h = form.swiglu %g, %u : (tensor<3x64xbf16>, tensor<3x64xbf16>) -> tensor<3x64xbf16>
    %s = form.product %h, %sd : (tensor<3x64xbf16>, tensor<256x64xbf16>) -> tensor<3x256xbf16>
    %o = form.add %m, %s : (tensor<3x256xbf16>, tensor<3x256xbf16>) -> tensor<3x256xbf16>
    form.return %o : tensor<3x256xbf16>
  }
}
"""


def lowered(tmp_path: Path, text: str, **knobs):
    from lanec.codegen.lower import lower_module
    from lanec.pipeline import fuse, parse_verify
    from lanec.shim import LaneShim

    source = tmp_path / "mixture.mlir"
    source.write_text(text)
    module, where = parse_verify(source)
    fuse(module, LaneShim(**knobs), where)
    step = next(iter(lower_module(module).ops))
    step.verify()
    return list(step.body.block.ops)


def test_a_mixture_is_router_gated_and_down_with_the_shared_expert_folded(tmp_path):
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    ops = lowered(tmp_path, MIXTURE.replace("TOP_K", "4"))
    launched = [op for op in ops if isinstance(op, lane.LaunchOp)]
    assert [op.kernel.data for op in launched] == ["embed", "mixture_router", "mixture_gated", "mixture_down"]
    router, gated, down = (spec_of(op) for op in launched[1:])
    assert router == {"rows": 3, "width": 256, "experts": 16, "top_k": 4, "scoring": "sigmoid", "renormalize": True,
                      "routed_scaling": 2.5, "correction": True, "groups": 4, "topk_groups": 2,
                      "rows_a_cta": 1, "release": "entry"}  # mixture_gated streams early (RELEASE_RULE)
    experts = {"rows": 3, "width": 256, "hidden": 128, "experts": 16, "top_k": 4, "shared_hidden": 64}
    assert gated == {**experts, "release": "entry"} and down == {**experts, "shared_gate": False}
    assert tuple(launched[2].block.get_values()) == (5 * 32, 1, 1)  # 4 routed + the shared expert, a warp each
    buffers = {op.buffer_name.data: op for op in ops if isinstance(op, lane.BufferOp)}
    assert str(buffers["model.layers.1.moe.gate.weight.ids"].result.type) == "memref<3x4xi32>"  # routing_buffer
    assert str(buffers["model.layers.1.moe.routing"].result.type) == "memref<3x4xf32>"
    assert str(buffers["model.layers.1.moe.hidden"].result.type) == "memref<3x576xbf16>"  # 4 x 128 + 64
    assert buffers["model.layers.1.moe.experts.*.w1.weight"].role.data == "weight"
    assert str(buffers["model.layers.1.moe.experts.*.w2.weight"].result.type) == "memref<16x256x128xbf16>"


def test_from_router_gemm_rows_the_logits_are_a_gemm_tc_launch_and_the_router_chooses(tmp_path, monkeypatch):
    """ROUTER_GEMM_ROWS (64 on the H200; 3 and 4 here): from that many rows the router's logits are one gemm_tc
    launch of fp32 outputs (x against the router rows, read once for every row), and
    mixture_router only chooses from them (`logits`); below it the fused router, as before."""
    from lanec.codegen import facts
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    monkeypatch.setattr(facts, "ROUTER_GEMM_ROWS", 3)
    ops = lowered(tmp_path, MIXTURE.replace("TOP_K", "4"))
    launched = [op for op in ops if isinstance(op, lane.LaunchOp)]
    assert [op.kernel.data for op in launched][:4] == ["embed", "gemm_tc", "mixture_router", "mixture_gated"]
    gemm, router = spec_of(launched[1]), spec_of(launched[2])
    # released at its entry: the router after it streams its weights early (RELEASE_RULE)
    assert gemm == {"rows": 3, "width": 256, "parts": (16,), "out_dtype": "float32", "release": "entry"}
    assert router["logits"] is True and "rows_a_cta" not in router and router["groups"] == 4
    buffers = {op.buffer_name.data: op for op in ops if isinstance(op, lane.BufferOp)}
    assert str(buffers["model.layers.1.moe.logits"].result.type) == "memref<3x16xf32>"
    # the gemm writes the logits the router reads, and reads the router's weight
    assert launched[1].args[2] is launched[2].args[0]
    assert launched[1].args[1].owner.buffer_name.data == "model.layers.1.moe.gate.weight"
    monkeypatch.setattr(facts, "ROUTER_GEMM_ROWS", 4)
    kinds = [op.kernel.data for op in lowered(tmp_path, MIXTURE.replace("TOP_K", "4")) if isinstance(op, lane.LaunchOp)]
    assert kinds == ["embed", "mixture_router", "mixture_gated", "mixture_down"]


def test_fold_norm_into_router_takes_the_norms_launch_into_the_router(tmp_path):
    """Under fold_router_norms (the default) the norm before the mixture (with its residual) launches
    nothing: the router reads the norm's input, residual and weight, and writes the normed rows the
    experts read and the sum the next layer reads; with the knob off the norm is its own rmsnorm launch."""
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    normed = MIXTURE.replace("TOP_K", "4").replace(
        '    %x = form.embed %t, %e : (tensor<3xi32>, tensor<32x256xbf16>) -> tensor<3x256xbf16>\n',
        '    %a = form.embed %t, %e : (tensor<3xi32>, tensor<32x256xbf16>) -> tensor<3x256xbf16>\n'
        '    %nw = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : '
        'tensor<256xbf16>\n'
        '    %x, %r = form.norm %a, %nw, %a {eps = 1.000000e-05 : f64} : (tensor<3x256xbf16>, tensor<256xbf16>, '
        'tensor<3x256xbf16>) -> (tensor<3x256xbf16>, tensor<3x256xbf16>)\n').replace(
        "form.return %o : tensor<3x256xbf16>", "%z = form.add %o, %r : (tensor<3x256xbf16>, tensor<3x256xbf16>) -> "
        "tensor<3x256xbf16>\n    form.return %z : tensor<3x256xbf16>")
    plain = [op.kernel.data for op in lowered(tmp_path, normed, fold_router_norms=False)
             if isinstance(op, lane.LaunchOp)]
    assert plain[:3] == ["embed", "rmsnorm", "mixture_router"]
    ops = lowered(tmp_path, normed)
    launched = [op for op in ops if isinstance(op, lane.LaunchOp)]
    assert [op.kernel.data for op in launched][:4] == ["embed", "mixture_router", "mixture_gated", "mixture_down"]
    router, gated = launched[1], launched[2]
    spec = spec_of(router)
    assert spec["norm"] is True and spec["residual"] is True and spec["eps"] == 1e-5 and spec["rows_a_cta"] == 1
    embed_out = launched[0].args[-1]
    names = [arg.owner.buffer_name.data for arg in router.args]
    assert router.args[0] is embed_out and router.args[1] is embed_out  # the norm's input and residual
    assert names[2] == "model.layers.1.post_attention_layernorm.weight"
    assert names[-2:] == ["model.layers.1.post_attention_layernorm", "model.layers.1.post_attention_layernorm.sum"]
    assert gated.args[0] is router.args[-2]  # the experts read the rows the router normed
    adds = [op for op in launched if op.kernel.data == "elementwise"]
    assert any(router.args[-1] in list(op.args) for op in adds)  # the sum the step reads on


def test_up_to_the_early_rows_down_prefetches_its_experts_while_gated_streams(tmp_path, monkeypatch):
    """MIXTURE_DOWN_EARLY_ROWS (None: off): a per-row mixture of at most that many rows launches
    mixture_gated and mixture_down with `early` (gated's routed rows evict-first, down's chosen
    rows prefetched before its PDL wait); above it, and by default, without."""
    from lanec.codegen import lower
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    def experts(early_rows):
        monkeypatch.setattr(lower, "MIXTURE_DOWN_EARLY_ROWS", early_rows)
        ops = lowered(tmp_path, MIXTURE.replace("TOP_K", "4"))
        return [spec_of(op) for op in ops if isinstance(op, lane.LaunchOp)
                and op.kernel.data in ("mixture_gated", "mixture_down")]

    assert all(spec.get("early") is True for spec in experts(3))
    assert all("early" not in spec for spec in experts(2)) and all("early" not in spec for spec in experts(None))


@pytest.mark.parametrize("units, shared", [(6, 1024), (4, 0)])
def test_early_weights_issue_the_first_chunk_before_the_wait_and_nothing_else_changes(units, shared):
    """mixture_down `early_weights`: before the PDL wait each warp reads its expert's id and issues its first chunk
    of down rows, the vectors it would have issued first after the wait (a chunk of the default's 16 in flight: 2
    vectors of each of the units' 1024-wide rows); after it the same count again (the second chunk) and the
    activations. Without it the kernel is the one before, byte for byte (rows_dots' default loop unchanged)."""
    shape = (1, 2304, 1024, 256, 8)
    kw = {"shared_hidden": shared, "schedule": {"units": units}}
    early = compiled_for_sm90a(MixtureDown(*shape, **kw, early_weights=True)).ptx
    plain = compiled_for_sm90a(MixtureDown(*shape, **kw)).ptx
    weight = "ld.global.nc.L1::no_allocate.v4.b32"
    per_chunk = max(1, min(16 // units, 4))
    branches = 2 if shared else 1  # the routed warps' and the shared warp's
    before, after = early.split("griddepcontrol.wait")
    assert before.count(weight) == branches * per_chunk * units
    assert after.count(weight) == branches * (4 - per_chunk) * units
    assert plain.split("griddepcontrol.wait")[0].count(weight) == 0
    assert "mul.wide.s32" in before  # the chosen expert's rows, from its id, before the wait
    assert "local" not in early.split(".entry")[1]
    assert early != plain


@pytest.mark.parametrize(("kw", "message"), [
    ({"early": True}, "the L2 prefetch \\(early\\) is not taken with it"),
    ({"shared_hidden": 512}, "a shared expert must be as wide as a routed one \\(one chunk shape a warp\\): 512 "
                             "against 1024"),
])
def test_early_weights_refuse_what_they_cannot_take(kw, message):
    with pytest.raises(ValueError, match=message) as raised:
        MixtureDown(1, 2304, 1024, 256, 8, early_weights=True, **kw)
    assert "\n" not in str(raised.value)


def test_with_early_weights_gated_releases_down_after_its_own_wait(tmp_path, monkeypatch):
    """MIXTURE_DOWN_EARLY_WEIGHTS_ROWS (None: off): a per-row mixture of at most that many rows gets mixture_down
    with `early_weights`, and mixture_gated before it releases it only after its PDL wait (the router's ids are
    then this step's); by default, and above the rows, neither."""
    from lanec.codegen import lower
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    def experts(rows):
        monkeypatch.setattr(lower, "MIXTURE_DOWN_EARLY_WEIGHTS_ROWS", rows)
        text = MIXTURE.replace("TOP_K", "4")
        for narrow, wide in (("64x256", "128x256"), ("256x64", "256x128"), ("3x64", "3x128")):  # shared as wide
            text = text.replace(f"tensor<{narrow}xbf16>", f"tensor<{wide}xbf16>")
        ops = lowered(tmp_path, text)
        return {op.kernel.data: spec_of(op) for op in ops if isinstance(op, lane.LaunchOp)
                and op.kernel.data in ("mixture_gated", "mixture_down")}

    on = experts(3)
    assert on["mixture_down"].get("early_weights") is True and on["mixture_gated"].get("release") != "entry"
    for rows in (2, None):
        off = experts(rows)
        assert "early_weights" not in off["mixture_down"] and off["mixture_gated"].get("release") == "entry"
    reason = lower.down_early_weights(1, 1024, 1024, False)[1]
    assert reason is None or "before the PDL wait" in reason
    monkeypatch.setattr(lower, "MIXTURE_DOWN_EARLY_WEIGHTS_ROWS", 1)
    assert lower.down_early_weights(1, 1024, 512, False) == (False, "its shared expert's 512 units are not a routed "
                                                                    "expert's 1024: one chunk shape a warp")
    assert lower.down_early_weights(1, 1024, 1024, True)[0] is False
    taken, why = lower.down_early_weights(1, 1024, 1024, False, ready=True)
    assert not taken and "MIXTURE_READY_FLAG" in why


def test_the_router_from_given_logits_compiles_with_no_cluster():
    """A CTA of ROUTER_LOGIT_ROWS warps, a warp a row, loads the rows' fp32 logits after the PDL
    wait and chooses: no cluster, no DSMEM, no dot products, no local memory."""
    from lanec.codegen.facts import ROUTER_LOGIT_ROWS

    router = MixtureRouter(100, 7168, 256, 8, correction=True, groups=8, topk_groups=4, logits=True)
    assert [p.name for p in router.params()] == ["logits", "correction", "ids", "weights"]
    shape = router.launch()
    assert shape.grid == (1, -(-100 // ROUTER_LOGIT_ROWS), 1) and shape.cluster == (1, 1, 1)
    assert shape.block == (32 * ROUTER_LOGIT_ROWS, 1, 1)
    ptx = compiled_for_sm90a(router).ptx
    assert "griddepcontrol.wait" in ptx and "ld.global" in ptx
    assert "barrier.cluster" not in ptx and "ld.shared::cluster" not in ptx and "cp.async.bulk.prefetch" not in ptx
    with pytest.raises(ValueError, match=re.escape("split 2: from given logits a CTA chooses its rows alone")):
        MixtureRouter(8, 2304, 256, 8, logits=True, split=2)


def test_a_shared_expert_past_the_block_runs_apart(tmp_path):
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    text = MIXTURE.replace("TOP_K", "32").replace("16x", "64x").replace("<16xf32>", "<64xf32>")
    text = text.replace("groups = 4 : i64, topk_groups = 2 : i64", "groups = 8 : i64, topk_groups = 8 : i64")
    launched = [op for op in lowered(tmp_path, text) if isinstance(op, lane.LaunchOp)]
    kinds = [op.kernel.data for op in launched]
    assert kinds[:4] == ["embed", "mixture_router", "mixture_gated", "mixture_down"]
    assert spec_of(launched[2])["shared_hidden"] == 0 and tuple(launched[2].block.get_values()) == (1024, 1, 1)
    # the shared expert (gate, up, the swiglu, down), then the add
    assert kinds[4:] == ["gemv", "gemv", "elementwise", "gemv", "elementwise"]


def test_a_scattering_mixture_stays_refused(tmp_path):
    from lanec.diagnostics import FormError

    text = MIXTURE.replace("TOP_K", "4").replace(
        "%x = form.embed", '%rows = form.input {role = "slots"} : tensor<3xi32>\n    %x = form.embed').replace(
        "correction %bias : tensor<16xf32> {", "correction %bias : tensor<16xf32> rows %rows : tensor<3xi32> {")
    with pytest.raises(FormError, match="held-back: .* scatters its result to rows a parameter names") as raised:
        lowered(tmp_path, text)
    assert "\n" not in str(raised.value)


def test_a_mixture_form_compiles_to_a_plan_and_explains(tmp_path):
    from click.testing import CliRunner

    from lanec.cli import main

    source = tmp_path / "mixture.mlir"
    source.write_text(MIXTURE.replace("TOP_K", "2"))
    result = CliRunner().invoke(main, ["compile", str(source), "-o", str(tmp_path / "m.plan")])
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["show", str(tmp_path / "m.plan")])
    assert shown.exit_code == 0, shown.output
    for kernel in ("mixture_router", "mixture_gated", "mixture_down"):
        assert kernel in shown.output
    explained = CliRunner().invoke(main, ["explain", str(source)])
    assert explained.exit_code == 0, explained.output
    assert "shared expert in a block of 3 warps, no scatter" in explained.output


def test_the_kimi_example_lowers_its_mixtures():
    from lanec.codegen.lower import Lowering, LoweringError
    from lanec.dialects import form, lane
    from lanec.pipeline import fuse, parse_verify
    from lanec.shim import LaneShim

    module, where = parse_verify(ROOT / "examples" / "kimi-linear-small.mlir")
    fuse(module, LaneShim(), where)
    lowering = Lowering(next(op for op in module.ops if isinstance(op, form.StepOp)))
    try:
        lowering.run()
    except LoweringError as error:  # the latent attention, until its kernel lands
        assert "form.mixture" not in str(error)
    kinds = [op.kernel.data for op in lowering.block.ops if isinstance(op, lane.LaunchOp)]
    assert kinds.count("mixture_router") == kinds.count("mixture_gated") == kinds.count("mixture_down") == 3


def test_every_mixture_table_entry_has_a_gpu_case():
    """schedules.json's mixture_gated and mixture_down entries join the table once the GPU tests check their
    specialization: each entry's schedule, at its width, hidden width, top-k and shared expert, is a case of
    tests/gpu/cases/mixture.py (the experts and rows may be fewer: they change no code the schedule reaches)."""
    import importlib.util

    from lanec.codegen import schedules

    spec = importlib.util.spec_from_file_location("lanec_cases_mixture", ROOT / "tests" / "gpu" / "cases" / "mixture.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    # (shape, its schedule of the kernel): the full mixtures' gated and down schedules, the early-shared gated ones
    scheduled = {"mixture_gated": [(s, s.get("gated_schedule")) for s in cases.SHAPES.values()]
                 + [(s, s.get("schedule")) for s in cases.EARLY_SHARED_SHAPES.values()],
                 "mixture_down": [(s, s.get("down_schedule")) for s in cases.SHAPES.values()]}
    fields = ("width", "hidden", "top_k", "shared_hidden")
    for kernel, candidates in scheduled.items():
        for shape, schedule in schedules.tuned_shapes(kernel):
            found = [s for s, own in candidates if own == schedule and all(s.get(f, 0) == shape[f] for f in fields)]
            assert found, (kernel, shape, schedule)


def test_the_router_raises_a_flag_that_mixture_gated_acquires():
    """`ready` (MIXTURE_READY_FLAG): the router's last param is its flags [rows] int32, lowered before the launch
    releases its dependents (a store, then fence.acq_rel.gpu, before `griddepcontrol.launch_dependents`, here after
    its PDL wait; at its entry where the lowering releases it there) and raised
    by a release at GPU scope once the row's ids are stored; mixture_gated's last is the same flags, which thread 0
    spins on (relaxed GPU-scope reads from L2, then a fence) in place of the PDL wait, a named barrier passing it to
    the warps that dot after it. With the early shared warp that warp keeps its PDL wait before its stores; without
    it the launch has no PDL wait at all. No local memory. Refused where the router's logits are given."""
    router = MixtureRouter(1, 2304, 256, 8, correction=True, routed_scaling=2.446, norm=True, eps=1e-5,
                           residual=True, ready=True)
    assert router.params()[-1].name == "ready" and router.params()[-1].shape == (1,) and router.params()[-1].written
    ptx = compiled_for_sm90a(router).ptx
    assert ptx.index("fence.acq_rel.gpu") < ptx.index("griddepcontrol.launch_dependents")
    assert ptx.count("st.release.gpu.global.u32") == 1 and ptx.index("st.release.gpu") > ptx.index("redux.sync")
    assert ".local" not in ptx
    plain = MixtureGated(2, 1024, 512, 64, 6, shared_hidden=512, ready=True)
    assert plain.params()[-1].name == "ready" and not plain.params()[-1].written
    ptx = compiled_for_sm90a(plain).ptx
    assert "griddepcontrol.wait" not in ptx and ptx.count("ld.relaxed.gpu.global.s32") == 1
    assert re.search(r"bar\.sync\s+1, ", ptx) and ".local" not in ptx
    assert ptx.index("ld.relaxed.gpu") < ptx.index("griddepcontrol.launch_dependents")
    early = MixtureGated(1, 2304, 1024, 256, 8, shared_hidden=1024, early_shared=True, residual=True, eps=1e-5,
                         shared_units=3, early_ctas=248, ready=True)
    ptx = compiled_for_sm90a(early).ptx
    # the early shared warp's wait, and its twin's past the shared units; the other warps take the flag
    assert ptx.count("griddepcontrol.wait;") == 2 and ptx.count("ld.relaxed.gpu.global.s32") == 1
    with pytest.raises(ValueError, match="mixture_router ready: the fused per-row router's flags") as raised:
        MixtureRouter(64, 2304, 256, 8, logits=True, ready=True)
    assert "\n" not in str(raised.value)
