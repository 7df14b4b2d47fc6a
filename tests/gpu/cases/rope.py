"""rope specializations: odd sizes, Llama's round ones at rows 1 to 64, partial rotary, a pitched
input (a part of a product in parts, read in place) and halves too narrow for 16-byte vectors;
the scaled frequencies: Llama 3.1's (its published scaling, and an original context of 64 so
that most frequencies fall in the smoothed band), YaRN's as DeepSeek-V3 publishes it on its
query's interleaved rope part (offset 128 of 192) and its shared key, and YaRN with an attention
factor on cos and sin, untruncated, on an odd head's middle values and on Qwen3-Next's partial
rotary (a quarter of each 256-value head)."""

KERNEL = "rope"

LLAMA3 = {"kind": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_context": 8192}
YARN = {"kind": "yarn", "factor": 40.0, "original_context": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": 1,
        "attention_factor": 1.0}
YARN_LOUD = {**YARN, "factor": 4.0, "original_context": 64, "truncate": 0, "attention_factor": 1.1386294361119891}

CASES = {
    "r3_h5_u64_rot32": dict(rows=3, heads=5, unit=64, rotary=32, theta=10000.0),
    "r1_h32_u128_rot128": dict(rows=1, heads=32, unit=128, rotary=128, theta=500000.0),
    "r8_h32_u128_rot128": dict(rows=8, heads=32, unit=128, rotary=128, theta=500000.0),
    "r64_h32_u128_rot128": dict(rows=64, heads=32, unit=128, rotary=128, theta=1000000.0),
    "r64_h8_u128_rot64": dict(rows=64, heads=8, unit=128, rotary=64, theta=10000.0),
    "r8_h8_u128_rot128_pitched": dict(rows=8, heads=8, unit=128, rotary=128, theta=500000.0, x_pitch=6144),
    "r3_h3_u80_rot20": dict(rows=3, heads=3, unit=80, rotary=20, theta=10000.0),
    # Llama 3.1: its q and k heads at batch 1 and 64, a pitched k part, and an odd short context
    "r1_h32_u128_rot128_llama3": dict(rows=1, heads=32, unit=128, rotary=128, theta=500000.0, scaling=LLAMA3),
    "r64_h8_u128_rot128_llama3_pitched": dict(rows=64, heads=8, unit=128, rotary=128, theta=500000.0,
                                              x_pitch=6144, scaling=LLAMA3),
    "r3_h5_u64_rot32_llama3_ctx64": dict(rows=3, heads=5, unit=64, rotary=32, theta=500000.0,
                                         scaling={**LLAMA3, "original_context": 64}),
    # DeepSeek-V3: the query's rope part (the last 64 of each 192-value head) and the shared key
    "r2_h128_u192_off128_rot64_yarn_interleaved": dict(rows=2, heads=128, unit=192, rotary=64, theta=10000.0,
                                                       offset=128, interleaved=True, scaling=YARN),
    "r5_h1_u64_rot64_yarn_interleaved": dict(rows=5, heads=1, unit=64, rotary=64, theta=10000.0,
                                             interleaved=True, scaling=YARN),
    "r3_h5_u24_off6_rot8_interleaved_loud": dict(rows=3, heads=5, unit=24, rotary=8, theta=10000.0, offset=6,
                                                 interleaved=True, scaling=YARN_LOUD),
    "r3_h3_u80_off30_rot20_yarn_loud": dict(rows=3, heads=3, unit=80, rotary=20, theta=10000.0, offset=30,
                                            scaling=YARN_LOUD),
    # a q and k pair in one launch (the lowering's `rope_partner`): Llama-style 16 + 4 heads of one product's row
    # (q, k, v parts: 3072 wide), at 1 row and at 5 with Llama 3.1's frequencies
    "r1_h20_u128_rot128_paired": dict(rows=1, heads=20, unit=128, rotary=128, theta=500000.0, x_pitch=3072),
    "r5_h20_u128_rot128_llama3_paired": dict(rows=5, heads=20, unit=128, rotary=128, theta=500000.0, x_pitch=3072,
                                             scaling=LLAMA3),
    # Qwen3-Next's full attention: partial rotary on 256-value heads
    "r7_h16_u256_rot64": dict(rows=7, heads=16, unit=256, rotary=64, theta=10000000.0),
    "r3_h2_u256_rot64_yarn_loud": dict(rows=3, heads=2, unit=256, rotary=64, theta=10000000.0, scaling=YARN_LOUD),
}


def make(spec: dict):
    from lanec.codegen.kernels.rope import Rope

    return Rope(**spec)
