"""The CUDA lane: the facts about its kernels that decide which fusions have a launch, the lane
under its knobs (`LaneShim`), a latent attention as its launches read it (`Latent`), and when an
attention's keys are cut into chunks (`chunks_apart`).

Every number a held-back rule compares against is a named constant here, so `lanec explain`
and the rules quote the same fact.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, IntegerType, ModuleOp, StringAttr, i64

from lanec.dialects.form import LatentAttentionOp, StateOp, WeightOp, shape, tokens_of

# ----------------------------------------------------------------------------------------------
# The lane's kernel facts

WARP = 32  # threads a warp
GEMV_ROW_LIMIT = 16  # the GEMV kernels keep at most 16 activation rows in registers; more go to the tensor cores
PART_TILE = 128  # a tensor-core product in parts tiles each part's outputs by 128
MAX_PARTS = 4  # the tensor-core GEMM in parts takes at most four parts
PAIR_TILE = 256  # a tensor-core gated pair puts a 128-wide gate tile beside a 128-wide up tile
CONV_NORM_MAX_HEAD = 1024  # the conv epilogue's L2 norm reduces a head in one block of at most 1024 threads
MIXTURE_MAX_WARPS = 32  # the mixture's block of kept experts: one warp an expert, 1024 threads at most
KDA_HEAD = 128  # KdaSplit: 128 main threads, one key/value lane a thread
KDA_MAX_TOKENS = 8  # KdaSplit's decay barrier expects 512 bytes per token, at most 8 tokens a request
KDA_CONV_WIDTH = 4  # KdaSplit keeps 3 taps of conv state a channel
SMS = 132  # streaming multiprocessors of an H100 SXM / H200
QUANT_WORDS = (1, 2)  # int8 words a quantized activation value

NUMERICS = ("precise", "quantized")
SHIM_ATTR = "lane.shim"


# ----------------------------------------------------------------------------------------------
# The lane under its knobs


class KnobError(ValueError):
    """A combination of knobs the lane has no meaning for."""


@dataclass(frozen=True)
class LaneShim:
    """The lane under its knobs: the numerics (`precise`, or `quantized` with one or two int8
    words a value), whether producers quantize in their epilogue (`fuse_quant`, quantized only),
    and whether the products are a batch's (each row its own sequence: the lane keeps them on
    the GEMV kernels whatever the row count)."""

    numerics: str = "precise"
    words: int = 1
    fuse_quant: bool = False
    batch_products: bool = False

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

    def as_gemv(self, rows: int) -> bool:
        """Whether products of `rows` activation rows run on the GEMV kernels."""
        return rows <= GEMV_ROW_LIMIT or self.batch_products

    def gemv_reason(self, rows: int) -> str:
        if self.batch_products:
            return "the products are a batch's"
        return f"{rows} rows are at most the GEMV's {GEMV_ROW_LIMIT}"

    def attribute(self) -> DictionaryAttr:
        flag = lambda b: IntegerAttr(int(b), IntegerType(1))
        return DictionaryAttr({
            "numerics": StringAttr(self.numerics),
            "words": IntegerAttr(self.words, i64),
            "fuse_quant": flag(self.fuse_quant),
            "batch_products": flag(self.batch_products),
        })

    def record(self, module: ModuleOp) -> None:
        module.attributes[SHIM_ATTR] = self.attribute()

    @staticmethod
    def of(module: ModuleOp) -> LaneShim:
        """The shim a module records (the defaults where it records none)."""
        attr = module.attributes.get(SHIM_ATTR)
        if attr is None:
            return LaneShim()
        if not isinstance(attr, DictionaryAttr):
            raise KnobError(f"{SHIM_ATTR} must be a dictionary, got {attr}")
        known = {"numerics", "words", "fuse_quant", "batch_products"}
        unknown = sorted(set(attr.data) - known)
        if unknown:
            raise KnobError(f"{SHIM_ATTR}: unknown knob {unknown[0]} (knobs: {', '.join(sorted(known))})")
        values: dict = {}
        for key, value in attr.data.items():
            if key == "numerics":
                if not isinstance(value, StringAttr):
                    raise KnobError(f"{SHIM_ATTR}: numerics is a string")
                values[key] = value.data
            else:
                if not isinstance(value, IntegerAttr):
                    raise KnobError(f"{SHIM_ATTR}: {key} is an integer or a boolean")
                values[key] = value.value.data if key == "words" else bool(value.value.data)
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
# Split-KV attention

ROWS_A_BLOCK = 64  # query rows one attention block holds (one wgmma M tile): a KV head's group
SPLIT_MIN_KEYS = 256  # a chunk shorter than this does not pay for writing its partial row
COMBINE_KEYS = 128  # the combine launch costs about as much as one block reading this many keys
PARTIAL_KEYS = 8  # and each chunk's partial row (written, then read back) about this many more


def head_blocks(*, batch: int, heads: int, kv_heads: int) -> int:
    """Blocks of an unsplit decode attention: one per request and KV head group, the group's
    query heads sharing the block (and each key and value read once), 64 query rows a block."""
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"{heads} query heads do not share {kv_heads} KV heads evenly")
    return batch * kv_heads * ceil(heads // kv_heads / ROWS_A_BLOCK)


def attention_time(splits: int, *, batch: int, heads: int, kv_heads: int, length: int, sms: int = SMS) -> int:
    """Time of an attention cut into `splits` chunks, in key-steps of one block: the waves of
    blocks times the keys a chunk, plus the combine (and every chunk's partial row) where there
    is more than one chunk."""
    if splits < 1:
        raise ValueError(f"splits {splits}: at least one chunk")
    blocks = head_blocks(batch=batch, heads=heads, kv_heads=kv_heads) * splits
    waves = ceil(blocks / sms)
    return waves * ceil(length / splits) + (COMBINE_KEYS + PARTIAL_KEYS * splits if splits > 1 else 0)


def chunks_apart(splits: int, *, batch: int, heads: int, kv_heads: int, length: int, sms: int = SMS) -> bool:
    """Whether an attention cut into `splits` chunks of its keys runs a block a chunk (split-KV,
    flash-decoding): only where the rows' head blocks alone leave the chip idle, each chunk
    holds at least SPLIT_MIN_KEYS keys, and the waves saved pay for the combine.

    Unlike FlashAttention's num_splits_heuristic (which counts query heads, so GQA decode at
    batch 1 looks like it fills 32 SMs when it fills 8) this counts blocks a KV head group, and
    it charges the combine instead of accepting any split within 85% of the best wave
    efficiency."""
    if length < 1:
        raise ValueError(f"length {length}: at least one key")
    if splits == 1:
        return False
    if head_blocks(batch=batch, heads=heads, kv_heads=kv_heads) >= sms:
        return False
    if ceil(length / splits) < SPLIT_MIN_KEYS:
        return False
    shape_ = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "length": length, "sms": sms}
    return attention_time(splits, **shape_) < attention_time(1, **shape_)


def best_splits(*, batch: int, heads: int, kv_heads: int, length: int, sms: int = SMS) -> int:
    """The number of chunks that runs fastest (the fewest among equals); 1 where none pays."""
    shape_ = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "length": length, "sms": sms}
    best = 1
    for splits in range(2, sms + 1):
        if chunks_apart(splits, **shape_) and attention_time(splits, **shape_) < attention_time(best, **shape_):
            best = splits
    return best
