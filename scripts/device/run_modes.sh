#!/bin/bash
# One device call (issue 22): the greenline as users run it. Parallel greenline processes that take
# turns on the GPU (--gpu-lock): icoforge-cuda and each peer in Python's optimized mode (the default
# since 2026-12-01), icoforge-cuda once more in debug mode (no -O: GT4Py checks every call's
# arguments), then one merged side-by-side report with host/device time per program call and the
# GPU's idle fraction per substep, and the granule-latest record. Setups run at the same time and
# hold the lock shared: every process measures after all have set up (session 14: one timed beside
# the others' setup was 25 % slow), so a call takes the slowest setup plus the sum of the measurements.
#
#   run(carry=[".whl"], timeout_s=600, command="CONFIG='REGIONAL 80' bash scripts/device/run_modes.sh")
#
# Knobs: CONFIG ("REGIONAL 80"), PEERS ("dace_gpu"), DEBUG_RUN (1: also ours without -O),
#        AB ("LABEL=SCHEDULE_JSON": also ours with that schedule, e.g. AB='fused={"fuse": ["*"]}',
#            fingerprints compared with the default run; bit-identical expected),
#        AB_ARGS (more greenline arguments of the AB run, e.g. AB='substep={"fuse": ["*"]}'
#            AB_ARGS=--substep-fusion: each substep as one program fused across programs; add
#            "tuned": true to keep the package's tuned entries, as the default has them),
#        AB_ENV (environment of the AB run, e.g. AB='full={}' AB_ENV=ICOFORGE_EARLY_GTIR=0: the
#            full GT4Py pass list against the default early path; another copy of the package needs
#            AB_ENV="PYTHONSAFEPATH=1 PYTHONPATH=/tmp/site:/tmp/ab": `python3 -m` puts the repository
#            root first on sys.path otherwise, and the copy is never imported (session 35)),
#        AB2, AB2_ENV, AB2_ARGS, AB3, AB3_ENV, AB3_ARGS (a second and third A/B run beside the first, e.g. the inline and the temporaries
#            A/Bs of REGIONAL/80 in one call),
#        INLINE_OFF_RUN (0; 1: the same as AB='inline-off={"inline": "off"}'),
#        OURS (1; 0: no icoforge-cuda run, e.g. dace_gpu alone in a second call where the two do
#            not fit one fresh call: R2B6/120; on a warm machine the first call's report in /tmp/work is merged),
#        STEPS (20, as icon4py's benchmark), ROUNDS (1: the timed steps in that many turns per
#            process, taken in alternation through the lock; session 35: two processes of the same
#            code differed by 3.6 % timed one after the other), ALL_S (540), COMMIT (the commit measured; default "tree ID", ID from tree_id.sh),
#        FLOORS_STEPS (1: ours records one more dycore step for the byte floors; 0: none),
#        FIELDS (1: every run also saves its verification results whole, compared element by element
#            with ours in the summary: a fingerprint cannot tell rounding from one wrong point; 0: not),
#        GL_ARGS (more greenline arguments of every run, e.g. GL_ARGS=--graph-replay: each backend's
#            substeps also replayed as CUDA graphs, a "dycore step, replayed" row in the step table).
# Results: $OUT/summary.txt, $OUT/greenline.md, $OUT/granule-latest.json, $OUT/all.tgz.
source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
W=${WORK:-/tmp/work}; mkdir -p $W
snapshot_loop $W $OUT &
SNAP=$!
LOCK=/tmp/gpu.lock; : > $LOCK
read -r GRID LEVELS <<< "${CONFIG:-REGIONAL 80}"
TAG=$GRID-$LEVELS
GL="python3 -m icoforge greenline --grid $GRID --levels $LEVELS --steps ${STEPS:-20} --warmup 2 --profile-steps 2 --timing-rounds ${ROUNDS:-1} --only-used-variants --gpu-lock $LOCK ${GL_ARGS:-}"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $W/clocks-start.csv

[ "${INLINE_OFF_RUN:-0}" = 1 ] && AB=${AB:-'inline-off={"inline": "off"}'}

