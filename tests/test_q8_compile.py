"""The quantized form's kernels and lowering on the CPU: quantize, q8_gemv and q8_gated_gemv
specializations compile for sm_90a (PDL, no local memory, one pointer a param), their PTX has the
instructions their exactness and speed rest on (rounded divisions and ties-to-even conversions,
no FMA; dp4a after the PDL wait, every weight load before it), bad specializations are one-line
errors, the tests' numpy encoding of the device rows is ops.quantize's, and a q8_0 Llama-style
form lowers to quantize + q8 launches under both word counts, with `explain`'s reasons."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_bench
from ptx import compiled_for_sm90a

from lanec.codegen.facts import quantized_pitch
from lanec.codegen.lower import lower_module
from lanec.codegen.schedules import schedule_for
from lanec.codegen.spec import spec_of
from lanec.dialects import lane
from lanec.interp import ops
from lanec.pipeline import fuse, parse_verify
from lanec.shim import LaneShim

ROOT = Path(__file__).resolve().parents[1]
FORM = ROOT / "examples" / "dense-small-q8.mlir"


def quantize_kernel(*args, **kwargs):
    from lanec.codegen.kernels.quantize import Quantize

    return Quantize(*args, **kwargs)


def q8_gemv(*args, **kwargs):
    from lanec.codegen.kernels.q8_gemv import Q8Gemv

    return Q8Gemv(*args, **kwargs)


def q8_gated_gemv(*args, **kwargs):
    from lanec.codegen.kernels.q8_gemv import Q8GatedGemv

    return Q8GatedGemv(*args, **kwargs)


@pytest.mark.parametrize(("rows", "width", "words", "pitch"), [(1, 4096, 1, None), (3, 96, 2, None),
                                                                (7, 160, 2, 264)])
def test_quantize_compiles_with_exact_rounding(rows, width, words, pitch):
    ptx = compiled_for_sm90a(quantize_kernel(rows, width, words, x_pitch=pitch)).ptx
    _, after = ptx.split("griddepcontrol.wait;")
    # per value: x / s, then (two words) s / 254 and the residual's division: all rounded once
    assert after.count("div.rn.f32") >= 8 * words + 1 and after.count("cvt.rni.s32.f32") == 8 * words
    # two words: each remainder is divided only where it is not zero (step / step stands in for 0 / step,
    # which div.rn's check sends down its slow path), so every residual division divides a select
    guarded = re.findall(r"selp\.f32\s+(%r\d+),[^\n]*\n(?:[^\n]*\n){0,2}?\s*div\.rn\.f32 %r\d+, \1,", after)
    assert len(guarded) == (8 if words == 2 else 0)
    assert "fma" not in ptx  # x - q1 s is a multiply and a subtraction, each rounded: numpy's
    assert "shfl.sync.bfly" in after  # the block's max over its four lanes


@pytest.mark.parametrize(("rows", "width", "words", "residual"), [(1, 4096, 1, False), (3, 4096, 2, True),
                                                                    (5, 96, 1, False), (2, 14336, 2, False)])
def test_rmsnorm_quantize_epilogue_compiles_with_the_quantize_kernels_rounding(rows, width, words, residual):
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    kernel = RmsNorm(rows, width, 1e-6, residual=residual, quantize=words)
    params = {p.name: p for p in kernel.params()}
    assert params["y"].dtype == "int8" and params["y"].shape == (rows, quantized_pitch(width, words))
    assert ("h" in params) == residual
    assert not residual or params["h"].dtype == "bfloat16"  # the residual sum stays bf16
    ptx = compiled_for_sm90a(kernel).ptx
    _, after = ptx.split("griddepcontrol.wait;")
    steps = kernel.steps  # each of a thread's vectors of the row is quantized: 8 values, a division each
    assert after.count("div.rn.f32") >= steps * (8 * words + 1)
    assert after.count("cvt.rni.s32.f32") == steps * 8 * words
    assert "shfl.sync.bfly" in after and "cvt.rn.bf16x2.f32" not in after.split("rsqrt")[-1]  # no bf16 y


@pytest.mark.parametrize(("width", "words", "message"), [(1000, 1, "whole 32-value blocks"),
                                                        (4096, 3, "one or two int8 words")])
def test_a_norm_epilogue_the_quantized_form_cannot_hold_is_refused_by_name(width, words, message):
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    with pytest.raises(ValueError, match=f"quantize epilogue: .*{message}"):
        RmsNorm(2, width, 1e-6, quantize=words)


@pytest.mark.parametrize("make", [
    lambda: q8_gemv(1, 4096, (4096,)),
    lambda: q8_gemv(3, 96, (37,), words=2),
    lambda: q8_gemv(32, 14336, (1000,), words=2),
    lambda: q8_gemv(3, 2048, (2048, 512, 512)),
    lambda: q8_gated_gemv(1, 4096, 14336),
    lambda: q8_gated_gemv(16, 2080, 999, words=2),
], ids=["r1", "r3_odd_w2", "r32_w2", "parts", "gated_r1", "gated_r16_w2"])
def test_q8_products_compile_with_dp4a_after_the_wait(make):
    kernel = make()
    ptx = compiled_for_sm90a(kernel).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    assert "ld.global.nc.b32" in before and "ld.global.nc.b16" in before  # weights in flight before the wait
    assert "ld.global.nc" not in after and "dp4a" not in before
    assert after.count("dp4a.s32.s32") >= 2 * kernel.words and "shf.r.clamp.b32" in after
    assert "mma.sync" not in ptx  # CUDA cores: dp4a only
    x, w = kernel.params()[:2]
    assert (x.dtype, x.shape) == ("int8", (kernel.rows, quantized_pitch(kernel.width, kernel.words)))
    assert w.dtype == "uint8" and w.shape[1] == kernel.width // 32 * 34  # llama.cpp's blocks


def q8_gemm(*args, **kwargs):
    from lanec.codegen.kernels.q8_gemm import Q8GemmTc

    return Q8GemmTc(*args, **kwargs)


@pytest.mark.parametrize("make", [
    lambda: q8_gemm(64, 4096, (4096,)),
    lambda: q8_gemm(100, 4096, (4096, 1024, 1024), words=2),
    lambda: q8_gemm(256, 2304, (1000,)),
    lambda: q8_gemm(48, 4096, (2304,), schedule={"splits": 8, "tile_n": 64}),
], ids=["r64", "r100_parts_w2", "r256_odd_n", "r48_split8"])
def test_q8_gemm_tc_compiles_to_integer_mma_a_block(make):
    kernel = make()
    ptx = compiled_for_sm90a(kernel).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    # the first stages' weight values (16 bytes) and scales (8 bytes) in flight before the wait
    assert "cp.async.cg.shared.global" in before and "cp.async.ca.shared.global" in before and "8, " in before
    # per stage (4 blocks): a warp's MMAs a (row tile, weight tile, word, block), int32 from zero
    mmas = 4 * kernel.warp_row_tiles * kernel.warp_col_tiles * kernel.words
    assert after.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == mmas and "mma" not in before
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in after
    assert ("barrier.cluster" in ptx) == (kernel.splits > 1)  # a K split sums over the cluster's shared memory
    x, w, y = kernel.params()
    assert (x.dtype, x.shape) == ("int8", (kernel.rows, quantized_pitch(kernel.width, kernel.words)))
    assert (w.dtype, w.shape) == ("uint8", (kernel.outputs, kernel.width // 32 * 34))  # the planes: same bytes
    assert kernel.launch().grid == (kernel.splits, kernel.row_blocks, -(-kernel.outputs // kernel.tile_n))


def q8_table_entries() -> list:
    """(shape, schedule) of every q8_gemm_tc entry the compiler's table holds."""
    from lanec.codegen.schedules import table

    found = []
    for key, entry in sorted(table().get("q8_gemm_tc", {}).items()):
        assert set(entry) == {"schedule", "us"}, f"{key}: an entry is its named schedule and its time"
        found.append(({k: int(v) for k, v in (part.split("=") for part in key.split(","))}, entry["schedule"]))
    return found


