"""The lowering to the lane on the shipped KDA-only example: one KdaSplit launch per KDA layer
with its cluster, PDL and tuned schedule, the product in parts read in place, and rows beyond a
GEMV's split into launches."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lanec.cli import main as cli
from lanec.codegen.facts import GEMM_FROM_ROWS
from lanec.codegen.lower import lower_module
from lanec.codegen.schedules import kda_schedule, schedule_for
from lanec.codegen.spec import spec_of
from lanec.dialects import lane
from lanec.pipeline import fuse, parse_verify
from lanec.runtime.plan import Plan
from lanec.shim import LaneShim

ROOT = Path(__file__).resolve().parents[1]


def launches(source: Path, tunings: list | None = None, shim: LaneShim | None = None):
    module, where = parse_verify(source)
    fuse(module, shim or LaneShim(), where)
    lowered = lower_module(module, tunings=tunings)
    lowered.verify()
    step = next(iter(lowered.ops))
    return [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]


@pytest.fixture(scope="module")
def kda_launches():
    return launches(ROOT / "examples" / "kimi-linear-kda.mlir")


def test_one_kda_split_launch_per_kda_layer_with_cluster_pdl_and_the_tuned_schedule(kda_launches):
    kda = [op for op in kda_launches if op.kernel.data == "kda_split"]
    text = (ROOT / "examples" / "kimi-linear-kda.mlir").read_text()
    assert len(kda) == text.count("form.delta_rule") == 3
    for op in kda:
        spec = spec_of(op)
        assert tuple(op.cluster.get_values()) == (8, 1, 1)  # the seed's batch-1 cluster
        assert tuple(op.grid.get_values()) == (8, 32, 1)
        assert bool(op.pdl.value.data)
        tuned = schedule_for("kda_split", {"heads": 32, "batch": 1, "tokens": 1})
        # every knob recorded by name: the table's over the shape's defaults
        assert spec["schedule"] == kda_schedule(32, 1, tuned).as_dict() and spec["schedule"]["early"] == 1
        assert spec["schedule"]["release_at_entry"] and spec["schedule"]["cluster"] == 8
        assert spec["gate_form"] == "softplus"
        # q, k, v, f_a and beta are parts of one product in parts, read in place at its pitch
        assert spec["x_pitch"] == spec["raw_gate_pitch"] == spec["beta_pitch"] == 3 * 4096 + 128 + 32 + 128


def test_the_kda_layer_is_three_launches_its_norm_in_the_first(kda_launches):
    kinds = [op.kernel.data for op in kda_launches]
    first = kinds.index("kda_split")
    # the GEMV in parts (q k v f_a b g_a) with the layer's norm in its prologue (fold-norm-into-gemv), KdaSplit
    # (g_b's product in its gate warps at one row), o_proj's GEMV
    assert kinds[first - 1: first + 2] == ["gemv", "kda_split", "gemv"]
    merged = spec_of(kda_launches[first - 1])
    assert merged["parts"] == (4096, 4096, 4096, 128, 32, 128) and merged["norm"] is True
    # without the fold the norm is a launch of its own before it
    plain = [op.kernel.data for op in launches(ROOT / "examples" / "kimi-linear-kda.mlir",
                                                shim=LaneShim(fold_norms=False))]
    first = plain.index("kda_split")
    assert plain[first - 2: first + 2] == ["rmsnorm", "gemv", "kda_split", "gemv"]


def test_at_one_row_the_output_gate_product_runs_in_kda_split():
    """By default at one row (fold-gate-product): g_b's GEMV is gone, KdaSplit reads g_a in place (the
    merged product's sixth part) and g_b's weight rows; with --no-fold-gate g_b keeps its launch."""
    module, where = parse_verify(ROOT / "examples" / "kimi-linear-kda.mlir")
    fuse(module, LaneShim(fold_gate=False), where)
    lowered = lower_module(module)
    step = next(iter(lowered.ops))
    plain = [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    folded = launches(ROOT / "examples" / "kimi-linear-kda.mlir")
    assert len(folded) == len(plain) - 3  # one g_b GEMV a KDA layer
    kinds = [op.kernel.data for op in folded]
    first = kinds.index("kda_split")
    assert kinds[first - 1: first + 2] == ["gemv", "kda_split", "gemv"]
    spec = spec_of(folded[first])
    pitch = 3 * 4096 + 128 + 32 + 128
    assert spec["gate_rank"] == 128 and spec["gate_pitch"] == pitch
    assert all("gate_rank" not in spec_of(op) for op in plain if op.kernel.data == "kda_split")


def kda_layer_launches(tmp_path, batch: int, tunings: list | None = None) -> list:
    """The launches of one KDA layer of Kimi Linear (a dense MLP in place of its mixture) at `batch`."""
    from click.testing import CliRunner

    from lanec.cli import main

    out = tmp_path / f"b{batch}.mlir"
    result = CliRunner().invoke(main, ["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"),
                                       "--kda-only", "--dense-mlp", "9216", "--layers", "1", "--batch", str(batch),
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    return launches(out, tunings)


def test_rows_beyond_a_gemv_run_as_one_gemm_tc_launch(tmp_path):
    ops = kda_layer_launches(tmp_path, 64)
    products = [op for op in ops if op.kernel.data in ("gemv", "gemm_tc")]
    # every product of the 64 rows reads its weight once: one gemm_tc launch each, no 32-row gemv
    assert products and all(op.kernel.data == "gemm_tc" for op in products)
    o_proj = [spec_of(op) for op in products if spec_of(op)["parts"] == (2304,) and spec_of(op)["width"] == 4096]
    assert [spec["rows"] for spec in o_proj] == [64]
    # the KDA layer's q, k, v, f_a, b and g_a: one gemm_tc launch in parts, side by side
    merged = [spec_of(op) for op in products if len(spec_of(op)["parts"]) > 1]
    assert [(spec["rows"], spec["parts"]) for spec in merged] == [(64, (4096, 4096, 4096, 128, 32, 128))]
    # the dense MLP's gated pair: one gemm_tc launch, gate and up tiles side by side, SwiGLU in its
    # epilogue (no swiglu launch); its weight is gate and up interleaved in tiles of 64 rows
    kinds = [op.kernel.data for op in ops]
    assert "gated_gemv" not in kinds and not any(spec_of(op).get("op") == "swiglu" for op in ops)
    pairs = [op for op in ops if spec_of(op).get("gated")]
    assert [(spec_of(op)["parts"], spec_of(op)["rows"]) for op in pairs] == [((18432,), 64)]
    kda = [op for op in ops if op.kernel.data == "kda_split"]
    assert len(kda) == 1 and spec_of(kda[0])["batch"] == 64


@pytest.mark.parametrize("batch", [GEMM_FROM_ROWS - 1, GEMM_FROM_ROWS])
def test_products_take_gemm_tc_from_the_measured_rows(tmp_path, batch):
    """Below GEMM_FROM_ROWS a KDA layer's products are gemv launches (the gated pair gated_gemv);
    from it, gemm_tc launches (the gated pair too), though the rules still fuse them as a decode
    step's (GEMV_ROWS)."""
    ops = kda_layer_launches(tmp_path, batch)
    kinds = [op.kernel.data for op in ops]
    tensor_cores = batch >= GEMM_FROM_ROWS
    assert ("gemm_tc" in kinds) == tensor_cores and ("gemv" in kinds) != tensor_cores
    assert ("gated_gemv" in kinds) != tensor_cores
    first = kinds.index("kda_split")
    assert spec_of(ops[first - 2])["parts"] == (4096, 4096, 4096, 128, 32, 128)  # the merged product in parts


