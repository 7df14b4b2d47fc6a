"""`lanec run --profile --trace` on the GPU: the KDA-only Kimi Linear plan at batch 64 (gemm_tc,
the gated pair, kda_split, tests/gpu/plans.py), profiled; the trace holds every launch once, in
launch order, each timed (> 0) with the traffic the plan records, and the tables account for every
launch in their layer-kind groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loader import load

from lanec.runtime.plan import Plan
from lanec.runtime.runner import Options, execute

HERE = Path(__file__).resolve().parent
plans = load("lanec_gpu_plans_for_profile", HERE / "plans.py")


def test_profile_times_every_launch_and_writes_the_trace(tmp_path: Path) -> None:
    path = plans.OUT / "kimi-kda-b64.plan"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python tests/gpu/plans.py` on the CPU machine and carry build/",
                    pytrace=False)
    lines: list[str] = []
    trace = tmp_path / "trace.json"
    assert execute(path, Options(profile=True, trace=trace, steps=3, repeats=5), lines.append) == 0
    plan = Plan.read(path)
    events = json.loads(trace.read_text())["traceEvents"]
    assert [e["name"] for e in events] == [launch.name for launch in plan.launches]
    assert all(e["dur"] > 0 for e in events)
    assert all(e["args"]["bytes"] == sum(launch.traffic.values()) for e, launch in zip(events, plan.launches))
    groups = [line for line in lines if line.startswith(("KDA + dense", "outside the layers"))]
    assert sum(int(line.split()[-5]) for line in groups) == len(plan.launches)
    step = next(line for line in lines if line.startswith("step "))
    step_us, eager_us = float(step.split()[1]), float(step.split(" sum to ")[1].split()[0])
    assert 0 < step_us < 2 * eager_us, step  # the graph's step is not slower than the launches one by one
