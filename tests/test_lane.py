"""The lane under its knobs (LaneShim, its held-back rules), split-KV attention (chunks_apart and
attention_splits), and Latent."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from lanec.codegen.facts import GEMV_ROWS
from lanec.diagnostics import load_module
from lanec.dialects.form import LatentAttentionOp
from lanec.passes.table import HELD_BACK
from lanec.shim import (
    LATENT_MIN_CHUNK_KEYS,
    MEASURED_SPLITS,
    MIN_CHUNK_KEYS,
    TARGET_BLOCKS,
    KnobError,
    LaneShim,
    Latent,
    attention_splits,
    chunks_apart,
    cluster_combine,
    head_blocks,
    splits_reason,
)

# -- LaneShim -----------------------------------------------------------------------------------


def test_the_default_shim_is_precise_decode() -> None:
    shim = LaneShim()
    assert (shim.numerics, shim.words, shim.fuse_quant, shim.batch_products) == ("precise", 1, False, False)
    assert shim.as_gemv(GEMV_ROWS) and not shim.as_gemv(GEMV_ROWS + 1)


def test_the_gemv_row_limit_is_the_gemv_kernels_own() -> None:
    """The rules keep a decode step's products on the GEMV kernels up to the rows one gemv launch
    takes: the kernel's own limit, one owner."""
    from lanec.codegen.facts import RowProductsSpec

    assert GEMV_ROWS == 32
    assert not RowProductsSpec("gemv", rows=GEMV_ROWS, width=64, parts=(64,)).problems()
    assert RowProductsSpec("gemv", rows=GEMV_ROWS + 1, width=64, parts=(64,)).problems()


def test_the_shim_holds_the_lanes_held_back_rules_the_table_runs() -> None:
    assert LaneShim().heldback == HELD_BACK == LaneShim("quantized", 2, True, True).heldback
    assert [r.name for r in HELD_BACK] == [
        "hold-per-head-part", "hold-values-in-place", "hold-kda", "fold-gate-product", "hold-conv-l2norm",
        "hold-mixture-shared", "hold-gated-pair", "hold-products-in-parts", "hold-quantized-activation", "fold-norm-into-gemv",
        "fold-norm-into-router", "fold-norm-into-latent", "fold-argmax-into-gemv",
        "fold-all-reduce-into-norm"]
    assert all(r.stage == "held-back" for r in HELD_BACK)


def test_batch_products_keep_any_rows_on_the_gemv() -> None:
    assert LaneShim(batch_products=True).as_gemv(256)


@pytest.mark.parametrize("knobs, message", [
    ({"fuse_quant": True}, "fuse_quant quantizes in producers' epilogues: it needs --numerics quantized"),
    ({"numerics": "quantized", "words": 3}, "words 3: a quantized activation value is one or two int8 words"),
    ({"words": 2}, "words 2: only quantized numerics read int8 words"),
    ({"numerics": "fp8"}, "numerics 'fp8': precise or quantized"),
])
def test_illegal_knobs_are_one_line_errors(knobs: dict, message: str) -> None:
    with pytest.raises(KnobError) as error:
        LaneShim(**knobs)
    assert str(error.value) == message


def test_the_shim_round_trips_through_the_module() -> None:
    module = ModuleOp([])
    shim = LaneShim("quantized", 2, True, True)
    shim.record(module)
    assert LaneShim.of(module) == shim
    assert LaneShim.of(ModuleOp([])) == LaneShim()


def test_given_knobs_replace_the_recorded_ones() -> None:
    module = ModuleOp([])
    LaneShim("quantized", 2).record(module)
    assert LaneShim.of(module, numerics=None, words=None, fuse_quant=True) == LaneShim("quantized", 2, True)
    assert LaneShim.of(module, batch_products=True).batch_products
    with pytest.raises(KnobError, match="only quantized numerics read int8 words"):
        LaneShim.of(module, numerics="precise")


def test_a_bad_recorded_knob_is_named() -> None:
    module = load_module('builtin.module attributes {lane.shim = {fast = true}} {}')
    with pytest.raises(KnobError, match="unknown knob fast"):
        LaneShim.of(module)


