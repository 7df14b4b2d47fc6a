"""latent_attention on its wgmma engine (lanec/codegen/kernels/latent_wgmma.py, the default) the GPU tests
check (tests/gpu/test_attention.py): every plain shape of latent_attention.py, with the engine named.
They cover one warpgroup and two (blocks of more than 32 rows: DeepSeek-V3's 128 heads, 4 and 8
speculative tokens, 12 heads x 3 tokens split 18 + 18 padded to 24 rows), key widths of whole 64-value
chunks and not (288: 256 + 32, its ring capped at three tiles), one chunk and several (merged by the
attention_combine case of the same name)."""

from pathlib import Path

from loader import load  # tests/gpu/loader.py

KERNEL = "latent_wgmma"

_SHAPES = load("lanec_gpu_cases_latent_attention_shapes", Path(__file__).with_name("latent_attention.py")).SHAPES
CASES = {name: dict(shape, schedule={"engine": "wgmma"}) for name, shape in _SHAPES.items()}


def make(spec: dict):
    from lanec.codegen.kernels.attention import LatentAttention

    return LatentAttention(**spec)
