"""The headline: the whole Kimi-Linear-48B-A3B decode step at its real size (27 layers: 20 KDA and
7 MLA, 256 experts top 8 with a shared expert, vocabulary 163840; about 98 GB of bf16 weights) on
one H200, lanec's plan against the per-op chain that serves the model today, both under CUDA
graphs, in one run.

    python tests/gpu/plans.py kimi-full-b1-c1k kimi-full-b1-c16k ...   # CPU machine: MODEL_PLANS into build/plans/
    pip download --no-deps fla-core==0.6.0 einops -d .whl               # CPU machine, once
    python .anchors/make_vendor.py                                      # CPU machine, once: SGLang's kernels
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl    # GPU machine
    PYTHONPATH=/tmp/site:. python3 bench/model.py [PLAN ...]            # GPU machine: carry build/plans .anchors .whl
    PYTHONPATH=/tmp/site:. python3 bench/model.py --side chain --locate PLAN   # the chain eagerly, op by op

PLAN: a plan file or a name in build/plans/ (default: every plan of tests/gpu/plans.py's
MODEL_PLANS built there): batch 1, 8, 64 and 256, and 3 speculative tokens at batch 8, each at a
context of 1k and 16k positions (the plan's page table holds just that context: `lanec import
--context-pages`). Each row is printed as soon as it is measured; a failure costs its row.

Both sides serve the same full batch (runner.served_inputs: every request active, its step's
rows the last of its context, so each MLA layer reads `context` cache rows a request; the same
token ids, slots and accepted counts). Each side runs in a process of its own, one after the
other: each holds the model's 98 GB, which fit the H200 once, not twice.
- lanec: the plan's graph with PDL (bench/plan_step.py's measurement); weights seeded on the GPU
  by the plan's seeders (98 GB do not fit the host), states zeroed on the GPU (at 16k a batch's
  latent caches are tens of GB the host need not make; the step's time does not depend on
  their values).
- chain: bench/step_chain.py's chain at the real size: cuBLAS products, fla's KDA kernels and
  norms, SGLang's Triton MLA decode attention and Triton fused MoE, torch's router and argmax;
  random weights drawn on the GPU.
- copy: torch's 1 GiB device copy (read + written counted) after a few seconds of matmuls warm
  the clocks, once at the start of the run (bench/measure.py's `ceilings`).

Columns: step us (each side's median graph replay); chain / lanec (> 1: lanec faster); tok/s
(the step's rows, batch x tokens a request, over its time: a speculative step's rows are
verified, not all accepted); bytes (the step's traffic as the compiler records it for each
launch, `Launch.traffic`, at most what the kernels move; each mixture's experts counted as the
timed step routed them, its distinct chosen experts read back from the GPU, where the record
counts min(experts, rows x top-k)); roofline us (those bytes over the copy bandwidth); lanec %
of roofline (roofline / lanec us); launches (the plan's); lanec % of the floor-adjusted roofline
(the roofline plus LAUNCH_FLOOR_US a launch, facts.py: what a launch in a PDL chain costs beyond
its bytes, measured by bench/gemv.py's floor set; 100%: the step is its bytes and its launches'
floors)."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from step_chain import locate_failure, plan_context  # noqa: E402

from lanec.codegen.facts import LAUNCH_FLOOR_US  # noqa: E402
from lanec.interp.program import Program  # noqa: E402
from lanec.runtime.plan import Plan, routing_buffer  # noqa: E402
from lanec.runtime.runner import Session  # noqa: E402
from tests.gpu.plans import MODEL_PLANS, OUT  # noqa: E402

SEED = 0
REPEATS = 30
SIDE_TIMEOUT = 480  # seconds a side may take (a GPU command has 600)
TAIL = 12  # lines of a failed side's output shown


class ZeroStates(Session):
    """A session whose states start zeroed on the GPU instead of uploaded from the host; inputs
    are uploaded, activations and outputs poisoned as a Session does."""

    def load(self, env) -> None:
        wanted = {spec.source for spec in self.plan.buffers if spec.role == "input"}
        if wanted - set(env.inputs):
            raise SystemExit(f"model: the step's inputs lack {sorted(wanted - set(env.inputs))}")
        for spec in self.plan.buffers:
            if spec.role == "state":
                self.buffers[spec.name].fill(0)
            elif spec.role in ("activation", "output"):
                self.buffers[spec.name].fill(0xFF)
        self.write(env.inputs)


@dataclass(frozen=True)
class Row:
    """One plan's figures; a side that failed is NaN."""

    name: str
    batch: int
    tokens: int
    context: int | None
    lanec_us: float
    chain_us: float
    nbytes: int
    copy_bw: float  # bytes a second
    launches: int = 0  # the plan's launches, each LAUNCH_FLOOR_US in the floor-adjusted roofline

    @property
    def rows(self) -> int:
        return self.batch * self.tokens

    @property
    def roofline_us(self) -> float:
        return self.nbytes / self.copy_bw * 1e6 if self.copy_bw > 0 else math.nan

    def tokens_per_s(self, us: float) -> float:
        return self.rows / (us * 1e-6) if us > 0 else math.nan

    @property
    def share(self) -> float:
        """lanec's step against the byte roofline (1: at the roofline)."""
        return self.roofline_us / self.lanec_us if self.lanec_us > 0 else math.nan

    @property
    def floor_share(self) -> float:
        """lanec's step against its bytes and its launches' floors (1: nothing beyond them)."""
        bound = self.roofline_us + self.launches * LAUNCH_FLOOR_US
        return bound / self.lanec_us if self.lanec_us > 0 else math.nan


