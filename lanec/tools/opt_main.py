"""`lanec opt`: xDSL's `xdsl-opt` for lanec's dialects, passes and targets.

It subclasses `xDSLOptMain` rather than forking it, so every xdsl-opt option keeps its meaning
(`-p`, `-t`, `--split-input-file`, `--verify-diagnostics`, ...). One change: outside the two
diagnostics modes, a bad input is one line `file:line:col: error: message` (lanec.diagnostics),
raised as lanec's own error for `lanec opt` to print.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException
from xdsl.xdsl_opt_main import xDSLOptMain

from lanec.diagnostics import FormError, LanecError, LocatingParser
from lanec.dialects import all_dialects
from lanec.passes import get_all_passes


class LanecOptMain(xDSLOptMain):
    version_format = "lanec opt, built on xDSL {xdsl_version}"

    def register_all_dialects(self) -> None:
        for name, getter in all_dialects().items():
            self.ctx.register_dialect(name, getter)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, getter in get_all_passes().items():
            self.register_pass(name, getter)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        # The cute-dsl target joins once lanec.codegen offers it; until then xDSL's targets serve.
        get_all_targets = getattr(importlib.import_module("lanec.codegen"), "get_all_targets", None)
        if get_all_targets is not None:
            self.available_targets.update(get_all_targets())

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.prog = "lanec opt"
        super().register_all_arguments(arg_parser)

    def setup_pipeline(self) -> None:
        try:
            super().setup_pipeline()
        except ValueError as error:  # an unknown pass, or an option it lacks
            raise LanecError(f"-p {self.args.passes}: {error}") from None
        except ArgSpecParseError as error:  # its message ends in the line that says what is wrong
            what = str(error).strip().splitlines()[-1].strip()
            raise LanecError(f"-p {self.args.passes}: {what}") from None

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        try:
            return super().get_input_stream()
        except OSError as error:
            raise FormError(self.get_input_name(), f"cannot read: {error.strerror or error}") from None

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        try:
            return super().prepare_input()
        except ValueError as error:  # an input whose extension names no frontend
            raise FormError(self.get_input_name(), f"{error}; use -f mlir") from None

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if file_extension != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        data = chunk.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise FormError(self.get_input_name(), f"not UTF-8 text (byte {error.start})") from None
        parser = LocatingParser(self.ctx, text, self.get_input_name(), start_offset)
        implicit_module = not self.args.no_implicit_module
        # Each diagnostics mode keeps xDSL's own report, which lit tests check; xDSL verifies the
        # module itself before the first pass.
        if self.args.parsing_diagnostics:
            module = parser.parse_module(implicit_module)
        else:
            module = parser.parse_located(implicit_module)
        if not (self.args.verify_diagnostics or self.args.disable_verify):
            parser.verify_located(module)
        return module

    def apply_passes(self, prog: ModuleOp) -> None:
        try:
            super().apply_passes(prog)
        except DiagnosticException as error:
            if self.args.verify_diagnostics:
                raise
            # After a pass the IR has no source locations left to point at.
            raise FormError(self.get_input_name(), str(error)) from None


def run_opt(args: Sequence[str]) -> None:
    LanecOptMain(description="lanec opt: xdsl-opt for lanec's dialects and passes", args=list(args)).run()
