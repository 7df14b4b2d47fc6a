"""gemm_tc compiles for sm_90a (CPU only): its PTX has the PDL pair, the cp.async pipeline with
zero-filled copies, the bf16 MMA fed by ldmatrix, the cluster barriers and DSMEM reads of a split
K (only there) and no local memory; its launch and params follow the specialization; bad
specializations raise one line naming the fact. The wgmma engine (a schedule's choice, not the
default): warpgroup MMAs of 64 weight rows against every activation row (padded to 8) from
swizzled stages that a proxy fence hands from cp.async to wgmma, and no mma.sync."""

from __future__ import annotations

import re

import pytest
from bench_scripts import load_bench
from ptx import compiled_for_sm90a

from lanec.codegen.facts import GEMM_PRODUCER_ROWS, GEMM_STREAM_SLOT
from lanec.codegen.kernels import kernel_class
from lanec.codegen.kernels.gemm_tc import GemmTc
from lanec.codegen.kernels.gemm_wgmma import GemmWgmma

KIMI_MERGED = [4096, 4096, 4096, 128, 32, 128]  # q, k, v, f_a, b, g_a of a KDA layer: 12576 outputs

MMA = {"engine": "mma"}
KERNELS = {
    "r33_k1000_n1008": lambda: GemmTc(33, 1000, [1008], schedule=MMA),
    "r64_k2304_n4096": lambda: GemmTc(64, 2304, [4096], schedule=MMA),
    "r100_k2304_merged_pitch": lambda: GemmTc(100, 2304, KIMI_MERGED, x_pitch=2312, schedule=MMA),
    "r256_k7168_n4096": lambda: GemmTc(256, 7168, [4096], schedule=MMA),
    "r256_k2304_n16384": lambda: GemmTc(256, 2304, [16384], schedule=MMA),
    "r128_k4096_n2304_t64_s3_k4": lambda: GemmTc(128, 4096, [2304], schedule={**MMA, "tile_n": 64, "stages": 3,
                                                                              "splits": 4}),
    "r1_k128_n4096": lambda: GemmTc(1, 128, [4096], schedule=MMA),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_compiles_for_sm90a(case):
    kernel = KERNELS[case]()
    compiled = compiled_for_sm90a(kernel)
    ptx = compiled.ptx
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", ptx), "no zero-fill copy"
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    split = kernel.splits > 1
    assert ("barrier.cluster.arrive" in ptx) == split and ("ld.shared::cluster.v4.f32" in ptx) == split


WGMMA = {"engine": "wgmma"}
WGMMA_KERNELS = {
    "r33_k1000_n2304": lambda: GemmTc(33, 1000, [2304], schedule=WGMMA),
    "r64_k2304_n4096": lambda: GemmTc(64, 2304, [4096], schedule=WGMMA),
    "r64_k4096_n2304_s3_k1": lambda: GemmTc(64, 4096, [2304], schedule={**WGMMA, "stages": 3, "splits": 1}),
    "r100_k2304_merged_pitch": lambda: GemmTc(100, 2304, KIMI_MERGED, x_pitch=2312, schedule=WGMMA),
    "r100_k7168_n12576_k2": lambda: GemmTc(100, 7168, [12576], schedule={**WGMMA, "splits": 2}),
    "r256_k7168_n4096": lambda: GemmTc(256, 7168, [4096], schedule=WGMMA),
    "r256_k4096_n2304_k1": lambda: GemmTc(256, 4096, [2304], schedule={**WGMMA, "splits": 1}),
    "r256_k2304_merged": lambda: GemmTc(256, 2304, KIMI_MERGED, schedule=WGMMA),
    "r256_k2304_merged_blocks64": lambda: GemmTc(256, 2304, KIMI_MERGED, schedule={**WGMMA, "block_rows": 64}),
}


@pytest.mark.parametrize("case", sorted(WGMMA_KERNELS))
def test_wgmma_engine_compiles_for_sm90a(case):
    kernel = WGMMA_KERNELS[case]()
    assert type(kernel) is GemmWgmma and kernel.padded_rows % 8 == 0
    assert kernel.row_blocks == (4 if case.endswith("blocks64") else 1)
    ptx = compiled_for_sm90a(kernel).ptx
    if kernel.loads == "copies":
        assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", ptx), "no zero-fill copy"
        assert "fence.proxy.async.shared::cta" in ptx, "cp.async's stage not handed to the async proxy"
    else:  # a block of more than GEMM_PRODUCER_ROWS rows: the producer warpgroup's boxes by default
        assert kernel.loads == "producer" and kernel.block_rows > GEMM_PRODUCER_ROWS
        assert "cp.async.bulk.tensor" in ptx and "mbarrier.try_wait" in ptx and "cp.async.cg" not in ptx
    # one instruction N as wide as the padded rows: the weight streams once for all of them
    assert f"wgmma.mma_async.sync.aligned.m64n{kernel.padded_rows}k16.f32.bf16.bf16" in ptx
    assert "wgmma.fence.sync.aligned" in ptx and "wgmma.commit_group.sync.aligned" in ptx
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    split = kernel.splits > 1
    assert ("barrier.cluster.arrive" in ptx) == split and ("ld.shared::cluster.v4.f32" in ptx) == split
    if kernel.packed_epilogue():  # one split, bf16 y: the tile staged as bf16 by stmatrix, stored as 16-byte words
        assert not split and "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
        assert "st.global.v4.b32" in ptx and "ld.shared.v4.b32" in ptx and "ld.shared.v4.f32" not in ptx
    else:
        assert "ld.shared.v4.f32" in ptx or split, "the one-split epilogue stores from the staged tile"
        assert "stmatrix" not in ptx


WIDE = {  # weight tiles of 3 and 4 consumer warpgroups (and 1), in row blocks that their registers hold
    "t192_r256_merged_b128_producer": lambda: GemmTc(256, 2304, KIMI_MERGED, schedule={
        "tile_n": 192, "block_rows": 128, "loads": "producer", "stages": 4}),
    "t256_r256_n4096_b64_producer": lambda: GemmTc(256, 2304, [4096], schedule={
        "tile_n": 256, "block_rows": 64, "loads": "producer"}),
    "t192_r100_k1000_n320": lambda: GemmTc(100, 1000, [320], schedule={"tile_n": 192}),
    "t64_r33_k4096_n2304_k2_tma": lambda: GemmTc(33, 4096, [2304], schedule={"tile_n": 64, "splits": 2, "loads": "tma"}),
    "t192_r256_n4096_b64_occupancy2": lambda: GemmTc(256, 2304, [4096], schedule={
        "tile_n": 192, "block_rows": 64, "loads": "producer", "stages": 3, "occupancy": 2}),
}


@pytest.mark.parametrize("case", sorted(WIDE))
def test_wgmma_tiles_of_other_widths_compile(case):
    """A consumer warpgroup a 64 weight rows: the CTA's threads, its grid and the wgmma's N follow
    the tile (the producer warpgroup past the consumers, its mbarriers counting every consumer)."""
    kernel = WIDE[case]()
    consumers = kernel.tile_n // 64
    producer = 128 if kernel.loads == "producer" else 0
    assert kernel.launch().block == (128 * consumers + producer, 1, 1)
    assert kernel.launch().grid[2] == -(-kernel.outputs // kernel.tile_n)
    ptx = compiled_for_sm90a(kernel).ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{kernel.padded_rows}k16.f32.bf16.bf16" in ptx
    # two CTAs an SM: ptxas is told so (it caps the registers at half the file)
    assert (".minnctapersm 2" in ptx) == (kernel.occupancy == 2)
    if producer:  # the empty barriers wait for every consumer warpgroup
        count = re.search(rf"mov\.b32\s+(%r\d+), {consumers};", ptx)
        assert count and re.search(rf"mbarrier\.init\.shared\.b64\s+\[[^]]+\], {count.group(1)};", ptx)


@pytest.mark.parametrize(("rows", "stages", "splits"), [(160, 3, 1), (256, 3, 1), (8, 3, 1), (256, 4, 2), (33, 3, 4)])
def test_wgmma_shared_memory_holds_the_staged_tile(rows, stages, splits):
    """The wgmma epilogue always stages its fp32 tile through the stage buffers, split or not (at
    160 rows and two stages, allowed then, the tile was the larger: an out-of-bounds shared store on
    the H200 before this fact)."""
    kernel = GemmTc(rows, 1000, [4096], schedule={"engine": "wgmma", "stages": stages, "splits": splits})
    tile = 4 * kernel.padded_rows * kernel.partial_pitch()
    assert kernel.shared_bytes() - 1024 >= max(tile, stages * kernel.stage_bytes())


@pytest.mark.parametrize(("rows", "schedule", "loads"), [
    (256, {}, "producer"), (129, {}, "producer"), (128, {}, "copies"), (64, {}, "copies"),
    (256, {"block_rows": 128}, "copies"),  # two blocks of 128: each at the line
    (256, {"loads": "tma"}, "tma"),  # the schedule's (the table's) loads win
])
def test_wgmma_loads_by_default_follow_the_block(rows, schedule, loads):
    """A producer warpgroup for blocks of more than GEMM_PRODUCER_ROWS rows (14-16% at 256 rows on the
    H200 at the default's tile, splits and stages), thread copies for the rest."""
    kernel = GemmTc(rows, 2304, [4096], schedule=schedule)
    assert kernel.loads == loads
    assert kernel.launch().block == ((384 if loads == "producer" else 256), 1, 1)


def test_wgmma_needs_three_stages():
    """One stage's wgmma in flight while the next is issued: two buffers would leave none to fill."""
    with pytest.raises(ValueError, match="stages 2: the engine needs at least 3"):
        GemmTc(64, 2304, [4096], schedule={"engine": "wgmma", "stages": 2})


@pytest.mark.parametrize(("rows", "width", "hidden", "splits"), [(64, 2304, 9216, None), (100, 1000, 192, 4)])
def test_gated_pair_compiles_with_swiglu_in_the_epilogue(rows, width, hidden, splits):
    """gate and up tiles side by side: y is [rows, hidden] (the [rows, 2 hidden] products never
    reach memory), a CTA a pair tile of 64 hidden values, SwiGLU's exp in the epilogue."""
    kernel = GemmTc(rows, width, [2 * hidden], gated=True, schedule={"splits": splits} if splits else None)
    assert type(kernel) is GemmWgmma
    assert [(p.name, p.shape) for p in kernel.params()] == [
        ("x", (rows, width)), ("w", (2 * hidden, width)), ("y", (rows, hidden))]
    assert kernel.launch().grid[2] == hidden // 64
    ptx = compiled_for_sm90a(kernel).ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{kernel.padded_rows}k16.f32.bf16.bf16" in ptx
    assert "ex2.approx" in ptx, "no sigmoid in the epilogue"
    assert ("ld.shared::cluster.v4.f32" in ptx) == (kernel.splits > 1)


def test_engine_defaults_to_wgmma():
    assert type(GemmTc(64, 2304, [4096])) is GemmWgmma
    assert type(GemmTc(64, 2304, [4096], schedule={"engine": "mma"})) is GemmTc
    wgmma = GemmTc(40, 2304, [4096, 128], x_pitch=2312, schedule=WGMMA)
    assert wgmma.params() == GemmTc(40, 2304, [4096, 128], x_pitch=2312, schedule=MMA).params()
    assert wgmma.launch().grid[1] == 1 and GemmTc(256, 2304, [4096], schedule=WGMMA).launch().grid[1] == 1


def test_params_are_gemvs():
    kernel = GemmTc(40, 2304, [4096, 128], x_pitch=2312)
    assert [(p.name, p.shape, p.written) for p in kernel.params()] == [
        ("x", (40, 2304), False), ("w", (4224, 2304), False), ("y", (40, 4224), True)]
    assert kernel.params()[0].strides == (2312, 1)
    assert kernel_class("gemm_tc") is GemmTc


@pytest.mark.parametrize(("make", "grid", "cluster", "block_rows", "padded"), [
    (lambda: GemmTc(256, 2304, [163840], schedule=MMA), (1, 2, 1280), (1, 1, 1), 128, 128),  # many tiles
    (lambda: GemmTc(200, 2304, [16384], schedule=MMA), (1, 2, 128), (1, 1, 1), 100, 112),  # rows split evenly
    (lambda: GemmTc(33, 7168, [4096], schedule=MMA), (4, 1, 32), (4, 1, 1), 33, 48),  # 32 tiles: K split over 4
    (lambda: GemmTc(64, 4096, [2304], schedule={**MMA, "tile_n": 128, "splits": 7}), (7, 1, 18), (7, 1, 1), 64,
     64),
    (lambda: GemmTc(200, 2304, [16384]), (1, 1, 128), (1, 1, 1), 200, 200),  # wgmma: every row one N side
    # wgmma with block_rows: the rows split evenly into the fewest blocks of at most that many
    (lambda: GemmTc(256, 2304, [12288], schedule={"block_rows": 64}), (1, 4, 96), (1, 1, 1), 64, 64),
    (lambda: GemmTc(100, 1000, [320], schedule={"block_rows": 32, "splits": 2}), (2, 4, 3), (2, 1, 1), 25, 32),
    (lambda: GemmTc(200, 2048, [2048], gated=True, schedule={"block_rows": 128}), (4, 2, 16), (4, 1, 1), 100, 104),
])
def test_grid_covers_splits_row_blocks_and_tiles(make, grid, cluster, block_rows, padded):
    kernel = make()
    shape = kernel.launch()
    assert (shape.grid, shape.cluster) == (grid, cluster)
    assert (kernel.block_rows, kernel.padded_rows) == (block_rows, padded)


def test_float32_outputs_store_the_sums_as_they_are():
    """out_dtype float32 (a router's logits): y is fp32 and the staged tile's sums are stored as
    16-byte vectors of floats; only the wgmma engine stores them, and never a gated pair's SwiGLU."""
    kernel = GemmTc(64, 2304, [256], out_dtype="float32")
    assert [(p.name, p.dtype) for p in kernel.params()] == [("x", "bfloat16"), ("w", "bfloat16"), ("y", "float32")]
    ptx = compiled_for_sm90a(kernel).ptx
    assert "st.global.v4.f32" in ptx and "wgmma.mma_async" in ptx
    with pytest.raises(ValueError, match="only the wgmma engine stores them"):
        GemmTc(64, 2304, [256], out_dtype="float32", schedule=MMA)
    with pytest.raises(ValueError, match="a gated pair stores its SwiGLU as bfloat16"):
        GemmTc(64, 2304, [256], out_dtype="float32", gated=True)
    with pytest.raises(ValueError, match="stores bfloat16 or float32 outputs; got 'float16'"):
        GemmTc(64, 2304, [256], out_dtype="float16")


STREAM = {
    "r256_k2304_merged_g132": lambda: GemmTc(256, 2304, KIMI_MERGED, schedule={"stream": 132}),
    "r64_k2304_n4096_g132": lambda: GemmTc(64, 2304, [4096], schedule={"stream": 132}),
    "r200_k2048_gated_b128_g132": lambda: GemmTc(200, 2048, [2048], gated=True,
                                                 schedule={"stream": 132, "block_rows": 128}),
}


@pytest.mark.parametrize("case", sorted(STREAM))
def test_stream_k_compiles_with_its_workspace_handshake(case):
    """A stream's CTAs: the producer's boxes, a partial tile stored as 16-byte vectors and its flag
    raised by a release at GPU scope, the owner's acquire spin and its reads through L2; one CTA a
    run on a plain grid, no cluster; the workspace params after y, before the tensor maps."""
    kernel = STREAM[case]()
    ptx = compiled_for_sm90a(kernel).ptx
    assert "cp.async.bulk.tensor" in ptx and "mbarrier.try_wait" in ptx and "cp.async.cg" not in ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{kernel.padded_rows}k16.f32.bf16.bf16" in ptx
    assert "st.release.gpu.global.u32" in ptx and "ld.acquire.gpu.global.s32" in ptx
    assert "ld.global.cg.v4.f32" in ptx and "st.global.v4.f32" in ptx
    assert "barrier.cluster" not in ptx and "ld.shared::cluster" not in ptx
    shape = kernel.launch()
    assert shape.grid == (132, 1, 1) and shape.cluster == (1, 1, 1) and shape.block == (384, 1, 1)
    assert [p.name for p in kernel.params()] == ["x", "w", "y", "partials", "flags", "x_map", "w_map"]
    partials = kernel.params()[3]
    assert partials.shape == (132, kernel.tile_n * kernel.padded_rows) and partials.strides == (GEMM_STREAM_SLOT, 1)


@pytest.mark.parametrize(("tiles", "k_tiles", "ctas"), [(96, 36, 132), (32, 36, 132), (1, 3, 3), (12, 16, 132),
                                                         (18, 64, 100), (132, 7, 132), (5, 2, 9)])
def test_stream_k_runs_cover_every_unit_once_and_each_tile_has_one_owner(tiles, k_tiles, ctas):
    """The kernel's arithmetic, in integers: CTA c's run [c U / G, (c + 1) U / G) holds no tile's
    end in its middle; the owner of tile t (the CTA holding its first stage) gathers exactly the
    CTAs ((t K + K) G - 1) / U back to itself + 1, the ones whose runs hold the rest of t, and each of
    those writes one partial."""
    units = tiles * k_tiles
    runs = [(c * units // ctas, (c + 1) * units // ctas) for c in range(ctas)]
    assert [u for start, end in runs for u in range(start, end)] == list(range(units))
    writers = set()
    for c, (start, end) in enumerate(runs):
        assert end - start <= k_tiles and end > start
        head = (end - 1) // k_tiles * k_tiles
        if head >= start:  # the owner of its last tile
            last = ((head + k_tiles) * ctas - 1) // units
            holders = [j for j, (s, e) in enumerate(runs) if s < head + k_tiles and e > head and j != c]
            assert holders == list(range(c + 1, last + 1))
            writers.update(holders)
    # a run starting inside a tile writes that tile's partial, gathered by one owner
    assert writers == {c for c, (start, _) in enumerate(runs) if start % k_tiles}


@pytest.mark.parametrize(("make", "message"), [
    (lambda: GemmTc(256, 2304, [163840], schedule={"stream": 132}),
     "gemm_tc stream 132: 1280 tiles of 36 K stages take 1280-46080 CTAs"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"stream": 132, "loads": "copies"}),
     "only a producer warpgroup loads a stream's stages"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"stream": 132, "splits": 2}),
     "its CTAs are one a run of units, not a cluster's (2 splits"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"stream": 133}), "GemmTc stream is 1-132 CTAs, one an SM"),
    (lambda: GemmTc(9, 136, [72], schedule={"stream": 4}), "1 tiles of 3 K stages take 1-3 CTAs"),
])
def test_stream_k_refusals_name_the_fact(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: GemmTc(257, 2304, [4096]), "gemm_tc takes 1-256 rows a launch"),
    (lambda: GemmTc(64, 1001, [4096]), "width 1001 must be a positive multiple of 8"),
    (lambda: GemmTc(64, 2304, [1000, 3]), "outputs 1003 must be a multiple of 8"),
    (lambda: GemmTc(64, 2304, [4096], x_pitch=2300), "x pitch 2300: at least the row's 2304 values"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"tile_n": 96}), "GemmTc tile_n is 64, 128, 192 or 256"),
    (lambda: GemmTc(64, 2304, [4096], schedule={**MMA, "tile_n": 192}), "mma tile_n 192: the engine takes 128 or 64"),
    (lambda: GemmTc(256, 2304, [4096], schedule={"tile_n": 192, "loads": "producer"}),
     "wgmma tile_n 192: 512 threads get 128 registers each, and a consumer's 128 accumulators (256 rows) need 160"),
    (lambda: GemmTc(256, 2304, [4096], schedule={"tile_n": 192, "block_rows": 64, "stages": 4, "occupancy": 2}),
     "wgmma tile_n 192: 2 CTAs of 132096 bytes of shared memory (and 1024 reserved each) exceed the SM's 233472"),
    (lambda: GemmTc(256, 2304, [4096], schedule={"tile_n": 128, "block_rows": 128, "stages": 3,
                                                        "loads": "producer", "occupancy": 2}),
     "wgmma tile_n 128: 768 threads get 80 registers each, and a consumer's 64 accumulators (128 rows) need 96"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"occupancy": 3}), "GemmTc occupancy is 1 or 2 CTAs an SM"),
    (lambda: GemmTc(64, 2304, [2048], gated=True, schedule={"tile_n": 192}),
     "wgmma tile_n 192: a gated pair's tile is 64 gate rows beside their 64 up rows"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"splits": 9}), "GemmTc splits is 1-8"),
    (lambda: GemmTc(64, 128, [4096], schedule={"splits": 4}), "splits 4: K 128 has only 2 stages"),
    (lambda: GemmTc(128, 2304, [4096], schedule={**MMA, "tile_n": 128, "stages": 8}), "above the SM's 232448"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"engine": "tma"}), "GemmTc engine is 'mma' or 'wgmma'"),
    (lambda: GemmTc(256, 2304, [4096], schedule={**WGMMA, "stages": 5}), "above the SM's 232448"),
    (lambda: GemmTc(64, 2304, [2000], gated=True), "hidden width 1000 is not whole pair tiles (64 gate beside 64"),
    (lambda: GemmTc(64, 2304, [1024, 1024], gated=True), "a gated pair is one part of gate and up rows"),
    (lambda: GemmTc(64, 2304, [2048], gated=True, schedule=MMA), "only the wgmma engine's 128-row tile holds"),
    (lambda: GemmTc(64, 2304, [4096], schedule={"block_rows": 48}), "GemmTc block_rows is 32, 64, 128 or 256"),
    (lambda: GemmTc(200, 2304, [4096], schedule={**MMA, "block_rows": 256}),
     "gemm_tc mma block_rows 256: the engine multiplies at most 128 activation rows a CTA"),
])
def test_invalid_specializations_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


