"""The rules table preserves meaning: random small forms (chains of products, norms, adds,
swiglus, convs, KDA chains, mixtures with shared experts, latent attentions, per-head parts),
run through every stage under every knob setting, interpreted before and after on the same
random inputs, weights and states: outputs and final states agree.

Under quantized numerics the fused form quantizes activations, which the unfused form does not;
the reference there is the unfused form with the same quantize placement (fuse-quant alone, no
epilogues), which must agree as tightly as under precise numerics, and the fused result must stay
within the int8 error bound of the unquantized one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lanec.diagnostics import form_context, parse_verified
from lanec.dialects.form import (
    BLOCK,
    AttentionOp,
    ConvOp,
    GatedProductOp,
    LatentAttentionOp,
    MixtureOp,
    ProductOp,
    is_float,
    shape,
)
from lanec.interp.environment import random_environment
from lanec.interp.lower import program_of
from lanec.passes.fuse_quant import FuseQuantRule
from lanec.pipeline import fuse
from lanec.shim import LaneShim

KNOBS = [
    LaneShim(),
    LaneShim(batch_products=True),
    *[LaneShim("quantized", words, fuse, batch)
      for words in (1, 2) for fuse in (False, True) for batch in (False, True)],
]
TIGHT = 1e-5
# int8 in 32-value blocks: a quantized value is off by at most half a step, 1/254 of its block's
# max (one word) or 1/64516 (two words). Up to eight quantized activations a form, each error
# carried through a few layers, stay below these (seen: 1.0e-2 and 4.1e-5 over 60 forms):
QUANT_BOUND = {1: 0.05, 2: 1e-3}


def tensor(*dims: int, elem: str = "bf16") -> str:
    return "tensor<" + "x".join(map(str, dims)) + f"x{elem}>"


@dataclass
class Form:
    """A form step written line by line: leaves (inputs, weights, states) first, then ops."""

    batch: int
    tokens: int
    hidden: int
    leaves: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    count: int = 0
    inputs: set[str] = field(default_factory=set)

    @property
    def rows(self) -> int:
        return self.batch * self.tokens

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def weight(self, layer: int, what: str, dims: tuple[int, ...], fmt: str = "bf16", elem: str = "bf16") -> str:
        name = self.fresh("w")
        self.leaves.append(f'{name} = form.weight {{name = "model.layers.{layer}.{what}{self.count}", '
                           f'format = "{fmt}"}} : {tensor(*dims, elem=elem)}')
        return name

    def state(self, layer: int, kind: str, dims: tuple[int, ...], elem: str = "bf16") -> str:
        name = self.fresh("s")
        self.leaves.append(f'{name} = form.state {{name = "model.layers.{layer}.{kind}{self.count}", '
                           f'kind = "{kind}"}} : {tensor(*dims, elem=elem)}')
        return name

    def input(self, role: str) -> str:
        dims = {"tokens": (self.rows,), "positions": (self.rows,), "accepted": (self.batch,),
                "slots": (self.batch,) if self.tokens == 1 else (self.batch, self.tokens),
                "pages": (self.batch, 2)}[role]
        if role not in self.inputs:
            self.inputs.add(role)
            self.leaves.append(f'%{role} = form.input {{role = "{role}"}} : {tensor(*dims, elem="i32")}')
        return f"%{role}"

    def slot_operands(self) -> tuple[str, str, str]:
        """(slots, ` accepted %a : type` for convs, ` accepted %a` for delta rules)."""
        slots = self.input("slots")
        if self.tokens == 1:
            return slots, "", ""
        accepted = self.input("accepted")
        return slots, f" accepted {accepted} : {tensor(self.batch, elem='i32')}", f" accepted {accepted}"

    def slots_type(self) -> str:
        return tensor(self.batch, elem="i32") if self.tokens == 1 else tensor(self.batch, self.tokens, elem="i32")

    def op(self, text: str, stem: str = "v") -> str:
        name = self.fresh(stem)
        self.ops.append(f"{name} = {text}")
        return name

    def act(self, width: int, elem: str = "bf16") -> str:
        return tensor(self.rows, width, elem=elem)

    # -- building blocks ----------------------------------------------------------------------

    def product(self, x: str, width_in: int, weights: list[tuple[str, int]], part: str = "",
                inputs: int | None = None) -> list[str]:
        names = [self.fresh("p") for _ in weights]
        wtypes = ", ".join(tensor(n, inputs or width_in) for _, n in weights)
        results = ", ".join(self.act(n) for _, n in weights)
        results = f"({results})" if len(weights) > 1 else results
        self.ops.append(f"{', '.join(names)} = form.product {x}, {', '.join(w for w, _ in weights)}{part} : "
                        f"({self.act(width_in)}, {wtypes}) -> {results}")
        return names

    def norm(self, layer: int, x: str, width: int) -> str:
        w = self.weight(layer, "norm", (width,))
        return self.op(f"form.norm {x}, {w} {{eps = 1.000000e-05 : f64}} : ({self.act(width)}, "
                       f"{tensor(width)}) -> {self.act(width)}", "n")

    def add(self, a: str, b: str, width: int) -> str:
        return self.op(f"form.add {a}, {b} : ({self.act(width)}, {self.act(width)}) -> {self.act(width)}", "a")

    def out(self, value: str, width: int) -> None:
        self.outputs.append((value, self.act(width)))


def projections(form: Form, draw, layer: int, x: str) -> str:
    """Products of one activation (2-5 parts, one format), one of them back to the hidden width."""
    fmt = draw(st.sampled_from(["bf16", "q8_0"]))
    widths = [form.hidden] + draw(st.lists(st.sampled_from([32, 64, 96, 128, 256]), min_size=1, max_size=4))
    weights = [(form.weight(layer, "proj", (n, form.hidden), fmt), n) for n in widths]
    parts = [form.product(x, form.hidden, [w])[0] for w in weights]
    for part, n in zip(parts[1:], widths[1:], strict=True):
        form.out(part, n)
    return parts[0]


def mlp(form: Form, draw, layer: int, x: str) -> str:
    fmt = draw(st.sampled_from(["bf16", "q8_0"]))
    inner = draw(st.sampled_from([64, 96, 256, 288]))
    gate = form.product(x, form.hidden, [(form.weight(layer, "gate_proj", (inner, form.hidden), fmt), inner)])[0]
    up = form.product(x, form.hidden, [(form.weight(layer, "up_proj", (inner, form.hidden), fmt), inner)])[0]
    hidden = form.op(f"form.swiglu {gate}, {up} : ({form.act(inner)}, {form.act(inner)}) -> {form.act(inner)}", "h")
    down = form.weight(layer, "down_proj", (form.hidden, inner), fmt)
    return form.product(hidden, inner, [(down, form.hidden)])[0]


def routed_mixture(form: Form, layer: int, x: str, experts: int, inner: int, top_k: int) -> str:
    """A softmax-routed mixture of `experts` experts `inner` wide over x, top_k of them a row."""
    h = form.hidden
    router = form.weight(layer, "router", (experts, h))
    gate, up = (form.weight(layer, w, (experts, inner, h)) for w in ("w1", "w3"))
    down = form.weight(layer, "w2", (experts, h, inner))
    routed = form.op(
        f'form.mixture {x}, {router}, {gate}, {up}, {down} {{top_k = {top_k} : i64, scoring = "softmax", '
        f"renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64}} : {form.act(h)}, {tensor(experts, h)}, "
        f"{tensor(experts, inner, h)}, {tensor(experts, inner, h)}, {tensor(experts, h, inner)} -> {form.act(h)}", "m")
    return routed


def moe(form: Form, draw, layer: int, x: str) -> str:
    experts, inner, h = 4, 32, form.hidden
    top_k = draw(st.integers(1, 3))
    routed = routed_mixture(form, layer, x, experts, inner, top_k)
    shared_inner = draw(st.sampled_from([32, 64]))
    sg = form.product(x, h, [(form.weight(layer, "shared.gate_proj", (shared_inner, h)), shared_inner)])[0]
    su = form.product(x, h, [(form.weight(layer, "shared.up_proj", (shared_inner, h)), shared_inner)])[0]
    sh = form.op(f"form.swiglu {sg}, {su} : ({form.act(shared_inner)}, {form.act(shared_inner)}) -> "
                 f"{form.act(shared_inner)}", "h")
    sd = form.product(sh, shared_inner, [(form.weight(layer, "shared.down_proj", (h, shared_inner)), h)])[0]
    return form.add(routed, sd, h)


def conv_block(form: Form, draw, layer: int, x: str) -> str:
    h = form.hidden
    size = draw(st.sampled_from([d for d in (16, 32, 48, 96) if h % d == 0]))
    width = draw(st.sampled_from([3, 4]))
    slots, accepted, _ = form.slot_operands()
    taps = width - 1 + form.tokens - 1
    state = form.state(layer, "conv", (form.rows + 1, h, taps))
    w = form.weight(layer, "conv1d", (h, width))
    conv = form.op(f'form.conv {x}, {state}, {w}, {slots}{accepted} {{offset = 0 : i64, activation = "silu"}} : '
                   f"{form.act(h)}, {tensor(form.rows + 1, h, taps)}, {tensor(h, width)}, {form.slots_type()} -> "
                   f"{form.act(h)}", "c")
    return form.op(f"form.l2norm {conv} {{heads = {h // size} : i64, eps = 1.000000e-06 : f64}} : "
                   f"({form.act(h)}) -> {form.act(h)}", "l")


def kda(form: Form, draw, layer: int, x: str) -> str:
    h = form.hidden
    heads, size = draw(st.sampled_from([(1, 128), (2, 32), (1, 64)]))
    width = draw(st.sampled_from([4, 4, 3]))
    dim, rank = heads * size, 16
    fmt = draw(st.sampled_from(["bf16", "q8_0"]))
    widths = [dim, dim, dim, rank, heads]
    names = ("q", "k", "v", "f_a", "b")
    weights = [(form.weight(layer, n, (w, h), fmt), w) for n, w in zip(names, widths, strict=True)]
    q, k, v, f_a, b = (form.product(x, h, [w])[0] for w in weights)
    gate = form.product(x, h, [(form.weight(layer, "g", (dim, h), fmt), dim)])[0]
    slots, accepted, rule_accepted = form.slot_operands()
    taps = width - 1 + form.tokens - 1
    slot_count = form.rows + 1
    conv_state = form.state(layer, "conv", (slot_count, 3 * dim, taps))
    convs = []
    for part, offset in ((q, 0), (k, dim), (v, 2 * dim)):
        w = form.weight(layer, "conv1d", (dim, width))
        convs.append(form.op(
            f"form.conv {part}, {conv_state}, {w}, {slots}{accepted} "
            f'{{offset = {offset} : i64, activation = "silu"}} : '
            f"{form.act(dim)}, {tensor(slot_count, 3 * dim, taps)}, {tensor(dim, width)}, {form.slots_type()} -> "
            f"{form.act(dim)}", "c"))
    nq, nk = (form.op(f"form.l2norm {c} {{heads = {heads} : i64, eps = 1.000000e-06 : f64}} : ({form.act(dim)}) -> "
                      f"{form.act(dim)}", "l") for c in convs[:2])
    f_b = form.product(f_a, rank, [(form.weight(layer, "f_b", (dim, rank)), dim)])[0]
    a_log = form.weight(layer, "A_log", (heads,), elem="f32")
    dt_bias = form.weight(layer, "dt_bias", (dim,), elem="f32")
    decay = form.op(f'form.kda_gate {f_b}, {a_log}, {dt_bias} {{heads = {heads} : i64, form = "softplus"}} : '
                    f"({form.act(dim)}, {tensor(heads, elem='f32')}, {tensor(dim, elem='f32')}) -> "
                    f"{form.act(dim, 'f32')}", "d")
    beta = form.op(f"form.sigmoid {b} : ({form.act(heads)}) -> {form.act(heads)}", "b")
    state = form.state(layer, "recurrent", (slot_count, heads, size, size), elem="f32")
    accepted_type = f", {tensor(form.batch, elem='i32')}" if form.tokens > 1 else ""
    rule = form.op(
        f"form.delta_rule {nq}, {nk}, {convs[2]}, {decay}, {beta}, {state}, {slots}{rule_accepted} {{heads = {heads} "
        f": i64, key_heads = {heads} : i64, scale = 0.125 : f64}} : ({form.act(dim)}, {form.act(dim)}, "
        f"{form.act(dim)}, {form.act(dim, 'f32')}, {form.act(heads)}, "
        f"{tensor(slot_count, heads, size, size, elem='f32')}, {form.slots_type()}{accepted_type}) -> {form.act(dim)}",
        "r")
    norm_w = form.weight(layer, "o_norm", (size,))
    out = form.op(f'form.norm_gated {rule}, {gate}, {norm_w} {{heads = {heads} : i64, eps = 1.000000e-05 : f64, '
                  f'activation = "sigmoid"}} : ({form.act(dim)}, {form.act(dim)}, {tensor(size)}) -> {form.act(dim)}',
                  "o")
    return form.product(out, dim, [(form.weight(layer, "o_proj", (h, dim), fmt), h)])[0]


def latent_layer(form: Form, layer: int, x: str, heads: int, nope: int, rope: int, lora: int = 64,
                 v: int = 32) -> str:
    """A latent attention layer (its q, latent and rotated-key products, the attention, the output
    product) of the given sizes; returns the output product's result."""
    h = form.hidden
    qr = form.product(x, h, [(form.weight(layer, "q_proj", (heads * (nope + rope), h)), heads * (nope + rope))])[0]
    lat = form.product(x, h, [(form.weight(layer, "kv_a", (lora, h)), lora)])[0]
    kr = form.product(x, h, [(form.weight(layer, "k_rope", (rope, h)), rope)])[0]
    cache_pages, page_size = 2 * form.batch, 16
    cache = form.state(layer, "latent", (cache_pages, page_size, lora + rope))
    kv_b = form.weight(layer, "kv_b", (heads * (nope + v), lora))
    pages, positions = form.input("pages"), form.input("positions")
    att = form.op(
        f"form.latent_attention {qr}, {lat}, {kr}, {cache}, {kv_b}, {pages}, {positions} {{heads = {heads} : i64, "
        f"nope = {nope} : i64, rope = {rope} : i64, lora = {lora} : i64, v = {v} : i64, scale = 0.1 : f64}} : "
        f"({form.act(heads * (nope + rope))}, {form.act(lora)}, {form.act(rope)}, "
        f"{tensor(cache_pages, page_size, lora + rope)}, {tensor(heads * (nope + v), lora)}, "
        f"{tensor(form.batch, 2, elem='i32')}, {tensor(form.rows, elem='i32')}) -> {form.act(heads * v)}", "t")
    return form.product(att, heads * v, [(form.weight(layer, "o_proj", (h, heads * v)), h)])[0]


