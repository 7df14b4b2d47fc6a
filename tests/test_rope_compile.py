"""The rope kernel's scaled frequencies and DeepSeek's layout, on this (GPU-less) machine: the
kernel holds exactly the interpreter's inverse frequencies (one function computes both), each
one an fp32 constant of its PTX picked by selects (no local memory, no table in memory); the
scaled kinds, an offset and interleaved pairs compile with the loads after the PDL wait; bad
scalings are one-line errors; the lowering passes a form's scaling, offset and layout to the
kernel."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from lanec.codegen.compile import cache_key, compile_kernel
from lanec.codegen.kernels.rope import Rope
from lanec.codegen.lower import lower_module
from lanec.codegen.spec import spec_of
from lanec.dialects import lane
from lanec.interp import ops
from lanec.pipeline import fuse, parse_verify
from lanec.shim import LaneShim

LLAMA3 = {"kind": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_context": 8192}
YARN = {"kind": "yarn", "factor": 40.0, "original_context": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": 1,
        "attention_factor": 1.0}
# a yarn whose attention factor is not 1 (mscale without mscale_all_dim), untruncated
YARN_LOUD = {**YARN, "factor": 4.0, "original_context": 64, "truncate": 0, "attention_factor": 1.1386294361119891}

KERNELS = {
    "llama3_r8_h32_u128": lambda: Rope(8, 32, 128, 128, 5e5, scaling=LLAMA3),
    "llama3_odd": lambda: Rope(3, 5, 64, 32, 5e5, scaling={**LLAMA3, "original_context": 64}),
    # DeepSeek-V3's query: each head's last 64 of 192 values, in interleaved pairs; its shared key
    "yarn_query": lambda: Rope(2, 128, 192, 64, 1e4, offset=128, interleaved=True, scaling=YARN),
    "yarn_key": lambda: Rope(2, 1, 64, 64, 1e4, interleaved=True, scaling=YARN_LOUD),
    "yarn_rotate_half_odd": lambda: Rope(3, 3, 80, 20, 1e4, offset=30, scaling=YARN_LOUD),
    # Qwen3-Next's partial rotary: a quarter of each 256-value head
    "partial_r5_h4_u256": lambda: Rope(5, 4, 256, 64, 1e7),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("lanec-cache")


def fp32_constants(ptx: str) -> set[float]:
    return {struct.unpack(">f", bytes.fromhex(h))[0] for h in re.findall(r"0f([0-9A-F]{8})", ptx)}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_the_kernel_holds_the_interpreters_frequencies_as_constants(case, cache):
    kernel = KERNELS[case]()
    assert len(kernel.inv_freq) == kernel.rotary // 2
    assert all(float(np.float32(f)) == f for f in kernel.inv_freq)  # fp32 values
    ptx = compile_kernel(kernel, cache_dir=cache).ptx
    assert ".local" not in ptx, "local memory (a table indexed at run time, or a slow sin/cos path)"
    missing = [f for f in kernel.inv_freq if f not in fp32_constants(ptx)]
    assert not missing, f"inverse frequencies not in the PTX: {missing[:4]}"
    before, after = ptx.split("griddepcontrol.wait;")
    assert "ld.global" not in before  # x and the positions are both predecessors' outputs
    assert "griddepcontrol.launch_dependents;" in after
    assert "sin.approx" not in after and "cos.approx" not in after
    moves = {8: "v4.b32", 4: "v2.b32", 2: "b32"}[kernel.per_vector]  # whole vectors of the head's tiling
    assert f"ld.global.{moves}" in after and f"st.global.{moves}" in after


@pytest.mark.parametrize(("scaling", "rotary", "theta"), [
    (LLAMA3, 128, 5e5), ({**LLAMA3, "original_context": 64}, 32, 5e5), (YARN, 64, 1e4), (YARN_LOUD, 20, 1e4),
])
def test_scaled_frequencies_are_the_interpreters_bit_for_bit(scaling, rotary, theta):
    kernel = Rope(1, 1, rotary, rotary, theta, scaling=scaling)
    fields = {k: v for k, v in scaling.items() if k not in ("kind", "attention_factor")}
    want = ops.frequencies(rotary, theta, scaling["kind"], **fields)
    assert np.array_equal(np.asarray(kernel.inv_freq, np.float32), want)
    assert not np.array_equal(want, ops.frequencies(rotary, theta))  # the scaling changes some
    assert kernel.magnitude == float(np.float32(scaling.get("attention_factor", 1.0)))


def test_the_unscaled_frequencies_are_the_interpreters():
    kernel = Rope(64, 8, 128, 64, 1e4)
    assert np.array_equal(np.asarray(kernel.inv_freq, np.float32), ops.frequencies(64, 1e4))
    assert kernel.magnitude == 1.0


@pytest.mark.parametrize(("make", "per_vector", "turns", "copies", "grid", "threads"), [
    # 8 vectors of 4 pairs a head, 16 copied: 32 heads a CTA, 4 CTAs a row
    (lambda: Rope(2, 128, 192, 64, 1e4, offset=128, interleaved=True, scaling=YARN), 8, 8, 16, (2, 4, 1), 256),
    (lambda: Rope(2, 1, 64, 64, 1e4, interleaved=True, scaling=YARN), 8, 8, 0, (2, 1, 1), 32),
    # an offset of 30 values: 2-value vectors, 5 pairs of them turned, 30 copied around them
    (lambda: Rope(3, 3, 80, 20, 1e4, offset=30), 2, 5, 30, (3, 1, 1), 32),
    (lambda: Rope(1, 2, 6, 2, 1e4, offset=2, interleaved=True), 2, 1, 2, (1, 1, 1), 32),
])
def test_offset_and_interleaved_pairs_tile_the_head(make, per_vector, turns, copies, grid, threads):
    kernel = make()
    assert (kernel.per_vector, kernel.turns, kernel.copies) == (per_vector, turns, copies)
    assert (kernel.launch().grid, kernel.launch().block[0]) == (grid, threads)


def test_the_cubin_follows_the_scaling():
    assert cache_key(Rope(1, 4, 64, 64, 1e4)) != cache_key(Rope(1, 4, 64, 64, 1e4, scaling={**YARN_LOUD}))
    assert cache_key(Rope(1, 4, 64, 64, 1e4, scaling=YARN)) != cache_key(
        Rope(1, 4, 64, 64, 1e4, scaling={**YARN, "attention_factor": 1.2}))
    assert cache_key(Rope(1, 4, 64, 64, 1e4, interleaved=True)) != cache_key(Rope(1, 4, 64, 64, 1e4))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Rope(1, 4, 64, 64, 1e4, scaling={"kind": "linear", "factor": 2.0}), "scaling kind 'linear'"),
    (lambda: Rope(1, 4, 64, 64, 1e4, scaling={**LLAMA3, "mscale": 1.0}), "scaling llama3 takes no mscale"),
    (lambda: Rope(1, 4, 64, 64, 1e4, scaling={"kind": "llama3", "factor": 8.0}), "needs llama3's factor"),
    (lambda: Rope(1, 4, 64, 64, 1e4, scaling={**YARN, "attention_factor": 0.0}), "positive attention_factor"),
    (lambda: Rope(1, 4, 64, 32, 1e4, offset=40), "rotary 32 must be even and 2..unit (64) less the offset (40)"),
    (lambda: Rope(1, 4, 64, 32, 1e4, offset=3, interleaved=True), "interleaved pairs need an even offset"),
])
def test_bad_scalings_and_layouts_say_why_in_one_line(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        make()
    assert "\n" not in str(error.value) and str(error.value).startswith("rope ")


ROPE = """
builtin.module {
  form.step batch 3 tokens 1 {
    %tokens = form.input {role = "tokens"} : tensor<3xi32>
    %positions = form.input {role = "positions"} : tensor<3xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %qw = form.weight {name = "q", format = "bf16"} : tensor<384x256xbf16>
    %h = form.embed %tokens, %table : (tensor<3xi32>, tensor<64x256xbf16>) -> tensor<3x256xbf16>
    %q = form.product %h, %qw : (tensor<3x256xbf16>, tensor<384x256xbf16>) -> tensor<3x384xbf16>
    %qr = form.rope %q, %positions {heads = 2 : i64, rotary = 64 : i64, theta = 1.000000e+04 : f64, SCALING} : (tensor<3x384xbf16>, tensor<3xi32>) -> tensor<3x384xbf16>
    form.return %qr : tensor<3x384xbf16>
  }
}
"""


@pytest.mark.parametrize(("properties", "expect"), [
    ('scaling = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, '
     "original_context = 64 : i64", {"scaling": {**LLAMA3, "original_context": 64}}),
    ('scaling = "yarn", factor = 40.0 : f64, original_context = 4096 : i64, beta_fast = 32.0 : f64, '
     "beta_slow = 1.0 : f64, truncate = 1 : i64, attention_factor = 1.0 : f64, offset = 128 : i64, interleaved = 1 : i64",
     {"scaling": YARN, "offset": 128, "interleaved": True}),
], ids=["llama3", "yarn-deepseek"])
def test_the_lowering_gives_the_kernel_the_forms_scaling_and_layout(tmp_path, properties, expect):
    source = tmp_path / "rope.mlir"
    source.write_text(ROPE.replace("SCALING", properties))
    module, where = parse_verify(source)
    fuse(module, LaneShim(), where)
    step = next(iter(lower_module(module).ops))
    ropes = [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp) and op.kernel.data == "rope"]
    assert len(ropes) == 1
    spec = spec_of(ropes[0])
    assert spec == {"rows": 3, "heads": 2, "unit": 192, "rotary": 64, "theta": 1e4, **expect}
    Rope(**spec)  # the recorded specialization builds the kernel again (as the plan writer does)
