# Shared by the device run scripts (source after setup.sh). What a device call leaves in $OUT is
# all that comes back, and a call cut at its time limit returns $OUT as it is at that moment:
# so results are snapshotted into $OUT while the work runs, not only at the end.
#
# 2026-11-29 s3: a granule call ran into the tool's limit before its final `tar`; the finished
# verification, roofline and ncu results were lost with it.

ICF_T0=${ICF_T0:-$(date +%s)}   # seconds count from the start of the command, setup included
stamp() { echo "[$(( $(date +%s) - ICF_T0 )) s] $*"; }

# snapshot_loop SRC DEST [EVERY_S]: every EVERY_S seconds (default 20), SRC -> DEST/all.tgz (atomic)
snapshot_loop() {
  local src=$1 dest=$2 every=${3:-20}
  while true; do
    sleep "$every"
    tar czf "$dest/.all.tgz.tmp" -C "$src" . 2>/dev/null && mv -f "$dest/.all.tgz.tmp" "$dest/all.tgz"
  done
}

# deadline AT_S PATTERN: at AT_S seconds after the command's start, kill processes matching
# PATTERN (pkill -f); leave ~40 s for the summary before the device tool's own limit
deadline() {
  local at=$1 pattern=$2
  local left=$(( at - ($(date +%s) - ICF_T0) ))
  sleep $(( left > 0 ? left : 0 ))
  stamp "deadline: stopping ($pattern)"
  # and keep stopping: a step of a chain that starts after the deadline is stopped too (s4: the
  # granule roofline, started right after its greenline was stopped, ran into the tool's limit)
  while true; do pkill -f "$pattern"; sleep 1; done
}

# stop_bg PID...: stop background helpers (deadline, snapshot_loop) and their sleeping children.
# A plain `kill` leaves the child `sleep` running, and that keeps a pipe on the script's output
# open: `run_granule.sh | tail` then waited for the deadline's sleep (s6: a call ran into the tool's limit).
stop_bg() {
  local pid
  for pid in "$@"; do pkill -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done
  return 0
}

# static_fields GRID LEVELS LOG: the granule's static fields (icon4py's geometry, interpolation and
# metric factories) into the machine's icoforge cache, outside any run's time limit; a no-op when
# the cache holds them; the exit status is Python's. A fresh machine takes 124-221 s on R2B6/80: inside a run's limit they ate
# the measurement (sessions 14, 16, 18). Python -c, not a here-document: the factories' child
# process re-runs the parent's main module from its path ('<stdin>' does not exist; session 11).
static_fields() {
  local grid=$1 levels=$2 log=$3
  stamp "static fields: $grid/$levels"
  python3 -O -c '
import sys
from icoforge.granule.fields import build_static_fields
from icoforge.granule.greenline import DEFAULT_FACTORY_BACKEND
from icoforge.grids import load_grid
g = load_grid(sys.argv[1], levels=int(sys.argv[2]), show_progress=False)
f = build_static_fields(g, DEFAULT_FACTORY_BACKEND, in_child=True)
print(g, "cached" if f.cached else f"computed {f.timings}")
' "$grid" "$levels" > "$log" 2>&1
  local rc=$?
  stamp "static fields done (rc $rc, $(tail -1 "$log"))"
  return $rc
}

# verify_gpu SECONDS JOBS PROGRAMS_FILE DIR: `icoforge verify-all`, icoforge-cuda against icoforge-cpu
# (fresh inputs of a fixed seed, poisoned outputs, whole arrays) on R2B4/80 with seed 11, then R2B6/80
# with seed 12, for the programs of PROGRAMS_FILE (names by lines or commas, "#" comment lines) in its
# order; both within SECONDS; the tables in DIR/verify-GRID-LEVELS.md (written as the cases finish),
# progress on stderr; the exit status is the last failing verify-all's (124: time ran out).
# VERIFY_SCHEDULE: icoforge-cuda's ProgramSchedule (JSON); VERIFY_BACKEND, VERIFY_REFERENCE and
# VERIFY_CASES ("GRID:LEVELS:SEED ...") change the defaults (a dry run on the workstation:
# VERIFY_BACKEND=icoforge-cpu VERIFY_REFERENCE=gtfn_cpu VERIFY_CASES=R2B3:5:11). Until 2026-12-05 this was
# scripts/device/gpu_verify_and_bench.py --skip-bench --gtfn-for none --seeds R2B4=11,R2B6=12, which
# ran each program's two grids together; verify-all runs one grid after the other.
verify_gpu() {
  local seconds=$1 jobs=$2 file=$3 dir=$4 case grid levels seed left rc=0
  local end=$(( $(date +%s) + seconds ))
  [ -r "$file" ] || { echo "verify_gpu: cannot read $file" >&2; return 1; }
  local programs; programs=$(grep -Ev '^[[:space:]]*(#|$)' "$file" | tr ',' ' ')  # none: every program
  for case in ${VERIFY_CASES:-R2B4:80:11 R2B6:80:12}; do
    IFS=: read -r grid levels seed <<< "$case"
    left=$(( end - $(date +%s) ))
    if [ $left -le 0 ]; then stamp "verify $grid/$levels: not run (no time left)"; rc=124; continue; fi
    # shellcheck disable=SC2086
    timeout $left python3 -m icoforge verify-all --backend ${VERIFY_BACKEND:-icoforge-cuda} \
      --reference ${VERIFY_REFERENCE:-icoforge-cpu} --grid $grid --levels $levels --seed $seed --jobs $jobs \
      --programs $programs ${VERIFY_SCHEDULE:+--schedule "$VERIFY_SCHEDULE"} --out $dir/verify-$grid-$levels.md || rc=$?
  done
  return $rc
}

# verify_summary DIR: one line per verify_gpu table in DIR ("N of M passed"), then the first failures
verify_summary() {
  local f
  for f in $(ls "$1"/verify-*.md 2>/dev/null); do
    echo "verify $(basename "$f" .md | cut -c8-): $(grep -m1 -E '^[0-9]+ of [0-9]+ passed' "$f")"
  done
  grep -h -A3 '^## ' $(ls "$1"/verify-*.md 2>/dev/null) /dev/null | head -12
}
