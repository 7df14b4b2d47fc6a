"""A whole plan's decode step on the GPU, as `lanec run` times it, with and without what the
runtime adds: PDL (programmatic stream serialization between launches) and the CUDA graph.

    python tests/gpu/plans.py dense-small            # CPU machine: build/plans/dense-small.plan
    PYTHONPATH=. python3 bench/plan_step.py build/plans/dense-small.plan     # GPU machine
    PYTHONPATH=. python3 bench/plan_step.py ANCHOR.plan OTHER.plan [...]    # each against the anchor

Prints the median step time of each setting and what PDL and the graph each save; or, given several
plans, each one's step (graph + PDL) against the first's, in the same run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lanec.runtime import driver  # noqa: E402
from lanec.runtime.runner import Options, Session, load  # noqa: E402

SETTINGS = {"graph + PDL": (True, True), "graph, no PDL": (True, False), "no graph, PDL": (False, True)}


def step_us(path: Path, graph: bool, pdl: bool, repeats: int = 50) -> float:
    options = Options(graph=graph, pdl=pdl, repeats=repeats)
    plan, _, env, sources = load(path, options)
    return session_step_us(Session(plan, env, sources, pdl=pdl), graph, repeats)


def session_step_us(session: Session, graph: bool, repeats: int = 50) -> float:
    """Median microseconds of a session's step, after 10 steps (modules loaded, clocks up)."""
    step = session.step_function(graph)
    for _ in range(10):
        step()
    session.stream.synchronize()
    return driver.time_us(session.stream, step, repeats=repeats)


def main(path: str) -> None:
    times = {name: step_us(Path(path), graph, pdl) for name, (graph, pdl) in SETTINGS.items()}
    best = times["graph + PDL"]
    print(f"{'setting':<16} {'step us':>9} {'vs graph + PDL':>15}")
    for name, us in times.items():
        print(f"{name:<16} {us:>9.2f} {us / best:>14.3f}x")
    print(f"PDL saves {times['graph, no PDL'] - best:.2f} us a step; the graph saves "
          f"{times['no graph, PDL'] - best:.2f} us")


def compare(anchor: str, *others: str) -> None:
    """The step (graph + PDL) of each of `others` against `anchor` measured in the same run: e.g. a plan
    compiled with a knob (`--fold-norms`) against the same form compiled without it."""
    first = step_us(Path(anchor), True, True)
    print(f"{anchor}: {first:.2f} us a step (anchor)")
    for other in others:
        second = step_us(Path(other), True, True)
        print(f"{other}: {second:.2f} us a step, {first / second:.3f}x the anchor's speed "
              f"({first - second:+.2f} us saved)")


if __name__ == "__main__":
    if len(sys.argv) > 2:  # plan_step.py ANCHOR.plan OTHER.plan [OTHER.plan ...]
        compare(*sys.argv[1:])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "build/plans/dense-small.plan")
