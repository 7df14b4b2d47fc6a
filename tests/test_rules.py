"""The rules table, the pipeline's stages 1-4 and `lanec explain`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.dialects.form import DeltaRuleOp, GatedProductOp, KdaOp, MixtureOp, ProductOp, SwigluOp
from lanec.interp.environment import random_environment
from lanec.interp.lower import program_of
from lanec.passes import get_all_passes
from lanec.passes.decisions import DECISIONS_ATTR, LAYER, decisions_of
from lanec.passes.table import HELD_BACK, LANE_BEFORE, RULES, SHARED, STAGES, TABLE
from lanec.pipeline import compile_rules, fuse, parse_verify
from lanec.shim import LaneShim

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = EXAMPLES / "kimi-linear-small.mlir"
TINY = EXAMPLES / "kimi-linear-tiny.mlir"
KDA = EXAMPLES / "kimi-linear-kda.mlir"


def explain(*args: str) -> str:
    result = CliRunner().invoke(main, ["explain", *args])
    assert result.exit_code == 0, result.output
    return result.output


# -- the table ----------------------------------------------------------------------------------


def test_every_rule_is_a_pass_under_its_kebab_name() -> None:
    passes = get_all_passes()
    assert [rule.name for rule in RULES] == [name for name in passes if name in {r.name for r in RULES}]
    for rule in RULES:
        assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", rule.name)
        assert passes[rule.name]() is rule
    for stage in STAGES:  # a stage runs its rules: `lanec opt -p shared`
        assert passes[stage.name]() is stage


def test_the_table_links_the_lane_rules_around_the_shared_ones() -> None:
    assert [stage for stage, _ in TABLE] == ["lane-before", "shared", "held-back"]
    assert [r.name for r in LANE_BEFORE] == ["latent-whole", "gemv-in-parts"]
    shared = [r.name for r in SHARED]
    assert shared.index("merge-products") < shared.index("fold-kda")  # fold-kda reads q, k, v as parts
    assert shared[-1] == "fuse-quant"  # it quantizes for the producers the folds left
    # the quantize epilogues are checked after every split; then the norms fold into the GEMVs left
    assert [r.name for r in HELD_BACK][-6:] == ["hold-quantized-activation", "fold-norm-into-gemv",
                                                "fold-norm-into-router", "fold-norm-into-latent",
                                                "fold-argmax-into-gemv", "fold-all-reduce-into-norm"]
    assert all(r.stage == stage for stage, rules in TABLE for r in rules)


# -- the pipeline on Kimi Linear ----------------------------------------------------------------


def kda_layers(path: Path) -> set[int]:
    module, _ = parse_verify(path)
    layers = set()
    for op in module.walk():
        if isinstance(op, DeltaRuleOp):
            name = op.state.owner.properties["name"].data
            layers.add(int(LAYER.search(name).group(1)))
    return layers


def test_kimi_linear_small_takes_every_fold() -> None:
    data = json.loads(explain(str(SMALL), "--json"))
    taken = {(d["rule"], d["layer"]) for d in data["decisions"] if d["taken"]}
    layers = kda_layers(SMALL)
    assert layers == {0, 1, 2}
    for layer in layers:
        assert ("fold-kda", layer) in taken and ("hold-kda", layer) in taken
        assert ("gemv-in-parts", layer) in taken  # q, k, v, f_a, b, g_a of one activation
    assert ("pair-gate-up", 0) in taken and ("hold-gated-pair", 0) in taken  # the dense MLP
    for layer in (1, 2, 3):  # the MoE layers
        assert ("fold-shared-expert", layer) in taken and ("hold-mixture-shared", layer) in taken
    module, _ = compile_rules(SMALL, LaneShim())
    ops = list(module.walk())
    assert sum(isinstance(op, KdaOp) for op in ops) == 3
    assert not any(isinstance(op, DeltaRuleOp | SwigluOp) for op in ops)
    assert sum(isinstance(op, GatedProductOp) for op in ops) == 1
    assert sum(isinstance(op, MixtureOp) and len(op.shared) == 3 for op in ops) == 3


def test_explain_json_is_stable_sorted_and_documented() -> None:
    first, second = explain(str(SMALL), "--json"), explain(str(SMALL), "--json")
    assert first == second
    data = json.loads(first)
    assert list(data) == sorted(data) == ["decisions", "model", "schedules", "schema", "shim", "summary"]
    # the whole Kimi Linear lowers: every kernel shape with its schedule, the latent attention's
    # split count with why
    assert data["schedules"]["lowered"] is True
    latent = [k for k in data["schedules"]["kernels"] if k["kernel"] == "latent_attention"]
    assert len(latent) == 1 and latent[0]["launches"] == 1
    assert "head blocks x" in json.dumps(latent[0])
    assert data["schema"] == "lanec.explain/1"
    assert data["shim"] == {"batch_products": False, "fold_argmax": False, "fold_gate": True, "fold_norms": True,
                            "fold_router_norms": True, "fuse_quant": False, "numerics": "precise",
                            "words": 1}
    fields = ["layer", "op", "reason", "rule", "stage", "taken"]
    assert all(list(d) == fields for d in data["decisions"])
    order = {r.name: i for i, r in enumerate(RULES)}
    stages = ["lane-before", "shared", "held-back"]
    keys = [(stages.index(d["stage"]), order[d["rule"]], -1 if d["layer"] is None else d["layer"], d["op"], d["reason"])
            for d in data["decisions"]]
    assert keys == sorted(keys)
    assert data["summary"]["taken"] + data["summary"]["held_back"] == len(data["decisions"])
    assert json.dumps(data, indent=2, sort_keys=True) + "\n" == first


def test_explain_text_names_the_stages_and_the_reasons() -> None:
    text = explain(str(SMALL))
    assert text.splitlines()[0].startswith(f"{SMALL}: ")
    for stage in ("lane-before:", "shared:", "held-back:"):
        assert stage in text
    assert "held back  latent-whole" in text and "not a wide chunk" in text
    assert "one KdaSplit launch: heads of 128, 1 token(s) a request, conv width 4" in text


def test_knobs_reach_the_rules() -> None:
    data = json.loads(explain(str(TINY), "--json", "--numerics", "quantized", "--words", "2", "--fuse-quant",
                              "--batch-products"))
    assert data["shim"] == {"batch_products": True, "fold_argmax": False, "fold_gate": True, "fold_norms": True,
                            "fold_router_norms": True, "fuse_quant": True, "numerics": "quantized", "words": 2}
    reasons = [d["reason"] for d in data["decisions"] if d["rule"] == "gemv-in-parts"]
    assert reasons and all(r.endswith("the products are a batch's") for r in reasons)


@pytest.mark.parametrize("args, message", [
    (["--fuse-quant"], "fuse_quant quantizes in producers' epilogues: it needs --numerics quantized"),
    (["--words", "2"], "words 2: only quantized numerics read int8 words"),
    (["--words", "3"], "'3' is not one of '1', '2'"),
])
def test_illegal_knobs_are_one_line_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["explain", str(TINY), *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_a_bad_form_is_a_one_line_diagnostic(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text('builtin.module {\n  form.step batch 1 tokens 1 {\n    %t = form.input {role = "nope"} : '
                   "tensor<1xi32>\n    form.return\n  }\n}\n")
    result = CliRunner().invoke(main, ["explain", str(bad)])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert re.match(rf"{re.escape(str(bad))}:3:\d+: error: input role 'nope'", result.output)


# -- decisions ----------------------------------------------------------------------------------


def test_the_decisions_returned_are_the_ones_the_module_records() -> None:
    module, _ = parse_verify(TINY)
    decisions = fuse(module, LaneShim("quantized", 1))
    assert decisions == decisions_of(module) and decisions
    assert LaneShim.of(module) == LaneShim("quantized", 1)
    again = fuse(module, LaneShim())  # a second run starts a fresh record
    assert DECISIONS_ATTR in module.attributes and decisions_of(module) == again


def test_every_decision_names_its_stage_rule_and_reason() -> None:
    _, decisions = compile_rules(SMALL, LaneShim())
    names = {r.name: r.stage for r in RULES}
    for d in decisions:
        assert names[d.rule] == d.stage and d.reason and d.op
    assert {d.layer for d in decisions} >= {0, 1, 2, 3}


# -- meaning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("shim", [LaneShim(), LaneShim(batch_products=True), LaneShim("quantized", 2, True)])
def test_kimi_linear_tiny_means_the_same_fused(shim: LaneShim) -> None:
    original, _ = parse_verify(TINY)
    fused, decisions = compile_rules(TINY, shim)
    assert any(d.rule == "fold-kda" and d.taken for d in decisions)
    before, after = program_of(original), program_of(fused)
    assert len(after.steps) < len(before.steps)
    env = random_environment(before, seed=7)
    first, second = env.copy(), env.copy()
    for a, b in zip(before.run(first), after.run(second), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6 * float(np.max(np.abs(a))))
    for name in first.states:
        np.testing.assert_allclose(second.states[name], first.states[name], rtol=1e-5, atol=1e-6)


def test_merged_products_keep_their_names_and_order() -> None:
    module, _ = compile_rules(SMALL, LaneShim())
    merged = [op for op in module.walk() if isinstance(op, ProductOp) and len(op.weights) == 6]
    assert len(merged) == 3
    names = [w.owner.properties["name"].data.split(".")[-2] for w in merged[0].weights]
    assert names == ["q_proj", "k_proj", "v_proj", "f_a_proj", "b_proj", "g_a_proj"]


def test_explain_reports_what_the_schedule_table_gave_each_kernel() -> None:
    from lanec.codegen.schedules import table

    data = json.loads(explain(str(KDA), "--json"))
    assert data["schedules"]["lowered"] is True
    kernels = data["schedules"]["kernels"]
    kda = [k for k in kernels if k["kernel"] == "kda_split"]
    assert len(kda) == 1 and kda[0]["launches"] == KDA.read_text().count("form.kda_gate ")  # one a layer
    shape = kda[0]["shape"]
    entry = table()["kda_split"].get(",".join(f"{k}={shape[k]}" for k in sorted(shape)))
    if entry is None:  # a shape the tuner never measured keeps the kernel's defaults
        assert kda[0]["table"] is None and kda[0]["us"] is None
    else:
        assert kda[0]["table"] == {"schedule": entry["schedule"]} and kda[0]["us"] == entry["us"]
    assert sum(k["launches"] for k in kernels if k["kernel"] in ("gemv", "gated_gemv")) > 0
    text = explain(str(KDA))
    assert "schedules (stage 5, lanec/codegen/schedules.json):" in text
    assert any(line.strip().startswith("kda_split") and ("table: schedule=" in line or "defaults" in line)
               for line in text.splitlines())


# -- the knobs a module records, and what explain names -------------------------------------------


def test_explain_honours_the_modules_own_knobs_as_opt_does(tmp_path: Path) -> None:
    recorded = tmp_path / "quantized.mlir"
    recorded.write_text(TINY.read_text().replace(
        "builtin.module {", "builtin.module attributes "
        '{lane.shim = {numerics = "quantized", words = 2 : i64, batch_products = true}} {', 1))
    data = json.loads(explain(str(recorded), "--json"))
    assert data["shim"] == {"batch_products": True, "fold_argmax": False, "fold_gate": True, "fold_norms": True,
                            "fold_router_norms": True, "fuse_quant": False, "numerics": "quantized", "words": 2}
    opt = CliRunner().invoke(main, ["opt", str(recorded), "-p", "lane-before,shared,held-back"])
    assert opt.exit_code == 0, opt.output
    module, _ = parse_verify(opt.stdout)
    assert [d.as_json() for d in decisions_of(module)] == [d.as_json() for d in compile_rules(recorded)[1]]
    reasons = [d["reason"] for d in data["decisions"] if d["rule"] == "gemv-in-parts"]
    assert reasons and all(r.endswith("the products are a batch's") for r in reasons)
    # a knob the command line gives replaces the module's; the others stay the module's
    data = json.loads(explain(str(recorded), "--json", "--fuse-quant"))
    assert data["shim"] == {"batch_products": True, "fold_argmax": False, "fold_gate": True, "fold_norms": True,
                            "fold_router_norms": True, "fuse_quant": True, "numerics": "quantized", "words": 2}
    # the negative forms turn a knob off whatever the module or the default says
    recorded_fused = tmp_path / "fused.mlir"
    recorded_fused.write_text(recorded.read_text().replace("batch_products = true", "fuse_quant = true", 1))
    data = json.loads(explain(str(recorded_fused), "--json", "--no-fuse-quant", "--no-fold-gate"))
    assert (data["shim"]["fuse_quant"], data["shim"]["fold_gate"]) == (False, False)
    data = json.loads(explain(str(recorded), "--json", "--numerics", "precise", "--words", "1"))
    assert data["shim"] == {"batch_products": True, "fold_argmax": False, "fold_gate": True, "fold_norms": True,
                            "fold_router_norms": True, "fuse_quant": False, "numerics": "precise", "words": 1}
    result = CliRunner().invoke(main, ["explain", str(recorded), "--numerics", "precise"])  # words 2 stays
    assert result.exit_code == 2 and "words 2: only quantized numerics read int8 words" in result.output


BUILT = {"gemv", "gated_gemv", "q8_gemv", "q8_gated_gemv", "rmsnorm", "elementwise", "embed", "argmax", "kda_split"}
NOT_BUILT = ("gemm_tc", "conv_l2norm", "tensor-core GEMM in parts:", "on the tensor cores")


def named_kernels(reason: str) -> set[str]:
    """The lane's kernels a decision says the plan launches (KdaSplit is kda_split's class)."""
    named = {k for k in BUILT if re.search(rf"(?<![\w-]){k}(?![\w-])", reason)}
    return named | ({"kda_split"} if "KdaSplit launch" in reason else set())


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.mlir")), ids=lambda p: p.name)
@pytest.mark.parametrize("knobs", [[], ["--numerics", "quantized"], ["--batch-products"]])
def test_explain_names_only_kernels_the_plan_launches(example: Path, knobs: list[str]) -> None:
    data = json.loads(explain(str(example), "--json", *knobs))
    reasons = [d["reason"] for d in data["decisions"]]
    assert not [r for r in reasons if any(words in r for words in NOT_BUILT)]
    if not data["schedules"]["lowered"]:
        return
    launched = {k["kernel"] for k in data["schedules"]["kernels"]}
    for decision in data["decisions"]:
        if decision["taken"]:
            assert named_kernels(decision["reason"]) <= launched, (decision, launched)


def test_a_pair_kept_for_the_tensor_cores_runs_as_one_gemm_tc_launch(tmp_path: Path) -> None:
    """64 rows, bf16 rows, 128 hidden values (2 pair tiles of 64), under either numerics: the pair
    is kept for the tensor cores' side-by-side GEMM; explain names it and the plan launches one
    gemm_tc (gated: SwiGLU in its epilogue). 120 hidden values are not whole pair tiles: held back
    to two gemm_tc launches (and a swiglu)."""
    step = tmp_path / "pair.mlir"
    step.write_text("""builtin.module {
  form.step batch 64 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<128x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<128x64xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %h = form.gated_product %x, %wg, %wu
      : (tensor<64x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<64x128xbf16>
    form.return %h : tensor<64x128xbf16>
  }
}
""")
    for numerics in ("quantized", "precise"):
        data = json.loads(explain(str(step), "--json", "--numerics", numerics))
        (pair,) = [d for d in data["decisions"] if d["rule"] == "hold-gated-pair"]
        assert pair["taken"] and "one gemm_tc launch of 2 pair tiles" in pair["reason"]
        (gemm,) = [k for k in data["schedules"]["kernels"] if k["kernel"] == "gemm_tc"]
        assert gemm["launches"] == 1
    step.write_text(step.read_text().replace("128x64xbf16", "120x64xbf16").replace("64x128xbf16", "64x120xbf16"))
    data = json.loads(explain(str(step), "--json"))
    (pair,) = [d for d in data["decisions"] if d["rule"] == "hold-gated-pair"]
    assert not pair["taken"] and "hidden width 120 is not whole pair tiles" in pair["reason"]
    (gemm,) = [k for k in data["schedules"]["kernels"] if k["kernel"] == "gemm_tc"]
    assert gemm["launches"] == 2
    assert not [k for k in data["schedules"]["kernels"] if k["kernel"] == "gated_gemv"]
