"""gemv with a norm prologue (fold-norm-into-gemv) compiles for sm_90a: the weights and the norm
weight are loaded before the PDL wait, the activation and residual after it, no local memory; and
the specializations it refuses say why."""

from __future__ import annotations

import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.kernels.gemv import Gemv


@pytest.mark.parametrize("make", [
    lambda: Gemv(1, 2304, (4096, 4096, 4096, 128, 32, 128), norm=True, eps=1e-5, residual=True),
    lambda: Gemv(3, 1000, (1001,), norm=True, residual=True),
    lambda: Gemv(2, 2304, (2048,), norm=True, x_pitch=2560),
])
def test_norm_prologue_compiles_without_local_memory(make):
    kernel = make()
    ptx = compiled_for_sm90a(kernel).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    # weight vectors and the norm weight in flight before the wait; x (and residual) after it
    assert before.count("ld.global") >= kernel.rows_per_cta * kernel.steps + kernel.steps
    assert "ld.global" in after and "bar.sync" in after
    names = [p.name for p in kernel.params()]
    assert names == (["x", "residual", "norm_w", "w", "y", "h"] if kernel.residual else ["x", "norm_w", "w", "y"])


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(4, 2304, (4096,), norm=True), "4 rows are above the 3 of the CUDA-core path"),
    (lambda: Gemv(3, 9216, (4096,), norm=True), "hold 15 vectors a thread, above the 8"),
    (lambda: Gemv(1, 2304, (4096,), residual=True), "a residual is added only by a norm prologue"),
    (lambda: Gemv(1, 2304, (4096,), norm=True, schedule={"tensor_cores": True}), "only on the CUDA cores"),
    (lambda: Gemv(3, 128, (512,), per_head=(8, 192, 64), norm=True), "the norm needs whole rows"),
])
def test_norm_prologue_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=message):
        make()
