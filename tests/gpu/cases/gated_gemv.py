"""gated_gemv specializations: Kimi Linear's dense and expert pairs, awkward widths, both paths
(CUDA cores at 1-3 rows, tensor cores from 4 to the 32-row limit)."""

KERNEL = "gated_gemv"

CASES = {
    "r1_k2304_h9216": dict(rows=1, width=2304, hidden=9216),
    "r1_k2304_h1024": dict(rows=1, width=2304, hidden=1024),
    "r3_k2368_h1000": dict(rows=3, width=2368, hidden=1000),
    "r16_k4096_h1000": dict(rows=16, width=4096, hidden=1000),
    "r1_k7168_h2048": dict(rows=1, width=7168, hidden=2048),
    "r8_k2304_h1024": dict(rows=8, width=2304, hidden=1024),
    "r32_k2368_h1000": dict(rows=32, width=2368, hidden=1000),
    "r16_k4096_fma": dict(rows=16, width=4096, hidden=1000, schedule=[8, 1, 1]),
}


def make(spec: dict):
    from lanec.codegen.kernels.gated_gemv import GatedGemv

    return GatedGemv(**spec)
