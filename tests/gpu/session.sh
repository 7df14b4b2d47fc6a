#!/usr/bin/env bash
# GPU check-and-time sessions, in phases that each fit one GPU command (10 minutes at most). Run
# from the repository root there, with build/ carried and .whl/ (fla: the KDA anchors and
# naive_recurrent_kda in the KdaSplit tests; threadpoolctl for the interpreter's experts; gguf and
# pyyaml for test_gguf_run.py's checkpoint):
#
#   here:  python tests/gpu/build.py && python tests/gpu/cases/kda_split.py --set bench --set full \
#          && python bench/gemv.py build && python bench/linear_attention.py build \
#          && pip download --no-deps fla-core==0.6.0 einops threadpoolctl==3.6.0 gguf==0.19.0 -d .whl \
#          && pip download --no-deps --only-binary=:all: --python-version 3.12 \
#               --platform manylinux_2_17_x86_64 pyyaml==6.0.3 -d .whl      # gguf imports yaml
#   there: bash tests/gpu/session.sh [PHASE ...]        # default: check; logs under $OUT
#
# Phases, with what they took on the H200 (2026-11-29):
#   check      every kernel's GPU tests at their defaults: driver, gemv / norms / elementwise,
#              KdaSplit quick + cluster1 + tuned, attention / latent attention / combine (cases to
#              32k keys: the interpreter's reference takes most of the 2.5 minutes), the mixture,
#              gemm_tc (about 6 minutes)
#   plans      every whole plan of tests/gpu/plans.py with --check (the whole-Kimi plans bind 11 GB
#              of seeded weights each: about 1-1.5 minutes a plan; run a few a command with -k)
#   grid1..3   a third each of KdaSplit's full heads x batch x tokens grid (about 3 minutes each)
#   time       each plan's step time, the dense step with and without PDL and graph, and each
#              plan's step against the per-op chain (bench/step_chain.py, one process a plan)
#   kda        bench/kda.py against fla, writing $OUT/schedules.json (about 4.5 minutes)
#   gemv       bench/gemv.py against torch, merging into $OUT/schedules.json
#   attention  the attention kernels' tests and the plans with attention (dense, Kimi MLA) --check
#   sanitize   compute-sanitizer memcheck and racecheck on one case of each kernel in SANITIZE
#              (pytest -k expressions over the kernel tests in SANITIZE_FILES)
#   bench-attention  bench/attention.py (carry .anchors too for SGLang's column)
#   bench-cluster    bench/attention.py with LANEC_ATTN_CLUSTER=1: split-KV combined in the attention's own
#              cluster (DSMEM) against attention + attention_combine (carry build/bench-attention-cluster)
#   bench-mixture    bench/mixture.py (carry .anchors too for SGLang's fused MoE column)
#   bench-gemm       bench/gemm.py against cuBLAS, writing its fastest schedules to $OUT/schedules.json
#   tiles      gemm_tc's weight tiles of 192 and 256 rows (and 64): their GPU cases, compute-sanitizer on one,
#              bench/gemm.py built with LANEC_GEMM_TILES=1, the fastest written to $OUT/schedules.json
#   quotient   two-word quantize without dividing its zero remainders: the quantize and epilogue cases, sanitizer,
#              bench/q8.py before and after, the two-word q8_0 plan's step (carry build/bench/q8-old too)
#   occ-split  the real batch-64 step with gemm_tc's two-CTAs-an-SM entry on o_proj only, on the merged product only
#   entry      every kernel releasing its PDL dependents at its entry: plans --check, steps before and after
#   release    each launch's release point by what follows it (RELEASE_RULE): plans --check, every rule's step
#   release-real  the same on the real-size batch-1 step (its --check under "successor", every rule's step)
#   odd-splits GQA's split counts that fill the resident CTAs' slots (33, 66, 132) beside the chosen (bench/attention.py)
#   launch-floor  bench/launch_floor.py: chains of launches that only hand a row on (the PDL hop by grid size, with
#              and without PDL), and the layer's norm as a launch against the last CTA's work (carry
#              build/bench/launch_floor; about 10 s)
#   units      mixture_down's units a warp (MixtureSchedule) in the real-size batch-1 step: the plans --check, then
#              each units' plan interleaved, two rounds (build/units/kimi-u*.plan, written here by
#              tests/gpu/variant_plan.py with the table's mixture_down entry replaced; about 3 minutes)
#   graph-profile  bench/graph_profile.py: each launch's increment in the real-size step's graph (CUPTI's kernel
#              records through torch.profiler) at batch 1, 8 and 64, traces in $OUT (carry build/plans; about 50 s)
#   router-chain  bench/router_chain.py: the batch-1 router in a PDL chain, whole and with a stage taken out
#              (carry build/bench/router_chain; about 5 s)
#   router-early  the router's early sigmoids (and rows in registers before the wait: refuted): the mixture's cases,
#              sanitizer, bench/router_chain.py, the real-size steps before and after (build/ab; about 4 minutes)
#   router-shared  the shared expert in the router's launch: cases, sanitizer, router_chain, the b1 step A/B, --check
#              (about 6 minutes)
#   router-check  the real-size batch-1 and batch-8 plans and five smaller ones --check (about 5 minutes)
#   router-push  the router's scores sent to its first CTA by st.async: the mixture cases, sanitizer, router_chain, the
#              real-size batch-1 step before and after (build/ab3; about 6 minutes)
#   router-prefetch  the router prefetching its chosen experts' first gate and up rows: the router's norm cases,
#              sanitizer, two rounds of build/pf's plans, --check (about 5 minutes)
#   prefetch-confirm  the router's prefetch on another machine: the batch-1 step A/B, --check
#   kda-step   KdaSplit's batch-1 schedule in the real-size step: two rounds of build/kv's variant plans, --check of
#              the other clusters (about 6 minutes)
#   review-ncu  the early-shared and rider cases, sanitizer, the batch-1 --check; then with NCU_SAMPLING the phase ncu
#              on a plan's own kernels (bench/ncu.py build --plan)
#   preload    gemv's weight rows preloaded into shared memory before the PDL wait (RowSchedule preload): the gemv and
#              gated_gemv cases, sanitizer on the o_proj case, rounds of build/pre's plans, --check of one (about 6 minutes)
#   vectors    the mixture's vectors a lane has in flight (MixtureSchedule vectors): the mixture cases, sanitizer on one,
#              rounds of build/mv's plans, --check of VECTORS_CHECK (about 6 minutes)
#   ready      MIXTURE_READY_FLAG: the batch-1 step with mixture_gated on the router's flags against without,
#              the flag pairs' GPU cases, compute-sanitizer, the flagged plan's --check
#   inflight   the merged gemv's warps and mixture_down's units x vectors in the real-size batch-1 step: rounds of
#              build/next's plans, --check of INFLIGHT_CHECK (about 4 minutes at 3 rounds)
#   grouped    the grouped products' stage_k and compact grid as options: every grouped case, sanitizer on one,
#              rounds of build/v31m's plans (180 s at 2 rounds of 9)
#   swizzle    the grouped products' stage rows swizzled (MIXTURE_GROUP_SWIZZLE, then off) and down CTAs of 64 outputs
#              (MIXTURE_DOWN_TILE, 128): the cases, sanitizer on two, a round of build/v32's plans at 24, 64, 256 rows
#   row-blocks  a per-head product's blocks of rows in one gemv launch: gemv cases, sanitizer, b64 and b256 rounds
#   row-blocks-check  the row-blocks plans at 64 and 256 rows --check (about 6 minutes)
#   ew-sweep   the early weights with more of a warp's row in its first chunk (units, vectors): cases, sanitizer, rounds
#   early-weights  mixture_down's first chunk of rows before its PDL wait: cases, sanitizer, the batch-1 A/B, --check
#   l2-states  the states' lines persisting in L2 (LANEC_L2_STATES): the set-aside, the batch-1 step by setting, --check
#   spread-adopt  the same adopted from 256 rows: the cases, sanitizer, the batch-256 1k --check, the 256-row rows
#              against the chain
#   spread     each block of a segment in a CTA of its own (MIXTURE_GROUP_SPREAD_ROWS, then off): the grouped cases,
#              sanitizer on one, a round of build/v33's plans at 256 and 64 rows
#   swizzle-adopt  the swizzled stage rows adopted: the grouped cases, sanitizer, the 24- and 64-row --check, the
#              1k rows against the chain (ADOPT_CHAIN: other plans)
#   grouped-adopt  the same adopted: the cases, sanitizer, each shape's step before and after (build/v31f), the
#              24- and 64-row plans' --check, both against the chain (432 s)
#   norm-late  gemv's norm prologue scaled after its products: the norm cases, sanitizer, the fold's plans --check,
#              the real-size batch-1 step with the fold at 2, 4 and 8 rows a CTA, with and without the lm head's fold
#   norm-fold  the fold at 4 rows a CTA across the families: cases, sanitizer, --check and each step against its
#              plan without the fold
#   early-shared  mixture_gated's shared warp before the PDL wait: the mixture cases, sanitizer, the plans it changes
#              --check, the real-size batch-1 step without it and at 2 and 3 units a shared warp
#   rider      the latent row's norm riding in the absorption gemv: its cases, sanitizer, the MLA plans --check, the
#              real-size batch-1 step with and without it and the early shared warp
#   combine    a split latent attention's chunks merged in the value gemv: its cases, sanitizer, --check, the
#              real-size batch-1 step with the combine a launch and in the gemv
#   partials   the wgmma latent attention's chunks' rows in bf16 (`partials`): cases, sanitizer, a plan --check,
#              bench/attention.py's MLA rows with a bf16 column (carry build/bench-attention-partials-mla)
#   latent-rows  the wgmma latent attention in blocks of fewer query rows (`block_rows`, `latent_cut`): its cases,
#              sanitizer on the real step's cut, the real-size batch-1 plan --check, bench/attention.py's 1k and 4k
#              MLA rows with blocks of 8 and 16 rows (here: python tests/gpu/build.py --only latent_wgmma
#              attention_combine; the bench built with the phase's LANEC_ATTN_* settings; python tests/gpu/plans.py
#              kimi-full-b1-c1k; carry build/gpu, build/plans and the bench's folder; about 2 minutes)
#   tma-table  bench/gemm.py built with LANEC_GEMM_TMA=1: the table's schedules and the defaults with and
#              without TMA loads, the fastest written to $OUT/schedules.json (adopt, rebuild, run the tuned cases)
#   bench-rope       bench/rope.py against transformers' rotate-half in torch
#   bench-seeded     bench/seeded.py against torch.rand filling the same buffer
#   bench-linear     bench/linear_attention.py: the Gated DeltaNet and held-back KDA chains against fla's
#              (carry build/bench-linear and .whl)
#   bench-q8         bench/q8.py: q8_0 GEMVs against our bf16 GEMV and torch (their schedules written to
#              $OUT/logs.tgz's schedules.json), and the quantize epilogue's cost
#              against the same launch without it and the standalone quantize (carry build/bench/q8)
#   q8-tc      q8_gemm_tc (int8 tensor cores): its GPU cases, compute-sanitizer, gemm_tc's mma.sync cases and
#              bench/q8.py's batched set (LANEC_Q8_SET=tc; carry build/gpu and build/bench/q8-tc)
#   tp         tensor parallel on 2 GPUs: tests/gpu/test_tp_nccl.py with NCCL and the one-shot all-reduce,
#              then bench/tp.py (carry .whl-tp; build the TP plans with tests/gpu/plans.py first)
#   pending    what the last session wrote and could not run on a GPU (the comment at the phase loop names it)
#   queue-12   the eleventh session's queue, run in the twelfth (fold-gate at 4 and 8 requests, argmax's cluster)
#   pending-gqa-tiles  GQA's tile and stages for 3 CTAs an SM, against the default (bench/attention.py, GQA rows)
#   q8-rows    q8_gemv's 4 rows a CTA at one step of 9 warps: cases, sanitizer, kimi-b3-q8, the floor set
#   pending-early  the per-row mixture's early down rows (MIXTURE_DOWN_EARLY_ROWS): cases, sanitizer, b1 A/B
#   floor      the launch floor: bf16 gemv, q8_gemv and torch at one row fitted to t = floor + bytes / rate
#   fold-router  fold-norm-into-router: the router's norm cases, compute-sanitizer on one, plans --check
#   pending-ab the step after a change: step_chain --rounds 3 on the KDA-only steps, bench/model.py at 1k, b1 / 8 / 64
#   cluster-combine  split GQA chunks of few CTAs combined in their cluster: cases, sanitizer, dense plans, A/B
#   embed-norm the step's embed folded into its first norm: cases, sanitizer, plans, the step A/B
#   sum-norm   the grouped mixture's sum in the next rmsnorm: cases, sanitizer, grouped plans, real b64 A/B
#   ncu        Nsight Compute of the kernels bench/ncu.py builds: CSVs and their summary (carry build/ncu)
#   pages      GQA's chunk page-table entries staged in shared memory: every GQA attention and combine case (stop
#              at a failure or a hang), compute-sanitizer on one, the GQA rows against the build without it, 2 rounds
#   latent-cluster the wgmma latent attention's chunks merged in its cluster: cases, sanitizer, real b1 check, A/B
#   attn-diet  the wgmma latent attention's tile loop without checks on whole cache tiles, rescaled only where a
#              max moved; attention_combine's lanes a chunk: every attention case, sanitizer, the attention
#              plans --check
#   attn-diet-ab  the same: bench/attention.py against the build without it (build/bench-attention-old)
#   attn-diet-real  the same: the real-size steps at 16k and 1k keys --check and against their -old plans
#   attn-quant the attention's cluster merge writing the quantized form: cases, sanitizer, q8_0 dense plans, A/B
#   rope-pair  q's and k's ropes in one launch: the rope cases, compute-sanitizer, the dense plans, the step A/B
#   fold-gate  fold-gate-product's GPU checks: KdaSplit's folded cases, compute-sanitizer, the --fold-gate plans
#   stream     gemm_tc stream-K: its cases twice a launch, compute-sanitizer, bench/gemm.py's stream set
#   segments   the router writing the grouped path's segments: its cases, compute-sanitizer, the batch-8 A/B
#   pending-bench   the rest of it: checks and benchmarks at real size
#   steps      bench/step_chain.py --rounds 3 on the KDA-only steps (issue 12's medians) and bench/model.py at
#              real size, batch 8, 64 and 256 (after a table or a kernel default changes)
#   profiles   `lanec run --profile` of the real-size batch-64 and batch-256 steps (their traces in $OUT/logs.tgz)
#   tp-model   bench/tp.py --model: the real-size models at TP 2 (each rank's weights seeded on its GPU)
#   bench-model      bench/model.py on every GPU: the real-size model against the per-op chain
#              (carry build/plans, .anchors and .whl; about 1.5 minutes a row)
#   real       the whole Kimi-Linear-48B-A3B at real size (tests/gpu/plans.py REAL_PLANS) with
#              --gpu-seeding: --check at batch 1, 64 and 3 speculative tokens at 8, then the b1 and
#              b64 profiles with their traces (in $OUT/logs.tgz; on the H200: b1 44 s, b64 167-240 s alone,
#              spec3-b8 363 s beside two others; carry .whl for threadpoolctl, or BLAS threads
#              oversubscribe the interpreter's expert threads and b64 runs past 400 s)
# Copy schedules.json (in $OUT/logs.tgz) to lanec/codegen/schedules.json after kda / gemv, rebuild here, and run
# `check` again: the tuned cases test every table entry.
set -uo pipefail
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# on the device machine only a few files come back from $OUT: the logs go to a folder of their own,
# packed into $OUT/logs.tgz when the session ends (and every minute, in case the command is killed)
if [ -n "${OUT:-}" ]; then
  logs=$(mktemp -d /tmp/lanec-logs.XXXX)
  pack() { tar -czf "$OUT/logs.tgz" -C "$logs" . 2>/dev/null; }
  ( while sleep 60; do pack; done ) &
  packer=$!
  trap 'kill $packer 2>/dev/null; pack' EXIT