def latent(form: Form, draw, layer: int, x: str) -> str:
    return latent_layer(form, layer, x, heads=2, nope=draw(st.sampled_from([32, 48])),
                        rope=draw(st.sampled_from([16, 15])))


def head_part(form: Form, draw, layer: int, x: str) -> str:
    h = form.hidden
    heads = draw(st.sampled_from([d for d in (1, 2, 3) if h % d == 0]))
    unit = h // heads
    length = draw(st.sampled_from([n for n in (16, 32, unit) if n <= unit]))
    offset = draw(st.sampled_from(sorted({0, 16, unit - length} & set(range(unit - length + 1)))))
    part = form.op(f"form.part {x} {{heads = {heads} : i64, unit = {unit} : i64, offset = {offset} : i64, "
                   f"length = {length} : i64}} : ({form.act(h)}) -> {form.act(heads * length)}", "q")
    n = 32
    w = form.weight(layer, "absorb", (heads * n, length))
    per_head = (f" {{heads = {heads} : i64, unit = {length} : i64, offset = 0 : i64, length = {length} : i64}}")
    y = form.product(part, heads * length, [(w, heads * n)], part=per_head, inputs=length)[0]
    return form.product(y, heads * n, [(form.weight(layer, "up", (h, heads * n)), h)])[0]


