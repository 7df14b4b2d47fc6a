"""seeded compiles for sm_90a (CPU only): no PDL (nothing before it writes what it reads), 64-bit
integer multiplies for splitmix64, the value's product and sum each with an explicit rounding (never
fused into an FMA: the GPU's values are the host's bit for bit); bad specializations raise one line."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.kernels import kernel_class
from lanec.codegen.kernels.seeded import Seeded
from lanec.runtime import seeded


@pytest.mark.parametrize(("count", "dtype"), [(1, "bfloat16"), (6145, "bfloat16"), (65536, "float32")])
def test_compiles_for_sm90a(count, dtype):
    ptx = compiled_for_sm90a(Seeded(count, dtype)).ptx
    assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and not re.search(r"\bfma\.", ptx)
    assert re.search(r"\b(mul|mad)\.lo\.[su]64", ptx)
    assert ("cvt.rn.bf16.f32" in ptx) == (dtype == "bfloat16")


def test_launch_covers_every_value():
    kernel = Seeded(6145, "bfloat16")
    assert kernel_class("seeded") is Seeded
    assert kernel.launch().grid == (4, 1, 1) and not kernel.launch().pdl
    assert [p.name for p in kernel.params() if p.written] == ["out"]


def test_kernel_params_hold_the_offset_key():
    params = seeded.kernel_params("layer.0.w", 7, 1 << 33, 0.5, 1.0)
    words = params["key"].view(np.uint32).astype(object)
    assert int(words[0]) | int(words[1]) << 32 == seeded.offset_key("layer.0.w", 7, 1 << 33)
    assert params["affine"].tolist() == [seeded.step(0.5), 1.0]


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Seeded(0), "seeded: 0 values; 1 to 1073741824 a launch"),
    (lambda: Seeded((1 << 30) + 1), "fill a larger weight in parts"),
    (lambda: Seeded(16, "float16"), "seeded: dtype 'float16': bfloat16 or float32"),
])
def test_invalid_specializations_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        make()
    assert "\n" not in str(raised.value)
