"""Seeded weights made on the GPU (lanec/runtime/gpu_seeding.py), on the CPU: every weight binding
of compiled plans that `placements` takes (plain, a product in parts' rows concatenated with
alignment padding, experts stacked, a gated pair's tiles interleaved) lays out exactly the bits the
host's `weights.make` gives; the rest (a transpose, a slice) are left to the host; the plan carries
the seeded kernel for both dtypes and keeps it through a file."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.runtime import dtypes, gpu_seeding, weights
from lanec.runtime.plan import Buffer, Plan, Source, Transform, WeightBinding

ROOT = Path(__file__).resolve().parents[1]


def compiled(folder: Path, name: str, arguments: list[str]) -> Plan:
    form = folder / f"{name}.mlir"
    runner = CliRunner()
    result = runner.invoke(main, ["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"),
                                  *arguments, "-o", str(form)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["compile", str(form), "-o", str(folder / f"{name}.plan")])
    assert result.exit_code == 0, result.output
    return Plan.read(folder / f"{name}.plan")


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> list[Plan]:
    folder = tmp_path_factory.mktemp("seeding")
    # batch 64: products in parts and the gated pair on gemm_tc (interleaved tiles); the mixture's
    # experts stacked; the MLA layer's kv_b halves (reshape, slice, transpose: the host's)
    return [compiled(folder, "kda", ["--kda-only", "--dense-mlp", "1024", "--layers", "1", "--batch", "64"]),
            compiled(folder, "moe", ["--layers", "4", "--batch", "2"])]


def test_placements_lay_out_the_hosts_bits(plans: list[Plan]):
    kinds = set()
    for plan in plans:
        sources = weights.sources(plan, 11, lazy=True)  # only the bindings compared are made
        for binding in plan.weights:
            found = gpu_seeding.placements(binding, plan)
            if found is None:
                continue
            kinds.add(tuple(t.kind for t in binding.transforms))
            buffer = plan.buffer(binding.buffer)
            if math.prod(buffer.shape) > 40_000_000:
                continue  # the lm head and the stacked experts: the same arithmetic, too big for a test
            want = np.asarray(weights.make(binding, sources, plan)).view(np.uint8)
            got = np.asarray(dtypes.encode(gpu_seeding.host_values(binding, plan, 11), buffer.dtype)).view(np.uint8)
            assert np.array_equal(got, want), binding.buffer
    assert {(), ("concatenate",), ("interleave",)} <= kinds


@pytest.mark.parametrize("transform", [Transform("stack", {"axis": 0}), Transform("concatenate", {"axis": 0,
                                                                                                  "align": 16})])
def test_stacked_and_aligned_sources(transform: Transform):
    """Three sources stacked (a mixture's experts bound one a checkpoint tensor), or concatenated
    with each source's rows padded to 16 (zeros between)."""
    rows = 16 * 3 if transform.kind == "concatenate" else 3 * 8
    shape = (3, 8, 24) if transform.kind == "stack" else (rows, 24)
    plan = Plan(buffers=[Buffer("w", shape, "bfloat16", "weight")],
                weights=[WeightBinding("w", tuple(Source(f"s{i}", (8 if transform.kind == "stack" else 8 + i, 24),
                                                         scale=0.5) for i in range(3)), (transform,))])
    if transform.kind == "concatenate":
        plan.buffers[0] = Buffer("w", (16 * 3, 24), "bfloat16", "weight")
    binding = plan.weights[0]
    want = weights.make(binding, weights.sources(plan, 5), plan)
    got = dtypes.encode(gpu_seeding.host_values(binding, plan, 5), "bfloat16")
    assert np.array_equal(np.asarray(got).view(np.uint16), np.asarray(want).view(np.uint16))


def test_bindings_that_do_more_than_place_stay_on_the_host(plans: list[Plan]):
    left = {tuple(t.kind for t in b.transforms) for plan in plans for b in plan.weights
            if gpu_seeding.placements(b, plan) is None}
    assert ("stack", "transpose") in left  # the KDA convolutions' taps
    assert any("slice" in kinds for kinds in left)  # the latent attention's kv_b halves


def test_the_plan_carries_its_seeders(plans: list[Plan]):
    plan = plans[0]
    assert [(s.dtype, s.count) for s in plan.seeders] == [(d, gpu_seeding.SEEDER_COUNT)
                                                          for d in gpu_seeding.SEEDED_DTYPES]
    reread = Plan.from_bytes(plan.to_bytes())
    assert [(s.dtype, s.entry, s.shape, s.cubin) for s in reread.seeders] == [
        (s.dtype, s.entry, s.shape, s.cubin) for s in plan.seeders]
    assert reread.seeders[0].shape.grid[0] * reread.seeders[0].shape.block[0] * 8 == gpu_seeding.SEEDER_COUNT


def test_gpu_seeding_keeps_the_hosts_sources_lazy(plans: list[Plan], tmp_path: Path):
    """With --gpu-seeding (the default; no checkpoint) the host makes no weight until the
    interpreter reads it; with --host-seeding, every source is made as before."""
    from lanec.interp.lazy import LazyWeight
    from lanec.interp.program import Program
    from lanec.runtime.runner import Options, plan_sources

    plan = plans[0]
    path = tmp_path / "kda.plan"
    plan.write(path)
    program = Program.from_json(plan.program)
    lazy = plan_sources(plan, program, Options(gpu_seeding=True), path)
    assert all(isinstance(v, LazyWeight) and v.generated == 0 for v in lazy.values())
    eager = plan_sources(plan, program, Options(gpu_seeding=False), path)
    assert not any(isinstance(v, LazyWeight) for v in eager.values())