COLUMNS = [("plan", 22), ("batch", 5), ("tokens", 6), ("context", 7), ("lanec us", 10), ("chain us", 10),
           ("chain/lanec", 11), ("lanec tok/s", 11), ("chain tok/s", 11), ("bytes (MB)", 10), ("roofline us", 11),
           ("lanec % roof", 12), ("launches", 8), ("% floor roof", 12)]


def header() -> str:
    return " ".join(f"{title:<{width}}" if i == 0 else f"{title:>{width}}" for i, (title, width) in enumerate(COLUMNS))


def cell(value: float, spec: str) -> str:
    return "failed" if math.isnan(value) else format(value, spec)


def format_row(row: Row) -> str:
    """The row under `header()`: a failed side's cells read "failed"."""
    ratio = row.chain_us / row.lanec_us if row.lanec_us > 0 else math.nan
    cells = [row.name, str(row.batch), str(row.tokens), "-" if row.context is None else str(row.context),
             cell(row.lanec_us, ".1f"), cell(row.chain_us, ".1f"),
             cell(ratio, ".2f") + ("" if math.isnan(ratio) else "x"),
             cell(row.tokens_per_s(row.lanec_us), ".0f"), cell(row.tokens_per_s(row.chain_us), ".0f"),
             f"{row.nbytes / 1e6:.1f}", cell(row.roofline_us, ".1f"), cell(100 * row.share, ".1f") +
             ("" if math.isnan(row.share) else "%"), str(row.launches),
             cell(100 * row.floor_share, ".1f") + ("" if math.isnan(row.floor_share) else "%")]
    return " ".join(f"{text:<{width}}" if i == 0 else f"{text:>{width}}"
                    for i, (text, (_, width)) in enumerate(zip(cells, COLUMNS, strict=True)))


def step_bytes(plan: Plan) -> int:
    """The step's traffic: every launch's recorded bytes, read and written."""
    return sum(launch.traffic.get("read", 0) + launch.traffic.get("written", 0) for launch in plan.launches)


def resolve(name: str) -> Path:
    """A plan file as given, or a name in build/plans/."""
    path = Path(name)
    return path if path.suffix == ".plan" or path.is_file() else OUT / f"{name}.plan"


def default_plans() -> list[Path]:
    """MODEL_PLANS's plans built in build/plans/ (none built: a one-line error)."""
    built = [OUT / f"{name}.plan" for name in MODEL_PLANS if (OUT / f"{name}.plan").is_file()]
    if not built:
        raise SystemExit(f"model: no plan of MODEL_PLANS in {OUT}: build them with python tests/gpu/plans.py "
                         + " ".join(MODEL_PLANS))
    return built


