"""TMA tensor maps through the compiler and the plan: a kernel's tensor-map param (`TensorParam.
tensor_map`), the lowering binding it to the window of the param it maps, the plan's `Arg.map`
record (format 3, validated at read with one-line errors), and gemm_tc's wgmma engine filling its
stages by `cp.async.bulk.tensor` (loads "tma"). The maps themselves are encoded by the driver on
the GPU machine (tests/gpu/test_gemm_tc.py's tma_* cases)."""

from __future__ import annotations

import re

import pytest

from lanec.codegen import schedules
from lanec.runtime.launch import TensorParam, tensor_map_problems, tensor_map_record
from lanec.runtime.plan import VERSION, Arg, Buffer, Launch, Plan, PlanError, Shape, describe

X = TensorParam("x", (100, 1000), "bfloat16", (1024, 1))
X_MAP = TensorParam.map_of("x_map", "x", (64, 104), 128)


def test_a_map_param_round_trips_and_records_its_window():
    assert TensorParam.from_json(X_MAP.to_json()) == X_MAP
    assert X_MAP.shape == (128,) and X_MAP.dtype == "uint8"
    record = tensor_map_record(X, X_MAP)
    assert record == {"dtype": "bfloat16", "shape": [100, 1000], "strides": [1024, 1], "box": [64, 104],
                      "swizzle": 128}
    assert tensor_map_problems(record, 2) == []
    plain = TensorParam("y", (2, 3), "bfloat16")
    assert "tensor_map" not in plain.to_json() and TensorParam.from_json(plain.to_json()) == plain


@pytest.mark.parametrize(("change", "message"), [
    ({"strides": [1001, 1]}, "a row pitch of 2002 bytes is not a multiple of 16"),
    ({"box": [64, 257]}, "box [64, 257]: each side is 1-256 elements"),
    ({"box": [128, 8]}, "the box's inner 256 bytes exceed the 128-byte swizzle span"),
    ({"box": [4, 8], "swizzle": 0}, "the box's inner 8 bytes are not a multiple of 16"),
    ({"swizzle": 96}, "swizzle 96: one of 0, 32, 64, 128 bytes"),
    ({"shape": [2, 3, 4], "strides": [12, 4, 1]}, "a tensor map here is 2-D"),
    ({"strides": [1024, 2]}, "its rows must be contiguous"),
])
def test_a_map_tma_cannot_encode_says_why(change, message):
    record = {**tensor_map_record(X, X_MAP), **change}
    problems = tensor_map_problems(record, 2)
    assert problems and message in problems[0]


def mapped_plan(arg: Arg) -> Plan:
    plan = Plan(program="{}", form="form.step {\n}\n")
    kernel = plan.add_cubin(b"\x7fELF gemm cubin")
    plan.buffers = [Buffer("x", (100, 1024), "bfloat16", "activation"), Buffer("y", (100, 8), "bfloat16", "output", 0)]
    plan.launches = [Launch("gemm_tc y", kernel, "kernel_gemm", Shape((1, 1, 1), (256, 1, 1)),
                            (Arg("x"), Arg("y"), arg))]
    return plan


def test_a_plan_with_a_map_is_format_3_and_reads_back(tmp_path):
    arg = Arg("x", 0, tensor_map_record(X, X_MAP))
    plan = mapped_plan(arg)
    assert plan.version == 3 == VERSION
    path = tmp_path / "mapped.plan"
    plan.write(path)
    again = Plan.read(path)
    assert again.launches[0].args[2] == arg and again.version == 3
    assert mapped_plan(Arg("x")).version == 1  # no map: the oldest format that holds it
    shown = describe(again)
    assert shown.startswith("lanec plan, format 3") and "(x, y, map(x box 64x104 swizzle 128))" in shown


