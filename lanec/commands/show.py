"""`lanec show plan.bin`: what a plan holds: kernels, buffers, weight bindings, launches."""

from __future__ import annotations

import click


@click.command()
@click.argument("plan", type=click.Path(dir_okay=False, path_type=str))
def show(plan: str) -> None:
    """Print a plan's kernels, buffers, weight bindings and launch schedule."""
    from lanec.runtime.plan import Plan, PlanError, describe

    try:
        click.echo(describe(Plan.read(plan)))
    except PlanError as error:
        raise click.ClickException(str(error)) from None