# -- the sides, each in a process of its own ---------------------------------------------------------


def unrouted_bytes(program: Program, chosen: dict[str, np.ndarray]) -> int:
    """The expert bytes the compiler's record counts beyond what the step routed: for each
    mixture with bf16 experts, (min(experts, rows x top-k) - its distinct chosen experts) x one
    expert's gate, up and down bytes. `chosen`: router weight name -> the expert ids [rows, top_k]
    the GPU chose (plan buffer `routing_buffer(name)`)."""
    weights = {w.value: w for w in program.weights}
    extra = 0
    for step in program.steps:
        router = weights.get(step.operands.get("router")) if step.op == "mixture" else None
        if router is None or router.name not in chosen:
            continue
        experts = [weights[step.operands[name]] for name in ("gate", "up", "down")]
        if any(w.format != "bf16" for w in experts):
            continue
        ids = np.asarray(chosen[router.name])
        count = experts[0].shape[0]
        one = sum(math.prod(w.shape[1:]) for w in experts) * 2
        extra += (min(count, ids.size) - len(np.unique(ids))) * one
    return extra


def seeded_session(path: Path) -> tuple[Plan, Program, ZeroStates]:
    """The plan's session as bench/model.py times it: weights seeded on the GPU by the plan's
    seeders, states zeroed, served inputs (seed SEED), PDL on."""
    from lanec.interp.environment import Environment
    from lanec.runtime.runner import Options, load_plan, seeded_on_gpu, served_inputs, validate_inputs

    options = Options(gpu_seeding=True)
    plan, program, sources = load_plan(path, options)
    seed = seeded_on_gpu(plan, options)
    if seed is None:
        raise SystemExit(f"model: {path} carries no seeders: its 98 GB of weights cannot be made on the host "
                         "(recompile it with this lanec)")
    inputs = served_inputs(program, plan_context(program), SEED)
    validate_inputs(program, inputs)
    return plan, program, ZeroStates(plan, Environment(inputs, {}, {}), sources, pdl=True, seed=seed)


def lanec_us(path: Path, repeats: int) -> tuple[float, int]:
    """lanec's step: the plan's graph with PDL, seeded weights made on the GPU, states zeroed;
    and the expert bytes its traffic record counts beyond what the timed step routed."""
    from plan_step import session_step_us

    plan, program, session = seeded_session(path)
    us = session_step_us(session, graph=True, repeats=repeats)
    held = {spec.name for spec in plan.buffers}
    chosen = {w.name: session.read(routing_buffer(w.name)) for w in program.weights
              if routing_buffer(w.name) in held}
    return us, unrouted_bytes(program, chosen)


def chain_us(path: Path, locate: bool) -> float:
    """The chain's step (median of graph replays), or with `locate` one eager step, op by op."""
    import torch
    from kda import median_graph_us
    from step_chain import STEPS_A_GRAPH, load_chain

    torch.cuda.init()
    program = Program.from_json(Plan.read(path).program)
    chain = load_chain(program, plan_context(program), locate)
    if locate:
        chain.step()
        torch.cuda.synchronize()
        print("model: one eager chain step completed", flush=True)
        return math.nan
    return median_graph_us(chain.step, STEPS_A_GRAPH, torch.cuda.Stream())


def copy_bandwidth() -> float:
    """The device copy bandwidth (bytes a second), clocks warmed first."""
    import measure
    import torch

    copy_bw, _ = measure.ceilings(torch, torch.cuda.Stream(), torch.cuda.get_device_name())
    return copy_bw


def side(which: str, plan: Path | None, locate: bool, repeats: int) -> None:
    """One side in this process, its figure printed as `<which> <value>`."""
    if which == "copy":
        print(f"copy {copy_bandwidth():.6e}", flush=True)
    elif which == "lanec":
        us, unrouted = lanec_us(plan, repeats)
        print(f"lanec {us:.3f} {unrouted}", flush=True)
    else:
        print(f"chain {chain_us(plan, locate):.3f}", flush=True)