# -- chunks_apart -------------------------------------------------------------------------------


def test_small_gqa_decode_runs_its_chunks_apart() -> None:
    """Batch 1, 32 query heads on 8 KV heads: 8 blocks (one a KV group) leave 124 of 132 SMs idle."""
    assert head_blocks(batch=1, heads=32, kv_heads=8) == 8
    assert chunks_apart(16, batch=1, heads=32, kv_heads=8)


def test_blocks_are_counted_a_kv_group_not_a_query_head() -> None:
    """132 query heads on 4 KV heads: 4 blocks (FlashAttention would count 132 and fill the chip)."""
    assert head_blocks(batch=1, heads=132, kv_heads=4) == 4
    assert chunks_apart(2, batch=1, heads=132, kv_heads=4)


@pytest.mark.parametrize("batch, apart", [(11, True), (12, False)])
def test_enough_head_blocks_keep_their_chunks_together(batch: int, apart: bool) -> None:
    """Both sides of the boundary: 11 x 8 KV groups = 88 blocks < TARGET_BLOCKS (96); 12 x 8 = 96
    reach it (and are cut only in two, while they leave SMs idle)."""
    assert TARGET_BLOCKS == 96
    assert chunks_apart(4, batch=batch, heads=32, kv_heads=8) is apart


def test_one_chunk_is_never_apart_and_zero_is_an_error() -> None:
    assert not chunks_apart(1, batch=1, heads=8, kv_heads=8)
    with pytest.raises(ValueError, match="splits 0"):
        chunks_apart(0, batch=1, heads=8, kv_heads=8)
    with pytest.raises(ValueError, match="do not share 3 KV heads"):
        chunks_apart(2, batch=1, heads=8, kv_heads=3)



