"""kda_gate specializations: Gated DeltaNet's decay a head (Qwen3-Next: 32 heads, size 1), KDA's a
key (Kimi Linear at head size 64 and 128), the lower-bound form, a pitched raw gate, odd rows."""

KERNEL = "kda_gate"

CASES = {
    "softplus_r1_h32_s1": dict(rows=1, heads=32, size=1),
    "softplus_r3_h32_s64": dict(rows=3, heads=32, size=64),
    "softplus_r64_h8_s128": dict(rows=64, heads=8, size=128),
    "lower_bound_r5_h3_s64_pitched": dict(rows=5, heads=3, size=64, form="lower_bound", lower_bound=-5.0, g_pitch=200),
    "softplus_r7_h64_s1_pitched": dict(rows=7, heads=64, size=1, g_pitch=72),
}


def make(spec: dict):
    from lanec.codegen.kernels.kda_gate import KdaGate

    return KdaGate(**spec)