BLOCKS = {"projections": projections, "mlp": mlp, "moe": moe, "conv": conv_block, "kda": kda, "latent": latent,
          "head_part": head_part}


@st.composite
def forms(draw) -> str:
    batch = draw(st.sampled_from([1, 2, 3, 20]))
    tokens = draw(st.sampled_from([1, 1, 2]))
    form = Form(batch=batch, tokens=tokens, hidden=draw(st.sampled_from([32, 64, 96])))
    table = form.weight(0, "embed", (32, form.hidden))
    residual = form.op(f"form.embed {form.input('tokens')}, {table} : ({tensor(form.rows, elem='i32')}, "
                       f"{tensor(32, form.hidden)}) -> {form.act(form.hidden)}", "x")
    for layer, block in enumerate(draw(st.lists(st.sampled_from(sorted(BLOCKS)), min_size=1, max_size=4))):
        normed = form.norm(layer, residual, form.hidden)
        residual = form.add(residual, BLOCKS[block](form, draw, layer, normed), form.hidden)
    final = form.norm(99, residual, form.hidden)
    logits = form.product(final, form.hidden, [(form.weight(99, "lm_head", (32, form.hidden)), 32)])[0]
    form.out(logits, 32)
    outputs = ", ".join(v for v, _ in form.outputs)
    types = ", ".join(t for _, t in form.outputs)
    body = "\n".join(f"    {line}" for line in form.leaves + form.ops + [f"form.return {outputs} : {types}"])
    return f"builtin.module {{\n  form.step batch {batch} tokens {tokens} {{\n{body}\n  }}\n}}\n"