@pytest.mark.parametrize("batch, heads, kv_heads, context, latent, splits", [
    (1, 32, 1, 4096, True, 32),  # a latent attention: one block, chunks down to 128 keys
    (1, 128, 1, 32768, True, 64),  # 128 heads: 2 row blocks of 64 (the wgmma engine's) x 64
    (1, 32, 1, 32768, True, 128),  # one block: 128 chunks of 256 keys (the lanes' combine merges them)
    (1, 32, 1, 16384, True, 64),  # 128 chunks would be 128 keys each in 128 blocks: short
    (8, 16, 1, 32768, True, 16),
])
def test_attention_splits_reach_the_target_blocks_with_chunks_long_enough(batch, heads, kv_heads, context, latent,
                                                                         splits):
    assert attention_splits(batch, heads, kv_heads, context, latent=latent) == splits
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)
    shortest = LATENT_MIN_CHUNK_KEYS if latent else MIN_CHUNK_KEYS
    assert splits in MEASURED_SPLITS and (splits == 1 or context // splits >= shortest)
    earlier = [s for s in MEASURED_SPLITS if s < splits]
    assert all(blocks * s < TARGET_BLOCKS for s in earlier)  # every fewer measured split leaves blocks short
    why = splits_reason(splits, batch=batch, heads=heads, kv_heads=kv_heads, context=context, latent=latent)
    assert f"{blocks} head blocks" in why and (splits == 1 or f"x {splits} chunks" in why)


@pytest.mark.parametrize("batch, heads, kv_heads, splits, clustered", [
    (1, 16, 4, 8, True),  # the dense example: 4 blocks x 8 chunks, 32 CTAs
    (1, 32, 8, 8, True),  # Llama-3-8B at batch 1: 64 CTAs (measured 12.1 against 13.8 us at 4k)
    (8, 8, 2, 8, False),  # 128 CTAs (measured 16.5 against 15.3)
    (8, 32, 8, 4, False),  # 256 CTAs (58.3 against 40.5)
    (1, 8, 2, 16, False),  # 16 chunks: more than a portable cluster
    (1, 8, 2, 1, False),  # nothing to combine
])
def test_few_chunks_of_few_ctas_meet_in_their_cluster(batch, heads, kv_heads, splits, clustered):
    """A split GQA attention combines in its own cluster where its chunks fit one (at most 8) and its CTAs
    are few (at most 64: the batch-1 rows where the cluster measured faster); elsewhere a combine launch."""
    assert cluster_combine(splits, batch=batch, heads=heads, kv_heads=kv_heads) is clustered


def test_a_latent_attention_meets_in_its_cluster_only_where_the_fact_allows(monkeypatch):
    """LATENT_CLUSTER_COMBINE_CTAS (0: measured slower at Kimi Linear's batch-1 step): raised, 8 chunks of
    one 32-head block meet in their cluster and 32 chunks or 128 heads x 8 chunks past the limit do not."""
    import lanec.shim as shim

    assert shim.LATENT_CLUSTER_COMBINE_CTAS == 0
    assert not shim.latent_cluster_combine(8, batch=1, heads=32, tokens=1)
    monkeypatch.setattr(shim, "LATENT_CLUSTER_COMBINE_CTAS", 16)
    assert shim.latent_cluster_combine(8, batch=1, heads=32, tokens=1)  # 8 CTAs
    assert shim.latent_cluster_combine(8, batch=1, heads=128, tokens=1)  # 2 blocks of 64 rows: 16 CTAs
    assert not shim.latent_cluster_combine(8, batch=4, heads=32, tokens=1)  # 32 CTAs
    assert not shim.latent_cluster_combine(32, batch=1, heads=32, tokens=1)  # more than a portable cluster
    assert not shim.latent_cluster_combine(1, batch=1, heads=32, tokens=1)  # nothing to combine


@pytest.mark.parametrize("batch, heads, kv_heads, context, latent, splits, why", [
    # latent: chunks under 256 keys only while blocks x chunks stay under 128
    (2, 128, 1, 4096, True, 16, "shorter than 256 keys in 128 blocks or more"),
    (1, 128, 1, 4096, True, 32, "shorter than 128 keys"),  # 2 blocks of 64 rows x 32 chunks of 128 keys
    (1, 32, 1, 4096, True, 32, "shorter than 128 keys"),  # one block: 128-key chunks in 32 blocks
    # one block reaches 96 only in 128 chunks (MAX_SPLITS 128 since the combine's lanes)
    (1, 32, 1, 32768, True, 128, "128 chunks of 256 keys reach 96 blocks"),
])
def test_the_split_rules_measured_limits_each_end_a_choice(batch, heads, kv_heads, context, latent, splits, why):
    """The three facts fitted to the sweep (bench/RESULTS.md: the rule then picks the fastest of
    the 20 shapes), each ending a choice and named in its reason."""
    assert attention_splits(batch, heads, kv_heads, context, latent=latent) == splits
    assert why in splits_reason(splits, batch=batch, heads=heads, kv_heads=kv_heads, context=context, latent=latent)
    assert chunks_apart(splits, batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)


def test_the_most_chunks_end_a_choice_where_a_smaller_limit_is_set(monkeypatch):
    """MAX_SPLITS below the measured counts ends the choice there and says so (the limit was 64 until
    the combine read its chunks across lanes)."""
    import lanec.shim as shim

    monkeypatch.setattr(shim, "MAX_SPLITS", 64)
    assert attention_splits(1, 32, 1, 32768, latent=True) == 64
    assert "at most 64 chunks" in splits_reason(64, batch=1, heads=32, kv_heads=1, context=32768, latent=True)


@pytest.mark.parametrize("batch, heads, kv_heads, context, latent, splits", [
    (64, 8, 2, 4096, False, 2),  # 128 blocks: 4 of the 132 SMs idle, each block 4096 keys (measured)
    (64, 8, 2, 32768, False, 2),
    (12, 32, 8, 32768, False, 2),  # 96 blocks: the target reached, 36 SMs idle
    (64, 8, 2, 300, False, 1),  # two chunks of 150 keys: too short
    (33, 32, 8, 4096, False, 1),  # 264 blocks
])
def test_blocks_that_reach_the_target_but_leave_sms_idle_are_cut_in_two(batch, heads, kv_heads, context, latent,
                                                                          splits):
    assert attention_splits(batch, heads, kv_heads, context, latent=latent) == splits
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)
    assert chunks_apart(2, batch=batch, heads=heads, kv_heads=kv_heads, latent=latent) is (blocks < 132)
    assert not chunks_apart(4, batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)  # only in two
    why = splits_reason(splits, batch=batch, heads=heads, kv_heads=kv_heads, context=context, latent=latent)
    assert f"{blocks} head blocks" in why and ("SMs idle" in why if splits == 2 else True)