def test_the_gemm_bench_moves_a_shape_below_the_measured_rows_only_where_gemm_tc_won(tmp_path, monkeypatch):
    import json

    bench = load_bench("gemm", monkeypatch)

    def timed(rows, k, n, us, gemv):
        e = {"rows": rows, "k": k, "n": n}
        return (e, us, (us, {"schedule": {"tile_n": 128, "splits": 8, "stages": 6, "engine": "wgmma"}}), gemv, 0, 0, 0)

    path = tmp_path / "schedules.json"
    # an 8-row entry a gemv win would leave stale is dropped; 16 rows always keeps its fastest
    path.write_text(json.dumps({"gemm_tc": {"outputs=12576,rows=8,width=2304": {"schedule": {}, "us": 1.0}}}))
    bench.write_table(path, [timed(8, 4096, 2304, 7.3, 8.9), timed(8, 2304, 12576, 17.5, 17.6),
                             timed(16, 2304, 12576, 17.9, 18.9)])
    table = json.loads(path.read_text())["gemm_tc"]
    assert sorted(table) == ["outputs=12576,rows=16,width=2304", "outputs=2304,rows=8,width=4096"]
    assert table["outputs=2304,rows=8,width=4096"]["us"] == 7.3


def test_the_gemm_bench_tunes_a_gated_pair_apart_from_its_product(tmp_path, monkeypatch):
    """A gated pair's entry is keyed as the lowering looks it up (`Lowering.product_shape`:
    gated=1), its variants never the mma.sync engine (no gated pair there), and its GPU case is a
    gated launch under its own name."""
    import json

    from lanec.codegen import schedules

    bench = load_bench("gemm", monkeypatch)
    pair = {"rows": 64, "k": 2304, "n": 18432, "gated": True}
    best = (40.0, {"schedule": {"tile_n": 128, "splits": 2, "stages": 6, "engine": "wgmma"}})
    path = tmp_path / "schedules.json"
    bench.write_table(path, [(pair, 43.0, best, 90.0, 0, 0, 0)])
    table = json.loads(path.read_text())
    assert list(table["gemm_tc"]) == ["gated=1,outputs=18432,rows=64,width=2304"]
    assert all(v.get("engine") != "mma" for v in bench.variants(lambda s: GemmTc(64, 2304, [18432], gated=True,
                                                                                  schedule=s)))
    monkeypatch.setattr(schedules, "table", lambda: table)
    case = schedules.tuned_cases("gemm_tc")["tuned_r64_k2304_n18432_gated"]
    assert case["gated"] is True and case["parts"] == [18432] and case["schedule"]["splits"] == 2