@pytest.mark.parametrize(("shape", "schedule"), q8_table_entries(),
                         ids=lambda v: ",".join(f"{k}{x}" for k, x in sorted(v.items())))
def test_every_q8_table_schedule_compiles(shape, schedule):
    """What bench/q8.py wrote is what the lowering launches: each entry compiles with its integer MMAs."""
    kernel = q8_gemm(shape["rows"], shape["width"], (shape["outputs"],), words=shape["words"], schedule=schedule)
    # the named knobs taken (block_rows: the most rows a CTA; 33 rows in blocks of 32 are two of 17)
    assert all(getattr(kernel, knob) == value for knob, value in schedule.items() if knob != "block_rows")
    assert kernel.block_rows <= schedule.get("block_rows", kernel.block_rows)
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in compiled_for_sm90a(kernel).ptx


def test_q8_0_planes_reorder_the_blocks_bytes():
    from lanec.runtime.weights import WeightError, q8_0_planes, quantize_q8_0

    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 96)).astype(np.float32)
    blocks = quantize_q8_0(w)
    planes = q8_0_planes(blocks)
    assert planes.shape == blocks.shape and planes.dtype == np.uint8
    assert np.array_equal(planes[:, :96].view(np.int8), blocks.reshape(3, 3, 34)[:, :, 2:].reshape(3, 96).view(np.int8))
    scales = planes[:, 96:].copy().view(np.float16).astype(np.float32)
    values = planes[:, :96].view(np.int8).astype(np.float32).reshape(3, 3, 32) * scales[:, :, None]
    assert np.array_equal(values.reshape(3, 96), ops.q8_0(w))  # values then scales stand for the same weights
    with pytest.raises(WeightError, match="q8_0_planes reorders q8_0 blocks"):
        q8_0_planes(w)


@pytest.mark.parametrize(("batch", "fuse_quant"), [(64, False), (64, True), (32, False)])
def test_q8_gated_pairs_above_the_gemv_rows_are_two_products_and_a_swiglu(tmp_path, batch, fuse_quant):
    """Llama-3.1-8B's first layer with every projection Q8_0: above 32 rows the MLP's gated pair is
    a q8_gemm_tc launch for gate and for up (each weight read once) and an elementwise SwiGLU, which
    quantizes for the down product in its own epilogue under fuse-quant; at 32 rows q8_gated_gemv."""
    import sys

    from click.testing import CliRunner

    from lanec.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
    from plans import q8_rows

    source = tmp_path / "model.mlir"
    result = CliRunner().invoke(main, ["import", str(ROOT / "examples" / "llama-3.1-8b.config.json"), "--layers", "1",
                                       "--batch", str(batch), "-o", str(source)])
    assert result.exit_code == 0, result.output
    source.write_text(q8_rows(source.read_text(), experts=True))
    launches, buffers, tunings = lowered(str(source), fuse_quant=fuse_quant)
    kinds = [op.kernel.data for op in launches]
    if batch <= 32:
        assert kinds.count("q8_gated_gemv") == 2 and "q8_gemm_tc" not in kinds  # two launches of 16 rows
        return
    assert "q8_gated_gemv" not in kinds
    swiglu = next(i for i, op in enumerate(launches) if spec_of(op).get("op") == "swiglu")
    assert kinds[swiglu - 2: swiglu + 1] == ["q8_gemm_tc", "q8_gemm_tc", "elementwise"]  # gate, up, SwiGLU
    assert [spec_of(launches[swiglu - k])["parts"] for k in (2, 1)] == [(14336,), (14336,)]
    assert spec_of(launches[swiglu]).get("quantize") == (1 if fuse_quant else None)
    # the down product reads the SwiGLU quantized: from its epilogue, or a quantize launch after it
    after = ["q8_gemm_tc"] if fuse_quant else ["quantize", "q8_gemm_tc"]
    assert kinds[swiglu + 1: swiglu + 1 + len(after)] == after
    whys = [o["why"] for k, shape, o in tunings if k == "q8_product" and shape.get("gated")]
    assert whys == ["64 rows are above q8_gemv's 32: gate and up on int8 tensor cores, each read once, then the "
                    "SwiGLU"]
    planes = [b for b in buffers if "q8_0_planes" in str(b.transforms)]
    assert len(planes) == 6  # q k v, o, gate, up, down, lm head: gate and up apart, q k v in parts


