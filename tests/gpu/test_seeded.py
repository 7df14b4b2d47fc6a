"""The seeded kernel on the GPU against its numpy twin (`lanec.runtime.seeded.values`), bit for bit:
every case of tests/gpu/cases/seeded.py (built by tests/gpu/build.py), each run with a fresh weight
name, seed, first index (past 2^32, where the offset key's high word matters), scale and center,
and a poisoned buffer (every value must be written)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.runtime import driver, dtypes, seeded
from lanec.runtime.artifact import load_artifact

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "gpu"


CASES = load("lanec_gpu_cases_seeded", HERE / "cases" / "seeded.py").CASES


@pytest.mark.parametrize("case", sorted(CASES))
def test_seeded_matches_numpy_bit_for_bit(case, stream):
    spec = CASES[case]
    count, dtype = spec["count"], spec["dtype"]
    rng = np.random.default_rng()
    name = f"model.layers.{rng.integers(64)}.mlp.experts.*.w{rng.integers(1, 4)}.weight"
    seed, start = int(rng.integers(1 << 31)), int(rng.integers(1 << 33))
    scale, center = float(rng.uniform(0.01, 2.0)), float(rng.choice([0.0, 1.0, -4.6]))
    artifact = load_artifact(BUILD / "seeded", case)
    assert artifact.params and artifact.launch, f"seeded/{case}: no artifact; run tests/gpu/build.py"
    inputs = seeded.kernel_params(name, seed, start, scale, center)
    storage = dtypes.storage(dtype)
    buffers = {"key": driver.Buffer.from_array(inputs["key"]), "affine": driver.Buffer.from_array(inputs["affine"]),
               "out": driver.Buffer.empty(count * storage.itemsize)}
    try:
        buffers["out"].fill(0xFF)  # NaN in bf16 and fp32: a value never written differs
        function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
        driver.launch(function, artifact.launch, [buffers[p.name].ptr for p in artifact.params], stream)
        stream.synchronize()
        got = buffers["out"].to_array(storage, (count,))
    finally:
        for buffer in buffers.values():
            buffer.free()
    want = dtypes.encode(seeded.values(name, seed, start, count, scale, center, dtype), dtype)
    bits = f"u{storage.itemsize}"  # compared as bits: fp32 values too
    differ = np.flatnonzero(got.view(bits) != np.ascontiguousarray(want).view(bits))
    assert differ.size == 0, (f"{case} ({name!r}, seed {seed}, start {start}): {differ.size} of {count} values differ; "
                              f"first at {differ[0]}: got {got[differ[0]]}, want {want[differ[0]]}")
