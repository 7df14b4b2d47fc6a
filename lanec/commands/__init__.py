"""lanec's subcommands, one module each (lanec/cli.py lists them). The library raises its own
one-line errors; `reported` turns them into click's, so a user sees one line and no traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click


class Located(click.ClickException):
    """A form file's error, already `where: error: message`: printed as it is (click's "Error: "
    prefix would say error twice)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.format_message(), file=file, err=file is None)


@contextmanager
def reported() -> Iterator[None]:
    """Run a command's work, turning lanec's errors into click's (exit status 1)."""
    from lanec.diagnostics import FormError, LanecError  # xDSL loads with the work, not with `--help`
    from lanec.shim import KnobError

    try:
        yield
    except KnobError as error:  # knobs with no meaning together: the command line's (exit status 2)
        raise click.UsageError(str(error)) from None
    except FormError as error:
        raise Located(str(error)) from None
    except LanecError as error:
        raise click.ClickException(str(error)) from None
