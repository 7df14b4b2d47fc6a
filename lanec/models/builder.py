"""What every importer shares: a step builder that keeps the step's leaves (inputs, weights,
states) ahead of its ops, as the `form` dialect lists them, and the print / parse round trip a
module is written through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, Float32Type, ModuleOp, i32
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.printer import Printer

from lanec.dialects import form
from lanec.dialects.form import tensor
from lanec.models.config import ConfigError

F32 = Float32Type()


@dataclass(frozen=True)
class StepOptions:
    """What `lanec import` asks of a step beyond the config."""

    layers: int | None = None  # the first N layers (None: all)
    batch: int = 1
    tokens: int = 1  # > 1: a speculative verify step (accepted counts, [batch, tokens] slot tables)
    # state slots (None: one a row, batch * tokens, + 1: slot 0 is never used; a speculative step
    # writes token t's state to the request's own slot slots[b, t])
    slots: int | None = None
    page_size: int = 64
    context_pages: int = 64  # pages a request may hold: the longest context is page_size * this
    kda_only: bool = False  # skip the MLA layers (Kimi Linear)
    dense_mlp: int | None = None  # every layer a dense MLP of this width in place of the mixture (Kimi Linear)
    logits: bool = True  # return the logits after the next tokens

    def slots_needed(self) -> int:
        return self.batch * self.tokens + 1

    def check(self, layers: int) -> None:
        """What every family checks; `layers`: the config's."""
        for name, option in (("batch", "--batch"), ("tokens", "--spec-tokens"), ("page_size", "--page-size"),
                             ("context_pages", "--context-pages")):
            if getattr(self, name) < 1:
                raise ConfigError(f"{option}: {getattr(self, name)} must be at least 1")
        if self.layers is not None and not 1 <= self.layers <= layers:
            raise ConfigError(f"--layers: {self.layers} is not between 1 and the config's {layers} layers")


class StepBuilder:
    """Builds one `form.step` of `batch` requests of `tokens` rows each."""

    def __init__(self, batch: int, tokens: int):
        self.batch = batch
        self.tokens = tokens
        self.rows = batch * tokens
        self.leaves: list[Operation] = []
        self.ops: list[Operation] = []
        self.inputs: dict[str, SSAValue] = {}

    def input(self, role: str, dims: Sequence[int]) -> SSAValue:
        """The step's input of `role`, made once and shared by every op that reads it."""
        if role not in self.inputs:
            self.inputs[role] = form.InputOp(role, tensor(dims, i32)).result
        return self.inputs[role]

    def weight(self, name: str, dims: Sequence[int], elem: Attribute | None = None) -> SSAValue:
        op = form.WeightOp(name, tensor(dims, elem))
        self.leaves.append(op)
        return op.result

    def state(self, name: str, kind: str, dims: Sequence[int], elem: Attribute | None = None) -> SSAValue:
        op = form.StateOp(name, kind, tensor(dims, elem))
        self.leaves.append(op)
        return op.result

    def op(self, op: Operation) -> Operation:
        self.ops.append(op)
        return op

    def value(self, op: Operation) -> SSAValue:
        """Appends a one-result op and returns its result."""
        return self.op(op).results[0]

    def product(self, x: SSAValue, name: str, outputs: int) -> SSAValue:
        """x times the checkpoint rows `name` ([outputs, x's width])."""
        w = self.weight(name, [outputs, form.shape(x)[1]])
        return self.value(form.ProductOp(x, [w]))

    def products(self, x: SSAValue, parts: Sequence[tuple[str, int]]) -> Sequence[SSAValue]:
        """One product of x in parts: one weight and one result a (name, outputs) part."""
        weights = [self.weight(name, [outputs, form.shape(x)[1]]) for name, outputs in parts]
        return self.op(form.ProductOp(x, weights)).results

    def norm(self, x: SSAValue, name: str, eps: float) -> SSAValue:
        w = self.weight(name, [form.shape(x)[1]])
        return self.value(form.NormOp(x, w, eps))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(form.AddOp(a, b))

    def gated_mlp(self, x: SSAValue, gate: str, up: str, down: str, width: int) -> SSAValue:
        """The unfused SwiGLU MLP: gate and up products, swiglu, down product."""
        g = self.product(x, gate, width)
        u = self.product(x, up, width)
        return self.product(self.value(form.SwigluOp(g, u)), down, form.shape(x)[1])

    def logits(self, x: SSAValue, table: SSAValue, tied: bool) -> SSAValue:
        """The lm_head product of x: the embedding table's rows when `tied` (one weight, read
        twice), else the checkpoint's `lm_head.weight`."""
        if tied:
            return self.value(form.ProductOp(x, [table]))
        return self.product(x, "lm_head.weight", form.shape(table)[0])

    def outputs(self, logits: SSAValue, options: StepOptions) -> ModuleOp:
        """The step returning the next tokens (argmax), then the logits unless left out."""
        next_tokens = self.value(form.ArgmaxOp(logits))
        return self.module([next_tokens, logits] if options.logits else [next_tokens])

    def module(self, outputs: Sequence[SSAValue]) -> ModuleOp:
        # Inputs first, in the dialect's order of roles, then weights and states as the layers
        # read them, then the ops.
        inputs = [self.inputs[role].owner for role in form.INPUT_ROLES if role in self.inputs]
        block = Block()
        block.add_ops([*inputs, *self.leaves, *self.ops, form.ReturnOp(outputs)])
        step = form.StepOp(self.batch, self.tokens, Region(block))
        return ModuleOp([step])


def context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(form.Form)
    return ctx


def module_text(module: ModuleOp) -> str:
    """The module verified and printed; the text parses back to itself (a fixed point)."""
    module.verify()
    text = printed(module)
    again = Parser(context(), text, "<printed>").parse_module()
    again.verify()
    if printed(again) != text:
        raise AssertionError("the printed module does not parse back to the same text")
    return text


def printed(module: ModuleOp) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue() + "\n"
