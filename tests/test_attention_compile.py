"""attention and attention_combine compile for sm_90a (CPU only): their PTX has the PDL pair, the
cp.async pipeline and no local memory (a register indexed at run time would spill there); their
launch and params follow the specialization; bad specializations raise one line naming the fact.
With `loads` "bulk" the cache rows come by cp.async.bulk on an mbarrier a buffer; the default
engine stays cp.async alone. The latent attention's default engine is wgmma (LATENT_ENGINE); a
schedule asking for one of the mma engine's knobs gets the mma.sync kernel."""

from __future__ import annotations

import re

import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.facts import latent_engine_reason, latent_unchecked
from lanec.codegen.kernels import kernel_class
from lanec.codegen.kernels.attention import Attention, AttentionCombine, LatentAttention
from lanec.codegen.kernels.latent_expanded import ExpandedLatentAttention, LatentExpand
from lanec.codegen.kernels.latent_wgmma import LatentWgmma

KERNELS = {
    "h32_kv8_d128_p16": lambda: Attention(8, 1, 32, 8, 128, 16, 256, 2048),
    "h8_kv2_d128_p64_t4_s4": lambda: Attention(2, 4, 8, 2, 128, 64, 64, 128, splits=4),
    "h16_kv16_d64_p16_t4_pitched": lambda: Attention(2, 4, 16, 16, 64, 16, 64, 128, q_pitch=3072, k_pitch=3072,
                                                     v_pitch=1032),
    "h4_kv1_d256_p64_s4": lambda: Attention(1, 1, 4, 1, 256, 64, 16, 16, splits=4),
    "h12_kv4_d128_p32_t3": lambda: Attention(3, 3, 12, 4, 128, 32, 32, 100),
    "h64_kv4_d128_p16_t8_s2": lambda: Attention(1, 8, 64, 4, 128, 16, 16, 16, splits=2),  # two row blocks
    "h32_kv2_d256_p16_t4": lambda: Attention(2, 4, 32, 2, 256, 16, 16, 40),
    # the two schedules that fit 3 CTAs an SM at head 128 (session.sh pending-gqa-tiles)
    "h32_kv8_d128_tile32_stages4_s8": lambda: Attention(1, 1, 32, 8, 128, 16, 256, 300, splits=8,
                                                        schedule={"tile": 32, "stages": 4}),
    "h12_kv4_d256_tile64_stages2_t3": lambda: Attention(3, 3, 12, 4, 256, 32, 32, 100,
                                                        schedule={"tile": 64, "stages": 2}),
    "h8_kv2_d128_tile128_stages2": lambda: Attention(2, 1, 8, 2, 128, 16, 64, 128,
                                                     schedule={"tile": 128, "stages": 2}),
    "mla_h32_l512_r64_t1": lambda: LatentAttention(8, 1, 32, 512, 64, 16, 256, 2048, nope=128),
    "mla_h128_l512_r64_t4_s4": lambda: LatentAttention(2, 4, 128, 512, 64, 64, 64, 128, splits=4, nope=128,
                                                       qr_pitch=24576 + 512),
    "mla_h32_l512_nope_t3_s2": lambda: LatentAttention(3, 3, 32, 512, 0, 32, 32, 100, splits=2,
                                                       latent_pitch=2304),
    "mla_h16_l256_r32_t2": lambda: LatentAttention(2, 2, 16, 256, 32, 16, 16, 40, nope=64),
    # the mma.sync engine, named (the latent attention's default is wgmma: LATENT_ENGINE)
    "mla_h32_l512_r64_t1_mma": lambda: LatentAttention(8, 1, 32, 512, 64, 16, 256, 2048, nope=128,
                                                       schedule={"engine": "mma"}),
    "mla_h16_l256_r32_t2_mma": lambda: LatentAttention(2, 2, 16, 256, 32, 16, 16, 40, nope=64,
                                                       schedule={"engine": "mma"}),
    "expanded_h32_n80_r64_v128_t2_s3": lambda: ExpandedLatentAttention(3, 2, 32, 80, 64, 128, 64, 12, 50, splits=3,
                                                                       qr_pitch=32 * 144 + 64),
    "expanded_h4_n40_nope_v64": lambda: ExpandedLatentAttention(5, 1, 4, 40, 0, 64, 32, 10, 60),
    "expand_h32_n80_r64_l512_v128_t2": lambda: LatentExpand(3, 2, 32, 80, 64, 512, 128, 64, 12, 50, latent_pitch=576,
                                                            k_rope_pitch=576),
    "expand_h4_n40_nope_l256_v64": lambda: LatentExpand(5, 1, 4, 40, 0, 256, 64, 32, 10, 60),
    "combine_d128_s4": lambda: AttentionCombine(3, 12, 128, 4),
    "combine_d512_s8": lambda: AttentionCombine(5, 32, 512, 8),
    "combine_d256_s64": lambda: AttentionCombine(1, 40, 256, 64),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_compiles_for_sm90a(case):
    kernel = KERNELS[case]()
    compiled = compiled_for_sm90a(kernel)
    ptx = compiled.ptx
    attends = isinstance(kernel, Attention | LatentAttention | ExpandedLatentAttention)
    on_wgmma = isinstance(kernel, LatentWgmma)
    assert ("cp.async.cg.shared.global" in ptx) == attends
    assert ("mma.sync.aligned.m16n8k16" in ptx and "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx) == (
        attends and not on_wgmma)
    assert ("wgmma.mma_async" in ptx) == on_wgmma
    assert "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx
    assert ".local" not in ptx, "local memory: a register array indexed at run time"
    if isinstance(kernel, LatentExpand):  # fp32 sums of the latent rows, stored as bf16 keys and values
        assert "fma.rn.f32" in ptx and "cvt.rn.bf16.f32" in ptx


BULK = {
    "h32_kv8_d128_p16": lambda s: Attention(8, 1, 32, 8, 128, 16, 256, 2048, schedule=s),
    "h8_kv2_d128_p64_t4_s4": lambda s: Attention(2, 4, 8, 2, 128, 64, 64, 128, splits=4, schedule=s),
    "h12_kv4_d128_p32_t3": lambda s: Attention(3, 3, 12, 4, 128, 32, 32, 100, schedule=s),
    "h16_kv16_d64_p16_t4_tile32": lambda s: Attention(2, 4, 16, 16, 64, 16, 64, 128, schedule=dict(s or {}, tile=32)),
    "h4_kv1_d256_p64_s4": lambda s: Attention(1, 1, 4, 1, 256, 64, 16, 16, splits=4, schedule=s),
    "mla_h32_l512_r64_t1": lambda s: LatentAttention(8, 1, 32, 512, 64, 16, 256, 2048, nope=128, schedule=s),
    "mla_h32_l512_nope_t4_s3": lambda s: LatentAttention(2, 4, 32, 512, 0, 16, 160, 400, splits=3,
                                                          latent_pitch=2304, schedule=s),
    "mla_h128_l512_r64_s8": lambda s: LatentAttention(1, 1, 128, 512, 64, 64, 64, 80, splits=8, nope=128,
                                                       schedule=s),
}
BULK_COPY = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"


@pytest.mark.parametrize("case", sorted(BULK))
def test_bulk_loads_compile_for_sm90a(case):
    """loads "bulk": an mbarrier a buffer (initialized, fenced for the async proxy), armed with the
    tile's bytes and waited by phase parity; the first tiles' bulk copies issued before
    griddepcontrol.wait; the step's rows and the queries still by cp.async; no local memory."""
    kernel = BULK[case]({"loads": "bulk"})
    ptx = compiled_for_sm90a(kernel).ptx
    assert BULK_COPY in ptx and "cp.async.cg.shared.global" in ptx
    assert ptx.count("mbarrier.init.shared.b64") == kernel.stages and "fence.mbarrier_init" in ptx
    assert "mbarrier.arrive.expect_tx.shared.b64" in ptx and "mbarrier.try_wait.parity.shared.b64" in ptx
    assert ptx.index(BULK_COPY) < ptx.index("griddepcontrol.wait;"), "the cache rows wait for the predecessor"
    assert kernel.launch().shared_bytes == BULK[case]({"engine": "mma"}).launch().shared_bytes + 8 * kernel.stages


@pytest.mark.parametrize("case", ["h8_kv2_d128_p64_t4_s4", "mla_h32_l512_nope_t4_s3"])
def test_copy_loads_stay_the_default(case):
    """No schedule and loads "copy" build the same kernel: cp.async alone, no bulk copy, no mbarrier."""
    default = compiled_for_sm90a(BULK[case](None)).ptx
    assert compiled_for_sm90a(BULK[case]({"loads": "copy"})).ptx == default
    assert "cp.async.bulk" not in default and "mbarrier" not in default


@pytest.mark.parametrize("case", ["h8_kv2_d128_p64_t4_s4", "h4_kv1_d256_p64_s4", "mla_h32_l512_nope_t4_s3"])
def test_cluster_combine_merges_the_chunks_in_the_launch(case):
    """combine "cluster": the chunks are one cluster; each leaves its rows in its shared memory,
    and, between two cluster barriers, reads every chunk's over DSMEM (mapa + ld.shared::cluster)
    and writes `out`: no partial, no lse, no second launch, the same shared memory."""
    kernel = BULK[case]({"combine": "cluster"})
    apart = BULK[case]({"engine": "mma"})
    ptx = compiled_for_sm90a(kernel).ptx
    assert kernel.launch().cluster == (kernel.splits, 1, 1) and apart.launch().cluster == (1, 1, 1)
    assert kernel.launch().shared_bytes == apart.launch().shared_bytes
    assert [p.name for p in kernel.params()][-1] == "out" and "partial" not in [p.name for p in kernel.params()]
    assert "mapa.shared::cluster" in ptx and "ld.shared::cluster.v4.f32" in ptx
    assert ptx.count("barrier.cluster.arrive") == 2 and ptx.count("barrier.cluster.wait") == 2
    assert "mapa" not in compiled_for_sm90a(apart).ptx


@pytest.mark.parametrize("words", [1, 2])
def test_the_cluster_merge_writes_the_quantized_form(words):
    """`quantize` (fuse-quant's epilogue): the merge writes int8 rows of the quantized form (one or two
    words, then a scale a 32-value block), its 8 lanes a block meeting by three butterfly shuffles; the
    same cluster, shared memory and no local memory. Only a cluster merge quantizes."""
    from lanec.codegen.facts import quantized_pitch

    make = lambda **q: Attention(1, 1, 16, 4, 128, 16, 128, 128, splits=8, schedule={"combine": "cluster"}, **q)  # noqa: E731
    kernel, plain = make(quantize=words), make()
    out = kernel.params()[-1]
    assert (out.name, out.dtype, out.shape) == ("out", "int8", (1, quantized_pitch(16 * 128, words)))
    assert kernel.launch() == plain.launch()
    ptx, plain_ptx = compiled_for_sm90a(kernel).ptx, compiled_for_sm90a(plain).ptx
    shuffles = ptx.count("shfl.sync.bfly") - plain_ptx.count("shfl.sync.bfly")
    assert shuffles == 3  # the block's peak over 8 lanes: offsets 4, 2, 1
    assert ".local" not in ptx and "st.global.b32" in ptx
    with pytest.raises(ValueError, match="where the chunks merge in the launch's cluster"):
        Attention(1, 1, 16, 4, 128, 16, 128, 128, splits=8, quantize=words)
    with pytest.raises(ValueError, match="one or two int8 words"):
        make(quantize=3)


@pytest.mark.parametrize("make", [
    lambda c: LatentAttention(1, 1, 32, 512, 0, 16, 64, 80, splits=8, schedule={"engine": "wgmma", **c}),
    lambda c: LatentAttention(1, 1, 128, 512, 64, 64, 64, 80, splits=4, nope=128, schedule={"engine": "wgmma", **c}),
])
def test_the_wgmma_latent_attention_merges_its_chunks_in_its_cluster(make):
    """combine "cluster" on the wgmma engine (with the engine named; alone it picks the mma engine): the
    chunks are one cluster, their staged rows merged over DSMEM between two cluster barriers into `out`;
    no partial, no lse, the same shared memory and grid as the launch that leaves them to attention_combine."""
    kernel, apart = make({"combine": "cluster"}), make({})
    assert type(kernel).__name__ == "LatentWgmma"
    assert kernel.launch().cluster == (kernel.splits, 1, 1) and apart.launch().cluster == (1, 1, 1)
    assert kernel.launch().grid == apart.launch().grid
    assert kernel.launch().shared_bytes == apart.launch().shared_bytes
    names = [p.name for p in kernel.params()]
    assert names[-1] == "out" and "partial" not in names and "lse" not in names
    ptx = compiled_for_sm90a(kernel).ptx
    assert "mapa.shared::cluster" in ptx and "ld.shared::cluster.v4.f32" in ptx and ".local" not in ptx
    assert ptx.count("barrier.cluster.arrive") == 2 and ptx.count("barrier.cluster.wait") == 2
    with pytest.raises(ValueError, match="2 to 8 chunks"):
        LatentAttention(1, 1, 32, 512, 0, 16, 64, 80, splits=16, schedule={"engine": "wgmma", "combine": "cluster"})
    with pytest.raises(ValueError, match="loads by cp.async"):
        LatentAttention(1, 1, 32, 512, 0, 16, 64, 80, splits=8, schedule={"engine": "wgmma", "loads": "bulk"})


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Attention(2, 1, 8, 2, 128, 64, 64, 128, schedule={"combine": "cluster"}), "2 to 8 chunks"),
    (lambda: Attention(2, 1, 8, 2, 128, 64, 64, 128, splits=16, schedule={"combine": "cluster"}), "2 to 8 chunks"),
    (lambda: Attention(1, 8, 32, 2, 128, 64, 16, 16, splits=4, schedule={"tile": 32, "stages": 2, "combine": "cluster"}),
     "64 rows of 128 fp32 values in the key buffers"),
    (lambda: Attention(2, 1, 8, 2, 128, 64, 64, 128, splits=2, schedule={"combine": "dsmem"}), "'launch' or 'cluster'"),
])
def test_a_cluster_combine_the_kernel_cannot_hold_is_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


