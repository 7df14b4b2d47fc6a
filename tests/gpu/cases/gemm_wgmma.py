"""gemm_tc's wgmma engine (`lanec/codegen/kernels/gemm_wgmma.py`, the default) on every
hand-written gemm_tc shape (tests/gpu/cases/gemm_tc.py) and one unsplit 256-row product;
tests/gpu/test_gemm_tc.py checks them as it checks gemm_tc's. Its weight tile is 128 rows, so a
case's forced tile is dropped, and it needs 3 stages or more (a case's splits are kept, its stages
raised to 3); all of a case's rows are one block, padded to whole 8-row wgmma N steps."""

import importlib.util
from pathlib import Path

KERNEL = "gemm_wgmma"


def _mma_cases() -> dict:
    path = Path(__file__).resolve().parent / "gemm_tc.py"
    spec = importlib.util.spec_from_file_location("lanec_gpu_cases_gemm_tc_for_wgmma", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


CASES = {}
for _name, _spec in _mma_cases().items():
    if not _name.startswith("tuned_"):
        _knobs = {k: v for k, v in _spec.get("schedule", {}).items() if k != "tile_n"}
        if "stages" in _knobs:
            _knobs["stages"] = max(3, _knobs["stages"])
        CASES[_name] = dict(_spec, schedule={**_knobs, "engine": "wgmma"})
CASES["r256_k4096_n2304_k1"] = dict(rows=256, width=4096, parts=[2304], schedule={"engine": "wgmma", "splits": 1})


def make(spec: dict):
    from lanec.codegen.kernels.gemm_tc import GemmTc

    return GemmTc(**spec)

# gated pairs: gate and up tiles side by side (64 + 64 weight rows a CTA), SwiGLU in the epilogue:
# Kimi Linear's dense MLP (9216 hidden) and an expert's (1024), Llama-3-8B's (14336 hidden over K
# 4096), a split K and an odd row count, and the fewest hidden values (one pair tile)
GATED = {
    "gated_r64_k2304_h9216": dict(rows=64, width=2304, parts=[2 * 9216]),
    "gated_r33_k2304_h1024": dict(rows=33, width=2304, parts=[2 * 1024]),
    "gated_r256_k4096_h14336": dict(rows=256, width=4096, parts=[2 * 14336]),
    "gated_r100_k1000_h192_k4": dict(rows=100, width=1000, parts=[2 * 192], schedule={"splits": 4}),
    "gated_r9_k128_h64_pitch": dict(rows=9, width=128, parts=[128], x_pitch=136),
}
for _name, _spec in GATED.items():
    CASES[_name] = dict(_spec, gated=True, schedule={**_spec.get("schedule", {}), "engine": "wgmma"})

