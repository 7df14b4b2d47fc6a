"""Tensor parallel's decode step: a form's one-GPU plan against its plan for N GPUs (NCCL), each as
`lanec run` times it (the step's CUDA graph, median of the repeats; a rank a GPU), with the
all-reduces' share: the step's all-reduces timed alone in a graph of their own, at the step's
message sizes.

    python tests/gpu/plans.py dense-small kimi-kda-b1 dense-small-tp2 kimi-kda-b1-tp2     # CPU machine
    PYTHONPATH=/tmp/site:. python3 bench/tp.py [ONE.plan TP.plan ...]                        # GPU machine
    python tests/gpu/plans.py kimi-full-b1-c1k kimi-full-b1-c1k-tp2 ...   # the real-size models (TP_MODEL_PLANS)
    PYTHONPATH=/tmp/site:. python3 bench/tp.py --model     # GPU machine: weights seeded on each GPU

Prints each pair's step times, the speedup of N GPUs over one (the anchor, measured in the same
run) and the all-reduces' microseconds and share of the sharded step, with NCCL's all-reduces
with the plan's one-shot kernel (LANEC_ALL_REDUCE=nccl, oneshot-apart) and with the one-shot fused
with the rmsnorm after it where the plan carries all_reduce_norm (oneshot), and NCCL's step over
each one-shot's. Each run has deadlines (a rank waits on the others at most RANK_TIMEOUT_S a phase; a
run lasts at most RUN_TIMEOUT_S)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lanec.runtime import driver  # noqa: E402
from lanec.runtime.parallel import run_within  # noqa: E402
from lanec.runtime.plan import Plan  # noqa: E402

STEP = re.compile(r"steps run; step ([0-9.]+) us")
REDUCES = re.compile(r"all-reduces alone: ([0-9.]+) us")


RANK_TIMEOUT_S = 120  # LANEC_TP_TIMEOUT: how long a rank waits on the others in one phase
RUN_TIMEOUT_S = 300  # one plan's run, launcher and ranks together


def timed(path: Path, repeats: int = 50, engine: str = "auto") -> tuple[float, float | None]:
    """(step us, all-reduces alone us or None) of one plan, as `python -m lanec.runtime` prints them,
    its all-reduces by `engine` (LANEC_ALL_REDUCE); a run that hangs is killed with its ranks (a
    session of its own) and named."""
    command = [sys.executable, "-m", "lanec.runtime", str(path), "--steps", "20", "--repeats", str(repeats)]
    env = {**os.environ, "LANEC_TP_TIMEOUT": os.environ.get("LANEC_TP_TIMEOUT", str(RANK_TIMEOUT_S)),
           "LANEC_ALL_REDUCE": engine}
    done = run_within(command, RUN_TIMEOUT_S, env, ROOT)
    if done.returncode is None:
        raise SystemExit(f"{path}: did not end in {RUN_TIMEOUT_S} s (killed with its ranks)")
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or [f"exited with status {done.returncode}"]
        raise SystemExit(f"{path}: {lines[-1]}")
    step, reduces = STEP.search(done.stdout), REDUCES.search(done.stdout)
    if step is None:
        raise SystemExit(f"{path}: no step time in its output")
    return float(step.group(1)), float(reduces.group(1)) if reduces else None


def pairs(argv: list[str]) -> list[tuple[Path, Path]]:
    """(one-GPU plan, its plan for N GPUs) from the arguments, or tests/gpu/plans.py's TP_PLANS
    (`--model`: its TP_MODEL_PLANS, the real-size models)."""
    model = "--model" in argv
    argv = [a for a in argv if a != "--model"]
    if argv:
        if len(argv) % 2:
            raise SystemExit("give plans in pairs: the one-GPU plan, then its plan for N GPUs")
        return [(Path(a), Path(b)) for a, b in zip(argv[::2], argv[1::2])]
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    from loader import load

    plans = load("lanec_bench_tp_plans", ROOT / "tests" / "gpu" / "plans.py")
    chosen = plans.TP_MODEL_PLANS if model else plans.TP_PLANS
    return [(plans.OUT / f"{base}.plan", plans.OUT / f"{name}.plan") for name, (base, _) in chosen.items()]


def main(argv: list[str]) -> None:
    print(f"{'plan':<20} {'ranks':>5} {'message':>8} {'1 GPU us':>9} {'engine':>13} {'step us':>9} {'speedup':>8} "
          f"{'all-reduce us':>14} {'share':>6} {'nccl / one-shot':>16}", flush=True)
    gpus = driver.device_count()
    for one, sharded in pairs(argv):
        plan = Plan.read(sharded)
        if plan.ranks > gpus:
            print(f"{sharded.stem:<20} {plan.ranks:>5}  skipped: {plan.ranks} ranks need {plan.ranks} GPUs; this "
                  f"machine has {gpus}", flush=True)
            continue
        sizes = sorted({c.count * (2 if c.dtype == "bfloat16" else 4) for c in plan.collectives})
        message = "/".join(f"{s // 1024}K" if s >= 1024 else f"{s}B" for s in sizes)
        anchor, _ = timed(one)
        engines = ["nccl"]
        if all(c.oneshot is not None for c in plan.collectives):  # the fused all_reduce_norm where carried
            engines += ["oneshot-apart", "oneshot"] if any(c.fused for c in plan.collectives) else ["oneshot"]
        steps = {}
        for engine in engines:
            step, reduces = timed(sharded, engine=engine)
            steps[engine] = step
            share = f"{100 * reduces / step:5.1f}%" if reduces is not None else "-"
            reduce_text = f"{reduces:.2f} ({len(plan.collectives)})" if reduces is not None else "-"
            ratio = f"{steps['nccl'] / step:15.2f}x" if engine != "nccl" else "-"
            print(f"{sharded.stem:<20} {plan.ranks:>5} {message:>8} {anchor:>9.2f} {engine:>13} {step:>9.2f} "
                  f"{anchor / step:>7.2f}x {reduce_text:>14} {share:>6} {ratio:>16}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