WGMMA = {
    "kimi_h32_l512_nope_t1": lambda: LatentAttention(8, 1, 32, 512, 0, 16, 256, 2048, schedule={"engine": "wgmma"}),
    "deepseek_h128_l512_r64_s8": lambda: LatentAttention(1, 1, 128, 512, 64, 64, 64, 80, splits=8, nope=128,
                                                           schedule={"engine": "wgmma"}),
    "odd_h12_l256_r32_t3_s2": lambda: LatentAttention(3, 3, 12, 256, 32, 32, 64, 250, splits=2, nope=64,
                                                        schedule={"engine": "wgmma"}),
    # blocks of fewer query rows (`block_rows`): the real-size Kimi Linear step's at 1k keys, DeepSeek-V3's heads
    "kimi_h32_l512_r64_p64_1k_s16_rows8": lambda: LatentAttention(1, 1, 32, 512, 64, 64, 16, 16, splits=16, nope=128,
                                                                  schedule={"block_rows": 8, "partials": "bfloat16"}),
    "deepseek_h128_l512_r64_s8_rows16": lambda: LatentAttention(1, 1, 128, 512, 64, 64, 64, 80, splits=8, nope=128,
                                                                schedule={"block_rows": 16}),
}


@pytest.mark.parametrize("case", sorted(WGMMA))
def test_latent_wgmma_compiles_for_sm90a(case):
    """engine "wgmma": one warpgroup; a wgmma chain a 16-value step of the scores (keys x rows, K-major
    A) and of each 64-value chunk of the output (values x rows, M-major A over the same slots); the
    first chunks' cp.async before griddepcontrol.wait; no mma.sync, no ldmatrix, no local memory;
    the ring of chunk slots fills the shared memory the queries leave, up to three tiles."""
    kernel = WGMMA[case]()
    ptx = compiled_for_sm90a(kernel).ptx
    rows = kernel.padded_rows
    chain = f"wgmma.mma_async.sync.aligned.m64n{rows}k16.f32.bf16.bf16"
    assert ptx.count(chain) == 4 * (kernel.key_chunks + kernel.value_chunks)
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx and ".local" not in ptx
    assert ptx.index("cp.async.cg.shared.global") < ptx.index("griddepcontrol.wait;")
    assert kernel.launch().block == (128 * kernel.groups, 1, 1)
    filled = 227 * 1024 < kernel.launch().shared_bytes + 8192  # no room for another chunk slot ...
    assert kernel.launch().shared_bytes <= 227 * 1024 and (filled or kernel.slots == 3 * kernel.key_chunks)
    assert 2 * kernel.key_chunks <= kernel.slots <= 3 * kernel.key_chunks  # tile t + 2 at most in flight
    assert [p.name for p in kernel.params()] == [p.name for p in LatentAttention(
        **{k: getattr(kernel, k) for k in ("batch", "tokens", "heads", "lora", "rope", "page_size", "max_pages",
                                           "cache_pages", "splits")}, nope=kernel.nope or None).params()]


