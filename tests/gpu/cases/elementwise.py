"""elementwise specializations: every op, rows 1 to 256, real and awkward widths; and (`quantize`,
named `..._q1` / `..._q2`) with fuse-quant's quantize in the epilogue: out in the quantized form
(tests/gpu/test_quantize.py checks those; test_kernels.py the others)."""

KERNEL = "elementwise"

CASES = {
    "add_r1_w2304": dict(op="add", rows=1, width=2304),
    "mul_r3_w4096": dict(op="mul", rows=3, width=4096),
    "silu_r64_w7168": dict(op="silu", rows=64, width=7168),
    "sigmoid_r256_w9216": dict(op="sigmoid", rows=256, width=9216),
    "swiglu_r3_w2368": dict(op="swiglu", rows=3, width=2368),
    "swiglu_r256_w9216": dict(op="swiglu", rows=256, width=9216),
    "add_r64_w1000": dict(op="add", rows=64, width=1000),
    "swiglu_r1_w14336_q1": dict(op="swiglu", rows=1, width=14336, quantize=1),
    "swiglu_r3_w2368_q2": dict(op="swiglu", rows=3, width=2368, quantize=2),
    "silu_r300_w14336_q1": dict(op="silu", rows=300, width=14336, quantize=1),
    "add_r5_w96_q2": dict(op="add", rows=5, width=96, quantize=2),
}


def make(spec: dict):
    from lanec.codegen.kernels.elementwise import Elementwise

    return Elementwise(**spec)
