"""Whole plans on the GPU: each shipped example, compiled on the CPU machine (tests/gpu/plans.py),
runs one step with the graph and PDL and agrees with the interpreter on every output and state."""

from __future__ import annotations

from pathlib import Path

import pytest
from loader import load

from lanec.runtime.runner import Options, execute

HERE = Path(__file__).resolve().parent
plans = load("lanec_gpu_plans", HERE / "plans.py")


@pytest.mark.parametrize("name", list(plans.PLANS))
def test_plan_agrees_with_the_interpreter(name: str) -> None:
    path = plans.OUT / f"{name}.plan"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `python tests/gpu/plans.py` on the CPU machine and carry build/",
                    pytrace=False)
    lines: list[str] = []
    status = execute(path, Options(check=True, seed=7), lines.append)
    report = "\n".join(lines)
    assert status == 0, report
    assert "agree with the interpreter" in report
