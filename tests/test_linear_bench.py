"""bench/linear_attention.py on the CPU: the layer shapes read from the published configs, the bytes
a step must move, the slot tables a graph rotates through, the chain taken from the compiler's
lowering (the launches the bench times are the compiler's own) and the build's artifact list."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    return importlib.import_module("linear_attention")


def test_shapes_come_from_the_published_configs(bench):
    qwen = bench.gdn_shape(json.loads(bench.QWEN.read_text()))
    assert qwen == dict(kind="gdn", heads=32, key_heads=16, key=128, value=128, conv_width=4)
    kimi = bench.kda_shape(bench.config_of("kda"))
    assert kimi == dict(kind="kda", heads=32, key_heads=32, key=64, value=64, conv_width=4)
    assert bench.channels(qwen) == 8192 and bench.channels(kimi) == 6144


def test_chain_bytes_by_hand(bench):
    qwen = bench.gdn_shape(json.loads(bench.QWEN.read_text()))
    one = bench.chain_bytes(qwen, 1, 1)
    assert one["recurrent state"] == 2 * 32 * 128 * 128 * 4  # read and written once
    assert one["conv state"] == 2 * 8192 * 3 * 2  # three taps a channel, read and written
    assert one["conv weights"] == 8192 * 4 * 2
    # q, k, v in (8192), z in and out (4096 each), a and b (32 each), bf16
    assert one["activations"] == 2 * (8192 + 4096 + 32 + 32 + 4096)
    spec = bench.chain_bytes(qwen, 8, 3)
    assert spec["recurrent state"] == 8 * 4 * 32 * 128 * 128 * 4  # read once, written a token
    assert spec["conv state"] == 2 * 8 * 8192 * 5 * 2  # width - 2 + tokens taps
    assert spec["activations"] == 24 * one["activations"]
    kimi = bench.chain_bytes(bench.kda_shape(bench.config_of("kda")), 1, 1)
    assert kimi["activations"] == 2 * (6144 + 2048 + 32 * 64 + 32 + 2048)  # a decay a key


@pytest.mark.parametrize(("batch", "tokens"), [(1, 1), (256, 3)])
def test_slot_tables_rotate_over_the_pool(bench, batch, tokens):
    shape = bench.gdn_shape(json.loads(bench.QWEN.read_text()))
    sets = bench.sets_for(shape, batch, tokens)
    assert sets >= 2 and sets * batch * tokens * bench.state_bytes(shape, tokens) >= bench.TOUCHED or \
        sets == bench.MAX_SETS
    slots = [bench.slot_table(batch, tokens, s) for s in range(sets)]
    flat = [x for table in slots for row in table for x in (row if tokens > 1 else [row])]
    assert len(flat) == len(set(flat)) == sets * batch * tokens
    assert min(flat) == 1 and max(flat) == sets * batch * tokens  # slot 0 never used; the pool's size
    assert bench.step_options(shape, batch, tokens).slots == 1 + max(flat)


def test_the_gated_deltanet_chain_is_the_lowered_one(bench):
    chain = bench.lowered_chain("gdn", 8, 1)
    kernels = [x["kernel"] for x in chain["launches"]]
    assert kernels == ["part"] * 6 + ["conv"] * 3 + ["kda_gate", "elementwise", "delta_rule", "head_norm"]
    convs = [x["spec"] for x in chain["launches"] if x["kernel"] == "conv"]
    assert [c.get("norm_heads") for c in convs] == [16, 16, None]  # the L2 norm in q's and k's epilogue
    delta = next(x["spec"] for x in chain["launches"] if x["kernel"] == "delta_rule")
    assert (delta["heads"], delta["key_heads"], delta["per_key"], delta["batch"]) == (32, 16, False, 8)
    sets = bench.sets_for(chain["shape"], 8, 1)
    assert delta["state_slots"] == 1 + 8 * sets
    assert chain["shape"]["gate"] == "swish"
    for x in chain["launches"]:  # every operand a buffer the bench allocates, inside it
        for name, offset in x["args"]:
            buffer = chain["buffers"][name]
            size = 1
            for n in buffer["shape"]:
                size *= n
            assert 0 <= offset < size
    inputs = {b["source"] for b in chain["buffers"].values() if b["role"] == "input"}
    assert inputs == {"slots"}


def test_the_held_back_kda_chain_leaves_the_products_out(bench):
    chain = bench.lowered_chain("kda", 5, 3)
    kernels = [x["kernel"] for x in chain["launches"]]
    assert "gemv" not in kernels and kernels.count("conv") == 3 and kernels[-1] == "head_norm"
    delta = next(x["spec"] for x in chain["launches"] if x["kernel"] == "delta_rule")
    assert (delta["key"], delta["per_key"], delta["tokens"], delta["slot_columns"]) == (64, True, 3, 3)
    assert chain["shape"]["gate"] == "sigmoid"
    inputs = {b["source"] for b in chain["buffers"].values() if b["role"] == "input"}
    assert inputs == {"slots", "accepted"}


def test_artifacts_name_each_specialization_once(bench):
    listing = [dict(launches=bench.lowered_chain("kda", b, 1)["launches"]) for b in (1, 8)]
    wanted = bench.artifacts(listing)
    launched = {x["stem"] for p in listing for x in p["launches"]}
    assert set(wanted) == launched
    # the two l2norm launches of a KDA chain differ only in their release point (the step's second one is
    # followed by a product, which starts under it): two artifacts, each named by its whole specialization
    norms = [x for x in listing[0]["launches"] if x["kernel"] == "head_norm"][:2]
    assert [n["spec"].get("release") for n in norms] == [None, "entry"] and norms[0]["stem"] != norms[1]["stem"]
    assert {k: v for k, v in norms[1]["spec"].items() if k != "release"} == norms[0]["spec"]
    for stem, (kernel, spec) in wanted.items():
        assert stem == bench.spec_stem(kernel, spec) and stem.startswith(kernel + "_")


def test_the_build_lists_every_problem(bench):
    manifest = bench.OUT / "manifest.json"
    if not manifest.is_file():
        pytest.skip("build/bench-linear not built (python bench/linear_attention.py build)")
    listing = json.loads(manifest.read_text())
    assert [(p["label"].split()[0], p["batch"], p["tokens"]) for p in listing] == \
        [(name, b, t) for name in ("qwen3-next", "kimi") for b in bench.BATCHES for t in bench.TOKENS]
    for stem in bench.artifacts(listing):
        assert (bench.OUT / f"{stem}.cubin").is_file() and (bench.OUT / f"{stem}.json").is_file()
