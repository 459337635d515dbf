#!/bin/bash
# One device call (issue 48 item 2, its GPU half): icon4py 0.4.1's own stencil tests with
# icoforge's CUDA backend object (`--backend icoforge.backend:cuda`), the runs `make test-icon4py`
# makes on the CPU (scripts/icon4py_suite/run.py: double and mixed precision on icon4py's simple
# grid, three tests on R2B4/30), one after the other, then the same per-package table as the CPU's.
# Not in -O mode: icon4py's tests verify with `assert`.
#
#   ALL=1 scripts/device/carry_icon4py_tests.sh   # here, once: every package's tests (~3 MB)
#   run(carry=[".whl", ".icon4py-tests"], timeout_s=600, command="bash scripts/device/run_icon4py_suite.sh")
#
# Knobs: RUNS (run.py's run names, default all three), END_S (560: at this many seconds after the
#        call began the running pytest gets SIGINT, writes what it has, and later runs are skipped).
# Results: $OUT/icon4py-suite-cuda.md (the table), $OUT/icon4py-suite/*.json, $OUT/suite.log.
source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1
[ -f .icon4py-tests/pyproject.toml ] && [ -d .icon4py-tests/model/common/tests ] \
  || { echo "run_icon4py_suite.sh: carry .icon4py-tests made by ALL=1 scripts/device/carry_icon4py_tests.sh"; exit 1; }
# icon4py.testing.config takes the 6th parent of its own file (see run_icon4py_bench.sh): a deeper copy
DEEP_SITE=/tmp/icon4py-site/a/b/site
[ -d $DEEP_SITE ] || { mkdir -p $(dirname $DEEP_SITE) && cp -a /tmp/site $DEEP_SITE; }
export PYTHONPATH=$DEEP_SITE:$PYTHONPATH ICON4PY_TEST_DATA_PATH=/tmp/icon4py-testdata
export ICON4PY_TESTS=$PWD/.icon4py-tests
END_S=${END_S:-560}
mkdir -p $OUT/icon4py-suite
for r in ${RUNS:-double-simple mixed-simple double-r2b4}; do
  left=$(( END_S - ($(date +%s) - ICF_T0) ))
  [ $left -gt 20 ] || { stamp "$r: skipped, ${left} s left"; continue; }
  stamp "$r: start (${left} s left)"
  # its own process group, so that SIGINT at the deadline reaches pytest (which then writes its JSON)
  setsid python3 scripts/icon4py_suite/run.py $r --backend icoforge.backend:cuda --out-dir $OUT/icon4py-suite \
    >> $OUT/suite.log 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null && [ $(( $(date +%s) - ICF_T0 )) -lt $END_S ]; do sleep 2; done
  if kill -0 $pid 2>/dev/null; then
    stamp "$r: deadline, SIGINT"; kill -INT -- -$pid; sleep 15; kill -9 -- -$pid 2>/dev/null
  fi
  wait $pid; stamp "$r: done, exit $?"
  grep -E "^icon4py-suite: $r:|passed|failed" $OUT/suite.log | tail -2
done
python3 scripts/icon4py_suite/table.py $OUT/icon4py-suite/*.json --out $OUT/icon4py-suite-cuda.md \
  && cat $OUT/icon4py-suite-cuda.md | head -40
