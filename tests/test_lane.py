"""The lane's knobs (LaneShim), split-KV attention (chunks_apart, best_splits), and Latent."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from lanec.diagnostics import load_module
from lanec.dialects.form import LatentAttentionOp
from lanec.lane import (
    GEMV_ROW_LIMIT,
    SPLIT_MIN_KEYS,
    KnobError,
    LaneShim,
    Latent,
    attention_time,
    best_splits,
    chunks_apart,
    head_blocks,
)

# -- LaneShim -----------------------------------------------------------------------------------


def test_the_default_shim_is_precise_decode() -> None:
    shim = LaneShim()
    assert (shim.numerics, shim.words, shim.fuse_quant, shim.batch_products) == ("precise", 1, False, False)
    assert shim.as_gemv(GEMV_ROW_LIMIT) and not shim.as_gemv(GEMV_ROW_LIMIT + 1)


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


def test_a_bad_recorded_knob_is_named() -> None:
    module = load_module('builtin.module attributes {lane.shim = {fast = true}} {}')
    with pytest.raises(KnobError, match="unknown knob fast"):
        LaneShim.of(module)


# -- chunks_apart -------------------------------------------------------------------------------


def test_small_gqa_decode_splits() -> None:
    """Batch 1, 32 query heads on 8 KV heads, 32k keys: 8 blocks leave 124 of 132 SMs idle."""
    shape = {"batch": 1, "heads": 32, "kv_heads": 8, "length": 32768}
    assert head_blocks(batch=1, heads=32, kv_heads=8) == 8
    assert chunks_apart(16, **shape)
    splits = best_splits(**shape)
    assert splits == 16  # 8 x 16 = 128 blocks: one wave of chunks of 2048 keys
    assert attention_time(splits, **shape) < attention_time(1, **shape) / 10


def test_we_count_kv_groups_where_flash_attention_counts_query_heads() -> None:
    """FlashAttention's heuristic sees 32 query-head blocks and picks about 4 splits; blocks a KV
    group need 4x that to fill the chip."""
    shape = {"batch": 1, "heads": 32, "kv_heads": 8, "length": 32768}
    assert attention_time(best_splits(**shape), **shape) < attention_time(4, **shape)


def test_a_full_chip_does_not_split() -> None:
    """Batch 256 x 8 KV heads = 2048 blocks, 15.5 waves of long rows: no chunks."""
    shape = {"batch": 256, "heads": 32, "kv_heads": 8, "length": 32768}
    assert not any(chunks_apart(s, **shape) for s in (2, 4, 16, 64))
    assert best_splits(**shape) == 1


def test_a_short_context_does_not_split() -> None:
    shape = {"batch": 1, "heads": 32, "kv_heads": 8, "length": 300}
    assert 300 / 2 < SPLIT_MIN_KEYS
    assert not chunks_apart(2, **shape)
    assert best_splits(**shape) == 1


def test_one_chunk_is_never_apart_and_zero_is_an_error() -> None:
    assert not chunks_apart(1, batch=1, heads=8, kv_heads=8, length=1 << 20)
    with pytest.raises(ValueError, match="splits 0"):
        attention_time(0, batch=1, heads=8, kv_heads=8, length=100)
    with pytest.raises(ValueError, match="do not share 3 KV heads"):
        chunks_apart(2, batch=1, heads=8, kv_heads=3, length=100)


def test_splitting_stops_where_the_waves_stop_paying() -> None:
    """Batch 8 x 8 KV heads = 64 blocks: two chunks fill 128 SMs; a third makes a second wave."""
    shape = {"batch": 8, "heads": 32, "kv_heads": 8, "length": 4096}
    assert chunks_apart(2, **shape) and chunks_apart(3, **shape)  # both beat one chunk
    assert attention_time(3, **shape) > attention_time(2, **shape)  # but the second wave costs
    assert best_splits(**shape) == 2


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
    %%o = form.latent_attention %%qr, %%lat, %%kr, %%cache, %%kvb, %%pages, %%pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64} : (tensor<%(tokens)dx128xbf16>, tensor<%(tokens)dx128xbf16>, tensor<%(tokens)dx32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<%(tokens)dxi32>) -> tensor<%(tokens)dx64xbf16>
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
