"""The dense-small step with q8_0 weights against its bf16 plan (issue 14's step target): the step
time of each (graph + PDL, as `lanec run` times it) in the same run, and how often the q8_0 plan
chooses the bf16 plan's next token over STEPS fresh random steps.

    python tests/gpu/plans.py dense-small dense-small-q8 dense-small-q8-unfused dense-small-q8-w2-fused  # CPU
    PYTHONPATH=. python3 bench/q8_step.py [BF16.plan Q8.plan ...] [--steps N]          # GPU machine

The plans share the seeded weights (the q8_0 plans quantize the bf16 plan's values once at load,
the `quantize_q8_0` transform), so a step differs only by the quantized numerics. Each random step
draws new tokens, positions, pages and caches (`random_environment`, one seed a step, from the bf16
plan's program), loads them into every plan's session, runs one step eagerly and reads each plan's
chosen tokens and logits. A token "agrees" where the q8_0 plan's choice equals the bf16 plan's for
that request; near ties (the bf16 plan's top two logits closer than the q8_0 plan's logit error on
that row) are counted apart, since either choice is right there."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from plan_step import session_step_us  # noqa: E402

from lanec.interp.environment import random_environment  # noqa: E402
from lanec.runtime import dtypes  # noqa: E402
from lanec.runtime.runner import Options, Session, load, seeded_on_gpu  # noqa: E402

PLANS = ROOT / "build" / "plans"
DEFAULT = ["dense-small", "dense-small-q8", "dense-small-q8-unfused", "dense-small-q8-w2-fused"]
STEPS = 1000
SEED = 7


def outputs(session: Session) -> tuple[np.ndarray, np.ndarray]:
    """(chosen tokens [rows], logits [rows, vocab] fp32) of a session's last step."""
    found = {}
    for spec in session.plan.buffers:
        if spec.role == "output":
            storage = dtypes.storage(spec.dtype)
            values = session.buffers[spec.name].to_array(storage, spec.shape)
            found["tokens" if spec.dtype == "int32" else "logits"] = dtypes.decode(values, spec.dtype)
    if set(found) != {"tokens", "logits"}:
        raise SystemExit(f"a plan with chosen tokens and logits as outputs, not {sorted(found)}")
    return found["tokens"].reshape(-1), found["logits"].reshape(found["tokens"].size, -1)


def main(argv: list[str]) -> None:
    steps = STEPS
    if "--steps" in argv:
        at = argv.index("--steps")
        steps = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    paths = [Path(a) for a in argv] or [PLANS / f"{name}.plan" for name in DEFAULT]
    options = Options(graph=True, pdl=True, seed=SEED)
    loaded = [load(path, options) for path in paths]
    sessions = [Session(plan, env, sources, pdl=True, seed=seeded_on_gpu(plan, options))
                for plan, _, env, sources in loaded]
    anchor = session_step_us(sessions[0], graph=True)
    print(f"{'plan':<28} {'step us':>9} {'bf16 / plan':>12}")
    print(f"{paths[0].stem:<28} {anchor:>9.2f} {1.0:>11.2f}x", flush=True)
    for path, session in zip(paths[1:], sessions[1:], strict=True):
        us = session_step_us(session, graph=True)
        print(f"{path.stem:<28} {us:>9.2f} {anchor / us:>11.2f}x", flush=True)

    program = loaded[0][1]
    agree = [0] * (len(paths) - 1)
    ties = [0] * (len(paths) - 1)
    rows = 0
    for step in range(steps):
        env = random_environment(program, SEED + 1 + step, weights=loaded[0][3])
        results = []
        for session in sessions:
            session.load(env)
            session.enqueue()
            session.stream.synchronize()
            results.append(outputs(session))
        tokens, logits = results[0]
        top = np.sort(logits, axis=1)
        gap = top[:, -1] - top[:, -2]
        rows += tokens.size
        for i, (got, got_logits) in enumerate(results[1:]):
            error = np.abs(got_logits - logits).max(axis=1)
            same = got == tokens
            agree[i] += int(same.sum())
            ties[i] += int((~same & (gap <= error)).sum())
    print(f"\nnext tokens over {steps} random steps ({rows} rows), each plan against {paths[0].stem}:")
    for path, same, tied in zip(paths[1:], agree, ties, strict=True):
        print(f"{path.stem:<28} {same}/{rows} agree ({100 * same / rows:.2f}%); of the {rows - same} others, "
              f"{tied} are near ties (the bf16 top-two gap within the q8_0 plan's logit error)")


if __name__ == "__main__":
    main(sys.argv[1:])
