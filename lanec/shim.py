"""The CUDA lane under its knobs: `LaneShim` (the knobs, and the lane's held-back rules,
`heldback`), a latent attention as its launches read it (`Latent`), and when an attention's keys
are cut into chunks (`chunks_apart`) and into how many (`attention_splits`).

The numbers the held-back rules compare against are not here: each kernel's limits live beside
it (`lanec/codegen/facts.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from math import ceil
from typing import TYPE_CHECKING, NamedTuple

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, IntegerType, ModuleOp, StringAttr, i64

from lanec.codegen.facts import (
    ATTENTION_CLUSTER_SPLITS,
    GEMV_ROWS,
    LATENT_ENGINE,
    LATENT_TILE_KEYS,
    LATENT_WARPGROUP_ROWS,
    LATENT_WARPGROUPS,
    ROWS_A_BLOCK,
    SM_COUNT,
    latent_wgmma_blocks,
)
from lanec.dialects.form import LatentAttentionOp, StateOp, WeightOp, shape, tokens_of

if TYPE_CHECKING:
    from lanec.passes.rule import Rule

NUMERICS = ("precise", "quantized")
QUANT_WORDS = (1, 2)  # int8 words a quantized activation value: one, or a high and a residual word
SHIM_ATTR = "lane.shim"


# ----------------------------------------------------------------------------------------------
# The lane under its knobs


class KnobError(ValueError):
    """A combination of knobs the lane has no meaning for."""


@dataclass(frozen=True)
class LaneShim:
    """The lane under its knobs: the numerics (`precise`, or `quantized` with one or two int8 words a
    value), whether producers quantize in their epilogue (`fuse_quant`, quantized only), and
    whether the products are a batch's (each row its own sequence: the lane keeps them on the
    GEMV kernels whatever the row count), and whether a norm whose one reader is a GEMV runs in
    that GEMV's prologue (`fold_norms`, the fold-norm-into-gemv rule; on: measured faster at
    batch 1 since each CTA scales its sums after its products, nothing waiting on the row's
    reduction), and whether an argmax of a GEMV's output runs in that GEMV's epilogue
    (`fold_argmax`, the fold-argmax-into-gemv rule; off: measured slower), and whether a kda's
    output gate product runs in KdaSplit (`fold_gate`, the fold-gate-product rule; on: measured
    faster at one row, where alone it folds), and whether a norm whose one reader is a mixture
    runs in its fused router's prologue (`fold_router_norms`, the fold-norm-into-router rule;
    on: measured faster at batch 1, even at 8); with the lane's held-back rules (`heldback`)."""

    numerics: str = "precise"
    words: int = 1
    fuse_quant: bool = False
    batch_products: bool = False
    fold_norms: bool = True
    fold_argmax: bool = False
    fold_gate: bool = True
    fold_router_norms: bool = True

    def __post_init__(self) -> None:
        if self.numerics not in NUMERICS:
            raise KnobError(f"numerics '{self.numerics}': precise or quantized")
        if self.words not in QUANT_WORDS:
            raise KnobError(f"words {self.words}: a quantized activation value is one or two int8 words")
        if self.fuse_quant and self.numerics != "quantized":
            raise KnobError("fuse_quant quantizes in producers' epilogues: it needs --numerics quantized")
        if self.words != 1 and self.numerics != "quantized":
            raise KnobError(f"words {self.words}: only quantized numerics read int8 words")

    @property
    def quantized(self) -> bool:
        return self.numerics == "quantized"

    @property
    def heldback(self) -> tuple[type[Rule], ...]:
        """The lane's held-back rules, in the order they run: each keeps a fused op only where a
        kernel of the lane launches it, and splits it back otherwise. The splits that make new
        producers (kda, gated pair, products in parts) run before the check of quantize
        epilogues, which must see the final producers; the norms fold into the GEMVs they left
        last (fold-norm-into-gemv: it reads the final products and their activations' numerics) or into
        the mixtures' routers (fold-norm-into-router) or beside an absorbed latent attention's query
        (fold-norm-into-latent), and
        the argmax into the GEMV that writes its input after them; a tensor-parallel step's all-reduce
        into the norm that reads it last (a norm in a gemv's prologue stays there)."""
        from lanec.passes.fold_all_reduce_into_norm import FoldAllReduceIntoNormRule
        from lanec.passes.fold_argmax_into_gemv import FoldArgmaxIntoGemvRule
        from lanec.passes.fold_gate_product import FoldGateProductRule
        from lanec.passes.fold_norm_into_gemv import FoldNormIntoGemvRule
        from lanec.passes.fold_norm_into_latent import FoldNormIntoLatentRule
        from lanec.passes.fold_norm_into_router import FoldNormIntoRouterRule
        from lanec.passes.hold_conv_l2norm import HoldConvL2NormRule
        from lanec.passes.hold_gated_pair import HoldGatedPairRule
        from lanec.passes.hold_kda import HoldKdaRule
        from lanec.passes.hold_mixture_shared import HoldMixtureSharedRule
        from lanec.passes.hold_per_head_part import HoldPerHeadPartRule
        from lanec.passes.hold_products_in_parts import HoldProductsInPartsRule
        from lanec.passes.hold_quantized_activation import HoldQuantizedActivationRule
        from lanec.passes.hold_values_in_place import HoldValuesInPlaceRule

        return (HoldPerHeadPartRule, HoldValuesInPlaceRule, HoldKdaRule, FoldGateProductRule, HoldConvL2NormRule,
                HoldMixtureSharedRule,
                HoldGatedPairRule, HoldProductsInPartsRule, HoldQuantizedActivationRule, FoldNormIntoGemvRule,
                FoldNormIntoRouterRule, FoldNormIntoLatentRule, FoldArgmaxIntoGemvRule, FoldAllReduceIntoNormRule)

    def as_gemv(self, rows: int) -> bool:
        """Whether products of `rows` activation rows are a decode step's, for the GEMV kernels:
        at most the rows one gemv launch takes, or any number where the products are a batch's."""
        return rows <= GEMV_ROWS or self.batch_products

    def gemv_kernel(self, formats, gated: bool = False) -> str:
        """The GEMV a product (or gated pair) of rows in `formats` launches: q8_0 rows read an int8
        activation under quantized numerics (q8_gemv, q8_gated_gemv), else gemv or gated_gemv."""
        q8 = self.numerics == "quantized" and bool(formats) and all(f == "q8_0" for f in formats)
        return ("q8_" if q8 else "") + ("gated_gemv" if gated else "gemv")

    def gemv_reason(self, rows: int) -> str:
        if self.batch_products:
            return "the products are a batch's"
        return f"{rows} rows are at most the {GEMV_ROWS} a GEMV launch takes"

    def attribute(self) -> DictionaryAttr:
        return DictionaryAttr({
            "numerics": StringAttr(self.numerics),
            "words": IntegerAttr(self.words, i64),
            "fuse_quant": IntegerAttr(int(self.fuse_quant), IntegerType(1)),
            "batch_products": IntegerAttr(int(self.batch_products), IntegerType(1)),
            "fold_norms": IntegerAttr(int(self.fold_norms), IntegerType(1)),
            "fold_argmax": IntegerAttr(int(self.fold_argmax), IntegerType(1)),
            "fold_gate": IntegerAttr(int(self.fold_gate), IntegerType(1)),
            "fold_router_norms": IntegerAttr(int(self.fold_router_norms), IntegerType(1)),
        })

    def record(self, module: ModuleOp) -> None:
        module.attributes[SHIM_ATTR] = self.attribute()

    @staticmethod
    def of(module: ModuleOp, **given) -> LaneShim:
        """The shim a module records (the defaults where it records none), with the knobs in
        `given` that are not None in place of the module's (a command line's)."""
        attr = module.attributes.get(SHIM_ATTR)
        values: dict = {}
        if attr is not None:
            if not isinstance(attr, DictionaryAttr):
                raise KnobError(f"{SHIM_ATTR} must be a dictionary, got {attr}")
            known = {f.name for f in fields(LaneShim)}
            unknown = sorted(set(attr.data) - known)
            if unknown:
                raise KnobError(f"{SHIM_ATTR}: unknown knob {unknown[0]} (knobs: {', '.join(sorted(known))})")
            for key, value in attr.data.items():
                if key == "numerics":
                    if not isinstance(value, StringAttr):
                        raise KnobError(f"{SHIM_ATTR}: numerics is a string")
                    values[key] = value.data
                else:
                    if not isinstance(value, IntegerAttr):
                        raise KnobError(f"{SHIM_ATTR}: {key} is an integer or a boolean")
                    values[key] = value.value.data if key == "words" else bool(value.value.data)
        values.update({key: value for key, value in given.items() if value is not None})
        return LaneShim(**values)


