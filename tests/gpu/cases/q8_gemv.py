"""q8_gemv specializations the GPU tests check: one and two words a value; a decode step's rows
(1, 3, 5, 8) to the 32-row limit; Llama-3.1-8B's products (4096 -> 4096, 6144 q k v parts,
14336 -> 4096) and awkward sizes (K of 1, 3 and 65 blocks: rows whose blocks start 2 bytes off a
word every other row; N not a multiple of the rows a CTA); parts; a schedule of its own."""

from lanec.codegen.schedules import tuned_cases

KERNEL = "q8_gemv"

CASES = {
    "r1_k4096_n4096_w1": dict(rows=1, width=4096, parts=[4096], words=1),
    "r1_k4096_n4096_w2": dict(rows=1, width=4096, parts=[4096], words=2),
    "r1_k14336_n4096_w1": dict(rows=1, width=14336, parts=[4096], words=1),
    "r1_k32_n5_w1": dict(rows=1, width=32, parts=[5], words=1),
    "r3_k96_n37_w2": dict(rows=3, width=96, parts=[37], words=2),
    "r3_k4096_parts_w1": dict(rows=3, width=4096, parts=[4096, 1024, 1024], words=1),
    "r5_k2080_n1001_w1": dict(rows=5, width=2080, parts=[1001], words=1),
    "r8_k4096_n1024_w2": dict(rows=8, width=4096, parts=[1024], words=2),
    "r16_k14336_n777_w2": dict(rows=16, width=14336, parts=[777], words=2),
    "r32_k4096_n1000_w1": dict(rows=32, width=4096, parts=[1000], words=1),
    "r1_sched_w4_r4": dict(rows=1, width=4096, parts=[1003], words=1, schedule={"warps": 4, "rows_per_cta": 4}),
    # the quantize epilogue (`quantize` words out): a LoRA pair's first product read quantized
    "r1_k4096_n1024_w1_q1": dict(rows=1, width=4096, parts=[1024], words=1, quantize=1),
    "r3_k2048_n512_w2_q2": dict(rows=3, width=2048, parts=[512], words=2, quantize=2),
}

# every schedule the compiler's tuned table picks (lanec/codegen/schedules.json) is checked too
CASES.update(tuned_cases(KERNEL))


def make(spec: dict):
    from lanec.codegen.kernels.q8_gemv import Q8Gemv

    return Q8Gemv(**spec)
