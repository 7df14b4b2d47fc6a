"""Every kernel class compiles for sm_90a on this (GPU-less) machine: its PTX has the PDL
instructions, its entry takes one 8-byte pointer per tensor param, the content-hash cache hits on
a second compile, and the artifact the runtime loads round-trips without CuTe DSL."""

from __future__ import annotations

import re

import pytest
from bench_scripts import load_bench

from lanec.codegen.compile import CompiledKernel, cache_key, compile_kernel, entry_signature
from lanec.codegen.facts import RowSchedule
from lanec.codegen.kernels.argmax import Argmax
from lanec.codegen.kernels.elementwise import Elementwise
from lanec.codegen.kernels.embed import Embed
from lanec.codegen.kernels.gated_gemv import GatedGemv
from lanec.codegen.kernels.gemv import Gemv
from lanec.codegen.kernels.rmsnorm import RmsNorm
from lanec.codegen.kernels.rope import Rope
from lanec.runtime.artifact import ArtifactError, load_artifact

KERNELS = {
    "gemv_r1_parts": lambda: Gemv(1, 2304, (2048, 1024, 1000)),
    "gemv_r3_per_head": lambda: Gemv(3, 128, (512,), per_head=(8, 192, 64)),
    "gemv_r24_mma": lambda: Gemv(24, 2368, (1000,)),
    "gemv_r256_per_head_row_blocks": lambda: Gemv(32, 512, (4096,), per_head=(32, 512, 0), row_blocks=8),
    "gated_gemv_r3": lambda: GatedGemv(3, 2368, 1000),
    "gated_gemv_r8_mma": lambda: GatedGemv(8, 2304, 1024),
    "rmsnorm_residual": lambda: RmsNorm(3, 4096, 1e-6, residual=True),
    "elementwise_swiglu": lambda: Elementwise("swiglu", 3, 2368),
    "elementwise_sigmoid": lambda: Elementwise("sigmoid", 64, 1000),
    "embed": lambda: Embed(3, 1000, 2304),
    "argmax_bf16": lambda: Argmax(3, 163840, cluster=1),
    "argmax_cluster": lambda: Argmax(3, 163840, cluster=8),
    "rmsnorm_gather": lambda: RmsNorm(2, 2304, 1e-5, gather=163840),
    "rmsnorm_slots": lambda: RmsNorm(64, 2304, 1e-5, residual=True, slots=9),
    "rope_odd": lambda: Rope(3, 5, 64, 32, 1e4),
    "rope_pitched": lambda: Rope(8, 8, 128, 64, 5e5, x_pitch=1536),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("lanec-cache")


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_compiles_for_sm90a(case, cache):
    kernel = KERNELS[case]()
    compiled = compile_kernel(kernel, cache_dir=cache)
    assert not compiled.from_cache
    assert compiled.cubin[:4] == b"\x7fELF"
    assert re.search(r"^\.target sm_90a", compiled.ptx, re.M)
    # PDL: wait before reading a predecessor's output, and release the dependents
    assert "griddepcontrol.wait;" in compiled.ptx
    assert "griddepcontrol.launch_dependents;" in compiled.ptx
    entry, sizes = entry_signature(compiled.ptx)
    assert entry == compiled.entry
    assert sizes == [8] * len(kernel.params())
    assert compiled.params == tuple(kernel.params())
    assert compiled.launch == kernel.launch()
    assert any(p.written for p in compiled.params)

    again = compile_kernel(KERNELS[case](), cache_dir=cache)
    assert again.from_cache
    assert again.cubin == compiled.cubin and again.entry == compiled.entry and again.ptx == compiled.ptx


def test_gemv_issues_weight_loads_before_the_pdl_wait(cache):
    ptx = compile_kernel(Gemv(1, 2304, (4096,)), cache_dir=cache).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    # every weight vector is in flight before the wait; the activation is read after it
    assert before.count("ld.global.v4") >= 2 and "ld.global.v4" in after


def test_tensor_core_path_uses_mma():
    compiled = compile_kernel(KERNELS["gemv_r24_mma"](), cache_dir=None, use_cache=False)
    before, after = compiled.ptx.split("griddepcontrol.wait;")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in after
    assert "ld.global.nc.L1::no_allocate.v4.b32" in before  # the first weight group, before the wait


@pytest.mark.parametrize(("make", "tensor_cores", "per_cta"), [
    (lambda: Gemv(1, 2304, (4096,)), False, 2),  # one row: CUDA cores, two rows a CTA
    (lambda: Gemv(3, 2304, (4096,)), False, 2),
    (lambda: Gemv(8, 2304, (4096,)), True, 8),  # 16-row CTAs would not give every SM two
    (lambda: Gemv(8, 2304, (12288,)), True, 16),
    (lambda: Gemv(8, 4096, (2304,)), True, 16),  # long rows: the second tile pays
    (lambda: Gemv(32, 2304, (2048,)), True, 8),  # 16-row CTAs would leave SMs idle
    (lambda: GatedGemv(32, 2304, 9216), True, 8),  # a pair already loads two rows a tile
    (lambda: Gemv(8, 128, (96,), per_head=(8, 192, 64)), False, 2),  # 12 rows a head: no whole tiles
])
def test_schedule_defaults(make, tensor_cores, per_cta):
    kernel = make()
    assert (kernel.tensor_cores, kernel.rows_per_cta) == (tensor_cores, per_cta)
    assert kernel.launch().grid == (-(-kernel.outputs // per_cta), 1, 1)


def test_row_blocks_are_the_grid_x_over_whole_activations_and_change_nothing_else(cache):
    """gemv `row_blocks` (GEMV_ROW_BLOCKS_FROM): x and y hold every block's rows, the blocks are grid x (the
    fastest: the blocks of an output tile side by side) and the output tiles grid y; a block's CTA reads its
    rows at its block's offset, with the same weight loads before the wait. One block is the kernel it was."""
    blocked = Gemv(32, 128, (16384,), per_head=(32, 192, 0), x_pitch=6720, row_blocks=8)
    single = Gemv(32, 128, (16384,), per_head=(32, 192, 0), x_pitch=6720)
    assert blocked.launch().grid == (8, single.launch().grid[0], 1)
    assert [p.shape for p in blocked.params()] == [(256, 6144), (16384, 128), (256, 16384)]
    assert blocked.params()[0].strides == (6720, 1)
    ptx = compile_kernel(blocked, cache_dir=cache).ptx
    assert "local" not in ptx.split(".entry")[1] and "mma.sync" in ptx
    assert str(32 * 6720) in ptx or str(2 * 32 * 6720) in ptx  # a block's rows: 32 pitched rows on (bytes)
    assert compile_kernel(Gemv(32, 128, (16384,), per_head=(32, 192, 0), x_pitch=6720, row_blocks=1),
                          cache_dir=cache).ptx == compile_kernel(single, cache_dir=cache).ptx


def test_cache_key_follows_the_specialization():
    assert cache_key(Gemv(1, 2304, (4096,))) == cache_key(Gemv(1, 2304, (4096,)))
    assert cache_key(Gemv(1, 2304, (4096,))) != cache_key(Gemv(2, 2304, (4096,)))
    assert cache_key(Gemv(1, 2304, (4096,))) != cache_key(Gemv(1, 2304, (4096,), schedule=RowSchedule(8, 1)))
    assert cache_key(RmsNorm(1, 2304, 1e-6)) != cache_key(RmsNorm(1, 2304, 1e-5))


def test_artifact_round_trip(cache, tmp_path):
    compiled = compile_kernel(KERNELS["embed"](), cache_dir=cache)
    compiled.save(tmp_path, "embed")
    loaded = load_artifact(tmp_path, "embed")
    assert isinstance(compiled, CompiledKernel)
    assert loaded == compiled.artifact()
    (tmp_path / "embed.cubin").write_bytes(b"not a cubin")
    with pytest.raises(ArtifactError, match="not a cubin"):
        load_artifact(tmp_path, "embed")
    with pytest.raises(ArtifactError, match="no such kernel artifact"):
        load_artifact(tmp_path, "missing")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(64, 2304, (4096,)), "1-32 rows"),
    (lambda: Gemv(1, 1001, (4096,)), "multiple of 8"),
    (lambda: Gemv(1, 2304, (4096, 0)), "at least one output"),
    (lambda: Gemv(1, 128, (500,), per_head=(8, 192, 64)), "do not split into 8 heads"),
    (lambda: Gemv(1, 160, (512,), per_head=(8, 192, 64)), "runs past"),
    (lambda: GatedGemv(33, 2304, 1024), "1-32 rows"),
    (lambda: GatedGemv(32, 2304, 1024, schedule=RowSchedule(8, 1, tensor_cores=False)), "use the tensor-core path"),
    (lambda: Gemv(8, 2304, (4096,), schedule={"rows_per_cta": 12, "tensor_cores": True}), "must be 8, 16, 24 or 32"),
    (lambda: Gemv(1, 2304, (4096,), schedule=(8, 1)), "takes named fields"),
    (lambda: Gemv(1, 2304, (4096,), schedule={"warps": 33}), "warps is 1-32"),
    (lambda: Gemv(1, 2304, (4096,), x_pitch=2300), "x pitch 2300: at least the row's 2304 values"),
    (lambda: Gemv(2, 2304, (4096,), norm=True, row_blocks=2), "gemv row_blocks: blocks of rows in one launch are "
                                                                "a plain product's; this one has a norm prologue"),
    (lambda: Gemv(32, 2304, (4096,), row_blocks=0), "gemv row_blocks: a count of blocks of rows, at least 1"),
    (lambda: RmsNorm(1, 2304, 0.0), "eps must be positive"),
    (lambda: Elementwise("tanh", 1, 2304), "elementwise op 'tanh'"),
    (lambda: Embed(1, 1000, 100), "multiple of 8"),
    (lambda: Argmax(1, 1000, "int8"), "bfloat16 or float32"),
    (lambda: Rope(1, 4, 64, 33, 1e4), "rope rotary 33 must be even and 2..unit (64)"),
    (lambda: Rope(1, 4, 64, 128, 1e4), "rotary 128 must be even and 2..unit (64)"),
    (lambda: Rope(1, 4, 64, 64, 0.0), "theta 0.0 must be a positive finite base"),
    (lambda: Rope(1, 4, 64, 64, 1e4, x_pitch=200), "x pitch 200: at least the row's 256 values"),
    (lambda: Rope(1, 4, 64, 64, 1e4, out_pitch=260), "out pitch 260: at least the row's 256 values and a multiple"),
    (lambda: Rope(0, 4, 64, 64, 1e4), "at least one row and one head"),
])
def test_invalid_specializations_say_why(make, message):
    """Each kernel's limits are its spec's (facts.py): the message names the kernel and the limit."""
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


