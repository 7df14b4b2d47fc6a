"""bench/graph_profile.py without a GPU: a torch.profiler trace of graph replays cut into replays, each
launch's increment (its end less its predecessor's), lead and excess over its bytes, on an invented trace
whose figures are known."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from bench_scripts import load_bench

NAMES = ["rmsnorm model.layers.0.input_layernorm", "gemv model.layers.0.self_attn.qkv", "kda_split model.layers.0",
         "gemv lm_head"]
BYTES = [0, 4_000_000, 1_000_000, 8_000_000]  # at 4 TB/s: 0, 1, 0.25 and 2 us


@pytest.fixture(scope="module")
def bench():
    monkeypatch = pytest.MonkeyPatch()
    try:
        yield load_bench("graph_profile", monkeypatch)
    finally:
        monkeypatch.undo()


def plan():
    return SimpleNamespace(launches=[SimpleNamespace(name=n, traffic={"read": b, "written": 0})
                                     for n, b in zip(NAMES, BYTES, strict=True)])


def trace(replays: int, jitter: float = 0.0) -> dict:
    """Replays 20 us apart; in each, launch i starts 0.5 us before launch i-1 ends (PDL; replay 1's launches
    `jitter` earlier still) and ends 2 + i us after it; kernel events shuffled among memcpy and host events, as
    a profiler writes them."""
    events, origin = [], 0.0
    for r in range(replays):
        end = origin
        for i in range(len(NAMES)):
            start, end = end - 0.5 - (jitter if r == 1 else 0.0), end + 2 + i
            events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": start, "dur": end - start})
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "copy", "ts": origin, "dur": 1.0})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cuGraphLaunch", "ts": origin, "dur": 3.0})
        origin += 20.0
    return {"traceEvents": list(reversed(events))}


def test_a_trace_is_cut_into_replays_of_the_plans_kernels(bench):
    spans = bench.kernel_spans(trace(3))
    assert len(spans) == 12 and all(a.start <= b.start for a, b in zip(spans, spans[1:]))
    assert [len(r) for r in bench.replays(spans, 4)] == [4, 4, 4]
    with pytest.raises(ValueError, match="not whole replays of the plan's 5 launches"):
        bench.replays(spans, 5)


def test_each_launch_adds_its_end_less_its_predecessors(bench):
    rows = bench.in_graph(plan(), bench.replays(bench.kernel_spans(trace(4, jitter=7.0)), 4))
    # replays 20 us apart and 14 us long: the first launch's increment runs from the last replay's end
    assert [r.increment for r in rows] == [8.0, 3.0, 4.0, 5.0]
    assert [r.lead for r in rows[1:]] == [-0.5, -0.5, -0.5]  # the median drops replay 1's jitter
    assert rows[2].span == 4.5 and rows[3].kernel == "gemv" and rows[1].layer == 0 and rows[3].layer is None
    assert [round(r.excess(4e12), 6) for r in rows] == [8.0, 2.0, 3.75, 3.0]


def test_tables_sum_the_increments_and_rank_by_excess(bench):
    rows = bench.in_graph(plan(), bench.replays(bench.kernel_spans(trace(3)), 4))
    lines = bench.tables(rows, 4e12, step_us=19.0, top=2)
    kernels = lines[1:lines.index("")]
    assert kernels[0].split()[:2] == ["rmsnorm", "1"] and kernels[1].split()[:4] == ["gemv", "2", "8.00", "3.00"]
    assert lines[-1].startswith("step 20.00 us profiled (19.00 us unprofiled") and "excess 16.75 us" in lines[-1]
    listed = lines[lines.index("") + 1:]
    top = listed[listed.index(next(x for x in listed if x.startswith("launch (most"))) + 1:][:2]
    assert top[0].startswith("rmsnorm") and top[1].startswith("kda_split")


def test_the_trace_places_each_launch_where_it_ran(bench):
    recorded = bench.replays(bench.kernel_spans(trace(3)), 4)
    rows = bench.in_graph(plan(), recorded)
    events = bench.chrome_trace(rows, recorded[-1], 4e12)["traceEvents"]
    assert [e["ts"] for e in events] == [0.0, 2.0, 5.0, 9.0] and events[3]["args"]["excess us"] == 3.0


def test_fewer_than_two_replays_are_refused(bench):
    with pytest.raises(ValueError, match="two or more replays"):
        bench.in_graph(plan(), bench.replays(bench.kernel_spans(trace(1)), 4))
