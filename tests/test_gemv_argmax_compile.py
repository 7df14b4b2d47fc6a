"""gemv with the argmax in its epilogue (fold-argmax-into-gemv) compiles for sm_90a: one shared
64-bit atomic minimum a CTA gathers its outputs' keys; at each of two levels (the CTA's ticket
group, then the grid) a global minimum a row and a ticket between fences, the keys read through L2; no local memory; the refusals say why. On the GPU:
tests/gpu/test_kernels.py's `argmax` gemv cases (three launches each, the scratch back at its start)."""

from __future__ import annotations

import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.facts import ARGMAX_GROUPS, ARGMAX_SLOT
from lanec.codegen.kernels.gemv import Gemv


@pytest.mark.parametrize("rows, width, outputs", [(1, 2304, 163840), (3, 1000, 50001), (2, 64, 999)])
def test_argmax_epilogue_compiles_with_one_ticket_a_cta(rows, width, outputs):
    kernel = Gemv(rows, width, (outputs,), argmax=True)
    ptx = compiled_for_sm90a(kernel).ptx
    assert ptx.count("red.shared.min.u64") == 1  # the CTA's keys, every output offering its own
    # two levels: a row's key into the CTA's group's slot, then the group's last into the grid's
    assert ptx.count("red.global.min.u64") == 2 * rows
    # a ticket a level, each between two fences; each key read through L2 after a fence
    assert ptx.count("atom.global.inc.u32") == 2 and ptx.count("fence.acq_rel.gpu") == 4 + 2 * rows
    assert ptx.count("ld.global.cg.v2.u32") == 2 * rows
    assert ".local" not in ptx
    params = {p.name: p for p in kernel.params()}
    assert list(params) == ["x", "w", "y", "best", "tickets", "chosen"]
    assert params["best"].shape == params["tickets"].shape == (ARGMAX_GROUPS + 1, ARGMAX_SLOT)
    keys = -(-8 * max(rows, 2) // 16) * 16  # a key a row (two at least), then the last-CTA flag
    assert kernel.launch().shared_bytes == Gemv(rows, width, (outputs,)).launch().shared_bytes + keys + 16


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(4, 2304, (4096,), argmax=True), "argmax epilogue: 4 rows take the tensor cores"),
    (lambda: Gemv(1, 2304, (4096, 128), argmax=True), "the product's output row is its one part"),
    (lambda: Gemv(3, 128, (512,), per_head=(8, 192, 64), argmax=True), "the product's output row is its one part"),
    (lambda: Gemv(1, 2304, (4096,), argmax=True, schedule={"tensor_cores": True}), "only on the CUDA cores"),
])
def test_argmax_epilogue_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=message):
        make()