def parsed(text: str):
    return parse_verified(form_context(), text, "<generated>")


def run(module, env):
    fresh = env.copy()
    outputs = program_of(module).run(fresh)
    return outputs, fresh.states


def relative(reference: np.ndarray, value: np.ndarray) -> float:
    reference, value = np.asarray(reference, np.float64), np.asarray(value, np.float64)
    scale = max(float(np.max(np.abs(reference))), 1e-30)
    return float(np.max(np.abs(reference - value))) / scale


def disagreement(expected, actual) -> float:
    (outs_a, states_a), (outs_b, states_b) = expected, actual
    errors = [relative(a, b) for a, b in zip(outs_a, outs_b, strict=True)]
    errors += [relative(states_a[name], states_b[name]) for name in states_a]
    return max(errors)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=forms(), seed=st.integers(0, 2**16))
def test_the_table_preserves_meaning(text: str, seed: int) -> None:
    original = parsed(text)
    env = random_environment(program_of(original), seed)  # from the unfused form: weights keep their values
    unfused = run(original, env)
    for shim in KNOBS:
        fused_module = original.clone()
        for decision in fuse(fused_module, shim):  # coverage: pytest --hypothesis-show-statistics
            event(f"{decision.rule} {'taken' if decision.taken else 'held back'}")
        fused = run(fused_module, env)
        if not shim.quantized:
            assert disagreement(unfused, fused) < TIGHT, (shim, text)
            continue
        placed = original.clone()
        shim.record(placed)
        FuseQuantRule().apply(form_context(), placed)  # the same quantize placement, unfused
        assert disagreement(run(placed, env), fused) < TIGHT, (shim, text)
        # a mixture's top-k is a discrete choice: int8 error upstream may route a row to another
        # expert, so quantization's own error is bounded only where no mixture follows
        if "form.mixture" not in text:
            assert disagreement(unfused, fused) < QUANT_BOUND[shim.words], (shim, text)