# ----------------------------------------------------------------------------------------------
# Latent attention


def value_name(value) -> str:
    """A value's name as the printed form shows it, or its producer's name property."""
    owner = value.owner
    if isinstance(owner, WeightOp | StateOp):
        return owner.properties["name"].data
    return f"%{value.name_hint}" if value.name_hint else f"%<{owner.name}>"


@dataclass(frozen=True)
class Latent:
    """A latent attention's shape and names, as its expanded launches read them: the query
    projection `qr` (each head's unrotated part its first `nope` values) and its rotated part
    `qpp`; the cache `kc`, `kw` wide a row (the latent `lora` values, then the shared rotated
    key), `len` rows a request; the key and value halves of the latent's expansion (kv_b's rows
    for a head: `nope` key rows then `v` value rows) and their formats (`kro`: the key half's
    checkpoint rows are its outputs); the result `ct`. `rows`: query rows a request."""

    heads: int
    nope: int
    rope: int
    lora: int
    v: int
    qr: str
    qpp: str
    kc: str
    kw: int
    len: int
    key: str
    key_format: str
    value: str
    value_format: str
    kro: int
    ct: str
    rows: int

    # the latent values open the cache row: the absorbed path reads them in place at 0
    value_place = 0

    @staticmethod
    def of(op: LatentAttentionOp) -> Latent:
        heads, nope, rope = op.heads.value.data, op.nope.value.data, op.rope.value.data
        lora, v = op.lora.value.data, op.v.value.data
        _, page_size, width = shape(op.cache)
        pages = shape(op.pages)[1]
        kv_b = value_name(op.kv_b)
        fmt = op.kv_b.owner.format.data if isinstance(op.kv_b.owner, WeightOp) else "bf16"
        qr = value_name(op.qr)
        return Latent(
            heads=heads, nope=nope, rope=rope, lora=lora, v=v, qr=qr, qpp=f"{qr}.rope", kc=value_name(op.cache),
            kw=width, len=pages * page_size, key=f"{kv_b}.key", key_format=fmt, value=f"{kv_b}.value",
            value_format=fmt, kro=heads * nope, ct=value_name(op.result), rows=tokens_of(op),
        )

    @property
    def pitch(self) -> int:
        return self.kw

    @property
    def unit(self) -> int:
        """Each head's query values in `qr`: its unrotated part, then its rotated part."""
        return self.nope + self.rope

    def absorbed_cost(self) -> int:
        """Multiply-adds of the absorbed path for one request: each query row absorbs each head's
        nope part into the latent (nope x lora), scores the whole cache row (lora + rope), sums the
        latent values (lora), and projects them out through the value half (lora x v)."""
        return self.rows * self.heads * (self.lora * (self.nope + self.v) + self.len * (2 * self.lora + self.rope))

    def expanded_cost(self) -> int:
        """Multiply-adds of the expanded path for one request: expand every cached latent once into
        each head's key and value halves (len x lora x (nope + v)), then attend as plain attention
        (scores over nope + rope, values of v)."""
        expand = self.len * self.heads * self.lora * (self.nope + self.v)
        return expand + self.rows * self.heads * self.len * (self.nope + self.rope + self.v)

    def wide(self) -> bool:
        """A wide chunk: its query rows make the absorbed path cost more than expanding the cache
        once (both grow with the cache's length, so the query rows alone decide)."""
        return self.expanded_cost() < self.absorbed_cost()


