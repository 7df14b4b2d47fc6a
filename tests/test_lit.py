"""The lit + FileCheck tests in tests/filecheck, run under pytest so that `pytest` covers them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FILECHECK = Path(__file__).resolve().parent / "filecheck"


def lit_executable() -> str:
    beside = Path(sys.executable).parent / "lit"  # the lit of the Python that runs pytest
    return str(beside) if beside.exists() else shutil.which("lit") or "lit"


def test_lit_suite_passes():
    run = subprocess.run([lit_executable(), str(FILECHECK), "-v"], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert "Passed" in run.stdout and "Failed" not in run.stdout