# ----------------------------------------------------------------------------------------------
# The held-back facts at their boundaries: each block draws the numbers a fact compares (units,
# offsets, lengths, tile widths, warps, places and pitches) from both sides of the fact's
# boundary, and states the fact itself, independently of the rules: the fused op survives the
# table exactly where the fact holds; every fused op left obeys every fact; and the meaning stays.

BOUNDARY_KNOBS = [LaneShim(), LaneShim("quantized"), LaneShim("quantized", 2, True),
                  LaneShim("quantized", 1, False, True)]


def in_place_part(module, part: tuple[int, int, int, int]) -> bool:
    return any(isinstance(op, ProductOp) and op.part() == part for op in module.walk())


def head_part_at(form: Form, draw, layer: int, x: str):
    """A per-head product over a part copy of each head's unit (part-in-place reads it in place)."""
    h = form.hidden
    heads = draw(st.sampled_from([1, 2, 3]))
    unit = draw(st.sampled_from([32, 48, 64, 80, 96, 128]))
    length = draw(st.sampled_from([n for n in (16, 32, 64) if n < unit]))
    offset = draw(st.sampled_from([o for o in range(0, unit - length + 1, 16)] + [0]))  # whole blocks as often
    fmt = draw(st.sampled_from(["q8_0", "q8_0", "bf16"])) if length % BLOCK == 0 else "bf16"
    wide = form.product(x, h, [(form.weight(layer, "q_proj", (heads * unit, h)), heads * unit)])[0]
    copy = form.op(f"form.part {wide} {{heads = {heads} : i64, unit = {unit} : i64, offset = {offset} : i64, "
                   f"length = {length} : i64}} : ({form.act(heads * unit)}) -> {form.act(heads * length)}", "q")
    n = 32
    w = form.weight(layer, "absorb", (heads * n, length), fmt)
    per_head = f" {{heads = {heads} : i64, unit = {length} : i64, offset = 0 : i64, length = {length} : i64}}"
    y = form.product(copy, heads * length, [(w, heads * n)], part=per_head, inputs=length)[0]
    in_blocks = offset % BLOCK == 0 and length % BLOCK == 0 and (heads == 1 or unit % BLOCK == 0)

    def expect(shim: LaneShim) -> bool:  # a quantized read in place also needs the activation whole blocks
        quantized = shim.quantized and fmt == "q8_0"
        return in_blocks and (not quantized or heads * unit % BLOCK == 0)

    out = form.product(y, heads * n, [(form.weight(layer, "up", (h, heads * n)), h)])[0]
    return out, expect, lambda module: in_place_part(module, (heads, unit, offset, length))