def test_below_the_measured_rows_a_shape_takes_gemm_tc_where_the_table_has_its_entry(tmp_path, monkeypatch):
    """At 8 rows (below GEMM_FROM_ROWS) the o proj's shape has a gemm_tc entry in the schedule
    table (bench/gemm.py writes one only where gemm_tc beat gemv there): that product is a gemm_tc
    launch under the entry's schedule, the others stay gemv launches (the gated pair gated_gemv),
    and the tunings say why."""
    from lanec.codegen import schedules

    held = schedules.table()
    entry = {"schedule": {"splits": 8, "loads": "producer"}, "us": 7.0}
    others = {key: value for key, value in held.get("gemm_tc", {}).items() if "rows=8," not in key}
    monkeypatch.setattr(schedules, "table", lambda: {**held, "gemm_tc": {
        **others, "outputs=2304,rows=8,width=4096": entry, "outputs=9216,rows=8,width=2304": entry}})
    found: list = []
    ops = kda_layer_launches(tmp_path, 8, found)
    by_kernel = {(op.kernel.data, spec_of(op).get("width"), tuple(spec_of(op).get("parts", ()))) for op in ops}
    assert ("gemm_tc", 4096, (2304,)) in by_kernel and ("gemv", 4096, (2304,)) not in by_kernel
    assert ("gemv", 2304, (4096, 4096, 4096, 128, 32, 128)) in by_kernel  # no entry: the merged product stays
    # the dense pair: an entry for a product of its hidden rows does not split it below GEMM_FROM_ROWS
    # (only a gated entry of its own would move it): one gated_gemv launch, no swiglu launch
    kinds = [op.kernel.data for op in ops]
    assert kinds.count("gated_gemv") == 1 and not any(spec_of(op).get("op") == "swiglu" for op in ops)
    o_proj = next(spec_of(op) for op in ops if op.kernel.data == "gemm_tc")
    assert o_proj["rows"] == 8 and o_proj["schedule"]["splits"] == 8 and o_proj["schedule"]["loads"] == "producer"
    why = [o for kernel, shape, o in found if kernel == "product"]
    assert why and why[0]["kernel"] == "gemm_tc" and "bench/gemm.py measured it faster" in why[0]["why"]


def test_stream_k_launches_share_the_plans_one_workspace(tmp_path, monkeypatch):
    """Where the table's entry is stream-K, the launch binds windows of one workspace (a fp32 slot
    and a flag for each of SM_COUNT CTAs), made at the first such launch and shared by the rest."""
    from lanec.codegen import schedules
    from lanec.codegen.facts import GEMM_STREAM_SLOT, SM_COUNT

    held = schedules.table()
    stream = {"schedule": {"stream": SM_COUNT}, "us": 10.0}
    monkeypatch.setattr(schedules, "table", lambda: {**held, "gemm_tc": {
        **held.get("gemm_tc", {}), "outputs=2304,rows=64,width=4096": stream,
        "outputs=12576,rows=64,width=2304": stream}})
    ops = kda_layer_launches(tmp_path, 64)
    streamed = [op for op in ops if op.kernel.data == "gemm_tc" and spec_of(op).get("schedule", {}).get("stream") == SM_COUNT]
    assert len(streamed) == 2 and tuple(streamed[0].grid.get_values()) == (SM_COUNT, 1, 1)

    def buffer_of(value):
        op = value.owner
        return (op.base.owner if isinstance(op, lane.ViewOp) else op).buffer_name.data

    assert {(buffer_of(op.args[3]), buffer_of(op.args[4])) for op in streamed} == {("gemm_tc.partials", "gemm_tc.flags")}
    made = {op.buffer_name.data: op for op in ops[0].parent_block().ops if isinstance(op, lane.BufferOp)}
    assert [name for name in made if name.startswith("gemm_tc.")] == ["gemm_tc.partials", "gemm_tc.flags"]
    assert made["gemm_tc.partials"].result.type.get_shape() == (SM_COUNT, GEMM_STREAM_SLOT)


def test_rows_beyond_a_gemm_tc_launch_are_split_into_launches_of_256(tmp_path):
    ops = kda_layer_launches(tmp_path, 300)
    o_proj = [spec_of(op) for op in ops if op.kernel.data == "gemm_tc" and spec_of(op)["parts"] == (2304,)
              and spec_of(op)["width"] == 4096]
    assert [spec["rows"] for spec in o_proj] == [256, 44]


def test_the_whole_kimi_example_lowers_its_latent_attention_absorbed():
    ops = launches(ROOT / "examples" / "kimi-linear-small.mlir")
    kinds = [op.kernel.data for op in ops]
    at = kinds.index("latent_attention")
    # absorb (a per-head gemv by kv_b's key half), the attention over the latent cache (split:
    # the combine), expand (a per-head gemv by kv_b's value half)
    assert kinds[at - 1: at + 3] == ["gemv", "latent_attention", "attention_combine", "gemv"]
    absorb, attend, expand = spec_of(ops[at - 1]), spec_of(ops[at]), spec_of(ops[at + 2])
    assert absorb["per_head"] == (32, 192, 0) and absorb["width"] == 128 and absorb["parts"] == (32 * 512,)
    assert expand["per_head"] == (32, 512, 0) and expand["width"] == 512 and expand["parts"] == (32 * 128,)
    assert (attend["heads"], attend["lora"], attend["rope"], attend["nope"]) == (32, 512, 64, 128)
    assert attend["splits"] > 1 and bool(ops[at].pdl.value.data)


def test_a_raised_latent_cluster_fact_merges_the_chunks_in_the_attentions_cluster(tmp_path, monkeypatch):
    """LATENT_CLUSTER_COMBINE_CTAS is 0 (measured slower at batch 1); raised, the example's latent attention
    over 1k keys (16 pages of 64: 8 chunks of one block, where blocks of fewer rows cost more: `latent_cut`'s
    fitted times raised) runs on the wgmma engine with combine "cluster" and no attention_combine launch, and
    `explain`'s reason says so."""
    import lanec.codegen.lower as lowering
    import lanec.shim as shim

    monkeypatch.setattr(shim, "LATENT_BLOCK_US", {**shim.LATENT_BLOCK_US, 8: 1e3, 16: 1e3})
    monkeypatch.setattr(lowering, "LATENT_COMBINE_IN_GEMV", False)  # else the value gemv merges the 8 chunks

    source = tmp_path / "kimi-1k.mlir"
    source.write_text((ROOT / "examples" / "kimi-linear-small.mlir").read_text()
                      .replace("tensor<1x64xi32>", "tensor<1x16xi32>"))
    kinds = [op.kernel.data for op in launches(source)]
    assert kinds.count("attention_combine") == 1  # the fact at 0: the combine launch stays
    monkeypatch.setattr(shim, "LATENT_CLUSTER_COMBINE_CTAS", 8)
    tunings: list = []
    ops = launches(source, tunings)
    kinds = [op.kernel.data for op in ops]
    attend = spec_of(ops[kinds.index("latent_attention")])
    assert "attention_combine" not in kinds and attend["splits"] == 8
    assert attend["schedule"] == {"engine": "wgmma", "combine": "cluster"}
    why = next(o["why"] for kernel, _, o in tunings if kernel == "latent_attention")
    assert "the chunks meet in the launch's cluster: at most 8 CTAs" in why


def test_latent_partials_in_bf16_reach_the_attention_the_combine_and_the_plan(tmp_path, monkeypatch):
    """LATENT_PARTIALS is bf16 (measured faster on every split MLA row): the example's split latent attention,
    the combine's spec, their shared buffer and `explain`'s reason carry it, and the plan compiles (the kernels'
    params agree on the element). Set to fp32, neither launch has the knob."""
    from click.testing import CliRunner

    import lanec.codegen.lower as lowering
    from lanec.cli import main

    source = ROOT / "examples" / "kimi-linear-small.mlir"
    tunings: list = []
    ops = launches(source, tunings)
    kinds = [op.kernel.data for op in ops]
    attend, combine = ops[kinds.index("latent_attention")], ops[kinds.index("attention_combine")]
    assert spec_of(attend)["schedule"]["partials"] == "bfloat16" and spec_of(combine)["partials"] == "bfloat16"
    assert attend.args[-2] == combine.args[0]  # the partial rows the attention writes, the combine reads
    why = next(o["why"] for kernel, _, o in tunings if kernel == "latent_attention")
    assert why.endswith("its chunks' rows bfloat16 (LATENT_PARTIALS)")
    result = CliRunner().invoke(main, ["compile", str(source), "-o", str(tmp_path / "bf16.plan")])
    assert result.exit_code == 0, result.output
    buffers = {b.name: b for b in Plan.read(tmp_path / "bf16.plan").buffers}
    assert buffers["latent_attention.partial"].dtype == "bfloat16"
    monkeypatch.setattr(lowering, "LATENT_PARTIALS", "float32")
    ops = launches(source)
    kinds = [op.kernel.data for op in ops]
    assert "partials" not in spec_of(ops[kinds.index("latent_attention")]).get("schedule", {})
    assert "partials" not in spec_of(ops[kinds.index("attention_combine")])


