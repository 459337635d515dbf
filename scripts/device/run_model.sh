#!/bin/bash
# One device call (issue 48 item 4): time to solution of icon4py's model. `icoforge model` (icon4py's
# driver, the JW baroclinic wave, dycore + diffusion; --tracers/--muphys in EXTRA switch on tracer
# advection and microphysics) once per backend, ONE AFTER THE OTHER (no backend's compiling beside
# another's timing), each run holding the GPU lock for its whole life (its time to the first step
# is timed too), in Python's optimized mode. Each run's record goes straight into $OUT as
# model-BACKEND-GRID-LEVELS.json: written after every phase and step and every 5 s (the verb's
# --json), so a run stopped by the deadline or a call cut at the tool's limit still returns its
# time so far, a lower bound of its time to the first step ("cut" in the table).
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_model.sh")
#
# What fits one call (600 s, setup.sh included): GT4Py's builds of dace_gpu took 174-600 s for the
# dycore's programs alone, and the model builds icon4py's field factories and diffusion as well;
# gtfn_gpu ~410 s for the granule. So the default order is ours first (cold), then dace_gpu and
# gtfn_gpu until END_S. A peer cut before its first step leaves its lower bound, and its finished
# builds in GT4Py's persistent cache (/tmp/gt4py-cache, as run_icon4py_bench.sh): a CHAINED call on
# the still-warm machine (the same kind, within its idle release) continues from there:
#
#   call 1: bash scripts/device/run_model.sh                       # ours cold; the peers until END_S
#   call 2: BACKENDS=dace_gpu bash scripts/device/run_model.sh     # dace_gpu's builds go on (warm)
#   call 3: BACKENDS=gtfn_gpu bash scripts/device/run_model.sh     # same for gtfn_gpu, if call 1 cut it
#   call 4: bash scripts/device/run_model.sh                       # all warm: step times in one run
#
# The table says per run which caches held entries at its start (not a cold time to the first step
# then). The headline pair: time to the first step = call 1's ours (cold) against the peers' cold
# figures or lower bounds (call 1 or 2); time per step = the last call's, all backends in one run.
# Results of earlier calls on the same machine (/tmp/model-runs) are merged into the table too,
# newest per backend. Step times need nothing cold: on a warm machine call 4 alone is the step table.
#
# Knobs: CONFIG ("R2B6 80"), BACKENDS ("icoforge-cuda dace_gpu gtfn_gpu"), STEPS (20),
#        COMPONENT_STEPS (5: more steps timed per component between device synchronisations),
#        END_S (560: stop every run at this many seconds after the call began), EXTRA (more
#        `icoforge model` arguments, e.g. "--tracers" or "--muphys"), DTIME (the JW default on the
#        grid when empty: 75 s on R2B6).
#   ICF_LOCAL=1 a dry run on the workstation, e.g. ICF_LOCAL=1 CONFIG="R2B3 10" STEPS=3
#        COMPONENT_STEPS=2 BACKENDS="icoforge-cpu gtfn_cpu" END_S=900 bash scripts/device/run_model.sh
# Results: $OUT/model-*.json (one per run), $OUT/model-*.log, $OUT/model.md (the merged table).

if [ "${ICF_LOCAL:-0}" = 1 ]; then   # a dry run of this script on the workstation (small CONFIG, CPU backends)
  export PATH=$PWD/.venv/bin:$PATH OUT=${OUT:-/tmp/icf-out} ICF_T0=$(date +%s); mkdir -p $OUT
  [ -x .venv/bin/python ] || export PATH=/work/main/.venv/bin:$PATH  # a worktree without its own venv
  PY="python -O"
else
  source scripts/device/setup.sh
  PY="python3 -O"
fi
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=${GT4PY_BUILD_CACHE_DIR:-/tmp/gt4py-cache}
read -r GRID LEVELS <<< "${CONFIG:-R2B6 80}"
TAG=$GRID-$LEVELS
RUNS=${RUNS_DIR:-/tmp/model-runs}; mkdir -p $RUNS   # every call's records on this machine (chained calls)
LOCK=${LOCK:-/tmp/gpu.lock}; : > $LOCK
END_S=${END_S:-560}

