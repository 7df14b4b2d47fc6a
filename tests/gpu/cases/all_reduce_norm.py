"""all_reduce_norm specializations (fold-all-reduce-into-norm): a decode step's all-reduce summed in
the launch of the rmsnorm that reads it: Kimi Linear's hidden rows at batch 1 and 8, DeepSeek-V3's
at 3 rows, dense-small's at 64, a norm without a residual at an odd width, and 4 and 8 ranks.
tests/gpu/test_all_reduce.py runs the ranks as concurrent launches on one GPU (each its own stream
and region; every rank's CTAs fit the GPU at once, or a CTA would wait for a peer that cannot start)."""

KERNEL = "all_reduce_norm"

CASES = {
    "r1_w2304_k2": dict(rows=1, width=2304, eps=1e-6, ranks=2, residual=True),
    "r8_w2304_k2": dict(rows=8, width=2304, eps=1e-6, ranks=2, residual=True),
    "r3_w7168_k2": dict(rows=3, width=7168, eps=1e-6, ranks=2, residual=True),
    "r64_w2048_k2": dict(rows=64, width=2048, eps=1e-5, ranks=2, residual=True),
    "r5_w1000_k4_plain": dict(rows=5, width=1000, eps=1e-5, ranks=4, residual=False),
    "r2_w2304_k8": dict(rows=2, width=2304, eps=1e-6, ranks=8, residual=True),
}


def make(spec: dict):
    from lanec.codegen.kernels.all_reduce import AllReduceNorm

    return AllReduceNorm(**spec)