def test_q8_gemm_tc_launches_take_the_tuned_tables_schedule(tmp_path, monkeypatch):
    """The lowering looks each q8_gemm_tc launch up in the schedule table (rows, width, outputs,
    words), as bench/q8.py --write-table writes it."""
    import sys

    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen import schedules

    sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
    from plans import q8_rows

    source = tmp_path / "model.mlir"
    result = CliRunner().invoke(main, ["import", str(ROOT / "examples" / "llama-3.1-8b.config.json"), "--layers", "1",
                                       "--batch", "64", "-o", str(source)])
    assert result.exit_code == 0, result.output
    source.write_text(q8_rows(source.read_text()))
    tuned = {"tile_n": 128, "splits": 2, "stages": 2, "block_rows": 32}
    monkeypatch.setattr(schedules, "table", lambda: {"q8_gemm_tc": {
        "outputs=4096,rows=64,width=4096,words=1": {"schedule": tuned, "us": 17.7}}})
    launches, _, tunings = lowered(str(source))
    specs = [spec_of(op) for op in launches if op.kernel.data == "q8_gemm_tc"]
    o_proj = [spec for spec in specs if spec["parts"] == (4096,)]
    assert [spec["schedule"] for spec in o_proj] == [tuned]
    assert all("schedule" not in spec for spec in specs if spec["parts"] != (4096,))  # not in the table
    kernel = q8_gemm(**{k: v for k, v in o_proj[0].items()})
    assert (kernel.block_rows, kernel.row_blocks, kernel.stages) == (32, 2, 2)
    assert ("q8_gemm_tc", {"rows": 64, "width": 4096, "outputs": 4096, "words": 1}, {"schedule": tuned}) in tunings


def test_the_q8_bench_writes_the_fastest_schedule_a_shape(tmp_path, monkeypatch):
    bench = load_bench("q8", monkeypatch)
    monkeypatch.setattr(bench, "TENSOR_CORES", True)
    shape = {"kind": "q8_tc", "k": 4096, "n": 4096, "rows": 64, "words": 1}
    results = [({**shape, "knobs": {"tile_n": 128, "splits": 4, "stages": 3}}, 27.1, None, None),
               ({**shape, "knobs": {"tile_n": 128, "splits": 2, "stages": 2, "block_rows": 32}}, 17.7, None, None),
               ({**shape, "words": 2, "knobs": {"tile_n": 128, "splits": 4, "stages": 3}}, 38.5, None, None),
               ({"kind": "bf16", "k": 4096, "n": 4096, "rows": 64, "words": 0, "knobs": {}}, 13.6, None, None)]
    path = tmp_path / "schedules.json"
    path.write_text('{"gemm_tc": {"kept": {"us": 1.0}}}')
    bench.write_table(path, results)
    import json

    table = json.loads(path.read_text())
    assert table["gemm_tc"] == {"kept": {"us": 1.0}}  # merged into what the file held
    assert table["q8_gemm_tc"] == {
        "outputs=4096,rows=64,width=4096,words=1": {"schedule": {"tile_n": 128, "splits": 2, "stages": 2,
                                                                 "block_rows": 32}, "us": 17.7},
        "outputs=4096,rows=64,width=4096,words=2": {"schedule": {"tile_n": 128, "splits": 4, "stages": 3}, "us": 38.5}}


def test_the_q8_bench_writes_a_gemv_schedule_only_where_it_beats_the_default(tmp_path, monkeypatch):
    import json

    bench = load_bench("q8", monkeypatch)
    pair = {"kind": "q8", "k": 2304, "n": 9216, "rows": 1, "words": 1, "gated": True}
    product = {"kind": "q8", "k": 4096, "n": 4096, "rows": 1, "words": 1, "gated": False}
    results = [({**pair, "default": True, "knobs": {"warps": 8, "rows_per_cta": 2}}, 21.2, None, None),
               ({**pair, "default": False, "knobs": {"warps": 9, "rows_per_cta": 4}}, 13.0, None, None),
               ({**product, "default": True, "knobs": {"warps": 8, "rows_per_cta": 2}}, 6.55, None, None),
               ({**product, "default": False, "knobs": {"warps": 4, "rows_per_cta": 2}}, 6.50, None, None)]
    path = tmp_path / "schedules.json"
    bench.write_table(path, results)
    table = json.loads(path.read_text())
    # the pair's 9 warps beat its default by 39%: written under its hidden width; the product's
    # 4 warps by 0.8%, within the margin: the default stays
    assert table == {"q8_gated_gemv": {"outputs=9216,rows=1,width=2304,words=1": {
        "schedule": {"warps": 9, "rows_per_cta": 4}, "us": 13.0}}}


@pytest.mark.parametrize(("make", "message"), [
    (lambda: q8_gemm(64, 4160, (64,)), "width 4160: whole runs of 256 values"),
    (lambda: q8_gemm(257, 4096, (64,)), "takes 1-256 rows a launch"),
    (lambda: q8_gemm(64, 4096, (60,)), "outputs 60 must be a multiple of 8"),
    (lambda: q8_gemm(64, 4096, (64,), words=3), "3 words: a quantized activation value is one or two"),
    (lambda: q8_gemm(64, 4096, (64,), schedule={"loads": "tma"}), "q8_gemm_tc loads 'tma'"),
    (lambda: q8_gemm(64, 256, (64,), schedule={"splits": 4}), "splits 4: K 256 has only 2 stages"),
])
def test_bad_q8_gemm_specializations_are_one_line_errors(make, message):
    with pytest.raises(ValueError, match=message) as error:
        make()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("batch", "kernel"), [(64, "q8_gemm_tc"), (32, "q8_gemv")])
