"""argmax specializations: Kimi Linear's vocabulary, bf16 and fp32 logits."""

KERNEL = "argmax"

CASES = {
    "r1_v163840": dict(rows=1, vocab=163840),
    "r3_v1000_f32": dict(rows=3, vocab=1000, dtype="float32"),
    "r64_v32000": dict(rows=64, vocab=32000),
    "r256_v2368_f32": dict(rows=256, vocab=2368, dtype="float32"),
}


def make(spec: dict):
    from lanec.codegen.kernels.argmax import Argmax

    return Argmax(**spec)