def test_the_latent_engine_follows_the_schedule():
    """No schedule: LATENT_ENGINE (wgmma); an mma-only knob (bulk loads, the cluster combine without an
    engine, a tile, stages or warps) or engine "mma": the mma.sync kernel; engine "wgmma" with one of them
    but the cluster combine: refused."""
    assert type(LatentAttention(1, 1, 32, 512, 0, 16, 4, 4)) is LatentWgmma
    for knobs in ({"loads": "bulk"}, {"stages": 2}, {"engine": "mma"}, {"tile": 64}):
        assert type(LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule=knobs)) is LatentAttention
    assert type(LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, splits=2, schedule={"combine": "cluster"})) \
        is LatentAttention


def test_latent_wgmma_blocks_of_32_rows_a_warpgroup():
    """At most 32 query rows a warpgroup (its output accumulators in registers), two warpgroups a block
    where the rows pass 32: DeepSeek-V3's 128 heads are two blocks of 64 rows, 12 heads x 3 tokens one
    block of 36 (18 a warpgroup, padded to 24), Kimi Linear's 32 heads one warpgroup with the deeper
    ring; a key width of 288 is five chunks."""
    deepseek, odd, kimi = (WGMMA[name]() for name in ("deepseek_h128_l512_r64_s8", "odd_h12_l256_r32_t3_s2",
                                                      "kimi_h32_l512_nope_t1"))
    assert deepseek.launch().grid == (8, 2, 1) and deepseek.launch().block == (256, 1, 1)
    assert (deepseek.groups, deepseek.padded_rows, deepseek.key_chunks, deepseek.slots) == (2, 32, 9, 18)
    assert odd.launch().grid == (2, 1, 3) and (odd.block_rows, odd.share, odd.padded_rows) == (36, 18, 24)
    assert (odd.key_chunks, odd.value_chunks) == (5, 4)
    assert (kimi.groups, kimi.slots, kimi.spare) == (1, 23, 7) and kimi.launch().block == (128, 1, 1)


