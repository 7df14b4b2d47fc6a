"""The grouped experts' kernels (mixture_groups, mixture_grouped_gated, mixture_grouped_down,
mixture_sum) compile for sm_90a (CPU only): PDL, no local memory, tensor cores and cp.async where
they multiply, no float atomics anywhere (two runs are bitwise equal); params and launches follow
the specialization; bad specializations raise one line. And the lowering: without the knob a
mixture keeps the per-row kernels; with --grouped-experts it is the router then the four grouped
launches (the folded shared expert's blocks more grid rows of theirs), and `lanec explain` says which path
each mixture took and why."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from ptx import compiled_for_sm90a
from test_mixture_compile import MIXTURE

from lanec.codegen.kernels import kernel_class
from lanec.codegen.kernels.mixture import MixtureGroups
from lanec.codegen.kernels.mixture_grouped import (
    MixtureGroupedDown,
    MixtureGroupedGated,
    MixtureSum,
)

KERNELS = {
    "groups_b256_e256_k8": lambda: MixtureGroups(256, 256, 8),
    "groups_b7_e8_k1": lambda: MixtureGroups(7, 8, 1),
    "groups_b64_e512_k10": lambda: MixtureGroups(64, 512, 10),
    "gated_kimi_shared": lambda: MixtureGroupedGated(64, 2304, 1024, 256, 8, shared_hidden=1024),
    "gated_apart_pitched_odd": lambda: MixtureGroupedGated(7, 520, 200, 16, 2, x_pitch=1024),
    "gated_shared_wider": lambda: MixtureGroupedGated(16, 1024, 256, 64, 6, shared_hidden=512),
    "down_kimi_shared": lambda: MixtureGroupedDown(64, 2304, 1024, 256, 8, shared_hidden=1024),
    "down_apart_odd": lambda: MixtureGroupedDown(7, 1000, 520, 16, 2),
    "gated_kimi_b256_g16": lambda: MixtureGroupedGated(256, 2304, 1024, 256, 8, shared_hidden=1024),
    "gated_g32_s4": lambda: MixtureGroupedGated(64, 520, 200, 16, 3, group_rows=32, stages=4),
    "down_kimi_b64_g16": lambda: MixtureGroupedDown(64, 2304, 1024, 256, 8, shared_hidden=1024),
    "gated_kimi_b24_k128_compact": lambda: MixtureGroupedGated(24, 2304, 1024, 256, 8, shared_hidden=1024, stage_k=128,
                                                              stages=2, compact=True),
    "down_kimi_b24_k128_compact": lambda: MixtureGroupedDown(24, 2304, 1024, 256, 8, shared_hidden=1024, stage_k=128,
                                                            stages=3, compact=True),
    "gated_apart_compact": lambda: MixtureGroupedGated(7, 520, 200, 16, 2, compact=True),
    "sum_shared_gate_pitched": lambda: MixtureSum(7, 2304, 8, shared=True, shared_gate=True, x_pitch=2560),
    "sum_apart": lambda: MixtureSum(256, 1000, 1),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_compiles_for_sm90a(case):
    kernel = KERNELS[case]()
    ptx = compiled_for_sm90a(kernel).ptx
    assert not re.search(r"^\s*(@%p\d+\s+)?(atom|red)\.", ptx, re.M)  # fixed orders, no atomics: deterministic
    if isinstance(kernel, MixtureGroupedGated | MixtureGroupedDown):
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx and "ldmatrix.sync.aligned" in ptx
        assert "cp.async.cg.shared.global" in ptx
    if isinstance(kernel, MixtureGroups):
        assert "shfl.sync.idx" in ptx and "shfl.sync.up" in ptx  # ranks among a step's lanes, the scan
    if isinstance(kernel, MixtureSum):
        assert "ld.global.v4.f32" in ptx and "cvt.rn.bf16x2.f32" in ptx


def test_params_follow_the_specialization():
    groups = MixtureGroups(7, 64, 3)
    assert [(p.name, p.shape, p.written) for p in groups.params()] == [
        ("ids", (7, 3), False), ("starts", (65,), True), ("order", (21,), True)]
    gated = MixtureGroupedGated(7, 512, 256, 16, 3, shared_hidden=128, x_pitch=1024)
    assert [p.name for p in gated.params()] == ["x", "starts", "order", "gate", "up", "shared_gate", "shared_up",
                                                "hidden", "shared"]
    assert gated.params()[0].strides == (1024, 1) and gated.params()[7].shape == (21, 256)
    assert [p.name for p in MixtureGroupedGated(7, 512, 256, 16, 3).params()] == ["x", "starts", "order", "gate",
                                                                                "up", "hidden"]
    down = MixtureGroupedDown(7, 512, 256, 16, 3, shared_hidden=128)
    assert [p.name for p in down.params()] == ["hidden", "starts", "order", "weights", "down", "shared",
                                               "shared_down", "partial"]
    assert down.params()[-1].shape == (7 * 4, 512) and down.params()[-1].dtype == "float32"
    assert MixtureGroupedDown(7, 512, 256, 16, 3).params()[-1].shape == (21, 512)
    assert [p.name for p in MixtureSum(7, 512, 3, shared=True, shared_gate=True).params()] == [
        "x", "partial", "shared_gate_row", "out"]
    assert [p.name for p in MixtureSum(7, 512, 3).params()] == ["partial", "out"]
    for name, cls in (("mixture_groups", MixtureGroups), ("mixture_grouped_gated", MixtureGroupedGated),
                      ("mixture_grouped_down", MixtureGroupedDown), ("mixture_sum", MixtureSum)):
        assert kernel_class(name) is cls


@pytest.mark.parametrize(("make", "grid", "block"), [
    (lambda: MixtureGroups(256, 256, 8), (1, 1, 1), 1024),  # 2048 pairs: 32 warps, 2 steps each
    (lambda: MixtureGroups(7, 8, 1), (1, 1, 1), 32),
    (lambda: MixtureGroups(64, 64, 3), (1, 1, 1), 192),
    # an (hidden tile, expert) each, the shared expert the last grid row
    (lambda: MixtureGroupedGated(64, 2304, 1024, 256, 8, shared_hidden=1024), (16, 260, 1), 256),  # 4 shared blocks
    (lambda: MixtureGroupedGated(7, 512, 200, 16, 2), (4, 16, 1), 256),
    (lambda: MixtureGroupedGated(7, 512, 256, 16, 2, shared_hidden=512), (8, 17, 1), 256),
    (lambda: MixtureGroupedDown(64, 2304, 1024, 256, 8, shared_hidden=1024), (18, 260, 1), 256),
    (lambda: MixtureGroupedDown(7, 1000, 520, 16, 2), (8, 16, 1), 256),
    (lambda: MixtureSum(7, 2304, 8, shared=True), (5, 7, 1), 128),
])
def test_launch_covers_every_expert(make, grid, block):
    kernel = make()
    shape = kernel.launch()
    assert shape.grid == grid and shape.block == (block, 1, 1) and shape.pdl and shape.cluster == (1, 1, 1)
    assert shape.shared_bytes <= 227 * 1024


def test_the_grouped_products_are_gemm_tcs_mma_machinery():
    gated = MixtureGroupedGated(64, 2304, 1024, 256, 8, group_rows=64)
    down = MixtureGroupedDown(64, 2304, 1024, 256, 8, group_rows=64)
    for kernel in (gated, down):  # 64 rows a block: 2 x 4 warps, each 2 row tiles x 4 column tiles
        assert (kernel.warps_m, kernel.warps_n, kernel.warp_row_tiles, kernel.warp_col_tiles) == (2, 4, 2, 4)
        assert kernel.stages == 6
    assert gated.tile_n == 128 and down.tile_n == 128  # 64 gate beside 64 up rows; 128 outputs


def longest_mma_run(ptx: str) -> int:
    """The most mma.sync instructions between two labels or branches of the PTX."""
    longest = run = 0
    for line in ptx.splitlines():
        if "mma.sync" in line:
            run += 1
            longest = max(longest, run)
        elif line.strip().startswith("$L") or re.search(r"\bbra\b", line):
            run = 0
    return longest


def test_stages_of_128_k_values_and_the_compact_grid():
    # padded stage rows (the swizzled default holds one stage more: test_swizzled_stage_rows)
    base = MixtureGroupedGated(24, 2304, 1024, 256, 8, shared_hidden=1024, stage_k=64, swizzle=False)
    wide = MixtureGroupedGated(24, 2304, 1024, 256, 8, shared_hidden=1024, swizzle=False)  # blocks of 16: 128
    assert (base.stage_k, base.stages) == (64, 4) and (wide.stage_k, wide.stages) == (128, 2)
    assert MixtureGroupedGated(1024, 2304, 1024, 256, 8).stage_k == 64  # blocks of 64 rows keep 64 (6 stages)
    assert wide.stage_bytes() == 2 * (128 + 16) * (128 + 8)  # a shared row: 256 bytes and 16 of padding
    assert wide.shared_bytes() <= 113 * 1024  # two CTAs an SM still
    base_ptx = compiled_for_sm90a(base).ptx
    wide_ptx = compiled_for_sm90a(wide).ptx
    # a stage's MMAs are one straight run: twice as many K values a stage, twice the run
    assert longest_mma_run(wide_ptx) == 2 * longest_mma_run(base_ptx) == 16
    compact = MixtureGroupedGated(24, 2304, 1024, 256, 8, shared_hidden=1024, stage_k=64, compact=True,
                                  swizzle=False)
    assert compact.launch().grid == base.launch().grid  # the same CTAs, in another order
    assert not base.compact and MixtureGroupedDown(64, 2304, 1024, 256, 8).compact  # from 64 rows by default
    assert compact.shared_bytes() > base.shared_bytes()  # the expert a CTA found
    ptx = compiled_for_sm90a(compact).ptx
    assert "shfl.sync.up" in ptx and "shfl.sync.up" not in base_ptx  # the chosen experts ranked by a scan


def test_swizzled_stage_rows():
    padded = MixtureGroupedGated(24, 2304, 1024, 256, 8, shared_hidden=1024, swizzle=False)
    swizzled = MixtureGroupedGated(24, 2304, 1024, 256, 8, shared_hidden=1024)  # the default (MIXTURE_GROUP_SWIZZLE)
    assert (swizzled.pitch(), padded.pitch()) == (128, 136)
    assert swizzled.stages == 3 and 2 * (swizzled.shared_bytes() + 1024) <= 228 * 1024  # 3 stages, 2 CTAs an SM
    narrow = MixtureGroupedDown(256, 2304, 1024, 256, 8)  # 256 rows: 64 K values a stage, 6 of them swizzled
    assert (narrow.stage_k, narrow.stages, narrow.pitch()) == (64, 6, 64)
    assert 2 * (narrow.shared_bytes() + 1024) <= 228 * 1024
    # a row's 16 vectors: each half's 8 permuted by the row's low bits, never across the halves
    for row in range(16):
        places = [swizzled.stage_column(row, 8 * v) // 8 for v in range(16)]
        assert sorted(places[:8]) == list(range(8)) and sorted(places[8:]) == list(range(8, 16))
        assert places[0] == row % 8
    # ldmatrix's 8 rows at one vector land in 8 different 16-byte bank groups
    for v in range(16):
        assert len({swizzled.stage_column(row, 8 * v) % 64 for row in range(8)}) == 8
    assert [padded.stage_column(5, 8 * v) for v in range(4)] == [0, 8, 16, 24]
    ptx = compiled_for_sm90a(swizzled).ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
    assert longest_mma_run(ptx) == 16


def test_down_ctas_of_64_outputs():
    wide = MixtureGroupedDown(24, 2304, 1024, 256, 8, shared_hidden=1024)
    narrow = MixtureGroupedDown(24, 2304, 1024, 256, 8, shared_hidden=1024, tile_n=64)
    assert wide.launch().grid == (18, 258, 1) and narrow.launch().grid == (36, 258, 1)
    assert (narrow.warps_n, narrow.warp_col_tiles) == (8, 1) and narrow.shared_bytes() < wide.shared_bytes()
    blocks64 = MixtureGroupedDown(256, 512, 512, 8, 8, tile_n=64)  # every row chooses every expert: 64-row blocks
    assert (blocks64.warps_m, blocks64.warps_n, blocks64.warp_col_tiles) == (2, 4, 2)
    ptx = compiled_for_sm90a(narrow).ptx
    assert "ld.local" not in ptx and "st.local" not in ptx
    assert "mma.sync.aligned.m16n8k16" in ptx and "cp.async.cg.shared.global" in ptx


def test_spread_gives_each_block_its_own_cta():
    spread = MixtureGroupedGated(256, 2304, 1024, 256, 8, shared_hidden=1024)  # from 256 rows by default
    plain = MixtureGroupedGated(256, 2304, 1024, 256, 8, shared_hidden=1024, spread=False)
    assert spread.spread and spread.compact and not plain.spread and not plain.compact and spread.padded_rows == 16
    assert not MixtureGroupedGated(255, 2304, 1024, 256, 8).spread
    # the routed grid rows: every non-empty segment's first block, then the 2048 pairs' whole blocks; the shared 16
    assert spread.launch().grid == (16, 256 + 2048 // 16 + 16, 1) and plain.launch().grid == (16, 256 + 16, 1)
    assert MixtureGroupedDown(7, 520, 200, 8, 1, spread=True).launch().grid == (5, 7, 1)  # 7 pairs, 7 segments at most
    # the bound holds for any routing: skewed, flat and adversarial splits of the pairs into segments
    rng = np.random.default_rng()
    for experts, pairs, block in [(256, 2048, 16), (8, 7, 16), (16, 512, 16), (128, 512, 64), (256, 192, 16)]:
        bound = MixtureGroupedDown(pairs, 512, 256, experts, 1, group_rows=block, spread=True).work_rows()
        for concentration in (0.05, 1.0, 50.0):
            for _ in range(100):
                counts = rng.multinomial(pairs, rng.dirichlet(np.full(experts, concentration)))
                assert (-(-counts // block)).sum() <= bound
        worst = np.zeros(experts, dtype=np.int64)  # as many segments as can be one pair past whole blocks
        worst[:min(experts, pairs)] = 1
        worst[0] += pairs - worst.sum()
        assert (-(-worst // block)).sum() <= bound
    ptx = compiled_for_sm90a(spread).ptx
    assert "ld.local" not in ptx and "st.local" not in ptx and "shfl.sync.up" in ptx
    assert "ld.local" not in compiled_for_sm90a(MixtureGroupedDown(256, 2304, 1024, 256, 8, spread=True)).ptx
    with pytest.raises(ValueError, match="spread without compact: a segment's blocks are ranked"):
        MixtureGroupedDown(256, 2304, 1024, 256, 8, spread=True, compact=False)


def test_the_block_holds_twice_the_mean_segment():
    # Kimi Linear's 256 experts, top 8: a mean of 2 rows an expert at batch 64, 8 at 256, 16 at 512
    assert [MixtureGroupedGated(rows, 2304, 1024, 256, 8).padded_rows for rows in (24, 64, 256, 512, 1024)] == [
        16, 16, 16, 32, 64]
    down = MixtureGroupedDown(256, 512, 256, 8, 8)  # every row chooses every expert: blocks of 64
    assert down.padded_rows == 64 and down.stages == 6
    small = MixtureGroupedDown(64, 2304, 1024, 256, 8)
    assert (small.warps_m, small.warps_n, small.warp_row_tiles, small.warp_col_tiles) == (1, 8, 1, 2)
    assert (small.stage_k, small.stages) == (128, 3)  # blocks below 64 rows: two CTAs an SM, rows swizzled
    assert MixtureGroupedDown(64, 2304, 1024, 256, 8, stage_k=64, stages=6).stages == 6


@pytest.mark.parametrize(("make", "message"), [
    (lambda: MixtureGroups(1, 1024, 8), "mixture_groups experts 1024: 1-512"),
    (lambda: MixtureGroups(4096, 256, 8), "4096 rows x top_k 8 pairs: at most 16384"),
    (lambda: MixtureGroups(0, 8, 1), "needs at least one row"),
    (lambda: MixtureGroupedGated(7, 500, 256, 16, 2), "width 500 must be a positive multiple of 8"),
    (lambda: MixtureGroupedGated(7, 512, 260, 16, 2), "expert width 260 must be"),
    (lambda: MixtureGroupedDown(7, 512, 256, 16, 17), "top_k 17: 1 to the experts"),
    (lambda: MixtureGroupedDown(7, 512, 256, 16, 2, shared_hidden=100), "shared expert width 100 must be"),
    (lambda: MixtureGroupedGated(7, 512, 256, 16, 2, x_pitch=500), "x pitch 500: at least the row's 512 values"),
    (lambda: MixtureSum(7, 512, 2, shared_gate=True), "the gate row scales a shared expert; there is none"),
    (lambda: MixtureGroupedGated(7, 512, 256, 16, 2, group_rows=48), "group_rows 48: one of 16, 32, 64"),
    (lambda: MixtureGroupedDown(7, 512, 256, 16, 2, stages=9), "mixture_grouped_down stages 9: 2 to 5"),
    (lambda: MixtureGroupedDown(7, 512, 256, 16, 2, stage_k=64, stages=9), "mixture_grouped_down stages 9: 2 to 6"),
    (lambda: MixtureGroupedGated(7, 512, 256, 16, 2, stage_k=96), "mixture_grouped_gated stage_k 96: 64 or 128"),
    (lambda: MixtureGroupedDown(7, 512, 256, 16, 2, tile_n=96), "mixture_grouped_down tile_n 96: 64 or 128 outputs"),
    (lambda: MixtureGroupedDown(64, 2304, 1024, 256, 8, stage_k=128, stages=6), "mixture_grouped_down stages 6: 2 to 5"),
])
def test_invalid_specializations_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)


# -- lowering ----------------------------------------------------------------------------------


def lowered(tmp_path: Path, text: str, grouped: bool):
    from lanec.codegen.lower import lower_module
    from lanec.pipeline import fuse, parse_verify
    from lanec.shim import LaneShim

    source = tmp_path / "mixture.mlir"
    source.write_text(text)
    module, where = parse_verify(source)
    fuse(module, LaneShim(), where)
    tunings: list = []
    step = next(iter(lower_module(module, tunings, grouped_experts=grouped).ops))
    step.verify()
    return list(step.body.block.ops), tunings


def test_without_the_knob_a_mixture_of_few_rows_keeps_the_per_row_kernels(tmp_path):
    from lanec.codegen.facts import MIXTURE_GROUPED_ROWS
    from lanec.dialects import lane

    assert MIXTURE_GROUPED_ROWS is not None and MIXTURE_GROUPED_ROWS >= 3
    ops, tunings = lowered(tmp_path, MIXTURE.replace("TOP_K", "4"), grouped=False)
    kinds = [op.kernel.data for op in ops if isinstance(op, lane.LaunchOp)]
    assert kinds == ["embed", "mixture_router", "mixture_gated", "mixture_down"]
    (mixture,) = [t for t in tunings if t[0] == "mixture"]
    assert mixture[2]["path"] == "per-row" and f"3 rows are at most {MIXTURE_GROUPED_ROWS}" in mixture[2]["why"]


def test_without_the_knob_a_mixture_past_the_measured_row_count_takes_the_grouped_path(tmp_path):
    from lanec.codegen.facts import MIXTURE_GROUPED_ROWS
    from lanec.dialects import lane

    rows = MIXTURE_GROUPED_ROWS + 1
    text = MIXTURE.replace("TOP_K", "4").replace("<3x", f"<{rows}x").replace("batch 3 ", f"batch {rows} ")
    ops, tunings = lowered(tmp_path, text, grouped=False)
    kinds = [op.kernel.data for op in ops if isinstance(op, lane.LaunchOp)]
    assert kinds == ["embed", "mixture_router", "mixture_groups", "mixture_grouped_gated", "mixture_grouped_down",
                     "mixture_sum"]
    (mixture,) = [t for t in tunings if t[0] == "mixture"]
    assert mixture[2]["path"] == "grouped" and f"{rows} rows are above {MIXTURE_GROUPED_ROWS}" in mixture[2]["why"]


@pytest.mark.parametrize("rows", [3, 63, 64, 130])
def test_the_router_scores_rows_in_the_measured_block(tmp_path, monkeypatch, rows):
    """The fused router (its logits not a gemm_tc launch: ROUTER_GEMM_ROWS off here) scores 4 rows a
    cluster from ROUTER_BLOCK_FROM rows on."""
    from lanec.codegen import facts
    from lanec.codegen.facts import ROUTER_BLOCK_FROM
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    monkeypatch.setattr(facts, "ROUTER_GEMM_ROWS", None)

    text = MIXTURE.replace("TOP_K", "4").replace("<3x", f"<{rows}x").replace("batch 3 ", f"batch {rows} ")
    ops, tunings = lowered(tmp_path, text, grouped=False)
    (router,) = [op for op in ops if isinstance(op, lane.LaunchOp) and op.kernel.data == "mixture_router"]
    block = spec_of(router)["rows_a_cta"]
    assert block == (4 if rows >= ROUTER_BLOCK_FROM else 1)
    assert tuple(router.grid.get_values())[1] == -(-rows // block)  # a row of clusters a block of rows
    (decision,) = [t for t in tunings if t[0] == "mixture_router"]
    assert decision[2]["rows_a_cta"] == block
    assert ("at least" if rows >= ROUTER_BLOCK_FROM else "below") in decision[2]["why"]


def test_the_knob_gives_the_grouped_launches(tmp_path):
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    ops, tunings = lowered(tmp_path, MIXTURE.replace("TOP_K", "4"), grouped=True)
    launched = [op for op in ops if isinstance(op, lane.LaunchOp)]
    assert [op.kernel.data for op in launched] == ["embed", "mixture_router", "mixture_groups",
                                                   "mixture_grouped_gated", "mixture_grouped_down", "mixture_sum"]
    groups, gated, down, summed = (spec_of(op) for op in launched[2:])
    assert groups == {"rows": 3, "experts": 16, "top_k": 4}
    shape = {"rows": 3, "width": 256, "hidden": 128, "experts": 16, "top_k": 4, "shared_hidden": 64}
    assert gated == shape and down == shape
    assert summed == {"rows": 3, "width": 256, "top_k": 4, "shared": True, "shared_gate": False}
    assert tuple(launched[3].grid.get_values()) == (2, 17, 1)  # 128 units in 64-unit tiles; 16 experts + shared
    buffers = {op.buffer_name.data: op for op in ops if isinstance(op, lane.BufferOp)}
    assert str(buffers["model.layers.1.moe.gate.weight.ids"].result.type) == "memref<3x4xi32>"
    assert str(buffers["model.layers.1.moe.starts"].result.type) == "memref<17xi32>"
    assert str(buffers["model.layers.1.moe.order"].result.type) == "memref<12xi32>"
    assert str(buffers["model.layers.1.moe.hidden"].result.type) == "memref<12x128xbf16>"
    assert str(buffers["model.layers.1.moe.shared_hidden"].result.type) == "memref<3x64xbf16>"
    assert str(buffers["model.layers.1.moe.partial"].result.type) == "memref<15x256xf32>"  # 3 rows x 5 slots
    (mixture,) = [t for t in tunings if t[0] == "mixture"]
    assert mixture[2]["path"] == "grouped" and "3 rows are above 0" in mixture[2]["why"]


def test_a_wide_mixture_with_a_shared_expert_apart_is_grouped_too(tmp_path):
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    text = MIXTURE.replace("TOP_K", "32").replace("16x", "64x").replace("<16xf32>", "<64xf32>")
    text = text.replace("groups = 4 : i64, topk_groups = 2 : i64", "groups = 8 : i64, topk_groups = 8 : i64")
    ops, _ = lowered(tmp_path, text, grouped=True)
    launched = [op for op in ops if isinstance(op, lane.LaunchOp)]
    kinds = [op.kernel.data for op in launched]
    assert kinds[:6] == ["embed", "mixture_router", "mixture_groups", "mixture_grouped_gated",
                         "mixture_grouped_down", "mixture_sum"]
    assert spec_of(launched[3])["shared_hidden"] == 0 and spec_of(launched[5])["shared"] is False
    assert kinds[6:] == ["gemv", "gemv", "elementwise", "gemv", "elementwise"]  # the shared expert, the add


def test_compile_and_explain_take_the_knob(tmp_path):
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen.facts import MIXTURE_GROUPED_ROWS

    source = tmp_path / "mixture.mlir"
    source.write_text(MIXTURE.replace("TOP_K", "2"))
    result = CliRunner().invoke(main, ["compile", "--grouped-experts", str(source), "-o", str(tmp_path / "m.plan")])
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["show", str(tmp_path / "m.plan")])
    assert shown.exit_code == 0, shown.output
    for kernel in ("mixture_groups", "mixture_grouped_gated", "mixture_grouped_down", "mixture_sum"):
        assert kernel in shown.output
    explained = CliRunner().invoke(main, ["explain", "--grouped-experts", str(source)])
    assert explained.exit_code == 0, explained.output
    assert "path grouped group_rows 16 stage_k 128 compact False swizzle True: 3 rows are above 0" in explained.output
    assert ("in blocks of 16 rows (a segment's mean is 0.4 rows), 3 stages of 128 K values, their rows swizzled "
            "(MIXTURE_GROUP_SWIZZLE), the grid in expert order"
            in explained.output)
    with pytest.MonkeyPatch.context() as patch:  # each block its own CTA from 2 rows: named, and the grid compact
        patch.setattr("lanec.codegen.facts.MIXTURE_GROUP_SPREAD_ROWS", 2)
        spread = CliRunner().invoke(main, ["explain", "--grouped-experts", str(source)])
    assert spread.exit_code == 0, spread.output
    assert "compact True swizzle True spread True: 3 rows" in spread.output
    assert "each block of a segment a CTA of its own, side by side (MIXTURE_GROUP_SPREAD_ROWS)" in spread.output
    plain = CliRunner().invoke(main, ["explain", str(source)])
    assert plain.exit_code == 0, plain.output
    assert (f"path per-row: 3 rows are at most {MIXTURE_GROUPED_ROWS}: the per-row kernels read each chosen expert "
            "once") in plain.output
    assert "rows_a_cta 1: 3 rows are below 64: a cluster a row keeps the most CTAs in flight" in plain.output


# -- the router writing the segments (ROUTER_SEGMENTS) ------------------------------------------


@pytest.mark.parametrize("rows", [1, 8, 100])
def test_the_router_with_segments_compiles_with_its_ticket(rows):
    from lanec.codegen.kernels.mixture import MixtureRouter

    router = MixtureRouter(rows, 1000, 64, 6, segments=True)
    assert [p.name for p in router.params()][-3:] == ["starts", "order", "tickets"]
    assert [(p.shape, p.written) for p in router.params()[-3:]] == [((65,), True), ((rows * 6,), True), ((1,), True)]
    ptx = compiled_for_sm90a(router).ptx
    assert "shfl.sync.up" in ptx  # mixture_groups' scan, inside the router
    # one cluster needs no ticket; more draw one each (the last computes the segments)
    assert ("atom.global.inc.u32" in ptx) == (router.clusters() > 1)
    plain = MixtureRouter(rows, 1000, 64, 6)
    # the same clusters; where the segments' walk takes more warps than the plain split's CTA has, fewer CTAs
    # of more warps (100 rows: 600 pairs, 19 warps: 2 CTAs of 32 rows in place of 4 of 16)
    assert router.launch().grid[1:] == plain.launch().grid[1:] and router.warps >= router.grouper().warps
    assert router.split == (plain.split if rows < 100 else plain.split // 2)
    assert router.shared_bytes() == plain.shared_bytes() + router.grouper().shared_bytes() + 16


def test_a_router_cta_too_small_for_the_segments_says_why():
    from lanec.codegen.kernels.mixture import MixtureRouter

    # 8 experts: one CTA of 8 warps; 64 rows x 8 = 512 pairs take mixture_groups 16 warps
    with pytest.raises(ValueError, match="512 pairs take 16 warps of mixture_groups, and a router CTA has 8"):
        MixtureRouter(64, 256, 8, 8, segments=True)


def test_with_router_segments_the_grouped_path_has_no_groups_launch(tmp_path, monkeypatch):
    from lanec.codegen import lower as lowering
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane

    monkeypatch.setattr(lowering, "ROUTER_SEGMENTS", True)
    ops, tunings = lowered(tmp_path, MIXTURE.replace("TOP_K", "4"), grouped=True)
    launched = [op for op in ops if isinstance(op, lane.LaunchOp)]
    assert [op.kernel.data for op in launched] == ["embed", "mixture_router", "mixture_grouped_gated",
                                                   "mixture_grouped_down", "mixture_sum"]
    router, gated = launched[1], launched[2]
    assert spec_of(router)["segments"] is True
    # the gated products read the starts and order the router wrote
    assert router.operands[-3] is gated.operands[1] and router.operands[-2] is gated.operands[2]
    (decision,) = [t for t in tunings if t[0] == "mixture_groups"]
    assert decision[2]["launch"] == "router" and "one launch fewer" in decision[2]["why"]
