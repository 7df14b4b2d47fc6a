"""rope specializations: odd sizes, Llama's round ones at rows 1 to 64, partial rotary, a pitched
input (a part of a product in parts, read in place) and halves too narrow for 16-byte vectors."""

KERNEL = "rope"

CASES = {
    "r3_h5_u64_rot32": dict(rows=3, heads=5, unit=64, rotary=32, theta=10000.0),
    "r1_h32_u128_rot128": dict(rows=1, heads=32, unit=128, rotary=128, theta=500000.0),
    "r8_h32_u128_rot128": dict(rows=8, heads=32, unit=128, rotary=128, theta=500000.0),
    "r64_h32_u128_rot128": dict(rows=64, heads=32, unit=128, rotary=128, theta=1000000.0),
    "r64_h8_u128_rot64": dict(rows=64, heads=8, unit=128, rotary=64, theta=10000.0),
    "r8_h8_u128_rot128_pitched": dict(rows=8, heads=8, unit=128, rotary=128, theta=500000.0, x_pitch=6144),
    "r3_h3_u80_rot20": dict(rows=3, heads=3, unit=80, rotary=20, theta=10000.0),
}


def make(spec: dict):
    from lanec.codegen.kernels.rope import Rope

    return Rope(**spec)
