"""bench/model.py and the chain it runs (bench/step_chain.py), on the CPU: the chain's layers and
tensors read from a fused Kimi Linear program (the real model's first five layers: dense, KDA,
MLA, mixtures), the MLA pool rows SGLang's decode attention reads, the full batch served at a
context (runner.served_inputs, `--context`), the roofline arithmetic and the table's rows."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.interp.lower import program_of
from lanec.pipeline import compile_rules
from lanec.runtime import runner
from lanec.runtime.runner import Options, RunError, served_inputs, validate_inputs

ROOT = Path(__file__).resolve().parents[1]
KIMI = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"


def _bench(name: str):
    """A bench script as a module (bench/ on the path, as the scripts import each other)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def model():
    return _bench("model")


@pytest.fixture(scope="module")
def chain():
    return _bench("step_chain")


def kimi_program(tmp_path_factory, *arguments: str):
    """The fused program (as a plan carries it) of Kimi Linear's first five layers."""
    out = tmp_path_factory.mktemp("kimi") / "kimi.mlir"
    result = CliRunner().invoke(main, ["import", str(KIMI), "--layers", "5", *arguments, "-o", str(out)])
    assert result.exit_code == 0, result.output
    module, _ = compile_rules(out)
    return program_of(module)


@pytest.fixture(scope="module")
def spec_program(tmp_path_factory):
    """3 requests of 2 speculative tokens, a page table of 4 pages of 64 rows."""
    return kimi_program(tmp_path_factory, "--batch", "3", "--spec-tokens", "2", "--context-pages", "4")


def test_the_chain_reads_each_layers_mixer_and_mlp(chain, spec_program):
    plans = chain.layer_plans(spec_program)
    assert [(i, p.mixer, p.mlp) for i, p in plans.items()] == [
        (0, "kda", "dense"), (1, "kda", "mixture"), (2, "kda", "mixture"), (3, "mla", "mixture"), (4, "kda", "mixture")]
    mla = plans[3].mixer_props
    assert (mla["heads"], mla["nope"], mla["rope"], mla["lora"], mla["v"]) == (32, 128, 64, 512, 128)
    assert mla["latent_eps"] == pytest.approx(1e-6)
    assert plans[1].mlp_props["top_k"] == 8 and plans[1].mlp_props["routed_scaling"] == pytest.approx(2.446)
    assert chain.plan_context(spec_program) == 4 * 64


def test_the_chain_holds_the_programs_weights_in_its_own_layouts(chain, spec_program):
    tensors = chain.chain_tensors(spec_program, context=256)
    assert tensors["1.w13"].shape == (256, 2 * 1024, 2304) and tensors["1.w2"].shape == (256, 2304, 1024)
    assert tensors["3.kv_a"].shape == (576, 2304)
    assert tensors["3.w_kc"].shape == (32, 128, 512) and tensors["3.w_vc"].shape == (32, 512, 128)
    assert tensors["3.pool"].shape == (3 * 256, 1, 576)
    assert tensors["0.state"].shape == (3 * 2 + 1, 32, 128, 128) and tensors["0.state"].dtype == "f32"
    assert tensors["0.gate_up"].shape == (2 * 9216, 2304) and tensors["1.shared_gate_up"].shape == (2048, 2304)
    # every weight byte the program declares, no more: only the states, taps and pools are the chain's own
    own = sum(s.nbytes for name, s in tensors.items() if name.split(".")[1] in ("state", "q_taps", "k_taps", "v_taps",
                                                                                 "pool"))
    declared = sum(math.prod(w.shape) * (4 if w.dtype == "f32" else 2) for w in spec_program.weights)
    assert sum(s.nbytes for s in tensors.values()) - own == declared


def test_an_mla_layer_needs_a_context(chain, spec_program):
    with pytest.raises(SystemExit, match="context"):
        chain.chain_tensors(spec_program, context=None)


