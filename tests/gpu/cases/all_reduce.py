"""all_reduce_oneshot specializations: a decode step's all-reduces (Kimi Linear's hidden row at batch
1 and 8, dense-small's at batch 64), odd counts of whole 16-byte vectors, fp32, 2 to 8 ranks, one
CTA and the most CTAs (ONESHOT_MAX_CTAS), and the 1 MiB limit. tests/gpu/test_all_reduce.py runs
the ranks as concurrent launches on one GPU (each its own stream and region)."""

KERNEL = "all_reduce_oneshot"

CASES = {
    "n2304_r2": dict(count=2304, dtype="bfloat16", ranks=2),
    "n18432_r2": dict(count=18432, dtype="bfloat16", ranks=2),
    "n131072_r2": dict(count=131072, dtype="bfloat16", ranks=2),
    "n520_r3": dict(count=520, dtype="bfloat16", ranks=3),
    "n1000_f32_r4": dict(count=1000, dtype="float32", ranks=4),
    "n8_r8": dict(count=8, dtype="bfloat16", ranks=8),
    "n524288_r2_limit": dict(count=524288, dtype="bfloat16", ranks=2),
}


def make(spec: dict):
    from lanec.codegen.kernels.all_reduce import OneShotAllReduce

    return OneShotAllReduce(**spec)
