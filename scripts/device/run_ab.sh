#!/bin/bash
# One device call: several greenline runs of ours, one after the other on the same machine, to
# compare them (A/B of a schedule, or a first run that computes the static fields against a second
# that reads them). Each run goes through run_granule.sh (no peers); its report, log and summary
# are kept under $OUT as <label>.json, <label>.log, <label>-summary.txt.
#
#   run(carry=[".whl", ".devcache"], timeout_s=600, command="RUNS='reg1:REGIONAL:80 regF:REGIONAL:80:fuse' \
#       bash scripts/device/run_ab.sh")
#
# Knobs (environment):
#   RUNS     "LABEL:GRID:LEVELS[:SCHEDULE] ..."; SCHEDULE is a name below or @FILE (empty: the vendor default)
#   PYTEST   pytest arguments run first (after setup.sh), e.g. "-m gpu tests/backend/test_fuse.py -k gpu"
#   END_S    seconds after the command's start when everything stops (default 550: the tool's
#            limit is 600 and the summaries need a few seconds); a run not started by then is skipped
# Compare two runs here afterwards: icoforge greenline-merge off=<a>.json fused=<b>.json

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
END_S=${END_S:-550}
FINAL=$OUT/ab; mkdir -p $FINAL   # tarred at the end: only 8 files come back from a call

schedule_json() {   # named schedules of this script -> ICOFORGE_SCHEDULE
  case "$1" in
    "") echo "" ;;
    fuse) echo '{"fuse": ["*"]}' ;;
    @*) echo "${1#@}" ;;   # @FILE: a schedule file, e.g. written by `icoforge tune --out`
    *) echo "run_ab.sh: unknown schedule name '$1'" >&2; return 1 ;;
  esac
}

if [ -n "${PYTEST:-}" ]; then
  stamp "pytest $PYTEST"
  # shellcheck disable=SC2086
  NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell timeout $(( END_S - 60 )) python3 -m pytest -q -p no:cacheprovider $PYTEST > $FINAL/pytest.txt 2>&1
  stamp "pytest done (rc $?): $(tail -1 $FINAL/pytest.txt)"
fi

for run in $RUNS; do
  IFS=: read -r LABEL GRID LEVELS SCHED <<< "$run"
  SCHEDULE_JSON=$(schedule_json "${SCHED:-}") || exit 1
  if [ $(( $(date +%s) - ICF_T0 )) -gt $(( END_S - 60 )) ]; then
    stamp "$LABEL: skipped (less than 60 s left)"; continue
  fi
  stamp "$LABEL: $GRID/$LEVELS schedule '${SCHED:-default}'"
  mkdir -p /tmp/ab-out
  # run_granule.sh writes its summary and snapshot to $OUT: give it a scratch one per run
  rm -rf /tmp/ab-out/* /tmp/work/gl-$GRID-$LEVELS-icoforge-cuda.json
  OUT=/tmp/ab-out ICOFORGE_SCHEDULE="$SCHEDULE_JSON" CONFIG="$GRID $LEVELS" PEERS="" GPU_EXTRAS=0 ROOFLINE=0 \
    ALL_S=$END_S bash scripts/device/run_granule.sh > $FINAL/$LABEL-run.txt 2>&1
  cp /tmp/work/gl-$GRID-$LEVELS-icoforge-cuda.json $FINAL/$LABEL.json 2>/dev/null
  cp /tmp/work/gl-$GRID-$LEVELS-icoforge-cuda.log $FINAL/$LABEL.log 2>/dev/null
  cp /tmp/work/ref-icoforge-$GRID-$LEVELS.json $FINAL/$LABEL-ref.json 2>/dev/null
  cp /tmp/ab-out/summary.txt $FINAL/$LABEL-summary.txt 2>/dev/null
  stamp "$LABEL done: $(grep -m1 -E 'dycore step' $FINAL/$LABEL-summary.txt 2>/dev/null)"
done

# the short table: step time and setup of each run
python3 - $RUNS <<'EOF'
import json, pathlib, sys, os
out = pathlib.Path(os.environ["OUT"]) / "ab"
print(f"{'run':<10} {'grid':<12} {'step ms':>8} {'fields':>7} {'cached':>6} {'construct':>9} {'compile':>8} {'outside py':>10}")
for run in sys.argv[1:]:
    label, grid, levels, *_ = run.split(":")
    f = out / f"{label}.json"
    if not f.exists():
        print(f"{label:<10} {grid}/{levels}: no report"); continue
    d = json.loads(f.read_text()); b = d["backends"][0]; s = b["setup_s"]
    print(f"{label:<10} {grid + '/' + levels:<12} {b['dycore_step_ms']:8.1f} {d['common_setup_s']['static_fields']:7.1f} "
          f"{str(d['static_fields_cached']):>6} {s['construct']:9.1f} {s['compile']:8.1f} {b['profiled_dycore_step_ms'] * (1 - sum(x['share'] for x in b['programs'])):10.2f}")
EOF
tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $OUT/ab