# The sweep the wave rule is fitted to (bench/attention.py LANEC_ATTN_SWEEP=1, H200, 2026-12-01, us at the
# chosen split / the fastest): every shape at its fastest split or within 5%, but the last one.
SWEEP_CHOICES = [
    (1, 32, 8, 128, 4096, 32),  # 9.4 / 9.4
    (3, 32, 8, 128, 4096, 8),  # 19.3 / 19.3 (the rule before: 4 chunks, 23.2)
    (8, 32, 8, 128, 4096, 4),  # 40.4 / 40.4
    (1, 32, 8, 128, 32768, 32),  # 40.8 / 40.8
    (3, 32, 8, 128, 32768, 32),  # 113.2 / 113.2
    (8, 32, 8, 128, 32768, 4),  # 270.3 / 269.1
    (1, 8, 2, 128, 4096, 64),  # 4.8 / 4.8 (the rule before: 16 chunks, 7.9)
    (3, 8, 2, 128, 4096, 32),  # 8.5 / 8.5
    (8, 8, 2, 128, 4096, 16),  # 13.8 / 13.8
    (1, 8, 2, 128, 32768, 128),  # 13.4 / 13.4
    (3, 8, 2, 128, 32768, 32),  # 34.6 / 34.6
    (8, 8, 2, 128, 32768, 16),  # 76.6 / 76.6
    (1, 16, 2, 256, 4096, 64),  # 6.4 / 6.4 (one CTA an SM at head size 256)
    (3, 16, 2, 256, 4096, 16),  # 12.5 / 12.5
    (8, 16, 2, 256, 4096, 8),  # 25.2 / 25.2
    (1, 16, 2, 256, 32768, 64),  # 25.0 / 25.0
    (3, 16, 2, 256, 32768, 16),  # 68.6 / 65.8
    (8, 16, 2, 256, 32768, 8),  # 158.0 / 145.1 (16 chunks, two waves)
]


@pytest.mark.parametrize("batch, heads, kv_heads, head, context, splits", SWEEP_CHOICES)
def test_gqa_splits_take_the_fewest_waves_of_keys(batch, heads, kv_heads, head, context, splits):
    """A GQA split that does not meet in its cluster: the candidate of the fewest waves of resident CTAs x
    (a chunk's keys + GQA_CHUNK_COST_KEYS), chunks of GQA_MIN_CHUNK_KEYS or more; its reason says so."""
    import lanec.shim as shim

    assert attention_splits(batch, heads, kv_heads, context, head=head) == splits
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads)
    candidates = shim._gqa_candidates(context)
    assert splits in candidates and all(context // s >= shim.GQA_MIN_CHUNK_KEYS for s in candidates if s > 1)
    cost = shim._wave_keys(blocks, splits, context, head)
    assert all(cost <= shim._wave_keys(blocks, s, context, head) for s in candidates)
    why = splits_reason(splits, batch=batch, heads=heads, kv_heads=kv_heads, context=context, head=head)
    resident = 132 * (2 if head <= 128 else 1)
    assert f"{blocks} head blocks x {splits} chunks" in why and f"of {resident} CTAs" in why


@pytest.mark.parametrize("batch, heads, kv_heads, context, splits", [
    (1, 16, 4, 2048, 8),  # the dense example: 4 blocks x 8 chunks of 256 keys, 32 CTAs in clusters of 8
    (1, 32, 8, 2048, 8),  # 8 blocks x 8: 64 CTAs
])
def test_a_split_that_meets_in_its_cluster_is_kept(batch, heads, kv_heads, context, splits):
    """The rule of TARGET_BLOCKS and MIN_CHUNK_KEYS gives a split whose chunks meet in the launch's cluster:
    kept, though the waves would cut on (no combine launch; dense-small-q8 in chunks of 64 keys measured
    slower)."""
    import lanec.shim as shim

    assert attention_splits(batch, heads, kv_heads, context) == splits
    assert cluster_combine(splits, batch=batch, heads=heads, kv_heads=kv_heads)
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads)
    waves = {s: shim._wave_keys(blocks, s, context, 128) for s in shim._gqa_candidates(context)}
    assert min(waves, key=waves.get) > splits
    assert "kept where they can meet in the launch's cluster" in splits_reason(
        splits, batch=batch, heads=heads, kv_heads=kv_heads, context=context)