def test_block_rows_cut_the_heads_into_more_blocks_of_one_warpgroup():
    """`block_rows` r: blocks of one warpgroup and at most r query rows, the rows spread evenly (a block's
    rows padded to whole 8-row wgmma steps), each block a grid row reading the same chunks; 36 rows in blocks
    of 16 are 3 blocks of 12 (padded to 16); the mma.sync engine and a row count off the list are refused."""
    kimi, deepseek = WGMMA["kimi_h32_l512_r64_p64_1k_s16_rows8"](), WGMMA["deepseek_h128_l512_r64_s8_rows16"]()
    assert kimi.launch().grid == (16, 4, 1) and kimi.launch().block == (128, 1, 1)
    assert (kimi.groups, kimi.block_rows, kimi.padded_rows) == (1, 8, 8)
    assert deepseek.launch().grid == (8, 8, 1) and (deepseek.groups, deepseek.block_rows) == (1, 16)
    odd = LatentAttention(3, 3, 12, 256, 32, 32, 64, 250, splits=2, nope=64, schedule={"block_rows": 16})
    assert odd.launch().grid == (2, 3, 3) and (odd.block_rows, odd.padded_rows) == (12, 16)
    with pytest.raises(ValueError, match="block_rows 8 is the wgmma latent attention's") as raised:
        LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule={"engine": "mma", "block_rows": 8})
    assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match=re.escape("block_rows is 8, 16 or 32 query rows a wgmma latent block")):
        LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule={"block_rows": 12})