def test_each_row_sees_its_requests_rows_up_to_its_own(chain):
    indptr, indices, writes, lengths = chain.latent_rows(batch=2, q=3, context=5)
    assert lengths.tolist() == [3, 4, 5, 3, 4, 5]
    assert indptr.tolist() == [0, 3, 7, 12, 15, 19, 24] and indptr.dtype == np.int32
    assert indices[indptr[4]:indptr[5]].tolist() == [5, 6, 7, 8] and indices.dtype == np.int64
    assert writes.tolist() == [2, 3, 4, 7, 8, 9]  # the last q rows of each request's context


def test_a_full_batch_is_served_at_the_context(spec_program):
    inputs = served_inputs(spec_program, 200, seed=3)
    validate_inputs(spec_program, inputs)
    assert inputs["positions"].tolist() == [198, 199] * 3
    assert sorted(inputs["slots"].reshape(-1).tolist()) == list(range(1, 7))  # every request active
    pages = inputs["pages"]
    held = pages[pages >= 0]
    assert pages.shape == (3, 4) and (pages[:, :4] >= 0).all() and len(set(held.tolist())) == held.size
    assert ((inputs["accepted"] >= 1) & (inputs["accepted"] <= 2)).all()
    assert (inputs["tokens"] < 163840).all()
    assert served_inputs(spec_program, None)["positions"].tolist() == [254, 255] * 3  # the longest context


@pytest.mark.parametrize("context, words", [(257, "holds 2 to 256 positions"), (1, "holds 2 to 256 positions")])
def test_a_context_the_plan_cannot_hold_is_one_line(spec_program, context, words):
    with pytest.raises(RunError, match=words) as error:
        served_inputs(spec_program, context)
    assert "\n" not in str(error.value)


def test_context_is_an_option_of_lanec_run():
    _, options = runner.parse(["x.plan", "--context", "16384", "--gpu-seeding"], "lanec run")
    assert options.context == 16384 and options.gpu_seeding
    assert "--context" in CliRunner().invoke(main, ["run", "--help"]).output
    with pytest.raises(RunError, match="at least one position"):
        runner.execute("x.plan", Options(context=0))


def test_the_roofline_is_the_recorded_traffic_over_the_copy_bandwidth(model):
    plan = SimpleNamespace(launches=[SimpleNamespace(traffic={"read": 3_000_000, "written": 1_000_000}),
                                     SimpleNamespace(traffic={"read": 2_000_000}), SimpleNamespace(traffic={})])
    nbytes = model.step_bytes(plan)
    assert nbytes == 6_000_000
    row = model.Row("kimi-full-b8-c1k", 8, 3, 1024, lanec_us=2.0, chain_us=5.0, nbytes=nbytes, copy_bw=4e12)
    assert row.roofline_us == pytest.approx(1.5) and row.share == pytest.approx(0.75)
    assert row.tokens_per_s(row.lanec_us) == pytest.approx(24 / 2e-6)
    # the floor-adjusted bound: the bytes' 1.5 us and LAUNCH_FLOOR_US for each of the plan's 3 launches
    floored = model.Row("kimi-full-b8-c1k", 8, 3, 1024, 20.0, 5.0, nbytes, 4e12, launches=3)
    assert floored.floor_share == pytest.approx((1.5 + 3 * model.LAUNCH_FLOOR_US) / 20.0)


def test_a_row_lines_up_under_the_header_and_a_failed_side_says_so(model):
    header = model.header()
    good = model.format_row(model.Row("kimi-full-b1-c16k", 1, 1, 16384, 1500.0, 3000.0, 6_000_000_000, 4.2e12,
                                      launches=50))
    failed = model.format_row(model.Row("kimi-full-b256-c16k", 256, 1, 16384, 20000.0, math.nan, 9.8e10, 4.2e12))
    assert len(good) == len(header) == len(failed)
    cells = good.split()
    assert cells[6] == "2.00x" and cells[7] == "667" and cells[8] == "333" and cells[9] == "6000.0"
    assert cells[10] == "1428.6" and cells[11] == "95.2%"
    # 1428.6 us of bytes and 50 launches at LAUNCH_FLOOR_US: the step against both
    assert cells[12] == "50" and cells[13] == f"{100 * (1428.571 + 50 * model.LAUNCH_FLOOR_US) / 1500.0:.1f}%"
    assert failed.split()[5:8] == ["failed", "failed", "12800"]


