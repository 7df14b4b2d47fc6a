"""The lane's kernels, one CuTe DSL class a module, and their registry: a launch names its kernel,
and `kernel_class` imports that kernel's module only when it is needed (CuTe DSL is heavy)."""

from __future__ import annotations

import importlib

# kernel name -> "module:Class"
KERNELS = {
    "gemv": "lanec.codegen.kernels.gemv:Gemv",
    "gated_gemv": "lanec.codegen.kernels.gated_gemv:GatedGemv",
    "gemm_tc": "lanec.codegen.kernels.gemm_tc:GemmTc",
    "rmsnorm": "lanec.codegen.kernels.rmsnorm:RmsNorm",
    "elementwise": "lanec.codegen.kernels.elementwise:Elementwise",
    "embed": "lanec.codegen.kernels.embed:Embed",
    "argmax": "lanec.codegen.kernels.argmax:Argmax",
    "kda_split": "lanec.codegen.kernels.kda_split:KdaSplit",
    "attention": "lanec.codegen.kernels.attention:Attention",
    "attention_combine": "lanec.codegen.kernels.attention:AttentionCombine",
    "latent_attention": "lanec.codegen.kernels.attention:LatentAttention",
    "latent_expand": "lanec.codegen.kernels.latent_expanded:LatentExpand",
    "expanded_attention": "lanec.codegen.kernels.latent_expanded:ExpandedLatentAttention",
    "rope": "lanec.codegen.kernels.rope:Rope",
    "mixture_router": "lanec.codegen.kernels.mixture:MixtureRouter",
    "mixture_gated": "lanec.codegen.kernels.mixture:MixtureGated",
    "mixture_down": "lanec.codegen.kernels.mixture:MixtureDown",
    "mixture_groups": "lanec.codegen.kernels.mixture:MixtureGroups",
    "mixture_grouped_gated": "lanec.codegen.kernels.mixture_grouped:MixtureGroupedGated",
    "mixture_grouped_down": "lanec.codegen.kernels.mixture_grouped:MixtureGroupedDown",
    "mixture_sum": "lanec.codegen.kernels.mixture_grouped:MixtureSum",
    "seeded": "lanec.codegen.kernels.seeded:Seeded",
    "conv": "lanec.codegen.kernels.conv:Conv",
    "delta_rule": "lanec.codegen.kernels.delta_rule:DeltaRule",
    "kda_gate": "lanec.codegen.kernels.kda_gate:KdaGate",
    "head_norm": "lanec.codegen.kernels.head_norm:HeadNorm",
    "part": "lanec.codegen.kernels.part:Part",
    "quantize": "lanec.codegen.kernels.quantize:Quantize",
    "q8_gemv": "lanec.codegen.kernels.q8_gemv:Q8Gemv",
    "q8_gated_gemv": "lanec.codegen.kernels.q8_gemv:Q8GatedGemv",
    "q8_gemm_tc": "lanec.codegen.kernels.q8_gemm:Q8GemmTc",
}


class UnknownKernel(ValueError):
    """A launch that names no kernel of the lane."""


def kernel_class(name: str) -> type:
    if name not in KERNELS:
        raise UnknownKernel(f"the lane has no kernel '{name}'")
    module, attribute = KERNELS[name].split(":")
    return getattr(importlib.import_module(module), attribute)


def make_kernel(name: str, spec: dict):
    """The kernel object of a launch: its class built from the launch's static specialization
    (`release`, where the launch has one, is the launch's release point: base.py's `released`)."""
    from lanec.codegen.kernels.base import released, split_release

    static, release = split_release(spec)
    return released(kernel_class(name)(**static), release)
