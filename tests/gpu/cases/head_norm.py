"""head_norm specializations, one kernel for three form ops: the L2 norm (Kimi Linear's held-back
q and k norms, heads of 64), Qwen3's q_norm / k_norm (heads of 256, one of them read in place from
a product in parts), the gated norm with a sigmoid (KDA) or swish (Gated DeltaNet) gate, and odd
head sizes and row counts; and (`..._q1` / `..._q2`) with fuse-quant's quantize in the epilogue,
y in the quantized form of one or two int8 words a value (test_quantize.py checks those)."""

KERNEL = "head_norm"

CASES = {
    "l2_r1_h32_s64": dict(rows=1, heads=32, size=64, eps=1e-6, mean=False, weight=False),
    "l2_r7_h64_s128_pitched": dict(rows=7, heads=64, size=128, eps=1e-6, mean=False, weight=False, x_pitch=8200),
    "rms_r1_h16_s256": dict(rows=1, heads=16, size=256, eps=1e-6),
    "rms_r3_h2_s256_pitched": dict(rows=3, heads=2, size=256, eps=1e-6, x_pitch=9216),
    "gated_swish_r1_h32_s128": dict(rows=1, heads=32, size=128, eps=1e-6, gate="swish"),
    "gated_sigmoid_r64_h32_s64": dict(rows=64, heads=32, size=64, eps=1e-5, gate="sigmoid"),
    "gated_swish_r5_h3_s200_pitched": dict(rows=5, heads=3, size=200, eps=1e-6, gate="swish", x_pitch=608,
                                           gate_pitch=640),
    "rms_r9_h1_s48": dict(rows=9, heads=1, size=48, eps=1e-6),
    # fuse-quant's quantize in the epilogue (tests/gpu/test_quantize.py checks these)
    "gated_swish_r1_h32_s128_q1": dict(rows=1, heads=32, size=128, eps=1e-6, gate="swish", quantize=1),
    "gated_sigmoid_r3_h16_s128_q2": dict(rows=3, heads=16, size=128, eps=1e-5, gate="sigmoid", quantize=2),
    "rms_r5_h3_s64_pitched_q1": dict(rows=5, heads=3, size=64, eps=1e-6, x_pitch=200, quantize=1),
}


def make(spec: dict):
    from lanec.codegen.kernels.head_norm import HeadNorm

    return HeadNorm(**spec)