def test_latent_wgmma_compiles_the_unchecked_path_only_for_long_chunks():
    """A chunk of the longest context of at least UNCHECKED_TILES tiles of 64 keys compiles the unchecked
    path of whole cache tiles beside the checked one: more cp.async copies in the loop (the unchecked
    part of each tile load) and the warp vote before the lazy rescale. Kimi Linear's 1k-key step in 8
    chunks (2 tiles each) does not; 32k keys in 64 chunks (8 tiles) and 256 keys in 1 chunk do."""
    def kernel(context, page, splits):
        return LatentAttention(1, 1, 32, 512, 64, page, context // page, context // page, splits=splits, nope=128)

    short, long, edge = kernel(1024, 64, 8), kernel(32768, 16, 64), kernel(256, 16, 1)
    assert (short.unchecked, long.unchecked, edge.unchecked) == (False, True, True)
    assert not kernel(192, 16, 1).unchecked  # 3 tiles
    # the lowering's reason (`lanec explain`) names the same decision and its fact
    assert "whole cache tiles unchecked: chunks of 512 keys" in latent_engine_reason(32, 32768, 64)
    assert "every tile checked: chunks of 128 keys, under 4 tiles" in latent_engine_reason(32, 1024, 8)
    assert [latent_unchecked(c, s) for c, s in ((32768, 64), (1024, 8), (256, 1), (192, 1))] == [
        True, False, True, False]
    short_ptx, long_ptx = compiled_for_sm90a(short).ptx, compiled_for_sm90a(long).ptx
    assert "vote.sync.any" not in short_ptx and "vote.sync.any" in long_ptx
    assert long_ptx.count("cp.async.cg.shared.global") > short_ptx.count("cp.async.cg.shared.global")
    assert ".local" not in long_ptx


@pytest.mark.parametrize(("make", "message"), [
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule={"engine": "wgmma", "stages": 3}),
     "engine 'wgmma' sizes its own ring of 64-key chunks; `stages` is the mma engine's knob"),
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, splits=2, schedule={"engine": "wgmma", "loads": "bulk"}),
     "engine 'wgmma' loads by cp.async"),
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule={"engine": "wgmma", "combine": "cluster"}),
     "combine 'cluster' makes the 1 chunks one cluster: 2 to 8 chunks"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, schedule={"engine": "wgmma"}),
     "attention: engine 'wgmma' is latent_attention's (LatentWgmma); this kernel multiplies on mma.sync"),
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule={"engine": "tc"}), "Attention engine is 'mma' or"),
])
def test_latent_wgmma_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("heads", [32, 128])
def test_bf16_partials_halve_the_rows_the_latent_attention_stores_and_the_combine_reads(heads):
    """`partials` "bfloat16" (LATENT_PARTIALS, the default): the wgmma latent attention stores a chunk's row 8 values
    a 16-byte vector of packed bf16 (half the stores of 4-float vectors) and attention_combine reads a 16-byte
    slice as one vector of 8 bf16, not two of 4 floats; both params say bf16, the lse stays fp32."""
    split = LatentAttention(1, 1, heads, 512, 64 if heads > 32 else 0, 16, 2048, 2048, splits=64, nope=128,
                            schedule={"partials": "bfloat16"})
    plain = LatentAttention(1, 1, heads, 512, 64 if heads > 32 else 0, 16, 2048, 2048, splits=64, nope=128)
    ptx, plain_ptx = compiled_for_sm90a(split).ptx, compiled_for_sm90a(plain).ptx
    stores, packed = plain_ptx.count("st.global.v4.f32"), ptx.count("st.global.v4.b32") - plain_ptx.count("st.global.v4.b32")
    assert stores > 0 and "st.global.v4.f32" not in ptx and packed == stores // 2
    assert ".local" not in ptx
    assert [(p.name, p.dtype) for p in split.params()][-2:] == [("partial", "bfloat16"), ("lse", "float32")]
    combine = AttentionCombine(1, heads, 512, 64, partials="bfloat16")
    loads = compiled_for_sm90a(combine).ptx
    assert "ld.global.v4.f32" not in loads and loads.count("ld.global.v4.b32") == combine.per_lane
    assert combine.params()[0].dtype == "bfloat16" and combine.params()[1].dtype == "float32"