def test_a_short_latent_attention_is_cut_into_blocks_of_fewer_rows(tmp_path, monkeypatch):
    """`latent_cut` at the real-size Kimi Linear step's 1k keys (the example's 32 heads, 16 pages of 64): 16 chunks
    of 8-row blocks, a launch of 16 x 4 CTAs whose schedule names block_rows 8 and whose value gemv merges 16 chunks,
    `explain` saying why with the fitted times; at 32k keys the rule's chunks of one block stay; a schedule table
    entry for the shape replaces the cut."""
    source = tmp_path / "kimi-1k.mlir"
    source.write_text((ROOT / "examples" / "kimi-linear-small.mlir").read_text()
                      .replace("tensor<1x64xi32>", "tensor<1x16xi32>"))
    tunings: list = []
    ops = launches(source, tunings)
    kinds = [op.kernel.data for op in ops]
    at = kinds.index("latent_attention")
    attend, merged = ops[at], ops[at + 1]  # the value gemv merges the chunks (LATENT_COMBINE_IN_GEMV)
    assert spec_of(attend)["splits"] == 16 and spec_of(attend)["schedule"]["block_rows"] == 8
    assert tuple(attend.grid.get_values()) == (16, 4, 1) and spec_of(merged)["combine_splits"] == 16
    why = next(o["why"] for kernel, _, o in tunings if kernel == "latent_attention")
    assert why.startswith("4 blocks of 8 query rows (block_rows 8) x 16 chunks of 64 keys, 64 CTAs")
    assert "head blocks" in why
    longer = tmp_path / "kimi-32k.mlir"
    longer.write_text((ROOT / "examples" / "kimi-linear-small.mlir").read_text()
                      .replace("tensor<1x64xi32>", "tensor<1x512xi32>"))  # 32k keys
    long = launches(longer)
    assert "block_rows" not in spec_of(long[[op.kernel.data for op in long].index("latent_attention")]).get(
        "schedule", {})
    from lanec.codegen import schedules

    shape = {"batch": 1, "context": 1024, "heads": 32, "lora": 512, "rope": 64, "tokens": 1}
    monkeypatch.setitem(schedules.table(), "latent_attention",
                        {schedules.key(shape): {"schedule": {"block_rows": 16}, "splits": 4, "us": 0.0}})
    tunings = []
    ops = launches(source, tunings)
    attend = ops[[op.kernel.data for op in ops].index("latent_attention")]
    assert spec_of(attend)["splits"] == 4 and spec_of(attend)["schedule"]["block_rows"] == 16
    assert "the schedule table's entry" in next(o["why"] for kernel, _, o in tunings if kernel == "latent_attention")


@pytest.mark.parametrize("folded", [True, False])
def test_the_norm_after_a_grouped_mixture_sums_its_slots(tmp_path, monkeypatch, folded):
    """MIXTURE_SUM_IN_NORM: the grouped path's mixture_sum is folded into the rmsnorm after it, which reads
    the partial rows as x (the slots summed first) and the residual stream as its residual; off, mixture_sum
    writes the result the norm reads. The sum h = x + residual is the same either way round."""
    import lanec.codegen.lower as lowering

    monkeypatch.setattr(lowering, "MIXTURE_SUM_IN_NORM", folded)
    source = tmp_path / "kimi-b64.mlir"
    cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "4", "--batch", "64",
         "-o", str(source)], standalone_mode=False)
    tunings: list = []
    ops = launches(source, tunings)
    kinds = [op.kernel.data for op in ops]
    downs = [i for i, kind in enumerate(kinds) if kind == "mixture_grouped_down"]
    assert len(downs) == 3  # layers 1-3 are the mixture's (layer 0 is dense)
    assert kinds.count("mixture_sum") == (0 if folded else 3)
    for i in downs:
        after = ops[i + 1]
        if not folded:
            assert after.kernel.data == "mixture_sum"
            continue
        assert after.kernel.data == "rmsnorm" and spec_of(after)["slots"] == 9 and spec_of(after)["residual"]
        assert after.args[0] == ops[i].args[-1]  # x: the partial rows the down launch wrote
    reasons = [o["why"] for kernel, _, o in tunings if kernel == "mixture_sum"]
    assert len(reasons) == (3 if folded else 0) and all("sums its slots where it reads x" in r for r in reasons)


def test_kv_b_halves_are_recorded_transforms_that_the_runtime_applies():
    import numpy as np

    from lanec.runtime.plan import Transform
    from lanec.runtime.weights import apply

    heads, nope, v, lora = 3, 4, 5, 8
    kv_b = np.arange(heads * (nope + v) * lora, dtype=np.float32).reshape(heads * (nope + v), lora)
    halves = Transform("reshape", {"shape": [heads, nope + v, lora]})
    key = kv_b
    for t in (halves, Transform("slice", {"axis": 1, "start": 0, "stop": nope}),
              Transform("transpose", {"axes": [0, 2, 1]}), Transform("reshape", {"shape": [heads * lora, nope]})):
        key = apply(t, [key])
    value = kv_b
    for t in (halves, Transform("slice", {"axis": 1, "start": nope, "stop": nope + v}),
              Transform("reshape", {"shape": [heads * v, lora]})):
        value = apply(t, [value])
    for h in range(heads):
        rows = kv_b[h * (nope + v): (h + 1) * (nope + v)]
        assert np.array_equal(key[h * lora: (h + 1) * lora], rows[:nope].T)
        assert np.array_equal(value[h * v: (h + 1) * v], rows[nope:])


