"""tests/ and tests/gpu/ are no packages: pytest imports each test file by its basename, so a GPU
test named as a CPU test stops the whole run at collection (CI's `pytest -x`). No two share one."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_no_gpu_test_shares_a_cpu_tests_basename():
    cpu = {p.name for p in HERE.glob("test_*.py")}
    gpu = {p.name for p in (HERE / "gpu").glob("test_*.py")}
    assert not cpu & gpu, f"rename one of each: {sorted(cpu & gpu)}"