# GPU memory: every greenline process holds its own grid, fields and pools. Measured per process:
# R2B6/80 27-31 GB (session 35: three on an 80 GB H100 ran out, ours died at its verification
# substeps after the whole setup). Refuse before spending the call where the count cannot fit.
NPROC=$(( ${OURS:-1} + $(wc -w <<< "${PEERS-dace_gpu}") + ${DEBUG_RUN:-1} ))
for spec in "${AB:-}" "${AB2:-}" "${AB3:-}"; do [ -n "$spec" ] && NPROC=$((NPROC + 1)); done
case "$GRID/$LEVELS" in R2B6/80) GB_EACH=31 ;; *) GB_EACH=0 ;; esac  # only what was measured
GPU_GB=$(( $(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1) / 1024 ))
if [ $GB_EACH -gt 0 ] && [ $(( NPROC * GB_EACH )) -gt $GPU_GB ]; then
  echo "run_modes.sh: $NPROC processes of $GRID/$LEVELS need about $(( NPROC * GB_EACH )) GB, the GPU has $GPU_GB GB:" \
       "run fewer (PEERS=, DEBUG_RUN=0, fewer AB*)" >&2
  exit 1
fi
stamp "$NPROC greenline processes on $GRID/$LEVELS (GPU memory $GPU_GB GB)"

# the static fields first, shared by every process (a fresh machine: ~170 s on R2B6/80; session 18's
# call 3 computed them inside ours while dace_gpu waited, and nothing was timed by the deadline)
static_fields $GRID $LEVELS $W/static-fields.log || exit 1  # no grid or fields: nothing to measure
# whole verification results per run (FIELDS=1, the default): compared element by element in the
# summary, since a fingerprint reads rounding spread over all points (DaCe's fused multiply-adds)
# as one point off (session 37: "failed" at 1.7e-9 on R2B6/80 where the sampled points differed by
# 5e-14). Several GB on R2B6/80: the device's disk only, never $OUT.
fields() { [ "${FIELDS:-1}" = 1 ] && echo "--save-fields $W/fields-$1-$TAG.npz"; }
if [ "${OURS:-1}" = 1 ]; then
  # --floors-steps 1: the kernel/program/substep byte floors of today's kernels, for granule-latest.json
  $GL --backend icoforge-cuda --floors-steps ${FLOORS_STEPS:-1} --save-reference $W/ref-icoforge-$TAG.json $(fields icoforge) --json $W/gl-$TAG-opt.json > $W/gl-$TAG-opt.log 2>&1 &
fi
for b in ${PEERS-dace_gpu}; do
  $GL --backend $b --save-reference $W/ref-$b-$TAG.json $(fields $b) --json $W/gl-$TAG-$b.json > $W/gl-$TAG-$b.log 2>&1 &