@pytest.mark.parametrize(("make", "per_vector", "grid", "threads"), [
    (lambda: Rope(1, 32, 128, 128, 5e5), 8, (1, 1, 1), 256),  # a row's 32 heads, a pair of vectors a thread
    (lambda: Rope(64, 8, 128, 64, 1e4), 8, (64, 1, 1), 32),
    (lambda: Rope(3, 5, 64, 32, 1e4), 8, (3, 1, 1), 32),
    (lambda: Rope(2, 64, 256, 256, 1e4), 8, (2, 4, 1), 256),  # 16 pairs a head: 16 heads a CTA, 4 CTAs a row
    (lambda: Rope(2, 3, 80, 20, 1e4), 2, (2, 1, 1), 32),  # halves of 10 values: 4-byte vectors
])
def test_rope_reads_pairs_of_vectors_after_the_wait_without_local_memory(make, per_vector, grid, threads, cache):
    kernel = make()
    assert (kernel.per_vector, kernel.launch().grid, kernel.launch().block[0]) == (per_vector, grid, threads)
    ptx = compile_kernel(kernel, cache_dir=cache).ptx
    assert ".local" not in ptx, "local memory (a slow sin/cos path or a run-time register index)"
    before, after = ptx.split("griddepcontrol.wait;")
    assert "ld.global" not in before  # x and the positions are both predecessors' outputs
    load = {8: "ld.global.v4.b32", 2: "ld.global.b32"}[per_vector]
    assert load in after and "griddepcontrol.launch_dependents;" in after
    # the angles' inverse frequencies in fp64; no approximate sin / cos
    assert "cvt.rn.f32.f64" in after and "sin.approx" not in after and "cos.approx" not in after