# ----------------------------------------------------------------------------------------------
# Split-KV attention: the lane's named decision (`chunks_apart`) and its split count
# (`attention_splits`, fitted to bench/attention.py's sweep of the `attention` kernel)


def head_blocks(*, batch: int, heads: int, kv_heads: int, latent: bool = False) -> int:
    """Blocks of an unsplit decode attention: one per request and KV head group, the group's
    query heads sharing the block (each key and value read once), at most ROWS_A_BLOCK query rows
    a block (LATENT_ROWS_A_BLOCK for a latent attention: its 512-wide rows fill the registers
    sooner). A latent attention has one KV head, its latent row."""
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"{heads} query heads do not share {kv_heads} KV heads evenly")
    rows = LATENT_ROWS_A_BLOCK if latent else ROWS_A_BLOCK
    return batch * kv_heads * ceil(heads // kv_heads / rows)


# Measured on the H200 (2026-11-29, `LANEC_ATTN_SWEEP=1 python3 bench/attention.py`: GQA 32/8 and
# 8/2 x 128, MLA with 16, 32 and 128 heads, contexts 4k and 32k, batch 1 and 8, splits 1-128): the
# tensor-core attention is fastest when its blocks x chunks first reach about 96 (less than one
# block a SM: a chunk's blocks each stream their keys at full speed; more chunks only add partials
# and the combine's reads). 32/8, 4k, b1: 8 blocks x 16 chunks 12.6 us, x 32 15.6 us.
TARGET_BLOCKS = 96
# Chunks shorter than this cost more in the partial's store and the combine's read than their
# blocks save: 256 keys for GQA (8/2, 4k, b1: 16 chunks of 256 keys 9.9 us, 32 of 128 10.8 us),
# 128 for a latent attention, whose keys each cost 32 rows x 1088 multiply-adds (32 heads, 4k,
# b1: 32 chunks of 128 keys 17.8 us, 16 of 256 23.1 us). At 1k keys the same line holds (Kimi Linear's
# latent attention, b1: 8 chunks of 128 keys 11.3 us, 16 of 64 11.8, 4 of 256 16.6; b8: 13.0 against
# 13.9; bench/attention.py's sweep, H200, 2026-11-30), so it does not scale with the context.
MIN_CHUNK_KEYS = 256
LATENT_MIN_CHUNK_KEYS = 128
# The split counts the sweep measured; the choice is one of them, at most MAX_SPLITS. Until the combine read
# its chunks across lanes (2026-11-30), 128 chunks won nowhere (MLA Kimi Linear, 32k, b1: 64 chunks 51.7 us,
# 128 chunks 53.5); with it, one block's latent attention at 32k keys is fastest in 128 (Kimi Linear 25.4
# against 27.8 us, DeepSeek-V3's 16-head shard 21.3 against 23.3), and so is GQA 8/2 at 32k, b1 (13.7 against
# 15.5: its 2 blocks stop at 64 by TARGET_BLOCKS). bench/attention.py's sweep, H200, 2026-11-30.
MEASURED_SPLITS = (1, 4, 8, 16, 32, 64, 128)
MAX_SPLITS = 128
# A latent attention's chunks go below LATENT_SHORT_CHUNK keys only while its blocks x chunks stay under
# LATENT_SHORT_BLOCKS: each short chunk's query rows cost what its keys save once 128 CTAs hold them. The
# mma.sync engine's 32-row blocks (2026-11-29): DeepSeek-V3's 128 heads, 4k, b1 (4 blocks) 16 chunks of 256
# keys beat 32 of 128 (24.7 against 27.6 us); the wgmma engine's 64-row blocks (2026-11-30 sweep): its 2
# blocks in 32 chunks of 128 beat 16 of 256 (21.7 against 25.7), as one block of 32 heads does (17.1
# against 19.1).
LATENT_SHORT_CHUNK = 256
LATENT_SHORT_BLOCKS = 128
# A GQA attention of fewer head blocks than TARGET_BLOCKS (batch 1 to 8: the shapes the sweep below measured;
# more blocks keep the rules above) is cut where its chunks cost the fewest waves x keys: each of
# ceil(blocks x chunks / (SM_COUNT x the CTAs an SM holds)) waves takes a chunk's keys plus
# GQA_CHUNK_COST_KEYS (the chunk's fixed cost: its prologue, its partial and its share of the combine, in
# keys' time), over the measured splits and IDLE_SPLITS, with chunks of at least GQA_MIN_CHUNK_KEYS. An SM
# holds two CTAs of head size 128 (3 stages of 64 keys: 112 KB of shared memory) and one of 256 (2 stages:
# 135 KB). Fitted to the sweep after a chunk's page-table entries moved to shared memory (bench/attention.py
# LANEC_ATTN_SWEEP=1, H200, 2026-12-01: GQA 32/8 and 8/2 x 128 and 16/2 x 256, contexts 4k and 32k, batch 1,
# 3 and 8, splits 1-128): with a fixed cost of 128-384 keys it picks the fastest split or one within 5% on 17
# of the 18 shapes, 1.5-1.8% over the fastest in total; the rule before it (blocks to TARGET_BLOCKS, chunks of
# 256 keys and more) on 11, 8/2 at 4k and batch 1 in 16 chunks 7.9 us against 64 chunks 4.8. The one miss:
# 16/2 x 256 at 32k and batch 8, 8 chunks (one wave) 158.0 us against 16 (two) 145.1. A split that meets in
# its own cluster (`cluster_combine`) is kept: the combine launch it saves (and, in a q8_0 plan, the quantize
# launch after it) costs a step more than shorter chunks save (dense-small-q8 in chunks of 64 keys: 99.76 us
# against 97.01, bench/RESULTS.md 2026-12-01).
GQA_MIN_CHUNK_KEYS = 64
GQA_CHUNK_COST_KEYS = 256
# The expanded latent attention (latent_expanded.py, not the GQA kernel the waves were fitted to) keeps the rule
# fitted before (2026-11-29): the fewest measured split to reach TARGET_BLOCKS with chunks of MIN_CHUNK_KEYS,
# head blocks that reach it but not the SMs cut in IDLE_SPLITS, and a split that leaves chunks of LONG_CHUNK keys
# or more in fewer than 2 x TARGET_BLOCKS blocks cut once more (GQA then: 32/8, 32k, b1: 32 chunks 47.4 us
# against 16 chunks 52.4; 8/2, 32k, b8: 16 chunks 80.7 against 8 chunks 97.2).
LONG_CHUNK = 2048


# query rows a latent attention block holds: the wgmma engine (LATENT_ENGINE) takes up to 64 on two
# warpgroups (32 or fewer on one), so DeepSeek-V3's 128 heads are 2 blocks a request. Counted as 32
# (the mma.sync engine's blocks), `attention_splits` cut DeepSeek-V3 at 32k, batch 8 in 4 chunks (64
# CTAs): 506.6 us; counted as 64 it cuts in 8, the sweep's fastest (269.8 us; 2026-11-30, H200). With
# these counts the rule picks the sweep's fastest split on 11 of its 12 latent shapes; DeepSeek-V3 at
# 32k, b1 takes 64 chunks (80.0 us) where 32 took 75.9
LATENT_ROWS_A_BLOCK = LATENT_WARPGROUP_ROWS * LATENT_WARPGROUPS
# Head blocks that reach TARGET_BLOCKS but are fewer than the SMs leave SMs idle while each block
# streams a long context: cut in IDLE_SPLITS. Measured on the H200 (2026-11-29, bench/attention.py
# with LANEC_ATTN_CLUSTER=1, which times each shape's cut in 2 too): GQA 8/2 x 128 at batch 64 (128
# blocks) takes 76.3 us in 2 chunks against 94.1 unsplit at 4k keys, and 527.9 against 681.2 at 32k;
# DeepSeek-V3's latent attention at batch 64 (256 blocks, past the SMs) is slower in 2 (563.7
# against 519.9 us at 4k). A latent attention's blocks are not cut: on the wgmma engine DeepSeek-V3 at
# batch 64 is 128 blocks of 64 rows, 4 SMs idle, and two chunks were slower there too (276.3 against
# 242.3 us at 4k, 1993.1 against 1781.2 at 32k; 2026-11-30, H200): its blocks are compute-heavy, a
# second wave of them costs more than the idle SMs.
IDLE_SPLITS = 2
# A GQA attention's chunks meet in its own cluster (combine "cluster": each CTA reads its share of every
# chunk's rows over DSMEM, no attention_combine launch) where they are at most ATTENTION_CLUSTER_SPLITS and
# all its CTAs (blocks x chunks) at most CLUSTER_COMBINE_CTAS. Measured on the H200 (bench/attention.py with
# LANEC_ATTN_CLUSTER=1, 2026-11-29, the same chunks both ways): batch 1, GQA 8/2 at 4k keys, 16 CTAs, 11.3
# against 13.6 us; 32/8 at 4k and 32k, 64 CTAs, 12.1 against 13.8 and 84.2 against 85.6; batch 8, 8/2 at
# 4k, 128 CTAs, 16.5 against 15.3, and 32/8 in 4 chunks, 256 CTAs, 58.3 against 40.5: where the CTAs are
# many, the cluster's wait for its slowest chunk costs more than the launch.
CLUSTER_COMBINE_CTAS = 64


# The wgmma latent attention's chunks can meet in its own cluster the same way (its staged rows merged over
# DSMEM) where they are at most ATTENTION_CLUSTER_SPLITS and all its CTAs (row blocks x requests x chunks) at
# most LATENT_CLUSTER_COMBINE_CTAS. Measured on the H200 (2026-11-30, bench/model.py --side lanec, two rounds):
# the real-size Kimi-Linear-48B-A3B step at one request and 1k keys, whose 7 latent attentions are 8 chunks of
# one block each, takes 2064.1 and 2071.5 us with it against 2058.1 and 2058.6 without (7 launches fewer,
# 6-13 us slower), as the mma engine's cluster combine was at batch 1 (0.94x, 2026-11-29). Off (0) until a
# shape measures faster; the schedule's combine "cluster" with engine "wgmma" still builds it.
LATENT_CLUSTER_COMBINE_CTAS = 0


# A latent attention whose chunks stop at their shortest (`split_choice`'s "shortest" or "short-latent": a short
# context) in fewer CTAs than the SMs can take more CTAs in blocks of fewer query rows (the wgmma engine's
# `block_rows`, one of LATENT_CUT_ROWS), each block reading the same chunks. `latent_cut` weighs each such cut of
# one wave (requests x blocks x chunks <= SM_COUNT, chunks of a tile or more) against the rule's own by
# `latent_block_cost`: a CTA's fixed part (the queries' load, the epilogue, its share of the launch and the
# combine) by the block's padded query rows (64: two warpgroups of 32), its tiles each a time by those rows and
# LATENT_TILE_CONTENTION_US more for every 100 CTAs streaming beside it, and the chunks' rows written and read
# back. Fitted by least squares to the 118 one-wave rows of bench/attention.py's MLA sweep with
# LANEC_ATTN_ROWS=8,16 (H200, 2026-12-02: Kimi Linear's 32 heads, DeepSeek-V3's 128 and its 16-head shard, 576-wide
# rows, 1k and 4k keys, batch 1 and 8, 1 to 64 chunks): median error 3%, at most 20%. It picks the sweep's
# fastest cut, or one within 11% of it, on the 12 shapes, each 1.05-1.80x the rule's (Kimi Linear at 1k keys and
# batch 1: 16 chunks of 8-row blocks, 6.7 against 11.8 us); blocks of 32 rows in place of two warpgroups' 64
# were not measured and are not a candidate.
LATENT_CUT_ROWS = (8, 16)
LATENT_BLOCK_US = {8: 5.46, 16: 6.04, 32: 7.98, 64: 7.74}  # a CTA's fixed part, by its padded rows
LATENT_TILE_US = {8: 1.52, 16: 1.93, 32: 2.18, 64: 3.07}  # a tile of LATENT_TILE_KEYS keys, by the same rows
LATENT_TILE_CONTENTION_US = 0.14  # more a tile for every 100 CTAs of the wave
LATENT_PARTIAL_US_A_MB = 0.309  # a MB of the chunks' rows (written, then read by attention_combine)


class LatentCut(NamedTuple):
    """A latent attention's cut: its chunks of the keys, the most query rows a block (None: all of a
    request's on one or two warpgroups, `latent_wgmma_blocks`), and why (`lanec explain`)."""

    splits: int
    block_rows: int | None
    why: str


def latent_block_cost(batch: int, rows: int, context: int, splits: int, most: int | None, lora: int = 512,
                      partial_bytes: int = 2) -> float:
    """`latent_cut`'s time (us) of a latent attention over `rows` query rows a request in blocks of at most
    `most` rows (None: `latent_wgmma_blocks`' own), `splits` chunks of `context` keys, in one wave: a CTA's
    fixed part and its tiles (LATENT_BLOCK_US, LATENT_TILE_US, LATENT_TILE_CONTENTION_US), and the chunks'
    `lora`-wide rows of `partial_bytes` a value (LATENT_PARTIAL_US_A_MB)."""
    groups, blocks, block_rows = latent_wgmma_blocks(rows, most)
    share = ceil(block_rows / groups)  # a warpgroup's rows, padded as the kernel pads them: whole 8-row steps
    padded = next(r for r in sorted(LATENT_BLOCK_US) if r >= groups * ceil(share / 8) * 8)
    tiles = ceil(ceil(context / splits) / LATENT_TILE_KEYS)
    ctas = batch * blocks * splits
    partials = 2 * partial_bytes * batch * rows * lora * splits if splits > 1 else 0
    return (LATENT_BLOCK_US[padded] + tiles * (LATENT_TILE_US[padded] + LATENT_TILE_CONTENTION_US * ctas / 100)
            + LATENT_PARTIAL_US_A_MB * partials / 1e6)


def latent_cut(batch: int, heads: int, tokens: int, context: int, lora: int = 512) -> LatentCut:
    """A latent attention's chunks (`attention_splits`) and the most query rows a block: the rule's chunks
    in blocks of all a request's rows, or, where those chunks stop at their shortest in fewer CTAs than
    the SMs, the cut in blocks of LATENT_CUT_ROWS rows that `latent_block_cost` finds faster."""
    splits, stop = split_choice(batch, heads, 1, context, latent=True)
    rows = heads * tokens
    why = splits_reason(splits, batch=batch, heads=heads, kv_heads=1, context=context, latent=True)
    _, blocks, own = latent_wgmma_blocks(rows)
    if LATENT_ENGINE != "wgmma" or stop not in ("shortest", "short-latent") or batch * blocks * splits >= SM_COUNT:
        return LatentCut(splits, None, why)
    ours = latent_block_cost(batch, rows, context, splits, None, lora)
    cost, chunks, most = min(
        [(ours, splits, None)]
        + [(latent_block_cost(batch, rows, context, chunks, most, lora), chunks, most)
           for most in LATENT_CUT_ROWS if most < own for chunks in MEASURED_SPLITS
           if chunks <= MAX_SPLITS and context >= chunks * LATENT_TILE_KEYS
           and batch * latent_wgmma_blocks(rows, most)[1] * chunks <= SM_COUNT],
        key=lambda option: (option[0], option[2] is not None, option[1]))
    if most is None:
        return LatentCut(splits, None, why)
    _, blocks, block_rows = latent_wgmma_blocks(rows, most)
    return LatentCut(chunks, most, (
        f"{batch * blocks} blocks of {block_rows} query rows (block_rows {most}) x {chunks} chunks of "
        f"{ceil(context / chunks)} keys, {batch * blocks * chunks} CTAs: {cost:.1f} us by LATENT_BLOCK_US (fitted: "
        f"bench/attention.py) against {ours:.1f} for the rule's {why}"))


def latent_cluster_combine(splits: int, *, batch: int, heads: int, tokens: int, block_rows: int | None = None) -> bool:
    """Whether a latent attention cut into `splits` chunks (in blocks of at most `block_rows` rows, the
    schedule's) combines them in its own cluster (the wgmma engine's combine "cluster") instead of an
    attention_combine launch."""
    _, blocks, _ = latent_wgmma_blocks(heads * tokens, block_rows)
    return (LATENT_ENGINE == "wgmma" and 1 < splits <= ATTENTION_CLUSTER_SPLITS
            and blocks * batch * splits <= LATENT_CLUSTER_COMBINE_CTAS)


def cluster_combine(splits: int, *, batch: int, heads: int, kv_heads: int) -> bool:
    """Whether a GQA attention cut into `splits` chunks combines them in its own cluster (the schedule's
    combine "cluster") instead of an attention_combine launch."""
    return _meets_in_cluster(splits, head_blocks(batch=batch, heads=heads, kv_heads=kv_heads))


def gqa_chunks(batch: int, heads: int, kv_heads: int, context: int, head: int = 128) -> tuple[int, bool]:
    """A GQA attention's chunks (`attention_splits`) and whether they meet in its own cluster
    (`cluster_combine`): the lowering's launch, and what hold-quantized-activation asks of it."""
    splits = attention_splits(batch, heads, kv_heads, context, head=head)
    return splits, cluster_combine(splits, batch=batch, heads=heads, kv_heads=kv_heads)


def chunks_apart(splits: int, *, batch: int, heads: int, kv_heads: int, latent: bool = False) -> bool:
    """Whether an attention cut into `splits` chunks of its keys runs a block a chunk (split-KV,
    flash-decoding): where its rows' head blocks alone are fewer than TARGET_BLOCKS, or (cut in
    IDLE_SPLITS) fewer than the SMs. The blocks are counted a KV head group (FlashAttention's
    num_splits_heuristic counts query heads, so GQA decode at batch 1 looks like it fills 32 SMs
    when it fills 8)."""
    if splits < 1:
        raise ValueError(f"splits {splits}: at least one chunk")
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)
    return splits > 1 and (blocks < TARGET_BLOCKS or (not latent and splits == IDLE_SPLITS and blocks < SM_COUNT))