def test_an_expanded_latent_attention_compiles_to_its_two_launches(tmp_path):
    import json

    from click.testing import CliRunner

    from lanec.cli import main

    # a nope part of 48 makes each head's query unit 112: not whole 32-value blocks, so
    # hold-per-head-part runs it expanded: latent_expand, then expanded_attention (keys padded to 128)
    config = json.loads((ROOT / "examples" / "kimi-linear-48b-a3b.config.json").read_text())
    config["qk_nope_head_dim"] = 48
    (tmp_path / "config.json").write_text(json.dumps(config))
    source = tmp_path / "odd.mlir"
    result = CliRunner().invoke(main, ["import", str(tmp_path / "config.json"), "--layers", "4",
                                       "--dense-mlp", "1024", "-o", str(source)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["compile", str(source), "-o", str(tmp_path / "odd.plan")])
    assert result.exit_code == 0, result.output
    plan = Plan.read(tmp_path / "odd.plan")
    kinds = [launch.name.split(" ")[0] for launch in plan.launches]
    assert "latent_attention" not in kinds
    expand, attend = kinds.index("latent_expand"), kinds.index("expanded_attention")
    assert attend == expand + 1
    assert plan.launches[expand].spec["nope"] == 48 and plan.launches[attend].spec["v"] == 128
    keys = plan.buffer("latent_attention.keys")
    assert keys.shape[-2:] == (32, 128)  # 48 + 64 values a head, zeros to whole 32-value steps


ROPE = """
builtin.module {
  form.step batch 3 tokens 1 {
    %tokens = form.input {role = "tokens"} : tensor<3xi32>
    %positions = form.input {role = "positions"} : tensor<3xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %qw = form.weight {name = "q", format = "bf16"} : tensor<320x256xbf16>
    %kw = form.weight {name = "k", format = "bf16"} : tensor<128x256xbf16>
    %h = form.embed %tokens, %table : (tensor<3xi32>, tensor<64x256xbf16>) -> tensor<3x256xbf16>
    %q = form.product %h, %qw : (tensor<3x256xbf16>, tensor<320x256xbf16>) -> tensor<3x320xbf16>
    %k = form.product %h, %kw : (tensor<3x256xbf16>, tensor<128x256xbf16>) -> tensor<3x128xbf16>
    %qr = form.rope %q, %positions {heads = 5 : i64, rotary = 32 : i64, theta = 5.000000e+05 : f64} : (tensor<3x320xbf16>, tensor<3xi32>) -> tensor<3x320xbf16>
    %kr = form.rope %k, %positions {heads = 2 : i64, rotary = 64 : i64, theta = 1.000000e+04 : f64} : (tensor<3x128xbf16>, tensor<3xi32>) -> tensor<3x128xbf16>
    form.return %qr, %kr : tensor<3x320xbf16>, tensor<3x128xbf16>
  }
}
"""


def test_a_rope_is_one_launch_reading_its_product_part_in_place(tmp_path):
    source = tmp_path / "rope.mlir"
    source.write_text(ROPE)
    found = launches(source)
    ropes = [op for op in found if op.kernel.data == "rope"]
    assert [spec_of(op) for op in ropes] == [
        # q and k are parts of one product in parts (320 + 128 values a row), read in place
        {"rows": 3, "heads": 5, "unit": 64, "rotary": 32, "theta": 5e5, "x_pitch": 448},
        {"rows": 3, "heads": 2, "unit": 64, "rotary": 64, "theta": 1e4, "x_pitch": 448},
    ]
    for op in ropes:
        assert tuple(op.grid.get_values()) == (3, 1, 1) and bool(op.pdl.value.data)


# -- attention ---------------------------------------------------------------------------------

def dense_launches(tmp_path: Path, name: str, **options):
    from lanec.models.builder import module_text
    from lanec.models.dense import DenseShape, dense_step

    source = tmp_path / f"{name}.mlir"
    source.write_text(module_text(dense_step(DenseShape(**options.pop("shape", {})), **options)))
    return launches(source)


def test_the_dense_layer_attends_over_its_paged_caches_in_split_chunks():
    found = launches(ROOT / "examples" / "dense-small.mlir")
    kinds = [op.kernel.data for op in found]
    # q k v as one GEMV in parts (the norm in its prologue), rope on q and k in one launch, attention in chunks
    # combined in its own cluster (4 blocks x 8 chunks: CLUSTER_COMBINE_CTAS), o_proj
    first = kinds.index("attention")
    assert kinds[first - 2: first + 2] == ["gemv", "rope", "attention", "gemv"]
    assert spec_of(found[first - 2])["norm"] is True
    rope = spec_of(found[first - 1])
    assert (rope["heads"], rope["unit"], rope["x_pitch"]) == (16 + 4, 128, 3072)
    assert kinds.count("attention") == 2 and "attention_combine" not in kinds
    spec = spec_of(found[first])
    # v is read in place from the product in parts (q 2048, k 512, v 512 a row); q and k from the rope's
    # rows (2560 wide: q's heads, then k's)
    assert spec["v_pitch"] == 3072 and spec["q_pitch"] == spec["k_pitch"] == 2560
    assert (spec["batch"], spec["tokens"], spec["heads"], spec["kv_heads"], spec["head"]) == (1, 1, 16, 4, 128)
    # 4 KV groups x 8 chunks of 256 keys (16 would make chunks of 128, under MIN_CHUNK_KEYS)
    assert (spec["page_size"], spec["max_pages"], spec["cache_pages"], spec["splits"]) == (16, 128, 128, 8)
    assert spec["schedule"] == {"combine": "cluster"} and tuple(found[first].cluster.get_values()) == (8, 1, 1)


def test_the_steps_embed_runs_in_its_first_norms_launch():
    """The norm right after the embed gathers the table's rows itself (rmsnorm `gather`) and writes them to
    the embed's buffer, which the first residual add reads (--no-fold-norms); where that norm runs in a GEMV's
    prologue (fold-norm-into-gemv, the default) the embed keeps its launch."""
    tunings: list = []
    found = launches(ROOT / "examples" / "dense-small.mlir", tunings, shim=LaneShim(fold_norms=False))
    kinds = [op.kernel.data for op in found]
    assert kinds[0] == "rmsnorm" and "embed" not in kinds
    spec = spec_of(found[0])
    assert spec["gather"] == 32000 and spec["residual"] is False and spec["width"] == 2048
    embed = found[0].operands[-1]  # h: the gathered rows, read by the first residual add
    assert any(embed in op.operands for op in found[1:] if op.kernel.data == "rmsnorm")
    assert [o["launch"] for kernel, _, o in tunings if kernel == "embed"] == ["in the norm"]
    module, where = parse_verify(ROOT / "examples" / "dense-small.mlir")
    fuse(module, LaneShim(fold_norms=True), where)
    step = next(iter(lower_module(module).ops))
    kinds = [op.kernel.data for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    assert kinds[0] == "embed"


def test_q_and_k_ropes_pair_only_as_adjacent_parts_read_by_attention():
    """One rope launch turns q's and k's heads where they are adjacent parts of one product's row and both go
    to the attention; a rope whose result another op reads keeps its own launch (and the tunings say why)."""
    tunings: list = []
    paired = launches(ROOT / "examples" / "dense-small.mlir", tunings)
    assert [op.kernel.data for op in paired].count("rope") == 2  # one a layer
    assert [o["launch"] for kernel, _, o in tunings if kernel == "rope"] == ["paired", "paired"]
    module, where = parse_verify(ROOT / "examples" / "dense-small.mlir")
    fuse(module, LaneShim(), where)
    step = next(iter(module.ops))
    from lanec.dialects import form

    rope = next(op for op in step.body.block.ops if isinstance(op, form.RopeOp))
    returned = step.body.block.last_op
    returned.operands = [*returned.operands, rope.result]  # q's turned rows leave the step too
    step = next(iter(lower_module(module).ops))
    kinds = [op.kernel.data for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    assert kinds.count("rope") == 3  # layer 0's q and k apart, layer 1's paired


@pytest.mark.parametrize("batch, tokens, splits", [(64, 1, 1), (8, 4, 8), (2, 1, 8)])
def test_attention_splits_where_its_head_blocks_leave_the_chip_idle(tmp_path, batch, tokens, splits):
    found = dense_launches(tmp_path, "dense", batch=batch, tokens=tokens, shape={"layers": 1})
    kinds = [op.kernel.data for op in found]
    (attention,) = [op for op in found if op.kernel.data == "attention"]
    assert spec_of(attention)["splits"] == splits and spec_of(attention)["tokens"] == tokens
    # 2 requests x 4 KV heads x 8 chunks: 64 CTAs, combined in their cluster; 8 x 4 x 8 = 256 (one wave of two
    # CTAs an SM, GQA_CHUNK_COST_KEYS): a combine launch
    clustered = spec_of(attention).get("schedule") == {"combine": "cluster"}
    assert clustered == (batch == 2)
    assert kinds.count("attention_combine") == (splits > 1 and not clustered)


@pytest.mark.parametrize("shape, fact", [
    ({"head": 96, "heads": 4, "kv_heads": 2, "hidden": 384}, "attention head size 96: one of 64, 128, 256"),
    ({"page_size": 8}, "attention page size 8: one of 16, 32, 64"),
])
def test_attention_facts_are_named_in_one_line(tmp_path, shape, fact):
    from lanec.codegen.lower import LoweringError

    with pytest.raises(LoweringError, match=fact) as caught:
        dense_launches(tmp_path, "bad", shape={"layers": 1, **shape})
    assert "\n" not in str(caught.value)


VALUES_OF_64 = """
builtin.module {
  form.step batch 1 tokens 1 {
    %tokens = form.input {role = "tokens"} : tensor<1xi32>
    %positions = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %tq = form.weight {name = "q", format = "bf16"} : tensor<64x256xbf16>
    %tk = form.weight {name = "k", format = "bf16"} : tensor<64x128xbf16>
    %tv = form.weight {name = "v", format = "bf16"} : tensor<64x64xbf16>
    %kc = form.state {name = "key_cache", kind = "kv"} : tensor<4x16x1x128xbf16>
    %vc = form.state {name = "value_cache", kind = "kv"} : tensor<4x16x1x64xbf16>
    %q = form.embed %tokens, %tq : (tensor<1xi32>, tensor<64x256xbf16>) -> tensor<1x256xbf16>
    %k = form.embed %tokens, %tk : (tensor<1xi32>, tensor<64x128xbf16>) -> tensor<1x128xbf16>
    %v = form.embed %tokens, %tv : (tensor<1xi32>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %positions {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.125 : f64} : (tensor<1x256xbf16>, tensor<1x128xbf16>, tensor<1x64xbf16>, tensor<4x16x1x128xbf16>, tensor<4x16x1x64xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x128xbf16>
    form.return %o : tensor<1x128xbf16>
  }
}
"""


def test_attention_values_of_another_head_size_are_named(tmp_path):
    from lanec.codegen.lower import LoweringError

    source = tmp_path / "values.mlir"
    source.write_text(VALUES_OF_64)  # a form the op allows (values of 64 a head, keys of 128) and the kernel not
    with pytest.raises(LoweringError, match="values of 64 a head beside keys of 128"):
        launches(source)


def test_a_plain_attention_form_compiles_to_a_plan(tmp_path):
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.models.builder import module_text
    from lanec.models.dense import DenseShape, dense_step

    source = tmp_path / "attention.mlir"
    shape = DenseShape(hidden=256, width=256, vocab=64, layers=1, heads=2, kv_heads=1, head=128, context_pages=4)
    source.write_text(module_text(dense_step(shape, batch=2)))
    result = CliRunner().invoke(main, ["compile", str(source), "-o", str(tmp_path / "a.plan")])
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["show", str(tmp_path / "a.plan")])
    assert shown.exit_code == 0, shown.output
    assert "attention" in shown.output and "model.layers.0.key_cache" in shown.output


def test_explain_shows_each_attentions_split_count_and_why():
    from click.testing import CliRunner

    from lanec.cli import main

    result = CliRunner().invoke(main, ["explain", str(ROOT / "examples" / "dense-small.mlir")])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip().startswith("attention ")]
    assert "x2" in line and "splits 8: 4 head blocks x 8 chunks of 256 keys: the fewest chunks of 256 keys or " \
                            "more to reach 96 blocks, kept where they can meet in the launch's cluster" in line


def test_explain_shows_the_latent_attentions_engine_and_blocks():
    """The latent attention's line names its split count and why, then its engine (LATENT_ENGINE) and the
    blocks of query rows it runs: at the example's 4k keys `latent_cut` runs Kimi Linear's 32 heads in 2 blocks
    of 16 rows, on one warpgroup each."""
    from click.testing import CliRunner

    from lanec.cli import main

    result = CliRunner().invoke(main, ["explain", str(ROOT / "examples" / "kimi-linear-small.mlir")])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip().startswith("latent_attention ")]
    assert "splits" in line and "head blocks" in line
    assert "engine wgmma (LATENT_ENGINE, measured: bench/attention.py): 2 blocks of 16 query rows a request, " \
           "1 warpgroup a block (block_rows 16)" in line


