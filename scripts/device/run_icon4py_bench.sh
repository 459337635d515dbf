#!/bin/bash
# One device call (issue 47 item 2): icon4py's own dycore benchmark as the referee.
# icon4py 0.4.1's test_benchmark_solve_nonhydro (SolveNonhydro.time_step under pytest-benchmark, the
# static fields built by icon4py's factories with the backend under test) on icoforge's preset grid
# file (the greenline's), once per backend, one after the other, in Python's optimized mode as
# icon4py's benchmarks run. icon4py's tests are not in its wheels: carry_icon4py_tests.sh copies the
# ones this needs from ../shared into .icon4py-tests/ (git-ignored), which the call carries.
#
# icon4py's test times `time_step` without a device synchronisation, and GPU backends return before
# their kernels have run (icoforge-cuda launches on a stream; GT4Py 1.2.1's dace_gpu calls its SDFGs
# asynchronously): as icon4py runs it, the figure is the host's time to enqueue a substep (session 31,
# H100, R2B6/80: 1.6-3.1 ms for icoforge-cuda, ~10x below its device time). So each run loads
# icoforge's pytest plugin icoforge.bench.device_sync (`-p`, icon4py's files unchanged): the device is
# synchronised after every timed call, inside the timed region, and each call's host time to return
# is kept beside it in the JSON's extra_info; the table shows both.
#
#   scripts/device/carry_icon4py_tests.sh   # here, once
#   run(carry=[".whl", ".icon4py-tests"], timeout_s=600,
#       command="CONFIGS='R2B6/80 REGIONAL/80' bash scripts/device/run_icon4py_bench.sh")
#
# Knobs: CONFIGS ("REGIONAL/80": GRID/LEVELS, one after the other), BACKENDS ("icoforge.backend:cuda
#        dace_gpu": icon4py's --backend values: a name of model_backends.BACKENDS, or module:symbol),
#        SYNC (auto: the plugin's --device-sync; "icon4py" runs icon4py's test as it is, no plugin),
#        END_S (570: stop at this many seconds after the call began).
# dace_gpu's builds for this test (its factories' programs too) took more than 1,170 s on an H100
# (session 31: two chained 585-s calls, still compiling); GT4Py keeps them in
# $GT4PY_BUILD_CACHE_DIR/.gt4py_cache (a hidden folder: `ls` of the cache dir shows nothing), which a
# chained call on the still-warm machine reuses; the log names its entry count before each run.
# Results: $OUT/icon4py-bench.md (the table), $OUT/*.json (pytest-benchmark), $OUT/*.log.
source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/tmp/gt4py-cache
# icon4py.testing.config computes its default data path as the 6th parent of its own file (a source
# checkout's root) even where ICON4PY_TEST_DATA_PATH is set: installed at /tmp/site/icon4py/... that
# parent does not exist (IndexError: 6). The wheels are imported from a deeper copy of /tmp/site.
DEEP_SITE=/tmp/icon4py-site/a/b/site
[ -d $DEEP_SITE ] || { mkdir -p $(dirname $DEEP_SITE) && cp -a /tmp/site $DEEP_SITE; }
export PYTHONPATH=$DEEP_SITE:$PYTHONPATH ICON4PY_TEST_DATA_PATH=/tmp/icon4py-testdata
mkdir -p $ICON4PY_TEST_DATA_PATH
TESTS=$PWD/.icon4py-tests
[ -f $TESTS/pyproject.toml ] || { echo "no .icon4py-tests: run scripts/device/carry_icon4py_tests.sh and carry it"; exit 1; }
case ${SYNC:-auto} in
  icon4py) PLUGIN=() ;;
  *) PLUGIN=(-p icoforge.bench.device_sync --device-sync "${SYNC:-auto}") ;;
esac
TEST=model/atmosphere/dycore/tests/dycore/integration_tests/test_benchmark_solve_nonhydro.py
deadline ${END_S:-570} "pytest -p no:cacheprovider" &
KILLER=$!
for config in ${CONFIGS:-REGIONAL/80}; do
  GRID=${config%/*} LEVELS=${config#*/}
  GRIDFILE=$(python3 -c 'import sys; from icoforge.grids import resolve_grid_path; print(resolve_grid_path(sys.argv[1], show_progress=False))' $GRID) || exit 1
  stamp "grid file $GRIDFILE"
  for b in ${BACKENDS:-icoforge.backend:cuda dace_gpu}; do
    label=$(echo "$b" | tr ':.' '__')-$GRID-$LEVELS
    stamp "icon4py's benchmark, --backend $b, $GRID/$LEVELS, ${PLUGIN[*]:-no plugin} (GT4Py cache: $(ls $GT4PY_BUILD_CACHE_DIR/.gt4py_cache 2>/dev/null | wc -l) entries)"
    (cd $TESTS && python3 -O -m pytest -p no:cacheprovider "${PLUGIN[@]}" --backend "$b" --grid "$GRIDFILE:$LEVELS" $TEST \
       --benchmark-json $OUT/bench-$label.json) > $OUT/bench-$label.log 2>&1
    stamp "done (rc $?): $(tail -1 $OUT/bench-$label.log)"
  done
done
stop_bg $KILLER
python3 scripts/device/icon4py_bench_table.py $OUT/bench-*.json > $OUT/icon4py-bench.md
cat $OUT/icon4py-bench.md
