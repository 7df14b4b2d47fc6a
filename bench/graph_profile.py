"""Where a plan's step goes inside its CUDA graph, with PDL on: each launch's start and end as the
GPU recorded them during graph replays (CUPTI's kernel records, read through torch.profiler), not
an eager replay's events. The eager profile (`lanec run --profile`) times each launch after its
predecessor has drained; in the graph a launch's CTAs start while the one before is finishing, so
only the graph's own timeline says what each launch adds to the step.

    python tests/gpu/plans.py kimi-full-b1-c1k                     # CPU machine
    PYTHONPATH=/tmp/site:. python3 bench/graph_profile.py PLAN [--trace out.json] [--launches 30]

A launch's share of the step is its increment: its end less the end of the launch before it (the
step's ends telescope: the increments of one replay sum to the replay). Its excess is the
increment less its bytes (the plan's `Launch.traffic`, at most what it moves) over the copy
bandwidth measured in the same run: the time the launch costs beyond streaming its bytes (its
hop, ramp, tail and any compute it cannot hide). `lead` is its first CTA's start less the end of
the launch before (negative: resident before its predecessor ended, as PDL allows). Figures are
medians over the profiled replays; the step is also timed without the profiler in the same run,
so the profiler's own cost is in view.

Weights are seeded on the GPU and states zeroed as bench/model.py does (the real-size plans do not
fit the host)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lanec.runtime.plan import Plan  # noqa: E402
from lanec.runtime.profile import kernel_of, layer_kinds, layers  # noqa: E402

REPLAYS = 20  # graph replays recorded; the first is dropped (its start follows the host, not a replay)
WARMUP = 10


@dataclass(frozen=True)
class Span:
    """One kernel as the GPU ran it: start and end in microseconds."""

    start: float
    end: float


@dataclass(frozen=True)
class InGraph:
    """One launch in the graph: medians over the replays of its increment, its lead and its own span
    (end less start), with its plan entry's name, kernel, layer and bytes."""

    name: str
    kernel: str
    layer: int | None
    increment: float
    lead: float
    span: float
    nbytes: int

    def excess(self, copy_bw: float) -> float:
        return self.increment - self.nbytes / copy_bw * 1e6


