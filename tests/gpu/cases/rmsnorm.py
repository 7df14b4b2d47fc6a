"""rmsnorm specializations, with and without the residual add."""

KERNEL = "rmsnorm"

CASES = {
    "r1_w2304": dict(rows=1, width=2304, eps=1e-6),
    "r3_w4096_residual": dict(rows=3, width=4096, eps=1e-5, residual=True),
    "r64_w7168": dict(rows=64, width=7168, eps=1e-6),
    "r256_w9216_residual": dict(rows=256, width=9216, eps=1e-6, residual=True),
    "r3_w1000_residual": dict(rows=3, width=1000, eps=1e-6, residual=True),
    "r1_w2368": dict(rows=1, width=2368, eps=1e-5),
}


def make(spec: dict):
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    return RmsNorm(**spec)
