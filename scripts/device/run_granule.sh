#!/bin/bash
# One device call (issues 4, 6, 7): the greenline granule side by side on R2B6/80 (icoforge-cuda,
# gtfn_gpu, dace_gpu as parallel processes that take turns on the GPU), the granule's roofline,
# and, while the granule processes compute static fields and compile (the GPU is idle then), the
# GPU verification of the programs in $VERIFY_FILE, the predictor's roofline and one ncu run.
#
#   scripts/device/precompute_granule.py R2B6/80 && scripts/device/pack_cache.sh   # here, first
#   run(carry=[".whl", ".devcache"], timeout_s=600, command="bash scripts/device/run_granule.sh")
#
# Knobs (environment):
#   ALL_S        stop everything this many seconds after the command started (default 480: the
#                summary needs ~20 s and the device tool's limit counts setup too)
#   PEERS        GT4Py backends beside ours ("gtfn_gpu dace_gpu"); CONFIG grid and levels ("R2B6 80")
#   BACKEND      ours (icoforge-cuda); FACTORY backend of icon4py's static-field factories
#   GL_EXTRA     more greenline options for every backend, e.g. --cold
#   COMPARE_REFS fingerprints of earlier calls (same inputs) to compare ours with
#   ROOFLINE=0   no granule roofline after our greenline; GPU_EXTRAS=0 no predictor roofline, no ncu
#   OURS_AGAIN=1 when the peers are done, run ours once more, alone and warm: its step times are not
#                disturbed by the peers' compiles (the first run's JSON is kept as *-beside-peers.json)
#   VERIFY_FILE  programs to verify on the GPU meanwhile (empty: none), VERIFY_S its time limit
#   ICF_LOCAL=1, WORK  a dry run on the workstation: ICF_LOCAL=1 CONFIG="R2B3 10"
#                BACKEND=icoforge-cpu PEERS="" GPU_EXTRAS=0 bash scripts/device/run_granule.sh
# History: 2026-11-29 s2, the static fields alone took ~8 min here (a Python roundtrip fallback
# for two geometry programs, since lowered by icoforge; ~3.5 min on the workstation after that).
# s3: this script (then without snapshots) ran into the tool's 540 s limit: icoforge-cuda's
# granule had not finished after ~465 s (fields + compile), and nothing came back.
# Results: $OUT/summary.txt (short tables), $OUT/greenline.md (merged side by side), $OUT/all.tgz.

if [ "${ICF_LOCAL:-0}" = 1 ]; then   # a dry run of this script on the workstation (small CONFIG, CPU backends)
  export PATH=$PWD/.venv/bin:$PATH OUT=${OUT:-/tmp/icf-out} ICF_T0=$(date +%s); mkdir -p $OUT
else
  source scripts/device/setup.sh
