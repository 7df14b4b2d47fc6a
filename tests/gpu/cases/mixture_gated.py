"""mixture_gated specializations: the gated launch of every mixture shape of mixture.py, under its name."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lanec_gpu_cases_mixture", Path(__file__).with_name("mixture.py"))
shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shapes)

KERNEL = "mixture_gated"

CASES = {name: shapes.gated_spec(shape) for name, shape in shapes.SHAPES.items()}
# the routed experts only: the router's launch ran the shared expert (mixture.py's SHARED_SHAPES)
CASES.update({f"{name}_shared_in_router": {**shapes.gated_spec(shape), "shared_in_router": True}
              for name, shape in shapes.SHARED_SHAPES.items()})

# the shared warp norming its row before the PDL wait (mixture.py's EARLY_SHARED_SHAPES)
CASES.update({f"{name}_early_shared": {**spec, "early_shared": True}
              for name, spec in shapes.EARLY_SHARED_SHAPES.items()})

# acquiring / raising the router's flag a row (mixture.py's READY_SHAPES)
CASES.update({f"{name}_ready": shapes.ready_gated_spec(shape) for name, shape in shapes.READY_SHAPES.items()})


def make(spec: dict):
    from lanec.codegen.kernels.mixture import MixtureGated

    return MixtureGated(**spec)
