"""Seeded weights made on the GPU (lanec/runtime/gpu_seeding.py) against the host's
(`weights.make`), bit for bit: every binding of the KDA-only Kimi Linear plan at batch 64 (products in
parts, the gated pair's interleaved tiles, the lm head) that the plan's seeders fill, buffers
poisoned first; the bindings left to the host are made there as before. Then the plan's step
with `--gpu-seeding` agrees with the interpreter (which makes only the rows it reads)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.runtime import driver, dtypes, gpu_seeding, weights
from lanec.runtime.plan import Plan

HERE = Path(__file__).resolve().parent
plans = load("lanec_gpu_plans_for_seeding", HERE / "plans.py")


def test_gpu_seeding_gives_the_hosts_bits(stream) -> None:
    path = plans.OUT / "kimi-kda-b64.plan"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python tests/gpu/plans.py` on the CPU machine", pytrace=False)
    plan = Plan.read(path)
    buffers = {b.buffer: driver.Buffer.empty(plan.buffer(b.buffer).nbytes) for b in plan.weights}
    try:
        for buffer in buffers.values():
            buffer.fill(0xFF)
        made = gpu_seeding.fill(plan, buffers, 23, stream)
        assert len(made) >= len(plan.weights) - 2  # all but the convolutions' taps (stack, transpose)
        sources = weights.sources(plan, 23, lazy=True)
        for binding in plan.weights:
            if binding.buffer not in made:
                continue
            spec_ = plan.buffer(binding.buffer)
            want = np.asarray(weights.make(binding, sources, plan))
            storage = dtypes.storage(spec_.dtype)
            got = buffers[binding.buffer].to_array(storage, spec_.shape)
            bits = f"u{storage.itemsize}"
            differ = np.flatnonzero(got.view(bits) != np.ascontiguousarray(want).view(bits))
            assert differ.size == 0, f"{binding.buffer}: {differ.size} of {math.prod(spec_.shape)} values differ"
    finally:
        for buffer in buffers.values():
            buffer.free()


def test_a_plan_with_gpu_seeding_agrees_with_the_interpreter() -> None:
    from lanec.runtime.runner import Options, execute

    lines: list[str] = []
    status = execute(plans.OUT / "kimi-kda-b64.plan", Options(check=True, seed=7, gpu_seeding=True), lines.append)
    assert status == 0 and "agree with the interpreter" in "\n".join(lines), "\n".join(lines)

