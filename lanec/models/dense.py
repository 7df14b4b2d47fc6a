"""A dense Llama-style stack: the first example a kernel engineer compiles.

The Llama importer's step (`llama.py`: rope, paged GQA attention over the layers' `kv` caches, a
SwiGLU MLP; Llama's checkpoint names) at shapes given on the command line rather than by a config:
no rope scaling, an untied lm_head. The step reads tokens, positions and the page table
(`[batch, context pages]`) as inputs.

    python -m lanec.models.dense -o examples/dense-small.mlir [--batch B] [--spec-tokens Q]
"""

from __future__ import annotations

from dataclasses import dataclass

import click
from xdsl.dialects.builtin import ModuleOp

from lanec.models.builder import StepOptions, module_text
from lanec.models.config import LlamaConfig
from lanec.models.llama import llama_step


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

    def config(self) -> LlamaConfig:
        return LlamaConfig(hidden=self.hidden, width=self.width, vocab=self.vocab, layers=self.layers,
                           heads=self.heads, kv_heads=self.kv_heads, head=self.head, rms_eps=self.eps,
                           theta=self.theta, scaling=None, tied_embeddings=False)


def dense_step(shape: DenseShape = DenseShape(), batch: int = 1, tokens: int = 1) -> ModuleOp:
    """The step of `batch` requests of `tokens` rows each (tokens > 1: a speculative verify)."""
    shape.check()
    options = StepOptions(batch=batch, tokens=tokens, page_size=shape.page_size, context_pages=shape.context_pages)
    return llama_step(shape.config(), options)


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
