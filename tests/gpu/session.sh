#!/usr/bin/env bash
# One check-and-time session on the GPU machine (run from the repository root there, with build/
# carried, and .whl/ for the fla anchors):
#
#   here:  python tests/gpu/build.py && python tests/gpu/cases/kda_split.py --set bench \
#          && python bench/gemv.py build && pip download --no-deps fla-core==0.6.0 einops -d .whl
#   there: bash tests/gpu/session.sh            # tests, whole plans, benches; logs under $OUT
#
# Every GPU test (kernels against the interpreter, whole plans with --check), each plan's step
# time, the dense step with and without PDL and graph, then the KDA and GEMV benches, which also
# write the fastest schedules they timed (copy $OUT/schedules.json to lanec/codegen/schedules.json).
set -uo pipefail
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
logs=${OUT:-build/logs}
mkdir -p "$logs"
status=0
if ls .whl/*.whl >/dev/null 2>&1; then  # fla: the KDA anchors, and naive_recurrent_kda for the tests
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
python3 -m pytest tests/gpu -q -rfE 2>&1 | tee "$logs/pytest.log" || status=1
for plan in build/plans/*.plan; do
  echo "== $plan"
  python3 -m lanec.runtime "$plan" --steps 20 2>&1 | tail -1
done
python3 bench/plan_step.py build/plans/dense-small.plan 2>&1 | tee "$logs/plan_step.log"
if python3 -c "import fla" 2>/dev/null; then
  python3 bench/kda.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/kda.log"
fi
python3 bench/gemv.py --write-table "$logs/schedules.json" 2>&1 | tee "$logs/gemv.log"
exit $status
