"""part specializations: Qwen3-Next's split of each key head's q, k, v and gate (16 units of 768,
read in place from a product in parts) and of its b and a (units of 4, two values each: copied a
pair at a time), a whole pitched row (what an elementwise op reads of a part), odd sizes."""

KERNEL = "part"

CASES = {
    "r1_h16_u768_o256_l256_pitched": dict(rows=1, heads=16, unit=768, offset=256, length=256, x_pitch=12352),
    "r3_h16_u768_o0_l128": dict(rows=3, heads=16, unit=768, offset=0, length=128),
    "r64_h16_u4_o2_l2_pitched": dict(rows=64, heads=16, unit=4, offset=2, length=2, x_pitch=12352),
    "r1_h1_u32_o0_l32_pitched": dict(rows=1, heads=1, unit=32, offset=0, length=32, x_pitch=6304),
    "r5_h3_u20_o3_l7": dict(rows=5, heads=3, unit=20, offset=3, length=7),
}


def make(spec: dict):
    from lanec.codegen.kernels.part import Part

    return Part(**spec)