def latent_at(form: Form, draw, layer: int, x: str):
    heads = draw(st.sampled_from([1, 2]))
    nope, rope, lora, v = draw(st.sampled_from([16, 32, 48, 64])), draw(st.sampled_from([15, 16, 32])), 64, 32
    out = latent_layer(form, layer, x, heads, nope, rope, lora, v)
    holds = (nope % BLOCK == 0 and (heads == 1 or (nope + rope) % BLOCK == 0)  # each head's nope part
             and (lora + rope) % 2 == 0)  # the values, read in place from the cache row, a pair at a time

    def absorbed(module) -> bool:
        return any(isinstance(op, LatentAttentionOp) and op.path.data == "absorbed" for op in module.walk())

    return out, lambda shim: holds, absorbed


def gated_pair_at(form: Form, draw, layer: int, x: str):
    h = form.hidden
    inner = draw(st.sampled_from([64, 96, 128, 160, 192, 256, 320, 384]))
    gate_fmt, up_fmt = draw(st.sampled_from(["bf16", "q8_0"])), draw(st.sampled_from(["bf16", "q8_0"]))
    gate = form.product(x, h, [(form.weight(layer, "gate_proj", (inner, h), gate_fmt), inner)])[0]
    up = form.product(x, h, [(form.weight(layer, "up_proj", (inner, h), up_fmt), inner)])[0]
    hidden = form.op(f"form.swiglu {gate}, {up} : ({form.act(inner)}, {form.act(inner)}) -> {form.act(inner)}", "h")

    def expect(shim: LaneShim) -> bool:
        paired = not (shim.quantized and gate_fmt != up_fmt)  # paired, bf16 rows would read int8
        on_gemv = shim.as_gemv(form.rows)
        return paired and (on_gemv or (inner % 64 == 0 and gate_fmt == up_fmt))  # whole 64-value pair tiles

    out = form.product(hidden, inner, [(form.weight(layer, "down_proj", (h, inner)), h)])[0]
    return out, expect, lambda module: any(isinstance(op, GatedProductOp) for op in module.walk())


def mixture_at(form: Form, draw, layer: int, x: str):
    h, experts, inner = form.hidden, 33, 32
    top_k = draw(st.sampled_from([30, 31, 32]))
    routed = routed_mixture(form, layer, x, experts, inner, top_k)
    sg = form.product(x, h, [(form.weight(layer, "shared.gate_proj", (32, h)), 32)])[0]
    su = form.product(x, h, [(form.weight(layer, "shared.up_proj", (32, h)), 32)])[0]
    sh = form.op(f"form.swiglu {sg}, {su} : ({form.act(32)}, {form.act(32)}) -> {form.act(32)}", "h")
    sd = form.product(sh, 32, [(form.weight(layer, "shared.down_proj", (h, 32)), h)])[0]
    def folded(module) -> bool:
        return any(isinstance(op, MixtureOp) and op.shared for op in module.walk())

    return form.add(routed, sd, h), lambda shim: top_k + 1 <= 32, folded  # a warp a kept expert


def attention_at(form: Form, draw, layer: int, x: str):
    """q, k, (an odd part,) v of one activation: merged, the attention reads v in place."""
    h, size = form.hidden, 16
    vsize = draw(st.sampled_from([15, 16, 17]))
    extra = draw(st.sampled_from([0, 1, 2]))
    q = form.product(x, h, [(form.weight(layer, "q_proj", (2 * size, h)), 2 * size)])[0]
    k = form.product(x, h, [(form.weight(layer, "k_proj", (size, h)), size)])[0]
    if extra:
        form.out(form.product(x, h, [(form.weight(layer, "b_proj", (extra, h)), extra)])[0], extra)
    v = form.product(x, h, [(form.weight(layer, "v_proj", (vsize, h)), vsize)])[0]
    pages, positions = form.input("pages"), form.input("positions")
    kc = form.state(layer, "kv", (2 * form.batch, 16, 1, size))
    vc = form.state(layer, "kv", (2 * form.batch, 16, 1, vsize))
    att = form.op(f"form.attention {q}, {k}, {v}, {kc}, {vc}, {pages}, {positions} {{heads = 2 : i64, kv_heads = 1 : "
                  f"i64, scale = 0.25 : f64}} : ({form.act(2 * size)}, {form.act(size)}, {form.act(vsize)}, "
                  f"{tensor(2 * form.batch, 16, 1, size)}, {tensor(2 * form.batch, 16, 1, vsize)}, "
                  f"{tensor(form.batch, 2, elem='i32')}, {tensor(form.rows, elem='i32')}) -> {form.act(2 * vsize)}",
                  "t")
    place, pitch = 3 * size + extra, 3 * size + extra + vsize

    def expect(shim: LaneShim) -> bool:
        # merged at any rows (a GEMV in parts, or above a gemv launch's rows one gemm_tc launch in
        # parts: one format, the hidden width whole vectors); read in place at an even place and pitch
        return place % 2 == 0 and pitch % 2 == 0

    def in_place(module) -> bool:
        return any(isinstance(op, AttentionOp) and isinstance(op.v.owner, ProductOp) and len(op.v.owner.parts) > 1
                   for op in module.walk())

    out = form.product(att, 2 * vsize, [(form.weight(layer, "o_proj", (h, 2 * vsize)), h)])[0]
    return out, expect, in_place


