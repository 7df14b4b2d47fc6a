"""mixture_router specializations: the router launch of every mixture shape of mixture.py, under its name."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lanec_gpu_cases_mixture", Path(__file__).with_name("mixture.py"))
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

KERNEL = "mixture_router"

CASES = {name: shapes.router_spec(shape) for name, shape in shapes.SHAPES.items()}


def make(spec: dict):
    from lanec.codegen.kernels.mixture import MixtureRouter

    return MixtureRouter(**spec)