else
  logs=build/logs
fi
mkdir -p "$logs"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
# one case of each kernel for compute-sanitizer (the sanitize phase)
SANITIZE=("attention and b4_t4_h8_kv2_d128_p32_s3" "latent_attention and b5_t2_h16_l512_r64_p32"
          "combine_matches and r64_h8_d64_s2" "gemm_tc- and r100_k2304_merged_pitch"
          "gemm_wgmma- and r100_k2304_merged_pitch" "gated_r100_k1000_h192_k4" "n6145_bf16"
          "expanded_latent and b5_t2_h4_n40" "b7_t3_c1000_w3_bias" "b3_t4_h5_k64_v64_key"
          "gated_swish_r5_h3_s200_pitched" "softplus_r7_h64_s1_pitched" "r5_h3_u20_o3_l7" "rope and r3_h3_u80_rot20"
          "grouped and b64_e8_k2_sigmoid_odd_apart" "quantize and r3_k96_w1" "q8_gemv_matches and r3_k96_n37_w2"
          "q8_gated_gemv_matches and r3_k96_h37_w1" "gemv-r3_norm_k1000_n1001"
          "attention_matches and attention-b4_t4_h8_kv2_d128_p32_s3_bulk" "latent_attention-b5_t2_h16_l512_r64_p32_bulk"
          "attention_matches and attention-b4_t4_h8_kv2_d128_p32_s3_cluster"
          "latent_attention-b2_t4_h32_l512_nope_p16_s3_cluster"
          "epilogue_matches and rmsnorm-r3_w4096_residual_q2" "epilogue_matches and elementwise-swiglu_r3_w2368_q2"
          "epilogue_matches and head_norm-gated_sigmoid_r3_h16_s128_q2" "epilogue_matches and gated_gemv-r1_k2304_h1024_q1"
          "gemm_wgmma-tma_r100_k1000_n320_b32_k2" "gemm_wgmma-producer_r100_k1000_n320_b32_k2"
          "gemm_wgmma-multicast2_r100_k1000_n320_b32"
          "gemm_wgmma-blocks_r100_k1000_n320_b32_k2"
          "latent_wgmma-b2_t4_h32_l512_nope_p16_s3"
          ${LANEC_SANITIZE_MORE:-})
# LANEC_SANITIZE="expr;expr" replaces the list (one run on just the kernels that changed)
[ -n "${LANEC_SANITIZE:-}" ] && IFS=';' read -r -a SANITIZE <<< "$LANEC_SANITIZE"
SANITIZE_FILES=(tests/gpu/test_attention.py tests/gpu/test_latent_expanded.py tests/gpu/test_mixture.py
                tests/gpu/test_gemm_tc.py tests/gpu/test_seeded.py tests/gpu/test_conv.py tests/gpu/test_delta_rule.py
                tests/gpu/test_kernels.py tests/gpu/test_mixture_grouped.py tests/gpu/test_quantize.py
                tests/gpu/test_q8_gemv.py)