@pytest.mark.parametrize(("make", "message"), [
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, splits=2, schedule={"engine": "mma", "partials": "bfloat16"}),
     "latent_attention: partials 'bfloat16' are the wgmma latent attention's; this kernel stores its chunks' rows "
     "in fp32"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, splits=2, schedule={"partials": "bfloat16"}),
     "attention: partials 'bfloat16' are the wgmma latent attention's"),
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, schedule={"partials": "bfloat16"}),
     "partials 'bfloat16' are the rows of chunks attention_combine merges (splits above 1, combine 'launch')"),
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, splits=2,
                             schedule={"engine": "wgmma", "combine": "cluster", "partials": "bfloat16"}),
     "partials 'bfloat16' are the rows of chunks attention_combine merges"),
    (lambda: LatentAttention(1, 1, 32, 512, 0, 16, 4, 4, splits=2, schedule={"partials": "float16"}),
     "Attention partials is 'float32' or 'bfloat16'; got 'float16'"),
    (lambda: AttentionCombine(1, 32, 512, 4, partials="float16"), "partials 'float16': one of float32, bfloat16"),
])
def test_partials_other_than_fp32_are_refused_where_no_kernel_writes_them(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


def test_expanded_keys_are_whole_mma_steps():
    """A head's key (nope + rope) is padded with zeros to whole 32-value steps; the expand writes
    the padded rows, the attention reads them; one CTA a (chunk, head, request)."""
    attention = ExpandedLatentAttention(3, 2, 32, 80, 64, 128, 64, 12, 50, splits=3)
    assert attention.key_width == 160 and attention.value_width == 128
    assert attention.launch().grid == (3, 32, 3)
    expand = LatentExpand(3, 2, 32, 80, 64, 512, 128, 64, 12, 50)
    assert [(p.name, p.shape) for p in expand.params()][-3:] == [
        ("cache", (50, 64, 576)), ("keys", (50, 64, 32, 160)), ("values", (50, 64, 32, 128))]
    assert expand.launch().grid == (12 * 64 // 16, 32, 3)
    assert kernel_class("latent_expand") is LatentExpand
    assert kernel_class("expanded_attention") is ExpandedLatentAttention


def test_params_follow_the_splits():
    one = [p.name for p in Attention(1, 1, 8, 2, 128, 16, 4, 4).params()]
    assert one == ["q", "k", "v", "positions", "pages", "k_cache", "v_cache", "out"]
    split = Attention(2, 3, 8, 2, 128, 16, 4, 8, splits=4).params()
    assert [p.name for p in split][-2:] == ["partial", "lse"]
    assert split[-2].shape == (4, 6, 8, 128) and split[-1].shape == (4, 6, 8)
    assert split[0].strides == (1024, 1)
    assert [p.name for p in split if p.written] == ["k_cache", "v_cache", "partial", "lse"]
    assert kernel_class("attention") is Attention and kernel_class("attention_combine") is AttentionCombine


@pytest.mark.parametrize(("make", "grid", "rows"), [
    (lambda: Attention(8, 1, 32, 8, 128, 16, 4, 40), (1, 8, 8), 4),  # a CTA a (KV head, request)
    (lambda: Attention(3, 2, 8, 2, 128, 16, 4, 40, splits=5), (5, 2, 3), 8),
    (lambda: Attention(1, 8, 64, 4, 128, 16, 4, 40), (1, 8, 1), 64),  # 128 query rows a KV head: 2 blocks
    (lambda: Attention(1, 3, 48, 3, 256, 16, 4, 40), (1, 6, 1), 24),  # 48 rows at head 256: 2 of 24
])
def test_grid_covers_chunks_kv_heads_and_requests(make, grid, rows):
    kernel = make()
    assert kernel.launch().grid == grid and kernel.block_rows == rows


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Attention(1, 1, 12, 5, 128, 16, 4, 4), "12 query heads do not share 5 KV heads evenly"),
    (lambda: Attention(1, 1, 34, 2, 128, 16, 4, 4), "17 query heads a KV head: at most 16"),
    (lambda: Attention(1, 1, 8, 2, 96, 16, 4, 4), "head size 96: one of 64, 128, 256"),
    (lambda: Attention(1, 1, 8, 2, 128, 8, 4, 4), "page size 8: one of 16, 32, 64"),
    (lambda: Attention(1, 9, 8, 2, 128, 16, 4, 4), "supports 1-8 tokens a request"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, splits=0), "splits 0: at least one chunk"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, q_pitch=1000), "q pitch 1000: at least the row's 1024 values"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, v_pitch=260), "v pitch 260: at least the row's 256 values and a "
                                                                "multiple of 8"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, schedule={"tile": 48}), "Attention tile is 32, 64 or 128"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, schedule={"loads": "tma"}),
     "Attention loads is 'copy' or 'bulk'; got 'tma'"),
    (lambda: ExpandedLatentAttention(5, 1, 4, 40, 0, 64, 32, 10, 60, schedule={"loads": "bulk"}),
     "expanded_attention: loads 'bulk' is for a cache the step's rows are written into"),
    (lambda: Attention(1, 1, 8, 2, 128, 16, 4, 4, schedule={"tile": 128, "stages": 4}),
     "attention: 4 buffers of 128 keys take 287744 bytes of shared memory, above the SM's 232448"),
    (lambda: Attention(1, 1, 8, 2, 64, 16, 4, 4, schedule={"warps": 8}),
     "attention: 8 warps take whole 8-key score tiles of a 64-key tile and whole pairs of 8-column output tiles "
     "of 64 values; they do not divide"),
    (lambda: LatentAttention(1, 1, 8, 384, 64, 16, 4, 4, nope=128), "latent width 384: one of 256, 512"),
    (lambda: LatentAttention(1, 1, 8, 512, 64, 16, 4, 4, nope=100), "unrotated part (100) must be whole"),
    (lambda: ExpandedLatentAttention(1, 1, 8, 80, 64, 96, 16, 4, 4), "value width 96: one of 64, 128, 256"),
    (lambda: ExpandedLatentAttention(1, 1, 8, 250, 64, 128, 16, 4, 4), "nope 250 + rope 64: whole 8-value"),
    (lambda: LatentExpand(1, 1, 8, 80, 64, 500, 128, 16, 4, 4), "latent 500 and rotated key 64 widths: whole 8-value"),
    (lambda: AttentionCombine(3, 8, 128, 1), "splits 1: a combine merges at least 2 chunks"),
    (lambda: AttentionCombine(3, 8, 100, 4), "head size 100"),
])
def test_invalid_specializations_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


