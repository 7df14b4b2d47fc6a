"""gemv specializations the GPU tests check: a decode step's rows (1 and 3 on CUDA cores; 4 to the
32-row limit on tensor cores, and each path forced where the other is the default), the widths
of real products and awkward ones (K not a multiple of the MMA's 32-value chunk, N not one of its
8-row tiles), parts, and per-head part reads on both paths. 64 rows is refused by the kernel (the
lowering runs more than 32 rows as several launches), so it is not a case. A `schedule` names the
`RowSchedule` knobs it sets (lanec/codegen/facts.py)."""

from lanec.codegen.schedules import tuned_cases

KERNEL = "gemv"

CASES = {
    "r1_k2304_n4096": dict(rows=1, width=2304, parts=[4096]),
    "r1_k4096_n2304": dict(rows=1, width=4096, parts=[2304]),
    "r1_k7168_n1000": dict(rows=1, width=7168, parts=[1000]),
    "r1_k9216_n2304": dict(rows=1, width=9216, parts=[2304]),
    "r1_k1000_n2368": dict(rows=1, width=1000, parts=[2368]),
    "r3_k2304_parts": dict(rows=3, width=2304, parts=[2048, 512, 512]),
    "r3_k2368_n1000": dict(rows=3, width=2368, parts=[1000]),
    "r16_k9216_n1000": dict(rows=16, width=9216, parts=[1000]),
    "r32_k4096_n2304": dict(rows=32, width=4096, parts=[2304]),
    "r3_per_head": dict(rows=3, width=128, parts=[512], per_head=[8, 192, 64]),
    "r1_sched_w2_r1": dict(rows=1, width=2368, parts=[1000],
                           schedule={"warps": 2, "rows_per_cta": 1, "tensor_cores": False}),
    "r8_k2304_n4096": dict(rows=8, width=2304, parts=[4096]),
    "r5_k1000_n1001": dict(rows=5, width=1000, parts=[1001]),
    "r24_k2368_tiles3": dict(rows=24, width=2368, parts=[1000, 1003],
                             schedule={"rows_per_cta": 24, "tensor_cores": True}),
    "r1_k2304_mma": dict(rows=1, width=2304, parts=[2304], schedule={"rows_per_cta": 16, "tensor_cores": True}),
    "r3_k1000_mma_w3": dict(rows=3, width=1000, parts=[777],
                            schedule={"warps": 3, "rows_per_cta": 8, "tensor_cores": True}),
    "r8_k4096_fma": dict(rows=8, width=4096, parts=[1000],
                         schedule={"warps": 8, "rows_per_cta": 2, "tensor_cores": False}),
    "r6_per_head_mma": dict(rows=6, width=128, parts=[512], per_head=[8, 192, 64]),
    # the short products' tuned schedules read per head (the table keys them by shape only): Kimi
    # Linear's absorbed query at one warp of 16 rows a CTA, and odd heads at 8 rows on tensor cores
    "r1_per_head_kimi_absorb_w1": dict(rows=1, width=128, parts=[32 * 512], per_head=[32, 192, 0],
                                       schedule={"warps": 1, "rows_per_cta": 16, "tensor_cores": False}),
    "r8_per_head_w2_mma": dict(rows=8, width=128, parts=[7 * 512], per_head=[7, 192, 64],
                               schedule={"warps": 2, "rows_per_cta": 16, "tensor_cores": True}),
    "r1_per_head_expand_w4": dict(rows=1, width=512, parts=[5 * 128], per_head=[5, 512, 0],
                                  schedule={"warps": 4, "rows_per_cta": 8, "tensor_cores": False}),
    # blocks of rows in one launch (GEMV_ROW_BLOCKS_FROM, `row_blocks`): Kimi Linear's absorbed query at 64 rows
    # (2 blocks of 32, pitched) and its value expansion at 256 (8 blocks), odd widths in 3 blocks, 5-row blocks
    "r64_per_head_kimi_absorb_rb2": dict(rows=32, width=128, parts=[32 * 512], per_head=[32, 192, 0], x_pitch=6720,
                                         row_blocks=2),
    "r256_per_head_kimi_expand_rb8": dict(rows=32, width=512, parts=[32 * 128], per_head=[32, 512, 0], row_blocks=8),
    "r96_k1000_n1001_rb3": dict(rows=32, width=1000, parts=[1001], row_blocks=3),
    "r15_k2304_n4096_rb3": dict(rows=5, width=2304, parts=[4096], row_blocks=3),
    # a part of a product in parts read in place: g_b's input in the KDA layer (pitch 12576)
    "r1_k128_pitch": dict(rows=1, width=128, parts=[4096], x_pitch=12576),
    "r8_k128_pitch_mma": dict(rows=8, width=128, parts=[4096], x_pitch=12576),
    # a norm in the prologue (fold-norm-into-gemv): Kimi Linear's input norm into q, k, v, f_a, b,
    # g_a (parts at 8-row places), with the residual; odd sizes; a pitched input without one
    "r1_norm_kda_parts": dict(rows=1, width=2304, parts=[4096, 4096, 4096, 128, 32, 128], norm=True, eps=1e-5,
                              residual=True),
    "r3_norm_k1000_n1001": dict(rows=3, width=1000, parts=[1001], norm=True, eps=1e-6, residual=True),
    "r2_norm_pitch": dict(rows=2, width=2304, parts=[2048], x_pitch=2560, norm=True, eps=1e-6),
    "r1_norm_k7168_w4": dict(rows=1, width=7168, parts=[777], norm=True, eps=1e-6, residual=True,
                             schedule={"warps": 4, "rows_per_cta": 1}),
    # the argmax in the epilogue (fold-argmax-into-gemv): Kimi Linear's lm head at 1 row (81920 CTAs
    # into one atomic minimum), odd sizes at 2 and 3 rows, one CTA, and behind a norm prologue
    "r1_argmax_kimi_lm_head": dict(rows=1, width=2304, parts=[163840], argmax=True),
    "r3_argmax_k1000_n50001": dict(rows=3, width=1000, parts=[50001], argmax=True),
    "r2_argmax_k64_n999": dict(rows=2, width=64, parts=[999], argmax=True),
    "r1_argmax_one_cta": dict(rows=1, width=128, parts=[5], argmax=True, schedule={"rows_per_cta": 8}),
    "r2_argmax_norm": dict(rows=2, width=2048, parts=[32000], argmax=True, norm=True, eps=1e-5, residual=True),
    # a norm riding in the launch (fold-norm-into-latent): Kimi Linear's latent row (512 of the 6720-wide merged
    # product's output, read in place) beside its absorbed query, DeepSeek-V3's at 3 rows on the tensor cores,
    # and an odd width in registers across three vectors a lane
    "r1_rider_kimi_absorb": dict(rows=1, width=128, parts=[32 * 512], per_head=[32, 192, 0], x_pitch=6720,
                                 schedule={"warps": 1, "rows_per_cta": 16, "tensor_cores": False},
                                 rider_width=512, rider_eps=1e-6, rider_x_pitch=6720),
    "r3_rider_mma": dict(rows=3, width=128, parts=[16 * 512], per_head=[16, 192, 0],
                         schedule={"warps": 2, "rows_per_cta": 16, "tensor_cores": True}, rider_width=512,
                         rider_eps=1e-6, rider_x_pitch=2112),
    "r2_rider_odd": dict(rows=2, width=1000, parts=[1001], rider_width=776, rider_eps=1e-5),
    # a split latent attention's chunks merged in the prologue (LATENT_COMBINE_IN_GEMV): Kimi Linear's value
    # expansion at one row from 16 bf16 chunks, DeepSeek-V3's 128-head shape at 3 rows from 13 fp32 chunks (a lane
    # group of 16 with 3 past the chunks), and 5 bf16 chunks at 2 rows (8 lanes, 3 past them)
    "r1_combine_kimi_values": dict(rows=1, width=512, parts=[32 * 128], per_head=[32, 512, 0],
                                   schedule={"warps": 4, "rows_per_cta": 8, "tensor_cores": False},
                                   combine_splits=16, combine_partials="bfloat16"),
    "r3_combine_s13_f32": dict(rows=3, width=512, parts=[128 * 128], per_head=[128, 512, 0],
                               schedule={"tensor_cores": False}, combine_splits=13),
    "r2_combine_s5_bf16": dict(rows=2, width=512, parts=[4 * 128], per_head=[4, 512, 0],
                               schedule={"tensor_cores": False, "warps": 2, "rows_per_cta": 4}, combine_splits=5,
                               combine_partials="bfloat16"),
    # the weight rows preloaded into shared memory before the PDL wait (RowSchedule preload): Kimi Linear's
    # o_proj in one wave (18 rows a CTA, 128 CTAs), an uneven last CTA at 3 rows, a norm prologue with its
    # residual, a per-head read, Kimi Linear's value expansion merging 16 chunks, and the quantize epilogue
    "r1_preload_kimi_o_proj": dict(rows=1, width=4096, parts=[2304], schedule={"preload": True, "warps": 8}),
    "r3_preload_k1000_n1001": dict(rows=3, width=1000, parts=[1001], schedule={"preload": True, "warps": 2}),
    "r2_preload_norm": dict(rows=2, width=2304, parts=[777], norm=True, eps=1e-5, residual=True,
                            schedule={"preload": True}),
    "r1_preload_per_head": dict(rows=1, width=512, parts=[5 * 128], per_head=[5, 512, 0],
                                schedule={"preload": True, "warps": 4, "rows_per_cta": 8}),
    "r1_preload_kimi_values": dict(rows=1, width=512, parts=[32 * 128], per_head=[32, 512, 0], combine_splits=16,
                                   combine_partials="bfloat16", schedule={"preload": True}),
    "r1_preload_q1": dict(rows=1, width=2304, parts=[1024], quantize=1, schedule={"preload": True, "rows_per_cta": 32}),
    # fuse-quant's quantize in the epilogue (tests/gpu/test_quantize.py checks these): 16 CTAs a block
    # at one row (2 rows a CTA), 4 at 3 rows, the tensor cores' 8 a CTA at 8 rows
    "r1_k2304_n1024_q1": dict(rows=1, width=2304, parts=[1024], quantize=1),
    "r3_k1000_n96_q2": dict(rows=3, width=1000, parts=[96], quantize=2),
    "r8_k4096_n512_q1": dict(rows=8, width=4096, parts=[512], quantize=1),
}

# every schedule the compiler's tuned table picks (lanec/codegen/schedules.json) is checked too
CASES.update(tuned_cases(KERNEL))


def make(spec: dict):
    from lanec.codegen.kernels.gemv import Gemv

    return Gemv(**spec)