done
AB=${AB:-}; AB2=${AB2:-}; AB3=${AB3:-}
# ab_run SUFFIX: ours with AB$SUFFIX's schedule, AB${SUFFIX}_ENV's environment, AB${SUFFIX}_ARGS's arguments
ab_run() {
  local spec_var=AB$1 env_var=AB$1_ENV args_var=AB$1_ARGS
  local spec=${!spec_var:-}; [ -n "$spec" ] || return 0
  local label=${spec%%=*} schedule=${spec#*=}
  env ${!env_var:-} $GL --backend icoforge-cuda --schedule "$schedule" ${!args_var:-} --save-reference $W/ref-$label-$TAG.json $(fields $label) \
    --json $W/gl-$TAG-$label.json > $W/gl-$TAG-$label.log 2>&1 &
}
ab_run ""; ab_run 2; ab_run 3
if [ "${DEBUG_RUN:-1}" = 1 ]; then
  $GL --backend icoforge-cuda --python-mode debug --json $W/gl-$TAG-debug.json > $W/gl-$TAG-debug.log 2>&1 &
fi
deadline ${ALL_S:-540} "icoforge greenline" &
KILLER=$!
while pgrep -f "icoforge greenline" > /dev/null; do sleep 2; done
stop_bg $KILLER $SNAP
stamp "all done"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $W/clocks-end.csv

{
  reports=""; [ -f $W/gl-$TAG-opt.json ] && reports="opt=$W/gl-$TAG-opt.json"  # OURS=0 on a warm machine: the earlier call's
  for b in ${PEERS-dace_gpu}; do [ -f $W/gl-$TAG-$b.json ] && reports="$reports $W/gl-$TAG-$b.json"; done
  for spec in "$AB" "$AB2" "$AB3"; do
    label=${spec%%=*}; [ -n "$spec" ] && [ -f $W/gl-$TAG-$label.json ] && reports="$reports $label=$W/gl-$TAG-$label.json"
  done
  [ -f $W/gl-$TAG-debug.json ] && reports="$reports debug=$W/gl-$TAG-debug.json"
  echo "== greenline $TAG side by side =="
  COLUMNS=200 python3 -m icoforge greenline-merge $reports --markdown $OUT/greenline.md --json $W/merged.json
  # the headline record from the optimized runs only
  latest=""; [ -f $W/gl-$TAG-opt.json ] && latest="$W/gl-$TAG-opt.json"
  for b in ${PEERS-dace_gpu}; do [ -f $W/gl-$TAG-$b.json ] && latest="$latest $W/gl-$TAG-$b.json"; done
  python3 -m icoforge greenline-merge $latest --latest $OUT/granule-latest.json --commit "${COMMIT:-tree ${ICF_TREE:-unknown}}" > /dev/null
  echo "== fingerprints: each peer vs icoforge-cuda ($TAG) =="
  for b in ${PEERS-dace_gpu}; do
    [ -f $W/ref-$b-$TAG.json ] && [ -f $W/ref-icoforge-$TAG.json ] && python3 -m icoforge.granule.golden compare $W/ref-$b-$TAG.json $W/ref-icoforge-$TAG.json
  done
  if [ "${FIELDS:-1}" = 1 ]; then
    echo "== whole fields, element by element: each peer vs icoforge-cuda ($TAG) =="
    for b in ${PEERS-dace_gpu}; do
      [ -f $W/fields-$b-$TAG.npz ] && [ -f $W/fields-icoforge-$TAG.npz ] && python3 -m icoforge.granule.golden compare-fields $W/fields-$b-$TAG.npz $W/fields-icoforge-$TAG.npz
    done
  fi
  for spec in "$AB" "$AB2" "$AB3"; do
    label=${spec%%=*}
    if [ -n "$spec" ] && [ -f $W/ref-$label-$TAG.json ]; then
      echo "== fingerprints: icoforge-cuda $label (${spec#*=}) vs the default ($TAG): bit-identical expected =="
      python3 -m icoforge.granule.golden compare $W/ref-$label-$TAG.json $W/ref-icoforge-$TAG.json
      [ -f $W/fields-$label-$TAG.npz ] && [ -f $W/fields-icoforge-$TAG.npz ] && python3 -m icoforge.granule.golden compare-fields $W/fields-icoforge-$TAG.npz $W/fields-$label-$TAG.npz 0
    fi
  done
  # what the package's tuned schedules did (session 16: none applied, and nobody saw it in the tables)
  echo "== tuned kernel schedules per run (the compile log's [icoforge] lines) =="
  for f in $W/gl-$TAG-*.log; do
    echo "$(basename $f .log): $(grep -c 'tuned schedule applied' $f) applied, $(grep -c ': not applied' $f) not"
    grep ': not applied\|static arguments\|not fused into' $f | sort -u | cut -c1-240
  done
  cat $W/clocks-start.csv $W/clocks-end.csv
} > $OUT/summary.txt 2>&1
for f in $W/*.log; do echo "--- $f"; grep -E "Error|error|Traceback" $f | head -3; tail -2 $f; done
tar czf $OUT/all.tgz --exclude='*.npz' -C $W . 2>/dev/null; rm -f $OUT/.all.tgz.tmp
cut -c1-250 $OUT/summary.txt | tail -120
