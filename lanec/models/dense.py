"""A dense Llama-style stack: the first example a kernel engineer compiles.

embed; per layer an RMS norm, the q, k and v products (of one activation: the rules merge them
into one product in parts), rope on q and k, paged GQA attention over the layer's key and value
caches (`form.state` kind kv, `[batch * context pages, page size, kv heads, head]`), the o product
and a residual add; an RMS norm, gate and up products, swiglu, the down product and a residual
add; the final norm, the lm_head product and argmax. Weight names follow Llama's checkpoint names
(`model.layers.N.self_attn.q_proj.weight`, `model.layers.N.mlp.gate_proj.weight`, ...); the step
reads tokens, positions and the page table (`[batch, context pages]`) as inputs.

    python -m lanec.models.dense -o examples/dense-small.mlir [--batch B] [--spec-tokens Q]
"""

from __future__ import annotations

from dataclasses import dataclass

import click
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from lanec.dialects import form
from lanec.dialects.form import float_prop, int_prop, tensor
from lanec.models.builder import StepBuilder, module_text


@dataclass(frozen=True)
class DenseShape:
    hidden: int = 2048
    width: int = 8192
    vocab: int = 32000
    layers: int = 2
    heads: int = 16
    kv_heads: int = 4
    head: int = 128
    page_size: int = 16
    context_pages: int = 128  # pages a request may hold: the longest context is page_size * this
    theta: float = 500000.0  # Llama 3's rope base
    eps: float = 1e-5

    def check(self) -> None:
        for name in ("hidden", "width", "vocab", "layers", "heads", "kv_heads", "head", "page_size",
                     "context_pages"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: {getattr(self, name)} must be at least 1")
        if self.heads % self.kv_heads:
            raise ValueError(f"--heads {self.heads} do not share --kv-heads {self.kv_heads} evenly")


def dense_step(shape: DenseShape = DenseShape(), batch: int = 1, tokens: int = 1) -> ModuleOp:
    """The step of `batch` requests of `tokens` rows each (tokens > 1: a speculative verify)."""
    shape.check()
    if batch < 1:
        raise ValueError(f"--batch: {batch} must be at least 1")
    if tokens < 1:
        raise ValueError(f"--spec-tokens: {tokens} must be at least 1")
    b = StepBuilder(batch, tokens)
    ids = b.input("tokens", [b.rows])
    h = b.value(form.EmbedOp(ids, b.weight("model.embed_tokens.weight", [shape.vocab, shape.hidden])))
    for layer in range(shape.layers):
        p = f"model.layers.{layer}"
        x = b.norm(h, f"{p}.input_layernorm.weight", shape.eps)
        h = b.add(h, attention(b, x, f"{p}.self_attn", p, shape))
        x = b.norm(h, f"{p}.post_attention_layernorm.weight", shape.eps)
        mlp = b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight", f"{p}.mlp.down_proj.weight",
                          shape.width)
        h = b.add(h, mlp)
    x = b.norm(h, "model.norm.weight", shape.eps)
    logits = b.product(x, "lm_head.weight", shape.vocab)
    return b.module([b.value(form.ArgmaxOp(logits)), logits])


def attention(b: StepBuilder, x: SSAValue, a: str, p: str, shape: DenseShape) -> SSAValue:
    """Llama's attention: q, k, v products, rope on q and k, GQA over the paged caches, o product."""
    heads, kv_heads, head = shape.heads, shape.kv_heads, shape.head
    q = b.product(x, f"{a}.q_proj.weight", heads * head)
    k = b.product(x, f"{a}.k_proj.weight", kv_heads * head)
    v = b.product(x, f"{a}.v_proj.weight", kv_heads * head)
    positions = b.input("positions", [b.rows])
    q = b.value(form.RopeOp(q, positions, heads, head, shape.theta))
    k = b.value(form.RopeOp(k, positions, kv_heads, head, shape.theta))
    cache = [b.batch * shape.context_pages, shape.page_size, kv_heads, head]
    caches = [b.state(f"{p}.{name}_cache", "kv", cache) for name in ("key", "value")]
    pages = b.input("pages", [b.batch, shape.context_pages])
    o = b.value(form.AttentionOp(
        operands=[q, k, v, *caches, pages, positions],
        properties={"heads": int_prop(heads), "kv_heads": int_prop(kv_heads), "scale": float_prop(head**-0.5)},
        result_types=[tensor([b.rows, heads * head])],
    ))
    return b.product(o, f"{a}.o_proj.weight", shape.hidden)


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, allow_dash=True), default="-",
              show_default=True, help="where the form text goes")
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--spec-tokens", "tokens", type=int, default=1, show_default=True,
              help="rows a request: > 1 is a speculative verify step")
@click.option("--hidden", type=int, default=DenseShape.hidden, show_default=True)
@click.option("--width", type=int, default=DenseShape.width, show_default=True)
@click.option("--vocab", type=int, default=DenseShape.vocab, show_default=True)
@click.option("--layers", type=int, default=DenseShape.layers, show_default=True)
@click.option("--heads", type=int, default=DenseShape.heads, show_default=True)
@click.option("--kv-heads", type=int, default=DenseShape.kv_heads, show_default=True)
@click.option("--head", type=int, default=DenseShape.head, show_default=True)
@click.option("--page-size", type=int, default=DenseShape.page_size, show_default=True)
@click.option("--context-pages", type=int, default=DenseShape.context_pages, show_default=True)
def main(output: str, batch: int, tokens: int, hidden: int, width: int, vocab: int, layers: int, heads: int,
         kv_heads: int, head: int, page_size: int, context_pages: int) -> None:
    """Write the dense example's decode step."""
    shape = DenseShape(hidden, width, vocab, layers, heads, kv_heads, head, page_size, context_pages)
    try:
        text = module_text(dense_step(shape, batch, tokens))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    try:
        with click.open_file(output, "w") as out:
            out.write(text)
    except OSError as e:
        raise click.ClickException(f"{output}: cannot write it: {e.strerror or e}") from None


if __name__ == "__main__":
    main()
