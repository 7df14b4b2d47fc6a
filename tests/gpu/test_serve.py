"""`lanec run --serve` on the GPU: whole plans with states and caches (tests/gpu/plans.py) held under
load. Each serves 2,000 consecutive steps with requests joining and leaving every 25 steps and a
drift check every 500 (the interpreter from the GPU's own states before the step, judged as
`--check` judges); two runs of 300 steps of the same inputs give the same digest, bit for bit, and
another seed another one; the graph, its inputs written in place before each replay, gives the
eager launches' digest.

The 10,000-step run of issue 15 (lanec/runtime/serve.py), on the H200:

    python3 -m lanec.runtime build/plans/kimi-b8.plan --serve 10000 --churn 50 --check-every 2000
"""

from __future__ import annotations

from pathlib import Path

import pytest
from loader import load

from lanec.runtime.runner import Options, execute

HERE = Path(__file__).resolve().parent
plans = load("lanec_gpu_plans_for_serve", HERE / "plans.py")

# a slot table alone (KDA, batch 1: a request rejoins the slot it freed), a page table alone (the
# dense KV caches at batch 8), and both with positions (KDA layers and the MLA's latent cache, batch 3)
SERVED = ["kimi-kda-b1", "dense-small-b8", "kimi-mla-b3"]


def serve(name: str, **options) -> list[str]:
    path = plans.OUT / f"{name}.plan"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python tests/gpu/plans.py {name}` on the CPU machine and carry "
                    "build/", pytrace=False)
    lines: list[str] = []
    status = execute(path, Options(**options), lines.append)
    assert status == 0, "\n".join(lines)
    return lines


def line(lines: list[str], start: str) -> str:
    return next(text for text in lines if text.startswith(start))


@pytest.mark.parametrize("name", SERVED)
def test_two_thousand_served_steps_agree_with_their_drift_checks(name: str) -> None:
    lines = serve(name, serve=2000, churn=25, check_every=500, seed=3)
    checks = [text for text in lines if text.startswith("step ")]
    assert [text.split(":")[0] for text in checks] == ["step 500", "step 1000", "step 1500", "step 2000"]
    assert all(" agree with the interpreter;" in text and "MISMATCH" not in text for text in checks)
    assert line(lines, "drift: 4 checks, all agree; worst ")
    joined = int(line(lines, "requests: ").split()[1])
    assert joined >= 2000 // 25 - 1
    served = line(lines, "served 2000 steps in ")
    assert float(served.split(": ")[1].split()[0]) > 0


@pytest.mark.parametrize("name", SERVED)
def test_two_runs_of_the_same_inputs_are_bitwise_identical(name: str) -> None:
    first = line(serve(name, serve=300, churn=10, seed=5), "digest ")
    again = line(serve(name, serve=300, churn=10, seed=5), "digest ")
    other = line(serve(name, serve=300, churn=10, seed=6), "digest ")
    assert first == again and first != other


def test_the_graph_replays_inputs_written_in_place() -> None:
    graph = line(serve("kimi-mla-b3", serve=200, churn=7, seed=1), "digest ")
    eager = line(serve("kimi-mla-b3", serve=200, churn=7, seed=1, graph=False), "digest ")
    assert graph == eager
