"""One-line diagnostics for form files: `file:line:col: error: message`, never a traceback.

Every command that reads a form file goes through `load_module`; the errors are lanec's own
(`LanecError`, `FormError`), which the commands print (lanec/commands/__init__.py): the library
needs no click. A syntax error or an unknown op
is located by the span xDSL's parser reports; a verifier's error by where its op began, which
`LocatingParser` records while parsing (xDSL ops keep no source location of their own).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import AttributeInvT
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Span


class LanecError(Exception):
    """An error that is the user's to fix, as one line (the CLI prints it, exit status 1)."""

    def __init__(self, message: str):
        self.message = one_line(message)
        super().__init__(self.message)


class FormError(LanecError):
    """A bad form file, as one line `where: error: message`; `message` is the cause alone."""

    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: error: {self.message}"


def one_line(message: str) -> str:
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip()) or "unknown error"


def span_location(span: Span, line_offset: int = 0) -> str:
    """`file:line:col` of a span's start (line_offset: lines before this chunk of a split file)."""
    return str(dataclasses.replace(span, line_offset=span.line_offset + line_offset).get_location())


class LocatingParser(Parser):
    """xDSL's parser, remembering where each op began so that a verifier's error names its line."""

    def __init__(self, ctx: Context, text: str, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self.line_offset = line_offset
        self.starts: dict[Operation, Span] = {}
        self.first_uses: dict[str, Span] = {}

    def resolve_operand(self, operand: UnresolvedOperand, type: AttributeInvT) -> SSAValue[AttributeInvT]:
        if operand.operand_name not in self.ssa_values:
            self.first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def parse_operation(self) -> Operation:
        start = Span(self.pos, self.pos, self.lexer.input)
        op = super().parse_operation()
        self.starts[op] = start
        return op

    def here(self) -> str:
        return span_location(Span(self.pos, self.pos, self.lexer.input), self.line_offset)

    def location_of(self, op: Operation) -> str:
        """Where `op` began, or where its nearest parsed ancestor did (an implicit module has none)."""
        node: Operation | None = op
        while node is not None and node not in self.starts:
            node = node.parent_op()
        if node is None:
            return span_location(Span(0, 0, self.lexer.input), self.line_offset)
        return span_location(self.starts[node], self.line_offset)

    def parse_located(self, implicit_module: bool = True) -> ModuleOp:
        """Parse the whole input into a module, or raise a FormError at the failing token."""
        try:
            return self.parse_module(implicit_module)
        except ParseError as error:
            if self.forward_ssa_references and error.msg.startswith("values used but not defined"):
                # xDSL reports these at the end of the input; the first use is the place to look.
                name = min(self.forward_ssa_references, key=lambda n: self.first_uses[n].start)
                where = span_location(self.first_uses[name], self.line_offset)
                raise FormError(where, f"value %{name} is used but not defined") from None
            raise FormError(span_location(error.span, self.line_offset), error.msg) from None
        except Exception as error:  # an attribute's own check (a VerifyException) fails mid-parse
            raise FormError(self.here(), str(error)) from None

    def verify_located(self, module: ModuleOp) -> None:
        """Verify every op, nested ops first as xDSL does, or raise a FormError at the failing op."""
        for op in module.walk(region_first=True):
            try:
                op.verify(verify_nested_ops=False)
            except Exception as error:  # a verifier that trips on bad input fails as a diagnostic too
                raise FormError(self.location_of(op), str(error)) from None
        try:
            module.verify()  # what no single op checks: blocks and the regions around them
        except Exception as error:
            raise FormError(self.location_of(module), str(error)) from None


def parse_verified(ctx: Context, text: str, name: str, line_offset: int = 0) -> ModuleOp:
    parser = LocatingParser(ctx, text, name, line_offset)
    module = parser.parse_located()
    parser.verify_located(module)
    return module


def form_context() -> Context:
    """A context that knows every dialect a form file may use."""
    from lanec.dialects import all_dialects

    ctx = Context()
    for name, getter in all_dialects().items():
        ctx.register_dialect(name, getter)
    return ctx


def read_source(source: str | Path, name: str | None) -> tuple[str, str]:
    """The text and diagnostic name of a source: a Path, or a str naming a .mlir file or an existing
    file (one line, no newline), is read; any other str is the form text itself."""
    is_path = isinstance(source, Path) or (
        "\n" not in source and (source.endswith(".mlir") or Path(source).is_file())
    )
    if not is_path:
        return str(source), name or "<input>"
    path = Path(source)
    where = name or str(path)
    try:
        return path.read_text(encoding="utf-8"), where
    except UnicodeDecodeError as error:
        raise FormError(where, f"not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise FormError(where, f"cannot read: {error.strerror or error}") from None


def load_module(source: str | Path, name: str | None = None) -> ModuleOp:
    """Parse and verify a form module from a file path or its text; any failure is a FormError
    `file:line:col: error: message`."""
    text, where = read_source(source, name)
    return parse_verified(form_context(), text, where)
