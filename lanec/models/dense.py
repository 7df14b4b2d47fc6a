"""A dense Llama-style MLP stack: the first example a kernel engineer compiles.

embed; per layer an RMS norm, gate and up products, swiglu, the down product and a residual add;
the final norm, the lm_head product and argmax. There is no attention: the example exercises
products, norms, elementwise ops, embed and argmax, the kernels every model needs. Weight names
follow Llama's checkpoint names (`model.layers.N.mlp.gate_proj.weight`, ...).

    python -m lanec.models.dense -o examples/dense-small.mlir [--batch B]
"""

from __future__ import annotations

from dataclasses import dataclass

import click
from xdsl.dialects.builtin import ModuleOp

from lanec.dialects import form
from lanec.models.builder import StepBuilder, module_text


@dataclass(frozen=True)
class DenseShape:
    hidden: int = 2304
    width: int = 9216
    vocab: int = 32000
    layers: int = 2
    eps: float = 1e-5

    def check(self) -> None:
        for name in ("hidden", "width", "vocab", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name}: {getattr(self, name)} must be at least 1")


def dense_step(shape: DenseShape = DenseShape(), batch: int = 1) -> ModuleOp:
    shape.check()
    if batch < 1:
        raise ValueError(f"--batch: {batch} must be at least 1")
    b = StepBuilder(batch, 1)
    tokens = b.input("tokens", [b.rows])
    h = b.value(form.EmbedOp(tokens, b.weight("model.embed_tokens.weight", [shape.vocab, shape.hidden])))
    for layer in range(shape.layers):
        p = f"model.layers.{layer}"
        x = b.norm(h, f"{p}.post_attention_layernorm.weight", shape.eps)
        mlp = b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight", f"{p}.mlp.down_proj.weight",
                          shape.width)
        h = b.add(h, mlp)
    x = b.norm(h, "model.norm.weight", shape.eps)
    logits = b.product(x, "lm_head.weight", shape.vocab)
    return b.module([b.value(form.ArgmaxOp(logits)), logits])


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, allow_dash=True), default="-",
              show_default=True, help="where the form text goes")
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--hidden", type=int, default=DenseShape.hidden, show_default=True)
@click.option("--width", type=int, default=DenseShape.width, show_default=True)
@click.option("--vocab", type=int, default=DenseShape.vocab, show_default=True)
@click.option("--layers", type=int, default=DenseShape.layers, show_default=True)
def main(output: str, batch: int, hidden: int, width: int, vocab: int, layers: int) -> None:
    """Write the dense example's decode step."""
    try:
        text = module_text(dense_step(DenseShape(hidden, width, vocab, layers), batch))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    try:
        with click.open_file(output, "w") as out:
            out.write(text)
    except OSError as e:
        raise click.ClickException(f"{output}: cannot write it: {e.strerror or e}") from None


if __name__ == "__main__":
    main()
