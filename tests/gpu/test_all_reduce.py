"""The one-shot all-reduce kernel (lanec/codegen/kernels/all_reduce.py) on one GPU, every case of
tests/gpu/cases/all_reduce.py: its N ranks are N concurrent launches, each on a stream of its own
with a region of its own (zeroed, as `PeerMemory` makes it), the peer table pointing each launch at
every region, as CUDA IPC maps them across processes. Three steps with fresh random partial sums
each (the parity halves and the epochs advance), targets poisoned first: every rank's total must be
the interpreter's sum in rank order (`ops.all_reduce`, rounded to the dtype once), the same bits on
every rank. A launch that never meets its peers fails after DEADLINE_S rather than hangs. The same
for all_reduce_norm (tests/gpu/cases/all_reduce_norm.py): every rank's normalized rows and new
residual stream must be the interpreter's all-reduce, rounded to bf16, then its rmsnorm. Across
processes and GPUs: tests/gpu/test_tp_nccl.py (LANEC_ALL_REDUCE=oneshot, oneshot-apart)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.interp import ops
from lanec.runtime import driver
from lanec.runtime.artifact import load_artifact
from lanec.runtime.dtypes import from_bf16, round_bf16, to_bf16
from lanec.runtime.peer import PeerLayout, table

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "gpu" / "all_reduce_oneshot"
CASES = load("lanec_gpu_cases_all_reduce", HERE / "cases" / "all_reduce.py").CASES
NORM_BUILD = HERE.parents[1] / "build" / "gpu" / "all_reduce_norm"
NORM_CASES = load("lanec_gpu_cases_all_reduce_norm", HERE / "cases" / "all_reduce_norm.py").CASES
STEPS = 3
DEADLINE_S = 10.0


def finished(streams) -> None:
    """Wait for every rank's stream, failing (not hanging) past DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    pending = list(streams)
    while pending:
        pending = [s for s in pending
                   if driver.cu.cuStreamQuery(s.handle)[0] == driver.cu.CUresult.CUDA_ERROR_NOT_READY]
        if pending and time.monotonic() > deadline:
            pytest.fail(f"{len(pending)} ranks still wait for their peers after {DEADLINE_S:.0f} s", pytrace=False)
        time.sleep(0.001)
    for stream in streams:
        stream.synchronize()  # a launch that failed says so here


def emulated_ranks(layout: PeerLayout) -> tuple[list, list, list]:
    """The ranks as concurrent launches on this GPU: each rank's region (zeroed, as `PeerMemory`
    makes it), its peer table pointing at every region, and a stream of its own."""
    regions = [driver.Buffer.empty(layout.total) for _ in range(layout.ranks)]
    for region in regions:
        region.fill(0)
    tables = [driver.Buffer.from_array(table(r, [g.ptr for g in regions])) for r in range(layout.ranks)]
    return regions, tables, [driver.Stream() for _ in range(layout.ranks)]


def release(buffers, streams) -> None:
    for buffer in buffers:
        buffer.free()
    for each in streams:
        each.destroy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_rank_gets_the_sum_in_rank_order(case, stream):
    spec = CASES[case]
    count, dtype, ranks = spec["count"], spec["dtype"], spec["ranks"]
    artifact = load_artifact(BUILD, case)
    function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
    layout = PeerLayout(count, dtype, ranks)
    regions, tables, streams = emulated_ranks(layout)
    itemsize = 2 if dtype == "bfloat16" else 4
    sources = [driver.Buffer.empty(count * itemsize) for _ in range(ranks)]
    targets = [driver.Buffer.empty(count * itemsize) for _ in range(ranks)]
    rng = np.random.default_rng()
    try:
        for step in range(STEPS):
            parts = [rng.standard_normal(count, dtype=np.float32) for _ in range(ranks)]
            if dtype == "bfloat16":
                parts = [round_bf16(p) for p in parts]
            for part, source, target in zip(parts, sources, targets, strict=True):
                source.upload(to_bf16(part) if dtype == "bfloat16" else part)
                target.fill(0xFF)
            for r in range(ranks):
                driver.launch(function, artifact.launch, [sources[r].ptr, targets[r].ptr, tables[r].ptr], streams[r])
            finished(streams)
            want = ops.all_reduce(parts)
            want = round_bf16(want) if dtype == "bfloat16" else want
            got = [from_bf16(t.to_array(np.uint16, (count,))) if dtype == "bfloat16"
                   else t.to_array(np.float32, (count,)) for t in targets]
            for r, values in enumerate(got):
                wrong = np.flatnonzero(values != want)
                assert wrong.size == 0, (f"{case} step {step} rank {r}: {wrong.size} of {count} values differ; first "
                                         f"at {wrong[0]}: got {values[wrong[0]]}, want {want[wrong[0]]}")
    finally:
        release([*regions, *tables, *sources, *targets], streams)