@pytest.mark.parametrize(("rows", "blocks"), [(32, (1, 1, 32)), (16, (1, 1, 16)), (36, (2, 1, 36)),
                                              (128, (2, 2, 64)), (130, (2, 3, 44))])
def test_latent_wgmma_blocks_spread_rows_over_the_fewest_blocks(rows, blocks):
    from lanec.codegen.facts import latent_wgmma_blocks

    assert latent_wgmma_blocks(rows) == blocks


def test_a_table_entry_for_a_short_per_head_product_reaches_its_launch(tmp_path, monkeypatch):
    """bench/gemv.py's SHORT set times the latent attention's per-head absorption (K = 128) with fewer
    warps and more rows a CTA; an entry it writes for that shape (rows, width, outputs) is the schedule
    the absorption's gemv launch takes, and every SHORT schedule it times is a kernel the shape
    accepts with fewer warps than the default."""
    from bench_scripts import load_bench
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen import schedules
    from lanec.codegen.kernels.gemv import Gemv

    bench = load_bench("gemv", monkeypatch)
    for _, k, parts, per_head in bench.SHORT:
        default = Gemv(1, k, parts, per_head=per_head)
        taken = []
        for schedule in bench.SHORT_SCHEDULES[1]:
            try:
                taken.append(Gemv(1, k, parts, per_head=per_head, schedule=schedule))
            except ValueError:
                continue
        assert any(kernel.warps < default.warps for kernel in taken), (k, parts)
    out = tmp_path / "mla.mlir"
    result = CliRunner().invoke(main, ["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"),
                                       "--layers", "4", "--dense-mlp", "9216", "--batch", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    held = schedules.table()
    entry = {"schedule": {"warps": 1, "rows_per_cta": 16, "tensor_cores": False}, "us": 3.0}
    monkeypatch.setattr(schedules, "table", lambda: {**held, "gemv": {
        **held.get("gemv", {}), "outputs=16384,rows=1,width=128": entry}})
    absorbed = [spec_of(op) for op in launches(out) if op.kernel.data == "gemv" and spec_of(op).get("per_head")
                and spec_of(op)["width"] == 128]
    assert len(absorbed) == 1  # the one MLA layer of the four
    assert absorbed[0]["per_head"] == (32, 192, 0) and absorbed[0]["parts"] == (16384,)
    assert absorbed[0]["schedule"] == {"warps": 1, "rows_per_cta": 16, "tensor_cores": False}


def test_the_table_gives_kimi_linears_one_row_mixture_down_its_units_a_warp(tmp_path):
    """schedules.json's "mixture_down" entry (measured in the real-size step: 6 outputs a warp) reaches the
    batch-1 launches of Kimi Linear's mixture, which then take 384 CTAs for the 2304-wide row instead of
    576 (the table holds 1, 2 and 4 rows); at three rows the shape has no entry and keeps the kernel's 4
    (UNITS_DOWN); `explain` lists both."""
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen.kernels.mixture import UNITS_DOWN, MixtureDown

    config = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
    grids = {}
    for batch in (1, 3):
        out = tmp_path / f"kimi-b{batch}.mlir"
        result = CliRunner().invoke(main, ["import", str(config), "--layers", "2", "--batch", str(batch), "-o", str(out)])
        assert result.exit_code == 0, result.output
        tunings: list = []
        downs = [op for op in launches(out, tunings) if op.kernel.data == "mixture_down"]
        assert downs, batch
        spec = spec_of(downs[0])
        assert all(spec_of(op) == spec for op in downs)
        grids[batch] = (MixtureDown(**spec).launch().grid, [tuple(op.grid.get_values()) for op in downs])
        looked_up = [overrides for kernel, shape, overrides in tunings if kernel == "mixture_down"]
        assert len(looked_up) == len(downs)
        if batch == 1:
            assert spec["schedule"] == {"units": 6} and looked_up[0] == {"schedule": {"units": 6}}
        else:
            assert "schedule" not in spec and looked_up[0] == {}
    assert grids[1][0] == (2304 // 6, 1, 1) and all(g == (384, 1, 1) for g in grids[1][1])
    assert grids[3][0] == (2304 // UNITS_DOWN, 3, 1)
    explained = CliRunner().invoke(main, ["explain", str(tmp_path / "kimi-b1.mlir")])
    assert explained.exit_code == 0, explained.output
    line = next(line for line in explained.output.splitlines() if line.strip().startswith("mixture_down"))
    assert "table: schedule=(units=6)" in line, line


def test_the_table_gives_kimi_linears_one_row_mixture_gated_its_vectors(tmp_path):
    """schedules.json's "mixture_gated" entry (measured in the real-size step: 12 vectors a lane in flight, three
    chunks of three where the default reads 4, 4 and 1) reaches every batch-1 launch of Kimi Linear's mixture; at
    two rows the shape has no entry and keeps the kernel's 16; `explain` lists it."""
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen.kernels.mixture import VECTORS_IN_FLIGHT, MixtureGated

    config = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
    for batch, vectors in ((1, 12), (2, VECTORS_IN_FLIGHT)):
        out = tmp_path / f"kimi-b{batch}.mlir"
        result = CliRunner().invoke(main, ["import", str(config), "--layers", "2", "--batch", str(batch), "-o", str(out)])
        assert result.exit_code == 0, result.output
        gated = [op for op in launches(out, []) if op.kernel.data == "mixture_gated"]
        assert gated and all(spec_of(op).get("schedule") == ({"vectors": 12} if batch == 1 else None) for op in gated)
        kernel = MixtureGated(**{k: v for k, v in spec_of(gated[0]).items() if k != "release"})
        assert kernel.vectors == vectors, batch
    explained = CliRunner().invoke(main, ["explain", str(tmp_path / "kimi-b1.mlir")])
    assert explained.exit_code == 0, explained.output
    line = next(line for line in explained.output.splitlines() if line.strip().startswith("mixture_gated"))
    assert "table: schedule=(vectors=12)" in line, line


@pytest.mark.parametrize("units", [0, 33, 2.0, True])
def test_mixture_down_refuses_units_a_warp_cannot_hold(units):
    from lanec.codegen.kernels.mixture import MixtureDown

    with pytest.raises(ValueError, match="MixtureSchedule units is 1-32"):
        MixtureDown(1, 512, 256, 8, 2, schedule={"units": units})


@pytest.mark.parametrize("rule", ["wait", "entry", "successor", "pass-through"])
def test_each_launch_releases_its_dependents_where_the_rule_puts_it_by_what_follows(tmp_path, monkeypatch, rule):
    """RELEASE_RULE decides a launch's release point from the next launch (`release_point`): "successor" puts it
    at the entry of every launch followed by one that streams before its wait (a product, an attention), and
    "pass-through" only of those that stream nothing early themselves (the norms, the ropes). The point reaches
    the launch's spec (and so its kernel: test_kernels_compile.py checks the PTX), the plan and `explain`; "wait"
    leaves every spec as it was."""
    from click.testing import CliRunner

    import lanec.codegen.lower as lowering
    from lanec.cli import main
    from lanec.codegen.facts import EARLY_STREAM_CTAS, EARLY_STREAMS

    monkeypatch.setattr(lowering, "RELEASE_RULE", rule)
    source = ROOT / "examples" / "dense-small.mlir"
    tunings: list = []
    ops = launches(source, tunings, shim=LaneShim(fold_norms=False))  # the norms' own launches, each before a product
    kinds = [op.kernel.data for op in ops]
    ctas = [math.prod(op.grid.get_values()) for op in ops]
    at_entry = [spec_of(op).get("release") == "entry" for op in ops]
    early = [after in EARLY_STREAMS and n <= EARLY_STREAM_CTAS
             for after, n in zip([*kinds[1:], None], [*ctas[1:], 0], strict=True)]
    expected = {"wait": [False] * len(ops), "entry": [True] * len(ops), "successor": early,
                "pass-through": [e and kind not in EARLY_STREAMS for e, kind in zip(early, kinds, strict=True)]}[rule]
    assert at_entry == expected
    if rule in ("successor", "pass-through"):
        assert at_entry[kinds.index("rmsnorm", 1)] and at_entry[kinds.index("rope")]  # each before a product / attention
        assert not at_entry[-1] and not at_entry[kinds.index("gemv")]  # argmax ends the step; rope streams nothing
        assert at_entry[kinds.index("gated_gemv")] == (rule == "successor")
        assert ctas[-2] > EARLY_STREAM_CTAS and not at_entry[-3]  # the norm before the lm head's 16000 CTAs
    points = [shape["point"] for kernel, shape, _ in tunings if kernel == "release"]
    assert points == ["entry" if e else "wait" for e in at_entry]
    result = CliRunner().invoke(main, ["compile", str(source), "--no-fold-norms", "-o", str(tmp_path / "step.plan")])
    assert result.exit_code == 0, result.output
    if rule == "successor":
        result = CliRunner().invoke(main, ["explain", str(source), "--no-fold-norms"])
        lines = [line.strip() for line in result.output.splitlines() if line.strip().startswith("release ")]
        # the norms before a product at their entry, the final norm (before the lm head's 16000 CTAs) after its wait
        assert any(line.startswith("release     kernel=rmsnorm next=gemv point=entry") and " x2 " in line
                   and line.endswith("the next launch (gemv) streams before its wait: it starts under this one")
                   for line in lines)
        assert any("kernel=rmsnorm next=gemv point=wait" in line and " x1 " in line and "16000 CTAs" in line
                   for line in lines)
        assert any("kernel=gemv next=rope point=wait" in line and "(rope) streams nothing before its wait" in line
                   for line in lines)


def test_an_unknown_release_rule_is_named():
    from lanec.codegen.lower import LoweringError, release_point

    with pytest.raises(LoweringError, match="release rule 'early': one of wait, entry, successor, pass-through"):
        release_point("gemv", "rmsnorm", rule="early")


@pytest.mark.parametrize("taken", [False, True], ids=["off", "router"])
def test_the_shared_expert_runs_in_the_routers_launch_where_the_fact_allows(tmp_path, monkeypatch, taken):
    """ROUTER_SHARED_ROWS (None: off, as measured): at batch 1 the router's launch takes the shared gate and up
    rows and the hidden values (its spec the shared and routed units), and mixture_gated the routed experts only
    (`shared_in_router`, no shared params); off, the shared expert stays mixture_gated's warp. explain's line says
    which launch ran it and why."""
    import lanec.codegen.lower as lowering

    monkeypatch.setattr(lowering, "ROUTER_SHARED_ROWS", 1 if taken else None)
    monkeypatch.setattr(lowering, "MIXTURE_EARLY_SHARED_ROWS", None)  # its own test below
    source = tmp_path / "kimi-b1.mlir"
    cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "3", "--batch", "1",
         "-o", str(source)], standalone_mode=False)
    tunings: list = []
    ops = launches(source, tunings)
    routers = [op for op in ops if op.kernel.data == "mixture_router"]
    gated = [op for op in ops if op.kernel.data == "mixture_gated"]
    assert len(routers) == len(gated) == 2  # layers 1 and 2 are the mixture's
    for router, pair in zip(routers, gated):
        spec = spec_of(router)
        assert spec.get("shared_hidden", 0) == (1024 if taken else 0)
        assert spec_of(pair).get("shared_in_router", False) == taken
        assert len(pair.args) == (5 if taken else 7)  # x, ids, gate, up, (shared gate, shared up), hidden
        if taken:
            assert router.args[-1] == pair.args[-1]  # the hidden values both write
    reasons = [o for kernel, _, o in tunings if kernel == "shared_expert"]
    assert [o["launch"] for o in reasons] == ["mixture_router" if taken else "mixture_gated"] * 2
    assert all(("at most ROUTER_SHARED_ROWS" if taken else "measured slower") in o["why"] for o in reasons)


@pytest.mark.parametrize("rows", [1, 2])
def test_the_router_prefetches_its_chosen_rows_where_the_fact_allows(tmp_path, monkeypatch, rows):
    """ROUTER_PREFETCH_ROWS (None: off, as measured): set to 1, a batch-1 router over its cluster of 16 takes
    mixture_gated's gate and up matrices as its last two inputs and prefetches 128 rows of a triple a CTA (every CTA
    choosing: ROUTER_PREFETCH_BYTES over 2304-wide rows), and explain's note says so; at 2 rows, or off, its inputs
    and spec are as before."""
    import lanec.codegen.lower as lowering

    source = tmp_path / "kimi.mlir"
    cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "2", "--batch", str(rows),
         "-o", str(source)], standalone_mode=False)
    for fact in (None, 1):
        monkeypatch.setattr(lowering, "ROUTER_PREFETCH_ROWS", fact)
        tunings: list = []
        ops = launches(source, tunings)
        (router,), (gated,) = ([op for op in ops if op.kernel.data == kind] for kind in ("mixture_router",
                                                                                            "mixture_gated"))
        taken = fact is not None and rows == 1
        spec = spec_of(router)
        assert (spec.get("prefetch_units"), spec.get("prefetch_spread"), spec.get("expert_hidden")) == (
            (128, True, 1024) if taken else (None, None, None))
        assert (list(router.args[-2:]) == list(gated.args[2:4])) == taken  # the experts' gate and up
        notes = [o for kernel, _, o in tunings if kernel == "mixture_router" and "prefetch_units" in o]
        assert [o["prefetch_units"] for o in notes] == ([128] if taken else [])
        assert all("at most ROUTER_PREFETCH_ROWS (1)" in o["why"] and "1 a CTA" in o["why"] for o in notes)


