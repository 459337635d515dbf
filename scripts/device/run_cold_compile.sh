#!/bin/bash
# One device call (issue 6, cold compile): the granule's setup with every compile cache empty,
# ours and then one GT4Py backend, each alone on the machine (no contention), same grid.
# The static fields are computed first when the machine lacks them (shared input, not compiling).
#
#   run(carry=[".whl"], timeout_s=600, command="bash scripts/device/run_cold_compile.sh")
#
# Cold means: icoforge's translation and build cache empty (greenline --cold), CuPy's NVRTC kernel
# cache empty (CUPY_CACHE_DIR), GT4Py's build cache empty (a fresh GT4PY_BUILD_CACHE_DIR).
# Knobs: CONFIG ("REGIONAL 80"), PEER (gtfn_gpu; none: ours only), OURS_S / PEER_S (time limits
# of each run), RUNS: ours' cold runs one after the other, "LABEL[:VAR=VALUE,...] ...", e.g.
# RUNS="new old:ICOFORGE_WORKER_NICE=0,ICOFORGE_WORKER_NVRTC=0" (default "icoforge-cuda": one run).

source scripts/device/setup.sh
source scripts/device/lib.sh
set -u
read -r GRID LEVELS <<< "${CONFIG:-REGIONAL 80}"
PEER=${PEER:-gtfn_gpu}
export PYTHONUNBUFFERED=1
export GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=$(mktemp -d /tmp/gt4py-cold-XXXX)
GL="python3 -m icoforge greenline --grid $GRID --levels $LEVELS --steps 2 --warmup 1 --profile-steps 1 --only-used-variants"

static_fields $GRID $LEVELS $OUT/static-fields.log

REPORTS=()
for run in ${RUNS:-icoforge-cuda}; do
  label=${run%%:*}; vars=$([[ $run == *:* ]] && echo "${run#*:}" | tr ',' ' ')
  stamp "ours cold ($label${vars:+: $vars}): $GRID/$LEVELS"
  # CuPy fixes its kernel cache directory once per process: an empty one for each run
  env CUPY_CACHE_DIR=$(mktemp -d /tmp/cupy-cold-XXXX) $vars timeout ${OURS_S:-220} $GL --backend icoforge-cuda --cold --json $OUT/cold-$label.json > $OUT/cold-$label.log 2>&1
  stamp "ours done (rc $?)"
  REPORTS+=($OUT/cold-$label.json)
done
if [ "$PEER" != none ]; then
  stamp "$PEER cold"
  CUPY_CACHE_DIR=$(mktemp -d /tmp/cupy-cold-XXXX) timeout ${PEER_S:-330} $GL --backend $PEER --json $OUT/cold-$PEER.json > $OUT/cold-$PEER.log 2>&1
  stamp "$PEER done (rc $?)"
  REPORTS+=($OUT/cold-$PEER.json)
fi

python3 - "${REPORTS[@]}" <<'EOF'
import json, pathlib, sys
print(f"{'run':<14} {'static fields':>13} {'device grid':>11} {'construct':>9} {'compile':>8} {'first calls':>11} {'total':>7} {'step ms':>8}  last compile job")
for f in map(pathlib.Path, sys.argv[1:]):
    if not f.exists():
        print(f"{f.name}: no report"); continue
    d = json.loads(f.read_text()); b = d["backends"][0]; s = b["setup_s"]
    total = s["construct"] + s["compile"] + s["first_calls"]
    c = b.get("cache") or {}
    jobs, sub = c.get("jobs") or [{}], c.get("submitted_s") or [0.0]
    last = "-" if not jobs[0] else (f"{jobs[0]['program']} {jobs[0]['started_s']:.1f}-{jobs[0]['finished_s']:.1f} s; "
        f"submitted {sub[0]:.1f}-{sub[-1]:.1f} s, started {min(j['started_s'] for j in jobs):.1f}-{max(j['started_s'] for j in jobs):.1f} s, "
        f"NVRTC {c.get('nvrtc_s', 0):.1f} s")
    print(f"{f.stem[5:]:<14} {d['common_setup_s']['static_fields']:13.1f} {s['device_grid']:11.1f} {s['construct']:9.1f} "
          f"{s['compile']:8.1f} {s['first_calls']:11.1f} {total:7.1f} {b['dycore_step_ms']:8.1f}  {last}")
EOF
