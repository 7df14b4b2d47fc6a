"""conv specializations: Qwen3-Next's q / k convs (the L2 norm of 16 heads of 128 in the epilogue)
and v conv (4096 channels at offset 4096 of one state), Kimi Linear's held-back convs at KDA head
size 64, odd channel counts with a bias and pitched rows, width 2 and 3, no activation, one to 16
tokens a request (speculative: slots [batch, >= tokens], accepted counts), batch 1 to 64."""

KERNEL = "conv"

CASES = {
    "b1_t1_c2048_w4_norm16": dict(batch=1, tokens=1, channels=2048, width=4, state_slots=2, state_channels=8192,
                                  offset=2048, norm_heads=16, norm_eps=1e-6),
    "b3_t1_c4096_w4": dict(batch=3, tokens=1, channels=4096, width=4, state_slots=5, state_channels=8192,
                           offset=4096, x_pitch=12352),
    "b5_t1_c2048_w4_norm32_h64": dict(batch=5, tokens=1, channels=2048, width=4, state_slots=9, state_channels=6144,
                                      offset=0, norm_heads=32, norm_eps=1e-6, x_pitch=6304),
    "b7_t3_c1000_w3_bias": dict(batch=7, tokens=3, channels=1000, width=3, state_slots=30, state_channels=3000,
                                offset=1000, bias=True, slot_columns=4, x_pitch=3008),
    "b4_t16_c256_w4_norm2": dict(batch=4, tokens=16, channels=256, width=4, state_slots=70, state_channels=768,
                                 offset=512, norm_heads=2, norm_eps=1e-6, slot_columns=16),
    "b2_t8_c192_w2_none": dict(batch=2, tokens=8, channels=192, width=2, state_slots=17, state_channels=192,
                               activation="none", slot_columns=8),
    "b64_t1_c128_w4_norm1": dict(batch=64, tokens=1, channels=128, width=4, state_slots=130, state_channels=384,
                                 offset=128, norm_heads=1, norm_eps=1e-5, slot_columns=2),
    "b6_t2_c4096_w4_norm64_h64": dict(batch=6, tokens=2, channels=4096, width=4, state_slots=13,
                                      state_channels=12288, offset=4096, norm_heads=64, norm_eps=1e-6,
                                      slot_columns=2),
}


def make(spec: dict):
    from lanec.codegen.kernels.conv import Conv

    return Conv(**spec)
