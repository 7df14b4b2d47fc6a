"""lanec's passes: the fusion rules (table.py orders them) and the lowering to the lane, one file
each."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def rule_getter(name: str) -> Callable[[], type[ModulePass]]:
    def get() -> type[ModulePass]:
        from lanec.passes.table import RULES, STAGES

        return next(p for p in (*STAGES, *RULES) if p.name == name)

    return get


# the stages of the table (each runs its rules in order), then every rule, in table order
TABLE_PASSES = (
    "lane-before", "shared", "held-back",
    "latent-whole", "gemv-in-parts",
    "merge-products", "pair-gate-up", "conv-l2norm", "fold-kda", "fold-shared-expert", "fold-residual",
    "part-in-place", "absorb-latent", "fuse-quant",
    "hold-per-head-part", "hold-values-in-place", "hold-kda", "fold-gate-product", "hold-conv-l2norm",
    "hold-mixture-shared", "hold-gated-pair", "hold-products-in-parts", "hold-quantized-activation",
    "fold-norm-into-gemv", "fold-norm-into-router", "fold-norm-into-latent", "fold-argmax-into-gemv",
    "fold-all-reduce-into-norm",
)


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass `lanec opt -p` knows, kebab-case name -> lazy getter of its class."""
    def get_lower_to_lane() -> type[ModulePass]:
        from lanec.codegen.lower import LowerToLane

        return LowerToLane

    def get_shard() -> type[ModulePass]:
        from lanec.passes.shard import ShardPass

        return ShardPass

    return {**{name: rule_getter(name) for name in TABLE_PASSES}, "shard": get_shard,
            "lower-to-lane": get_lower_to_lane}
