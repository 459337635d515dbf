#!/bin/bash
# One device call (issues 22 and 17): (a) REGIONAL/80, icoforge-cuda alone, optimized: the GPU's
# idle fraction from the kernels' own events, and each substep captured and replayed as a CUDA graph
# (`greenline --graph-replay`); (b) R2B6/80: icoforge-cuda with the vendor default schedule against a
# candidate default (block 32x8, 32-bit indices chosen at call time), A/B as labelled runs.
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_idle_and_defaults.sh")
#
# Knobs: CANDIDATE (schedule JSON of the candidate default), ALL_S (540).
# Results: $OUT/summary.txt, $OUT/all.tgz.
source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1
W=${WORK:-/tmp/work3}; mkdir -p $W
snapshot_loop $W $OUT &
SNAP=$!
LOCK=/tmp/gpu.lock; : > $LOCK
CANDIDATE=${CANDIDATE:-'{"default": {"block": [32, 8], "index_bits": "auto"}}'}
GL="python3 -m icoforge greenline --steps 20 --warmup 2 --profile-steps 2 --only-used-variants --gpu-lock $LOCK"
python3 -c "from icoforge.grids import load_grid; [load_grid(g, levels=80, show_progress=False) for g in ('REGIONAL', 'R2B6')]" || exit 1
stamp "grids"
(
  $GL --grid REGIONAL --levels 80 --backend icoforge-cuda --graph-replay --json $W/gl-REGIONAL-80-kernels.json > $W/gl-REGIONAL-80-kernels.log 2>&1
  stamp "REGIONAL greenline (with graph replay) done (rc $?)"
) &
(
  $GL --grid R2B6 --levels 80 --backend icoforge-cuda --json $W/gl-R2B6-80-default.json > $W/gl-R2B6-80-default.log 2>&1
  stamp "R2B6 default done (rc $?)"
) &
sleep 30   # the first R2B6 process takes the static-field lock; the candidate then waits and reads them
$GL --grid R2B6 --levels 80 --backend icoforge-cuda --schedule "$CANDIDATE" --json $W/gl-R2B6-80-candidate.json > $W/gl-R2B6-80-candidate.log 2>&1 &
deadline ${ALL_S:-540} "icoforge greenline" &
KILLER=$!
sleep 5
while pgrep -f "icoforge greenline" > /dev/null; do sleep 2; done
stop_bg $KILLER $SNAP
stamp "all done"
{
  echo "== REGIONAL/80 icoforge-cuda: device busy from the kernels =="
  COLUMNS=200 python3 -m icoforge greenline-merge $W/gl-REGIONAL-80-kernels.json 2>&1 | sed -n '/device busy/,/GPU idle = /p'
  echo "== graph replay (greenline --graph-replay: the replayed step, or why a substep was not replayed) =="
  COLUMNS=200 python3 -m icoforge greenline-merge $W/gl-REGIONAL-80-kernels.json 2>&1 | grep -E "replayed"
  grep "substep replayed:" $W/gl-REGIONAL-80-kernels.log
  echo "== R2B6/80 default vs candidate $CANDIDATE =="
  COLUMNS=200 python3 -m icoforge greenline-merge default=$W/gl-R2B6-80-default.json candidate=$W/gl-R2B6-80-candidate.json --markdown $OUT/ab-R2B6-80.md 2>&1 | sed -n '/step time/,/per program/p'
} > $OUT/summary.txt 2>&1
for f in $W/*.log; do echo "--- $f"; grep -E "Error|error|Traceback" $f | head -3; done
tar czf $OUT/all.tgz -C $W . 2>/dev/null; rm -f $OUT/.all.tgz.tmp
cut -c1-220 $OUT/summary.txt | tail -80
