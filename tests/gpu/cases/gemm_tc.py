"""gemm_tc specializations the GPU tests check (tests/gpu/test_gemm_tc.py): a batch's rows above
the GEMV's 32 on the mma.sync engine (33, 64, 100, 200, 256: one row block or two, each padded to whole 16-row MMA
tiles) and a few below; K of real products (2304, 4096, 7168, 9216) and odd multiples of 8 that
leave a partial 64-value stage (1000, 1064, 128); N of real products (4096, 2304, Kimi Linear's
merged q k v f_a b g_a, 12576; an lm head's slice, 16384) and ones that leave a partial weight tile
(1008, 2056); the activation read in place from a wider row; K split over a cluster (the default
where tiles leave SMs idle, and forced to 4 and 8) and not; both weight tiles and few stages. The
wgmma engine (the default) runs the same shapes (tests/gpu/cases/gemm_wgmma.py); the tuned table's
entries run on the engine each names."""

from lanec.codegen.schedules import tuned_cases

KERNEL = "gemm_tc"

KIMI_MERGED = [4096, 4096, 4096, 128, 32, 128]

CASES = {
    "r33_k2304_n4096": dict(rows=33, width=2304, parts=[4096]),
    "r33_k1000_n1008": dict(rows=33, width=1000, parts=[1008]),
    "r64_k4096_n2304": dict(rows=64, width=4096, parts=[2304]),
    "r64_k128_n4096_pitch": dict(rows=64, width=128, parts=[4096], x_pitch=12576),
    "r100_k2304_merged_pitch": dict(rows=100, width=2304, parts=KIMI_MERGED, x_pitch=2312),
    "r100_k7168_n4096": dict(rows=100, width=7168, parts=[4096]),
    "r200_k1064_n2056": dict(rows=200, width=1064, parts=[2048, 8]),
    "r256_k7168_n4096": dict(rows=256, width=7168, parts=[4096]),
    "r256_k9216_n2304": dict(rows=256, width=9216, parts=[2304]),
    "r256_k2304_n16384": dict(rows=256, width=2304, parts=[16384]),
    "r256_k2304_merged": dict(rows=256, width=2304, parts=KIMI_MERGED),
    "r128_k4096_n2304_t64_s3_k4": dict(rows=128, width=4096, parts=[2304],
                                       schedule={"tile_n": 64, "stages": 3, "splits": 4}),
    "r48_k2304_n1024_t128_k8": dict(rows=48, width=2304, parts=[1024], schedule={"tile_n": 128, "splits": 8}),
    "r160_k1000_n4096_s2_k1": dict(rows=160, width=1000, parts=[4096], schedule={"stages": 2, "splits": 1}),
    "r1_k2304_n4096": dict(rows=1, width=2304, parts=[4096]),
    "r17_k1064_n1008": dict(rows=17, width=1064, parts=[1008]),
}

for _spec in CASES.values():  # the hand-written cases are the mma.sync engine's
    _spec["schedule"] = {**_spec.get("schedule", {}), "engine": "mma"}

# every schedule the compiler's tuned table picks (lanec/codegen/schedules.json) is checked too,
# a gated pair's entry as a gated launch
CASES.update(tuned_cases(KERNEL))


def make(spec: dict):
    from lanec.codegen.kernels.gemm_tc import GemmTc

    return GemmTc(**spec)