def test_the_gemv_bench_writes_a_schedule_only_where_it_beats_the_default(tmp_path, monkeypatch):
    import json

    bench = load_bench("gemv", monkeypatch)
    o_proj = {"kind": "gemv", "rows": 1, "k": 4096, "n": 2304}
    q_proj = {"kind": "gemv", "rows": 1, "k": 2304, "n": 4096}

    def timed(shape, default, warps, per_cta, path, us):
        return ({**shape, "default": default, "warps": warps, "per_cta": per_cta, "path": path}, us, 0, 0, 1)

    rows_out = [timed(o_proj, True, 8, 2, "fma", 6.40), timed(o_proj, False, 16, 1, "fma", 5.50),
                timed(q_proj, True, 8, 2, "fma", 5.82), timed(q_proj, False, 9, 2, "fma", 5.75)]
    path = tmp_path / "schedules.json"
    bench.write_table(path, rows_out)
    # o proj's 16 warps beat its default by 14%: written; q proj's 9 warps by 1%, within the margin
    assert json.loads(path.read_text()) == {"gemv": {"outputs=2304,rows=1,width=4096": {
        "schedule": {"warps": 16, "rows_per_cta": 1, "tensor_cores": False}, "us": 5.5}}}


def test_the_gemv_bench_fits_the_launch_floor_and_what_it_allows(monkeypatch):
    bench = load_bench("gemv", monkeypatch)
    sizes = [4.7e6, 9.4e6, 18.9e6, 37.7e6, 75.5e6, 151e6, 755e6]
    # a line: 1.6 us a launch and 4.0 TB/s (torch: 2.4 us and 3.6 TB/s), each point's time exact
    ours = [1.6 + b / 4.0e6 for b in sizes]
    torch = [2.4 + b / 3.6e6 for b in sizes]
    floor, rate = bench.floor_fit(list(zip(sizes, ours, strict=True)))
    assert abs(floor - 1.6) < 1e-9 and abs(rate - 4.0) < 1e-9
    text = bench.floor_table(list(zip(sizes, ours, torch, strict=True)), copy_tbs=4.0)
    assert "ours: a launch costs 1.60 us + its bytes at 4.00 TB/s (100% of copy)" in text
    assert "torch: a launch costs 2.40 us + its bytes at 3.60 TB/s (90% of copy)" in text
    # at the copy rate, 20 MB take 5 us: with the 1.6 us floor that is 5 / 6.6 = 76% of the bandwidth
    assert "20 MB 76%" in text.split("ours:")[1].split("\n")[0]
    assert "| 755.0 | 190.35 | 190.35 |" in text