@pytest.mark.parametrize("rows", [1, 2])
def test_the_shared_warp_norms_before_the_wait_at_one_row(tmp_path, rows):
    """MIXTURE_EARLY_SHARED_ROWS (1): where the fused router norms the mixture's input, mixture_gated's shared warp
    norms the router's own input (its x, residual and norm weight: the gated launch's extra tensors) and dots its
    MIXTURE_EARLY_SHARED_UNITS units before its PDL wait in its first MIXTURE_EARLY_SHARED_CTAS CTAs; the router then
    releases it only after the router's own wait, whatever RELEASE_RULE says. explain's line says so. At 2 rows
    neither happens: the router releases at its entry and the gated launch reads the normed rows only."""
    from lanec.codegen.facts import MIXTURE_EARLY_SHARED_CTAS, MIXTURE_EARLY_SHARED_UNITS

    source = tmp_path / "kimi.mlir"
    cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "3", "--batch", str(rows),
         "-o", str(source)], standalone_mode=False)
    tunings: list = []
    ops = launches(source, tunings)
    order = [op.kernel.data for op in ops]
    taken = rows == 1
    for router, pair in zip([op for op in ops if op.kernel.data == "mixture_router"],
                            [op for op in ops if op.kernel.data == "mixture_gated"], strict=True):
        assert order[ops.index(router) + 1] == "mixture_gated"
        gated = spec_of(pair)
        assert gated.get("early_shared", False) == taken
        # the router releases after its wait where the gated launch reads its inputs early (else at its entry)
        assert ("release" in spec_of(router)) == (not taken)
        if taken:
            assert (gated["shared_units"], gated.get("early_ctas")) == (MIXTURE_EARLY_SHARED_UNITS,
                                                                         MIXTURE_EARLY_SHARED_CTAS)
            assert list(pair.args[6:9]) == list(router.args[:3])  # the router's x, residual and norm weight
            assert len(pair.args) == 10
        else:
            assert len(pair.args) == 7
    reasons = [(key, o) for kernel, key, o in tunings if kernel == "shared_expert"]
    assert len(reasons) == 2 and all(o["launch"] == "mixture_gated" for _, o in reasons)
    assert all(("before the PDL wait" in o["why"]) == taken for _, o in reasons)
    releases = [o["why"] for kernel, key, o in tunings if kernel == "release" and key["kernel"] == "mixture_router"]
    assert all(("reads this launch's inputs before its own wait" in why) == taken for why in releases)


