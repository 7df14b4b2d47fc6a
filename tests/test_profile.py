"""`lanec run --profile` / `--trace` without a GPU: the traffic the compiler records in a plan's
launches (`Launch.traffic`), the layer kinds the profile groups by, its tables and its Chrome
trace, on a compiled plan of two KDA layers and one MLA layer with invented times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.codegen.kernels.base import traffic
from lanec.runtime import profile
from lanec.runtime.plan import Plan

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    folder = tmp_path_factory.mktemp("profile")
    form = folder / "kimi.mlir"
    runner = CliRunner()
    result = runner.invoke(main, ["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--layers",
                                  "4", "--dense-mlp", "1024", "--batch", "2", "-o", str(form)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["compile", str(form), "-o", str(folder / "kimi.plan")])
    assert result.exit_code == 0, result.output
    return Plan.read(folder / "kimi.plan")


def test_traffic_counts_what_a_launch_reads_and_writes():
    from lanec.codegen.kernels.embed import Embed
    from lanec.codegen.kernels.gemv import Gemv

    gemv = Gemv(2, 2304, [4096])
    assert traffic(gemv) == {"read": 2 * (2 * 2304 + 4096 * 2304), "written": 2 * 2 * 4096}
    # an embed reads a table row a token, not the table
    assert traffic(Embed(3, 163840, 2304)) == {"read": 4 * 3 + 2 * 3 * 2304, "written": 2 * 3 * 2304}


def test_every_launch_of_a_plan_records_its_traffic(plan: Plan):
    assert all(launch.traffic["read"] > 0 and launch.traffic["written"] >= 0 for launch in plan.launches)
    kda = [launch for launch in plan.launches if launch.name.startswith("kda_split")]
    # a KDA state of 32 heads x 128 x 128 fp32 a request (2 requests) read and written back
    state = 2 * 32 * 128 * 128 * 4
    assert all(launch.traffic["read"] > state and launch.traffic["written"] > state for launch in kda)
    reread = Plan.from_bytes(plan.to_bytes())
    assert [launch.traffic for launch in reread.launches] == [launch.traffic for launch in plan.launches]


def test_layer_kinds_name_each_layers_mixer_and_mlp(plan: Plan):
    names = [launch.name for launch in plan.launches]
    assert profile.layer_of("gemv model.layers.12.mlp.down_proj.out") == 12
    assert profile.layer_of("argmax token") is None
    kinds = profile.layer_kinds(names)
    assert kinds == {0: "KDA + dense", 1: "KDA + dense", 2: "KDA + dense", 3: "MLA + dense"}


def test_tables_and_trace_follow_the_times(plan: Plan, tmp_path: Path):
    times = [float(i + 1) for i in range(len(plan.launches))]
    copy_bw = 4.0e12
    lines = profile.tables(plan, times, step_us=0.9 * sum(times), copy_bw=copy_bw)
    assert lines[0].split()[:3] == ["launch", "us", "MB"]
    kinds = [line for line in lines if line.startswith(("KDA + dense", "MLA + dense", "outside the layers"))]
    assert len(kinds) == 3
    assert sum(int(line.split()[-5]) for line in kinds) == len(plan.launches)  # every launch in one group
    assert lines[-1].startswith(f"step {0.9 * sum(times):.2f} us in the graph; the launches alone sum to "
                                f"{sum(times):.2f} us")
    path = tmp_path / "trace.json"
    profile.write_trace(path, plan, times, copy_bw)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert [e["name"] for e in events] == [launch.name for launch in plan.launches]
    assert all(e["ph"] == "X" and e["dur"] == t for e, t in zip(events, times, strict=True))
    assert all(later["ts"] == pytest.approx(e["ts"] + e["dur"]) for e, later in zip(events, events[1:]))
    first = events[0]
    assert first["args"]["bytes"] == sum(plan.launches[0].traffic.values())
    assert first["args"]["copy share"] == pytest.approx(first["args"]["bytes"] / 1e-6 / copy_bw, abs=1e-6)
    with pytest.raises(ValueError, match="3 times for"):
        profile.timed(plan, [1.0, 2.0, 3.0])


def test_profile_refuses_check_and_interpret(tmp_path: Path, plan: Plan):
    from lanec.runtime.runner import Options, RunError, execute

    with pytest.raises(RunError, match="--profile / --trace time the plan on the GPU"):
        execute(tmp_path / "none.plan", Options(profile=True, check=True))
    with pytest.raises(RunError, match="--profile / --trace time the plan on the GPU"):
        execute(tmp_path / "none.plan", Options(trace=tmp_path / "t.json", interpret=True))