@pytest.mark.parametrize("cluster", [1, 4, 8])
def test_argmax_meets_over_dsmem_only_in_a_cluster(cluster, cache):
    """A row's CTAs as one cluster (ARGMAX_CLUSTER): a CTA a cluster rank, its pair read by CTA 0 over DSMEM
    between two cluster barriers; one CTA a row has neither."""
    kernel = Argmax(3, 163840, cluster=cluster)
    compiled = compile_kernel(kernel, cache_dir=cache)
    assert kernel.launch().grid == ((3, 1, 1) if cluster == 1 else (cluster, 3, 1))
    assert kernel.launch().cluster == (cluster, 1, 1)
    assert ("mapa.shared::cluster" in compiled.ptx) == (cluster > 1)
    assert compiled.ptx.count("barrier.cluster.arrive") == (2 if cluster > 1 else 0)
    assert ".local" not in compiled.ptx
    with pytest.raises(ValueError, match="one cluster of 1 to 8; got 16"):
        Argmax(1, 1024, cluster=16)


def test_argmax_takes_a_cluster_only_where_one_cta_needs_rounds():
    """The default cluster (measured: Kimi's 163840 logits gain with 8 CTAs at one row, dense-small's 32000
    lose): a row that one CTA scans in one round of UNROLL vectors a thread stays one CTA; a longer one is a
    cluster, while the rows' clusters fit the SMs in one wave."""
    from lanec.codegen.facts import ARGMAX_CLUSTER
    from lanec.codegen.kernels.argmax import THREADS, UNROLL
    one_round = THREADS * UNROLL * 8  # bf16 values in one round of 16-byte vectors
    assert Argmax(1, 32000).cluster == Argmax(1, one_round).cluster == 1
    assert Argmax(1, one_round + 8).cluster == Argmax(1, 163840).cluster == ARGMAX_CLUSTER > 1
    assert Argmax(1, one_round // 2 + 4, "float32").cluster == ARGMAX_CLUSTER  # fp32: half the values a vector
    # the rows' clusters in one wave of the SMs, or a CTA a row
    assert Argmax(16, 163840).cluster == ARGMAX_CLUSTER and Argmax(17, 163840).cluster == 1


@pytest.mark.parametrize("make", [lambda: Gemv(1, 2304, [4096]), lambda: RmsNorm(1, 2304, 1e-6),
                                  lambda: Rope(1, 32, 128, 128, 5e5)])
def test_a_launch_released_at_entry_releases_its_dependents_before_its_wait(make):
    """A launch the lowering releases at its entry (base.py's `released`) releases its PDL dependents as its
    body's first statement, before its own wait and before any global load; at "wait" where its kernel always
    has, after its wait. Once either way; the two are cached apart, and a bad point is refused by name."""
    from lanec.codegen.compile import cache_key
    from lanec.codegen.kernels.base import released

    keys = set()
    for point in ("wait", "entry"):
        kernel = released(make(), point)
        keys.add(cache_key(kernel))
        ptx = compile_kernel(kernel, cache_dir=None, use_cache=False).ptx
        assert ptx.count("griddepcontrol.launch_dependents;") == 1 and ptx.count("griddepcontrol.wait;") == 1
        release, wait = ptx.index("griddepcontrol.launch_dependents;"), ptx.index("griddepcontrol.wait;")
        assert (release < wait) == (point == "entry")
        if point == "entry":
            assert "ld.global" not in ptx[:release]
    assert len(keys) == 2
    with pytest.raises(ValueError, match="release 'early': 'wait' or 'entry'"):
        released(make(), "early")
