"""seeded specializations: one value, a partial warp, a partial last CTA, whole CTAs, and a
weight-sized buffer (Kimi Linear's [163840, 2304] embedding rows, a quarter of it), bf16 and fp32."""

KERNEL = "seeded"

CASES = {
    "n1_bf16": dict(count=1, dtype="bfloat16"),
    "n1000_f32": dict(count=1000, dtype="float32"),
    "n6145_bf16": dict(count=6145, dtype="bfloat16"),
    "n65536_f32": dict(count=65536, dtype="float32"),
    "n94371840_bf16": dict(count=40960 * 2304, dtype="bfloat16"),
}


def make(spec: dict):
    from lanec.codegen.kernels.seeded import Seeded

    return Seeded(**spec)
