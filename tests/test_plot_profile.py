"""bench/plot_profile.py draws a `--trace` file as a PNG (no GPU): a real image of the launches and
the per-kernel sums; a trace without launches is refused in one line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _plot():
    spec = importlib.util.spec_from_file_location("plot_profile", ROOT / "bench" / "plot_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_trace_becomes_a_png(tmp_path: Path):
    events = [{"name": f"{k} out{i}", "cat": k, "ph": "X", "ts": 10.0 * i, "dur": 10.0, "pid": 0, "tid": 0,
               "args": {"bytes": 4_000_000 * (i + 1), "copy share": 0.1 * (i + 1)}}
              for i, k in enumerate(["gemv", "rmsnorm", "gemv", "kda_split"])]
    out = tmp_path / "profile.png"
    _plot().draw({"traceEvents": events, "otherData": {"copy bandwidth B/s": 4.0e12}}, out, "four launches")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_an_empty_trace_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="the trace holds no launches"):
        _plot().draw({"traceEvents": []}, tmp_path / "none.png")