def test_the_gemm_bench_times_wide_tiles_and_two_ctas_an_sm_where_they_fit(monkeypatch):
    """LANEC_GEMM_TILES: from 128 rows the 192- and 256-row tiles (and two CTAs an SM at 128 and 192), below
    it 64-row tiles two an SM over K splits; every variant is a kernel the facts accept (the bench skips
    what they refuse: a 256-row block on 192 rows' registers, 7 stages of 64 rows beside a twin CTA)."""
    bench = load_bench("gemm", monkeypatch)
    monkeypatch.setenv("LANEC_GEMM_TILES", "1")
    for rows, needed in ((256, {"tile_n": 192, "block_rows": 128, "stages": 4, "loads": "producer"}),
                         (64, {"tile_n": 64, "splits": 6, "stages": 6, "occupancy": 2})):
        def make(schedule, rows=rows):
            return GemmTc(rows, 4096, [2304], schedule=schedule)

        found = bench.variants(make)
        assert needed in found
        kernels = [make(schedule) for schedule in found]  # each accepted by the facts
        assert all(k.occupancy * (k.shared_bytes() + 1024) <= 228 * 1024 for k in kernels)
    assert {"tile_n": 192, "block_rows": 256, "stages": 4, "loads": "producer"} not in bench.variants(
        lambda s: GemmTc(256, 4096, [2304], schedule=s))