def test_the_expanded_attention_keeps_the_rule_of_long_chunks():
    """The expanded latent attention's own kernel keeps the rule fitted before the waves: 32 heads (32 blocks)
    reach 96 blocks in 4 chunks of 8192 keys, which are cut once more (LONG_CHUNK); 256 keys stay one chunk."""
    assert attention_splits(1, 32, 32, 32768, expanded=True) == 8
    assert "cut once more" in splits_reason(8, batch=1, heads=32, kv_heads=32, context=32768, expanded=True)
    assert attention_splits(1, 2, 2, 256, expanded=True) == 1
    why = splits_reason(1, batch=1, heads=2, kv_heads=2, context=256, expanded=True)
    assert "shorter than 256 keys" in why


@pytest.mark.parametrize("batch, context", [(64, 4096), (64, 32768), (96, 4096)])
def test_latent_blocks_that_reach_the_target_stay_whole(batch: int, context: int) -> None:
    """DeepSeek-V3's latent attention at batch 64: 128 blocks of 64 rows leave 4 SMs idle, yet two
    chunks were slower (measured); 96 requests make 192 blocks, past the SMs."""
    assert head_blocks(batch=batch, heads=128, kv_heads=1, latent=True) == 2 * batch
    assert attention_splits(batch, 128, 1, context, latent=True) == 1
    assert not chunks_apart(2, batch=batch, heads=128, kv_heads=1, latent=True)
    assert "unsplit" in splits_reason(1, batch=batch, heads=128, kv_heads=1, context=context, latent=True)


# -- Latent -------------------------------------------------------------------------------------

LATENT = """
builtin.module {
  form.step batch 1 tokens %(tokens)d {
    %%t = form.input {role = "tokens"} : tensor<%(tokens)dxi32>
    %%pos = form.input {role = "positions"} : tensor<%(tokens)dxi32>
    %%pages = form.input {role = "pages"} : tensor<1x4xi32>
    %%eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %%el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %%er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %%cache = form.state {name = "model.layers.3.latent", kind = "latent"} : tensor<4x64x160xbf16>
    %%kvb = form.weight {name = "model.layers.3.kv_b", format = "q8_0"} : tensor<128x128xbf16>
    %%qr = form.embed %%t, %%eq : (tensor<%(tokens)dxi32>, tensor<32x128xbf16>) -> tensor<%(tokens)dx128xbf16>
    %%lat = form.embed %%t, %%el : (tensor<%(tokens)dxi32>, tensor<32x128xbf16>) -> tensor<%(tokens)dx128xbf16>
    %%kr = form.embed %%t, %%er : (tensor<%(tokens)dxi32>, tensor<32x32xbf16>) -> tensor<%(tokens)dx32xbf16>
    %%o = form.latent_attention %%qr, %%lat, %%kr, %%cache, %%kvb, %%pages, %%pos
      {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64}
      : (tensor<%(tokens)dx128xbf16>, tensor<%(tokens)dx128xbf16>, tensor<%(tokens)dx32xbf16>, tensor<4x64x160xbf16>,
         tensor<128x128xbf16>, tensor<1x4xi32>, tensor<%(tokens)dxi32>) -> tensor<%(tokens)dx64xbf16>
    form.return %%o : tensor<%(tokens)dx64xbf16>
  }
}
"""


def latent_of(tokens: int) -> Latent:
    module = load_module(LATENT % {"tokens": tokens})
    return Latent.of(next(op for op in module.walk() if isinstance(op, LatentAttentionOp)))


