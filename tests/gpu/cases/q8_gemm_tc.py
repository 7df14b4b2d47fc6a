"""q8_gemm_tc specializations the GPU tests check: the rows above q8_gemv's 32-row limit (33, 64,
100, 256) and a few below it (8, 17); one and two words a value; Llama-3.1-8B's products (4096 ->
4096, the q k v parts, 14336 -> 4096) and Kimi Linear's (2304 wide); outputs that are no whole
tile (1000, 777 + 1024 parts); a K split, two row blocks and schedules of their own."""

from lanec.codegen.schedules import tuned_cases

KERNEL = "q8_gemm_tc"

CASES = {
    "r64_k4096_n4096_w1": dict(rows=64, width=4096, parts=[4096], words=1),
    "r64_k4096_n4096_w2": dict(rows=64, width=4096, parts=[4096], words=2),
    "r33_k14336_n4096_w1": dict(rows=33, width=14336, parts=[4096], words=1),
    "r100_k4096_parts_w2": dict(rows=100, width=4096, parts=[4096, 1024, 1024], words=2),
    "r256_k2304_n1000_w1": dict(rows=256, width=2304, parts=[1000], words=1),
    "r8_k256_n8_w1": dict(rows=8, width=256, parts=[8], words=1),
    "r17_k2304_parts_w2": dict(rows=17, width=2304, parts=[777, 1031], words=2),
    "r48_k4096_n2304_s8_t64": dict(rows=48, width=4096, parts=[2304], words=1,
                                   schedule={"splits": 8, "tile_n": 64}),
    "r200_k1024_n512_b64": dict(rows=200, width=1024, parts=[512], words=2, schedule={"block_rows": 64}),
}

# every schedule the compiler's tuned table picks for q8_gemm_tc (lanec/codegen/schedules.json) is checked too
CASES.update(tuned_cases(KERNEL))


def make(spec: dict):
    from lanec.codegen.kernels.q8_gemm import Q8GemmTc

    return Q8GemmTc(**spec)