@pytest.mark.parametrize("fold", [True, False], ids=["rider", "no-fold-norms"])
def test_the_latent_rows_norm_rides_in_the_absorption_gemv(tmp_path, fold):
    """fold-norm-into-latent: Kimi Linear's MLA layer (layer 3) launches no rmsnorm for kv_a_layernorm; the query's
    absorption gemv takes it as a rider (a CTA more a row) reading the norm's input in place and writing the latent
    row the latent attention reads next. Under --no-fold-norms the norm is its own launch before that gemv."""
    source = tmp_path / "kimi.mlir"
    cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "4", "-o", str(source)],
        standalone_mode=False)
    ops = launches(source, shim=LaneShim(fold_norms=fold))
    attention = next(i for i, op in enumerate(ops) if op.kernel.data == "latent_attention")
    absorb = ops[attention - 1]
    norms = [op for op in ops if op.kernel.data == "rmsnorm" and spec_of(op)["width"] == 512]
    assert absorb.kernel.data == "gemv" and spec_of(absorb)["per_head"]
    if fold:
        assert not norms
        spec = spec_of(absorb)
        assert (spec["rider_width"], spec["rider_eps"], spec["rider_x_pitch"]) == (512, 1e-6, 6720)
        latent = absorb.args[-1]  # the rider's result: the attention's latent row
        assert latent in list(ops[attention].args)
        assert list(absorb.grid.get_values())[0] == 32 * 512 // spec["schedule"]["rows_per_cta"] + 1
    else:
        assert len(norms) == 1 and ops[attention - 2] is norms[0] and "rider_width" not in spec_of(absorb)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_split_latent_attention_is_merged_in_the_value_gemv(tmp_path, batch):
    """LATENT_COMBINE_IN_GEMV: at batch 1 Kimi Linear's MLA layer has no attention_combine launch; the gemv
    after the latent attention reads its partial rows and log-sum-exps in place of x (its spec the chunks). At
    batch 4 the value gemv is on the tensor cores, so the combine stays a launch (and past COMBINE_PROLOGUE_SPLITS
    chunks: the import's default context); explain says which."""
    source = tmp_path / "kimi.mlir"
    cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "4", "--batch",
         str(batch), "--context-pages", "16", "-o", str(source)], standalone_mode=False)  # 1k keys: 16 chunks
    tunings: list = []
    ops = launches(source, tunings)
    at = next(i for i, op in enumerate(ops) if op.kernel.data == "latent_attention")
    attention, after = ops[at], ops[at + 1]
    splits = spec_of(attention)["splits"]
    reasons = [o for kernel, _, o in tunings if kernel == "latent_combine"]
    assert splits > 1 and len(reasons) == 1
    if batch == 1:
        assert after.kernel.data == "gemv" and spec_of(after)["combine_splits"] == splits
        assert list(after.args[:2]) == list(attention.args[-2:])  # the chunks' rows and log-sum-exps
        assert "attention_combine" not in [op.kernel.data for op in ops] and reasons[0]["launch"] == "gemv"
    else:
        assert after.kernel.data == "attention_combine" and reasons[0]["launch"] == "attention_combine"


@pytest.mark.parametrize("fold_norms", [False, True], ids=["norm-launch", "norm-in-gemv"])
def test_the_argmax_epilogue_yields_to_a_norm_prologue(fold_norms):
    """--fold-argmax on the KDA-only step at one row: without fold-norm-into-gemv the lm head's gemv takes the
    argmax in its epilogue (no argmax launch); with it, that gemv runs the final norm in its prologue, so the argmax
    stays a launch of its own reading the logits, and the lowering says why (it stopped with an error before)."""
    tunings: list = []
    found = launches(ROOT / "examples" / "kimi-linear-kda.mlir", tunings,
                     shim=LaneShim(fold_argmax=True, fold_norms=fold_norms))
    kinds = [op.kernel.data for op in found]
    head = found[-2] if fold_norms else found[-1]
    assert head.kernel.data == "gemv" and spec_of(head).get("argmax", False) == (not fold_norms)
    assert spec_of(head).get("norm", False) == fold_norms
    assert kinds.count("argmax") == (1 if fold_norms else 0)
    if fold_norms:
        assert found[-1].args[0] == head.args[-2]  # the logits the gemv writes (its norm sum comes last)
    notes = [o for kernel, _, o in tunings if kernel == "argmax"]
    assert [o["epilogue"] for o in notes] == ([False] if fold_norms else [])
    assert all("fold-norm-into-gemv" in o["why"] for o in notes)


@pytest.mark.parametrize("after", [frozenset(), frozenset({"kda_split"})], ids=["off", "after-kda"])
def test_a_gemv_after_a_latency_bound_launch_preloads_its_rows(after, monkeypatch):
    """GEMV_PRELOAD_AFTER: the KDA-only step's o_proj reads KdaSplit's output; with kda_split in the set each
    such gemv takes the schedule `preload` alone (its rows in shared memory before its wait, one wave of CTAs)
    and `explain`'s tunings say why; every other gemv keeps its table's schedule, and an empty set changes none."""
    import lanec.codegen.lower as lowering
    from lanec.codegen.facts import SM_COUNT

    monkeypatch.setattr(lowering, "GEMV_PRELOAD_AFTER", after)
    tunings: list = []
    ops = launches(ROOT / "examples" / "kimi-linear-kda.mlir", tunings)
    kinds = [op.kernel.data for op in ops]
    preloading = [i for i, op in enumerate(ops) if spec_of(op).get("schedule", {}).get("preload")]
    following = [i + 1 for i, kind in enumerate(kinds) if kind == "kda_split"]
    assert preloading == (following if after else [])
    for i in preloading:
        assert kinds[i] == "gemv" and spec_of(ops[i])["schedule"] == {"preload": True}
        assert ops[i].args[0] == ops[i - 1].args[9]  # KdaSplit's output (its tenth tensor) is the activation
        assert math.prod(ops[i].grid.get_values()) <= SM_COUNT and ops[i].shared_bytes.value.data > 48 * 1024
    notes = [(shape, o) for kernel, shape, o in tunings if kernel == "preload"]
    assert len(notes) == len(preloading)
    assert all(shape["after"] == "kda_split" and "stream under kda_split's chain" in o["why"] for shape, o in notes)


