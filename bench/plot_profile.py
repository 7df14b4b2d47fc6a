"""Draw a step's profile as a PNG: the trace `lanec run --profile --trace trace.json` writes, as a
timeline (each launch a bar as wide as its time and as tall as its share of the copy bandwidth,
coloured by kernel) over the sums by kernel (time, and the copy share each reaches). For
bench/RESULTS.md; runs anywhere matplotlib does (no GPU):

    python bench/plot_profile.py trace.json profile.png [--title TEXT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def draw(trace: dict, out: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = trace["traceEvents"]
    if not events:
        raise ValueError("the trace holds no launches")
    kernels = sorted({e["cat"] for e in events}, key=lambda k: -sum(e["dur"] for e in events if e["cat"] == k))
    colours = {k: plt.get_cmap("tab20")(i % 20) for i, k in enumerate(kernels)}
    figure, (timeline, totals) = plt.subplots(2, 1, figsize=(12, 7), gridspec_kw={"height_ratios": [3, 2]})
    for e in events:
        timeline.bar(e["ts"], 100 * e["args"]["copy share"], width=e["dur"], align="edge", color=colours[e["cat"]],
                     edgecolor="white", linewidth=0.3)
    timeline.set_xlim(0, max(e["ts"] + e["dur"] for e in events))
    timeline.set_xlabel("us into the step (eager, launches back to back)")
    timeline.set_ylabel("% of the copy bandwidth")
    timeline.axhline(100, color="grey", linewidth=0.8, linestyle="--")
    step = sum(e["dur"] for e in events)
    timeline.set_title(title or f"{len(events)} launches, {step:.0f} us")
    times = [sum(e["dur"] for e in events if e["cat"] == k) for k in kernels]
    moved = [sum(e["args"]["bytes"] for e in events if e["cat"] == k) for k in kernels]
    bandwidth = trace.get("otherData", {}).get("copy bandwidth B/s", 0.0)
    bars = totals.barh(kernels, times, color=[colours[k] for k in kernels])
    for bar, us, nbytes in zip(bars, times, moved, strict=True):
        share = nbytes / (us * 1e-6) / bandwidth if us > 0 and bandwidth > 0 else 0.0
        totals.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f"  {us:.0f} us, {100 * share:.0f}% of copy",
                    va="center", fontsize=8)
    totals.invert_yaxis()
    totals.set_xlabel("us a step, by kernel")
    totals.set_xlim(0, 1.35 * max(times))
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    draw(json.loads(args.trace.read_text()), args.png, args.title)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