def conv_at(form: Form, draw, layer: int, x: str):
    h = form.hidden
    size = draw(st.sampled_from([16, 32, 48, 992, 1024, 1056]))
    heads = draw(st.sampled_from([1, 2]))
    channels = heads * size
    wide = form.product(x, h, [(form.weight(layer, "in_proj", (channels, h)), channels)])[0]
    slots, accepted, _ = form.slot_operands()
    taps = 3 + form.tokens - 1
    state = form.state(layer, "conv", (form.rows + 1, channels, taps))
    w = form.weight(layer, "conv1d", (channels, 4))
    conv = form.op(f'form.conv {wide}, {state}, {w}, {slots}{accepted} {{offset = 0 : i64, activation = "silu"}} : '
                   f"{form.act(channels)}, {tensor(form.rows + 1, channels, taps)}, {tensor(channels, 4)}, "
                   f"{form.slots_type()} -> {form.act(channels)}", "c")
    normed = form.op(f"form.l2norm {conv} {{heads = {heads} : i64, eps = 1.000000e-06 : f64}} : "
                     f"({form.act(channels)}) -> {form.act(channels)}", "l")
    def epilogue(module) -> bool:
        return any(isinstance(op, ConvOp) and op.norm_heads is not None for op in module.walk())

    out = form.product(normed, channels, [(form.weight(layer, "out_proj", (h, channels)), h)])[0]
    return out, lambda shim: size <= 1024 and size % 32 == 0, epilogue


def products_at(form: Form, draw, layer: int, x: str):
    """2-5 products of one activation, each of its own format and width: merged into one product
    in parts, or apart."""
    h = form.hidden
    widths = draw(st.lists(st.sampled_from([96, 128, 256]), min_size=2, max_size=5))
    formats = [draw(st.sampled_from(["bf16", "q8_0"])) for _ in widths]
    parts = [form.product(x, h, [(form.weight(layer, "proj", (n, h), fmt), n)])[0]
             for n, fmt in zip(widths, formats, strict=True)]
    for part, n in zip(parts[1:], widths[1:], strict=True):
        form.out(part, n)

    def expect(shim: LaneShim) -> bool:  # all of them one product in parts
        alike = not shim.quantized or len(set(formats)) == 1  # else they read the activation two ways
        gemm = len(set(formats)) == 1  # gemm_tc in parts: any count and width, one format
        return alike and (shim.as_gemv(form.rows) or gemm)

    def merged(module) -> bool:
        return any(isinstance(op, ProductOp) and len(op.weights) == len(widths) for op in module.walk())

    return form.product(parts[0], widths[0], [(form.weight(layer, "down", (h, widths[0])), h)])[0], expect, merged


BOUNDARY_BLOCKS = {"products": products_at, "head_part": head_part_at, "latent": latent_at, "gated_pair": gated_pair_at,
                   "mixture": mixture_at, "attention": attention_at, "conv": conv_at}