@pytest.mark.parametrize(("arg", "message"), [
    (Arg("x", 3, tensor_map_record(X, X_MAP)), "starts 6 bytes into the buffer, not on a 16-byte boundary"),
    (Arg("x", 1024, tensor_map_record(X, X_MAP)), "its 100 rows end at element 103400, past the buffer's 102400"),
    (Arg("x", 0, {**tensor_map_record(X, X_MAP), "dtype": "float32"}), "reads float32 from a bfloat16 buffer"),
    (Arg("x", 0, {**tensor_map_record(X, X_MAP), "box": [64, 300]}), "box [64, 300]: each side is 1-256"),
    (Arg("x", 0, {"dtype": "bfloat16"}), "its record needs dtype, shape, strides, box, swizzle"),
])
def test_a_bad_map_in_a_plan_is_one_line(arg, message):
    with pytest.raises(PlanError) as error:
        mapped_plan(arg).validate()
    text = str(error.value)
    assert message in text and "\n" not in text
    assert "launch 0 (gemm_tc y): the tensor map over 'x'" in text


def test_gemm_tc_by_tma_compiles_to_bulk_tensor_copies_on_mbarriers():
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.gemm_tc import GemmTc

    kernel = GemmTc(100, 1000, [320], schedule={"loads": "tma", "block_rows": 32, "splits": 2})
    names = [p.name for p in kernel.params()]
    assert names == ["x", "w", "y", "x_map", "w_map"]
    assert kernel.params()[3].tensor_map == {"of": "x", "box": [64, 32], "swizzle": 128}
    assert kernel.params()[4].tensor_map == {"of": "w", "box": [64, 128], "swizzle": 128}
    ptx = compile_kernel(kernel).ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes"
                     r" \[%r\d+\], \[%rd\d+, \{%r\d+, %r\d+\}\], \[%r\d+\];", ptx)
    assert "mbarrier.try_wait" in ptx and "mbarrier.arrive.expect_tx" in ptx
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 2 and "prefetch.tensormap" in ptx
    assert "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16" in ptx
    assert "cp.async.cg" not in ptx and ".local" not in ptx  # no thread copies left, no spills
    # the bulk copies before the PDL wait are the weights'; the rows' come after it
    before, after = ptx.split("griddepcontrol.wait;")
    assert before.count("cp.async.bulk.tensor") >= 1 and after.count("cp.async.bulk.tensor") >= 1
    with pytest.raises(ValueError, match="only the wgmma engine fills its stages by TMA"):
        GemmTc(100, 1000, [320], schedule={"loads": "tma", "engine": "mma"})
    with pytest.raises(ValueError, match="GemmTc loads is 'copies', 'tma' or 'producer'"):
        GemmTc(100, 1000, [320], schedule={"loads": "bulk"})


def test_a_producer_warpgroup_issues_the_boxes_and_the_consumers_hand_stages_back():
    """loads "producer": a third warpgroup (384 threads), a full and an empty mbarrier a stage,
    the same tensor maps; the consumers' loop has no CTA barrier."""
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.gemm_tc import GemmTc

    copies = GemmTc(256, 2304, [4096], schedule={"loads": "tma"})
    kernel = GemmTc(256, 2304, [4096], schedule={"loads": "producer"})
    assert kernel.launch().block == (384, 1, 1) and copies.launch().block == (256, 1, 1)
    assert kernel.shared_bytes() == copies.shared_bytes() + 8 * kernel.stages  # an empty barrier a stage
    assert [p.name for p in kernel.params()] == ["x", "w", "y", "x_map", "w_map"]
    ptx = compile_kernel(kernel).ptx
    assert ptx.count("cp.async.bulk.tensor") >= 2 and "mbarrier.try_wait" in ptx and ".local" not in ptx
    # the one-thread TMA loop's CTA barrier a stage is gone (the rest: the barriers' start, the epilogue)
    assert ptx.count("bar.sync") == compile_kernel(copies).ptx.count("bar.sync") - 1
    assert "mbarrier.arrive.shared.b64" in ptx  # a consumer warpgroup hands a stage back
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx


@pytest.mark.parametrize(("rows", "outputs", "multicast", "grid", "box_rows"), [
    (256, 4096, 2, (1, 1, 32), 128),  # 32 weight tiles: 16 clusters of 2
    (64, 2304, 4, (1, 1, 20), 16),  # 18 tiles rounded up to 5 clusters of 4: two tiles store nothing
    (33, 1024, 2, (1, 1, 8), 24),  # 33 rows padded to 48: two 24-row slices
])
def test_a_cluster_of_weight_tiles_multicasts_its_row_box(rows, outputs, multicast, grid, box_rows):
    """multicast M: the CTAs of M neighbouring weight tiles are one cluster; each loads 1 / M of
    the row box and multicasts it, and hands a stage back to every CTA's producer."""
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.gemm_tc import GemmTc

    kernel = GemmTc(rows, 2304, [outputs], schedule={"loads": "producer", "multicast": multicast})
    shape = kernel.launch()
    assert (shape.grid, shape.cluster, kernel.splits) == (grid, (1, 1, multicast), 1)
    assert kernel.padded_rows % (8 * multicast) == 0
    assert kernel.params()[3].tensor_map["box"] == [64, box_rows] == [64, kernel.padded_rows // multicast]
    ptx = compile_kernel(kernel).ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster" in ptx
    assert "mbarrier.arrive.shared::cluster.b64" in ptx  # a consumer's hand-back on a peer's barrier
    assert ptx.count("barrier.cluster.arrive") >= 2 and ".local" not in ptx  # after the start, before the exit


@pytest.mark.parametrize(("schedule", "message"), [
    ({"loads": "tma", "multicast": 2}, "only a producer warpgroup multicasts (loads 'producer'; got 'tma')"),
    ({"loads": "producer", "multicast": 2, "splits": 2}, "its cluster is the weight tiles', not a K split's"),
    ({"loads": "producer", "multicast": 3}, "GemmTc multicast is 1, 2 or 4 CTAs a cluster"),
])
def test_a_multicast_the_kernel_cannot_make_says_why(schedule, message):
    from lanec.codegen.kernels.gemm_tc import GemmTc

    with pytest.raises(ValueError, match=re.escape(message)):
        GemmTc(256, 2304, [4096], schedule=schedule)


def test_the_lowering_binds_a_map_to_its_window_and_the_plan_records_it(monkeypatch, tmp_path):
    """A dense form at batch 64 with every gemm_tc launch on TMA loads (the table patched): each
    launch binds x, w, y and the two maps over x's and w's windows; the plan records them."""
    import subprocess
    import sys

    from lanec.pipeline import compile_plan

    class Everywhere(dict):  # the table's gemm_tc entry at every shape: TMA loads
        def get(self, key, default=None):
            return {"schedule": {"loads": "tma"}}

    monkeypatch.setattr(schedules, "table", lambda: {"gemm_tc": Everywhere()})
    form = tmp_path / "dense-b64.mlir"
    form.write_text(subprocess.run([sys.executable, "-m", "lanec.models.dense", "--batch", "64", "--layers", "1",
                                    "--hidden", "512", "--width", "1024", "--vocab", "2048", "--heads", "4",
                                    "--kv-heads", "2"], check=True, capture_output=True, text=True).stdout)
    plan = compile_plan(form).plan
    gemms = [launch for launch in plan.launches if launch.name.startswith("gemm_tc")]
    assert len(gemms) >= 3 and plan.version == 3
    for launch in gemms:
        x, w, _, x_map, w_map = launch.args
        assert (x_map.buffer, x_map.offset) == (x.buffer, x.offset) and x.map is None
        assert (w_map.buffer, w_map.offset) == (w.buffer, w.offset) and w.map is None
        rows = launch.spec["rows"]
        assert x_map.map["shape"][0] == rows and x_map.map["box"] == [64, -(-rows // 8) * 8]
        assert w_map.map["box"] == [64, 128] and w_map.map["swizzle"] == 128
        assert launch.traffic["read"] == 2 * (x_map.map["shape"][0] * x_map.map["shape"][1]
                                              + w_map.map["shape"][0] * w_map.map["shape"][1])
    path = tmp_path / "dense-b64.plan"
    plan.write(path)
    assert Plan.read(path).launches == plan.launches