def attention_splits(batch: int, heads: int, kv_heads: int, context: int, latent: bool = False,
                     head: int = 128, expanded: bool = False) -> int:
    """The chunks an attention's keys are cut into (the kernel's `splits`). A latent attention:
    the fewest of MEASURED_SPLITS (up to MAX_SPLITS) whose blocks reach TARGET_BLOCKS, stopping
    before a chunk of the `context` (the cache positions a request may reach) would be shorter than
    LATENT_MIN_CHUNK_KEYS or short chunks meet many blocks (LATENT_SHORT_CHUNK). A GQA attention of
    `head`-wide heads whose head blocks reach TARGET_BLOCKS: unsplit, or in IDLE_SPLITS while they leave
    SMs idle; of fewer blocks: that rule's split (chunks of MIN_CHUNK_KEYS) where it meets in its own
    cluster, else the split of the fewest waves x keys (GQA_CHUNK_COST_KEYS). The `expanded` latent
    attention: the rule of TARGET_BLOCKS and LONG_CHUNK."""
    return split_choice(batch, heads, kv_heads, context, latent, head, expanded)[0]


def split_choice(batch: int, heads: int, kv_heads: int, context: int, latent: bool = False,
                 head: int = 128, expanded: bool = False) -> tuple[int, str]:
    """`attention_splits`' choice and the fact that ended it: for a latent attention "unsplit",
    "target", "shortest", "short-latent" or "most"; for a GQA attention "idle", "unsplit", "cluster" or
    "waves"; for the expanded attention "idle", "unsplit", "target", "shortest", "most" or "long"
    (`splits_reason` puts it in words)."""
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)
    if latent:
        return (1, "unsplit") if blocks >= TARGET_BLOCKS else _first_split(blocks, context, True)
    if TARGET_BLOCKS <= blocks < SM_COUNT:  # enough blocks, SMs idle: in two if chunks stay long
        return (IDLE_SPLITS, "idle") if context >= IDLE_SPLITS * MIN_CHUNK_KEYS else (1, "idle")
    if blocks >= TARGET_BLOCKS:
        return 1, "unsplit"
    chosen, why = _first_split(blocks, context, False)
    if expanded:
        if why == "target" and blocks * chosen < 2 * TARGET_BLOCKS and context // chosen >= LONG_CHUNK \
                and 2 * chosen <= MAX_SPLITS:
            return 2 * chosen, "long"
        return chosen, why
    if _meets_in_cluster(chosen, blocks):
        return chosen, "cluster"
    costs = {splits: _wave_keys(blocks, splits, context, head) for splits in _gqa_candidates(context)}
    return min(costs, key=lambda splits: (costs[splits], splits)), "waves"


