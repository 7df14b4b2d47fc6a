"""`lanec run --profile` and `--trace`: where a decode step's time goes. Each launch is timed in an
eager replay (an event before each launch, `driver.time_each_us`) beside the graph's step time;
its traffic (the bytes the compiler recorded in the plan: `Launch.traffic`, at most what the
kernel moves) over its time is its bandwidth, and that over the copy bandwidth measured in the
same run its share of the memory roof. Launches are grouped by the kind of layer they belong to
(KDA, MLA, GQA attention, expanded MLA, each with its mixture or dense MLP) and by kernel.

The tables and the Chrome / Perfetto trace are plain functions of the plan and the times, so
they are tested without a GPU; only `measure` touches one."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lanec.runtime.plan import Plan

LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# the kernels that name a layer's token mixer, in the order they are looked for
MIXERS = (("kda_split", "KDA"), ("latent_attention", "MLA"), ("expanded_attention", "MLA expanded"),
          ("attention", "GQA"))


@dataclass(frozen=True)
class Timed:
    """One launch of the step: its plan entry's name and kernel, its layer (None: before or after
    the layers), the microseconds of its eager replay and its bytes (read + written)."""

    name: str
    kernel: str
    layer: int | None
    us: float
    nbytes: int


def kernel_of(name: str) -> str:
    return name.split(" ", 1)[0]


def layer_of(name: str) -> int | None:
    """The layer a launch belongs to, from its output buffer's name ("gemv model.layers.3.mlp...")."""
    found = LAYER.search(name.split(" ", 1)[-1])
    return int(found.group(1)) if found else None


def layers(names: Sequence[str]) -> list[int | None]:
    """Each launch's layer: its output's ("model.layers.N...."), or, for an output named apart from
    its layer (a latent attention's scratch rows), the layer of the nearest placed launches on both
    sides where they agree. A launch is placed by its output's name: a layer's, or the model's
    outside the layers (the final norm), which stops the search."""
    named = [layer_of(name) for name in names]
    placed = [layer is not None or name.split(" ", 1)[-1].startswith("model.") for layer, name in zip(named, names)]
    found = []
    for i, layer in enumerate(named):
        if not placed[i]:
            before = next((named[j] for j in range(i - 1, -1, -1) if placed[j]), None)
            after = next((named[j] for j in range(i + 1, len(names)) if placed[j]), None)
            layer = before if before is not None and before == after else None
        found.append(layer)
    return found


def layer_kinds(names: Sequence[str]) -> dict[int, str]:
    """Each layer's kind: its token mixer (KDA, MLA, GQA, ...) and its MLP (mixture or dense)."""
    kernels: dict[int, set[str]] = {}
    for name, layer in zip(names, layers(names), strict=True):
        if layer is not None:
            kernels.setdefault(layer, set()).add(kernel_of(name))
    kinds = {}
    for layer, used in kernels.items():
        mixer = next((label for kernel, label in MIXERS if kernel in used), "no mixer")
        mlp = "mixture" if any(k.startswith("mixture") for k in used) else "dense"
        kinds[layer] = f"{mixer} + {mlp}"
    return kinds


def timed(plan: Plan, times: Sequence[float]) -> list[Timed]:
    if len(times) != len(plan.launches):
        raise ValueError(f"{len(times)} times for {len(plan.launches)} launches")
    placed = layers([launch.name for launch in plan.launches])
    return [Timed(launch.name, kernel_of(launch.name), layer, us,
                  launch.traffic.get("read", 0) + launch.traffic.get("written", 0))
            for launch, layer, us in zip(plan.launches, placed, times, strict=True)]


def share(nbytes: int, us: float, copy_bw: float) -> float:
    """The fraction of the copy bandwidth `nbytes` in `us` reach (0 where nothing was timed)."""
    return nbytes / (us * 1e-6) / copy_bw if us > 0 and copy_bw > 0 else 0.0


def tables(plan: Plan, times: Sequence[float], step_us: float, copy_bw: float) -> list[str]:
    """The profile as text: every launch, then the sums by layer kind and by kernel."""
    rows = timed(plan, times)
    kinds = layer_kinds([r.name for r in rows])
    total = sum(r.us for r in rows) or 1.0
    width = max((len(r.name) for r in rows), default=6)
    lines = [f"{'launch':<{width}}  {'us':>9}  {'MB':>9}  {'GB/s':>7}  {'% copy':>6}  {'% step':>6}"]
    for r in rows:
        gbs = r.nbytes / (r.us * 1e-6) / 1e9 if r.us > 0 else 0.0
        lines.append(f"{r.name:<{width}}  {r.us:9.2f}  {r.nbytes / 1e6:9.2f}  {gbs:7.0f}  "
                     f"{100 * share(r.nbytes, r.us, copy_bw):5.1f}%  {100 * r.us / total:5.1f}%")

    def grouped(title: str, key: Callable[[Timed], str]) -> None:
        groups: dict[str, list[Timed]] = {}
        for r in rows:
            groups.setdefault(key(r), []).append(r)
        lines.append("")
        lines.append(f"{title:<28}  {'launches':>8}  {'us':>9}  {'MB':>9}  {'% copy':>6}  {'% step':>6}")
        for label, members in sorted(groups.items(), key=lambda item: -sum(r.us for r in item[1])):
            us, nbytes = sum(r.us for r in members), sum(r.nbytes for r in members)
            lines.append(f"{label:<28}  {len(members):>8}  {us:9.2f}  {nbytes / 1e6:9.2f}  "
                         f"{100 * share(nbytes, us, copy_bw):5.1f}%  {100 * us / total:5.1f}%")

    grouped("layer kind", lambda r: "outside the layers" if r.layer is None else kinds[r.layer])
    grouped("kernel", lambda r: r.kernel)
    moved = sum(r.nbytes for r in rows)
    lines.append("")
    lines.append(f"step {step_us:.2f} us in the graph; the launches alone sum to {sum(times):.2f} us (eager); "
                 f"{moved / 1e6:.1f} MB moved at most: {100 * share(moved, step_us, copy_bw):.1f}% of the copy "
                 f"bandwidth ({copy_bw / 1e12:.2f} TB/s) over the graph's step")
    return lines


def chrome_trace(plan: Plan, times: Sequence[float], copy_bw: float) -> dict:
    """The step as a Chrome / Perfetto trace: each launch a complete event, back to back in launch
    order at its eager time, with its kernel, layer, grid, bytes and share of the copy bandwidth."""
    kinds = layer_kinds([launch.name for launch in plan.launches])
    events, start = [], 0.0
    for launch, r in zip(plan.launches, timed(plan, times), strict=True):
        events.append({"name": r.name, "cat": r.kernel, "ph": "X", "ts": round(start, 3), "dur": round(r.us, 3),
                       "pid": 0, "tid": 0,
                       "args": {"layer": r.layer, "layer kind": None if r.layer is None else kinds[r.layer],
                                "grid": list(launch.shape.grid), "cluster": list(launch.shape.cluster),
                                "bytes": r.nbytes, "copy share": round(share(r.nbytes, r.us, copy_bw), 6)}})
        start += r.us
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"copy bandwidth B/s": copy_bw, "launches": len(events)}}


def write_trace(path: Path, plan: Plan, times: Sequence[float], copy_bw: float) -> None:
    path.write_text(json.dumps(chrome_trace(plan, times, copy_bw), indent=1) + "\n")
