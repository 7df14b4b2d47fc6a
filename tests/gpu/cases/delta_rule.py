"""delta_rule specializations: Qwen3-Next's Gated DeltaNet (32 value heads sharing 16 key heads of
128, a decay a head), Kimi Linear's held-back KDA (head size 64, a decay a key), heads 1 to 64,
head sizes 64, 128 and 256, one to 16 tokens a request (speculative: slots [batch, >= tokens],
accepted counts), odd and round batches, a wider slot table, pitched inputs, and the rows of a head
in one CTA and split over several."""

KERNEL = "delta_rule"

CASES = {
    "b1_t1_h32_kh16_k128_v128_head": dict(batch=1, tokens=1, heads=32, key_heads=16, key=128, value=128,
                                          state_slots=2, scale=128 ** -0.5, per_key=False),
    "b1_t1_h32_k64_v64_key": dict(batch=1, tokens=1, heads=32, key_heads=32, key=64, value=64, state_slots=2,
                                  scale=0.125, per_key=True),
    "b3_t4_h5_k64_v64_key": dict(batch=3, tokens=4, heads=5, key_heads=5, key=64, value=64, state_slots=13,
                                 scale=0.125, per_key=True, slot_columns=4),
    "b8_t16_h2_kh1_k128_v128_head": dict(batch=8, tokens=16, heads=2, key_heads=1, key=128, value=128,
                                         state_slots=129, scale=128 ** -0.5, per_key=False, slot_columns=16),
    "b64_t1_h64_k64_v64_key": dict(batch=64, tokens=1, heads=64, key_heads=64, key=64, value=64, state_slots=65,
                                   scale=0.125, per_key=True),
    "b7_t2_h1_k128_v128_key_one_cta": dict(batch=7, tokens=2, heads=1, key_heads=1, key=128, value=128,
                                           state_slots=30, scale=128 ** -0.5, per_key=True, slot_columns=3,
                                           split=1),
    "b33_t1_h4_kh2_k128_v64_head": dict(batch=33, tokens=1, heads=4, key_heads=2, key=128, value=64,
                                        state_slots=40, scale=128 ** -0.5, per_key=False, slot_columns=1),
    "b2_t3_h3_k256_v256_key": dict(batch=2, tokens=3, heads=3, key_heads=3, key=256, value=256, state_slots=7,
                                   scale=256 ** -0.5, per_key=True, slot_columns=3),
    "b5_t1_h16_kh8_k128_v128_head_pitched": dict(batch=5, tokens=1, heads=16, key_heads=8, key=128, value=128,
                                                 state_slots=6, scale=128 ** -0.5, per_key=False, q_pitch=3072,
                                                 k_pitch=3072, v_pitch=2112, beta_pitch=24),
}


def make(spec: dict):
    from lanec.codegen.kernels.delta_rule import DeltaRule

    return DeltaRule(**spec)
