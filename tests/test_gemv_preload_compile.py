"""gemv and gated_gemv with their weight rows preloaded into shared memory (RowSchedule preload)
compile for sm_90a: one bulk copy a source armed on one mbarrier before the PDL wait, no weight
load from global memory, the barrier waited after it, no local memory; one wave of CTAs by
default; and the specializations it refuses say why."""

from __future__ import annotations

import re

import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.facts import SHARED_LIMIT, SM_COUNT
from lanec.codegen.kernels.gated_gemv import GatedGemv
from lanec.codegen.kernels.gemv import Gemv
from lanec.codegen.kernels.q8_gemv import Q8Gemv


@pytest.mark.parametrize("make", [
    lambda: Gemv(1, 4096, (2304,), schedule={"preload": True, "warps": 8}),  # Kimi Linear's o_proj
    lambda: Gemv(3, 1000, (1001,), schedule={"preload": True, "warps": 2}),
    lambda: Gemv(2, 2304, (777,), norm=True, residual=True, schedule={"preload": True}),
    lambda: GatedGemv(1, 2304, 1000, schedule={"preload": True}),
])
def test_preload_copies_the_rows_before_the_wait(make):
    kernel = make()
    ptx = compiled_for_sm90a(kernel).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    assert before.count("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes") == kernel.sources
    assert "mbarrier.arrive.expect_tx" in before and "mbarrier.try_wait" in after
    assert "ld.global.nc" not in ptx  # every weight value comes from the shared rows
    assert after.count("ld.shared.v4") >= kernel.sources * kernel.rows_per_cta * kernel.steps
    assert ".local" not in ptx
    assert kernel.launch().grid[0] <= SM_COUNT or kernel.outputs > SM_COUNT * kernel.rows_per_cta
    assert kernel.shared_bytes() >= kernel.preload_bytes() == kernel.sources * kernel.rows_per_cta * kernel.width * 2


def test_preload_defaults_to_one_wave():
    kernel = Gemv(1, 4096, (2304,), schedule={"preload": True})
    assert kernel.rows_per_cta == 18 and kernel.launch().grid == (128, 1, 1)
    # the rows, the barrier 16-byte aligned, then the warps' sums (32 a warp: 18 rows round up)
    assert kernel.shared_bytes() == 18 * 4096 * 2 + 16 + 4 * 8 * 32


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(1, 4096, (2304,), schedule={"preload": True, "tensor_cores": True}), "on the CUDA cores only"),
    (lambda: Gemv(1, 9216, (2304,), schedule={"preload": True}),
     f"take {2 * 18 * 9216} bytes of shared memory; a CTA has"),
    (lambda: Q8Gemv(1, 4096, (2304,), schedule={"preload": True}), "schedule preload must be false"),
    (lambda: Gemv(1, 4096, (2304,), schedule={"preload": 1}), "RowSchedule preload is true, false or absent"),
])
def test_preload_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_the_limit_is_the_shared_memory_a_cta_may_use():
    # 14 rows of 8192 values: 229376 bytes, under the 232448; 15 are over it
    assert Gemv(1, 8192, (1300,), schedule={"preload": True, "rows_per_cta": 14}).shared_bytes() <= SHARED_LIMIT
    with pytest.raises(ValueError, match="fewer rows a CTA"):
        Gemv(1, 8192, (1300,), schedule={"preload": True, "rows_per_cta": 15})