def test_the_model_plans_hold_just_their_context(model):
    from tests.gpu.plans import MODEL_PLANS

    # 5 shapes x 2 contexts; batch 1 with the norms unfolded, the argmax folded or the KDA output gate unfolded; batch 1 and 8
    # without the router's norm folded
    assert len(MODEL_PLANS) == 15
    for name, made in MODEL_PLANS.items():
        pages = int(made.arguments[made.arguments.index("--context-pages") + 1])
        assert pages * 64 == (1024 if "-c1k" in name else 16384)
    assert MODEL_PLANS["kimi-full-b1-c1k-no-fold-norms"].compile == ("--no-fold-norms",)
    assert MODEL_PLANS["kimi-full-b1-c1k-fold-argmax"].compile == ("--fold-argmax",)
    assert MODEL_PLANS["kimi-full-b1-c1k-no-fold-gate"].compile == ("--no-fold-gate",)
    assert MODEL_PLANS["kimi-full-b8-c1k-no-fold-router-norms"].compile == ("--no-fold-router-norms",)
    assert model.resolve("kimi-full-b1-c1k") == ROOT / "build" / "plans" / "kimi-full-b1-c1k.plan"


def test_the_bytes_count_each_mixtures_experts_as_the_step_routed_them(model, spec_program):
    """The record counts min(experts, rows x top-k) experts a mixture; the roofline's bytes take
    the distinct experts the GPU chose instead: one expert's gate, up and down bytes for each
    expert the record counts beyond them, mixture by mixture."""
    weights = {w.value: w for w in spec_program.weights}
    mixtures = [s for s in spec_program.steps if s.op == "mixture"]
    assert len(mixtures) == 4  # layers 1-4 of Kimi Linear (the first is dense)
    rng = np.random.default_rng()
    chosen, want = {}, 0
    for step in mixtures:
        router = weights[step.operands["router"]]
        gate, up, down = (weights[step.operands[name]] for name in ("gate", "up", "down"))
        experts, rows, top_k = gate.shape[0], 6, step.properties["top_k"]
        distinct = int(rng.integers(top_k, rows * top_k + 1))
        ids = np.concatenate([np.arange(distinct), rng.integers(0, distinct, rows * top_k - distinct)])
        chosen[router.name] = rng.permutation(ids).reshape(rows, top_k)
        one = 2 * sum(int(np.prod(w.shape[1:])) for w in (gate, up, down))
        want += (min(experts, rows * top_k) - distinct) * one
    assert model.unrouted_bytes(spec_program, chosen) == want
    assert model.unrouted_bytes(spec_program, {}) == 0  # no routing read back: the record stands


def test_the_rounds_summary_takes_each_plans_medians(chain):
    """`--rounds`: a plan's median lanec and chain times, the ratio of the medians, and the range of
    the rounds' own ratios (the chain moves between runs; one round does not settle a ratio)."""
    lines = chain.medians({"kimi-kda-b64": [(520.0, 630.0), (519.0, 700.0), (521.0, 626.0)]})
    assert lines[0].split()[:3] == ["plan", "rounds", "lanec"]
    name, count, ours, theirs, ratio, spread = lines[1].split()
    assert (name, count, ours, theirs) == ("kimi-kda-b64", "3", "520.00", "630.00")
    assert ratio == f"{630 / 520:.2f}x" and spread == f"{626 / 521:.2f}-{700 / 519:.2f}x"