def test_latent_reads_the_op_shape_and_names() -> None:
    latent = latent_of(1)
    assert (latent.heads, latent.nope, latent.rope, latent.lora, latent.v) == (2, 32, 32, 128, 32)
    assert (latent.qr, latent.qpp, latent.kc, latent.ct) == ("%qr", "%qr.rope", "model.layers.3.latent", "%o")
    assert (latent.kw, latent.len, latent.rows, latent.kro) == (160, 256, 1, 64)
    assert (latent.key, latent.key_format, latent.value, latent.value_format) == (
        "model.layers.3.kv_b.key", "q8_0", "model.layers.3.kv_b.value", "q8_0")
    assert (latent.value_place, latent.pitch) == (0, 160)


def test_a_wide_chunk_is_cheaper_expanded() -> None:
    assert not latent_of(1).wide()
    assert not latent_of(32).wide()
    wide = latent_of(64)
    assert wide.wide() and wide.expanded_cost() < wide.absorbed_cost()


@pytest.mark.parametrize(("batch", "heads", "tokens", "context", "cut"), [
    (1, 32, 1, 1024, (16, 8)),     # the real-size Kimi Linear step: 16 chunks of 8-row blocks (6.7 against 11.8 us)
    (8, 32, 1, 1024, (8, 16)),     # its batch 8: 8 chunks of 16-row blocks (12.4 against 14.1)
    (1, 128, 1, 1024, (16, 16)),   # DeepSeek-V3's 128 heads in 8 blocks of 16 (9.3 against 14.4)
    (1, 16, 1, 4096, (64, 8)),     # its 16-head shard at 4k keys (8.4 against 10.2)
    (8, 128, 1, 1024, (4, None)),  # the rule's own: fewer rows a block would pass one wave or stream longer chunks
    (8, 32, 1, 4096, (16, None)),  # the rule's chunks reach its target blocks: not cut further
    (1, 32, 1, 32768, (128, None)),
])
def test_latent_cut_takes_blocks_of_fewer_rows_where_short_chunks_leave_sms_idle(batch, heads, tokens, context, cut):
    """`latent_cut` (fitted to bench/attention.py's MLA sweep with blocks of 8 and 16 rows, H200 2026-12-02): the
    measured fastest cut, or the rule's own where its chunks are not at their shortest or fill the SMs."""
    from lanec.shim import latent_cut

    assert latent_cut(batch, heads, tokens, context)[:2] == cut


@pytest.mark.parametrize("batch", [1, 2, 3, 5, 8, 13, 64])
@pytest.mark.parametrize(("heads", "tokens"), [(32, 1), (128, 1), (16, 1), (32, 3), (12, 3)])
@pytest.mark.parametrize("context", [256, 1024, 2048, 4096, 32768])
def test_a_latent_cut_fits_one_wave_of_whole_tiles_and_costs_no_more_than_the_rule(batch, heads, tokens, context):
    """Wherever `latent_cut` takes smaller blocks: the rule's chunks had stopped at their shortest in fewer CTAs
    than the SMs; the cut fits one wave of CTAs, its chunks are a tile or more, its blocks one of LATENT_CUT_ROWS
    and fewer rows than the rule's, and its fitted time is below the rule's. Elsewhere it is the rule's split."""
    from lanec.codegen.facts import LATENT_TILE_KEYS, SM_COUNT, latent_wgmma_blocks
    from lanec.shim import LATENT_CUT_ROWS, attention_splits, latent_block_cost, latent_cut, split_choice

    splits, block_rows, why = latent_cut(batch, heads, tokens, context)
    rule, stop = split_choice(batch, heads, 1, context, latent=True)
    rows = heads * tokens
    if block_rows is None:
        assert splits == rule == attention_splits(batch, heads, 1, context, latent=True)
        return
    _, own_blocks, own = latent_wgmma_blocks(rows)
    _, blocks, _ = latent_wgmma_blocks(rows, block_rows)
    assert stop in ("shortest", "short-latent") and batch * own_blocks * rule < SM_COUNT
    assert block_rows in LATENT_CUT_ROWS and block_rows < own and batch * blocks * splits <= SM_COUNT
    assert context >= splits * LATENT_TILE_KEYS
    assert latent_block_cost(batch, rows, context, splits, block_rows) < latent_block_cost(batch, rows, context, rule,
                                                                                          None)
    assert f"(block_rows {block_rows})" in why and "\n" not in why