def test_q8_products_above_the_gemv_rows_take_the_int8_tensor_cores(tmp_path, batch, kernel):
    """Llama-3.1-8B's first layer with its projections and lm head Q8_0: above 32 rows every q8_0
    product is one q8_gemm_tc launch over the rows as planes; at 32 rows q8_gemv as before."""
    import sys

    from click.testing import CliRunner

    from lanec.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
    from plans import q8_rows

    source = tmp_path / "model.mlir"
    result = CliRunner().invoke(main, ["import", str(ROOT / "examples" / "llama-3.1-8b.config.json"), "--layers", "1",
                                       "--batch", str(batch), "-o", str(source)])
    assert result.exit_code == 0, result.output
    source.write_text(q8_rows(source.read_text()))
    launches, buffers, tunings = lowered(str(source))
    kinds = [op.kernel.data for op in launches]
    other = "q8_gemv" if kernel == "q8_gemm_tc" else "q8_gemm_tc"
    assert kinds.count(kernel) == 3 and other not in kinds  # q k v in parts, o, the lm head
    planes = [b for b in buffers if b.role.data == "weight" and "q8_0_planes" in str(b.transforms)]
    assert len(planes) == (3 if kernel == "q8_gemm_tc" else 0)
    if kernel == "q8_gemm_tc":
        qkv = spec_of(launches[kinds.index(kernel)])
        tuned = schedule_for("q8_gemm_tc", {"rows": batch, "width": 4096, "outputs": 6144, "words": 1})
        assert qkv == {"rows": batch, "width": 4096, "parts": (4096, 1024, 1024), "words": 1, **tuned}
        whys = [o["why"] for k, _, o in tunings if k == "q8_product"]
        assert len(whys) == 3 and all("above q8_gemv's 32" in why for why in whys)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: quantize_kernel(1, 100, 1), "quantize width 100 must be whole 32-value blocks"),
    (lambda: quantize_kernel(1, 64, 3), "quantize 3 words: a quantized activation value is one or two int8 words"),
    (lambda: q8_gemv(1, 4104, (64,)), "q8_gemv width 4104 must be whole 32-value blocks"),
    (lambda: q8_gemv(1, 64, (64,), schedule={"tensor_cores": True}), "q8_gemv multiplies on CUDA cores"),
    (lambda: q8_gemv(33, 64, (64,)), "takes 1-32 rows a launch"),
    (lambda: q8_gated_gemv(17, 64, 64), "exceed the 32 sums a warp reduces"),
])
def test_bad_specializations_are_one_line_errors(make, message):
    with pytest.raises(ValueError, match=message) as error:
        make()
    assert "\n" not in str(error.value)


def test_the_tests_device_rows_are_ops_quantize():
    spec = importlib.util.spec_from_file_location("q8_inputs", ROOT / "tests" / "gpu" / "quantized_inputs.py")
    inputs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inputs)
    rng = np.random.default_rng(3)
    for rows, width in ((1, 4096), (3, 96), (5, 2080)):
        x = inputs.activation(rng, rows, width)
        for words in (1, 2):
            stored = inputs.quantized_rows(x, words)
            assert stored.shape == (rows, quantized_pitch(width, words))
            assert np.array_equal(inputs.quantized_values(stored, width, words), ops.quantize(x, words))
    # the ties block: rint breaks ties to even (-1.5 -> -2, -0.5 -> 0, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2)
    assert stored[0, 32:38].tolist() == [127, 0, 0, 2, 2, -2]


