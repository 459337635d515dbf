#!/bin/bash
# One device call (issues 4 and 5): verification of all programs on the GPU, the schedule tests,
# the side-by-side with GT4Py's GPU backends and the schedule sweep, all in ~9 minutes.
#
#   run(carry=[".whl", ".devcache"], timeout_s=600,
#       command="bash scripts/device/run_verify_sweep.sh")
#
# Phase 1 (CPU-heavy, in parallel): verification pool and `pytest -m gpu tests/schedule` hold a
# shared claim on the GPU lock; peers (gtfn_gpu, dace_gpu, icoforge-cuda) compile and the sweep
# compiles its NVRTC modules meanwhile. Phase 2: each timing takes the lock exclusively, so
# timings never share the GPU with each other or with the verification.
# Everything lands in $OUT; the last lines printed are the short tables.
# Budget knobs (environment): VERIFY_S, PYTEST_S (time limits), PEER_LEVELS_DACE120=0 to skip.

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

# phase 1: verification + schedule tests, holding the lock (shared by their children)
(
  flock -x 9
  stamp "verification + schedule tests start"
  timeout ${VERIFY_S:-330} python3 scripts/device/gpu_verify_and_bench.py --jobs 6 --gtfn-for none --skip-bench --seeds R2B4=11,R2B6=12 \
      > $OUT/verify.log 2>&1 &
  timeout ${PYTEST_S:-330} python3 -m pytest -m gpu tests/schedule tests/perf -q -n 3 -p no:cacheprovider \
      > $OUT/pytest-gpu.log 2>&1 &
  wait
  stamp "verification + schedule tests done"
) 9>>$LOCK &
sleep 2

# peers: GT4Py's backends and ours through GT4Py's call path
BIG4="vertically_implicit_solver_at_predictor_step compute_rho_theta_pgrad_and_update_vn compute_advection_in_horizontal_momentum compute_horizontal_velocity_quantities_and_fluxes"
for p in $BIG4; do
  for b in icoforge-cuda gtfn_gpu dace_gpu; do
    python3 scripts/device/side_by_side.py peer $b $p 80 --lock $LOCK >> $OUT/run.log 2>&1 &
  done
  if [ "${PEER_LEVELS_DACE120:-1}" = 1 ]; then
    python3 scripts/device/side_by_side.py peer dace_gpu $p 120 --lock $LOCK >> $OUT/run.log 2>&1 &
  fi
done
python3 scripts/device/side_by_side.py sweep big4 80 120 --lock $LOCK --jobs 4 >> $OUT/run.log 2>&1 &
SWEEP=$!

# whatever is still compiling at the limit is stopped; what finished is reported
( sleep ${ALL_S:-520}; stamp "time limit: stopping"; pkill -f side_by_side.py ) &
KILLER=$!
wait $SWEEP
stamp "sweep done; waiting for peers"
while pgrep -f "side_by_side.py peer" > /dev/null; do sleep 2; done
kill $KILLER 2>/dev/null
stamp "all done"

tail -3 $OUT/pytest-gpu.log
grep -E "^(PASS|FAIL|ERROR)" $OUT/verify.log | awk '{print $1, $3, $4}' | sort | uniq -c   # status grid backend
grep -E "FAIL|ERROR" $OUT/verify.log | head -5
grep -E "ERROR|Traceback" $OUT/run.log | head -5
python3 scripts/device/side_by_side.py report $OUT
