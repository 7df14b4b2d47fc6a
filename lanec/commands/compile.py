"""`lanec compile model.mlir -o plan.bin`: the whole pipeline, on a machine with no GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from lanec.commands import reported
from lanec.commands.knobs import grouped_option, knob_options, shim_of, tp_option


@click.command("compile")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="the plan file to write")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="compiled kernels' cache (default: $XDG_CACHE_HOME/lanec or ~/.cache/lanec)")
@click.option("--emit-lane", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the lowered lane step (MLIR) here")
@click.option("--emit-kernels", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the cute-dsl module of kernel specializations here")
@knob_options
@tp_option
@grouped_option
def compile_command(source: Path, output: Path, cache_dir: Path | None, emit_lane: Path | None,
                    emit_kernels: Path | None, numerics: str, words: str, fuse_quant: bool | None,
                    batch_products: bool, fold_norms: bool | None, fold_argmax: bool, fold_gate: bool | None,
                    fold_router_norms: bool | None, tp: int, grouped_experts: bool) -> None:
    """Compile a form file to a plan.bin (rules, lowering, CuTe DSL kernels for sm_90a, plan).
    With --tp N > 1 the form is sharded: the plan is for N GPUs (`lanec run` starts a rank on each)."""
    from lanec.pipeline import compile_plan

    shim = shim_of(numerics, words, fuse_quant, batch_products, fold_norms, fold_argmax, fold_gate, fold_router_norms)
    stderr = sys.stderr
    with reported():
        if stderr.isatty():
            with click.progressbar(length=1, label="compiling kernels", file=stderr) as bar:
                def progress(done: int, total: int, kernel: str) -> None:
                    bar.length = total
                    bar.label = f"compiling kernels ({kernel})"
                    bar.update(1)

                result = compile_plan(source, shim, cache_dir=cache_dir, progress=progress, tp=tp,
                                      grouped_experts=grouped_experts)
        else:
            result = compile_plan(source, shim, cache_dir=cache_dir, tp=tp, grouped_experts=grouped_experts)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        result.plan.write(output)
    except OSError as error:
        raise click.ClickException(f"{output}: cannot write it: {error.strerror or error}") from None
    if emit_lane is not None:
        emit_lane.write_text(str(result.lane) + "\n")
    if emit_kernels is not None:
        emit_kernels.write_text(result.kernels)
    plan = result.plan
    ranks = f", {plan.ranks} ranks ({len(plan.collectives)} all-reduces a step)" if plan.ranks > 1 else ""
    click.echo(f"{output}: {len(plan.launches)} launches of {len(plan.cubins)} kernels, "
               f"{len(plan.buffers)} buffers{ranks}; {len(result.decisions)} fusion decisions")
