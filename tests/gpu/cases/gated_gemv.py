"""gated_gemv specializations: Kimi Linear's dense and expert pairs, awkward widths, both paths
(CUDA cores at 1-3 rows, tensor cores from 4 to the 32-row limit); `..._q1` / `..._q2`: the
quantize epilogue (tests/gpu/test_quantize.py checks those; test_kernels.py the others)."""

from lanec.codegen.schedules import tuned_cases

KERNEL = "gated_gemv"

CASES = {
    "r1_k2304_h9216": dict(rows=1, width=2304, hidden=9216),
    "r1_k2304_h1024": dict(rows=1, width=2304, hidden=1024),
    "r3_k2368_h1000": dict(rows=3, width=2368, hidden=1000),
    "r16_k4096_h1000": dict(rows=16, width=4096, hidden=1000),
    "r1_k7168_h2048": dict(rows=1, width=7168, hidden=2048),
    "r8_k2304_h1024": dict(rows=8, width=2304, hidden=1024),
    "r32_k2368_h1000": dict(rows=32, width=2368, hidden=1000),
    "r16_k4096_fma": dict(rows=16, width=4096, hidden=1000,
                          schedule={"warps": 8, "rows_per_cta": 1, "tensor_cores": False}),
    # both weights' rows preloaded into shared memory before the PDL wait (RowSchedule preload): Kimi
    # Linear's shared expert pair in one wave, and an uneven last CTA at 3 rows
    "r1_preload_k2304_h1024": dict(rows=1, width=2304, hidden=1024, schedule={"preload": True}),
    "r3_preload_k1000_h1001": dict(rows=3, width=1000, hidden=1001, schedule={"preload": True, "warps": 2}),
    # fuse-quant's quantize in the epilogue (tests/gpu/test_quantize.py checks these): 16 CTAs a block
    # (2 units each) at one row, the tensor cores' 8 units a CTA, and a CTA of whole blocks (32 units)
    "r1_k2304_h1024_q1": dict(rows=1, width=2304, hidden=1024, quantize=1),
    "r3_k1000_h96_q2": dict(rows=3, width=1000, hidden=96, quantize=2),
    "r8_k4096_h1024_q1": dict(rows=8, width=4096, hidden=1024, quantize=1),
    "r5_k2048_h1056_whole_q2": dict(rows=5, width=2048, hidden=1056, quantize=2,
                                    schedule={"tensor_cores": True, "rows_per_cta": 32}),
}

# every schedule the compiler's tuned table picks (lanec/codegen/schedules.json) is checked too
CASES.update(tuned_cases(KERNEL, "hidden"))


def make(spec: dict):
    from lanec.codegen.kernels.gated_gemv import GatedGemv

    return GatedGemv(**spec)
