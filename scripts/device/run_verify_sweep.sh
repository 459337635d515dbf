#!/bin/bash
# One device call (issues 4, 5, 7): verification of all programs on the GPU, the GPU tests, the
# side-by-side with GT4Py's GPU backends, the schedule sweep and the predictor's roofline, ~9 min.
#
#   run(carry=[".whl", ".devcache"], timeout_s=600,
#       command="bash scripts/device/run_verify_sweep.sh")
#
# Phase 1 (CPU-heavy, in parallel): verification pool and `pytest -m gpu tests/schedule` hold a
# shared claim on the GPU lock; peers (gtfn_gpu, dace_gpu, icoforge-cuda) compile and the sweep
# compiles its NVRTC modules meanwhile. Phase 2: each timing takes the lock exclusively, so
# timings never share the GPU with each other or with the verification.
# Everything lands in $OUT; the last lines printed are the short tables.
# Budget knobs (environment): VERIFY_S, PYTEST_S, ALL_S (time limits), PEER_LEVELS, DACE_LEVELS,
# SWEEP_LEVELS (first: every schedule; others: the main knobs), ROOFLINE_BEFORE_S.

source scripts/device/setup.sh
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
# GT4Py's own build caches: one compile per program even if two processes ask
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
# our translation cache computed on the workstation (GT4Py passes), if carried
[ -d .devcache ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
LOCK=/tmp/gpu.lock; : > $LOCK
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }

stamp "grids"
python3 -c "
from icoforge.grids import load_grid
for g in ('R2B4', 'R2B6'): load_grid(g, levels=80, show_progress=False)
" || exit 1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv

# phase 1: verification + GPU tests, holding the lock (shared by their children)
(
  flock -x 9
  stamp "verification + GPU tests start"
  timeout ${VERIFY_S:-360} python3 scripts/device/gpu_verify_and_bench.py --jobs 6 --gtfn-for none --skip-bench --seeds R2B4=11,R2B6=12 \
      --programs @scripts/device/verify-order.txt > $OUT/verify.log 2>&1 &
  timeout ${PYTEST_S:-300} python3 -m pytest -m gpu tests -q -n 3 -p no:cacheprovider \
      > $OUT/pytest-gpu.log 2>&1 &
  wait
  stamp "verification + GPU tests done"
  timeout 120 python3 scripts/device/diag_events.py R2B3 10 > $OUT/diag-events.log 2>&1
  stamp "event diagnosis done (rc $?)"
) 9>>$LOCK &
sleep 2

# peers: GT4Py's backends and ours through GT4Py's call path (PEER_LEVELS for all three,
# DACE_LEVELS for dace_gpu alone: the ratio of the sweep's second level count)
BIG4="vertically_implicit_solver_at_predictor_step compute_rho_theta_pgrad_and_update_vn compute_advection_in_horizontal_momentum compute_horizontal_velocity_quantities_and_fluxes"
for p in $BIG4; do
  for L in ${PEER_LEVELS:-120}; do
    for b in icoforge-cuda gtfn_gpu dace_gpu; do
      python3 scripts/device/side_by_side.py peer $b $p $L --lock $LOCK >> $OUT/run.log 2>&1 &
    done
  done
  for L in ${DACE_LEVELS:-80}; do
    python3 scripts/device/side_by_side.py peer dace_gpu $p $L --lock $LOCK >> $OUT/run.log 2>&1 &
  done
done
python3 scripts/device/side_by_side.py sweep big4 ${SWEEP_LEVELS:-120 80} --lock $LOCK --jobs 4 >> $OUT/run.log 2>&1 &
SWEEP=$!

# whatever is still compiling at the limit is stopped; what finished is reported
( sleep ${ALL_S:-530}; stamp "time limit: stopping"; pkill -f side_by_side.py; pkill -f gpu_verify_and_bench ) &
KILLER=$!
wait $SWEEP
stamp "sweep done; waiting for peers"
while pgrep -f "side_by_side.py peer" > /dev/null; do sleep 2; done
stamp "peers done"
if [ $(( $(date +%s) - T0 )) -lt ${ROOFLINE_BEFORE_S:-430} ]; then
  flock -x $LOCK timeout 90 python3 -m icoforge roofline vertically_implicit_solver_at_predictor_step --grid R2B6 --levels 80 \
      --backend icoforge-cuda --repeat 20 --out $OUT/roofline-predictor-R2B6-80.png > $OUT/roofline-predictor.log 2>&1
  stamp "predictor roofline done (rc $?)"
fi
kill $KILLER 2>/dev/null
stamp "all done"

tail -3 $OUT/pytest-gpu.log
tail -8 $OUT/diag-events.log
tail -12 $OUT/roofline-predictor.log 2>/dev/null
grep -E "^(PASS|FAIL|ERROR)" $OUT/verify.log | awk '{print $1, $3, $4}' | sort | uniq -c   # status grid backend
grep -E "FAIL|ERROR" $OUT/verify.log | head -5
grep -E "ERROR|Traceback" $OUT/run.log | head -5
python3 scripts/device/side_by_side.py report $OUT
# at most 8 files come back from $OUT: everything in one archive, the main tables beside it
tar czf /tmp/all.tgz -C $OUT . && find $OUT -type f ! -name side_by_side.md ! -name verify.log ! -name diag-events.log -delete \
  && mv /tmp/all.tgz $OUT/ && ls -la $OUT
