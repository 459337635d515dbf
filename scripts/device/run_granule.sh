#!/bin/bash
# One device call (issues 6 and 7): the greenline granule side by side on R2B6/80 (icoforge-cuda,
# gtfn_gpu, dace_gpu as three parallel processes that take turns on the GPU), icoforge-cuda on
# R2B6/120 and the regional grid, the predictor's roofline, the granule's roofline and one ncu run.
#
#   run(carry=[".whl", ".devcache"], timeout_s=600, command="bash scripts/device/run_granule.sh")
#
# Budget knobs (environment): ALL_S (stop everything after this many seconds, default 530),
# PEERS ("gtfn_gpu dace_gpu"), EXTRA (1: also R2B6/120 and REGIONAL/80 with icoforge-cuda),
# FACTORY (see below). On 2026-11-29 this whole script did not fit one call: the static fields
# alone took ~8 min; see README.md ("What the 2026-11-29 session learned").
# Results: $OUT/summary.txt (the short tables), $OUT/greenline-R2B6-80.md (merged side by side),
# $OUT/all.tgz (every JSON report, log, roofline PNG/Markdown and the ncu CSV).

source scripts/device/setup.sh
set -u
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
[ -d .devcache ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
W=/tmp/work; mkdir -p $W
LOCK=/tmp/gpu.lock; : > $LOCK
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
# FACTORY: backend of icon4py's static-field factories, the same for every process (the fields'
# cache key includes it). The default took ~8 min on R2B6/80 there (2026-11-29); try gtfn_gpu.
GL="python3 -m icoforge greenline --steps 5 --warmup 1 --profile-steps 1 --only-used-variants --gpu-lock $LOCK --factory-backend ${FACTORY:-icoforge-cpu+roundtrip-passes}"

stamp "grids"
python3 -c "
from icoforge.grids import load_grid
for g in ('R2B6', 'REGIONAL', 'R2B4'): load_grid(g, levels=80, show_progress=False)
" || exit 1

# 1. our granule first: it computes the static fields that the GT4Py processes then read from the cache
(
  $GL --grid R2B6 --levels 80 --backend icoforge-cuda --save-reference $W/ref-icoforge-R2B6-80.json \
      --json $W/gl-R2B6-80-icoforge-cuda.json > $W/gl-R2B6-80-icoforge-cuda.log 2>&1
  stamp "icoforge-cuda R2B6/80 done (rc $?)"
  if [ "${EXTRA:-1}" = 1 ]; then
    $GL --grid R2B6 --levels 120 --backend icoforge-cuda --json $W/gl-R2B6-120-icoforge-cuda.json > $W/gl-R2B6-120-icoforge-cuda.log 2>&1
    stamp "icoforge-cuda R2B6/120 done (rc $?)"
    $GL --grid REGIONAL --levels 80 --backend icoforge-cuda --json $W/gl-REGIONAL-80-icoforge-cuda.json > $W/gl-REGIONAL-80-icoforge-cuda.log 2>&1
    stamp "icoforge-cuda REGIONAL/80 done (rc $?)"
  fi
  flock -x $LOCK python3 -m icoforge roofline vertically_implicit_solver_at_predictor_step --grid R2B6 --levels 80 --backend icoforge-cuda \
      --repeat 20 --out $W/roofline-predictor-R2B6-80.png > $W/roofline-predictor.log 2>&1
  stamp "predictor roofline done (rc $?)"
  flock -x $LOCK python3 -m icoforge roofline greenline --grid R2B6 --levels 80 --backend icoforge-cuda \
      --out $W/roofline-greenline-R2B6-80.png > $W/roofline-greenline.log 2>&1
  stamp "granule roofline done (rc $?)"
  flock -x $LOCK python3 -m icoforge profile compute_horizontal_velocity_quantities_and_fluxes --grid R2B4 --levels 80 \
      --tool ncu --run --out $W/ncu-horizontal-velocity > $W/ncu.log 2>&1
  stamp "ncu done (rc $?)"
) &
OURS=$!

# 2. GT4Py's backends: each waits for the static fields (file lock in the cache), compiles, then
#    takes the GPU lock for its timed steps; each records the verification fingerprint
sleep 5
for b in ${PEERS:-gtfn_gpu dace_gpu}; do
  $GL --grid R2B6 --levels 80 --backend $b --save-reference $W/ref-$b-R2B6-80.json \
      --json $W/gl-R2B6-80-$b.json > $W/gl-R2B6-80-$b.log 2>&1 &
done

( sleep ${ALL_S:-530}; stamp "time limit: stopping"; pkill -f "icoforge (greenline|roofline|profile)"; pkill -f ncu ) &
KILLER=$!
wait $OURS
stamp "our chain done; waiting for GT4Py's backends"
while pgrep -f "icoforge greenline" > /dev/null; do sleep 2; done
kill $KILLER 2>/dev/null
stamp "all done"

{
  echo "== greenline R2B6/80 side by side =="
  ls $W/gl-R2B6-80-*.json
  python3 -m icoforge greenline-merge $W/gl-R2B6-80-*.json --markdown $OUT/greenline-R2B6-80.md
  for f in $W/gl-R2B6-120-icoforge-cuda.json $W/gl-REGIONAL-80-icoforge-cuda.json; do
    [ -f $f ] && echo "== $f ==" && python3 -m icoforge greenline-merge $f
  done
  echo "== verification fingerprints: icoforge-cuda vs each GT4Py backend (R2B6/80) =="
  for b in ${PEERS:-gtfn_gpu dace_gpu}; do
    [ -f $W/ref-$b-R2B6-80.json ] && python3 -m icoforge.granule.golden compare $W/ref-$b-R2B6-80.json $W/ref-icoforge-R2B6-80.json
  done
  tail -25 $W/roofline-predictor.log
  tail -30 $W/roofline-greenline.log
  tail -25 $W/ncu.log
} > $OUT/summary.txt 2>&1
for f in $W/*.log; do echo "--- $f"; grep -E "Error|error|Traceback" $f | head -3; done
tar czf $OUT/all.tgz -C $W . 2>/dev/null
ls -la $OUT
cat $OUT/summary.txt | cut -c1-220 | tail -120
