"""mixture_groups specializations: the grouping launch of every grouped mixture shape of mixture_grouped.py, under its name."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lanec_gpu_cases_mixture_grouped",
                                               Path(__file__).with_name("mixture_grouped.py"))
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

KERNEL = "mixture_groups"

CASES = {name: shapes.groups_spec(shape) for name, shape in shapes.SHAPES.items()}


def make(spec: dict):
    from lanec.codegen.kernels.mixture import MixtureGroups

    return MixtureGroups(**spec)
