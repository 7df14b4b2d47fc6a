"""How close a GPU result must come to the interpreter's, by stored dtype: the one table that
`lanec run --check` and the GPU tests (tests/gpu/) judge by.

A tolerance bounds every element: |got - want| <= rtol |want| + atol max|want|. `atol` is a share
of the reference's largest magnitude, so a bound reads the same at any scale; integers must
match exactly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from lanec.runtime import dtypes


class Tolerance(NamedTuple):
    rtol: float
    atol: float

    def excess(self, got, want) -> np.ndarray:
        """How far each |got - want| lies beyond the bound (<= 0 within it; NaN where either is
        NaN, which the caller judges)."""
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        scale = float(np.nanmax(np.abs(want))) if want.size and not np.isnan(want).all() else 0.0
        return np.abs(got - want) - (self.rtol * np.abs(want) + self.atol * scale)

    def __str__(self) -> str:
        return f"{self.atol:.1e}" if not self.rtol else f"{self.rtol:.1e}|x|+{self.atol:.1e}"


EXACT = Tolerance(0.0, 0.0)
_INTEGERS = {name: EXACT for name in dtypes.DTYPES if name not in dtypes.FLOATS}

# One kernel against the fp32 interpreter on the same inputs: a bf16 output carries one rounding
# (half an ulp, 2^-9) plus fp32 sums in another order; fp32 only the order.
KERNEL = {"bfloat16": Tolerance(2.0**-7, 2.0**-10), "float32": Tolerance(1e-5, 1e-6), **_INTEGERS}

# An attention on tensor cores against the fp32 interpreter: each probability is rounded to bf16
# (2^-9 relative) before it weighs its value row, as FlashAttention's kernels do, so an output
# near zero (a sum of many cancelling values) carries an absolute error of a few 2^-9 of the
# values' scale: a share of the output's largest magnitude twice the kernels' (2^-9 measured:
# 1.2e-4 at an output scale of about 0.1, 4096 keys).
ATTENTION = {"bfloat16": Tolerance(2.0**-7, 2.0**-8), **_INTEGERS}

# A whole step against the interpreter with the same bf16 stores (`lanec run --check`): two
# correct computations round different sums across every layer, so each output is held to a share
# of its largest magnitude.
STEP = {"bfloat16": Tolerance(0.0, 2e-2), "float16": Tolerance(0.0, 5e-3), "float32": Tolerance(0.0, 1e-3),
        **_INTEGERS}


# A step whose products read one-word int8 activations (`--words 1`, a `quantize` of one word or an
# epilogue's): where two correct computations of an activation differ by a bf16 ulp (the GPU's
# attention rounds its probabilities to bf16, the interpreter does not), a value near a boundary of
# its int8 steps goes to either side, a whole quantum (1/127 of its block's largest value) apart,
# where a bf16 store moves by half an ulp (2^-9). Measured on the CPU, 2026-11-29: the interpreter
# against itself with every attention output moved by up to 2^-9, on the GGUF Llama of
# tests/gpu/gguf_model.py, seeds 1, 2, 3 and 5. The outputs moved 1.7-3.1e-2 of their scale with one
# word, 0.9-1.6e-2 with bf16 activations and 0.5-1.1e-2 with two words: one word is at most 2.4x the
# bf16 plan. One-word steps are held to ONE_WORD times STEP (two words, which keep the remainder,
# to STEP).
ONE_WORD = 2.5


def one_word(bound: Tolerance) -> Tolerance:
    """`bound` for a step whose products read one-word int8 activations (ONE_WORD)."""
    return Tolerance(bound.rtol * ONE_WORD, bound.atol * ONE_WORD)


def reads_one_word(program) -> bool:
    """Whether a program quantizes an activation to one int8 word (a `quantize` step or an epilogue's)."""
    return any((step.op == "quantize" and step.properties.get("words") == 1) or step.properties.get("quantize") == 1
               for step in program.steps)


# The layers a step of STEP's tolerance was measured over (the plans of tests/gpu/plans.py hold 2
# to 4). Deeper, the bf16 roundings of the residual stream add up as a random walk: on the H200 the
# 27-layer Kimi-Linear-48B-A3B at batch 1 drifted from the interpreter by 7.7e-4 of scale after
# layer 0, 8.5e-3 after layer 4, 1.5e-2 after layer 12 and 2.3e-2 after layer 25 (the logits 2.4e-2),
# which `deep` holds to 2e-2 x sqrt(layers / 4): 5.1e-2 at layer 25.
CALIBRATED_LAYERS = 4


def growth(layers: int) -> float:
    """How a difference made of rounding flips grows through `layers` decoder layers, against the
    CALIBRATED_LAYERS the tolerances were set on: sqrt(layers / CALIBRATED_LAYERS) past them, as
    a sum of independent flips grows."""
    return math.sqrt(max(1.0, layers / CALIBRATED_LAYERS))


def deep(bound: Tolerance, layers: int) -> Tolerance:
    """`bound` for a value computed through `layers` decoder layers: grown by `growth(layers)`."""
    grow = growth(layers)
    return bound if grow == 1.0 else Tolerance(bound.rtol * grow, bound.atol * grow)


def state(dtype: str) -> Tolerance:
    """A state's tolerance after a step: a state integrates the step's bf16-stored activations;
    two correct computations of those activations differ by bf16 rounding flips (different
    summation orders), which reach a few 1e-3 of a recurrent state's scale within a layer or two
    (3.1e-3 measured over two KDA layers with fp32 against fp64 products), so a state is held to
    its inputs' bf16 tolerance."""
    own, bf16 = STEP[dtypes.canonical(dtype)], STEP["bfloat16"]
    return Tolerance(max(own.rtol, bf16.rtol), max(own.atol, bf16.atol))


class Absolute(NamedTuple):
    """numpy's tolerance (`np.isclose`): |got - want| <= atol + rtol |want|, `atol` absolute. For
    comparisons of values whose scale is fixed by construction (unit-norm keys, sigmoid gates)."""

    rtol: float
    atol: float


# KdaSplit against the interpreter, by what is compared (tests/gpu/test_kda_split.py): the output
# rows (bf16), the fp32 recurrent state (its delta-rule updates are fp32 throughout), and the output
# against the interpreter's whole `kda` op, which rounds where the fused kernel does not
KDA = {"output": Absolute(2e-2, 2e-2), "state": Absolute(2e-3, 2e-4), "oracle_output": Absolute(5e-2, 5e-2)}