# compute-sanitizer memcheck and racecheck on the tests of FILE that -k EXPR selects, each within SECONDS,
# their summaries appended to $logs/LOG; returns 1 where a tool failed (callers that care: `|| status=1`)
sanitize_case() {
  local file=$1 expr=$2 log=$3 seconds=${4:-60} failed=0
  for tool in memcheck racecheck; do
    timeout "$seconds" compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m pytest "$file" -q -k "$expr" \
      2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" | tee -a "$logs/$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || failed=1
  done
  return $failed
}
# the gemv and gated_gemv cases (the norm prologue's among them), then compute-sanitizer on Kimi Linear's norm case,
# logged to $logs/NAME.log (phases norm-late, norm-fold)
gemv_norm_cases() {
  local name=$1
  timeout 200 python3 -m pytest tests/gpu/test_kernels.py -q -rfE --tb=line -k "gemv" 2>&1 | tail -14 \
    | tee "$logs/$name.log"
  cases_passed "$name" || return 1
  sanitize_case tests/gpu/test_kernels.py "gemv-r1_norm_kda_parts" "$name.log" 120
}
# every grouped mixture case (tests/gpu/test_mixture_grouped.py, SECONDS at most), logged to $logs/NAME.log, then
# compute-sanitizer on each case the remaining arguments name (pytest -k expressions after "matches and "); returns 1
# where the cases failed or hung (the phase stops: `grouped_cases NAME SECONDS CASE... || { status=1; continue; }`)
# or a tool failed
grouped_cases() {
  local name=$1 seconds=$2 case failed=0
  shift 2
  timeout "$seconds" python3 -m pytest tests/gpu/test_mixture_grouped.py -q -rfE --tb=line 2>&1 | tail -4 \
    | tee "$logs/$name.log"
  cases_passed "$name" || return 1
  for case in "$@"; do
    sanitize_case tests/gpu/test_mixture_grouped.py "matches and $case" "$name.log" 90 || failed=1
  done
  return $failed
}
# whether the cases whose summary is in $logs/NAME.log passed (none failed, none hung); if not it says so there,
# and the phase stops: `cases_passed NAME || { status=1; continue; }`
cases_passed() {
  local name=$1
  if ! grep -q " passed" "$logs/$name.log" || grep -q "failed\|error" "$logs/$name.log"; then
    echo "$name: the cases failed or hung; stopping" | tee -a "$logs/$name.log"
    return 1
  fi
}
# ROUNDS rounds of each PLAN's real-size step (bench/model.py --side lanec), interleaved, logged to $logs/NAME.log
step_rounds() {
  local name=$1 rounds=$2 round plan
  shift 2
  for round in $(seq "$rounds"); do
    for plan in "$@"; do
      echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec "$plan" 2>&1 | tail -1)" \
        | tee -a "$logs/$name.log"
    done
  done
}
# a kernel change's A/B, logged to $logs/NAME.log: its GPU cases (pytest FILE, -k EXPR where EXPR is not empty),
# compute-sanitizer on CASE (SECONDS a tool), then ROUNDS rounds of the PLANs; returns 1 where the cases fail
kernel_ab() {
  local name=$1 file=$2 expr=$3 case=$4 seconds=$5 rounds=$6
  shift 6
  timeout 200 python3 -m pytest "$file" -q -rfE --tb=line ${expr:+-k "$expr"} 2>&1 | tail -4 | tee "$logs/$name.log"
  cases_passed "$name" || return 1
  sanitize_case "$file" "$case" "$name.log" "$seconds"
  step_rounds "$name" "$rounds" "$@"
}
# each PLAN's --check with weights seeded on the GPU, SECONDS at most each, logged to $logs/NAME.log
checked_plans() {
  local name=$1 seconds=$2 plan
  shift 2
  for plan in "$@"; do
    echo "$plan: $(timeout "$seconds" python3 -m lanec.runtime "$plan" --check --gpu-seeding 2>&1 | tail -1)" \
      | tee -a "$logs/$name.log"
  done
}
# run a command on the build without a change: FOLDER-old (built without it) takes FOLDER's place for the command,
# then both go back (phases attn-diet-ab, pages)
on_old() {
  local folder=$1
  shift
  mv "$folder" "$folder-new" && mv "$folder-old" "$folder"
  "$@"
  local rc=$?
  mv "$folder" "$folder-old" && mv "$folder-new" "$folder"
  return $rc
}
# the dense step before and after a lowering change (phases rope-pair, cluster-combine): plans NAME --check, then
# bench/q8_step.py on dense-small and dense-small-q8 built without the change (`-SUFFIX`) and with it
dense_ab() {
  local name=$1 suffix=$2
  shift 2
  for plan in "$@"; do
    echo "$plan: $(timeout 120 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
      | tee -a "$logs/$name.log"
  done
  timeout 200 python3 bench/q8_step.py "build/plans/dense-small-$suffix.plan" build/plans/dense-small.plan \
    "build/plans/dense-small-q8-$suffix.plan" build/plans/dense-small-q8.plan --steps 300 2>&1 \
    | tee -a "$logs/$name.log" || status=1
}
# a real-size plan's check and A/B (phases sum-norm, latent-cluster): build/plans/PLAN --check with GPU seeding,
# then bench/model.py's lanec side on the plan without the change (WITHOUT) and PLAN, two rounds interleaved;
# the log is $logs/NAME.log
real_ab() {
  local name=$1 plan=$2 without=$3
  shift 3  # more plans after WITHOUT: timed in the same rounds, not checked
  echo "$plan: $(timeout 200 python3 -m lanec.runtime "build/plans/$plan.plan" --check --gpu-seeding 2>&1 \
    | tail -1)" | tee -a "$logs/$name.log"
  for round in 1 2; do
    for each in "$without" "$plan" "$@"; do
      echo "round $round $each: $(timeout 150 python3 bench/model.py --side lanec "build/plans/$each.plan" 2>&1 \
        | tail -1)" | tee -a "$logs/$name.log"
    done
  done
}
# a fold's GPU checks (phases fold-gate, fold-router): its kernel's cases (a test file), compute-sanitizer on
# one (a -k expression), then the plans named after them --check; the log is $logs/NAME.log
fold_checks() {
  local name=$1 file=$2 case=$3
  shift 3
  timeout 200 python3 -m pytest "$file" -q -rfE 2>&1 | tail -5 | tee "$logs/$name.log" || status=1
  sanitize_case "$file" "$case" "$name.log" 90
  for plan in "$@"; do
    echo "$plan: $(timeout 200 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
      | tee -a "$logs/$name.log"
  done
}
status=0
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(check)
for phase in "${phases[@]}"; do
  # `pending`, the last session's queue: the nineteenth session's `release` (each launch's release point by what
  # follows it, RELEASE_RULE; its build recipe is in the phase's comment; `release-real` after it)
  [ "$phase" = pending ] && phase=release
  echo "== phase $phase"
  case $phase in
    check)
      python3 -m pytest tests/gpu -q -rfE --durations=5 --ignore=tests/gpu/test_plans.py 2>&1 \
        | tee "$logs/check.log" || status=1 ;;
    plans)
      python3 -m pytest tests/gpu/test_plans.py -q -rfE --durations=0 ${LANEC_PLANS:+-k "$LANEC_PLANS"} 2>&1 \
        | tee "$logs/plans.log" || status=1 ;;
    grid[123])
      LANEC_KDA_CASES=full LANEC_KDA_SHARD=${phase#grid}/3 python3 -m pytest tests/gpu/test_kda_split.py \
        -q -rfE 2>&1 | tee "$logs/$phase.log" || status=1 ;;
    time)
      for plan in build/plans/*.plan; do
        echo "== $plan"
        python3 -m lanec.runtime "$plan" --steps 20 2>&1 | tail -1
      done | tee "$logs/time.log"
      python3 bench/plan_step.py build/plans/dense-small.plan 2>&1 | tee "$logs/plan_step.log"
      if python3 -c "import fla" 2>/dev/null; then  # the whole step against the per-op chain
        python3 bench/step_chain.py build/plans/dense-small.plan build/plans/kimi-kda-*.plan 2>&1 \
          | tee "$logs/step_chain.log"
      fi ;;
    kda)
      if python3 -c "import fla" 2>/dev/null; then
        python3 bench/kda.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/kda.log"
      else
        echo "kda: fla is not importable (carry .whl/: pip download --no-deps fla-core==0.6.0 einops -d .whl)"
        status=1
      fi ;;
    attention)
      python3 -m pytest tests/gpu/test_attention.py "tests/gpu/test_plans.py" -k "attention or combine or dense or mla" \
        -q -rfE 2>&1 | tee "$logs/attention.log" || status=1 ;;
    sanitize)
      for case in "${SANITIZE[@]}"; do
        for tool in memcheck racecheck; do
          echo "== $tool: $case"
          compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m pytest \
            "${SANITIZE_FILES[@]}" -q -k "$case" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|Error" \
            | tee -a "$logs/sanitize.log"
          [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
        done
      done ;;
    bench-attention)
      python3 bench/attention.py 2>&1 | tee "$logs/bench-attention.log" || status=1 ;;
    bench-cluster)
      LANEC_ATTN_CLUSTER=1 python3 bench/attention.py 2>&1 | tee "$logs/bench-cluster.log" || status=1 ;;
    bench-mixture)
      python3 bench/mixture.py 2>&1 | tee "$logs/bench-mixture.log" || status=1 ;;
    bench-linear)
      python3 bench/linear_attention.py 2>&1 | tee "$logs/bench-linear.log" || status=1 ;;
    tp)
      # two GPUs or more (nvidia-h200-x2): every TP plan with NCCL and with the one-shot all-reduce, --check and
      # timed, then bench/tp.py (carry .whl-tp too: nccl4py; about 4 minutes on 2 x H200)
      if ls .whl-tp/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl-tp/*.whl
      fi
      NCCL_NVLS_ENABLE=0 python3 -m pytest tests/gpu/test_tp_nccl.py -q -rfE 2>&1 | tee "$logs/tp.log" || status=1
      NCCL_NVLS_ENABLE=0 python3 bench/tp.py 2>&1 | tee "$logs/bench-tp.log" || status=1 ;;
    sum-norm)
      # the grouped mixture's mixture_sum in the rmsnorm after it (MIXTURE_SUM_IN_NORM, RmsNorm `slots`): the
      # rmsnorm cases, compute-sanitizer on the slots one, the grouped plans --check (the real-size batch 64 too)
      # and that step against the plan without it, two rounds (here: python tests/gpu/build.py --only rmsnorm;
      # python tests/gpu/plans.py kimi-b64 kimi-moe-grouped-b64 kimi-full-b64-c1k; the -sum plan compiled from
      # build/plans/kimi-full-b64-c1k.mlir with lanec.codegen.lower.MIXTURE_SUM_IN_NORM = False)
      timeout 100 python3 -m pytest tests/gpu/test_kernels.py -q -rfE -k "rmsnorm" 2>&1 | tail -3 \
        | tee "$logs/sum-norm.log" || status=1
      sanitize_case tests/gpu/test_kernels.py "r64_w2304_residual_slots9" sum-norm.log 90
      for plan in kimi-b64 kimi-moe-grouped-b64; do
        echo "$plan: $(timeout 150 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
          | tee -a "$logs/sum-norm.log"
      done
      real_ab sum-norm kimi-full-b64-c1k kimi-full-b64-c1k-sum ;;
    attn-diet)
      # the wgmma latent attention's unchecked path of whole cache tiles, with every attention kernel's cases (here:
      # python tests/gpu/build.py --only attention latent_attention latent_wgmma expanded_attention latent_expand
      # attention_combine; python tests/gpu/plans.py dense-small kimi-mla-b3 kimi-mla-spec4-b8 deepseek-v3-b2
      # llama-3.1-8b-b3 qwen-next-b1)
      timeout 300 python3 -m pytest tests/gpu/test_attention.py tests/gpu/test_latent_expanded.py -q -rfE 2>&1 \
        | tail -4 | tee "$logs/attn-diet.log" || status=1
      sanitize_case tests/gpu/test_attention.py "attention_matches and b4_t4_h8_kv2_d128_p32_s3" attn-diet.log 120
      sanitize_case tests/gpu/test_attention.py "latent_wgmma-b2_t4_h32_l512_nope_p16_s3" attn-diet.log 120
      sanitize_case tests/gpu/test_attention.py "combine_matches and r64_h8_d64_s2" attn-diet.log 120
      sanitize_case tests/gpu/test_attention.py "combine_matches and s64" attn-diet.log 120
      for plan in dense-small kimi-mla-b3 kimi-mla-spec4-b8 deepseek-v3-b2 llama-3.1-8b-b3 qwen-next-b1; do
        echo "$plan: $(timeout 120 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
          | tee -a "$logs/attn-diet.log"
      done ;;
    attn-diet-ab)
      # the same change timed: bench/attention.py on this build and on the one without it (here: python
      # bench/attention.py build, once without the change moved to build/bench-attention-old), then the real-size
      # steps against their -old plans (python tests/gpu/plans.py kimi-full-b1-c16k kimi-full-b8-c16k
      # kimi-full-b1-c1k, once without the change, renamed -old)
      timeout 240 python3 bench/attention.py 2>&1 | tee "$logs/attn-diet-ab.log" || status=1
      on_old build/bench-attention bash -o pipefail -c \
        "timeout 240 python3 bench/attention.py 2>&1 | tee -a $logs/attn-diet-ab.log" || status=1 ;;
    attn-diet-real)
      # the real-size steps (MLA layers at 16k and 1k keys) --check, and against their -old plans, two rounds (here:
      # python tests/gpu/plans.py kimi-full-b1-c16k kimi-full-b8-c16k kimi-full-b1-c1k, once without the change,
      # renamed -old)
      for plan in kimi-full-b1-c16k kimi-full-b8-c16k kimi-full-b1-c1k; do
        real_ab attn-diet-real "$plan" "$plan-old"
      done ;;
    pages)
      # GQA's page-table entries of a chunk staged in shared memory (Attention.stage_pages): every GQA attention
      # and combine case (stop at a failure or a hang: 240 s), compute-sanitizer on a staged one, then
      # bench/attention.py's GQA rows, the build without it (build/bench-attention-gqa-old) and with it, two
      # rounds (here: python tests/gpu/build.py --only attention attention_combine; LANEC_ATTN_KINDS=gqa python
      # bench/attention.py build, once without the change renamed -old; carry build/gpu and both folders)
      timeout 240 python3 -m pytest tests/gpu/test_attention.py -q -rfE -x -k "attention and not latent" 2>&1 \
        | tail -4 | tee "$logs/pages.log"
      cases_passed pages || { status=1; continue; }
      sanitize_case tests/gpu/test_attention.py "attention-b1_t2_h128_kv8_d128_p32_32k_s32]" pages.log 90
      gqa_rows="LANEC_ATTN_KINDS=gqa timeout 150 python3 bench/attention.py 2>&1 | grep '^| GQA' \
        | tee -a $logs/pages.log"
      for round in 1 2; do
        echo "== round $round, old" | tee -a "$logs/pages.log"
        on_old build/bench-attention-gqa bash -o pipefail -c "$gqa_rows" || status=1
        echo "== round $round, new" | tee -a "$logs/pages.log"
        bash -o pipefail -c "$gqa_rows" || status=1
      done ;;
    ncu)
      # Nsight Compute of each kernel bench/ncu.py builds (here: python bench/ncu.py build; carry build/ncu): the
      # second of two eager launches, `--set full`, its details and SASS pages as CSV in $logs/ncu, then their
      # summary (about 40 s a kernel)
      mkdir -p "$logs/ncu" /tmp/ncu-reports
      for name in $(python3 bench/ncu.py list); do
        nvdisasm -c -g "build/ncu/$name.cubin" > "$logs/ncu/$name.sass" 2>&1 || true
        timeout 120 ncu --set full --import-source yes --clock-control none ${NCU_SAMPLING:-} -k regex:kernel_cutlass \
          --launch-skip 1 --launch-count 1 -f -o "/tmp/ncu-reports/$name" python3 bench/ncu.py "$name" 2>&1 \
          | tail -1 || status=1
        ncu -i "/tmp/ncu-reports/$name.ncu-rep" --page details --csv > "$logs/ncu/$name.details.csv" 2>&1
        ncu -i "/tmp/ncu-reports/$name.ncu-rep" --page source --csv --print-source sass \
          > "$logs/ncu/$name.sass.csv" 2>&1
      done
      python3 bench/ncu.py summarize "$logs/ncu" | tee "$logs/ncu.log" ;;
    router-push)
      # the router's scores sent to its cluster's first CTA by st.async on a barrier (no cluster barrier after the
      # products), one division a choosing lane, rows_dots without its past-the-row vectors: the mixture cases,
      # compute-sanitizer on the fused router with its norm, bench/router_chain.py (the committed router's cubin as
      # before_whole), then three rounds of the real-size batch-1 step, before (build/ab3/base.plan, the plan of the
      # commit before) and after (the plan itself). Here: python tests/gpu/build.py --only mixture_router
      # mixture_gated mixture_down mixture_grouped_gated mixture_grouped_down mixture_groups; python
      # bench/router_chain.py build; python tests/gpu/plans.py kimi-full-b1-c1k; carry build/gpu, build/plans,
      # build/ab3, build/bench/router_chain, .whl; about 6 minutes. The plans' --check: the phase router-check
      timeout 300 python3 -m pytest tests/gpu/test_mixture.py tests/gpu/test_mixture_grouped.py -q -rfE --tb=line 2>&1 \
        | tail -3 | tee "$logs/router-push.log"
      cases_passed router-push || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "norms_its_rows and b1_e256" router-push.log 120 || status=1
      timeout 120 python3 bench/router_chain.py 2>&1 | tee -a "$logs/router-push.log" || status=1
      for round in 1 2 3; do
        for plan in build/ab3/base.plan build/plans/kimi-full-b1-c1k.plan; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec "$plan" 2>&1 | tail -1)" \
            | tee -a "$logs/router-push.log"
        done
      done ;;
    router-prefetch)
      # the chosen experts' first gate and up rows prefetched into L2 by the router (ROUTER_PREFETCH_ROWS): the
      # router's norm cases (the prefetching ones among them: the first CTA's lanes, and every CTA choosing),
      # compute-sanitizer on Kimi Linear's spread case, two rounds of build/pf's plans (here: tests/gpu/build.py
      # --only mixture_router; tests/gpu/variant_plan.py --fact ROUTER_PREFETCH_ROWS=1 [--fact
      # ROUTER_PREFETCH_BYTES=B] FORM build/pf/NAME.plan, build/pf/base.plan the plan without; carry build/gpu,
      # build/pf, .whl), then --check of PREFETCH_CHECK (about 5 minutes)
      timeout 150 python3 -m pytest tests/gpu/test_mixture.py -q -rfE --tb=line -k "norms_its_rows" 2>&1 \
        | tail -3 | tee "$logs/router-prefetch.log"
      cases_passed router-prefetch || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "norms_its_rows and b1_e256 and spread" router-prefetch.log 120 \
        || status=1
      step_rounds router-prefetch 2 build/pf/*.plan
      checked_plans router-prefetch 150 ${PREFETCH_CHECK:-build/pf/prefetch.plan} ;;
    prefetch-confirm)
      # the router's prefetch again on another machine: three rounds of the real-size batch-1 step without
      # (build/pf/base.plan) and with it (build/pf/prefetch.plan), then --check of the plan with it (carry build/pf,
      # .whl; about 3 minutes)
      step_rounds prefetch-confirm 3 build/pf/base.plan build/pf/prefetch.plan
      checked_plans prefetch-confirm 150 build/pf/prefetch.plan ;;
    kda-step)
      # KdaSplit's schedule at batch 1 in the real-size step, not alone (bench/kda.py's table chose cluster 8, lanes
      # 8, early 1 from chains of KdaSplit launches): build/kv/*.plan, each the batch-1 plan with the table's
      # kda_split entry replaced (here: tests/gpu/variant_plan.py FORM build/kv/NAME.plan kda_split
      # 'batch=1,heads=32,tokens=1' KNOBS, and build/kv/base.plan the plan itself; carry build/kv, .whl). Two rounds
      # of every plan interleaved, then --check of those with another cluster (about 6 minutes)
      step_rounds kda-step 2 build/kv/*.plan
      checked_plans kda-step 150 ${KDA_STEP_CHECK:-build/kv/c16l16.plan build/kv/c4.plan} ;;
    preload)
      # the o_proj after KdaSplit with its 18.9 MB of rows copied into shared memory by one wave of CTAs before its
      # PDL wait (a RowSchedule knob): build/pre/*.plan, base.plan the batch-1 plan, the others variant plans with the
      # table's gemv 'outputs=2304,rows=1,width=4096' entry replaced (here: python tests/gpu/build.py --only gemv
      # gated_gemv; tests/gpu/variant_plan.py FORM build/pre/NAME.plan gemv KEY KNOBS; carry build/gpu, build/pre,
      # .whl). The cases first (the phase stops if they fail), then PRELOAD_ROUNDS rounds, then PRELOAD_CHECK --check
      timeout 200 python3 -m pytest tests/gpu/test_kernels.py tests/gpu/test_quantize.py -q -rfE --tb=line \
        -k "gemv" 2>&1 | tail -6 | tee "$logs/preload.log"
      cases_passed preload || { status=1; continue; }
      sanitize_case tests/gpu/test_kernels.py "gemv-r1_preload_kimi_o_proj" preload.log 120
      step_rounds preload "${PRELOAD_ROUNDS:-2}" build/pre/*.plan
      checked_plans preload 150 ${PRELOAD_CHECK:-build/pre/p8.plan} ;;
    vectors)
      # mixture_gated's and mixture_down's vectors a lane has in flight (MixtureSchedule vectors): fewer registers,
      # more CTAs an SM, fewer waves. build/mv/*.plan: base.plan the batch-1 plan, the others variant plans with a
      # mixture_gated or mixture_down entry (here: python tests/gpu/build.py --only mixture_router mixture_gated
      # mixture_down; tests/gpu/variant_plan.py [--add] FORM build/mv/NAME.plan mixture_gated KEY KNOBS; carry
      # build/gpu, build/mv, .whl). The mixture cases first (the phase stops if they fail), compute-sanitizer on one,
      # then VECTORS_ROUNDS rounds, then VECTORS_CHECK --check
      timeout 300 python3 -m pytest tests/gpu/test_mixture.py -q -rfE --tb=line 2>&1 | tail -6 | tee "$logs/vectors.log"
      timeout 200 python3 -m pytest tests/gpu/test_kda_split.py -q -rfE --tb=line -k "h32_b1 and g128" 2>&1 \
        | tail -3 | tee -a "$logs/vectors.log"  # KdaSplit's gate mode 1 at Kimi Linear's batch 1 (KDA_GATE_MODE)
      cases_passed vectors || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "test_mixture_matches_interpreter and w2304_v8" vectors.log 120
      step_rounds vectors "${VECTORS_ROUNDS:-2}" build/mv/*.plan
      checked_plans vectors 150 ${VECTORS_CHECK:-} ;;
    ready)
      # MIXTURE_READY_FLAG: mixture_gated acquiring the router's flag a row in place of its PDL wait. The real-size
      # batch-1 step first (build/pl/base.plan and build/pl/rf.plan, the latter from tests/gpu/variant_plan.py --fact
      # MIXTURE_READY_FLAG=True; carry build/pl, build/gpu, .whl), READY_ROUNDS rounds; then the pairs' GPU cases,
      # compute-sanitizer on the two-row one and on the real launch pair, and the flagged plan's --check
      step_rounds ready "${READY_ROUNDS:-3}" build/pl/base.plan build/pl/rf.plan
      timeout 240 python3 -m pytest tests/gpu/test_mixture.py -q -k "acquires_the_flag" 2>&1 | tail -3 \
        | tee -a "$logs/ready.log" || status=1
      sanitize_case tests/gpu/test_mixture.py "acquires_the_flag and b2_e64" ready.log 120 || status=1
      sanitize_case tests/gpu/test_mixture.py "acquires_the_flag and w2304" ready.log 240 || status=1
      checked_plans ready 150 build/pl/rf.plan ;;
    grouped)
      # the grouped products' stages of 128 K values and their compact grid (MIXTURE_GROUP_STAGE_K, MIXTURE_GROUP_COMPACT):
      # every grouped case (the new ones among them), compute-sanitizer on the compact 128-K case, then GROUPED_ROUNDS
      # rounds of the real-size steps in build/v31m (here: python tests/gpu/build.py --only mixture_groups
      # mixture_grouped_gated mixture_grouped_down mixture_sum; tests/gpu/variant_plan.py --fact ... FORM
      # build/v31m/NAME.plan; carry build/v31m, build/gpu, .whl)
      grouped_cases grouped 150 b64_e8_k2_sigmoid_odd_apart_k128_compact || { status=1; continue; }
      step_rounds grouped "${GROUPED_ROUNDS:-2}" ${GROUPED_PLANS:-build/v31m/*.plan} ;;
    grouped-adopt)
      # the grouped products' adopted defaults (128 K values a stage below 256 rows, the compact grid from 64): every
      # grouped case, compute-sanitizer on the compact 24-row case, one round of each shape's step before (BASE) and
      # after (NEW: build/v31f/SHAPE-base.plan and SHAPE-new.plan for b8, b256, spec3-b8, b64), the new 24- and
      # 64-row plans' --check, and both against the chain (carry build/v31f, build/plans, build/gpu, .whl, .anchors;
      # 432 s on the H200)
      grouped_cases grouped-adopt 150 b24_e256_k8_sigmoid_correction_shared_compact || { status=1; continue; }
      for shape in b8 b256 spec3-b8 b64; do step_rounds grouped-adopt 1 build/v31f/$shape-base.plan build/v31f/$shape-new.plan; done
      OPENBLAS_NUM_THREADS=1 checked_plans grouped-adopt 230 build/plans/kimi-full-spec3-b8-c1k.plan \
        build/plans/kimi-full-b64-c1k.plan
      timeout 200 python3 bench/model.py build/plans/kimi-full-spec3-b8-c1k.plan build/plans/kimi-full-b64-c1k.plan 2>&1 \
        | tail -4 | tee -a "$logs/grouped-adopt.log" ;;
    swizzle-adopt)
      # the swizzled stage rows adopted (MIXTURE_GROUP_SWIZZLE on): every grouped case at the new defaults, compute-
      # sanitizer on the 24-row case, the 24- and 64-row plans' --check, then the 1k rows against the chain (here:
      # python tests/gpu/build.py --only mixture_groups mixture_grouped_gated mixture_grouped_down mixture_sum;
      # python tests/gpu/plans.py for the kimi-full plans; carry build/gpu, build/plans, .whl, .anchors)
      grouped_cases swizzle-adopt 150 b24_e64_k4_sigmoid_shared_g16 || { status=1; continue; }
      OPENBLAS_NUM_THREADS=1 checked_plans swizzle-adopt 200 build/plans/kimi-full-spec3-b8-c1k.plan \
        build/plans/kimi-full-b64-c1k.plan
      timeout "${ADOPT_CHAIN_S:-250}" python3 bench/model.py ${ADOPT_CHAIN:-build/plans/kimi-full-b8-c1k.plan \
        build/plans/kimi-full-spec3-b8-c1k.plan build/plans/kimi-full-b64-c1k.plan} 2>&1 | tail -6 \
        | tee -a "$logs/swizzle-adopt.log" ;;
    row-blocks)
      # a per-head product's blocks of 32 rows in one gemv launch (GEMV_ROW_BLOCKS_FROM; adopted at 64 after this
      # phase's run in the thirty-fourth session: b256 -437 us, b64 -37): the gemv
      # cases (the four `_rb` ones), compute-sanitizer on Kimi Linear's expansion at 256 rows, then RB_ROUNDS rounds
      # of build/v36's plans (here: b256-base.plan and b64-base.plan copies of build/plans' 1k plans;
      # tests/gpu/variant_plan.py --fact GEMV_ROW_BLOCKS_FROM=64 build/plans/kimi-full-SHAPE-c1k.mlir
      # build/v36/SHAPE-rb.plan; carry build/v36, build/gpu; about 5 minutes at 2 rounds). Then row-blocks-check.
      kernel_ab row-blocks tests/gpu/test_kernels.py gemv "r256_per_head_kimi_expand_rb8" 120 "${RB_ROUNDS:-2}" \
        build/v36/b64-base.plan build/v36/b64-rb.plan build/v36/b256-base.plan build/v36/b256-rb.plan || status=1 ;;
    row-blocks-check)
      # the b256 plan's check takes about 257 s on the H200 (thirty-fourth session): 450 s for it
      OPENBLAS_NUM_THREADS=1 checked_plans row-blocks-check 450 build/v36/b256-rb.plan
      OPENBLAS_NUM_THREADS=1 checked_plans row-blocks-check 200 build/v36/b64-rb.plan ;;
    per-head)
      # a per-head product on gemm_tc's wgmma engine (GEMM_PER_HEAD_FROM, off when built): the per-head gemm cases (six
      # new), compute-sanitizer on Kimi Linear's absorbed query at 64 rows, then PH_ROUNDS rounds of build/v37's plans
      # (here: b64-base.plan and b256-base.plan copies of build/plans' 1k plans; tests/gpu/variant_plan.py --fact
      # GEMM_PER_HEAD_FROM=64 build/plans/kimi-full-SHAPE-c1k.mlir build/v37/SHAPE-ph.plan; carry build/v37,
      # build/gpu; about 5 minutes at 2 rounds). Then per-head-check.
      kernel_ab per-head tests/gpu/test_gemm_tc.py per_head "per_head_r64_kimi_absorb" 150 "${PH_ROUNDS:-2}" \
        build/v37/b64-base.plan build/v37/b64-ph.plan build/v37/b256-base.plan build/v37/b256-ph.plan || status=1 ;;
    groups-match)
      # mixture_groups' ranks by one match.any a step in place of 32 shuffles (the router's segments walk the same
      # code): the grouped mixture's cases (their segments compared exactly) and the router's segments, compute-
      # sanitizer on the 256-row spread case (2 steps a warp), GM_ROUNDS rounds of build/v38's plans (b64-base and
      # b256-base: the plans before; b64-match and b256-match: after), then the b64 plan's --check (carry build/v38,
      # build/gpu, .whl; about 8 minutes)
      if kernel_ab groups-match tests/gpu/test_mixture_grouped.py "" \
          "test_mixture_grouped_matches_interpreter and b256_e256_k8_sigmoid_correction_shared_spread" 150 \
          "${GM_ROUNDS:-2}" build/v38/b64-base.plan build/v38/b64-match.plan build/v38/b256-base.plan \
          build/v38/b256-match.plan; then
        OPENBLAS_NUM_THREADS=1 checked_plans groups-match 200 build/v38/b64-match.plan
      else
        status=1
      fi ;;
    per-head-check)
      # the b256 plan's check takes about 257 s on the H200
      OPENBLAS_NUM_THREADS=1 checked_plans per-head-check 200 build/v37/b64-ph.plan
      OPENBLAS_NUM_THREADS=1 checked_plans per-head-check 450 build/v37/b256-ph.plan ;;
    ew-sweep)
      # mixture_down's early weights (adopted at one row) with more of a warp's row in its first chunk (refuted in
      # the thirty-fourth session: u3v12, u4, u6v24 and u8 each +37 to +62 us over the adopted plan): the `_ew`
      # mixture cases, compute-sanitizer on the whole-row case (6 units at 24 vectors), then EW_ROUNDS rounds of
      # build/v35's plans (here: build/v35/base.plan a copy of build/plans/kimi-full-b1-c1k.plan; tests/gpu/variant_plan.py
      # build/plans/kimi-full-b1-c1k.mlir build/v35/ew-TAG.plan mixture_down
      # 'experts=256,hidden=1024,rows=1,shared_hidden=1024,top_k=8,width=2304' '{"schedule": {"units": 4}}' and the
      # like for u4, u6v24, u8 and u3v12; carry build/v35, build/gpu; about 4 minutes at 2 rounds)
      timeout 150 python3 -m pytest tests/gpu/test_mixture.py -q -rfE --tb=line -k "_ew" 2>&1 | tail -4 \
        | tee "$logs/ew-sweep.log"
      cases_passed ew-sweep || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "test_mixture_matches_interpreter and w2304_u6v24_ew" ew-sweep.log 120
      step_rounds ew-sweep "${EW_ROUNDS:-2}" build/v35/*.plan ;;
    early-weights)
      # mixture_down's first chunk of rows before its PDL wait (MIXTURE_DOWN_EARLY_WEIGHTS_ROWS, off when measured):
      # the mixture cases with it and the driver's L2-window case, compute-sanitizer on the batch-1 pair's case, then
      # EW_ROUNDS rounds of build/v34's plans (here: tests/gpu/variant_plan.py --fact MIXTURE_DOWN_EARLY_WEIGHTS_ROWS=1
      # build/plans/kimi-full-b1-c1k.mlir build/v34/ew.plan beside base.plan, a copy of build/plans'), and the
      # ew plan's --check (carry build/v34, build/gpu; about 5 minutes)
      timeout 150 python3 -m pytest tests/gpu/test_mixture.py tests/gpu/test_driver.py -q -rfE --tb=line \
        -k "_ew or l2_windows" 2>&1 | tail -4 | tee "$logs/early-weights.log"
      cases_passed early-weights || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "test_mixture_matches_interpreter and w2304_v12_ew" early-weights.log 120
      step_rounds early-weights "${EW_ROUNDS:-3}" build/v34/base.plan build/v34/ew.plan
      OPENBLAS_NUM_THREADS=1 checked_plans early-weights 150 build/v34/ew.plan ;;
    l2-states)
      # the states' lines persisting in L2 (LANEC_L2_STATES, runner.l2_windows): the GPU's set-aside, L2_ROUNDS rounds
      # of the real-size batch-1 step with each setting interleaved, then the batch-1 plan's --check under `auto`
      # (carry build/plans)
      python3 -c "from lanec.runtime import driver; d = driver.Device(); print(d, 'persisting L2 most, widest window:',
        d.persisting_l2_max())" 2>&1 | tee -a "$logs/l2-states.log"
      for round in $(seq "${L2_ROUNDS:-2}"); do
        for setting in ${L2_SETTINGS:-off auto 0.5}; do
          echo "round $round $setting: $(LANEC_L2_STATES=$setting timeout 100 python3 bench/model.py --side lanec \
            build/plans/kimi-full-b1-c1k.plan 2>&1 | tail -1)" | tee -a "$logs/l2-states.log"
        done
      done
      LANEC_L2_STATES=auto OPENBLAS_NUM_THREADS=1 checked_plans l2-states 150 build/plans/kimi-full-b1-c1k.plan ;;
    spread-adopt)
      # `spread` adopted from 256 rows: every grouped case at the new defaults (the 256-row ones spread), compute-
      # sanitizer on the default Kimi routing at 256 rows, the batch-256 1k plan's --check, the 256-row rows against
      # the chain (carry build/gpu, build/plans, .whl, .anchors)
      grouped_cases spread-adopt 150 b256_e256_k8_sigmoid_correction_shared_spread || { status=1; continue; }
      OPENBLAS_NUM_THREADS=1 checked_plans spread-adopt 300 build/plans/kimi-full-b256-c1k.plan
      timeout 200 python3 bench/model.py build/plans/kimi-full-b256-c1k.plan build/plans/kimi-full-b256-c16k.plan \
        2>&1 | tail -3 | tee -a "$logs/spread-adopt.log" ;;
    spread)
      # each block of a segment in a CTA of its own (MIXTURE_GROUP_SPREAD_ROWS, off when measured): every grouped case,
      # compute-sanitizer on the skewed 64-row case, then SPREAD_ROUNDS rounds of build/v33's plans (here: python
      # tests/gpu/build.py --only mixture_groups mixture_grouped_gated mixture_grouped_down mixture_sum;
      # tests/gpu/variant_plan.py --fact MIXTURE_GROUP_SPREAD_ROWS=ROWS build/plans/kimi-full-SHAPE-c1k.mlir
      # build/v33/SHAPE-spread.plan beside SHAPE-base.plan, a copy of build/plans' for b256 and b64; carry build/v33,
      # build/gpu, .whl; about 4 minutes)
      grouped_cases spread 150 b64_e128_k8_sigmoid_correction_same_shared_spread || { status=1; continue; }
      step_rounds spread "${SPREAD_ROUNDS:-1}" ${SPREAD_PLANS:-build/v33/*.plan} ;;
    swizzle)
      # the grouped products' stage rows swizzled (MIXTURE_GROUP_SWIZZLE: a third stage of 128 K values, or a sixth of
      # 64, beside a second CTA an SM): every grouped case (3 swizzled ones), compute-sanitizer on the swizzled 24-row
      # case, then SWIZZLE_ROUNDS rounds of build/v32's plans (here: python tests/gpu/build.py --only mixture_groups
      # mixture_grouped_gated mixture_grouped_down mixture_sum; tests/gpu/variant_plan.py --fact MIXTURE_GROUP_SWIZZLE=True
      # FORM build/v32/SHAPE-swz.plan beside SHAPE-base.plan for spec3-b8, b64 and b256, and b256-swz128 with
      # MIXTURE_GROUP_WIDE_BELOW=512 too; the grouped down CTAs of 64 outputs (MIXTURE_DOWN_TILE=64: SHAPE-d64, and
      # spec3-b8-swz-d64 with both); carry build/v32, build/gpu, .whl). One round of the 11 plans is about 4 minutes
      # (the batch-256 plans 35 s each)
      grouped_cases swizzle 150 b24_e256_k8_sigmoid_correction_shared_swizzled \
        b24_e256_k8_sigmoid_correction_shared_down64 || { status=1; continue; }
      step_rounds swizzle "${SWIZZLE_ROUNDS:-1}" ${SWIZZLE_PLANS:-build/v32/*.plan} ;;
    inflight)
      # the next loads-in-flight question (bench/RESULTS.md, twenty-ninth session, "What is in view"): the merged KDA
      # product's gemv at 9 and 4 warps, mixture_down at 4 units x 8 vectors and 8 x 16, against the batch-1 plan:
      # build/next/*.plan (here: tests/gpu/variant_plan.py [--add] FORM build/next/NAME.plan gemv
      # 'norm=1,outputs=12576,rows=1,width=2304' '{"warps": 9}' and the like; carry build/next, .whl). INFLIGHT_ROUNDS
      # rounds, then INFLIGHT_CHECK --check (the plan a table entry would adopt; its kernels' GPU cases first)
      step_rounds inflight "${INFLIGHT_ROUNDS:-3}" build/next/*.plan
      checked_plans inflight 150 ${INFLIGHT_CHECK:-} ;;
    review-ncu)
      # the twenty-fifth session's review (warp_normed_row's weights by norm_weight_vectors) re-run: the early-shared
      # and rider cases, compute-sanitizer on the shared warp's case, the real-size batch-1 plan --check. Run it with the
      # phase ncu after it, NCU_SAMPLING="--warp-sampling-interval 0": the plan's own kernels, sampled every 32 cycles (here: python
      # tests/gpu/build.py --only mixture_gated gemv; python tests/gpu/plans.py kimi-full-b1-c1k; python
      # bench/ncu.py build --plan build/plans/kimi-full-b1-c1k.plan KIND...; carry build/gpu, build/plans,
      # build/ncu, .whl; about 8 minutes). Each profiled kernel's SASS (nvdisasm) is in $logs/ncu too
      timeout 200 python3 -m pytest tests/gpu/test_mixture.py tests/gpu/test_kernels.py -q -rfE --tb=line \
        -k "before_the_wait or rider" 2>&1 | tail -4 | tee "$logs/review-ncu.log"
      cases_passed review-ncu || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "b1_e256_k8_w2304_shared_u2_first100" review-ncu.log 120 || status=1
      echo "kimi-full-b1-c1k: $(timeout 150 python3 -m lanec.runtime build/plans/kimi-full-b1-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/review-ncu.log" ;;
    latent-cluster)
      # the wgmma latent attention's chunks merged in its own cluster (LATENT_CLUSTER_COMBINE_CTAS): its cases,
      # compute-sanitizer on the two-warpgroup one, the real-size batch-1 step --check at 1k keys (the one plan
      # that takes it) and its step against the plan without it, two rounds (here: python tests/gpu/build.py
      # --only latent_wgmma attention_combine; python tests/gpu/plans.py kimi-full-b1-c1k; the -apart plan
      # compiled from build/plans/kimi-full-b1-c1k.mlir with lanec.shim.LATENT_CLUSTER_COMBINE_CTAS = 0)
      timeout 200 python3 -m pytest tests/gpu/test_attention.py -q -rfE -k "latent_wgmma" 2>&1 | tail -3 \
        | tee "$logs/latent-cluster.log" || status=1
      sanitize_case tests/gpu/test_attention.py "b1_t1_h128_l512_r64_p64_s8_cluster" latent-cluster.log 150
      real_ab latent-cluster kimi-full-b1-c1k kimi-full-b1-c1k-apart ;;
    attn-quant)
      # the attention's cluster merge writing the quantized form (fuse-quant's epilogue; hold-quantized-activation
      # takes it where the chunks merge in the cluster): its cases, compute-sanitizer on the odd-share one, the
      # q8_0 dense plans --check, and the step against the plan with the standalone quantize (here: python
      # tests/gpu/build.py --only attention attention_combine; python tests/gpu/plans.py dense-small dense-small-q8
      # dense-small-q8-w2-fused dense-small-q8-unfused; and build/plans/dense-small-q8-noattnq.plan compiled with
      # the rule's attention check failing: tests/gpu/attn_quant_off.py)
      timeout 150 python3 -m pytest tests/gpu/test_attention.py -q -rfE -k "cluster" 2>&1 | tail -3 \
        | tee "$logs/attn-quant.log" || status=1
      sanitize_case tests/gpu/test_attention.py "b4_t4_h8_kv2_d128_p32_s3_cluster_q2" attn-quant.log 120
      for plan in dense-small-q8 dense-small-q8-w2-fused dense-small-q8-unfused; do
        echo "$plan: $(timeout 120 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
          | tee -a "$logs/attn-quant.log"
      done
      timeout 200 python3 bench/q8_step.py build/plans/dense-small.plan build/plans/dense-small-q8-noattnq.plan \
        build/plans/dense-small-q8.plan --steps 300 2>&1 | tail -8 | tee -a "$logs/attn-quant.log" || status=1 ;;
    pending-gqa-tiles)
      # the thirteenth session's second queue item (about 3 minutes): GQA at batch 1 and 32k keys is at 79% of the
      # roofline (target 85%), and ncu put the kernel alone at 72% of DRAM with 2 CTAs an SM of 3 stages of 64 keys.
      # More warps and bytes in flight an SM: 3 CTAs of 4 stages of 32 keys (75.8 KB each) or of 2 stages of 64
      # (76.8 KB), against the default, all GQA rows (here, for each SCHEDULE of '{}' '{"tile": 32, "stages": 4}'
      # '{"tile": 64, "stages": 2}': LANEC_ATTN_KINDS=gqa LANEC_ATTN_SCHEDULE=SCHEDULE python3 bench/attention.py
      # build; carry the three build/bench-attention*-gqa folders). Adopt a schedule (attention.py's defaults)
      # only where it wins on the 32k rows and loses nowhere. First the GQA cases on both schedules (`_tile32`,
      # `_stages2`; here: python tests/gpu/build.py --only attention attention_combine) and compute-sanitizer on one.
      timeout 150 python3 -m pytest tests/gpu/test_attention.py -q -rfE -k "tile32 or stages2" 2>&1 | tail -3 \
        | tee "$logs/pending-gqa-tiles.log" || status=1
      sanitize_case tests/gpu/test_attention.py "attention_matches and b3_t3_h12_kv4_d128_p16_s4_tile32" \
        pending-gqa-tiles.log 90
      for schedule in '{}' '{"tile": 32, "stages": 4}' '{"tile": 64, "stages": 2}'; do
        echo "== schedule $schedule" | tee -a "$logs/pending-gqa-tiles.log"
        LANEC_ATTN_KINDS=gqa LANEC_ATTN_SCHEDULE="$schedule" timeout 150 python3 bench/attention.py 2>&1 \
          | grep "^| GQA" | tee -a "$logs/pending-gqa-tiles.log" || status=1
      done ;;
    queue-12)
      # the eleventh session's queue, run in the twelfth (bench/RESULTS.md: the fold loses at 4 and 8 requests,
      # argmax's cluster of 8 adopted where the row takes more than one round; nothing is queued after it).
      # Kept to reproduce (about 6 minutes): fold-gate-product at 4 and 8 requests, to set
      # KDA_GATE_FOLD_ROWS (1: gains at one row, loses at 64; between them unmeasured). The folded plans pass
      # --check (2026-11-30: kimi-kda-b4-fold and b8-fold 6 of 6); their timing was lost to a bad grep. Here:
      # python tests/gpu/plans.py kimi-kda-b4 kimi-kda-b8, then each as NAME-fold.plan with the limit raised:
      # python -c "import lanec.passes.fold_gate_product as f; f.KDA_GATE_FOLD_ROWS = 8; from lanec.cli import
      # main; main(['compile', 'build/plans/kimi-kda-b4.mlir', '-o', 'build/plans/kimi-kda-b4-fold.plan'])"
      # (carry those plans, .whl and .anchors). Raise the fact to the largest batch the fold wins at.
      # Then argmax with a row's CTAs as a cluster of 8 (ARGMAX_CLUSTER, facts.py; 1 until this passes): its
      # cases (the `_c` ones; here: python tests/gpu/build.py --only argmax), compute-sanitizer on one, and the
      # KDA-only and dense steps with it against without (here: each plan again as NAME-argmax8.plan, compiled
      # with `import lanec.codegen.kernels.argmax as a; a.ARGMAX_CLUSTER = 8` first). Set the fact to 8 if
      # they pass and the steps gain.
      timeout 280 python3 bench/step_chain.py --rounds 2 build/plans/kimi-kda-b4.plan \
        build/plans/kimi-kda-b4-fold.plan build/plans/kimi-kda-b8.plan build/plans/kimi-kda-b8-fold.plan 2>&1 | tail -6 \
        | tee "$logs/pending.log" || status=1
      timeout 100 python3 -m pytest tests/gpu/test_kernels.py -q -rfE -k argmax 2>&1 | tail -3 \
        | tee -a "$logs/pending.log" || status=1
      sanitize_case tests/gpu/test_kernels.py "argmax and r1_v163840_c8" pending.log
      for plan in kimi-kda-b1-argmax8 dense-small-argmax8; do
        echo "$plan: $(timeout 100 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
          | tee -a "$logs/pending.log"
      done
      timeout 150 python3 bench/step_chain.py --rounds 2 build/plans/kimi-kda-b1.plan \
        build/plans/kimi-kda-b1-argmax8.plan 2>&1 | tail -4 | tee -a "$logs/pending.log" || status=1
      timeout 150 python3 bench/q8_step.py build/plans/dense-small.plan build/plans/dense-small-argmax8.plan \
        --steps 100 2>&1 | tail -6 | tee -a "$logs/pending.log" || status=1 ;;
    q8-rows)
      # the tenth session's queue (about 2 minutes; run 2026-11-30, passed: Q8_ONE_STEP_ROWS_PER_CTA is 4,
      # bench/RESULTS.md): q8_gemv's 4 rows a CTA where a row is one step of 9 warps. Here:
      # python tests/gpu/build.py --only q8_gemv q8_gated_gemv; python tests/gpu/plans.py kimi-b3-q8;
      # LANEC_Q8_SET=floor python bench/q8.py build (carry build/gpu, build/plans, build/bench/q8-floor). The
      # q8 cases (r5_k2080_n1001_w1 and the gated r2_k2304_h1000_w2 take 4 rows a CTA by default),
      # compute-sanitizer on one, kimi-b3-q8 --check (its 2304-wide products), and the floor set's fits
      timeout 120 python3 -m pytest tests/gpu/test_q8_gemv.py -q -rfE -k "not gemm_tc" 2>&1 | tail -3 \
        | tee "$logs/pending.log" || status=1
      sanitize_case tests/gpu/test_q8_gemv.py "q8_gemv_matches and r5_k2080_n1001_w1" pending.log
      echo "kimi-b3-q8: $(timeout 100 python3 -m lanec.runtime build/plans/kimi-b3-q8.plan --check 2>&1 | tail -1)" \
        | tee -a "$logs/pending.log"
      LANEC_Q8_SET=floor timeout 100 python3 bench/q8.py 2>&1 | tee -a "$logs/pending.log" || status=1 ;;
    pending-early)
      # the per-row mixture's early down rows (about 5 minutes; MIXTURE_DOWN_EARLY_ROWS, off: run 2026-11-30,
      # correct and 84 us slower at batch 1): the mixture's GPU cases with the two `_early` shapes,
      # compute-sanitizer on one, the real-size batch-1 step with them --check, then bench/model.py with
      # against without. Here:
      # python tests/gpu/build.py --only mixture_router mixture_gated mixture_down; python tests/gpu/plans.py
      # kimi-full-b1 kimi-full-b1-c1k; then each plan again as NAME-early.plan with the fact set, e.g.
      # python -c "import lanec.codegen.lower as l; l.MIXTURE_DOWN_EARLY_ROWS = 1; from lanec.cli import main;
      # main(['compile', 'build/plans/kimi-full-b1-c1k.mlir', '-o', 'build/plans/kimi-full-b1-c1k-early.plan'])"
      # (carry build/gpu, build/plans, .anchors and .whl)
      fold_checks pending-early tests/gpu/test_mixture.py "matches_interpreter and b1_e256_k8_sigmoid_correction_shared_early"
      echo "kimi-full-b1-early: $(timeout 150 python3 -m lanec.runtime build/plans/kimi-full-b1-early.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/pending-early.log"
      timeout 240 python3 bench/model.py kimi-full-b1-c1k kimi-full-b1-c1k-early 2>&1 \
        | tee -a "$logs/pending-early.log" || status=1 ;;
    floor)
      # the launch floor (about 1.5 minutes; run 2026-11-30, bench/RESULTS.md): one row against 2304-wide
      # weights of 4.7 to 755 MB, our bf16 gemv, q8_gemv and torch's matmul each fitted to t = floor + bytes /
      # rate (here: LANEC_GEMV_SET=floor python bench/gemv.py build and LANEC_Q8_SET=floor python bench/q8.py
      # build; carry build/bench/gemv and build/bench/q8-floor)
      timeout 150 python3 bench/gemv.py 2>&1 | tee "$logs/floor-gemv.log" || status=1
      LANEC_Q8_SET=floor timeout 150 python3 bench/q8.py 2>&1 | tee "$logs/floor-q8.log" || status=1 ;;
    fold-router)
      # fold-norm-into-router's GPU checks (2026-11-30: 37 mixture cases pass, sanitizer clean, every plan below
      # agrees): the router's norm cases with the mixture's, compute-sanitizer on one, then plans that take the
      # fold by default, and one without it, --check (here: python tests/gpu/build.py --only mixture_router
      # mixture_gated mixture_down and python tests/gpu/plans.py kimi-b8 kimi-spec3-b2 qwen-next-b1 deepseek-v3-b2
      # kimi-b3-q8 kimi-b8-no-fold-router-norms; carry build/gpu, build/plans). Run again 2026-11-30 after the
      # norm's sums moved to the first CTA: 42 cases (with the one-CTA norm case) pass, every plan agrees
      fold_checks fold-router tests/gpu/test_mixture.py "norms_its_rows and b13" \
        kimi-b8 kimi-spec3-b2 qwen-next-b1 deepseek-v3-b2 kimi-b3-q8 kimi-b8-no-fold-router-norms ;;
    fold-gate)
      # fold-gate-product's GPU checks (2026-11-30, the product in the gate warps: 48 cases pass, sanitizer clean,
      # every plan below agrees): KdaSplit's cases (here: python tests/gpu/cases/kda_split.py --set quick --set
      # cluster1 --set tuned; the folded ones end _g128), compute-sanitizer on one, then the plans --check with the
      # fold (batch 1, on by default) and without it (here: python tests/gpu/plans.py kimi-kda-b1
      # kimi-kda-b1-no-fold-gate kimi-kda-b64; carry build/gpu, build/plans, .whl)
      fold_checks fold-gate tests/gpu/test_kda_split.py "h32_b1_t1_sp_bias0_m0_sdefaults_g128_gp264" \
        kimi-kda-b1 kimi-kda-b1-no-fold-gate kimi-kda-b64 ;;
    rope-pair)
      # q's and k's ropes in one launch (the lowering's `rope_partner`; about 3 minutes): the rope cases with the
      # paired shapes, compute-sanitizer on one, the dense and Llama plans --check, then bench/q8_step.py with the
      # plans before (`-unpaired`: the lowering's pairing off) and after (here: python tests/gpu/build.py --only
      # rope; python tests/gpu/plans.py dense-small dense-small-q8 dense-small-b64 dense-small-spec4-b8
      # llama-3.1-8b-b3 llama-3.1-8b-b40-q8-fused, and the -unpaired plans as bench/RESULTS.md says; carry
      # build/gpu, build/plans, .whl)
      timeout 120 python3 -m pytest tests/gpu/test_kernels.py -q -rfE -k rope 2>&1 | tail -3 \
        | tee "$logs/rope-pair.log" || status=1
      sanitize_case tests/gpu/test_kernels.py "rope and r5_h20_u128_rot128_llama3_paired" rope-pair.log
      dense_ab rope-pair unpaired dense-small dense-small-q8 dense-small-b64 dense-small-spec4-b8 llama-3.1-8b-b3 \
        llama-3.1-8b-b40-q8-fused ;;
    cluster-combine)
      # a few chunks of few CTAs combined in the attention's own cluster (shim.py's cluster_combine; about 1.5
      # minutes): the attention's cluster cases and the dense example's shape, compute-sanitizer on it, the
      # dense plans --check, then bench/q8_step.py with the plans before (`-launch`: CLUSTER_COMBINE_CTAS 0) and
      # after (here: python tests/gpu/build.py --only attention attention_combine; python tests/gpu/plans.py
      # dense-small dense-small-q8 dense-small-q8-unfused, and the -launch plans as bench/RESULTS.md says;
      # carry build/gpu, those plans, .whl)
      timeout 150 python3 -m pytest tests/gpu/test_attention.py -q -rfE \
        -k "(attention_matches_interpreter and attention- and (cluster or h16_kv4)) or (combine and h16_kv4)" 2>&1 \
        | tail -3 | tee "$logs/cluster-combine.log" || status=1
      sanitize_case tests/gpu/test_attention.py \
        "attention_matches_interpreter and b1_t1_h16_kv4_d128_p16_s8_pitched_cluster" cluster-combine.log 90
      dense_ab cluster-combine launch dense-small dense-small-q8 dense-small-q8-unfused ;;
    embed-norm)
      # the step's embed folded into its first norm (rmsnorm `gather`; about 3 minutes): the rmsnorm cases with the
      # gathered ones, compute-sanitizer on one, the plans whose first norm gathers --check, then bench/q8_step.py
      # and bench/step_chain.py with the plans before (`-embed`: the fold off) and after (here: python
      # tests/gpu/build.py --only rmsnorm; python tests/gpu/plans.py dense-small dense-small-q8 kimi-kda-b1
      # qwen-next-b1 deepseek-v3-b2 llama-3.1-8b-b3, and the -embed plans as bench/RESULTS.md says; carry
      # build/gpu, build/plans, .whl)
      timeout 120 python3 -m pytest tests/gpu/test_kernels.py -q -rfE -k rmsnorm 2>&1 | tail -3 \
        | tee "$logs/embed-norm.log" || status=1
      sanitize_case tests/gpu/test_kernels.py "rmsnorm and r1_w2304_gather163840" embed-norm.log
      dense_ab embed-norm embed dense-small dense-small-q8 kimi-kda-b1 qwen-next-b1 deepseek-v3-b2 llama-3.1-8b-b3
      timeout 150 python3 bench/step_chain.py --rounds 2 build/plans/kimi-kda-b1-embed.plan \
        build/plans/kimi-kda-b1.plan 2>&1 | tail -4 | tee -a "$logs/embed-norm.log" || status=1 ;;
    pending-ab)
      # the step after a change (about 6 minutes): bench/step_chain.py --rounds 3 on the KDA-only steps (issue 12's
      # batch-1 1.4x) and bench/model.py on the real-size steps at 1k context, batch 1, 8 and 64 (carry build/plans,
      # .anchors and .whl)
      python3 bench/step_chain.py --rounds 3 build/plans/kimi-kda-b1.plan build/plans/kimi-kda-b64.plan \
        build/plans/kimi-kda-b256.plan 2>&1 | tee "$logs/step_chain.log" || status=1
      python3 bench/model.py kimi-full-b1-c1k kimi-full-b8-c1k kimi-full-b64-c1k 2>&1 \
        | tee "$logs/bench-model.log" || status=1 ;;
    pending-bench)
      # part 3 (about 6 minutes): the real-size steps with the MLA layers on wgmma against the chain at batch 1 and
      # 8, contexts 1k and 16k (carry build/plans' kimi-full-b1-c1k / b1-c16k / b8-c1k / b8-c16k, .whl, .anchors)
      python3 bench/model.py --gpus "$(nvidia-smi -L 2>/dev/null | wc -l)" kimi-full-b1-c1k kimi-full-b1-c16k \
        kimi-full-b8-c1k kimi-full-b8-c16k 2>&1 | tee "$logs/bench-model.log" || status=1 ;;
    stream)
      # gemm_tc stream-K (`stream`): its GPU cases (each launched twice: the flags lowered, the second launch
      # bitwise equal), compute-sanitizer on one, then bench/gemm.py's stream set against the default and the
      # table's (here: python tests/gpu/build.py --only gemm_wgmma and LANEC_GEMM_STREAM=1 python bench/gemm.py
      # build; carry build/gpu and build/bench/gemm; about 1.5 minutes)
      timeout 150 python3 -m pytest tests/gpu/test_gemm_tc.py -q -rfE -k stream 2>&1 | tee "$logs/stream.log" || status=1
      sanitize_case tests/gpu/test_gemm_tc.py "stream_r100_k1000_n320_b32" sanitize.log 90
      timeout 240 python3 bench/gemm.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/bench-stream.log" \
        || status=1 ;;
    segments)
      # the router writing the grouped path's segments (ROUTER_SEGMENTS, off: measured no faster; mixture_groups
      # folded into the router's last cluster). Its GPU cases (here: python tests/gpu/build.py --only
      # mixture_router), compute-sanitizer on one, then the real-size batch-8 step with it against without (here:
      # build kimi-full-b8-c1k and, from a copy whose facts set ROUTER_SEGMENTS = True, as
      # build/plans/kimi-full-b8-c1k-segments.plan; carry build/gpu, build/plans, .anchors and .whl)
      timeout 120 python3 -m pytest tests/gpu/test_mixture_grouped.py -q -rfE -k segments 2>&1 \
        | tee "$logs/segments.log" || status=1
      sanitize_case tests/gpu/test_mixture_grouped.py "segments and b64_e128" segments.log
      timeout 330 python3 bench/model.py build/plans/kimi-full-b8-c1k.plan build/plans/kimi-full-b8-c1k-segments.plan \
        2>&1 | tee -a "$logs/segments.log" || status=1 ;;
    q8-tc)
      # q8_gemm_tc, the int8 tensor-core product (carry build/gpu and build/bench/q8-tc: `python
      # tests/gpu/build.py --only q8_gemm_tc gemm_tc` and `LANEC_Q8_SET=tc python bench/q8.py build` here;
      # about 5 minutes): its cases against the interpreter, compute-sanitizer on a parts case with two
      # words and on a K-split case, gemm_tc's mma.sync cases (the engine it shares its pipeline with), and
      # bench/q8.py's batched set against q8_gemv's 32-row launches, bf16 gemm_tc and cuBLAS, writing the
      # fastest q8_gemm_tc schedules to $OUT/logs.tgz's schedules.json (merge its q8_gemm_tc entries into
      # lanec/codegen/schedules.json, rebuild here, and run the tuned cases: `-k "gemm_tc and tuned"`)
      timeout 120 python3 -m pytest tests/gpu/test_q8_gemv.py -q -rfE -k "gemm_tc and not tuned" 2>&1 \
        | tee "$logs/q8-tc.log" || status=1
      for case in r100_k4096_parts_w2 r48_k4096_n2304_s8_t64; do
        sanitize_case tests/gpu/test_q8_gemv.py "gemm_tc and $case" sanitize.log
      done
      timeout 150 python3 -m pytest tests/gpu/test_gemm_tc.py -q -rfE -k "not gemm_wgmma" 2>&1 \
        | tee "$logs/gemm-mma.log" || status=1
      LANEC_Q8_SET=tc timeout 200 python3 bench/q8.py --write-table "$logs/schedules.json" 2>&1 \
        | tee "$logs/bench-q8-tc.log" || status=1 ;;
    steps)
      # the KDA-only steps against the chain and the real-size batch 8, 64 and 256 steps, after a table or a
      # kernel default changes (carry build/plans' kimi-kda-b1/b64/b256, kimi-full-b8-c1k / b64-c1k /
      # b256-c1k, .whl, .anchors; about 9 minutes). The KDA-only steps three rounds each, interleaved: the chain
      # moves between runs, and issue 12's 1.2x / 1.4x are judged on the medians
      python3 bench/step_chain.py --rounds 3 build/plans/kimi-kda-b1.plan build/plans/kimi-kda-b64.plan \
        build/plans/kimi-kda-b256.plan 2>&1 | tee "$logs/step-chain.log" || status=1
      python3 bench/model.py --gpus "$(nvidia-smi -L 2>/dev/null | wc -l)" kimi-full-b64-c1k kimi-full-b256-c1k \
        kimi-full-b8-c1k 2>&1 | tee "$logs/bench-model.log" || status=1 ;;
    profiles)
      # where the real-size batch-64 and batch-256 steps spend their time: `lanec run --profile` of each (GPU
      # seeding, the eager replay and the graph; carry build/plans' kimi-full-b64-c1k and b256-c1k, .whl; about
      # 3 minutes a plan), traces in $logs
      for plan in kimi-full-b64-c1k kimi-full-b256-c1k; do
        timeout 250 python3 -m lanec.runtime "build/plans/$plan.plan" --profile --gpu-seeding \
          --trace "$logs/$plan.trace.json" > "$logs/$plan.profile.txt" 2>&1 || status=1
        tail -30 "$logs/$plan.profile.txt"
      done ;;
    tma-table)
      # gemm_tc's TMA loads into the schedule table (issue 12; build here first: LANEC_GEMM_TMA=1 python
      # bench/gemm.py build, carry build/bench/gemm): re-time every shape at the table's schedule and the
      # default, each with and without TMA, write the fastest to $logs/schedules.json (copy its gemm_tc
      # entries to lanec/codegen/schedules.json here, rebuild build/gpu, then run `check` or the tuned cases)
      timeout 420 python3 bench/gemm.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/bench-gemm-tma.log" \
        || status=1 ;;
    tp-model)
      # two GPUs: the real-size Kimi-Linear-48B-A3B and DeepSeek-V3's first four layers at TP 2 against one GPU
      # (carry the plans of tests/gpu/plans.py's TP_MODEL_PLANS and their one-GPU plans, and .whl-tp)
      if ls .whl-tp/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl-tp/*.whl
      fi
      NCCL_NVLS_ENABLE=0 python3 bench/tp.py --model 2>&1 | tee "$logs/bench-tp-model.log" || status=1 ;;
    bench-model)
      python3 bench/model.py --gpus "$(nvidia-smi -L 2>/dev/null | wc -l)" 2>&1 | tee "$logs/bench-model.log" || status=1 ;;
    bench-rope|bench-seeded)
      python3 "bench/${phase#bench-}.py" 2>&1 | tee "$logs/$phase.log" || status=1 ;;
    bench-q8)
      # and the q8 GEMVs' fastest schedules at one row into $OUT/logs.tgz's schedules.json (merge its q8_gemv
      # and q8_gated_gemv entries into lanec/codegen/schedules.json, rebuild, run their tuned cases)
      python3 bench/q8.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/$phase.log" || status=1 ;;
    real)
      # the three checks at once where there are GPUs for them (each holds the model's 98 GB)
      gpus=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$gpus" -ge 1 ] || gpus=1
      i=0
      for plan in kimi-full-b64 kimi-full-spec3-b8 kimi-full-b1; do
        CUDA_VISIBLE_DEVICES=$(( i % gpus )) python3 -m lanec.runtime "build/plans/$plan.plan" --check \
          > "$logs/$plan.check.log" 2>&1 &
        i=$(( i + 1 ))
        [ $(( i % gpus )) -eq 0 ] && wait
      done
      wait
      for plan in kimi-full-b64 kimi-full-spec3-b8 kimi-full-b1; do
        echo "== $plan --check"; tail -4 "$logs/$plan.check.log"
      done | tee "$logs/real.log"
      for plan in kimi-full-b64 kimi-full-spec3-b8 kimi-full-b1; do
        grep -q "agree with the interpreter$" "$logs/$plan.check.log" || status=1
      done
      for plan in kimi-full-b1 kimi-full-b64; do
        python3 -m lanec.runtime "build/plans/$plan.plan" --profile --gpu-seeding --trace "$logs/$plan.trace.json" \
          > "$logs/$plan.profile.txt" 2>&1 || status=1
        tail -25 "$logs/$plan.profile.txt"
      done ;;
    tiles)
      # gemm_tc's weight tiles of other widths (tile_n 192 and 256 past the default 128, and 64; issue 12): the
      # wide cases (stop at a failure or a hang), compute-sanitizer on one, then bench/gemm.py on the wide
      # tiles, the fastest written to $logs/schedules.json (here: python tests/gpu/build.py --only gemm_wgmma;
      # LANEC_GEMM_TILES=1 LANEC_GEMM_ROWS=128,256 python bench/gemm.py build; carry build/gpu, build/bench/gemm)
      timeout 180 python3 -m pytest tests/gpu/test_gemm_tc.py -q -rfE -x -k "wide" 2>&1 | tail -4 \
        | tee "$logs/tiles.log"
      cases_passed tiles || { status=1; continue; }
      sanitize_case tests/gpu/test_gemm_tc.py "wide192_r256_k2304_merged_b128 or wide_occ2_r256" tiles.log 180 \
        || status=1
      timeout 300 python3 bench/gemm.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/bench-gemm-tiles.log" \
        || status=1 ;;
    wide-ab)
      # the wide tiles adopted at 256 rows: the tuned 256-row cases, bench/gemm.py's wide tiles again (5 stages
      # and multicast; here: LANEC_GEMM_TILES=1 LANEC_GEMM_ROWS=256 python bench/gemm.py build), the KDA-only
      # batch-256 step against the chain on the table before (build/plans/kimi-kda-b256-old.plan) and after,
      # three rounds, and the real-size batch-256 step's lanec side before and after (carry build/gpu,
      # build/bench/gemm, build/plans' kimi-kda-b256(-old), kimi-full-b256-c1k(-old), .snap)
      timeout 150 python3 -m pytest tests/gpu/test_gemm_tc.py -q -rfE -k "tuned and r256" 2>&1 | tail -3 \
        | tee "$logs/wide-ab.log"
      timeout 200 python3 bench/gemm.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/bench-gemm-wide.log" \
        | tail -12 || status=1
      timeout 200 python3 bench/step_chain.py --rounds 3 build/plans/kimi-kda-b256-old.plan \
        build/plans/kimi-kda-b256.plan 2>&1 | tee -a "$logs/wide-ab.log" | tail -12 || status=1
      for each in kimi-full-b256-c1k-old kimi-full-b256-c1k kimi-full-b256-c1k-old kimi-full-b256-c1k; do
        echo "$each: $(timeout 100 python3 bench/model.py --side lanec "build/plans/$each.plan" 2>&1 | tail -1)" \
          | tee -a "$logs/wide-ab.log"
      done ;;
    occ-ab)
      # two CTAs an SM adopted up to 64 rows: the tuned cases of 16-64 rows, the KDA-only batch-64 step against the
      # chain before (build/plans/kimi-kda-b64-old.plan) and after, three rounds, the real-size batch-64 step's lanec
      # side before and after, two rounds, and its --check (carry build/gpu, build/plans' kimi-kda-b64(-old),
      # kimi-full-b64-c1k(-old), .snap)
      timeout 150 python3 -m pytest tests/gpu/test_gemm_tc.py -q -rfE -k "tuned and (r16_ or r33_ or r64_)" 2>&1 \
        | tail -3 | tee "$logs/occ-ab.log"
      timeout 150 python3 bench/step_chain.py --rounds 3 build/plans/kimi-kda-b64-old.plan \
        build/plans/kimi-kda-b64.plan 2>&1 | tee -a "$logs/occ-ab.log" | tail -6 || status=1
      for each in kimi-full-b64-c1k-old kimi-full-b64-c1k kimi-full-b64-c1k-old kimi-full-b64-c1k; do
        echo "$each: $(timeout 60 python3 bench/model.py --side lanec "build/plans/$each.plan" 2>&1 | tail -1)" \
          | tee -a "$logs/occ-ab.log"
      done
      echo "kimi-full-b64-c1k: $(timeout 170 python3 -m lanec.runtime build/plans/kimi-full-b64-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/occ-ab.log" ;;
    epilogue)
      # gemm_tc's tile staged as bf16 by stmatrix (one split, bf16 y: GemmWgmma.store_packed): the wgmma cases and
      # the tuned ones of 128 and 256 rows (stop at a failure), compute-sanitizer on an odd block (104 rows: a
      # 2-matrix tail), then bench/gemm.py on the table's schedules with the build before it
      # (build/bench/gemm-old) and after, two rounds (here: python tests/gpu/build.py --only gemm_tc gemm_wgmma;
      # LANEC_GEMM_TABLE=1 LANEC_GEMM_ROWS=64,128,256 LANEC_GEMM_ONLY=... python bench/gemm.py build, once before
      # the change renamed -old; carry build/gpu and both folders)
      timeout 240 python3 -m pytest tests/gpu/test_gemm_tc.py -q -rfE -x -k "gemm_wgmma or (tuned and (r256_ or r128_))" \
        2>&1 | tail -3 | tee "$logs/epilogue.log"
      cases_passed epilogue || { status=1; continue; }
      sanitize_case tests/gpu/test_gemm_tc.py "r100_k2304_merged_pitch and gemm_wgmma" epilogue.log 180 || status=1
      for round in 1 2; do
        echo "== round $round: before" | tee -a "$logs/epilogue.log"
        on_old build/bench/gemm timeout 60 python3 bench/gemm.py 2>&1 | grep "^| " | tee -a "$logs/epilogue.log"
        echo "== round $round: after" | tee -a "$logs/epilogue.log"
        timeout 60 python3 bench/gemm.py 2>&1 | grep "^| " | tee -a "$logs/epilogue.log"
      done ;;
    gemm-chain)
      # queued (issue 12 / 15): do the schedules that win alone but lose in the step (two CTAs an SM over 5-8 K
      # splits) lose in a chain after a norm too? bench/gemm.py's chain timing on the batch-64 step's products
      # (here: LANEC_GEMM_CHAIN=1 LANEC_GEMM_TILES=1 LANEC_GEMM_ROWS=64 LANEC_GEMM_ONLY="kimi o proj;kimi kda
      # merged;kimi mla q+kv_a" python bench/gemm.py build; carry build/bench/gemm)
      timeout 300 python3 bench/gemm.py 2>&1 | tee "$logs/gemm-chain.log" | grep -A3 "^  kimi\|^| " || status=1 ;;
    quotient)
      # issue 14: two-word quantize with its zero remainders (a block's peak's) divided as step / step, since
      # div.rn's check sends a zero dividend down its slow path: the quantize cases and every quantize
      # epilogue's (norm, elementwise, head norm, GEMVs, the attention's merge) against the interpreter,
      # compute-sanitizer on one, the SASS of the two-word quantize before, bench/q8.py before (q8-old) and after,
      # the two-word q8_0 plan --check and its step before (-div) and after (here: python tests/gpu/build.py --only
      # quantize rmsnorm elementwise head_norm gemv gated_gemv q8_gemv q8_gated_gemv q8_gemm_tc attention;
      # LANEC_Q8_PRODUCTS="small o proj,kimi o proj" python bench/q8.py build, built before the change into
      # build/bench/q8-old; python tests/gpu/plans.py dense-small dense-small-q8-w2-fused kimi-b3-q8, the q8 one
      # before the change as -div; carry build/gpu, build/bench/q8, build/bench/q8-old, build/plans)
      timeout 150 python3 -m pytest tests/gpu/test_quantize.py tests/gpu/test_q8_gemv.py -q -rfE -x 2>&1 \
        | tee "$logs/quotient-cases.log" | tail -3 | tee "$logs/quotient.log"
      timeout 120 python3 -m pytest tests/gpu/test_attention.py -q -rfE -x -k "_q1 or _q2" 2>&1 \
        | tee -a "$logs/quotient-cases.log" | tail -3 | tee -a "$logs/quotient.log"
      cases_passed quotient || { status=1; continue; }
      sanitize_case tests/gpu/test_quantize.py "quantize_matches and r1_k4096_w2" quotient.log 90 || status=1
      echo "kimi-b3-q8: $(timeout 120 python3 -m lanec.runtime build/plans/kimi-b3-q8.plan --check 2>&1 | tail -1)" \
        | tee -a "$logs/quotient.log"
      for words in 1 2; do
        nvdisasm -c "build/bench/q8-old/quantize_k4096_r1_w$words.cubin" > "$logs/quantize-w$words-before.sass" 2>&1
      done
      for round in 1 2; do
        on_old build/bench/q8 timeout 100 python3 bench/q8.py > "$logs/q8-old-$round.log" 2>&1
        timeout 100 python3 bench/q8.py > "$logs/q8-new-$round.log" 2>&1
      done
      grep -h -A22 "^| launch" "$logs"/q8-old-1.log "$logs"/q8-new-1.log
      grep -h "quantize_k4096" "$logs"/q8-old-*.log "$logs"/q8-new-*.log
      echo "dense-small-q8-w2-fused: $(timeout 120 python3 -m lanec.runtime build/plans/dense-small-q8-w2-fused.plan \
        --check 2>&1 | tail -1)" | tee -a "$logs/quotient.log"
      timeout 150 python3 bench/q8_step.py build/plans/dense-small.plan build/plans/dense-small-q8-w2-fused-div.plan \
        build/plans/dense-small-q8-w2-fused.plan --steps 100 2>&1 | tee -a "$logs/quotient.log" || status=1 ;;
    occ-split)
      # queued (issues 12 and 15): which successors pay for gemm_tc's two-CTAs-an-SM schedules in the real batch-64
      # step (faster alone and in a chain after a norm, 0.5% slower in the step with all of them): the step with only
      # o_proj's entry at occupancy 2 (its successor a norm) and with only the merged KDA product's (its successor
      # kda_split), against the table's, two rounds interleaved; the first --check (here: python tests/gpu/plans.py
      # kimi-full-b64-c1k; python tests/gpu/variant_plan.py build/plans/kimi-full-b64-c1k.mlir
      # build/plans/kimi-full-b64-c1k-occ-oproj.plan gemm_tc 'outputs=2304,rows=64,width=4096' '{"engine": "wgmma",
      # "splits": 3, "stages": 7, "tile_n": 64, "occupancy": 2}', and -occ-merged.plan with gemm_tc
      # 'outputs=12576,rows=64,width=2304' '{"engine": "wgmma", "splits": 1, "stages": 6, "tile_n": 64,
      # "occupancy": 2}'; carry build/plans, .snap; about 5 minutes)
      real_ab occ-split kimi-full-b64-c1k-occ-oproj kimi-full-b64-c1k kimi-full-b64-c1k-occ-merged ;;
    entry)
      # every kernel releases its PDL dependents at its entry (then DEPENDENTS_AT_ENTRY; now RELEASE_RULE "entry"): the
      # plans of every kernel kind --check (the real-size batch-1 step too), then each step before (build/plans-old,
      # built before the change) and after, three rounds (here: python tests/gpu/plans.py dense-small
      # dense-small-q8 kimi-linear-small kimi-kda-b1 kimi-full-b1-c1k, once before the change copied to
      # build/plans-old; carry build/plans, build/plans-old, .snap; about 6 minutes)
      for plan in dense-small dense-small-q8 kimi-linear-small kimi-kda-b1; do
        echo "$plan: $(timeout 120 python3 -m lanec.runtime "build/plans/$plan.plan" --check 2>&1 | tail -1)" \
          | tee -a "$logs/entry.log"
      done
      echo "kimi-full-b1-c1k: $(timeout 200 python3 -m lanec.runtime build/plans/kimi-full-b1-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/entry.log"
      for round in 1 2 3; do
        for plan in dense-small dense-small-q8 kimi-kda-b1; do
          timeout 60 python3 bench/plan_step.py "build/plans-old/$plan.plan" "build/plans/$plan.plan" 2>&1 | tail -2 \
            | tee -a "$logs/entry.log"
        done
      done
      for each in plans-old plans plans-old plans; do
        echo "$each kimi-full-b1-c1k: $(timeout 100 python3 bench/model.py --side lanec \
          "build/$each/kimi-full-b1-c1k.plan" 2>&1 | tail -1)" | tee -a "$logs/entry.log"
      done ;;
    release)
      # each launch's PDL release point by what follows it (RELEASE_RULE, lower.py's `release_point`; issue 15's launch
      # floor): the plans built under "successor" and "pass-through" --check (the real-size batch-1 step too), then
      # every rule's step against the "wait" plans (build/plans), three rounds, and the real-size step's rules
      # interleaved, two rounds (here: python tests/gpu/plans.py dense-small dense-small-q8 kimi-kda-b1
      # kimi-linear-small kimi-full-b1-c1k; then for each rule in entry successor pass-through and each of those
      # plans, python -c "import lanec.codegen.lower as l; l.RELEASE_RULE = 'RULE'; from lanec.cli import main;
      # main(['compile', FORM, '-o', 'build/release/PLAN-RULE.plan'])" with FORM examples/PLAN.mlir or
      # build/plans/PLAN.mlir; carry build/plans, build/release, .whl; about 7 minutes)
      for rule in successor pass-through; do
        for plan in dense-small dense-small-q8 kimi-linear-small kimi-kda-b1; do
          echo "$plan-$rule: $(timeout 120 python3 -m lanec.runtime "build/release/$plan-$rule.plan" --check 2>&1 \
            | tail -1)" | tee -a "$logs/release.log"
        done
      done
      for tool in memcheck racecheck; do
        timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m lanec.runtime \
          build/release/dense-small-successor.plan --steps 3 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" \
          | tee -a "$logs/release.log"
      done
      for round in 1 2 3; do
        for plan in dense-small dense-small-q8 kimi-kda-b1; do
          timeout 90 python3 bench/plan_step.py "build/plans/$plan.plan" "build/release/$plan-entry.plan" \
            "build/release/$plan-successor.plan" "build/release/$plan-pass-through.plan" 2>&1 | tail -4 \
            | tee -a "$logs/release.log"
        done
      done ;;
    release-real)
      # `release`'s real-size batch-1 step: the "successor" plan --check, then every rule's step interleaved, two
      # rounds (about 6 minutes)
      echo "kimi-full-b1-c1k-successor: $(timeout 200 python3 -m lanec.runtime \
        build/release/kimi-full-b1-c1k-successor.plan --check --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/release.log"
      for round in 1 2; do
        for each in plans/kimi-full-b1-c1k release/kimi-full-b1-c1k-entry release/kimi-full-b1-c1k-successor \
            release/kimi-full-b1-c1k-pass-through; do
          echo "round $round $each: $(timeout 100 python3 bench/model.py --side lanec "build/$each.plan" 2>&1 \
            | tail -1)" | tee -a "$logs/release.log"
        done
      done ;;
    odd-splits)
      # GQA split counts that fill the resident CTAs' slots (33 x 8 and 132 x 2 blocks = 264 = 2 an SM) against the
      # chosen split, the powers of two beside them (issue 10's 85% at batch 1 and 32k; here: LANEC_ATTN_KINDS=gqa
      # LANEC_ATTN_SPLITS=33,66,132 python bench/attention.py build; carry build/bench-attention-gqa)
      LANEC_ATTN_KINDS=gqa LANEC_ATTN_SPLITS=33,66,132 timeout 300 python3 bench/attention.py 2>&1 \
        | tee "$logs/odd-splits.log" | grep -E "^\| |^ *GQA" || status=1 ;;
    launch-floor)
      timeout 120 python3 bench/launch_floor.py 2>&1 | tee "$logs/launch-floor.log" || status=1 ;;
    graph-profile)
      for plan in ${PROFILE_PLANS:-kimi-full-b1-c1k kimi-full-b8-c1k kimi-full-b64-c1k}; do
        timeout 170 python3 bench/graph_profile.py "build/plans/$plan.plan" --trace "$OUT/$plan.graph.json" 2>&1 \
          | tee "$logs/graph-profile-$plan.log" | tail -1 || status=1
      done ;;
    router-chain)
      timeout 120 python3 bench/router_chain.py 2>&1 | tee "$logs/router-chain.log" || status=1 ;;
    router-early)
      # the router's sigmoids where the logits are dotted (and, in the first run, its rows in registers before its
      # PDL wait: refuted, +54 us at batch 8): the mixture's cases, compute-sanitizer on the fused router with its norm, bench/router_chain.py (with the
      # previous router's cubin as before_whole), then the real-size steps before and after (here: python
      # tests/gpu/build.py --only mixture_router mixture_gated mixture_down mixture_grouped_gated
      # mixture_grouped_down mixture_groups mixture_sum; python bench/router_chain.py build; build/ab/before-b1.plan
      # and before-b8.plan from the commit before, after-b1.plan and after-b8.plan from this one; carry build/gpu,
      # build/bench/router_chain, build/ab, .whl; about 4 minutes). The plans' --check is the phase router-check
      timeout 300 python3 -m pytest tests/gpu/test_mixture.py tests/gpu/test_mixture_grouped.py -q -rfE 2>&1 \
        | tail -3 | tee "$logs/router-early.log"
      cases_passed router-early || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "norms_its_rows and b1_e256" router-early.log 120 || status=1
      timeout 120 python3 bench/router_chain.py 2>&1 | tee -a "$logs/router-early.log" || status=1
      for round in 1 2; do
        for plan in build/ab/before-b1.plan build/ab/after-b1.plan build/ab/before-b8.plan build/ab/after-b8.plan; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec "$plan" 2>&1 | tail -1)" \
            | tee -a "$logs/router-early.log"
        done
      done ;;
    router-shared)
      # the shared expert's gated pair in the router's launch (ROUTER_SHARED_ROWS): the mixture's cases with the new
      # shared ones, compute-sanitizer on the Kimi Linear form, bench/router_chain.py (its `with shared` row), the
      # real-size batch-1 step without it, with it at 1 and at 2 units a warp, then --check of the plans that take
      # it (here: python tests/gpu/build.py --only mixture_router mixture_gated mixture_down; python
      # bench/router_chain.py build; build/ab/sig-b1.plan from the commit before, shared-b1.plan and shared2-b1.plan
      # (ROUTER_SHARED_UNITS = 2) from this one; python tests/gpu/plans.py kimi-full-b1-c1k qwen-next-b1
      # kimi-linear-small; carry build/gpu, build/bench/router_chain, build/ab, build/plans, .whl; about 6 minutes)
      timeout 300 python3 -m pytest tests/gpu/test_mixture.py -q -rfE --tb=line 2>&1 | tail -12 | tee "$logs/router-shared.log"
      cases_passed router-shared || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "runs_the_shared_expert and b1_e256 and norm" router-shared.log 120 \
        || status=1
      timeout 120 python3 bench/router_chain.py 2>&1 | tee -a "$logs/router-shared.log" || status=1
      for round in 1 2; do
        for plan in build/ab/sig-b1.plan build/ab/shared-b1.plan build/ab/shared2-b1.plan; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec "$plan" 2>&1 | tail -1)" \
            | tee -a "$logs/router-shared.log"
        done
      done
      echo "kimi-full-b1-c1k: $(timeout 150 python3 -m lanec.runtime build/plans/kimi-full-b1-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/router-shared.log"
      for plan in qwen-next-b1 kimi-linear-small; do
        echo "$plan: $(timeout 60 python3 -m lanec.runtime build/plans/$plan.plan --check 2>&1 | tail -1)" \
          | tee -a "$logs/router-shared.log"
      done ;;
    norm-late)
      # gemv's norm prologue with the row's scale after the products (each CTA dots h * w while it sums h^2):
      # the gemv norm cases, compute-sanitizer on Kimi Linear's, --check of the fold's plans, then one round of the
      # real-size batch-1 step: without the fold (base), the fold with the prologue before this change (old-fr8),
      # the fold at 8, 4 and 2 rows a CTA, and without the lm head's (-nolm: NORM_PROLOGUE_OUTPUTS 65536). Here:
      # python tests/gpu/build.py --only gemv; python tests/gpu/plans.py kimi-full-b1-c1k kimi-kda-b1
      # kimi-kda-b1-no-fold-norms; build/ab/*.plan by tests/gpu/variant_plan.py --add of build/plans/kimi-full-b1-c1k.mlir with gemv
      # 'norm=1,outputs=12576,rows=1,width=2304' and 'norm=1,outputs=6720,rows=1,width=2304' {"rows_per_cta": R},
      # base-b1 the plan kimi-full-b1-c1k-no-fold-norms (old-fr8 from the commit before); carry build/gpu,
      # build/plans, build/ab, .whl; about 6 minutes)
      gemv_norm_cases norm-late || { status=1; continue; }
      for plan in kimi-kda-b1 kimi-kda-b1-no-fold-norms; do
        echo "$plan: $(timeout 60 python3 -m lanec.runtime build/plans/$plan.plan --check 2>&1 | tail -1)" \
          | tee -a "$logs/norm-late.log"
      done
      echo "kimi-full-b1-c1k: $(timeout 150 python3 -m lanec.runtime \
        build/plans/kimi-full-b1-c1k.plan --check --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/norm-late.log"
      for plan in base old-fr8 fr8 fr4 fr2 fr8-nolm fr4-nolm; do
        echo "round 1 $plan: $(timeout 100 python3 bench/model.py --side lanec build/ab/$plan-b1.plan 2>&1 | tail -1)" \
          | tee -a "$logs/norm-late.log"
      done ;;
    early-shared)
      # mixture_gated's shared warp before the PDL wait (MIXTURE_EARLY_SHARED_ROWS): the mixture cases, the new ones
      # among them, compute-sanitizer on Kimi Linear's, --check of the plans it changes, then two rounds of the
      # real-size batch-1 step without it (base), at 2 units a shared warp (the default) and at 3 (EARLY_PLANS: the
      # build/ab2 plans to time). Here:
      # python tests/gpu/build.py --only mixture_gated; python tests/gpu/plans.py kimi-full-b1-c1k qwen-next-b1
      # kimi-linear-small; build/ab2/base.plan and early-u3.plan by tests/gpu/variant_plan.py --fact
      # MIXTURE_EARLY_SHARED_ROWS=None (UNITS=3) of build/plans/kimi-full-b1-c1k.mlir, early-u2.plan the plan
      # itself; carry build/gpu, build/plans, build/ab2, .whl; about 8 minutes)
      timeout 200 python3 -m pytest tests/gpu/test_mixture.py -q -rfE --tb=line -k "before_the_wait or matches" 2>&1 | tail -8 \
        | tee "$logs/early-shared.log"
      cases_passed early-shared || { status=1; continue; }
      sanitize_case tests/gpu/test_mixture.py "b1_e256_k8_w2304_shared_u2_first100" early-shared.log 120 || status=1
      for plan in kimi-linear-small qwen-next-b1; do
        echo "$plan: $(timeout 90 python3 -m lanec.runtime build/plans/$plan.plan --check 2>&1 | tail -1)" \
          | tee -a "$logs/early-shared.log"
      done
      echo "kimi-full-b1-c1k: $(timeout 150 python3 -m lanec.runtime build/plans/kimi-full-b1-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/early-shared.log"
      for round in 1 2; do
        for plan in ${EARLY_PLANS:-base early-u2 early-u3}; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec build/ab2/$plan.plan 2>&1 \
            | tail -1)" | tee -a "$logs/early-shared.log"
        done
      done ;;
    rider)
      # the latent row's norm riding in the absorption gemv (fold-norm-into-latent) beside the shared warp before
      # the wait: the gemv rider cases, the early-shared mixture cases, compute-sanitizer on Kimi Linear's rider,
      # --check of the MLA plans, then three rounds of the real-size batch-1 step: neither (base), the shared warp
      # early at 3 units in the first 248 CTAs without the rider, and with it at 3 units / 248 CTAs and at 2 units
      # in every CTA (here: python tests/gpu/build.py --only gemv mixture_gated; python tests/gpu/plans.py
      # kimi-full-b1-c1k deepseek-v3-b2 kimi-linear-small kimi-b8; build/ab2 by tests/gpu/variant_plan.py --fact;
      # carry build/gpu, build/plans, build/ab2, .whl; about 9 minutes)
      timeout 120 python3 -m pytest tests/gpu/test_kernels.py -q -rfE --tb=line -k "rider" 2>&1 | tail -4 \
        | tee "$logs/rider.log"
      timeout 150 python3 -m pytest tests/gpu/test_mixture.py -q -rfE --tb=line -k "before_the_wait" 2>&1 | tail -4 \
        | tee -a "$logs/rider.log"
      cases_passed rider || { status=1; continue; }
      sanitize_case tests/gpu/test_kernels.py "gemv-r1_rider_kimi_absorb" rider.log 120 || status=1
      for plan in kimi-linear-small deepseek-v3-b2 kimi-b8; do
        echo "$plan: $(timeout 90 python3 -m lanec.runtime build/plans/$plan.plan --check 2>&1 | tail -1)" \
          | tee -a "$logs/rider.log"
      done
      echo "rider-u3-e248: $(timeout 150 python3 -m lanec.runtime build/ab2/rider-u3-e248.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/rider.log"
      for round in 1 2 3; do
        for plan in ${RIDER_PLANS:-base pre-u3-e248 rider-u3-e248 rider-u2}; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec build/ab2/$plan.plan 2>&1 \
            | tail -1)" | tee -a "$logs/rider.log"
        done
      done ;;
    combine)
      # a split latent attention's chunks merged in the value gemv's prologue (LATENT_COMBINE_IN_GEMV): the combine
      # gemv cases, compute-sanitizer on Kimi Linear's, --check of the plans it changes, then three rounds of the
      # real-size batch-1 step with the combine a launch (build/ab2/adopted: the plan of the commit before) and in
      # the gemv (build/ab2/combine: python tests/gpu/plans.py kimi-full-b1-c1k deepseek-v3-b2, copied); carry
      # build/gpu, build/plans, build/ab2, .whl; about 5 minutes
      timeout 120 python3 -m pytest tests/gpu/test_kernels.py -q -rfE --tb=line -k "combine" 2>&1 | tail -4 \
        | tee "$logs/combine.log"
      cases_passed combine || { status=1; continue; }
      sanitize_case tests/gpu/test_kernels.py "gemv-r1_combine_kimi_values" combine.log 120 || status=1
      echo "deepseek-v3-b2: $(timeout 90 python3 -m lanec.runtime build/plans/deepseek-v3-b2.plan --check 2>&1 \
        | tail -1)" | tee -a "$logs/combine.log"
      echo "combine: $(timeout 150 python3 -m lanec.runtime build/ab2/combine.plan --check --gpu-seeding 2>&1 \
        | tail -1)" | tee -a "$logs/combine.log"
      for round in 1 2 3; do
        for plan in adopted combine; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec build/ab2/$plan.plan 2>&1 \
            | tail -1)" | tee -a "$logs/combine.log"
        done
      done ;;
    norm-fold)
      # the fold at NORM_ROWS_PER_CTA 4 across the families (after norm-late): the gemv cases, compute-sanitizer on
      # Kimi Linear's, --check of each plan (the fold on by default), then each step against its plan without the
      # fold (here: python tests/gpu/build.py --only gemv gated_gemv; python tests/gpu/plans.py kimi-full-b1-c1k
      # kimi-full-b1-c1k-no-fold-norms kimi-kda-b1 kimi-kda-b1-no-fold-norms dense-small qwen-next-b1
      # deepseek-v3-b2 kimi-linear-small; lanec compile --no-fold-norms of the last four's forms into
      # build/plans/NAME-no-fold.plan; carry build/gpu, build/plans, .whl; about 8 minutes)
      gemv_norm_cases norm-fold || { status=1; continue; }
      for plan in kimi-kda-b1 dense-small qwen-next-b1 deepseek-v3-b2 kimi-linear-small; do
        echo "$plan: $(timeout 60 python3 -m lanec.runtime build/plans/$plan.plan --check 2>&1 | tail -1)" \
          | tee -a "$logs/norm-fold.log"
      done
      echo "kimi-full-b1-c1k: $(timeout 150 python3 -m lanec.runtime build/plans/kimi-full-b1-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/norm-fold.log"
      for plan in dense-small qwen-next-b1 deepseek-v3-b2 kimi-linear-small; do
        timeout 200 python3 bench/plan_step.py build/plans/$plan-no-fold.plan build/plans/$plan.plan 2>&1 | tail -2 \
          | tee -a "$logs/norm-fold.log"
      done
      timeout 100 python3 bench/plan_step.py build/plans/kimi-kda-b1-no-fold-norms.plan build/plans/kimi-kda-b1.plan \
        2>&1 | tail -2 | tee -a "$logs/norm-fold.log"
      for round in 1 2; do
        for plan in kimi-full-b1-c1k-no-fold-norms kimi-full-b1-c1k; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec build/plans/$plan.plan 2>&1 \
            | tail -1)" | tee -a "$logs/norm-fold.log"
        done
      done ;;
    router-check)
      # the plans' --check after a router change (real size with GPU seeding, then the smaller plans of every
      # router's kind: 256 and 512 experts, grouped top-k, batch 8; carry build/plans; about 5 minutes)
      for plan in kimi-full-b1-c1k kimi-full-b8-c1k; do
        echo "$plan: $(timeout 150 python3 -m lanec.runtime build/plans/$plan.plan --check --gpu-seeding 2>&1 \
          | tail -1)" | tee -a "$logs/router-check.log"
      done
      for plan in kimi-linear-small qwen-next-b1 deepseek-v3-b2 kimi-b8 kimi-moe-b8; do
        echo "$plan: $(timeout 60 python3 -m lanec.runtime build/plans/$plan.plan --check 2>&1 | tail -1)" \
          | tee -a "$logs/router-check.log"
      done ;;
    units)
      # here: for u in 4 5 6 8 18; do python tests/gpu/variant_plan.py build/plans/kimi-full-b1-c1k.mlir \
      #   build/units/kimi-u$u.plan mixture_down experts=256,hidden=1024,rows=1,shared_hidden=1024,top_k=8,width=2304 \
      #   "{\"units\": $u}"; done   (then carry build/units and .whl)
      echo "kimi-u6: $(timeout 200 python3 -m lanec.runtime build/units/kimi-u6.plan --check --gpu-seeding 2>&1 \
        | tail -1)" | tee -a "$logs/units.log"
      for round in 1 2; do
        for plan in build/units/kimi-u*.plan; do
          echo "round $round $plan: $(timeout 100 python3 bench/model.py --side lanec "$plan" 2>&1 | tail -1)" \
            | tee -a "$logs/units.log"
        done
      done ;;
    partials)
      # queued (issue 10, MLA at batch 1 and 32k): the wgmma latent attention's chunks' rows in bf16 for
      # attention_combine (`partials`, LATENT_PARTIALS still fp32), half the 8.4 MB Kimi Linear writes and reads
      # back beside its 34 MB cache at batch 1 and 32k. The bf16 cases against the interpreter (and the fp32 ones
      # of the same shapes), compute-sanitizer on one, a whole plan with them --check, then bench/attention.py's MLA
      # rows with a bf16 column (here: python tests/gpu/build.py --only latent_wgmma attention_combine;
      # LANEC_ATTN_KINDS=mla LANEC_ATTN_PARTIALS=1 python bench/attention.py build; python -c "import
      # lanec.codegen.lower as f; f.LATENT_PARTIALS = 'bfloat16'; from lanec.cli import main; main(['compile',
      # 'examples/kimi-linear-small.mlir', '-o', 'build/plans/kimi-linear-small-bf16partials.plan'])"; carry build/gpu,
      # build/bench-attention-partials-mla, build/plans, .snap). Adopt (LATENT_PARTIALS = "bfloat16") if the rows
      # with many chunks are faster and none slower.
      timeout 240 python3 -m pytest tests/gpu/test_attention.py -q -rfE \
        -k "s128 or h128_l512_r64_p64_s8 or h12_l256_r32_p32_s2 or bf16" 2>&1 | tail -3 | tee "$logs/partials.log"
      cases_passed partials || { status=1; continue; }
      sanitize_case tests/gpu/test_attention.py "attention_matches_interpreter and b1_t1_h32_l512_nope_p16_32k_s128_bf16" \
        partials.log 120 || status=1
      echo "kimi-linear-small-bf16partials: $(timeout 120 python3 -m lanec.runtime \
        build/plans/kimi-linear-small-bf16partials.plan --check 2>&1 | tail -1)" | tee -a "$logs/partials.log"
      LANEC_ATTN_KINDS=mla LANEC_ATTN_PARTIALS=1 timeout 300 python3 bench/attention.py 2>&1 \
        | tee "$logs/bench-partials.log" | grep "^| " || status=1
      # and where the q8_0 dense step's 98 us go beside its bf16 plan's 127 (issue 14's 1.6x): each launch's time
      # (carry build/plans' dense-small and dense-small-q8)
      for plan in dense-small dense-small-q8; do
        timeout 60 python3 -m lanec.runtime "build/plans/$plan.plan" --profile 2>&1 | tee "$logs/profile-$plan.log" \
          | tail -25
      done ;;
    latent-rows)
      timeout 200 python3 -m pytest tests/gpu/test_attention.py -q -rfE -k "r8 or r16 or 1k_s" 2>&1 | tail -3 \
        | tee "$logs/latent-rows.log"
      cases_passed latent-rows || { status=1; continue; }
      sanitize_case tests/gpu/test_attention.py "latent_wgmma and b1_t1_h32_l512_r64_p64_1k_s16_bf16_r8" \
        latent-rows.log 120 || status=1
      echo "kimi-full-b1-c1k: $(timeout 120 python3 -m lanec.runtime build/plans/kimi-full-b1-c1k.plan --check \
        --gpu-seeding 2>&1 | tail -1)" | tee -a "$logs/latent-rows.log"
      LANEC_ATTN_KINDS=mla LANEC_ATTN_CONTEXTS=1024,4096 LANEC_ATTN_MLA="kimi-linear-576,deepseek-v3,deepseek-v3 tp8" \
        LANEC_ATTN_PAGE=64 LANEC_ATTN_ROWS=8,16 LANEC_ATTN_SPLITS=4,8,32,64 LANEC_ATTN_BATCHES=1,8 \
        LANEC_ATTN_PARTIALS=1 timeout 300 python3 bench/attention.py 2>&1 | tee "$logs/bench-latent-rows.log" \
        | grep -v "^| " || status=1 ;;
    bench-gemm)
      python3 bench/gemm.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/bench-gemm.log" || status=1 ;;
    gemv)
      python3 bench/gemv.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/gemv.log" ;;
    *)
      echo "unknown phase $phase: check, plans, fold-gate, rope-pair, cluster-combine, embed-norm, q8-rows, grid1, grid2, grid3, time, kda, gemv, attention, sanitize, real, tp, tp-model, pending, bench-attention, bench-cluster, bench-mixture, bench-gemm, tiles, wide-ab, occ-ab, epilogue, gemm-chain, quotient, partials, occ-split, tma-table, bench-linear, bench-model, bench-q8, bench-rope or bench-seeded"
      status=2 ;;
  esac
done
exit $status
