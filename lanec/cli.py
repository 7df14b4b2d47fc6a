"""The `lanec` command line: one click group; each subcommand lives in lanec/commands/ and is
imported only when it runs, so `lanec --help` stays fast and the heavy libraries (xDSL, CuTe DSL,
cuda-python) load only where they are needed."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of its click command, in the order `lanec --help` lists them.
COMMANDS = {
    "import": "lanec.commands.import_config:import_config",
    "compile": "lanec.commands.compile:compile_command",
    "opt": "lanec.commands.opt:opt",
    "explain": "lanec.commands.explain:explain",
    "run": "lanec.commands.run:run",
    "generate": "lanec.commands.generate:generate",
    "show": "lanec.commands.show:show",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lanec")
def main() -> None:
    """lanec: compile a model's decode step to one plan.bin for NVIDIA Hopper, and run it."""


if __name__ == "__main__":
    main()
