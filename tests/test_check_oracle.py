"""The oracle `lanec run --check` uses: the plan's program is the fused form, interpreted with
bf16 stores rounded as the kernels round them; chosen tokens are judged against the logits."""

from __future__ import annotations

import numpy as np
import pytest

from lanec.interp import ops
from lanec.interp.environment import random_environment
from lanec.interp.lower import program_of
from lanec.runtime.dtypes import round_bf16
from lanec.runtime.runner import compare_choice

FORM = """
builtin.module {
  form.step batch 3 tokens 1 {
    %x = form.input {role = "tokens"} : tensor<3xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<40x64xbf16>
    %gw = form.weight {name = "gate", format = "bf16"} : tensor<96x64xbf16>
    %uw = form.weight {name = "up", format = "bf16"} : tensor<96x64xbf16>
    %dw = form.weight {name = "down", format = "bf16"} : tensor<40x96xbf16>
    %h = form.embed %x, %table : (tensor<3xi32>, tensor<40x64xbf16>) -> tensor<3x64xbf16>
    %s = form.gated_product %h, %gw, %uw
        : (tensor<3x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> tensor<3x96xbf16>
    %d = form.product %s, %dw : (tensor<3x96xbf16>, tensor<40x96xbf16>) -> tensor<3x40xf32>
    %t = form.argmax %d : (tensor<3x40xf32>) -> tensor<3xi32>
    form.return %d, %t : tensor<3x40xf32>, tensor<3xi32>
  }
}
"""


def program():
    from lanec.diagnostics import load_module

    return program_of(load_module(FORM))


def test_storage_mode_rounds_what_is_stored_as_bf16_only():
    prog = program()
    env = random_environment(prog, seed=11)
    exact, stored = {}, {}
    prog.run(env.copy(), values=exact)
    prog.run(env.copy(), storage=True, values=stored)
    swiglu = prog.steps[1].results[0]
    logits = prog.steps[2].results[0]
    assert prog.steps[1].stores == ["bf16"] and prog.steps[2].stores == ["f32"]
    # the gated pair's bf16 result is rounded; without storage mode it is not
    assert np.array_equal(stored[swiglu], round_bf16(exact[swiglu]))
    assert not np.array_equal(exact[swiglu], round_bf16(exact[swiglu]))
    # the f32 logits are not rounded: they are the product of the rounded activation
    want = ops.product(stored[swiglu], ops.f32(env.weights["down"]))
    assert np.allclose(stored[logits], want, rtol=1e-6, atol=1e-6)
    assert not np.array_equal(stored[logits], round_bf16(stored[logits]))


def test_bf16_rounding_is_to_nearest_even_and_keeps_specials():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, np.inf, -np.inf], np.float32)
    got = round_bf16(x)
    assert got.tolist()[:4] == [1.0, 1.0, 1.0 + 2**-6, -2.5]
    assert np.isinf(got[4]) and np.isinf(got[5])
    assert np.isnan(round_bf16(np.array([np.nan], np.float32)))[0]


def test_chosen_tokens_agree_within_a_near_tie_and_not_beyond():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((4, 50)).astype(np.float32)
    best = logits.argmax(axis=1)
    assert compare_choice("t", best.astype(np.int32), logits).ok
    # a near tie: another token within the tolerance of the best is accepted
    near = best.copy()
    other = (best[0] + 1) % 50
    logits[0, other] = logits[0, best[0]] - 1e-4
    near[0] = other
    assert compare_choice("t", near.astype(np.int32), logits).ok
    # a token far below the best is a mismatch, reported as the fraction of rows
    far = best.copy()
    far[2] = int(logits[2].argmin())
    result = compare_choice("t", far.astype(np.int32), logits)
    assert not result.ok and result.error == pytest.approx(0.25)
    assert not compare_choice("t", np.array([0, 1, 2, 99], np.int32), logits).ok
