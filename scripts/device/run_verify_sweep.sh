#!/bin/bash
# One device call (issues 4, 5, 7): verification of all programs on the GPU, the GPU tests, the big
# programs side by side with GT4Py's GPU backends, the schedule search and the predictor's roofline, ~9 min.
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_verify_sweep.sh")
#
# Every step is an icoforge verb; this script runs them at once and serialises their timings:
# - verification: lib.sh's verify_gpu (`icoforge verify-all`, icoforge-cuda vs icoforge-cpu on
#   R2B4/80 seed 11, then R2B6/80 seed 12) and `pytest -m gpu`, together holding the GPU lock;
# - side by side: `icoforge run PROGRAM --backend B --gpu-lock` per "BACKEND:PROGRAM:LEVELS" of PEERS
#   (GT4Py's call path, same inputs: seed 0), at most PEER_JOBS processes at once;
# - schedule search: `icoforge tune PROGRAMS --gpu-lock` on R2B6 (the full space for the first level
#   count of SWEEP, the quick one for the others);
# each compiles while the others run and holds the lock only while it times (--gpu-lock), so no two
# timings share the GPU, nor a timing and the verification. Then, if time is left, the predictor's
# roofline and one ncu run, each holding the lock.
# $OUT gets all.tgz (everything, snapshotted while the work runs), verify-*.md, tune-*.md and
# summary.txt (printed last).
# Knobs (environment): VERIFY_S, PYTEST_S, ALL_S (time limits), VERIFY_JOBS, VERIFY_FILE, PYTEST_PATHS
# (empty: no tests), VERIFY_SCHEDULE (icoforge-cuda's ProgramSchedule as JSON for the verification;
# default: the vendor default), PEERS ("BACKEND:PROGRAM:LEVELS ..."), PEER_JOBS (4), SWEEP ("PROGRAMS
# LEVELS...", PROGRAMS big4 or a comma list), ROOFLINE_BEFORE_S. A carried .devcache (pack_cache.sh)
# is used if present.
# History: 2026-11-29 s3, sixteen peers + six verification workers + pytest ran the host out of
# memory (the verification pool broke); the peers then held their inputs within one of 4 slots, now
# at most PEER_JOBS peer processes run (each holds its inputs from before its compile to its end).
# Until 2026-12-05 the peers, the sweep and their tables were scripts/device/side_by_side.py
# (peer|sweep|report), the verification gpu_verify_and_bench.py, and DIAG=1 ran diag_events.py.

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
# GT4Py's own build caches: one compile per program even if two processes ask
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
# our translation cache computed on the workstation (GT4Py passes), if carried
[ -d .devcache ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
# every result file goes to $W, snapshotted into $OUT/all.tgz (a call cut at its limit returns $OUT as it is)
W=/tmp/work; mkdir -p $W
snapshot_loop $W $OUT &
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
  OMP_NUM_THREADS=3 verify_gpu ${VERIFY_S:-280} ${VERIFY_JOBS:-4} ${VERIFY_FILE:-scripts/device/verify-order.txt} $W > $W/verify.log 2>&1 &
  PYTEST_PATHS=${PYTEST_PATHS-tests/schedule tests/perf/test_gpu_timing.py}
  if [ -n "$PYTEST_PATHS" ]; then
    NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell timeout ${PYTEST_S:-280} python3 -m pytest -m gpu $PYTEST_PATHS -q -n 2 -p no:cacheprovider > $W/pytest-gpu.log 2>&1 &
  fi
  wait
  stamp "verification + GPU tests done"
) 9>>$LOCK &
sleep 2

# side by side: GT4Py's backends and ours through GT4Py's call path, each "BACKEND:PROGRAM:LEVELS"
BIG4="vertically_implicit_solver_at_predictor_step compute_rho_theta_pgrad_and_update_vn compute_advection_in_horizontal_momentum compute_horizontal_velocity_quantities_and_fluxes"
if [ -z "${PEERS:-}" ]; then
  PEERS=""
  for p in $BIG4; do for b in icoforge-cuda gtfn_gpu dace_gpu; do PEERS="$PEERS $b:$p:120"; done; done