def kernel_spans(trace: dict) -> list[Span]:
    """The kernels of a torch.profiler Chrome trace, in start order (memcpy, memset and host events
    are not the plan's launches)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and e.get("ph") == "X"]
    return sorted((Span(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events),
                  key=lambda s: s.start)


def replays(spans: Sequence[Span], launches: int) -> list[list[Span]]:
    """The spans cut into replays of `launches` kernels each; every kernel must belong to one."""
    if launches < 1 or not spans or len(spans) % launches:
        raise ValueError(f"{len(spans)} kernels recorded: not whole replays of the plan's {launches} launches")
    return [list(spans[i:i + launches]) for i in range(0, len(spans), launches)]


def in_graph(plan: Plan, recorded: Sequence[Sequence[Span]]) -> list[InGraph]:
    """Each launch's medians over the replays after the first, each measured from the end of the
    kernel before it (the previous replay's last for a replay's first)."""
    count = len(plan.launches)
    if len(recorded) < 2 or any(len(r) != count for r in recorded):
        raise ValueError(f"need two or more replays of {count} kernels, got {[len(r) for r in recorded]}")
    increments: list[list[float]] = [[] for _ in range(count)]
    leads: list[list[float]] = [[] for _ in range(count)]
    for before, replay in zip(recorded, recorded[1:]):
        previous = before[-1].end
        for i, span in enumerate(replay):
            increments[i].append(span.end - previous)
            leads[i].append(span.start - previous)
            previous = span.end
    spans = [[r[i].end - r[i].start for r in recorded[1:]] for i in range(count)]
    placed = layers([launch.name for launch in plan.launches])
    return [InGraph(launch.name, kernel_of(launch.name), layer, statistics.median(inc), statistics.median(lead),
                    statistics.median(span), launch.traffic.get("read", 0) + launch.traffic.get("written", 0))
            for launch, layer, inc, lead, span in zip(plan.launches, placed, increments, leads, spans, strict=True)]


def tables(rows: Sequence[InGraph], copy_bw: float, step_us: float, top: int = 0) -> list[str]:
    """The graph's profile as text: by kernel, by layer kind, the `top` launches of most excess, and
    the totals beside the unprofiled step."""
    kinds = layer_kinds([r.name for r in rows])
    lines: list[str] = []

    def grouped(title: str, key) -> None:
        groups: dict[str, list[InGraph]] = {}
        for r in rows:
            groups.setdefault(key(r), []).append(r)
        lines.append(f"{title:<24} {'launches':>8} {'us':>9} {'bytes us':>9} {'excess':>9} {'a launch':>8} "
                     f"{'lead':>7} {'% copy':>6}")
        for label, members in sorted(groups.items(), key=lambda item: -sum(r.excess(copy_bw) for r in item[1])):
            us = sum(r.increment for r in members)
            ideal = sum(r.nbytes for r in members) / copy_bw * 1e6
            lead = statistics.median(r.lead for r in members)
            lines.append(f"{label:<24} {len(members):>8} {us:9.2f} {ideal:9.2f} {us - ideal:9.2f} "
                         f"{(us - ideal) / len(members):8.2f} {lead:7.2f} {100 * ideal / us if us > 0 else 0:5.1f}%")
        lines.append("")

    grouped("kernel", lambda r: r.kernel)
    grouped("layer kind", lambda r: "outside the layers" if r.layer is None else kinds[r.layer])
    if top:
        width = max(len(r.name) for r in rows)
        lines.append(f"{'launch (most excess first)':<{width}} {'us':>8} {'bytes us':>8} {'excess':>8} {'lead':>7} "
                     f"{'span':>8}")
        for r in sorted(rows, key=lambda r: -r.excess(copy_bw))[:top]:
            lines.append(f"{r.name:<{width}} {r.increment:8.2f} {r.nbytes / copy_bw * 1e6:8.2f} "
                         f"{r.excess(copy_bw):8.2f} {r.lead:7.2f} {r.span:8.2f}")
        lines.append("")
    total = sum(r.increment for r in rows)
    ideal = sum(r.nbytes for r in rows) / copy_bw * 1e6
    lines.append(f"step {total:.2f} us profiled ({step_us:.2f} us unprofiled, same run); bytes {ideal:.2f} us at "
                 f"{copy_bw / 1e12:.2f} TB/s ({100 * ideal / step_us:.1f}% of the unprofiled step); excess "
                 f"{total - ideal:.2f} us over {len(rows)} launches ({(total - ideal) / len(rows):.2f} a launch)")
    return lines


def chrome_trace(rows: Sequence[InGraph], replay: Sequence[Span], copy_bw: float) -> dict:
    """One replay as the GPU ran it, each launch at its recorded start and end (overlaps included)."""
    origin = replay[0].start
    events = [{"name": r.name, "cat": r.kernel, "ph": "X", "ts": round(s.start - origin, 3),
               "dur": round(s.end - s.start, 3), "pid": 0, "tid": 0,
               "args": {"layer": r.layer, "bytes": r.nbytes, "increment us": round(r.increment, 3),
                        "excess us": round(r.excess(copy_bw), 3)}}
              for r, s in zip(rows, replay, strict=True)]
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"copy bandwidth B/s": copy_bw}}


def record(step, stream, replays_: int) -> dict:
    """torch.profiler's Chrome trace of `replays_` graph replays of `step` (CUDA activity only)."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        for _ in range(replays_):
            step()
        stream.synchronize()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "trace.json"
        profiler.export_chrome_trace(str(path))
        return json.loads(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="a plan file or a name in build/plans/")
    parser.add_argument("--replays", type=int, default=REPLAYS)
    parser.add_argument("--launches", type=int, default=30, help="list this many launches of most excess")
    parser.add_argument("--trace", type=Path, help="write one replay as a Chrome / Perfetto trace")
    options = parser.parse_args()
    if options.replays < 2:
        parser.error("--replays: at least 2 (the first is dropped)")

    from model import copy_bandwidth, resolve, seeded_session

    from lanec.runtime import driver

    path = resolve(options.plan)
    copy_bw = copy_bandwidth()
    plan, _, session = seeded_session(path)
    step = session.step_function(graph=True)
    for _ in range(WARMUP):
        step()
    session.stream.synchronize()
    step_us = driver.time_us(session.stream, step, repeats=30)
    recorded = replays(kernel_spans(record(step, session.stream, options.replays)), len(plan.launches))
    rows = in_graph(plan, recorded)
    print(f"{path.stem}: {len(plan.launches)} launches, {len(recorded)} replays recorded")
    for line in tables(rows, copy_bw, step_us, options.launches):
        print(line)
    if options.trace is not None:
        options.trace.write_text(json.dumps(chrome_trace(rows, recorded[-1], copy_bw), indent=1) + "\n")
        print(f"wrote one replay to {options.trace}")


if __name__ == "__main__":
    main()
