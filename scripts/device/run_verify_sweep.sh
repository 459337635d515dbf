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
# $OUT gets all.tgz (everything), side_by_side.md and verify.log; the last lines printed are the
# short tables.
# Knobs (environment): VERIFY_S, PYTEST_S, ALL_S (time limits), VERIFY_JOBS, VERIFY_FILE, PYTEST_PATHS
# (empty: no tests), VERIFY_SCHEDULE (icoforge-cuda's ProgramSchedule as JSON for the verification;
# default: the vendor default), DIAG=1 (+ DIAG_S): scripts/device/diag_events.py at the end,
# PEERS ("BACKEND:PROGRAM:LEVELS ..."), SWEEP ("PROGRAMS LEVELS..."), ROOFLINE_BEFORE_S.
# 2026-11-29 s3: sixteen peers + six verification workers + pytest ran the host out of memory
# (the verification pool broke); peers now hold their inputs only within one of 4 slots.

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
# GT4Py's own build caches: one compile per program even if two processes ask
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
# our translation cache computed on the workstation (GT4Py passes), if carried
[ -d .devcache ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
# every result file goes to $W, snapshotted into $OUT/all.tgz (at most 8 files come back, and
# a call cut at its limit returns $OUT as it is)
W=/tmp/work; mkdir -p $W
export OUT_FINAL=$OUT OUT=$W   # side_by_side.py and gpu_verify_and_bench.py write under $OUT
snapshot_loop $W $OUT_FINAL &
SNAP=$!
LOCK=/tmp/gpu.lock; : > $LOCK

stamp "grids"
python3 -c "
from icoforge.grids import load_grid
for g in ('R2B4', 'R2B6'): load_grid(g, levels=80, show_progress=False)
" || exit 1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv

# phase 1: verification + GPU schedule tests, holding the lock (shared by their children)
(
  flock -x 9
  stamp "verification + GPU tests start"
  OMP_NUM_THREADS=3 timeout ${VERIFY_S:-280} python3 scripts/device/gpu_verify_and_bench.py --jobs ${VERIFY_JOBS:-4} --gtfn-for none \
      --skip-bench --seeds R2B4=11,R2B6=12 --programs @${VERIFY_FILE:-scripts/device/verify-order.txt} \
      ${VERIFY_SCHEDULE:+--schedule "$VERIFY_SCHEDULE"} > $W/verify.log 2>&1 &
  PYTEST_PATHS=${PYTEST_PATHS-tests/schedule tests/perf/test_gpu_timing.py}
  if [ -n "$PYTEST_PATHS" ]; then
    timeout ${PYTEST_S:-280} python3 -m pytest -m gpu $PYTEST_PATHS -q -n 2 -p no:cacheprovider > $W/pytest-gpu.log 2>&1 &
  fi
  wait
  stamp "verification + GPU tests done"
) 9>>$LOCK &
sleep 2

# peers: GT4Py's backends and ours through GT4Py's call path, each "BACKEND:PROGRAM:LEVELS"
BIG4="vertically_implicit_solver_at_predictor_step compute_rho_theta_pgrad_and_update_vn compute_advection_in_horizontal_momentum compute_horizontal_velocity_quantities_and_fluxes"
if [ -z "${PEERS:-}" ]; then
  PEERS=""
  for p in $BIG4; do for b in icoforge-cuda gtfn_gpu dace_gpu; do PEERS="$PEERS $b:$p:120"; done; done
fi
for spec in $PEERS; do
  IFS=: read -r b p L <<< "$spec"
  python3 scripts/device/side_by_side.py peer $b $p $L --lock $LOCK >> $W/run.log 2>&1 &
done
# SWEEP: "PROGRAMS LEVELS..." (first level count: every schedule; the others: the main knobs)
python3 scripts/device/side_by_side.py sweep ${SWEEP:-big4 120 80} --lock $LOCK --jobs 4 >> $W/run.log 2>&1 &
SWEEP_PID=$!

# whatever is still compiling at the limit is stopped; what finished is reported
deadline ${ALL_S:-500} "side_by_side.py|gpu_verify_and_bench" &
KILLER=$!
wait $SWEEP_PID
stamp "sweep done; waiting for peers"
while pgrep -f "side_by_side.py peer" > /dev/null; do sleep 2; done
stamp "peers done"
if [ $(( $(date +%s) - ICF_T0 )) -lt ${ROOFLINE_BEFORE_S:-430} ]; then
  flock -x $LOCK timeout 90 python3 -m icoforge roofline vertically_implicit_solver_at_predictor_step --grid R2B6 --levels 80 \
      --backend icoforge-cuda --repeat 20 --out $W/roofline-predictor-R2B6-80.png > $W/roofline-predictor.log 2>&1
  stamp "predictor roofline done (rc $?)"
  flock -x $LOCK timeout 90 python3 -m icoforge profile compute_horizontal_velocity_quantities_and_fluxes --grid R2B4 --levels 80 \
      --tool ncu --run --out $W/ncu-horizontal-velocity > $W/ncu.log 2>&1
  stamp "ncu done (rc $?)"
fi
if [ "${DIAG:-0}" = 1 ]; then   # the granule's GPU event anomaly (issue 7): R2B3 fields + granule, ~2 min
  flock -x $LOCK timeout ${DIAG_S:-150} python3 scripts/device/diag_events.py R2B3 10 > $W/diag-events.log 2>&1
  stamp "event diagnosis done (rc $?)"
fi
stop_bg $KILLER $SNAP
stamp "all done"

tail -3 $W/pytest-gpu.log 2>/dev/null
tail -12 $W/roofline-predictor.log 2>/dev/null
tail -15 $W/ncu.log 2>/dev/null
tail -8 $W/diag-events.log 2>/dev/null
grep -E "^(PASS|FAIL|ERROR)" $W/verify.log | awk '{print $1, $3, $4}' | sort | uniq -c   # status grid backend
grep -E "FAIL|ERROR" $W/verify.log | head -5
grep -E "ERROR|Traceback" $W/run.log | head -5
python3 scripts/device/side_by_side.py report $W
OUT=$OUT_FINAL
tar czf $OUT/all.tgz -C $W . && rm -f $OUT/.all.tgz.tmp && cp $W/side_by_side.md $W/verify.log $OUT/ 2>/dev/null
ls -la $OUT
