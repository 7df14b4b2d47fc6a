"""What every importer shares: a step builder that keeps the step's leaves (inputs, weights,
states) ahead of its ops, as the `form` dialect lists them, and the print / parse round trip a
module is written through."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, Float32Type, ModuleOp, StringAttr, i32
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

    def refuse_kimi_options(self, family: str, slots: bool = False) -> None:
        """A one-line error for a Kimi Linear variant option given to `family`'s importer (and
        for `--slots`, where `slots` says the family keeps no state slots)."""
        given = [("--kda-only", self.kda_only), ("--dense-mlp", self.dense_mlp is not None)]
        if slots:
            given.insert(0, ("--slots", self.slots is not None))
        for option, on in given:
            if on:
                raise ConfigError(f"{option}: a Kimi Linear option; not imported for {family}")


class FamilyStep:
    """What a family's step class shares: its config `c`, options `o`, builder `b`, the state slots
    it holds, and the step inputs that name them."""

    def __init__(self, config, options: StepOptions):
        self.c = config
        self.o = options
        self.b = StepBuilder(options.batch, options.tokens)
        self.slot_count = options.slots or options.slots_needed()

    def build(self) -> ModuleOp:
        """The decoder: the embedding, each layer's token mixer and MLP (each after its norm, with
        the residual added), the final norm and the logits. A family gives `mixer` and `mlp`."""
        c, b = self.c, self.b
        tokens = b.input("tokens", [b.rows])
        table = b.weight("model.embed_tokens.weight", [c.vocab, c.hidden])
        h = b.value(form.EmbedOp(tokens, table))
        for layer in range(self.o.layers or c.layers):
            p = f"model.layers.{layer}"
            h = b.add(h, self.mixer(self.norm(h, f"{p}.input_layernorm.weight"), p, layer))
            h = b.add(h, self.mlp(self.norm(h, f"{p}.post_attention_layernorm.weight"), p, layer))
        x = self.norm(h, "model.norm.weight")
        return b.outputs(b.logits(x, table, c.tied_embeddings), self.o)

    def norm(self, x: SSAValue, name: str) -> SSAValue:
        return self.b.norm(x, name, self.c.rms_eps)

    def mixer(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        raise NotImplementedError(f"{type(self).__name__} gives its layers' token mixer")

    def mlp(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        raise NotImplementedError(f"{type(self).__name__} gives its layers' MLP")

    def latent_attention(self, p: str, a: str, qr: SSAValue, latent: SSAValue, k_rope: SSAValue,
                         positions: SSAValue, heads: int, nope: int, rope: int, lora: int, v: int,
                         scale: float | None = None) -> SSAValue:
        """The latent attention over the layer's paged latent cache (rows of lora + rope), its
        expansion kv_b under `a`, then the o product; softmax scale `scale` (None: (nope + rope)^-0.5)."""
        b = self.b
        cache = b.state(f"{p}.latent", "latent", [self.o.batch * self.o.context_pages, self.o.page_size, lora + rope])
        kv_b = b.weight(f"{a}.kv_b_proj.weight", [heads * (nope + v), lora])
        props = {"heads": heads, "nope": nope, "rope": rope, "lora": lora, "v": v}
        attention = b.value(form.LatentAttentionOp(
            operands=[qr, latent, k_rope, cache, kv_b, b.input("pages", [self.o.batch, self.o.context_pages]),
                      positions],
            properties={**{k: form.int_prop(n) for k, n in props.items()},
                        "scale": form.float_prop((nope + rope) ** -0.5 if scale is None else scale)},
            result_types=[tensor([b.rows, heads * v])],
        ))
        return b.product(attention, f"{a}.o_proj.weight", self.c.hidden)

    def routed_mixture(self, x: SSAValue, p: str, projections: tuple[str, str, str], scoring: str,
                       **extra: Attribute) -> SSAValue:
        """The config's routed experts under `p` (`experts.*.<projection>.weight` for gate, up and
        down) with the router's correction bias, plus its shared experts' gated MLP, if any."""
        c, b = self.c, self.b
        e, width, hidden = c.experts, c.expert_width, c.hidden
        router = b.weight(f"{p}.gate.weight", [e, hidden])
        correction = b.weight(f"{p}.gate.e_score_correction_bias", [e], F32)
        gate, up, down = (b.weight(f"{p}.experts.*.{name}.weight", dims) for name, dims in
                          zip(projections, ([e, width, hidden], [e, width, hidden], [e, hidden, width])))
        props = {"top_k": form.int_prop(c.top_k), "scoring": StringAttr(scoring),
                 "renormalize": form.int_prop(int(c.renormalize)),
                 "routed_scaling": form.float_prop(c.routed_scaling), **extra}
        routed = b.value(form.MixtureOp(operands=[x, router, gate, up, down, [correction], [], []],
                                        properties=props, result_types=[x.type]))
        if not c.shared_experts:
            return routed
        s = f"{p}.shared_experts"
        shared = b.gated_mlp(x, f"{s}.gate_proj.weight", f"{s}.up_proj.weight", f"{s}.down_proj.weight",
                             width * c.shared_experts)
        return b.add(routed, shared)

    def slots(self) -> SSAValue:
        dims = [self.o.batch] if self.o.tokens == 1 else [self.o.batch, self.o.tokens]
        return self.b.input("slots", dims)

    def accepted(self) -> SSAValue | None:
        return self.b.input("accepted", [self.o.batch]) if self.o.tokens > 1 else None


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
