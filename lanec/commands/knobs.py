"""The lane's knobs as command-line options, shared by `lanec explain` and `lanec compile`."""

from __future__ import annotations

from collections.abc import Callable

import click

from lanec.codegen.facts import MIXTURE_GROUPED_ROWS


def knob_options(command: Callable) -> Callable:
    """--numerics, --words, --fuse-quant, --batch-products, --fold-norms, --fold-argmax, --fold-gate,
    --fold-router-norms: each one given
    replaces the module's own knob (its `lane.shim`, as `lanec opt` reads it), the others stay
    (`shim_of`)."""
    options = [
        click.option("--numerics", type=click.Choice(["precise", "quantized"]), default=None,
                     help="precise: bf16 activations; quantized: products by q8_0 rows read int8 activations "
                          "[default: the module's lane.shim, else precise]"),
        click.option("--words", type=click.Choice(["1", "2"]), default=None,
                     help="int8 words a quantized activation value (quantized numerics only) [default: the module's "
                          "lane.shim, else 1]"),
        click.option("--fuse-quant/--no-fuse-quant", default=None,
                     help="quantize in producers' epilogues (quantized numerics only) [default: the module's "
                          "lane.shim, else off]"),
        click.option("--batch-products", is_flag=True,
                     help="the products are a batch's (each row its own sequence): keep them on the GEMV kernels"),
        click.option("--fold-norms/--no-fold-norms", default=None,
                     help="a norm whose one reader is a GEMV of at most 3 rows runs in that GEMV's prologue "
                          "(fold-norm-into-gemv) [default: the module's lane.shim, else on]"),
        click.option("--fold-argmax", is_flag=True,
                     help="an argmax of a GEMV's output rows (the lm head at 1-3 rows) runs in that GEMV's epilogue "
                          "(fold-argmax-into-gemv) [default: off]"),
        click.option("--fold-gate/--no-fold-gate", default=None,
                     help="a KDA layer's output gate product (g_b) of one row runs in KdaSplit's gate warps, no launch "
                          "of its own (fold-gate-product) [default: the module's lane.shim, else on]"),
        click.option("--fold-router-norms/--no-fold-router-norms", default=None,
                     help="a norm whose one reader is a mixture runs in its fused router's prologue "
                          "(fold-norm-into-router) [default: the module's lane.shim, else on]"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def shim_of(numerics: str | None, words: str | None, fuse_quant: bool | None, batch_products: bool,
            fold_norms: bool | None = None, fold_argmax: bool = False, fold_gate: bool | None = None,
            fold_router_norms: bool | None = None) -> dict:
    """The knobs the options give (None where one is not given): the pipeline puts them in place
    of the module's own (`LaneShim.of`); a combination with no meaning is a usage error there
    (`reported`)."""
    return {"numerics": numerics, "words": None if words is None else int(words),
            "fuse_quant": fuse_quant, "batch_products": batch_products or None,
            "fold_norms": fold_norms, "fold_argmax": fold_argmax or None, "fold_gate": fold_gate,
            "fold_router_norms": fold_router_norms}


def grouped_option(command: Callable) -> Callable:
    """--grouped-experts: every mixture's experts on the grouped path (lanec/codegen/kernels/
    mixture_grouped.py), whatever its row count (by default those of more rows than MIXTURE_GROUPED_ROWS)."""
    return click.option("--grouped-experts", is_flag=True,
                        help="mixtures: rows grouped by expert on the device, an expert's rows on tensor cores "
                             "(mixture_groups, mixture_grouped_gated, mixture_grouped_down, mixture_sum) "
                             f"at every row count [default: above {MIXTURE_GROUPED_ROWS} rows]")(command)


def tp_option(command: Callable) -> Callable:
    """--tp N: tensor parallel over N GPUs (the form sharded, lanec/passes/shard.py)."""
    return click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True,
                        help="tensor parallel over N GPUs: shard the form (each rank's heads, products and "
                             "experts; an all-reduce where partial sums meet)")(command)
