"""quantize specializations the GPU tests check: one and two words a value, rows of a decode
step and beyond a GEMV's 32, widths of real activations (Llama-3.1-8B's 4096 and 14336) and odd
block counts (3, 65: a CTA's last lanes past the row), and rows read in place from wider rows."""

KERNEL = "quantize"

CASES = {
    "r1_k4096_w1": dict(rows=1, width=4096, words=1),
    "r1_k4096_w2": dict(rows=1, width=4096, words=2),
    "r3_k96_w1": dict(rows=3, width=96, words=1),
    "r5_k2080_w2": dict(rows=5, width=2080, words=2),
    "r32_k14336_w1": dict(rows=32, width=14336, words=1),
    "r33_k14336_w2": dict(rows=33, width=14336, words=2),
    "r7_k160_pitch_w2": dict(rows=7, width=160, words=2, x_pitch=264),
}


def make(spec: dict):
    from lanec.codegen.kernels.quantize import Quantize

    return Quantize(**spec)