def _loops(ptx: str) -> list[str]:
    """The PTX of each loop: from a label to a later branch back to it."""
    labels = {m.group(1): m.start() for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.M)}
    found = []
    for branch in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        start = labels.get(branch.group(1))
        if start is not None and start < branch.start():
            found.append(ptx[start:branch.end()])
    return found


@pytest.mark.parametrize(("case", "slots"), [((1, 1, 32, 8, 128, 16, 2048, 2100, 32), 68),  # 65, whole vectors
                                             ((2, 4, 8, 2, 128, 64, 64, 128, 4), 20),  # 17
                                             ((8, 1, 32, 8, 128, 16, 2048, 2100, 4), 0),
                                             ((2, 1, 8, 2, 128, 16, 600, 1300, 1), 0),
                                             # chunks of 993 and 124 keys: their whole tiles reach 1024 and 128
                                             ((1, 1, 32, 8, 128, 16, 2048, 2100, 33), 68),  # 65, not 64
                                             ((2, 1, 8, 2, 128, 16, 100, 260, 13), 12)])  # 9, not 8
def test_gqa_stages_its_chunk_pages(case, slots):
    """A GQA chunk's page-table entries (at most ATTENTION_STAGED_PAGES) go to shared memory once, so the
    tile loop's copies find their pages there: no global load in the loop. Past that many, each copy
    looks its page up in the table (a global load in the loop), and no shared memory is taken for them.
    The entries are those the chunk's whole tiles reach from anywhere in a page: a tile past a chunk that is
    not whole tiles reads the next chunk's rows (masked)."""
    *shape, splits = case
    kernel = Attention(*shape, splits=splits)
    assert kernel.page_slots == slots
    loops = [loop for loop in _loops(compiled_for_sm90a(kernel).ptx) if "mma.sync.aligned.m16n8k16" in loop]
    assert len(loops) == 1 and ("ld.global" in loops[0]) == (slots == 0)
