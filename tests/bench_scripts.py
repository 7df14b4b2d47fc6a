"""The bench scripts (bench/*.py) as modules for the CPU tests of their table writers and knobs (the
tests directory is on the path: `from bench_scripts import load_bench`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str, monkeypatch):
    """bench/<name>.py executed afresh (it reads its environment knobs as it loads), with bench/ on
    the path for its `measure` import."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up as they build
    spec.loader.exec_module(module)
    return module


def compiled_bench(name: str):
    """A module fixture's body (`yield from compiled_bench(NAME)`): bench/<name>.py's kernels() compiled
    for sm_90a, by stem; the path and modules the load changed are restored afterwards."""
    import pytest

    monkeypatch = pytest.MonkeyPatch()
    try:
        bench = load_bench(name, monkeypatch)
        from lanec.codegen.compile import compile_kernel

        yield {stem: compile_kernel(kernel) for stem, kernel in bench.kernels().items()}
    finally:
        monkeypatch.undo()
