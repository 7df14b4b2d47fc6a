"""q8_gated_gemv specializations: Llama-3.1-8B's gate and up pair (4096 -> 14336), the dense
example's (2048 -> 8192), one and two words, odd sizes, and the 16-row limit (a warp reduces 2
weights x 16 rows of sums)."""

from lanec.codegen.schedules import tuned_cases

KERNEL = "q8_gated_gemv"

CASES = {
    "r1_k4096_h14336_w1": dict(rows=1, width=4096, hidden=14336, words=1),
    "r1_k2048_h8192_w2": dict(rows=1, width=2048, hidden=8192, words=2),
    "r3_k96_h37_w1": dict(rows=3, width=96, hidden=37, words=1),
    "r7_k2080_h999_w2": dict(rows=7, width=2080, hidden=999, words=2),
    # Kimi Linear's width at its default schedule: one step of 9 warps (q8_default_schedule)
    "r2_k2304_h1000_w2": dict(rows=2, width=2304, hidden=1000, words=2),
    "r16_k4096_h1000_w1": dict(rows=16, width=4096, hidden=1000, words=1),
    # the quantize epilogue: the hidden rows a q8_0 down product reads
    "r1_k4096_h1024_w1_q1": dict(rows=1, width=4096, hidden=1024, words=1, quantize=1),
    "r5_k2048_h512_w2_q2": dict(rows=5, width=2048, hidden=512, words=2, quantize=2),
}

# every schedule the compiler's tuned table picks (lanec/codegen/schedules.json) is checked too
CASES.update(tuned_cases(KERNEL, "hidden"))


def make(spec: dict):
    from lanec.codegen.kernels.q8_gemv import Q8GatedGemv

    return Q8GatedGemv(**spec)
