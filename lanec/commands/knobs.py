"""The lane's knobs as command-line options, shared by `lanec explain` and `lanec compile`."""

from __future__ import annotations

from collections.abc import Callable

import click


def knob_options(command: Callable) -> Callable:
    """--numerics, --words, --fuse-quant, --batch-products (they become a LaneShim: `shim_of`)."""
    options = [
        click.option("--numerics", type=click.Choice(["precise", "quantized"]), default="precise", show_default=True,
                     help="precise: bf16 activations; quantized: products by q8_0 rows read int8 activations"),
        click.option("--words", type=click.Choice(["1", "2"]), default="1", show_default=True,
                     help="int8 words a quantized activation value (quantized numerics only)"),
        click.option("--fuse-quant", is_flag=True, help="quantize in producers' epilogues (quantized numerics only)"),
        click.option("--batch-products", is_flag=True,
                     help="the products are a batch's (each row its own sequence): keep them on the GEMV kernels"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def shim_of(numerics: str, words: str, fuse_quant: bool, batch_products: bool):
    """The LaneShim the options name, or a one-line error for a combination with no meaning."""
    from lanec.lane import KnobError, LaneShim

    try:
        return LaneShim(numerics=numerics, words=int(words), fuse_quant=fuse_quant, batch_products=batch_products)
    except KnobError as error:
        raise click.UsageError(str(error)) from None