def _first_split(blocks: int, context: int, latent: bool) -> tuple[int, str]:
    """The fewest measured split whose blocks reach TARGET_BLOCKS with chunks of the minimum keys, or
    the last before a stop: ("target", "shortest", "short-latent" or "most")."""
    shortest = LATENT_MIN_CHUNK_KEYS if latent else MIN_CHUNK_KEYS
    chosen = 1
    for splits in MEASURED_SPLITS[1:]:
        if splits > MAX_SPLITS:
            return chosen, "most"
        if context < splits * shortest:
            return chosen, "shortest"
        if latent and context // splits < LATENT_SHORT_CHUNK and blocks * splits >= LATENT_SHORT_BLOCKS:
            return chosen, "short-latent"
        chosen = splits
        if blocks * splits >= TARGET_BLOCKS:
            return chosen, "target"
    return chosen, "shortest"


def _gqa_candidates(context: int) -> list[int]:
    """The GQA splits the wave rule weighs: one chunk, IDLE_SPLITS and the measured splits up to
    MAX_SPLITS, with chunks of at least GQA_MIN_CHUNK_KEYS."""
    found = sorted({1, IDLE_SPLITS, *MEASURED_SPLITS})
    return [s for s in found if s == 1 or (s <= MAX_SPLITS and context >= s * GQA_MIN_CHUNK_KEYS)]


