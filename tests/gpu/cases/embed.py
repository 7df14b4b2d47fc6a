"""embed specializations."""

KERNEL = "embed"

CASES = {
    "r1_v32000_w2304": dict(rows=1, vocab=32000, width=2304),
    "r3_v1000_w7168": dict(rows=3, vocab=1000, width=7168),
    "r64_v32000_w4096": dict(rows=64, vocab=32000, width=4096),
    "r256_v1000_w2368": dict(rows=256, vocab=1000, width=2368),
}


def make(spec: dict):
    from lanec.codegen.kernels.embed import Embed

    return Embed(**spec)