@pytest.mark.parametrize("mode", [0, 1])
def test_kda_gate_mode_sets_every_kda_split_launch(mode, monkeypatch):
    """KDA_GATE_MODE: the F_B reduction order every KdaSplit launch of the lowering takes (0: one chain of eight
    MMAs, 1: four chains of two), and nothing else of its spec."""
    import lanec.codegen.lower as lowering

    monkeypatch.setattr(lowering, "KDA_GATE_MODE", mode)
    ops = [op for op in launches(ROOT / "examples" / "kimi-linear-kda.mlir", []) if op.kernel.data == "kda_split"]
    assert ops and all(spec_of(op)["gate_mode"] == mode for op in ops)


def test_the_table_sets_mixture_gated_vectors(monkeypatch):
    """A mixture_gated entry of the schedule table (MixtureSchedule `vectors`) reaches the launch's spec; without
    one the spec names no schedule (the default kernel)."""
    from lanec.codegen import schedules

    form = ROOT / "examples" / "kimi-linear-small.mlir"
    bare = {k: v for k, v in schedules.table().items() if k != "mixture_gated"}
    monkeypatch.setattr(schedules, "table", lambda: bare)
    plain = [op for op in launches(form, []) if op.kernel.data == "mixture_gated"]
    assert plain and all("schedule" not in spec_of(op) for op in plain)
    fields = ("rows", "width", "hidden", "experts", "top_k", "shared_hidden")
    shape = {k: spec_of(plain[0])[k] for k in fields}
    table = {**bare, "mixture_gated": {schedules.key(shape): {"schedule": {"vectors": 8}}}}
    monkeypatch.setattr(schedules, "table", lambda: table)
    tuned = [op for op in launches(form, []) if op.kernel.data == "mixture_gated"]
    assert [spec_of(op).get("schedule") for op in tuned] == [
        {"vectors": 8} if {k: spec_of(op)[k] for k in fields} == shape else None for op in plain]


@pytest.mark.parametrize("flag", [False, True], ids=["wait", "ready"])
def test_mixture_gated_acquires_the_routers_flag_where_the_fact_says(tmp_path, monkeypatch, flag):
    """MIXTURE_READY_FLAG: each per-row mixture's router and gated launch take one more tensor, the mixture's
    `.ready` flags [rows] (the router's last, written; the gated launch's last, read), both specs say `ready`, and
    explain's note names the fact; off, neither does. The grouped path (5 rows and more) never takes it."""
    import lanec.codegen.lower as lowering

    monkeypatch.setattr(lowering, "MIXTURE_READY_FLAG", flag)
    for rows in (1, 5):
        source = tmp_path / f"kimi-b{rows}.mlir"
        cli(["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers", "2", "--batch",
             str(rows), "-o", str(source)], standalone_mode=False)
        tunings: list = []
        ops = launches(source, tunings)
        routers = [op for op in ops if op.kernel.data == "mixture_router"]
        gated = [op for op in ops if op.kernel.data == "mixture_gated"]
        taken = flag and rows == 1
        assert len(routers) == 1 and len(gated) == (1 if rows == 1 else 0)
        assert spec_of(routers[0]).get("ready", False) == taken
        if gated:
            assert spec_of(gated[0]).get("ready", False) == taken
            assert (routers[0].args[-1] == gated[0].args[-1]) == taken  # the flags both take
        notes = [o for kernel, _, o in tunings if kernel == "mixture_gated" and o.get("ready")]
        assert len(notes) == (1 if taken else 0)
        assert all("MIXTURE_READY_FLAG" in o["why"] for o in notes)


def test_from_the_row_blocks_rows_a_per_head_product_is_one_gemv_launch_of_blocks(tmp_path, monkeypatch):
    """GEMV_ROW_BLOCKS_FROM (64, as measured): the latent attention's per-head absorption and expansion at 64 rows,
    where they run on gemv (GEMM_PER_HEAD_FROM off), are one launch of 2 blocks of 32 rows each, over the
    whole activation and output, in place of a launch a block; below the fact's rows, and with the fact off, a
    launch a block. `explain`'s tunings say which."""
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen import lower
    from lanec.codegen.facts import GEMV_ROWS

    config = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
    out = tmp_path / "kimi-b64.mlir"
    result = CliRunner().invoke(main, ["import", str(config), "--layers", "4", "--batch", "64", "-o", str(out)])
    assert result.exit_code == 0, result.output

    monkeypatch.setattr(lower, "GEMM_PER_HEAD_FROM", None)  # the per-head products on gemv (else gemm_tc's)

    def per_head(most):
        monkeypatch.setattr(lower, "GEMV_ROW_BLOCKS_FROM", most)
        tunings: list = []
        found = [op for op in launches(out, tunings) if op.kernel.data == "gemv" and "per_head" in spec_of(op)]
        return found, [t for t in tunings if t[0] == "row_blocks"]

    blocked, why = per_head(64)
    assert len(blocked) == 2 and all(spec_of(op)["row_blocks"] == 2 and spec_of(op)["rows"] == GEMV_ROWS
                                     for op in blocked)
    assert all(tuple(op.grid.get_values())[0] == 2 for op in blocked)
    assert len(why) == 2 and all(t[2]["blocks"] == 2 and "one launch of 2 blocks" in t[2]["why"] for t in why)
    for most in (None, 128):
        apart, why = per_head(most)
        assert len(apart) == 4 and all("row_blocks" not in spec_of(op) for op in apart)
        assert all(t[2]["blocks"] == 1 for t in why) and (not why) == (most is None)
    assert lower.gemv_row_blocks(96, False) == (1, "96 rows are below GEMV_ROW_BLOCKS_FROM (128): a launch a block "
                                                    "of 32")
    monkeypatch.setattr(lower, "GEMV_ROW_BLOCKS_FROM", 64)
    assert lower.gemv_row_blocks(80, False) == (1, "80 rows are not whole blocks of 32: a launch a block")
    assert lower.gemv_row_blocks(64, True) == (1, "its epilogue's tensors are one launch's: a launch a block")


@pytest.mark.parametrize("batch", [64, 256])
def test_from_the_per_head_rows_the_latent_products_run_on_gemm_tc(tmp_path, monkeypatch, batch):
    """GEMM_PER_HEAD_FROM (64, as measured): at 64 and 256 rows the latent attention's absorption (each head's
    nope part of its 192 query values, pitched in the merged product's row) and its value expansion are one
    gemm_tc launch each, their per-head reads in the spec and every weight tile inside one head; `explain`'s
    tunings say so. Off, or above the rows, they are gemv launches; a norm riding in the absorption keeps it
    on gemv."""
    from click.testing import CliRunner

    from lanec.cli import main
    from lanec.codegen import lower
    from lanec.codegen.kernels import make_kernel

    config = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
    out = tmp_path / f"kimi-b{batch}.mlir"
    result = CliRunner().invoke(main, ["import", str(config), "--layers", "4", "--batch", str(batch), "-o", str(out)])
    assert result.exit_code == 0, result.output

    def products(most):
        monkeypatch.setattr(lower, "GEMM_PER_HEAD_FROM", most)
        tunings: list = []
        found = [op for op in launches(out, tunings) if op.kernel.data in ("gemm_tc", "gemv")
                 and "per_head" in spec_of(op)]
        return found, [t for t in tunings if t[0] == "per_head"]

    tensor, why = products(64)
    assert sorted(tuple(spec_of(op)["per_head"]) for op in tensor) == [(32, 192, 0), (32, 512, 0)]
    assert all(op.kernel.data == "gemm_tc" and spec_of(op)["rows"] == batch for op in tensor)
    for op in tensor:
        kernel = make_kernel("gemm_tc", spec_of(op))
        assert (kernel.outputs // kernel.per_head[0]) % kernel.tile_n == 0
    assert len(why) == 2 and all(t[2]["kernel"] == "gemm_tc" and "GEMM_PER_HEAD_FROM (64)" in t[2]["why"]
                                 for t in why)
    for most in (None, 2 * batch):
        rows, why = products(most)
        assert rows and all(op.kernel.data == "gemv" for op in rows)
        assert (not why) == (most is None) and all(t[2]["kernel"] == "gemv" for t in why)
    assert lower.per_head_on_tensor_cores(64, {"rider_width": 512})[0] is False