PER_HEAD = {  # GEMM_PER_HEAD_FROM: Kimi Linear's absorbed query (pitched) and value expansion; odd rows over a K tail
    "absorb_r256_producer": lambda: GemmTc(256, 128, [32 * 512], per_head=(32, 192, 0), x_pitch=6720),
    "absorb_r64_copies": lambda: GemmTc(64, 128, [32 * 512], per_head=(32, 192, 0), x_pitch=6720),
    "expand_r256_producer": lambda: GemmTc(256, 512, [32 * 128], per_head=(32, 512, 0)),
    "odd_r100_k200_h3_off16_copies": lambda: GemmTc(100, 200, [3 * 128], per_head=(3, 232, 16)),
    "r37_k128_h5_off32_tma": lambda: GemmTc(37, 128, [5 * 128], per_head=(5, 160, 32), schedule={"loads": "tma"}),
    "r64_h8_64_rows_a_head": lambda: GemmTc(64, 128, [8 * 64], per_head=(8, 192, 64)),  # a 64-row tile by default
}


@pytest.mark.parametrize("case", sorted(PER_HEAD))
def test_a_per_head_product_reads_its_tiles_head_part_of_the_row(case):
    """A per-head read on the wgmma engine: x is every head's whole unit a row (its pitch kept), and each
    CTA's loads start at its weight tile's head's part, a column the tile index gives (tile * tile_n //
    head outputs * unit + offset: an integer division the product without a per-head read has not); no
    local memory."""
    kernel = PER_HEAD[case]()
    heads, unit, offset = kernel.per_head
    x = kernel.params()[0]
    assert x.name == "x" and x.shape == (kernel.rows, heads * unit)
    assert x.element_strides == (kernel.x_pitch or heads * unit, 1)
    assert (kernel.outputs // heads) % kernel.tile_n == 0
    ptx = compiled_for_sm90a(kernel).ptx
    plain = compiled_for_sm90a(GemmTc(kernel.rows, kernel.width, list(kernel.parts), x_pitch=kernel.x_pitch,
                                      schedule={"loads": kernel.loads, "tile_n": kernel.tile_n,
                                                "splits": kernel.splits, "stages": kernel.stages})).ptx
    assert ptx != plain and ".local" not in ptx
    assert ("cp.async.bulk.tensor" in ptx) == (kernel.loads != "copies")
    divisions = lambda text: len(re.findall(r"\bdiv\.(?:s|u)32\b", text))  # noqa: E731
    assert divisions(ptx) > divisions(plain) or kernel.outputs // heads & (kernel.outputs // heads - 1) == 0


@pytest.mark.parametrize(("make", "message"), [
    (lambda: GemmTc(64, 128, [4 * 96], per_head=(4, 128, 0)),
     "per-head read: a head's 96 outputs must be whole weight tiles of 64"),
    (lambda: GemmTc(64, 128, [4 * 64], per_head=(4, 128, 0), schedule={"tile_n": 128}),
     "wgmma per-head read: a head's 64 outputs are not whole tiles of 128 weight rows"),
    (lambda: GemmTc(64, 128, [4 * 128], per_head=(4, 128, 0), schedule=MMA),
     "gemm_tc mma per-head read: only the wgmma engine's copies read each head's part"),
    (lambda: GemmTc(64, 104, [4 * 128], per_head=(4, 128, 0), schedule={"loads": "tma"}),
     "a row box of 64 values would read past the head's 104 into the next head's part"),
    (lambda: GemmTc(256, 128, [4 * 128], per_head=(4, 128, 0), schedule={"loads": "producer", "stream": 8}),
     "a CTA reads its own tile's head part (no stream or multicast; got stream 8"),
    (lambda: GemmTc(64, 128, [2 * 128], per_head=(2, 128, 0), gated=True), "a gated pair reads no per-head part"),
    (lambda: GemmTc(64, 128, [4 * 128], per_head=(4, 120, 0)), "offset 0 + width 128 runs past the head's unit 120"),
])
def test_per_head_refusals_name_the_fact(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)
