#!/bin/bash
# compute-sanitizer over every kernel of the dycore granule (icon4py's SolveNonhydro.time_step with
# icoforge-cuda), one device call of at most 9 minutes:
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/sanitize.sh")
#   (optionally ".devcache" too, from scripts/device/pack_cache.sh, if it holds this grid's passes)
#
# Grid R2B4 at 20 levels (20,480 cells, 30,720 edges): small enough that the step under memcheck
# takes seconds, large enough that every kernel has several blocks and every zone of the grid
# (lateral boundary, nudging, interior, halo-free global) is present. The greenline runs one
# dycore step per variant (first/middle/last substep), compiling only the variants it calls.
#
# 1. The greenline once without a tool: grid, static fields, GT4Py passes, g++ and NVRTC builds go
#    into the caches (ICOFORGE_CACHE, CuPy's kernel cache), so the runs under the tools only load.
# 2. Under compute-sanitizer, each a whole process (CuPy's memory pools off: every field and
#    temporary its own allocation, so memcheck and initcheck see its bounds; only the main process
#    is tracked: it launches every kernel, its children compile and compute static fields on the
#    CPU), in this order:
#      memcheck  default schedule (the vendor default, what the granule runs)
#      initcheck default schedule
#      racecheck smem schedule    (shared-memory staging of every table a kernel reads by its own
#                                  row: the only kernels with shared memory and barriers)
#      synccheck smem schedule    (barriers)
#      memcheck  smem schedule
#    A run that would start with less than MIN_S seconds left is reported "not run"; the first
#    three are required. If some did not run, issue a second call right away (the machine stays
#    warm and keeps /tmp): CONTINUE=1 RUNS="the missing ones" bash scripts/device/sanitize.sh
#    skips step 1, keeps the first call's logs, and reports all five.
# 3. $OUT/sanitize-report.md: per run the errors (compute-sanitizer's ERROR SUMMARY), the icoforge
#    kernels launched under it, seconds, status; first error lines if any. $OUT/sanitize-logs.tgz
#    holds every log and kernel list. Exit 1 (and "NOT CLEAN" as the report's last line) when a
#    run found errors, timed out, failed, or launched no kernel, or when memcheck, initcheck or
#    racecheck did not run. Expected: "5 of 5 runs clean." and every errors column 0.
# KERNELS: a regular expression; only kernels whose names match are checked (icoforge's end in _k<N>:
# KERNELS='_k[0-9]+$' leaves out CuPy's and Thrust's kernels that icon4py's grid set-up launches).
# Knobs: KERNELS, CONTINUE, GRID, LEVELS, END_S (seconds after the call's start by which everything has stopped,
# default 540), MIN_S (default 75), RUNS (default the five above, TOOL:SCHEDULE ...).

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1
GRID=${GRID:-R2B4} LEVELS=${LEVELS:-20} END_S=${END_S:-540} MIN_S=${MIN_S:-75}
ALL_RUNS="memcheck:default initcheck:default racecheck:smem synccheck:smem memcheck:smem"
RUNS=${RUNS:-$ALL_RUNS}
REQUIRED="memcheck:default initcheck:default racecheck:smem"
SMEM='{"default": {"block": [32, 8], "index_bits": "auto", "smem_tables": ["*"]}}'
GL=(greenline --grid "$GRID" --levels "$LEVELS" --backend icoforge-cuda --only-used-variants --steps 1 --warmup 0 --profile-steps 0)
[ -d .devcache ] && cp -r .devcache/. "$ICOFORGE_CACHE"/ && echo "carried cache: $(ls .devcache/gt4py-passes | wc -l) pass results"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || ls /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
[ -n "$CS" ] || { echo "sanitize.sh: compute-sanitizer not found" | tee $OUT/sanitize-report.md; exit 1; }
W=/tmp/sanitize; [ "${CONTINUE:-0}" = 1 ] || rm -rf $W; mkdir -p $W
left() { echo $(( END_S - ($(date +%s) - ICF_T0) )); }
upto() { local t=$(( $(left) - $1 )); echo $(( t < 30 ? 30 : t )); }  # a time limit leaving $1 s (at least 30 s)

{
  echo "Grid $GRID, $LEVELS levels; icoforge-cuda; \`${GL[*]}\`; smem schedule: \`$SMEM\`."
  echo "$($CS --version | tail -1); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(date -u +%FT%TZ)."
} > $W/header.txt

if [ "${CONTINUE:-0}" != 1 ]; then
  stamp "1. greenline without a tool: fills the caches (grid, static fields, passes, g++, NVRTC)"
  timeout $(upto $(( 2 * MIN_S ))) python3 scripts/device/sanitize_granule.py run $W/kernels-plain-default.txt -- "${GL[@]}" \
    > $W/plain-default.out 2>&1
  echo $? > $W/plain-default.rc; tail -5 $W/plain-default.out
  stamp "$(head -1 $W/kernels-plain-default.txt 2>/dev/null)"
fi

for spec in $RUNS; do
  tool=${spec%%:*} sched=${spec##*:} tag=${spec/:/-}
  if [ "$(left)" -lt "$MIN_S" ]; then stamp "$tag: not run ($(left) s left)"; continue; fi
  stamp "2. $tag under compute-sanitizer ($(left) s left)"
  extra=(); [ "$sched" = smem ] && extra=(--schedule "$SMEM")
  # initcheck also checks host API copies; icon4py's grid set-up copies uninitialized device
  # memory to the host (is_limited_area_grid), which floods the log: only kernels are checked
  toolopts=(); [ "$tool" = initcheck ] && toolopts=(--check-api-memory-access no)
  rm -f "$W/$tag".*; t0=$(date +%s)  # a rerun (CONTINUE=1) replaces that run's logs
  timeout $(upto 20) "$CS" --tool "$tool" "${toolopts[@]}" ${KERNELS:+--kernel-regex "kns=$KERNELS"} --target-processes application-only --error-exitcode 99 --print-limit 200 \
    --log-file "$W/$tag.%p.log" python3 scripts/device/sanitize_granule.py run "$W/kernels-$tag.txt" -- "${GL[@]}" "${extra[@]}" \
    > "$W/$tag.out" 2>&1
  echo $? > "$W/$tag.rc"; echo $(( $(date +%s) - t0 )) > "$W/$tag.seconds"
  stamp "$tag: exit $(cat $W/$tag.rc), $(grep -h 'ERROR SUMMARY' $W/$tag.*.log 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
done

python3 scripts/device/sanitize_granule.py report $W $ALL_RUNS > $OUT/sanitize-report.md; rc=$?
for spec in $REQUIRED; do [ -f "$W/${spec/:/-}.rc" ] || { echo "NOT CLEAN: $spec did not run" >> $OUT/sanitize-report.md; rc=1; }; done
tar czf $OUT/sanitize-logs.tgz -C $W .
cat $OUT/sanitize-report.md
stamp "done, exit $rc"
[ $rc = 0 ] || echo "sanitize.sh: ERRORS (see $OUT/sanitize-report.md)" >&2
exit $rc