def lowered(form: str | None = None, **knobs):
    """(launches, buffers, tunings) of `form` (this file's FORM by default) fused under `knobs` and
    lowered."""
    module, where = parse_verify(form or FORM)
    fuse(module, LaneShim.of(module, **knobs), where)
    tunings: list = []
    step = next(iter(lower_module(module, tunings).ops))
    launches = [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    buffers = [op for op in step.body.block.ops if isinstance(op, lane.BufferOp)]
    return launches, buffers, tunings


@pytest.mark.parametrize("words", [1, 2])
def test_q8_form_lowers_to_quantize_and_q8_launches(words):
    # --no-fuse-quant: the example quantizes in its producers' epilogues by default (its lane.shim)
    launches, buffers, tunings = lowered(words=words, fuse_quant=False)
    kinds = [op.kernel.data for op in launches]
    assert "gemv" not in kinds and "gated_gemv" not in kinds  # every product here has q8_0 rows
    # per layer: q k v in parts, o, the gated pair (gate and up rows: two buffers), down; then the lm head
    assert kinds.count("q8_gemv") == 2 * 3 + 1 and kinds.count("q8_gated_gemv") == 2
    # before each: its activation quantized (after a norm, the attention, the gated pair)
    assert kinds.count("quantize") == 2 * 4 + 1
    for i, kind in enumerate(kinds):
        if kind.startswith("q8_"):
            assert kinds[i - 1] == "quantize"
            assert spec_of(launches[i])["words"] == spec_of(launches[i - 1])["words"] == words
    first = kinds.index("q8_gemv")
    assert spec_of(launches[first])["parts"] == (2048, 512, 512)
    q8 = [b for b in buffers if b.role.data == "weight" and "quantize_q8_0" in str(b.transforms)]
    assert len(q8) == 2 * 5 + 1 and all(str(b.result.type.element_type) == "ui8" for b in q8)
    reasons = [o["why"] for kernel, _, o in tunings if kernel == "quantize"]
    assert len(reasons) == 9 and all("quantized apart from it" in r for r in reasons)


@pytest.mark.parametrize("words", [1, 2])
def test_fused_quantize_runs_in_the_norms_epilogue_and_apart_elsewhere(words):
    launches, buffers, tunings = lowered(words=words, fuse_quant=True)
    kinds = [op.kernel.data for op in launches]
    quantized = {shape["after"]: o for kernel, shape, o in tunings if kernel == "quantize"}
    # fuse-quant put the quantize in the norms', the attentions' and the gated pairs' epilogues. The
    # attention at one request merges its chunks in its cluster, and that merge writes the quantized rows.
    # The gated pairs' CTAs own a few of a block's 32 outputs (2 by default; 4 with two words, the
    # schedule table's): their ticket epilogue measured slower than the quantize launch it would
    # replace, so the lane holds it back
    assert sorted(quantized) == ["attention", "q8_gated_gemv", "rmsnorm"]
    assert quantized["rmsnorm"]["launch"] == "epilogue" and "rmsnorm's epilogue" in quantized["rmsnorm"]["why"]
    assert quantized["attention"]["launch"] == "epilogue" and "attention's epilogue" in quantized["attention"]["why"]
    attentions = [op for op in launches if op.kernel.data == "attention"]
    assert len(attentions) == 2 and all(spec_of(op)["quantize"] == words for op in attentions)
    assert all(spec_of(op)["schedule"] == {"combine": "cluster"} for op in attentions)
    assert quantized["q8_gated_gemv"]["launch"] == "standalone"
    owned = 4 if words == 2 else 2
    assert f"its CTAs own {owned} outputs, fewer than a 32-value block" in quantized["q8_gated_gemv"]["why"]
    assert "measured 28-76% slower" in quantized["q8_gated_gemv"]["why"]
    # 2 layers x 2 norms and the final norm quantize in their epilogue, and so do the attentions: the
    # gated pairs' outputs are quantized by launches of their own
    assert kinds.count("quantize") == 2
    gated = [op for op in launches if op.kernel.data == "q8_gated_gemv"]
    assert len(gated) == 2 and all("quantize" not in spec_of(op) for op in gated)
    assert all(len(op.args) == 4 for op in gated)  # x, gate, up, out: no epilogue scratch
    norms = [op for op in launches if op.kernel.data == "rmsnorm"]
    assert len(norms) == 2 * 2 + 1 and all(spec_of(op)["quantize"] == words for op in norms)
    for i, kind in enumerate(kinds):
        if kind.startswith("q8_"):
            assert kinds[i - 1] in ("quantize", "rmsnorm", "attention")  # each writes the quantized rows
    by_name = {b.buffer_name.data: b for b in buffers}
    width = spec_of(norms[0])["width"]
    from lanec.codegen.facts import quantized_pitch

    assert str(by_name[next(n for n in by_name if n.endswith("norm.q"))].result.type) == \
        f"memref<{spec_of(norms[0])['rows']}x{quantized_pitch(width, words)}xi8>"


SILU_Q8 = """
builtin.module attributes {lane.shim = {numerics = "quantized", words = WORDS : i64, fuse_quant = true}} {
  form.step batch 3 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<3xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<3xi32>, tensor<32x64xbf16>) -> tensor<3x64xbf16>
    %s = form.silu %x : (tensor<3x64xbf16>) -> tensor<3x64xbf16>
    %q = form.product %s, %wq : (tensor<3x64xbf16>, tensor<96x64xbf16>) -> tensor<3x96xbf16>
    form.return %q : tensor<3x96xbf16>
  }
}
"""


@pytest.mark.parametrize("words", [1, 2])
def test_an_elementwise_op_read_quantized_quantizes_in_its_epilogue(words):
    """fuse-quant puts the quantize in the silu's epilogue: the elementwise launch writes the
    quantized rows q8_gemv reads, no quantize launch between them, and the tunings say so."""
    launches, buffers, tunings = lowered(SILU_Q8.replace("WORDS", str(words)))
    assert [op.kernel.data for op in launches] == ["embed", "elementwise", "q8_gemv"]
    # released at its entry: q8_gemv streams its rows before its wait (RELEASE_RULE)
    assert spec_of(launches[1]) == {"op": "silu", "rows": 3, "width": 64, "quantize": words, "release": "entry"}
    assert spec_of(launches[2])["words"] == words
    (quantized,) = [(shape, o) for kernel, shape, o in tunings if kernel == "quantize"]
    assert quantized[0]["after"] == "elementwise" and quantized[1]["launch"] == "epilogue"
    buffers = {op.buffer_name.data: op for op in buffers}
    assert str(buffers["silu.q"].result.type) == f"memref<3x{quantized_pitch(64, words)}xi8>"


@pytest.mark.parametrize(("op", "rows", "width", "words"), [("swiglu", 1, 14336, 1), ("swiglu", 3, 2048, 2),
                                                           ("add", 5, 96, 1), ("silu", 300, 14336, 2)])
def test_elementwise_quantize_epilogue_compiles_with_the_quantize_kernels_rounding(op, rows, width, words):
    from lanec.codegen.kernels.elementwise import Elementwise

    kernel = Elementwise(op, rows, width, quantize=words)
    out = kernel.params()[-1]
    assert (out.name, out.dtype, out.shape) == ("out", "int8", (rows, quantized_pitch(width, words)))
    ptx = compiled_for_sm90a(kernel).ptx
    _, after = ptx.split("griddepcontrol.wait;")
    assert after.count("cvt.rni.s32.f32") == kernel.per_thread * 8 * words
    assert "shfl.sync.bfly" in after and "cvt.rn.bf16" not in after  # the block's peak; no bf16 out


@pytest.mark.parametrize(("rows", "heads", "size", "gate", "words"), [(1, 32, 128, "swish", 1), (3, 16, 128, "sigmoid", 2),
                                                                   (2, 4, 64, None, 1)])
def test_head_norm_quantize_epilogue_compiles_with_the_quantize_kernels_rounding(rows, heads, size, gate, words):
    """A warp a head: each of its blocks is the lanes' i-th values, its peak a whole-warp butterfly,
    one byte a lane and plane, the scale by lane 0; no bf16 y."""
    from lanec.codegen.kernels.head_norm import HeadNorm

    kernel = HeadNorm(rows, heads, size, 1e-6, gate=gate, quantize=words)
    y = kernel.params()[-1]
    assert (y.name, y.dtype, y.shape) == ("y", "int8", (rows, quantized_pitch(heads * size, words)))
    ptx = compiled_for_sm90a(kernel).ptx
    _, after = ptx.split("griddepcontrol.wait;")
    blocks = size // 32  # a lane's values, one a block
    assert after.count("cvt.rni.s32.f32") == blocks * words and after.count("st.global.b8") == blocks * words
    assert after.count("div.rn.f32") >= blocks * (words + 1)
    assert after.count("shfl.sync.bfly") == 5 + 5 * blocks  # the sum of squares, then each block's peak
    assert "cvt.rn.bf16" not in after and ".local" not in ptx


def test_a_head_norm_epilogue_needs_whole_block_heads():
    from lanec.codegen.kernels.head_norm import HeadNorm

    with pytest.raises(ValueError, match="head size 48 is not whole 32-value blocks"):
        HeadNorm(1, 2, 48, 1e-6, gate="swish", quantize=1)


GATED_NORM_Q8 = """
builtin.module attributes {lane.shim = {numerics = "quantized", words = WORDS : i64, fuse_quant = true}} {
  form.step batch 2 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<2xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x256xbf16>
    %n = form.weight {name = "model.layers.0.linear_attn.norm.weight", format = "bf16"} : tensor<128xbf16>
    %wo = form.weight {name = "model.layers.0.linear_attn.out_proj.weight", format = "q8_0"} : tensor<64x256xbf16>
    %x = form.embed %t, %e : (tensor<2xi32>, tensor<32x256xbf16>) -> tensor<2x256xbf16>
    %g = form.norm_gated %x, %x, %n {heads = 2 : i64, eps = 1.0e-05 : f64, activation = "swish"} : (tensor<2x256xbf16>, tensor<2x256xbf16>, tensor<128xbf16>) -> tensor<2x256xbf16>
    %o = form.product %g, %wo : (tensor<2x256xbf16>, tensor<64x256xbf16>) -> tensor<2x64xbf16>
    form.return %o : tensor<2x64xbf16>
  }
}
"""


@pytest.mark.parametrize("words", [1, 2])
def test_a_gated_norm_read_quantized_quantizes_in_its_epilogue(words):
    """fuse-quant puts the quantize of a linear attention's gated norm (read by a q8_0 out_proj) in
    head_norm's epilogue: no quantize launch between them, and the tunings say so."""
    launches, buffers, tunings = lowered(GATED_NORM_Q8.replace("WORDS", str(words)))
    assert [op.kernel.data for op in launches] == ["embed", "head_norm", "q8_gemv"]
    assert spec_of(launches[1])["quantize"] == words and spec_of(launches[2])["words"] == words
    (quantized,) = [(shape, o) for kernel, shape, o in tunings if kernel == "quantize"]
    assert quantized[0]["after"] == "head_norm" and quantized[1]["launch"] == "epilogue"
    buffers = {op.buffer_name.data: op for op in buffers}
    assert str(buffers["norm_gated.q"].result.type) == f"memref<2x{quantized_pitch(256, words)}xi8>"


def test_a_kda_with_q8_0_decay_rows_keeps_kda_split_with_them_widened(tmp_path):
    """KdaSplit reads the decay's up-projection f_b as bf16 rows: a KDA layer whose projections are
    Q8_0 rows keeps its one KdaSplit launch, f_b widened to bf16 at load (`lanec explain` says
    so), and its other products read int8 on q8_gemv; under fuse-quant KdaSplit writes its output
    quantized (no quantize launch before the o_proj)."""
    import sys

    from click.testing import CliRunner

    from lanec.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
    from plans import q8_rows

    source = tmp_path / "kda.mlir"
    config = Path(__file__).resolve().parents[1] / "examples" / "kimi-linear-48b-a3b.config.json"
    result = CliRunner().invoke(main, ["import", str(config), "--layers", "1", "--kda-only", "--dense-mlp", "9216",
                                       "-o", str(source)])
    assert result.exit_code == 0, result.output
    source.write_text(q8_rows(source.read_text()))
    for fused in (False, True):
        module, where = parse_verify(source)
        fuse(module, LaneShim.of(module, words=2, fuse_quant=fused), where)
        tunings: list = []
        step = next(iter(lower_module(module, tunings).ops))
        launches = [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
        kinds = [op.kernel.data for op in launches]
        assert kinds.count("kda_split") == 1 and "q8_gemv" in kinds
        (widened,) = [(shape, o) for kernel, shape, o in tunings if kernel == "widen"]
        assert widened[0] == {"weight": "model.layers.0.self_attn.f_b_proj.weight", "format": "q8_0", "by": "kda"}
        # fuse-quant: KdaSplit writes the quantized rows its o_proj reads (a warp a block of a head)
        at = kinds.index("kda_split")
        assert kinds[at + 1] == ("q8_gemv" if fused else "quantize")
        assert spec_of(launches[at]).get("quantize") == (2 if fused else None)


def test_widened_q8_0_rows_are_the_blocks_values():
    """`q8_0_values` (a weight binding's transform): what the quantized blocks stand for, ops.q8_0's
    values bit for bit, an all-zero block staying zero."""
    from lanec.runtime.weights import q8_0_values

    rng = np.random.default_rng()
    w = rng.standard_normal((7, 96)).astype(np.float32) * rng.uniform(0.01, 10, (7, 1)).astype(np.float32)
    w[3, 32:64] = 0.0
    assert np.array_equal(q8_0_values(w), ops.q8_0(w))
    assert not np.array_equal(q8_0_values(w), w)  # the blocks' rounding shows


@pytest.mark.parametrize("family", ["kimi", "deepseek-v3"])
def test_q8_0_rows_no_kernel_reads_as_blocks_are_widened_at_load(tmp_path, family):
    """Every projection Q8_0 (the experts' and the latent attention's kv_b too): the form compiles;
    the mixture's and the latent attention's rows are widened to bf16 at load (`q8_0_values`, each
    named in the tunings `lanec explain` prints), the other products read int8 on q8_gemv."""
    import sys

    from click.testing import CliRunner

    from lanec.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
    from plans import q8_rows

    examples = Path(__file__).resolve().parents[1] / "examples"
    config = examples / ("kimi-linear-48b-a3b.config.json" if family == "kimi" else "deepseek-v3.config.json")
    source = tmp_path / "model.mlir"
    result = CliRunner().invoke(main, ["import", str(config), "--layers", "4", "--batch", "2", "-o", str(source)])
    assert result.exit_code == 0, result.output
    source.write_text(q8_rows(source.read_text(), experts=True))
    module, where = parse_verify(source)
    fuse(module, LaneShim.of(module), where)
    tunings: list = []
    step = next(iter(lower_module(module, tunings).ops))
    widened = {shape["weight"]: (shape["by"], o["why"]) for kernel, shape, o in tunings if kernel == "widen"}
    assert any(by == "latent_attention" and name.endswith("kv_b_proj.weight") for name, (by, _) in widened.items())
    assert any(by == "mixture" and ".experts.*." in name for name, (by, _) in widened.items())
    assert all("widened to bf16 at load" in why for _, why in widened.values())
    buffers = [op for op in step.body.block.ops if isinstance(op, lane.BufferOp) and op.role.data == "weight"]
    kinds = {b.buffer_name.data: [t.data["kind"].data for t in b.transforms.data] for b in buffers}
    for name, steps in kinds.items():  # q8_0 rows are either blocks (q8_gemv) or widened values, never raw
        if any(w in name for w in widened):
            assert steps[0] == "q8_0_values" and "quantize_q8_0" not in steps, name
    kernels = [op.kernel.data for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    assert "q8_gemv" in kernels and "latent_attention" in kernels and "mixture_gated" in kernels


def gated_gemv(*args, **kwargs):
    from lanec.codegen.kernels.gated_gemv import GatedGemv

    return GatedGemv(*args, **kwargs)


@pytest.mark.parametrize(("make", "sharing"), [
    (lambda: gated_gemv(1, 2304, 1024, quantize=1), True),
    (lambda: gated_gemv(5, 2048, 1056, quantize=2, schedule={"tensor_cores": True, "rows_per_cta": 32}), False),
    (lambda: q8_gated_gemv(1, 4096, 14336, words=2, quantize=1), True),
], ids=["cuda_cores_16_ctas_a_block", "tensor_cores_whole_blocks", "q8_gated"])
def test_gated_quantize_epilogue_compiles_with_a_ticket_where_ctas_share_a_block(make, sharing):
    """CTAs of fewer units than a block stage their fp32 values and draw the block's ticket (one
    atom.inc); a CTA of whole blocks quantizes its own; either way one byte a lane and plane, no
    bf16 out."""
    kernel = make()
    names = [p.name for p in kernel.params()]
    assert names[-3:] == ["out", "staged", "block_tickets"] and kernel.params()[-3].dtype == "int8"
    ptx = compiled_for_sm90a(kernel).ptx
    _, after = ptx.split("griddepcontrol.wait;")
    assert after.count("atom.global.inc.u32") == (1 if sharing else 0)
    assert after.count("st.global.b8") == kernel.quantize and after.count("cvt.rni.s32.f32") == kernel.quantize
    assert "cvt.rn.bf16" not in after.split("ex2.approx")[-1] and ".local" not in ptx


def test_a_gated_quantize_epilogue_needs_ctas_that_divide_a_block():
    with pytest.raises(ValueError, match="a CTA's 3 output rows neither divide a 32-value block nor are whole"):
        gated_gemv(1, 2304, 1024, quantize=1, schedule={"rows_per_cta": 3})


@pytest.mark.parametrize("make", [
    lambda: __import__("lanec.codegen.kernels.gemv", fromlist=["Gemv"]).Gemv(1, 2304, (1024,), quantize=1),
    lambda: q8_gemv(3, 4096, (4096,), words=2, quantize=2),
], ids=["gemv", "q8_gemv"])
def test_a_gemv_quantizes_its_output_in_the_epilogue_it_shares_with_the_gated_pair(make):
    """The four-rows-a-warp GEMV (one part of whole blocks): RowProducts' quantize epilogue, a
    ticket a block where its CTAs share one; its y is the quantized form."""
    kernel = make()
    params = kernel.params()
    assert [p.name for p in params][-3:] == ["y", "staged", "block_tickets"] and params[-3].dtype == "int8"
    ptx = compiled_for_sm90a(kernel).ptx
    _, after = ptx.split("griddepcontrol.wait;")
    assert after.count("atom.global.inc.u32") == 1 and after.count("st.global.b8") == kernel.quantize
    assert ".local" not in ptx


def test_a_gemv_epilogue_refuses_what_shares_its_output():
    from lanec.codegen.kernels.gemv import Gemv

    with pytest.raises(ValueError, match="no argmax, norm prologue, per-head read or parts beside it"):
        Gemv(1, 2304, (1024, 1024), quantize=1)


LORA_Q8 = """
builtin.module attributes {lane.shim = {numerics = "quantized", words = WORDS : i64, fuse_quant = true}} {
  form.step batch 2 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<2xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x256xbf16>
    %wa = form.weight {name = "model.layers.0.self_attn.q_a_proj.weight", format = "q8_0"} : tensor<128x256xbf16>
    %wb = form.weight {name = "model.layers.0.self_attn.q_b_proj.weight", format = "q8_0"} : tensor<512x128xbf16>
    %x = form.embed %t, %e : (tensor<2xi32>, tensor<32x256xbf16>) -> tensor<2x256xbf16>
    %a = form.product %x, %wa : (tensor<2x256xbf16>, tensor<128x256xbf16>) -> tensor<2x128xbf16>
    %b = form.product %a, %wb : (tensor<2x128xbf16>, tensor<512x128xbf16>) -> tensor<2x512xbf16>
    form.return %b : tensor<2x512xbf16>
  }
}
"""


@pytest.mark.parametrize("words", [1, 2])
def test_a_product_whose_ctas_share_a_block_leaves_the_quantize_to_its_own_launch(words):
    """A LoRA pair by q8_0 rows: fuse-quant puts the quantize of the first product's rows in its
    q8_gemv's epilogue, and the lowering holds it back: the launch's CTAs own 2 outputs, so they
    would stage their sums and draw a ticket a block (measured slower than the standalone quantize,
    bench/q8.py). A quantize launch sits between the two products, and the tunings say why."""
    launches, _, tunings = lowered(LORA_Q8.replace("WORDS", str(words)))
    assert [op.kernel.data for op in launches] == ["embed", "quantize", "q8_gemv", "quantize", "q8_gemv"]
    assert all("quantize" not in spec_of(launches[i]) for i in (2, 4)) and len(launches[2].args) == 3
    (held,) = [o for kernel, shape, o in tunings if kernel == "quantize" and shape["after"] == "q8_gemv"]
    assert held["launch"] == "standalone" and "fewer than a 32-value block" in held["why"]


@pytest.mark.parametrize(("tokens", "words"), [(1, 1), (2, 2)])
def test_kda_split_quantize_epilogue_compiles_a_block_a_warp(tokens, words):
    """KdaSplit's output in the quantized form: a main warp's 32 channels are one block (its peak a
    whole-warp butterfly), one byte a lane and plane, in the output norm and the padding rows."""
    from lanec.codegen.kernels.kda_split import KdaSplit

    kernel = KdaSplit(32, 3, tokens=tokens, quantize=words)
    output = next(p for p in kernel.params() if p.name == "output")
    assert (output.dtype, output.shape) == ("int8", (3 * tokens, quantized_pitch(32 * 128, words)))
    ptx = compiled_for_sm90a(kernel).ptx
    # the padding rows' zeros and the output norm's values, each token's, each plane
    assert ptx.count("st.global.b8") == 2 * tokens * words and ".local" not in ptx
    assert "cvt.rn.bf16" not in ptx.split("rsqrt")[-1]


def test_the_q8_bench_times_an_epilogue_only_beside_its_product(monkeypatch):
    monkeypatch.setenv("LANEC_Q8_PRODUCTS", "kimi kda merged,o proj")
    bench = load_bench("q8", monkeypatch)
    # a subset without the gate+up pair keeps only the o proj's epilogue: its table compares each
    # epilogue launch with the plain product timed in the same run
    assert [label for label, _, _ in bench.PRODUCTS] == ["o proj", "kimi kda merged"]
    assert [label for label, _, _ in bench.EPILOGUE_PRODUCTS] == ["o proj"]


def test_the_q8_bench_floor_set_fits_each_sides_launch_floor(monkeypatch):
    monkeypatch.setenv("LANEC_Q8_SET", "floor")
    bench = load_bench("q8", monkeypatch)
    assert bench.OUT.name == "q8-floor" and bench.ROWS == [1] and bench.WORDS == [1]
    assert bench.SCHEDULES == [{"warps": 8, "rows_per_cta": 2}, {"warps": 9, "rows_per_cta": 2}, {"warps": 9, "rows_per_cta": 4}]
    assert {k for _, k, _ in bench.PRODUCTS} == {2304} and len(bench.PRODUCTS) >= 5
    results = []
    for _, k, n in bench.PRODUCTS:  # q8_gemv: 1.8 us a launch at 3.6 TB/s; ours and torch's bf16 as given
        shape = {"k": k, "n": n, "rows": 1, "words": 1, "gated": False}
        results.append(({**shape, "kind": "q8", "default": True, "schedule": "8w x 2r"},
                        1.8 + bench.q8_bytes(k, n) / 3.6e6, 0, None))
        results.append(({**shape, "kind": "q8", "default": False, "schedule": "9w x 4r"},  # a fit of its own
                        1.2 + bench.q8_bytes(k, n) / 4.2e6, 0, None))
        bf16 = 2 * k * n
        results.append(({**shape, "kind": "bf16", "default": True}, 1.5 + bf16 / 4.0e6, 0, 2.0 + bf16 / 3.2e6))
    lines = bench.floor_lines(results, copy_tbs=4.0).split("\n")
    assert lines[0].startswith("q8_gemv 8w x 2r: a launch costs 1.80 us + its bytes at 3.60 TB/s (90% of copy)")
    assert lines[1].startswith("q8_gemv 9w x 4r: a launch costs 1.20 us + its bytes at 4.20 TB/s (105% of copy)")
    assert lines[2].startswith("bf16 gemv: a launch costs 1.50 us + its bytes at 4.00 TB/s (100% of copy)")
    assert lines[3].startswith("torch bf16: a launch costs 2.00 us + its bytes at 3.20 TB/s (80% of copy)")
    # 30 MB at 4 TB/s is 7.5 us; q8's fit takes 1.8 + 30 / 3.6 = 10.13 us: 74% of the copy bandwidth
    assert "30 MB 74%" in lines[0]


def test_q8_products_default_to_the_warps_that_fill_a_rows_last_step(monkeypatch):
    import lanec.codegen.kernels.q8_gemv as q8

    # quarter blocks a row (width / 8), a thread each: 9 warps where 8 leave a mostly idle last step,
    # and 4 rows a CTA where 9 warps take a row in one step
    monkeypatch.setattr(q8, "Q8_ONE_STEP_ROWS_PER_CTA", 4)
    assert {w: q8.q8_default_schedule(1, w, 1) for w in (128, 2048, 2080, 2304, 4096, 9216, 14336)} == {
        128: {"warps": 8}, 2048: {"warps": 8}, 2080: {"warps": 9, "rows_per_cta": 4},
        2304: {"warps": 9, "rows_per_cta": 4}, 4096: {"warps": 8}, 9216: {"warps": 9}, 14336: {"warps": 8}}
    kernel = q8_gemv(1, 2304, (163840,))  # Kimi Linear's lm head: one step of 288 threads
    assert (kernel.warps, kernel.steps, kernel.launch().block[0]) == (9, 1, 288)
    assert q8_gemv(1, 2304, (64,), schedule={"warps": 8}).warps == 8  # a schedule's warps stay
    # the one-step rows a CTA: only one-step rows at 9 warps, within a warp's sums
    assert q8.q8_default_schedule(1, 2304, 2) == {"warps": 9, "rows_per_cta": 4}
    assert q8.q8_default_schedule(3, 2304, 2) == {"warps": 9, "rows_per_cta": 4}  # 4 x 2 x 4 = 32 sums
    assert q8.q8_default_schedule(5, 2304, 2) == {"warps": 9}  # 4 x 2 x 8 = 64: RowProducts' choice
    assert q8.q8_default_schedule(1, 9216, 1) == {"warps": 9}  # four steps
    assert q8_gemv(3, 2304, (1000,), words=2).rows_per_cta == 4
    monkeypatch.setattr(q8, "Q8_ONE_STEP_ROWS_PER_CTA", None)  # off: RowProducts' choice
    assert q8.q8_default_schedule(1, 2304, 2) == {"warps": 9}