fi
peer() {  # peer BACKEND:PROGRAM:LEVELS
  local b p L; IFS=: read -r b p L <<< "$1"
  python3 -m icoforge run $p --grid R2B6 --levels $L --backend $b --repeat 30 --gpu-lock $LOCK --wide \
    > $W/peer-$b-$p-$L.log 2>&1
  stamp "peer $b $p L$L: rc $? $(grep -m1 'compiled in' $W/peer-$b-$p-$L.log)"
}
export -f peer stamp; export W LOCK ICF_T0
printf '%s\n' $PEERS | xargs -P ${PEER_JOBS:-4} -I{} bash -c 'peer "$1"' _ {} >> $W/run.log 2>&1 &
PEERS_PID=$!
# SWEEP: "PROGRAMS LEVELS..." (first level count: the full search space; the others: the quick one)
read -r SWEEP_PROGRAMS SWEEP_LEVELS <<< "${SWEEP:-big4 120 80}"
[ "$SWEEP_PROGRAMS" = big4 ] && SWEEP_PROGRAMS=$BIG4
(
  space=full
  for L in $SWEEP_LEVELS; do
    python3 -m icoforge tune ${SWEEP_PROGRAMS//,/ } --grid R2B6 --levels $L --space $space --jobs 4 --gpu-lock $LOCK \
      --json $W/tune-R2B6-$L.json --markdown $W/tune-R2B6-$L.md --wide > $W/tune-R2B6-$L.log 2>&1
    stamp "tune R2B6/$L ($space space) done (rc $?)"
    space=quick
  done
) >> $W/run.log 2>&1 &
SWEEP_PID=$!

# whatever is still compiling at the limit is stopped; what finished is reported
deadline ${ALL_S:-500} "icoforge (verify-all|run|tune) " &
KILLER=$!
wait $SWEEP_PID
stamp "sweep done; waiting for peers"
wait $PEERS_PID
stamp "peers done"
if [ $(( $(date +%s) - ICF_T0 )) -lt ${ROOFLINE_BEFORE_S:-430} ]; then
  flock -x $LOCK timeout 90 python3 -m icoforge roofline vertically_implicit_solver_at_predictor_step --grid R2B6 --levels 80 \
      --backend icoforge-cuda --repeat 20 --out $W/roofline-predictor-R2B6-80.png > $W/roofline-predictor.log 2>&1
  stamp "predictor roofline done (rc $?)"
  flock -x $LOCK timeout 90 python3 -m icoforge profile compute_horizontal_velocity_quantities_and_fluxes --grid R2B4 --levels 80 \
      --tool ncu --run --out $W/ncu-horizontal-velocity > $W/ncu.log 2>&1
  stamp "ncu done (rc $?)"
fi
stop_bg $KILLER $SNAP
stamp "all done"

{
  tail -3 $W/pytest-gpu.log 2>/dev/null
  tail -12 $W/roofline-predictor.log 2>/dev/null
  tail -15 $W/ncu.log 2>/dev/null
  verify_summary $W
  grep -h -E "ERROR|Traceback" $W/peer-*.log $W/tune-*.log 2>/dev/null | head -5
  echo "== side by side, R2B6 (icoforge run: GT4Py's call path, median of 30 calls under the GPU lock) =="
  grep -h "^\[.*\] peer " $W/run.log
  echo "== schedule search (icoforge tune; tables in tune-*.md) =="
  grep -H -E "^## |^Whole call" $W/tune-*.md 2>/dev/null
} > $W/summary.txt 2>&1
tar czf $OUT/all.tgz -C $W . && rm -f $OUT/.all.tgz.tmp && cp $W/summary.txt $W/verify-*.md $W/tune-*.md $OUT/ 2>/dev/null
ls -la $OUT
cat $OUT/summary.txt
