"""mixture_router specializations: the router launch of every mixture shape of mixture.py, under its name."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lanec_gpu_cases_mixture", Path(__file__).with_name("mixture.py"))
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

KERNEL = "mixture_router"

CASES = {name: shapes.router_spec(shape) for name, shape in shapes.SHAPES.items()}

# the router writing the grouped path's segments too (`segments`: mixture_groups folded in; the
# cluster drawing the last ticket computes them), at every grouped shape whose pairs its CTA's
# warps can walk (tests/gpu/test_mixture_grouped.py checks them against the ids)
_spec = importlib.util.spec_from_file_location("lanec_gpu_cases_mixture_grouped_for_router",
                                               Path(__file__).with_name("mixture_grouped.py"))
grouped = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grouped)
for _name, _shape in grouped.SHAPES.items():
    CASES[f"{_name}_segments"] = {**shapes.router_spec(_shape), "segments": True}

# acquiring / raising the router's flag a row (mixture.py's READY_SHAPES)
CASES.update({f"{name}_ready": shapes.ready_router_spec(shape) for name, shape in shapes.READY_SHAPES.items()})


def fits(name: str, spec: dict) -> bool:
    """Whether the router takes `spec` (a segments case its CTA's warps cannot walk does not build);
    on the GPU machine (no CuTe DSL), whether the build machine built it."""
    try:
        from lanec.codegen.kernels.mixture import MixtureRouter
    except ImportError:
        return (Path(__file__).resolve().parents[3] / "build" / "gpu" / KERNEL / f"{name}.json").is_file()
    try:
        MixtureRouter(**spec)
    except ValueError:
        return False
    return True


CASES = {name: spec for name, spec in CASES.items() if not spec.get("segments") or fits(name, spec)}


def make(spec: dict):
    from lanec.codegen.kernels.mixture import MixtureRouter

    return MixtureRouter(**spec)


# the router norming its rows first (`norm`: fold-norm-into-router, a norm's input and residual in, the
# normed rows and the sum out), at shapes of 1, 2, 7 and 13 rows: a row a cluster and 4 or 8 (with padding
# rows), with and without a residual, x read in place, 256 and 512 experts, and one CTA without a cluster
# (split 1: as kimi-b3-q8's 16 experts run); test_mixture.py's test_the_router_norms_its_rows checks them
NORM_SHAPES = {"b1_e256_k8_sigmoid_correction_shared": True, "b13_e256_k8_g8_sigmoid_correction_shared_r4": True,
               "b2_e256_k8_sigmoid_pitched_wider_shared": True, "b1_e512_k10_softmax_apart": False,
               "b2_e256_k8_sigmoid_one_cta_router_apart": True}
for _name, _residual in NORM_SHAPES.items():
    CASES[f"{_name}_norm"] = {**shapes.router_spec(shapes.SHAPES[_name]), "norm": True, "eps": 1e-5,
                              "residual": _residual}
# the chosen experts' first gate and up rows prefetched into L2 (`prefetch_units`, ROUTER_PREFETCH_ROWS), by the
# first CTA's choosing lanes or by every CTA choosing (`prefetch_spread`): the same choice, stored once; Kimi
# Linear's batch-1 router and 13 rows at 4 a cluster (64 triples over the cluster's CTAs). The experts' matrices
# are small here (expert_hidden 24): they are only prefetched
PREFETCH_SHAPES = {"b1_e256_k8_sigmoid_correction_shared": True, "b13_e256_k8_g8_sigmoid_correction_shared_r4": True}
for _name, _residual in PREFETCH_SHAPES.items():
    for _who, _spread in (("first", False), ("spread", True)):
        CASES[f"{_name}_{_who}_norm"] = {**CASES[f"{_name}_norm"], "prefetch_units": 16, "expert_hidden": 24,
                                         "prefetch_spread": _spread}
CASES["b7_e256_k8_g8_sigmoid_correction_shared_r8_norm"] = {
    **shapes.router_spec(shapes.SHAPES["b7_e256_k8_g8_sigmoid_correction_shared"]), "rows_a_cta": 8, "norm": True,
    "eps": 1e-6, "residual": True}

# the router choosing from given logits (`logits`: a gemm_tc launch's, fp32; ROUTER_GEMM_ROWS), at every
# mixture shape: test_mixture.py's test_the_router_chooses_from_given_logits feeds it the interpreter's
for _name, _shape in shapes.SHAPES.items():
    _spec = {k: v for k, v in shapes.router_spec(_shape).items() if k not in ("x_pitch", "split", "rows_a_cta")}
    CASES[f"{_name}_logits"] = {**_spec, "logits": True}

# the router running the shared expert's gated pair in clusters of its own (shared_hidden; mixture.py's SHARED_SHAPES)
for _name, _shape in shapes.SHARED_SHAPES.items():
    CASES[f"{_name}_shared"] = shapes.shared_router_spec(_shape, norm=False)
    CASES[f"{_name}_norm_shared"] = shapes.shared_router_spec(_shape, norm=True)