fi
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
# every translation (passes cached or computed) and every module load on stderr, with the time;
# the GTIR of a passes-cache miss under trace/ (to see why a carried cache did not serve it)
export ICOFORGE_TRACE=${WORK:-/tmp/work}/trace
[ "${ICF_LOCAL:-0}" != 1 ] && [ -d .devcache ] && [ -n "${ICOFORGE_CACHE:-}" ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ \
  && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
W=${WORK:-/tmp/work}; mkdir -p $W
snapshot_loop $W $OUT &   # $W -> $OUT/all.tgz every 20 s: a call cut at its limit still returns results
SNAP=$!
LOCK=/tmp/gpu.lock; : > $LOCK
read -r GRID LEVELS <<< "${CONFIG:-R2B6 80}"
TAG=$GRID-$LEVELS
OURS_BACKEND=${BACKEND:-icoforge-cuda}
GL="python3 -m icoforge greenline --steps 5 --warmup 1 --profile-steps 1 --only-used-variants --gpu-lock $LOCK ${FACTORY:+--factory-backend $FACTORY} ${GL_EXTRA:-}"

stamp "grids"
python3 -c "
from icoforge.grids import load_grid
for g in ('$GRID', 'R2B4'): load_grid(g, levels=80 if g == 'R2B4' else $LEVELS, show_progress=False)
" || exit 1

# 1. our granule first: it computes the static fields that the GT4Py processes then read from the
#    cache (file lock); then the granule's roofline (fields and kernels cached by then)
(
  $GL --grid $GRID --levels $LEVELS --backend $OURS_BACKEND --save-reference $W/ref-icoforge-$TAG.json \
      --json $W/gl-$TAG-$OURS_BACKEND.json > $W/gl-$TAG-$OURS_BACKEND.log 2>&1
  stamp "$OURS_BACKEND greenline done (rc $?)"
  [ "${ROOFLINE:-1}" = 1 ] || exit 0
  python3 -m icoforge roofline greenline --grid $GRID --levels $LEVELS --backend $OURS_BACKEND --gpu-lock $LOCK \
      --out $W/roofline-greenline-$TAG.png > $W/roofline-greenline.log 2>&1
  stamp "granule roofline done (rc $?)"
) &
OURS=$!
sleep 5
for b in ${PEERS-gtfn_gpu dace_gpu}; do
  $GL --grid $GRID --levels $LEVELS --backend $b --save-reference $W/ref-$b-$TAG.json \
      --json $W/gl-$TAG-$b.json > $W/gl-$TAG-$b.log 2>&1 &
done

# 2. meanwhile, holding the GPU lock (the granules take it only for their measurements)
(
  flock -x 9
  if [ -n "${VERIFY_FILE:-}" ]; then
    OMP_NUM_THREADS=3 verify_gpu ${VERIFY_S:-200} 2 $VERIFY_FILE $W > $W/verify.log 2>&1  # lib.sh: icoforge verify-all
    stamp "verification done (rc $?)"
  fi
  if [ "${GPU_EXTRAS:-1}" = 1 ]; then
    timeout 100 python3 -m icoforge roofline vertically_implicit_solver_at_predictor_step --grid R2B6 --levels 80 \
        --backend icoforge-cuda --repeat 20 --out $W/roofline-predictor-R2B6-80.png > $W/roofline-predictor.log 2>&1
    stamp "predictor roofline done (rc $?)"
    timeout 100 python3 -m icoforge profile compute_horizontal_velocity_quantities_and_fluxes --grid R2B4 --levels 80 \
        --tool ncu --run --out $W/ncu-horizontal-velocity > $W/ncu.log 2>&1
    stamp "ncu done (rc $?)"
  fi
) 9>>$LOCK &

deadline ${ALL_S:-480} "icoforge (greenline|roofline|profile|verify-all)|ncu " &
KILLER=$!
wait $OURS
stamp "our chain done; waiting for the others"
while pgrep -f "icoforge (greenline|profile|roofline|verify-all)" > /dev/null; do sleep 2; done
if [ "${OURS_AGAIN:-0}" = 1 ] && [ -f $W/gl-$TAG-$OURS_BACKEND.json ]; then
  for x in json log; do mv $W/gl-$TAG-$OURS_BACKEND.$x $W/gl-$TAG-$OURS_BACKEND-beside-peers.$x; done
  mv $W/ref-icoforge-$TAG.json $W/ref-icoforge-$TAG-beside-peers.json
  stamp "ours again, alone"
  $GL --grid $GRID --levels $LEVELS --backend $OURS_BACKEND --save-reference $W/ref-icoforge-$TAG.json \
      --json $W/gl-$TAG-$OURS_BACKEND.json > $W/gl-$TAG-$OURS_BACKEND.log 2>&1
  stamp "ours again done (rc $?)"
  if [ ! -s $W/ref-icoforge-$TAG.json ]; then   # cut or failed: the first run's results stand
    mv $W/gl-$TAG-$OURS_BACKEND.log $W/gl-$TAG-$OURS_BACKEND-again-failed.log 2>/dev/null
    cp $W/gl-$TAG-$OURS_BACKEND-beside-peers.json $W/gl-$TAG-$OURS_BACKEND.json
    cp $W/ref-icoforge-$TAG-beside-peers.json $W/ref-icoforge-$TAG.json
  fi
fi
stop_bg $KILLER $SNAP
stamp "all done"

{
  echo "== greenline $TAG side by side =="
  python3 -m icoforge greenline-merge $(ls $W/gl-$TAG-*.json | grep -v beside) --markdown $OUT/greenline.md
  echo "== verification fingerprints: each GT4Py backend vs $OURS_BACKEND ($TAG) =="
  for b in ${PEERS-gtfn_gpu dace_gpu}; do
    [ -f $W/ref-$b-$TAG.json ] && python3 -m icoforge.granule.golden compare $W/ref-$b-$TAG.json $W/ref-icoforge-$TAG.json
  done
  for r in ${COMPARE_REFS:-}; do   # fingerprints carried from earlier calls (same seeds, same inputs)
    echo "-- $OURS_BACKEND now vs $r"
    python3 -m icoforge.granule.golden compare $r $W/ref-icoforge-$TAG.json
  done
  verify_summary $W
  tail -30 $W/roofline-greenline.log
  tail -20 $W/roofline-predictor.log 2>/dev/null
  tail -25 $W/ncu.log 2>/dev/null
} > $OUT/summary.txt 2>&1
for f in $W/*.log; do echo "--- $f"; grep -E "Error|error|Traceback" $f | head -3; done
tar czf $OUT/all.tgz -C $W . 2>/dev/null; rm -f $OUT/.all.tgz.tmp
ls -la $OUT
cut -c1-220 $OUT/summary.txt | tail -110