@st.composite
def boundary_forms(draw):
    """(form text, the fact's block, expect(shim) -> whether the fused op survives, probe(module))."""
    batch = draw(st.sampled_from([1, 16, 32, 33]))  # rows on both sides of a gemv launch's 32
    form = Form(batch=batch, tokens=1, hidden=draw(st.sampled_from([32, 64])))
    table = form.weight(0, "embed", (32, form.hidden))
    x = form.op(f"form.embed {form.input('tokens')}, {table} : ({tensor(form.rows, elem='i32')}, "
                f"{tensor(32, form.hidden)}) -> {form.act(form.hidden)}", "x")
    name = draw(st.sampled_from(sorted(BOUNDARY_BLOCKS)))
    normed = form.norm(0, x, form.hidden)
    out, expect, probe = BOUNDARY_BLOCKS[name](form, draw, 0, normed)
    form.out(form.add(x, out, form.hidden), form.hidden)
    outputs = ", ".join(v for v, _ in form.outputs)
    types = ", ".join(t for _, t in form.outputs)
    body = "\n".join(f"    {line}" for line in form.leaves + form.ops + [f"form.return {outputs} : {types}"])
    text = f"builtin.module {{\n  form.step batch {batch} tokens 1 {{\n{body}\n  }}\n}}\n"
    return text, name, expect, probe


def facts_broken(module, shim: LaneShim) -> list[str]:
    """Every held-back fact a fused op left in `module` breaks (stated here, apart from the rules)."""
    broken = []
    for op in module.walk():
        if isinstance(op, ProductOp):
            part = op.part()
            if part is not None and part[2:] != (0, part[1]):
                heads, unit, offset, length = part
                if offset % BLOCK or length % BLOCK or (heads > 1 and unit % BLOCK):
                    broken.append(f"per-head part {part}")
            formats = {w.owner.format.data for w in op.weights}
            if shim.quantized and formats == {"bf16"} and not is_float(op.x):
                broken.append("a product by bf16 rows reads int8")
            if shim.quantized and len(formats) > 1 and not is_float(op.x):
                broken.append("a product in parts mixing formats reads int8")
            if len(op.weights) > 1 and not shim.as_gemv(form_rows(op)):
                outputs = [shape(w)[0] for w in op.weights]  # gemm_tc takes any parts, side by side
                if len(formats) > 1 or shape(op.weights[0])[1] % 8:
                    broken.append(f"products in parts {outputs} above a gemv launch's rows")
        if isinstance(op, GatedProductOp):
            formats = {op.gate.owner.format.data, op.up.owner.format.data}
            if shim.quantized and len(formats) > 1 and not is_float(op.x):
                broken.append("a gated pair mixing formats reads int8")
            if not shim.as_gemv(form_rows(op)) and (len(formats) > 1 or shape(op.gate)[0] % 64):
                broken.append("a gated pair that is not whole pair tiles above a gemv launch's rows")
        if isinstance(op, LatentAttentionOp) and op.path.data == "absorbed":
            nope, rope, heads = op.nope.value.data, op.rope.value.data, op.heads.value.data
            if nope % BLOCK or (heads > 1 and (nope + rope) % BLOCK) or shape(op.cache)[2] % 2:
                broken.append("an absorbed latent attention")
        if isinstance(op, AttentionOp) and isinstance(op.v.owner, ProductOp) and len(op.v.owner.parts) > 1:
            widths = [shape(p)[1] for p in op.v.owner.parts]
            place = sum(widths[:list(op.v.owner.parts).index(op.v)])
            if place % 2 or sum(widths) % 2:
                broken.append("attention values in place")
        if isinstance(op, ConvOp) and op.norm_heads is not None:
            size = shape(op.x)[1] // op.norm_heads.value.data
            if size > 1024 or size % 32:
                broken.append("conv + L2 norm")
        if isinstance(op, MixtureOp) and op.shared and op.top_k.value.data + 1 > 32:
            broken.append("mixture + shared expert")
    return broken


def form_rows(op) -> int:
    return shape(op.results[0])[0]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=boundary_forms(), seed=st.integers(0, 2**16))
def test_the_held_back_facts_hold_at_their_boundaries(case, seed: int) -> None:
    text, name, expect, probe = case
    original = parsed(text)
    env = random_environment(program_of(original), seed)
    unfused = run(original, env)
    for shim in BOUNDARY_KNOBS:
        fused_module = original.clone()
        fuse(fused_module, shim)  # raises where a rule leaves an invalid form
        event(f"{name} {'kept' if expect(shim) else 'held back'}")
        assert probe(fused_module) == expect(shim), (name, shim, text)
        assert not facts_broken(fused_module, shim), (facts_broken(fused_module, shim), shim, text)
        fused = run(fused_module, env)
        if not shim.quantized:
            assert disagreement(unfused, fused) < TIGHT, (shim, text)
            continue
        placed = original.clone()
        shim.record(placed)
        FuseQuantRule().apply(form_context(), placed)
        assert disagreement(run(placed, env), fused) < TIGHT, (shim, text)