@pytest.mark.parametrize("case", sorted(NORM_CASES))
def test_every_rank_gets_the_norm_of_the_sum_in_rank_order(case, stream):
    spec = NORM_CASES[case]
    rows, width, ranks, residual = spec["rows"], spec["width"], spec["ranks"], spec["residual"]
    artifact = load_artifact(NORM_BUILD, case)
    function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
    layout = PeerLayout(rows * width, "bfloat16", ranks, rows=rows)
    regions, tables, streams = emulated_ranks(layout)
    row_bytes = rows * width * 2

    def made(count):
        return [driver.Buffer.empty(row_bytes) for _ in range(count)]

    sources, ys, hs = made(ranks), made(ranks), made(ranks)
    extra = driver.Buffer.empty(row_bytes)  # the residual stream every rank holds (replicated)
    weight = driver.Buffer.empty(width * 2)
    rng = np.random.default_rng()
    try:
        for step in range(STEPS):
            parts = [round_bf16(rng.standard_normal((rows, width), dtype=np.float32)) for _ in range(ranks)]
            stream_in = round_bf16(rng.standard_normal((rows, width), dtype=np.float32))
            w = round_bf16(rng.uniform(0.5, 1.5, width).astype(np.float32))
            extra.upload(to_bf16(stream_in))
            weight.upload(to_bf16(w))
            for part, source, y, h in zip(parts, sources, ys, hs, strict=True):
                source.upload(to_bf16(part))
                y.fill(0xFF)
                h.fill(0xFF)
            for r in range(ranks):
                args = [sources[r].ptr, *([extra.ptr] if residual else []), weight.ptr, ys[r].ptr,
                        *([hs[r].ptr] if residual else []), tables[r].ptr]
                driver.launch(function, artifact.launch, args, streams[r])
            finished(streams)
            total = round_bf16(ops.all_reduce(parts))  # the all-reduce's total as the unfused step stores it
            want = ops.rmsnorm(total, w, spec["eps"], stream_in if residual else None)
            want_y, want_h = (round_bf16(want[0]), round_bf16(want[1])) if residual else (round_bf16(want), None)
            for r in range(ranks):
                got_y = from_bf16(ys[r].to_array(np.uint16, (rows, width)))
                # the kernel's fp32 sum of squares goes in another order than numpy's: y within a bf16 step
                close = np.abs(got_y - want_y) <= np.abs(want_y) * 2.0 ** -7 + 1e-6
                assert close.all(), (f"{case} step {step} rank {r}: {int((~close).sum())} of {close.size} y values "
                                     f"differ; first {got_y[~close][0]} against {want_y[~close][0]}")
                if residual:  # the new residual stream: exact (one bf16 rounding of total + residual)
                    got_h = from_bf16(hs[r].to_array(np.uint16, (rows, width)))
                    wrong = np.flatnonzero(got_h != want_h)
                    assert wrong.size == 0, f"{case} step {step} rank {r}: {wrong.size} h values differ"
            assert all(np.array_equal(ys[0].to_array(np.uint16, (rows, width)), y.to_array(np.uint16, (rows, width)))
                       for y in ys[1:]), f"{case} step {step}: the ranks' y differ in their bits"
    finally:
        release([*regions, *tables, *sources, *ys, *hs, extra, weight], streams)
