"""rmsnorm specializations, with and without the residual add, and (`quantize`, named `..._q1` /
`..._q2`) with fuse-quant's quantize in the epilogue: y written in the quantized form of one or two
int8 words a value (tests/gpu/test_quantize.py checks those; test_kernels.py the others); with `slots`
(`..._slots<N>`) x is a grouped mixture's fp32 partial rows, summed first (mixture_sum folded in)."""

KERNEL = "rmsnorm"

CASES = {
    "r1_w2304": dict(rows=1, width=2304, eps=1e-6),
    "r3_w4096_residual": dict(rows=3, width=4096, eps=1e-5, residual=True),
    "r64_w7168": dict(rows=64, width=7168, eps=1e-6),
    "r256_w9216_residual": dict(rows=256, width=9216, eps=1e-6, residual=True),
    "r3_w1000_residual": dict(rows=3, width=1000, eps=1e-6, residual=True),
    "r1_w2368": dict(rows=1, width=2368, eps=1e-5),
    "r1_w4096_q1": dict(rows=1, width=4096, eps=1e-5, quantize=1),
    "r3_w4096_residual_q2": dict(rows=3, width=4096, eps=1e-5, residual=True, quantize=2),
    "r5_w96_q1": dict(rows=5, width=96, eps=1e-6, quantize=1),
    "r33_w14336_q2": dict(rows=33, width=14336, eps=1e-6, quantize=2),
    "r2_w2368_residual_pitch_q1": dict(rows=2, width=2368, eps=1e-5, residual=True, x_pitch=2400, quantize=1),
    # the step's embed folded in (`gather`: x is the table, row r's input its row tokens[r], also written to h):
    # Kimi Linear's hidden at one row, an odd table and width at 5 rows (quantized: dense-small-q8's plan)
    "r1_w2304_gather163840": dict(rows=1, width=2304, eps=1e-5, gather=163840),
    "r5_w1000_gather333": dict(rows=5, width=1000, eps=1e-6, gather=333),
    # a grouped mixture's mixture_sum folded in (`slots`: x is the partial rows, a row's slots summed first):
    # Kimi Linear's 8 experts and shared expert at 64 rows, an odd width and slot count without a residual
    "r64_w2304_residual_slots9": dict(rows=64, width=2304, eps=1e-5, residual=True, slots=9),
    "r5_w1000_slots3": dict(rows=5, width=1000, eps=1e-6, slots=3),
}


def make(spec: dict):
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    return RmsNorm(**spec)