def gqa_resident_ctas(head: int) -> int:
    """GQA attention CTAs an SM holds at once, by their shared memory (see GQA_CHUNK_COST_KEYS)."""
    return 2 if head <= 128 else 1


def _waves(blocks: int, splits: int, head: int) -> int:
    """The waves of resident CTAs (SM_COUNT x `gqa_resident_ctas`) a GQA split's blocks x chunks take."""
    return ceil(blocks * splits / (SM_COUNT * gqa_resident_ctas(head)))


def _wave_keys(blocks: int, splits: int, context: int, head: int) -> int:
    """A GQA split's cost in keys' time: its waves of resident CTAs x (a chunk's keys + its fixed cost)."""
    return _waves(blocks, splits, head) * (ceil(context / splits) + GQA_CHUNK_COST_KEYS)


def _meets_in_cluster(splits: int, blocks: int) -> bool:
    """`cluster_combine` on a shape's head blocks."""
    return 1 < splits <= ATTENTION_CLUSTER_SPLITS and blocks * splits <= CLUSTER_COMBINE_CTAS


def splits_reason(splits: int, *, batch: int, heads: int, kv_heads: int, context: int, latent: bool = False,
                  head: int = 128, expanded: bool = False) -> str:
    """Why `attention_splits` chose `splits` for this shape, in words and numbers (`lanec explain`)."""
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads, latent=latent)
    chosen, why = split_choice(batch, heads, kv_heads, context, latent, head, expanded)
    chunked = f"{blocks} head blocks x {splits} chunks of {ceil(context / splits)} keys"
    if splits != chosen:
        return f"{chunked} (attention_splits chooses {chosen} here)"
    if why == "idle":
        if splits == 1:
            return (f"{blocks} head blocks reach {TARGET_BLOCKS} but not the {SM_COUNT} SMs; a context of {context} "
                    "keys is too short to cut in two")
        return (f"{blocks} head blocks reach {TARGET_BLOCKS} but leave {SM_COUNT - blocks} of {SM_COUNT} SMs idle: "
                f"{chunked} (measured: bench/attention.py)")
    if why == "unsplit":
        return f"{blocks} head blocks reach {TARGET_BLOCKS} unsplit"
    if why == "long":
        return (f"{chunked}: {splits // 2} chunks reach {TARGET_BLOCKS} blocks but leave chunks of "
                f"{LONG_CHUNK} keys or more in fewer than {2 * TARGET_BLOCKS} blocks, so cut once more "
                "(measured: bench/attention.py)")
    if why == "cluster":
        return (f"{chunked}: the fewest chunks of {MIN_CHUNK_KEYS} keys or more to reach {TARGET_BLOCKS} blocks, "
                "kept where they can meet in the launch's cluster (no combine launch; measured: bench/attention.py)")
    if why == "waves":
        resident, waves = SM_COUNT * gqa_resident_ctas(head), _waves(blocks, splits, head)
        return (f"{chunked}: the fewest waves x keys, {waves} wave(s) of {resident} CTAs x ({ceil(context / splits)} "
                f"+ {GQA_CHUNK_COST_KEYS} keys), over splits with chunks of {GQA_MIN_CHUNK_KEYS} keys or more "
                "(fitted: bench/attention.py's sweep)")
    if why == "target":
        return f"{chunked} reach {TARGET_BLOCKS} blocks (measured: bench/attention.py)"
    if why == "most":
        return f"{chunked}: at most {MAX_SPLITS} chunks, whose partials the combine merges (measured)"
    if why == "short-latent":
        return (f"{chunked}: more chunks would be shorter than {LATENT_SHORT_CHUNK} keys in {LATENT_SHORT_BLOCKS} "
                "blocks or more (measured: bench/attention.py)")
    shortest = LATENT_MIN_CHUNK_KEYS if latent else MIN_CHUNK_KEYS
    return (f"{chunked}: the next measured split would make chunks shorter than {shortest} keys "
            "(measured: bench/attention.py)")
