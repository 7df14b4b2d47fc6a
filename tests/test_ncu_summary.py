"""bench/ncu.py's reading of Nsight Compute's CSV exports (the GPU machine writes them; the summary is
read here): the speed-of-light metrics with their units, executed instructions by opcode (a predicated
instruction counted under its opcode), and stall samples by reason, "Not Issued" columns left out."""

from __future__ import annotations

import pytest
from bench_scripts import load_bench

DETAILS = '''"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"
"0","k","GPU Speed Of Light Throughput","Duration","us","83.42"
"0","k","GPU Speed Of Light Throughput","DRAM Throughput","%","67.60"
"0","k","Compute Workload Analysis","Issue Slots Busy","%","28.15"
"0","k","Memory Workload Analysis","Mem Busy","%","48.14"
'''
SASS = '''"Kernel Name","k",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait","stall_long_sb","stall_wait (Not Issued)"
"0x10","      IMAD R1, R2, R3, RZ","6","300","5","1","5"
"0x20","@!P1  IMAD R4, R5, 0x2, R6","3","100","3","0","3"
"0x30","      HGMMA.64x32x16.F32.BF16 R24, gdesc[UR8], R24","11","64","0","11","0"
"0x40","","0","0","0","0","0"
'''


@pytest.fixture
def ncu(monkeypatch):
    return load_bench("ncu", monkeypatch)


def test_the_csvs_read_as_metrics_opcodes_and_stalls(ncu, tmp_path):
    (tmp_path / "latent.details.csv").write_text(DETAILS)
    (tmp_path / "latent.sass.csv").write_text(SASS)
    metrics = ncu.details(tmp_path / "latent.details.csv")
    assert metrics == {"Duration": "83.42 us", "DRAM Throughput": "67.60 %", "Issue Slots Busy": "28.15 %"}
    executed, stalls, samples = ncu.sass(tmp_path / "latent.sass.csv")
    assert executed == {"IMAD": 400, "HGMMA": 64}
    assert stalls == {"wait": 8, "long_sb": 12} and samples == 20
    table = ncu.summarize(tmp_path)
    assert "| latent | 83.42 us | 67.60 % | 28.15 % |" in table
    assert "- latent: stalls long_sb 60%, wait 40%; instructions IMAD 86%, HGMMA 14%" in table


def test_a_kernel_without_its_sass_export_keeps_its_row(ncu, tmp_path):
    (tmp_path / "combine.details.csv").write_text(DETAILS)
    table = ncu.summarize(tmp_path)
    assert "| combine | 83.42 us |" in table and "- combine" not in table


def test_every_profiled_kernel_gets_tensors_it_can_run_on(ncu):
    """`fills` for each kernel bench/ncu.py profiles (their params, no compile): a page table of pages the
    cache holds, positions at the longest context the table reaches, random floats, zeroed integers, and
    no tensor for a tensor map (the runtime encodes those)."""
    for name, kernel in ncu.kernels().items():
        params = kernel.params()
        plan = ncu.fills(params)
        assert set(plan) == {p.name for p in params if p.tensor_map is None}, name
        by_name = {p.name: p for p in params}
        for param, (kind, span, dtype, value) in plan.items():
            assert span >= 1 and dtype == by_name[param].dtype
            if kind == "pages":
                batch, most = by_name["pages"].shape
                cache = next(p for p in params if p.name.endswith("cache"))
                assert span == batch * most <= value == cache.shape[0], name
            elif kind == "positions":
                assert value == by_name["pages"].shape[1] * ncu.PAGE - 1 == ncu.CONTEXT - 1, name
            else:
                assert kind == ("random" if dtype in ("bfloat16", "float32") else "zeros"), (name, param)
    gemm = ncu.kernels()["gemm-kimi-qkv-r256"]
    assert any(p.tensor_map is not None for p in gemm.params())  # its table schedule loads by TMA


def test_a_plans_own_kernels_are_rebuilt_from_their_specs(ncu):
    """`build --plan PLAN KIND...` rebuilds the first launch of each kind from its recorded spec (the plan's own
    specialization), and a linear layer's state slots are filled 1.. (slot 0 is padding: its CTAs would leave)."""
    from lanec.runtime.plan import Launch, Shape

    shape = Shape((1, 1, 1), (32, 1, 1))
    launches = [Launch("rmsnorm n0", 0, "e", shape, (), {"rows": 1, "width": 64}),
                Launch("kda_split l0", 0, "e", shape, (), {"heads": 4, "batch": 3}),
                Launch("kda_split l1", 0, "e", shape, (), {"heads": 8, "batch": 1})]
    kernels = ncu.plan_kernels(launches, ["kda_split"], "tiny")
    assert list(kernels) == ["tiny-kda_split"]
    kernel = kernels["tiny-kda_split"]
    assert (kernel.heads, kernel.batch) == (4, 3)  # the first launch of its kind
    kind, span, dtype, _ = ncu.fills(kernel.params())["slots"]
    assert (kind, span, dtype) == ("slots", 3, "int32")
    with pytest.raises(SystemExit, match="no mixture_router launch"):
        ncu.plan_kernels(launches, ["mixture_router"], "tiny")