def side_command(which: str, plan: Path | None, repeats: int) -> list[str]:
    return [sys.executable, __file__, "--side", which, "--repeats", str(repeats)] + ([str(plan)] if plan else [])


def run_side(which: str, plan: Path | None, repeats: int, device: int | None = None) -> tuple[list[float], str]:
    """A side in a child process (on GPU `device` alone where given): (the numbers of its
    `<which> ...` line, [NaN] where it failed; its output's last lines)."""
    command = side_command(which, plan, repeats)
    environment = None if device is None else dict(os.environ, CUDA_VISIBLE_DEVICES=str(device))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SIDE_TIMEOUT, env=environment)
    except subprocess.TimeoutExpired as expired:
        return [math.nan], f"timed out after {SIDE_TIMEOUT} s: {str(expired.stdout or '')[-400:]}"
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith(f"{which} ")]
    tail = "\n    ".join((done.stdout + done.stderr).strip().splitlines()[-TAIL:])
    if done.returncode != 0 or not lines:
        return [math.nan], f"exit {done.returncode}:\n    {tail}"
    return [float(value) for value in lines[-1][1:]], tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="*", help="plan files or names in build/plans/ (default: MODEL_PLANS built)")
    parser.add_argument("--side", choices=("copy", "lanec", "chain"), help="run one side in this process")
    parser.add_argument("--locate", action="store_true",
                        help="with --side chain: one eager step, each op synchronized, naming the op that fails")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="lanec's timed steps (median)")
    parser.add_argument("--gpus", type=int, default=1,
                        help="measure rows on this many GPUs at once (GPU i takes every i-th plan; rows print as done)")
    options = parser.parse_args()
    if options.side:
        if options.side != "copy" and len(options.plans) != 1:
            parser.error(f"--side {options.side} takes one plan")
        side(options.side, resolve(options.plans[0]) if options.plans else None, options.locate, options.repeats)
        return

    paths = [resolve(name) for name in options.plans] or default_plans()
    (copy_bw, *_), tail = run_side("copy", None, options.repeats)
    said = [line for line in tail.splitlines() if "TB/s" in line]
    print(said[-1].strip() if said and not math.isnan(copy_bw) else f"copy bandwidth failed ({tail})", flush=True)
    print(header(), flush=True)
    printing = threading.Lock()

    def say(text: str) -> None:
        with printing:
            print(text, flush=True)

    def row(path: Path, device: int | None) -> bool:
        """One plan's row (lanec, then the chain, on `device`); True where it failed."""
        if not path.is_file():
            say(f"{path.stem:<22} no plan at {path}: build it with python tests/gpu/plans.py {path.stem}")
            return True
        plan = Plan.read(path)
        program = Program.from_json(plan.program)
        (ours, *unrouted), our_tail = run_side("lanec", path, options.repeats, device)
        (theirs, *_), their_tail = run_side("chain", path, options.repeats, device)
        say(format_row(Row(path.stem, program.batch, program.tokens, plan_context(program), ours, theirs,
                           step_bytes(plan) - int(unrouted[0] if unrouted else 0), copy_bw, len(plan.launches))))
        if math.isnan(ours):
            say(f"  {path.stem}: lanec failed, {our_tail}")
        if math.isnan(theirs):
            say(f"  {path.stem}: the chain failed, {their_tail}")
            if device is None:  # the eager, op-by-op run names the op (one GPU at a time)
                locate_failure([*side_command("chain", path, options.repeats), "--locate"], path.stem, SIDE_TIMEOUT)
        return math.isnan(ours) or math.isnan(theirs)

    if options.gpus <= 1:
        failed = sum(row(path, None) for path in paths)
    else:
        def share(device: int) -> int:
            return sum(row(path, device) for path in paths[device::options.gpus])

        with ThreadPoolExecutor(options.gpus) as pool:
            failed = sum(pool.map(share, range(options.gpus)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
