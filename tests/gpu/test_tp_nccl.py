"""Tensor parallel on NCCL (issue 16): each plan of tests/gpu/plans.py's TP_PLANS, compiled with
--tp N, runs on N GPUs as a user runs it (`python -m lanec.runtime`, which starts a rank a GPU; the
all-reduces captured in each rank's CUDA graph), agrees with every rank's step on the interpreter
(`--check`), and its outputs equal the one-GPU plan's of the same form on the same seeded weights
(the step tolerance; a chosen token may differ only in a near tie of the one-GPU logits). The
timing path runs too (the all-reduces timed alone). Skipped unless N GPUs and nccl4py are here.
Every run has deadlines: a rank waits on the others at most RANK_TIMEOUT_S a phase, a run lasts at
most RUN_TIMEOUT_S, and a hang fails with the phase and the ranks' last lines."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from loader import load

from lanec.runtime import driver
from lanec.runtime.parallel import run_within
from lanec.runtime.plan import Plan
from lanec.runtime.runner import compare, compare_choice

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
plans = load("lanec_gpu_tp_plans", HERE / "plans.py")


RANK_TIMEOUT_S = 120  # LANEC_TP_TIMEOUT: a rank waiting on the others longer than this in one phase fails
RUN_TIMEOUT_S = 300  # the whole run: past it the launcher and its ranks are killed, their logs shown


def runtime(*args: str, logs: Path | None = None, engine: str = "auto") -> subprocess.CompletedProcess:
    """`python -m lanec.runtime ARGS` under deadlines, in a session of its own so that a hang kills
    the launcher and every rank; the ranks' logs go to `logs` (LANEC_TP_LOGS) and their last
    lines join the failure."""
    command = [sys.executable, "-m", "lanec.runtime", *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LANEC_TP_TIMEOUT": str(RANK_TIMEOUT_S), "LANEC_ALL_REDUCE": engine}
    if logs is not None:
        env["LANEC_TP_LOGS"] = str(logs)
    done = run_within(command, RUN_TIMEOUT_S, env, ROOT)
    if done.returncode is None:
        logged = sorted(logs.glob("rank*")) if logs is not None else []
        tails = [f"{path.name}: {line}" for path in logged
                 for line in path.read_text(errors="replace").splitlines()[-10:]]
        pytest.fail(f"{' '.join(command[1:])} did not end in {RUN_TIMEOUT_S} s; its output:\n{done.stdout}"
                    f"{done.stderr}\n" + "\n".join(tails), pytrace=False)
    return done


@pytest.fixture
def tp_plan(request):
    name = request.param
    base, ranks = plans.TP_PLANS[name]
    if importlib.util.find_spec("nccl") is None:
        pytest.skip("nccl4py is not installed: bash tests/gpu/tp_wheels.sh here, install .whl-tp/ there")
    if driver.device_count() < ranks:
        pytest.skip(f"{name} needs {ranks} GPUs; this machine has {driver.device_count()}")
    paths = plans.OUT / f"{name}.plan", plans.OUT / f"{base}.plan"
    for path in paths:
        if not path.is_file():
            pytest.fail(f"{path} is missing: run `python tests/gpu/plans.py {base} {name}` on the CPU machine and "
                        "carry build/", pytrace=False)
    return paths


ENGINES = [(name, engine) for name in plans.TP_PLANS for engine in ("nccl", "oneshot")] + [
    (next(iter(plans.TP_PLANS)), "oneshot-apart")]


@pytest.mark.parametrize(("tp_plan", "engine"), ENGINES, indirect=["tp_plan"])
def test_tp_plan_checks_and_equals_the_one_gpu_plan(tp_plan, engine, tmp_path):
    """NCCL's all-reduces, the plan's one-shot kernel over the peers' memory fused with the rmsnorm
    after it (all_reduce_norm), and, on one plan, the one-shot apart (LANEC_ALL_REDUCE)."""
    sharded, whole = tp_plan
    done = runtime(str(sharded), "--check", "--seed", "7", "--outputs", str(tmp_path / "tp.npz"), logs=tmp_path / "logs",
                   engine=engine)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agree with the interpreter" in done.stdout and "rank 1" not in done.stdout
    done = runtime(str(whole), "--check", "--seed", "7", "--outputs", str(tmp_path / "one.npz"))
    assert done.returncode == 0, done.stdout + done.stderr

    got, want = np.load(tmp_path / "tp.npz"), np.load(tmp_path / "one.npz")
    outputs = {b.source: b for b in Plan.read(whole).buffers if b.role == "output"}
    assert sorted(got.files) == sorted(want.files) == sorted(f"output{i}" for i in outputs)
    floats = [want[f"output{i}"] for i, b in outputs.items() if b.dtype != "int32"]
    for index, buffer in outputs.items():
        key = f"output{index}"
        if buffer.dtype == "int32":  # chosen tokens: judged by the one-GPU plan's logits
            logits = next(f for f in floats if f.size % max(got[key].size, 1) == 0 and f.size > got[key].size)
            verdict = compare_choice(key, got[key], logits)
        else:
            assert float(np.abs(want[key]).max()) > 1e-2  # no test on zeros
            verdict = compare(key, "output", buffer.dtype, got[key], want[key])
        assert verdict.ok, f"{key}: {verdict}"


@pytest.mark.parametrize("engine", ["nccl", "oneshot"])
@pytest.mark.parametrize("tp_plan", list(plans.TP_PLANS)[:1], indirect=True)
def test_tp_plan_times_its_step_and_its_all_reduces(tp_plan, engine, tmp_path):
    sharded, _ = tp_plan
    done = runtime(str(sharded), "--steps", "3", "--repeats", "5", logs=tmp_path / "logs", engine=engine)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all-reduces alone:" in done.stdout and "steps run; step" in done.stdout


@pytest.mark.parametrize("tp_plan", list(plans.TP_PLANS)[:1], indirect=True)
def test_tp_plan_run_on_another_count_is_refused(tp_plan):
    sharded, _ = tp_plan
    done = runtime(str(sharded), "--tp", "1")
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "compile it with --tp 1" in done.stderr
