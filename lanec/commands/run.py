"""`lanec run`: time a plan's decode steps on the GPU, `--check` one step against the interpreter,
`--serve` N steps as a server drives them, or `--interpret` it on the CPU. The runner does the
work (lanec/runtime/runner.py, which keeps its own argparse line for `python -m lanec.runtime` on a
machine without click)."""

from __future__ import annotations

from pathlib import Path

import click

from lanec.runtime.runner import Options  # no GPU is touched until a step runs


@click.command()
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--steps", type=int, default=Options.steps, show_default=True, help="decode steps to run")
@click.option("--check", is_flag=True, help="run one step on the GPU and compare it with the interpreter")
@click.option("--interpret", is_flag=True, help="run the plan's program on the CPU (no GPU)")
@click.option("--graph/--no-graph", default=Options.graph, show_default=True,
              help="replay the step as a CUDA graph, or launch eagerly")
@click.option("--pdl/--no-pdl", default=Options.pdl, show_default=True,
              help="launch with programmatic dependent launch")
@click.option("--seed", type=int, default=Options.seed, show_default=True,
              help="seed of the random inputs, states and (without --weights) weights")
@click.option("--weights", type=click.Path(path_type=Path), default=None,
              help="a safetensors file, a sharded checkpoint (its folder or model.safetensors.index.json) or a "
                   "GGUF (.gguf) file to take the weights from")
@click.option("--repeats", type=int, default=Options.repeats, show_default=True,
              help="timed repetitions (the median is reported)")
@click.option("--profile", is_flag=True,
              help="each launch's time (eager replay), bytes and share of the copy bandwidth, by layer kind and kernel")
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="with the profile, write the step as a Chrome / Perfetto trace (JSON)")
@click.option("--gpu-seeding/--host-seeding", default=True, show_default=True,
              help="make seeded weights on the GPU with the plan's seeders (the host keeps them lazy), "
                   "or on the host and upload them")
@click.option("--context", type=int, default=None,
              help="serve a full batch at this context: every request active, its step's rows the context's last")
@click.option("--tp", type=click.IntRange(min=1), default=None,
              help="GPUs to run on, one rank a GPU (NCCL): the plan's count, `lanec compile --tp N` [default: the "
                   "plan's; under torchrun or mpirun this process is one rank]")
@click.option("--outputs", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="with --check, save the GPU's outputs (rank 0's) to this .npz")
@click.option("--serve", type=int, default=None, metavar="N",
              help="serve N consecutive steps on the GPU, states and caches carried, positions moving on, "
                   "requests joining and leaving through the slot and page tables; prints a digest and steps/s")
@click.option("--check-every", type=int, default=None, metavar="K",
              help="with --serve, check every K-th step (and the last) against the interpreter, from the GPU's "
                   "states as they were before it")
@click.option("--churn", type=int, default=None, metavar="P",
              help="with --serve, every P steps a request leaves and a new one joins at position 0")
def run(plan: Path, steps: int, check: bool, interpret: bool, graph: bool, pdl: bool, seed: int,
        weights: Path | None, repeats: int, profile: bool, trace: Path | None, gpu_seeding: bool,
        context: int | None, tp: int | None, outputs: Path | None, serve: int | None, check_every: int | None,
        churn: int | None) -> None:
    """Run PLAN (a plan.bin): decode steps and their timings, --profile, --check, --serve, or
    --interpret. A plan for N GPUs (`lanec compile --tp N`) starts a rank on each of GPUs 0..N-1."""
    from lanec.runtime.runner import execute, user_errors

    options = Options(steps=steps, check=check, interpret=interpret, graph=graph, pdl=pdl, seed=seed,
                      weights=weights, repeats=repeats, profile=profile, trace=trace, gpu_seeding=gpu_seeding,
                      context=context, tp=tp, outputs=outputs, serve=serve, check_every=check_every, churn=churn)
    try:
        status = execute(plan, options, say=click.echo)
    except user_errors() as error:
        raise click.ClickException(str(error)) from None
    raise SystemExit(status)
