"""`lanec opt`: xdsl-opt for lanec's dialects and passes; every argument goes to it unchanged."""

from __future__ import annotations

import click

from lanec.commands import reported


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,  # `lanec opt --help` lists xdsl-opt's own options
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def opt(args: tuple[str, ...]) -> None:
    """Parse, verify, run passes (-p) and print (-t) a form file, as xdsl-opt does."""
    from lanec.tools.opt_main import run_opt

    with reported():
        run_opt(args)
