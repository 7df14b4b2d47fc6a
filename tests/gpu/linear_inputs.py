"""What the GPU tests of the linear-attention kernels with state slots (test_conv.py,
test_delta_rule.py) share: slot tables drawn as the interpreter's contract allows them (active
requests own distinct slots, some requests padding, with speculative tokens the accepted counts
1..tokens), and one launch of a compiled case on given inputs, its outputs poisoned first and its
states uploaded, that returns every written param as the device left it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lanec.runtime import driver
from lanec.runtime.artifact import load_artifact
from lanec.runtime.dtypes import from_bf16, storage

BUILD = Path(__file__).resolve().parents[2] / "build" / "gpu"


def draw_slots(rng, batch: int, tokens: int, columns: int, state_slots: int):
    """(slots [batch] or [batch, columns] int32, accepted [batch] int32 or None): a quarter of the
    requests padding (their read slot -1, the first request always active); with tokens > 1 a few
    write slots of active requests padding as well (never the conv slot nor the read slot)."""
    width = max(columns, 1)
    if batch * width + 1 > state_slots:
        raise AssertionError(f"{state_slots} state slots cannot give {batch} requests {width} slots each")
    table = (1 + rng.permutation(state_slots - 1)[: batch * width]).reshape(batch, width).astype(np.int32)
    accepted = rng.integers(1, tokens + 1, size=batch).astype(np.int32) if tokens > 1 else None
    for b in range(batch):
        read = 0 if accepted is None else int(accepted[b]) - 1
        if b and rng.random() < 0.25:
            table[b, read] = -1
            continue
        for t in range(1, tokens):
            if t != read and rng.random() < 0.2:
                table[b, t] = 0
    return (table[:, 0].copy() if columns == 0 else table), accepted


def launch_case(kernel: str, case: str, stored: dict, stream) -> dict:
    """Launch build/gpu/`kernel`/`case` on `stored` (every param the kernel reads, and its states,
    as the device stores them: a pitched param as wide as its pitch); written params that are not
    in `stored` start poisoned (0xFF bytes: NaN in bf16 and f32). Returns the written params read
    back (bf16 as fp32 values)."""
    artifact = load_artifact(BUILD / kernel, case)
    function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
    buffers = []
    try:
        for param in artifact.params:
            if param.name in stored:
                buffers.append(driver.Buffer.from_array(np.ascontiguousarray(stored[param.name])))
            else:
                assert param.written, f"{kernel}/{case}: no input drawn for {param.name}"
                buffer = driver.Buffer.empty(int(np.prod(param.shape)) * storage(param.dtype).itemsize)
                buffer.fill(0xFF)
                buffers.append(buffer)
        driver.launch(function, artifact.launch, [b.ptr for b in buffers], stream)
        stream.synchronize()
        results = {}
        for param, buffer in zip(artifact.params, buffers, strict=True):
            if param.written:
                if param.dtype == "bfloat16":
                    results[param.name] = from_bf16(buffer.to_array(np.uint16, param.shape))
                else:
                    results[param.name] = buffer.to_array(np.dtype(param.dtype), param.shape)
        return results
    finally:
        for buffer in buffers:
            buffer.free()
