"""`lanec run`: time a plan's decode steps on the GPU, `--check` one step against the interpreter,
or `--interpret` it on the CPU; the options are the runner's own (`python -m lanec.runtime`)."""

from __future__ import annotations

import click


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,  # `lanec run --help` lists the runner's options
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(args: tuple[str, ...]) -> None:
    """Run a plan.bin: decode steps and timings, --check, --interpret."""
    from lanec.runtime.runner import execute, parse, user_errors

    path, options = parse(list(args), "lanec run")
    try:
        status = execute(path, options, say=click.echo)
    except user_errors() as error:
        raise click.ClickException(str(error)) from None
    raise SystemExit(status)