# the grid file first (a fresh machine generates R2B6 in ~30 s): not part of any run's time
stamp "grid $TAG"
$PY -c 'import sys; from icoforge.grids import resolve_grid_path; print(resolve_grid_path(sys.argv[1], show_progress=False))' $GRID || exit 1

# the imports once before any run: bytecode compiled (setup.sh installs with --no-compile), so the
# first backend's time from process start does not pay for what the later ones find ready
$PY -c 'import icoforge.cli.model_cmd, icoforge.model.run, icon4py.model.driver.driver, icon4py.model.common.model_options' \
  && stamp "imports compiled"
# the deadline stops only this call's runs: the pattern names its $OUT (a dry run here shares the
# machine with others' runs of the same verb); the trap stops the deadline's loop whatever ends this
# script (2026-12-06: an earlier version, ended by a syntax error, left it running and stopping
# every `icoforge model --experiment` on the workstation for minutes)
deadline $END_S "icoforge model --experiment .* --json $OUT/model-" &
KILLER=$!
trap 'stop_bg $KILLER' EXIT
for b in ${BACKENDS:-icoforge-cuda dace_gpu gtfn_gpu}; do
  left=$(( END_S - ($(date +%s) - ICF_T0) ))
  if [ $left -le 5 ]; then stamp "$b: not run (no time left)"; continue; fi
  rec=$OUT/model-$b-$TAG.json
  stamp "$b: icoforge model $TAG, ${STEPS:-20} steps + ${COMPONENT_STEPS:-5} component-timed (GT4Py cache: $(ls $GT4PY_BUILD_CACHE_DIR/.gt4py_cache 2>/dev/null | wc -l) entries)"
  # shellcheck disable=SC2086
  timeout $left $PY -m icoforge model --experiment jw --grid $GRID --levels $LEVELS --backend $b \
    --steps ${STEPS:-20} --component-steps ${COMPONENT_STEPS:-5} ${DTIME:+--dtime $DTIME} ${EXTRA:-} \
    --gpu-lock $LOCK --json $rec > $OUT/model-$b-$TAG.log 2>&1
  rc=$?
  stamp "$b done (rc $rc): $(grep -E '^\[.*(step 1/|initialize_driver \(static fields, granules: compiles\):)' $OUT/model-$b-$TAG.log | tail -2 | tr '\n' ' ')"
  [ -f $rec ] && cp $rec $RUNS/$(date +%s)-$(basename $rec)
done
stop_bg $KILLER

# the merged table: this call's runs, and for backends not run now the newest record of an earlier
# call on this machine (chained calls), each file named
MERGE=()
for b in ${BACKENDS:-icoforge-cuda dace_gpu gtfn_gpu}; do [ -f $OUT/model-$b-$TAG.json ] && MERGE+=($OUT/model-$b-$TAG.json); done
for f in $(ls -r $RUNS/*-model-*-$TAG.json 2>/dev/null); do
  b=$(basename $f .json | sed -E "s/^[0-9]+-model-(.*)-$TAG\$/\1/")
  case " ${BACKENDS:-icoforge-cuda dace_gpu gtfn_gpu} ${SEEN:-} " in *" $b "*) continue;; esac
  SEEN="${SEEN:-} $b"; cp $f $OUT/earlier-$(basename $f); MERGE+=($OUT/earlier-$(basename $f))
done
if [ ${#MERGE[@]} -gt 0 ]; then
  { $PY -m icoforge model --merge "${MERGE[@]}"; echo; echo "records: ${MERGE[*]##*/}"; } > $OUT/model.md 2>&1
else
  echo "no records: no run began" > $OUT/model.md
fi
for f in $OUT/model-*.log; do echo "--- $f"; grep -E "Error|error:|Traceback" $f | head -3; done
cat $OUT/model.md
