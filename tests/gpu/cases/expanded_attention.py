"""expanded_attention specializations: one for each shape of latent_expanded.py, named as it (the
test launches both on the same buffers); a split case's partials are merged by the
attention_combine case of the same name."""

import importlib.util
from pathlib import Path

KERNEL = "expanded_attention"

_path = Path(__file__).resolve().parent / "latent_expanded.py"
_spec = importlib.util.spec_from_file_location("lanec_gpu_cases_latent_expand_for_attention", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

CASES = {name: {k: v for k, v in shape.items() if k not in ("lora", "latent_pitch", "k_rope_pitch")}
         for name, shape in _module.SHAPES.items()}


def make(spec: dict):
    from lanec.codegen.kernels.latent_expanded import ExpandedLatentAttention

    return ExpandedLatentAttention(**spec)
