"""argmax specializations: Kimi Linear's vocabulary on one CTA, bf16 and fp32 logits; and a row's CTAs as a cluster
(`cluster`, `_c<N>`): Kimi's and Llama's vocabularies, an odd one where some CTAs hold no vector."""

KERNEL = "argmax"

CASES = {
    "r1_v163840": dict(rows=1, vocab=163840, cluster=1),  # one CTA (the default here is a cluster)
    "r3_v1000_f32": dict(rows=3, vocab=1000, dtype="float32"),
    "r64_v32000": dict(rows=64, vocab=32000),
    "r256_v2368_f32": dict(rows=256, vocab=2368, dtype="float32"),
    "r1_v163840_c8": dict(rows=1, vocab=163840, cluster=8),
    "r3_v1000_f32_c4": dict(rows=3, vocab=1000, dtype="float32", cluster=4),
    "r8_v128256_c8": dict(rows=8, vocab=128256, cluster=8),
    "r5_v2368_f32_c8": dict(rows=5, vocab=2368, dtype="float32", cluster=8),
}


def make(spec: dict):
    from lanec.codegen.kernels.argmax import Argmax

    return Argmax(**spec)
